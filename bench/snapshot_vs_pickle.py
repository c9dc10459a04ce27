#!/usr/bin/env python3
"""PyTorch snapshot import: gpumem vs Python's pickle.load, side by side on the same files.

usage: bench/snapshot_vs_pickle.py [--bench build/dev/bench/snapshot_import_bench] [--baseline OTHER_BENCH]
                                   [--iterations N (40)] [--rounds R (3)] [--wall] [--json] [files…]

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

--json compares the JSON twins instead: each pickle is loaded here and written with json.dump (the
same dict, as a user who saved the snapshot as JSON has it) to a temporary folder, removed afterwards;
gpumem imports the twin (simdjson, PickleDocument::fromJsonText) and Python times json.load of the same
twin, in the same rounds. The "parse" column is then gpumem's reading of the JSON into its document.

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
import shutil
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def python_load_ms(path, iterations, clock, load=pickle.load):
    best = math.inf
    for _ in range(iterations):
        start = clock()
        with open(path, "rb") as f:
            load(f)  # the baseline users run; these public files need no globals
        best = min(best, (clock() - start) * 1000)
    return best


def write_json_twins(files, folder):
    """The JSON twin of each pickle (json.dump of the same dict) in `folder`; returns their paths."""
    twins = []
    for i, path in enumerate(files):
        with open(path, "rb") as f:
            data = pickle.load(f)
        name = os.path.basename(os.path.dirname(path)) + "_" + os.path.splitext(os.path.basename(path))[0]
        twin = os.path.join(folder, f"{i:02d}_{name}.json")
        with open(twin, "w") as out:
            json.dump(data, out)
        twins.append(twin)
    return twins


def run_bench(bench, path, iterations, kind):
    out = subprocess.run([bench, path, str(iterations)], check=True, capture_output=True, text=True).stdout
    g = json.loads(out)
    # import + pairing (Trace::allocations()): absent from a program older than that figure
    return g["events"], g[f"import_best_{kind}_ms"], g[f"parse_best_{kind}_ms"], g.get(f"import_pair_best_{kind}_ms", math.nan)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default=os.path.join(ROOT, "build/dev/bench/snapshot_import_bench"))
    ap.add_argument("--baseline", help="another snapshot_import_bench to compare with (e.g. before a change)")
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3, help="repeat everything, keep each program's best (one round is noisy on a busy machine)")
    ap.add_argument("--wall", action="store_true", help="compare wall time instead of thread CPU time")
    ap.add_argument("--json", action="store_true",
                    help="time the JSON twins (json.dump of each pickle, in a temp folder) against json.load")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    files = args.files or sorted(glob.glob(os.path.join(ROOT, "../shared/traces/public/*/*.pickle")))
    if not files:
        raise SystemExit("no snapshot files given and none found in ../shared/traces/public")
    if not args.json:
        return compare(args, files, pickle.load, "pickle.load", lambda path: path)
    folder = tempfile.mkdtemp(prefix="gpumem_json_twins_")
    try:
        twins = write_json_twins(files, folder)
        names = dict(zip(twins, files))
        return compare(args, twins, json.load, "json.load", lambda twin: names[twin] + " (JSON twin)")
    finally:
        shutil.rmtree(folder)


def compare(args, files, load, load_name, label):
    kind = "wall" if args.wall else "cpu"
    clock = time.perf_counter if args.wall else time.thread_time
    best = {}  # (path, program) -> [import, parse, import + pairing]
    events = {}
    for _ in range(max(1, args.rounds)):
        for path in files:
            programs = [("new", args.bench)] + ([("base", args.baseline)] if args.baseline else [])
            for name, bench in programs:
                n, imp, parse, pair = run_bench(bench, path, args.iterations, kind)
                events[path] = n
                old = best.get((path, name), [math.inf, math.inf, math.inf])
                best[(path, name)] = [min(old[0], imp), min(old[1], parse), min(old[2], pair)]
            py = python_load_ms(path, args.iterations, clock, load)
            best[(path, "py")] = min(best.get((path, "py"), math.inf), py)

    head = (f"{'file':50} {'MiB':>5} {'events':>6} {'import':>9} {'parse':>8} {load_name:>11} {'ratio':>6}"
            f" {'p.ratio':>7}")
    if args.baseline:
        head += f" {'baseline':>9} {'b.ratio':>7} {'b.parse':>8}"
    print(head)
    ratios, base_ratios = [], []
    for path in files:
        imp, parse, _ = best[(path, "new")]
        py = best[(path, "py")]
        ratio = py / imp
        ratios.append(ratio)
        name = label(path)
        if not args.files:
            name = os.path.relpath(name, os.path.join(ROOT, "../shared/traces/public"))
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
    print(f"geometric mean ratio ({load_name} time / gpumem import time): {geo(ratios):.1f}x; min {min(ratios):.1f}x")
    print(f"p.ratio: {load_name} time / gpumem's {'JSON reading' if args.json else 'unpickling'} alone "
          "(no pre-window state, no Trace)")
    if args.baseline:
        print(f"baseline: geometric mean {geo(base_ratios):.1f}x; min {min(base_ratios):.1f}x; "
              "b.parse: the baseline's unpickling alone")
        # This build against the baseline, same rounds: the import, and the import plus the alloc → free
        # pairing every analysis starts with (done on first use, not by the import).
        print(f"{'file':50} {'import after/before':>19} {'+pairing after/before':>21}")
        for path in files:
            new, base = best[(path, "new")], best[(path, "base")]
            name = label(path) if args.files else os.path.relpath(label(path), os.path.join(ROOT, "../shared/traces/public"))
            print(f"{name[:50]:50} {new[0] / base[0]:19.3f} {new[2] / base[2]:21.3f}")


if __name__ == "__main__":
    main()
