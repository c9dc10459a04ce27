#!/usr/bin/env python3
"""A small PyTorch training run for the GPU check of the tracer on a real framework
(docs/gpu-check.md "PyTorch runs"; ../shared/docs/cupti.md §7.3 runs A and C).

Trains a 4-block MLP (d 1024, hidden 4096, fp32, AdamW) for --steps steps on batches whose size
changes every step (64…512 rows, seeded), so the caching allocator splits, reuses and grows its
segments as real jobs do. PyTorch records its own view at the same time: the memory history
(torch.cuda.memory._record_memory_history) is dumped as a snapshot, and memory_stats() is written
at the end. The tracer's trace of the same process (`gpumem record`) can so be compared with what
the allocator itself says: its cudaMalloc'd segments (native) or its cuMemMap'd pages
(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), and its reserved peak.

  torch_run.py --out DIR [--steps N] [--dry-run]

Writes DIR/snapshot.pickle, DIR/stats.json (memory_stats(), the per-step allocated/reserved, the
torch and CUDA versions, the allocator settings). --dry-run runs 2 tiny steps on the CPU with no
snapshot, to catch mistakes in this script where no GPU exists. Exit status: 0 ran, 1 failed
(no CUDA device without --dry-run, or the loss did not go down).
"""
import argparse
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    import torch
    from torch import nn

    cuda = torch.cuda.is_available() and not args.dry_run
    if not cuda and not args.dry_run:
        print("torch_run: no CUDA device (torch %s)" % torch.__version__, file=sys.stderr)
        return 1
    device = torch.device("cuda" if cuda else "cpu")
    d, hidden, blocks = (1024, 4096, 4) if cuda else (32, 64, 2)
    steps = args.steps if cuda else 2
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.up = nn.Linear(d, hidden)
            self.act = nn.GELU()
            self.down = nn.Linear(hidden, d)

        def forward(self, x):
            return x + self.down(self.act(self.up(self.norm(x))))

    model = nn.Sequential(*[Block() for _ in range(blocks)], nn.Linear(d, 1)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if cuda:
        torch.cuda.memory._record_memory_history(max_entries=200000)

    gen = torch.Generator().manual_seed(1)
    rows = [int(torch.randint(64, 513, (1,), generator=gen)) for _ in range(steps)]
    per_step = []
    losses = []
    for step, n in enumerate(rows):
        x = torch.randn(n, d, generator=gen).to(device)
        y = x.sum(dim=1, keepdim=True) * 0.01
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach().cpu()))
        if cuda:
            torch.cuda.synchronize()
            per_step.append({"step": step, "rows": n, "ns": time.time_ns(),
                             "allocated": torch.cuda.memory_allocated(),
                             "reserved": torch.cuda.memory_reserved()})
    stats = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "rows": rows,
        "losses": losses,
        "per_step": per_step,
    }
    if cuda:
        torch.cuda.memory._dump_snapshot(os.path.join(args.out, "snapshot.pickle"))
        torch.cuda.memory._record_memory_history(enabled=None)
        stats["device"] = torch.cuda.get_device_name(0)
        stats["memory_stats"] = {k: v for k, v in torch.cuda.memory_stats().items()
                                 if isinstance(v, (int, float))}
    with open(os.path.join(args.out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    print("torch_run: %d steps of %s rows on %s, loss %.4f -> %.4f"
          % (steps, rows, device, losses[0], losses[-1]))
    if len(losses) > 2 and not losses[-1] < losses[0]:
        print("torch_run: the loss did not go down", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
