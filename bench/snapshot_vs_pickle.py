#!/usr/bin/env python3
"""PyTorch snapshot import: gpumem vs Python's pickle.load, side by side on the same files.

usage: bench/snapshot_vs_pickle.py [--bench build/dev/bench/snapshot_import_bench] [--baseline OTHER_BENCH]
                                   [--iterations N (40)] [--rounds R (3)] [--wall] [files…]

Use a Release build for figures worth quoting (the ci preset: build/ci/bench/snapshot_import_bench).

Without files it uses the snapshots of ../shared/traces/public (SOURCES.md §3). For each file it runs
the C++ program (the whole gpumem import: unpickle, rebuild the pre-window state, build the Trace; and
the unpickling alone) and times pickle.load of the same file in this process, best of N each, as
CPU time of the running thread (user + system, so page faults count; other load on the machine
disturbs it far less than wall time; --wall uses wall time instead). The ratio is Python's best time
over gpumem's best import time (higher = gpumem faster); p.ratio is the same over the unpickling
alone. Note: pickle.load only builds Python objects; gpumem's import does that and then rebuilds the
pre-window state and builds the Trace.

What is timed on both sides: reading the file and building the result, in the running process (no
process start: for the 72 KB snapshot that would dominate both), best of N, so the first, cold
iteration and other processes' bursts do not count.

--baseline runs a second build of snapshot_import_bench (e.g. the program before a change) in the same
rounds and prints its import time and ratio beside the first. --rounds repeats everything R times,
alternating the programs and Python, and keeps each one's best: on a loaded machine the rounds see
the same load, so the before/after comparison stays fair.
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


def run_bench(bench, path, iterations, kind):
    out = subprocess.run([bench, path, str(iterations)], check=True, capture_output=True, text=True).stdout
    g = json.loads(out)
    return g["events"], g[f"import_best_{kind}_ms"], g[f"parse_best_{kind}_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default=os.path.join(ROOT, "build/dev/bench/snapshot_import_bench"))
    ap.add_argument("--baseline", help="another snapshot_import_bench to compare with (e.g. before a change)")
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3, help="repeat everything, keep each program's best (one round is noisy on a busy machine)")
    ap.add_argument("--wall", action="store_true", help="compare wall time instead of thread CPU time")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    files = args.files or sorted(glob.glob(os.path.join(ROOT, "../shared/traces/public/*/*.pickle")))
    if not files:
        raise SystemExit("no snapshot files given and none found in ../shared/traces/public")
    kind = "wall" if args.wall else "cpu"
    clock = time.perf_counter if args.wall else time.thread_time
    best = {}  # (path, program) -> [import, parse]
    events = {}
    for _ in range(max(1, args.rounds)):
        for path in files:
            programs = [("new", args.bench)] + ([("base", args.baseline)] if args.baseline else [])
            for name, bench in programs:
                n, imp, parse = run_bench(bench, path, args.iterations, kind)
                events[path] = n
                old = best.get((path, name), [math.inf, math.inf])
                best[(path, name)] = [min(old[0], imp), min(old[1], parse)]
            py = python_load_ms(path, args.iterations, clock)
            best[(path, "py")] = min(best.get((path, "py"), math.inf), py)

    head = (f"{'file':50} {'MiB':>5} {'events':>6} {'import':>9} {'parse':>8} {'pickle.load':>11} {'ratio':>6}"
            f" {'p.ratio':>7}")
    if args.baseline:
        head += f" {'baseline':>9} {'b.ratio':>7} {'b.parse':>8}"
    print(head)
    ratios, base_ratios = [], []
    for path in files:
        imp, parse = best[(path, "new")]
        py = best[(path, "py")]
        ratio = py / imp
        ratios.append(ratio)
        name = os.path.relpath(path, os.path.join(ROOT, "../shared/traces/public")) if not args.files else path
        line = (f"{name[:50]:50} {os.path.getsize(path) / 2**20:5.2f} {events[path]:6d} {imp:6.2f} ms "
                f"{parse:5.2f} ms {py:8.2f} ms {ratio:5.1f}x {py / parse:6.1f}x")
        if args.baseline:
            b_imp = best[(path, "base")][0]
            base_ratios.append(py / b_imp)
            line += f" {b_imp:6.2f} ms {py / b_imp:6.1f}x {best[(path, 'base')][1]:5.2f} ms"
        print(line)

    def geo(rs):
        return math.exp(sum(math.log(r) for r in rs) / len(rs))

    print(f"times: best of {args.iterations} iterations x {max(1, args.rounds)} rounds, "
          f"{'wall' if args.wall else 'thread CPU'} time")
    print(f"geometric mean ratio (pickle.load time / gpumem import time): {geo(ratios):.1f}x; min {min(ratios):.1f}x")
    print("p.ratio: pickle.load time / gpumem's unpickling alone (no pre-window state, no Trace)")
    if args.baseline:
        print(f"baseline: geometric mean {geo(base_ratios):.1f}x; min {min(base_ratios):.1f}x; "
              "b.parse: the baseline's unpickling alone")


if __name__ == "__main__":
    main()
