#!/usr/bin/env python3
"""Kineto .json.gz import: gpumem vs Python's json.load, side by side on the same files, one core.

    python3 bench/kineto_vs_python.py [--bench build/dev/bench/bench_kineto_import] [--repeat 5]
                                      [--rounds 2] [--wall] [--baseline OTHER_BENCH] [files…]

Python side: json.load(gzip.open(f)), best of N (the minimum a Python tool such as HTA or
TraceLens pays before any analysis). gpumem side: gpumem::loadTrace (gunzip, parse, sort, pair the
memory events, scopes, counters), best of N. Defaults to every Kineto file in ../shared/traces/public.

Both sides are timed as CPU time of the running thread (user + system; Python's time.thread_time,
the bench's CLOCK_THREAD_CPUTIME_ID), which other load on the machine (a build on the other core)
disturbs far less than wall time; --wall compares wall times instead. Both are single-threaded.
--baseline runs a second build of bench_kineto_import (e.g. the program before a change) in the same
rounds and prints its load time and the ratio of the two gpumem loads (after/before) beside the rest.
The two programs alternate for --rounds rounds and each keeps its best, so a slow spell on the
machine falls on both. MB/s is uncompressed JSON per second of the same clock.
"""
import argparse, gzip, json, os, subprocess, sys, time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..", "shared", "traces", "public")
default_files = ["hta/df_index_resolver.json.gz", "kineto-tb-plugin/worker0.1623143089861.pt.trace.json.gz",
                 "tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz",
                 "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
                 "tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
                 "tracelens/mi300-normalization/normalization_layer_test.json.gz",
                 "tracelens/mi300-vllm-graph-capture/graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"]

ap = argparse.ArgumentParser()
ap.add_argument("--bench", default=os.path.join(here, "..", "build", "dev", "bench", "bench_kineto_import"))
ap.add_argument("--repeat", type=int, default=5)
ap.add_argument("--rounds", type=int, default=2)
ap.add_argument("--wall", action="store_true", help="compare wall times instead of thread CPU times")
ap.add_argument("--baseline", help="a second bench_kineto_import to time in the same rounds (before/after)")
ap.add_argument("files", nargs="*")
a = ap.parse_args()
files = a.files or [os.path.join(root, f) for f in default_files if os.path.exists(os.path.join(root, f))]
if not files:
    sys.exit("no input files (the public traces are absent)")
clock = time.perf_counter if a.wall else time.thread_time
load_key, gunzip_key = ("load_s", "read_gunzip_s") if a.wall else ("load_cpu_s", "read_gunzip_cpu_s")


def py_best(path):
    best = float("inf")
    for _ in range(a.repeat):
        t0 = clock()
        with gzip.open(path) as f:
            json.load(f)
        best = min(best, clock() - t0)
    return best


# taskset pins both sides to one core so the ratio is per core.
pin = ["taskset", "-c", "0"] if subprocess.run(["which", "taskset"], capture_output=True).returncode == 0 else []
if pin and hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {0})
gm = {}  # path -> best row
base = {}  # path -> best row of --baseline
py = {}  # path -> best seconds


def run_bench(program, best):
    out = subprocess.run(pin + [program, "--repeat", str(a.repeat)] + files, check=True, capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        if line.strip():
            r = json.loads(line)
            if r["file"] not in best or r[load_key] < best[r["file"]][load_key]:
                best[r["file"]] = r


for _ in range(max(1, a.rounds)):
    run_bench(a.bench, gm)
    if a.baseline:
        run_bench(a.baseline, base)
    for path in files:
        py[path] = min(py.get(path, float("inf")), py_best(path))

print(f"{'file':58} {'JSON MB':>8} {'python s':>9} {'gpumem s':>9} {'ratio':>6} {'gpumem MB/s':>11} {'gunzip s':>9}")
tot_py = tot_gm = tot_mb = 0.0
ratios = []
for path in files:
    r = gm[path]
    p = py[path]
    mb = r["json_bytes"] / 1e6
    tot_py += p; tot_gm += r[load_key]; tot_mb += mb
    ratios.append(p / r[load_key])
    print(f"{os.path.relpath(r['file'], root)[:58]:58} {mb:8.1f} {p:9.3f} {r[load_key]:9.3f} {p / r[load_key]:5.1f}x "
          f"{mb / r[load_key]:11.0f} {r[gunzip_key]:9.3f}")
print(f"{'all files':58} {tot_mb:8.1f} {tot_py:9.3f} {tot_gm:9.3f} {tot_py / tot_gm:5.1f}x {tot_mb / tot_gm:11.0f}")
if a.baseline:
    # After/before for the load, and for the load plus the alloc → free pairing every analysis starts with
    # (Trace::allocations(), done on first use; "load_pair…", absent from an older program).
    pair_key = load_key.replace("load", "load_pair")
    print(f"{'file':58} {'baseline s':>10} {'gpumem s':>9} {'after/before':>12} {'+pairing after/before':>21}")
    for path in files:
        pair = gm[path].get(pair_key, float("nan")) / base[path].get(pair_key, float("nan"))
        print(f"{os.path.relpath(path, root)[:58]:58} {base[path][load_key]:10.3f} {gm[path][load_key]:9.3f} "
              f"{gm[path][load_key] / base[path][load_key]:12.3f} {pair:21.3f}")
    tot_base = sum(base[p][load_key] for p in files)
    tot_pair = sum(gm[p].get(pair_key, float("nan")) for p in files) / sum(base[p].get(pair_key, float("nan")) for p in files)
    print(f"{'all files':58} {tot_base:10.3f} {tot_gm:9.3f} {tot_gm / tot_base:12.3f} {tot_pair:21.3f}")
print(f"times: best of {a.repeat} runs x {max(1, a.rounds)} rounds, "
      f"{'wall time' if a.wall else 'thread CPU time'}, both sides pinned to core 0; min ratio {min(ratios):.1f}x")
