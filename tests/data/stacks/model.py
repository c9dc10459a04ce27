import torch


class Block(torch.nn.Module):
    def forward(self, x):
        h = torch.relu(self.up(x))
        return self.down(h)


def train(model, x):
    y = model(x)
    y.sum().backward()
