#!/usr/bin/env python3
"""Writes traces/mlp_train.jsonl: a deterministic, synthetic trace of a small MLP training loop.

It models what PyTorch's caching allocator would be asked for while training a 4-layer MLP
(hidden 4096, batch 512, fp32, Adam) for 4 steps on one GPU: parameters at start, per-step
activations in forward, gradients in backward, Adam's exp_avg/exp_avg_sq created in the first
optimizer step, temporaries freed at once. Request sizes are real tensor sizes; block sizes are
rounded as PyTorch rounds them (512 B, c10/cuda/CUDACachingAllocator.cpp round_size); addresses
come from a simple first-fit placement inside 2 MiB (small pool) and 20 MiB-or-larger (large pool)
segments whose cudaMalloc/cudaFree are recorded as segment events. Module scopes mirror
nn.Module paths and each step is a ProfilerStep#N annotation. It is NOT a GPU recording; the
project's own recordings will be added by the tracer's GPU check.

Usage: scripts/make_sample_trace.py OUT.jsonl   (then `gpumem convert OUT.jsonl -o …` canonicalizes)
"""
import json
import sys

MiB = 1 << 20
KIB = 1024


def round_size(n):
    return 512 if n < 512 else (n + 511) // 512 * 512


class Pool:
    """First-fit placement of blocks inside segments, growing segments like PyTorch's pools."""

    def __init__(self, emit_segment, base):
        self.segments = []  # [address, size, {offset: size} of live blocks]
        self.emit_segment = emit_segment
        self.next = base

    def alloc(self, t, size):
        small = size <= MiB
        for seg in self.segments:
            if (seg[1] == 2 * MiB) != small:
                continue
            off = self._fit(seg, size)
            if off is not None:
                seg[2][off] = size
                return seg[0] + off
        seg_size = 2 * MiB if small else (20 * MiB if size < 10 * MiB else (size + 2 * MiB - 1) // (2 * MiB) * 2 * MiB)
        seg = [self.next, seg_size, {0: size}]
        self.next += seg_size + 2 * MiB
        self.segments.append(seg)
        self.emit_segment(t, "segment_alloc", seg[0], seg_size)
        return seg[0]

    def _fit(self, seg, size):
        pos = 0
        for off in sorted(seg[2]):
            if off - pos >= size:
                return pos
            pos = off + seg[2][off]
        return pos if seg[1] - pos >= size else None

    def free(self, addr):
        for seg in self.segments:
            if seg[0] <= addr < seg[0] + seg[1]:
                del seg[2][addr - seg[0]]
                return
        raise KeyError(addr)


def main(out_path):
    records = []
    t = [1_700_000_000_000_000_000]
    seq = [0]

    def tick(ns):
        t[0] += ns

    def mem(kind, addr, size, requested=0, scope=0, category=None, stream=0):
        r = {"type": "mem", "t": t[0], "kind": kind, "stream": stream, "addr": addr, "size": size}
        if requested:
            r["requested"] = requested
        if scope:
            r["scope"] = scope
        if category:
            r["category"] = category
        records.append(r)

    pool = Pool(lambda time, kind, a, s: mem(kind, a, s), 0x7F0000000000)
    scopes = [("nn.Module: MLP", 0)]
    layers = []
    for i in range(4):
        scopes.append((f"nn.Module: MLP.layers.{i}", 1))
        layers.append(len(scopes))
    scopes.append(("Optimizer.step#Adam.step", 0))
    opt_scope = len(scopes)
    live = {}

    def alloc(name, nbytes, scope, category):
        tick(3_000)
        size = round_size(nbytes)
        addr = pool.alloc(t[0], size)
        mem("alloc", addr, size, nbytes, scope, category)
        live[name] = (addr, size, scope, category)

    def free(name):
        tick(2_000)
        addr, size, scope, category = live.pop(name)
        mem("free", addr, size, 0, scope, category)
        pool.free(addr)

    hidden, batch, inp, out = 4096, 512, 1024, 10
    dims = [(inp, hidden), (hidden, hidden), (hidden, hidden), (hidden, out)]
    for i, (a, b) in enumerate(dims):
        alloc(f"w{i}", a * b * 4, layers[i], "parameter")
        alloc(f"b{i}", b * 4, layers[i], "parameter")
    kernels, annotations = [], []
    for step in range(4):
        step_start = t[0]
        alloc("x", batch * inp * 4, 1, "input")
        prev = "x"
        for i, (a, b) in enumerate(dims):
            alloc(f"act{i}", batch * b * 4, layers[i], "activation")
            kernels.append({"type": "kernel", "start": t[0] + 1000, "end": t[0] + 60_000, "name": f"sgemm_fwd_{i}", "correlation": len(kernels) + 1})
            tick(60_000)
            prev = f"act{i}"
        alloc("loss", 512, 1, "activation")
        free("x")
        for i in reversed(range(4)):
            alloc(f"gact{i}", batch * dims[i][1] * 4, layers[i], "autograd_detail")
            g = f"gw{i}"
            if g not in live:
                alloc(g, dims[i][0] * dims[i][1] * 4, layers[i], "gradient")
                alloc(f"gb{i}", dims[i][1] * 4, layers[i], "gradient")
            kernels.append({"type": "kernel", "start": t[0] + 1000, "end": t[0] + 120_000, "name": f"sgemm_bwd_{i}", "correlation": len(kernels) + 1})
            tick(120_000)
            free(f"act{i}")
            free(f"gact{i}")
        free("loss")
        for i, (a, b) in enumerate(dims):
            if f"m{i}" not in live:
                alloc(f"m{i}", a * b * 4, opt_scope, "optimizer_state")
                alloc(f"v{i}", a * b * 4, opt_scope, "optimizer_state")
            alloc(f"tmp{i}", a * b * 4, opt_scope, "temporary")
            kernels.append({"type": "kernel", "start": t[0] + 1000, "end": t[0] + 40_000, "name": f"adam_update_{i}", "correlation": len(kernels) + 1})
            tick(40_000)
            free(f"tmp{i}")
        for i in range(4):
            free(f"gw{i}")
            free(f"gb{i}")
        tick(10_000)
        annotations.append({"type": "annotation", "start": step_start, "end": t[0], "name": f"ProfilerStep#{step}", "kind": "step"})
        tick(50_000)

    header = {"format": "gpumem-jsonl", "version": 1, "metadata": {
        "description": "synthetic 4-layer MLP training loop (hidden 4096, batch 512, fp32, Adam), 4 steps; see scripts/make_sample_trace.py",
        "source_format": "synthetic", "tool": "scripts/make_sample_trace.py", "tool_version": "1"}}
    lines = [header,
             {"type": "device", "id": 0, "kind": "cuda", "ordinal": 0, "name": "Simulated GPU", "total_memory": 16 * 1024 * MiB},
             {"type": "stream", "id": 0, "device": 0, "handle": 0}]
    for i, (name, parent) in enumerate(scopes, start=1):
        lines.append({"type": "scope", "id": i, "parent": parent, "name": name, "kind": "range" if "Optimizer" in name else "module"})
    lines += records + kernels + annotations
    with open(out_path, "w") as f:
        for r in lines:
            f.write(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "traces/mlp_train.jsonl")
