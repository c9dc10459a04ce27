"""Run by tracer_annotate_test.cpp: a small model's forward and backward on CPU with the module
helper installed by sitecustomize (PYTHONPATH=tracer/python) and the NVTX calls recorded by a
stand-in. Prints one line per call: "push <thread> <name>" or "pop <thread>". Exits 77 when torch
is missing (the test skips)."""
import sys
import threading

try:
    import torch
except ImportError:
    print("torch is not installed for", sys.executable)
    sys.exit(77)

import gpumem_annotate

if not gpumem_annotate.installed():
    print("sitecustomize did not install the module hooks")
    sys.exit(1)

calls = []
lock = threading.Lock()


def push(name):
    with lock:
        calls.append("push %d %s" % (threading.get_ident(), name))


def pop():
    with lock:
        calls.append("pop %d" % threading.get_ident())


gpumem_annotate.set_backend(push, pop)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.act = torch.nn.ReLU(inplace=True)

    def forward(self, x):
        return self.act(self.fc(x))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Sequential(Block(), Block())
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.encoder(x))


torch.manual_seed(0)
model = Net()
loss = model(torch.randn(4, 8)).sum()
calls.append("mark backward")
loss.backward()
for c in calls:
    print(c)
