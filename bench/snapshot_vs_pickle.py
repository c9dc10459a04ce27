#!/usr/bin/env python3
"""PyTorch snapshot import: gpumem vs Python's pickle.load, side by side on the same files.

usage: bench/snapshot_vs_pickle.py [--bench build/dev/bench/snapshot_import_bench] [--iterations N] [files…]

Without files it uses the snapshots of ../shared/traces/public (SOURCES.md §3). For each file it runs
the C++ program (the whole gpumem import: unpickle, rebuild the pre-window state, build the Trace; and
the unpickling alone) and times pickle.load of the same file in this process, best of N each, as
CPU time of the running thread (user + system, so page faults count; other load on the machine
disturbs it far less than wall time; --wall uses wall time instead). The ratio is Python's best time
over gpumem's best import time (higher = gpumem faster). Note: pickle.load only builds Python
objects; gpumem's import does that and then rebuilds the pre-window state and builds the Trace.
"""
import argparse
import glob
import json
import math
import os
import pickle
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def python_load_ms(path, iterations, clock):
    best = math.inf
    for _ in range(iterations):
        start = clock()
        with open(path, "rb") as f:
            pickle.load(f)  # the baseline users run; these public files need no globals
        best = min(best, (clock() - start) * 1000)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default=os.path.join(ROOT, "build/dev/bench/snapshot_import_bench"))
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--wall", action="store_true", help="compare wall time instead of thread CPU time")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    files = args.files or sorted(glob.glob(os.path.join(ROOT, "../shared/traces/public/*/*.pickle")))
    if not files:
        raise SystemExit("no snapshot files given and none found in ../shared/traces/public")
    print(f"{'file':58} {'MiB':>6} {'events':>7} {'gpumem import':>13} {'gpumem parse':>12} {'pickle.load':>11} {'ratio':>6}")
    ratios = []
    for path in files:
        out = subprocess.run([args.bench, path, str(args.iterations)], check=True, capture_output=True, text=True).stdout
        g = json.loads(out)
        kind = "wall" if args.wall else "cpu"
        py = python_load_ms(path, args.iterations, time.perf_counter if args.wall else time.thread_time)
        g["import_best_ms"], g["parse_best_ms"] = g[f"import_best_{kind}_ms"], g[f"parse_best_{kind}_ms"]
        ratio = py / g["import_best_ms"]
        ratios.append(ratio)
        name = os.path.relpath(path, os.path.join(ROOT, "../shared/traces/public")) if not args.files else path
        print(f"{name[:58]:58} {os.path.getsize(path) / 2**20:6.2f} {g['events']:7d} {g['import_best_ms']:10.2f} ms "
              f"{g['parse_best_ms']:9.2f} ms {py:8.2f} ms {ratio:5.1f}x")
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"times: best of {args.iterations}, {'wall' if args.wall else 'thread CPU'} time")
    print(f"geometric mean ratio (pickle.load time / gpumem import time): {geo:.1f}x; min {min(ratios):.1f}x")


if __name__ == "__main__":
    main()
