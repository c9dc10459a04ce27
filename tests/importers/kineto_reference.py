#!/usr/bin/env python3
"""Independent reference figures for tests/importers/kineto_importer_test.cpp and
memory_timeline_importer_test.cpp, computed with nothing but Python's json/gzip over the public traces.

    python3 tests/importers/kineto_reference.py ../shared/traces/public

It does not share code or rules with the C++ importer beyond SOURCES.md §A/§B: it sorts [memory] events
by (ts, Ev Idx), pairs by (device, Addr), reads peaks of the recorded counters, and finds each CUDA
allocation's innermost `nn.Module:` python_function by brute-force interval containment (O(n·m)).
"""
import gzip, json, sys, collections
from decimal import Decimal

root = sys.argv[1] if len(sys.argv) > 1 else "../shared/traces/public"
KINETO = ["hta/df_index_resolver.json.gz", "kineto-tb-plugin/worker0.1623143089861.pt.trace.json.gz",
          "tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz",
          "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
          "tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
          "tracelens/mi300-normalization/normalization_layer_test.json.gz",
          "tracelens/mi300-vllm-graph-capture/graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"]

def ns(x):  # µs (int or float text) -> ns exactly, via Decimal of the repr
    return int((Decimal(x) * 1000).to_integral_value())

def kineto(path):
    raw = gzip.open(f"{root}/{path}").read()
    d = json.loads(raw, parse_float=Decimal)  # Decimal keeps the ns digits exact
    base = int(d.get("baseTimeNanoseconds", 0))
    ev = d["traceEvents"]
    print(f"== {path}  ({len(raw):,} bytes uncompressed, {len(ev):,} events)")
    mem = [(i, e) for i, e in enumerate(ev) if e.get("name") == "[memory]" and e.get("ph") == "i"]
    def key(ie):
        i, e = ie
        return (Decimal(e["ts"]), e["args"].get("Ev Idx", i))
    moved = sorted(range(len(mem)), key=lambda j: key(mem[j]))
    print(f"  [memory] events moved by the (ts, Ev Idx) sort: {sum(1 for j, o in enumerate(moved) if j != o)}")
    mem.sort(key=key)
    dev = lambda a: (a["Device Type"], a["Device Id"])
    counts = collections.Counter()
    for _, e in mem:
        counts[(dev(e["args"]), "alloc" if e["args"]["Bytes"] > 0 else "free")] += 1
    print("  memory by (type,id):", dict(counts))
    if mem and "Addr" in mem[0][1]["args"]:
        live = {}; paired = unmatched = 0
        for _, e in mem:
            a = e["args"]; k = (dev(a), a["Addr"])
            if a["Bytes"] > 0: live[k] = e
            elif k in live: del live[k]; paired += 1
            else: unmatched += 1
        liveby = collections.Counter(k[0] for k in live)
        print(f"  paired {paired}, unmatched frees {unmatched}, live at end {dict(liveby)}")
        for dv in sorted({dev(e['args']) for _, e in mem}):
            ta = max((e["args"].get("Total Allocated", 0) for _, e in mem if dev(e["args"]) == dv), default=0)
            tr = max((e["args"].get("Total Reserved", 0) for _, e in mem if dev(e["args"]) == dv), default=0)
            print(f"  {dv}: peak Total Allocated {ta:,}  peak Total Reserved {tr:,}")
    else:
        for dv in sorted({dev(e['args']) for _, e in mem}):
            s = peak = 0
            for _, e in mem:
                if dev(e["args"]) == dv:
                    s += e["args"]["Bytes"]; peak = max(peak, s)
            print(f"  {dv}: running sum of Bytes peaks at {peak:,}, ends at {s:,}")
    kern = [e for e in ev if str(e.get("cat", "")).lower() == "kernel"]
    streams = collections.Counter((e["args"].get("device", e["pid"]), e["args"].get("stream", e["tid"])) for e in kern)
    print(f"  kernels {len(kern)}, by (device, stream) {dict(streams)}")
    cs = [e for e in kern if "correlation" in e.get("args", {})]
    if cs: print(f"  first kernel by ts: corr {min(cs, key=lambda e: Decimal(e['ts']))['args']['correlation']}")
    ua = [e for e in ev if e.get("cat") == "user_annotation" and not e["name"].startswith("ProfilerStep#")]
    steps = [e for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
             and e.get("cat") in ("user_annotation", "cpu_op", "Operator")]
    print(f"  user_annotation ranges {len(ua)}, ProfilerStep steps {len(steps)}")
    mods = [e for e in ev if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")]
    print(f"  nn.Module python_functions {len(mods)}")
    if mods:
        gpu_allocs = [e for _, e in mem if e["args"]["Device Type"] in (1, 6) and e["args"]["Bytes"] > 0]
        def chain(e):
            t = Decimal(e["ts"])
            c = [m for m in mods if m["pid"] == e["pid"] and m["tid"] == e["tid"]
                 and Decimal(m["ts"]) <= t <= Decimal(m["ts"]) + Decimal(m.get("dur", 0))]
            c.sort(key=lambda m: (Decimal(m["ts"]), -Decimal(m.get("dur", 0))))
            return [m["name"][len("nn.Module: "):] for m in c]
        without = [e for e in gpu_allocs if not chain(e)]
        print(f"  GPU allocations {len(gpu_allocs)}, without an enclosing nn.Module {len(without)}, "
              f"their bytes {sum(e['args']['Bytes'] for e in without):,}, Ev Idx {[e['args'].get('Ev Idx') for e in without][:5]}…")
        picks = [0, len(gpu_allocs) // 2, len(gpu_allocs) - 1]
        biggest = max(range(len(gpu_allocs)), key=lambda i: gpu_allocs[i]["args"]["Bytes"])
        pyf = [e for e in ev if e.get("cat") == "python_function" and not e["name"].startswith("nn.Module: ")]
        def innermost_frame(e):
            t = Decimal(e["ts"])
            c = [m for m in pyf if m["pid"] == e["pid"] and m["tid"] == e["tid"]
                 and Decimal(m["ts"]) <= t <= Decimal(m["ts"]) + Decimal(m.get("dur", 0))]
            return max(c, key=lambda m: (Decimal(m["ts"]), -Decimal(m.get("dur", 0))))["name"] if c else None
        for i in picks + [biggest]:
            e = gpu_allocs[i]
            print(f"   alloc #{i} Ev Idx {e['args'].get('Ev Idx')} t={base + ns(e['ts'])} bytes={e['args']['Bytes']} "
                  f"addr={e['args']['Addr']} modules={' / '.join(chain(e))}")
            print(f"     innermost python frame: {innermost_frame(e)}")

def timeline(path):
    recs = json.load(gzip.open(f"{root}/{path}"))
    print(f"== {path}  {len(recs):,} records")
    print("  by action:", dict(collections.Counter(r[1] for r in recs)))
    names = ["parameter", "optimizer_state", "input", "temporary", "activation", "gradient", "autograd_detail", "unknown"]
    print("  by category:", {names[c]: n for c, n in sorted(collections.Counter(r[3] for r in recs).items())})
    s = peak = 0; cat = [0] * 8; atpeak = None; tpeak = None
    for i, r in enumerate(recs):
        s += r[2]; cat[r[3]] += r[2]
        # the peak is judged after all records of one timestamp (an INCREMENT_VERSION pair shares it)
        if (i + 1 == len(recs) or recs[i + 1][0] != r[0]) and s > peak:
            peak, atpeak, tpeak = s, list(cat), r[0]
    print(f"  running sum peaks at {peak:,} (t={tpeak}), ends at {s:,}")
    print("  by category at the peak:", dict(zip(names, atpeak)))
    print(f"  first real ts {min(r[0] for r in recs if r[0] >= 0)}, last {max(r[0] for r in recs)}")

for p in KINETO:
    kineto(p)
timeline("hta/memory_timeline.raw.gz")
