#!/usr/bin/env python3
"""The checker of scripts/gpu-check.sh (docs/gpu-check.md). Python 3 standard library only.

It compares what tests/gpu/gpu_check.cu says it did (its expected-allocation list, one JSON object
a line) with the trace `gpumem record` made of it (read as `gpumem convert --to jsonl`, format:
docs/trace-format.md §10), and prints one line per check: PASS, FAIL or SKIP with the evidence.

  check_trace.py check --expected RUN.jsonl --trace TRACE.jsonl [--plan PLAN.jsonl]
                       [--baseline BASELINE.jsonl] [--max-overhead 1.5] [--summary OUT.json]
  check_trace.py synth --plan PLAN.jsonl --expected-out RUN.jsonl --trace-out TRACE.jsonl
                       [--baseline-out BASELINE.jsonl] [--mutate NAME]
  check_trace.py selftest --plan PLAN.jsonl [--gpumem PATH] [--workdir DIR]

`synth` builds, from a plan (`gpu_check --plan`), the run list and the trace the tracer should
write for it, following docs/tracer.md "Events"; `--mutate` breaks one thing in it. `selftest`
checks that the unbroken synthetic trace passes and that every mutation fails the check it
should (and only through that check's verdict); with --gpumem each synthetic trace first goes
through `gpumem convert` to .gmt and back, so the checker reads what gpumem writes.

Exit status: 0 every check passed (SKIPs allowed), 1 a check failed, 2 usage or unreadable input.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# What the tracer records for each planned operation (docs/tracer.md, "Events").
ALLOC_KIND = {  # op api -> trace mem kind
    "cudaMalloc": "segment_alloc",
    "cudaMallocHost": "segment_alloc",
    "cudaMallocAsync": "alloc",
    "cudaMallocFromPoolAsync": "alloc",
}
FREE_KIND = {"cudaFree": "segment_free", "cudaFreeHost": "segment_free", "cudaFreeAsync": "free"}
MAP_KIND = {"cuMemMap": "segment_map", "cuMemUnmap": "segment_unmap"}
# Planned calls the tracer does not record by design (tracer/api_callbacks.cpp enables no
# callback for them): listed, not checked.
NOT_TRACED = {"cuMemAddressReserve", "cuMemSetAccess", "cuMemAddressFree"}
ALLOCATING_KINDS = {"alloc", "segment_alloc", "segment_map"}
VMM_SERIES = "vmm physical bytes"
# Anomalies that make a recorded trace incomplete (tracer/activity_converter.cpp, trace_sink.cpp).
INCOMPLETE = {"dropped_records", "tracer_backlog_full", "kernel_timestamps_lost", "cupti_buffer_error", "truncated"}
CUBLAS_LIBS = ("libcublas",)  # libcublas.so.13 and libcublasLt.so.13
NCCL_LIBS = ("libnccl",)
SLACK_NS = 50_000  # how far outside its call's host-time window an event may lie


class InputError(Exception):
    pass


def read_jsonl(path):
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, text in enumerate(f, 1):
                if text.strip():
                    try:
                        out.append(json.loads(text))
                    except json.JSONDecodeError as e:
                        raise InputError(f"{path}:{n}: not valid JSON ({e.msg})")
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})")
    return out


# ------------------------------------------------------------------------------------ inputs

class Expected:
    """gpu_check's list: header, ops (in order), kernel counts, per-step times."""

    def __init__(self, records, path="<list>"):
        self.path = path
        heads = [r for r in records if r.get("type") == "header"]
        if len(heads) != 1:
            raise InputError(f"{path}: expected one header line, found {len(heads)}")
        self.header = heads[0]
        self.ops = [r for r in records if r.get("type") == "op"]
        ks = [r for r in records if r.get("type") == "kernels"]
        # gpu_check writes its kernels line last: without it the run did not finish, and the
        # checks run on what it wrote before it stopped.
        self.finished = bool(ks)
        self.kernels = ks[0] if ks else {"own": {}, "gemm_calls": 0, "allreduce_calls": 0}
        self.steps = [r for r in records if r.get("type") == "step"]
        self.failed = {}  # part -> reasons: what failed on the GPU machine (gpu_check's "failed" lines)
        for r in records:
            if r.get("type") == "failed":
                self.failed.setdefault(r.get("part", "?"), []).append(r.get("reason", ""))
        for i, op in enumerate(self.ops):
            if op.get("order") != i:
                raise InputError(f"{path}: op {i} has order {op.get('order')}; the list is out of order")

    @property
    def nccl(self):
        return bool(self.header.get("nccl"))


class Trace:
    """A gpumem .jsonl trace with scope paths and site libraries resolved."""

    def __init__(self, records, path="<trace>"):
        self.path = path
        if not records or records[0].get("format") != "gpumem-jsonl":
            raise InputError(f"{path}: not a gpumem .jsonl trace (first line has no \"format\":\"gpumem-jsonl\")")
        self.metadata = records[0].get("metadata", {})
        self.devices, self.streams, self.frames, self.sites = {}, {}, {0: None}, {0: []}
        self.scopes = {0: (0, "")}
        self.series, self.mem, self.kernels, self.annotations = {}, [], [], []
        self.counters, self.anomalies = [], []
        nmem = 0
        for r in records[1:]:
            t = r.get("type")
            if t == "device":
                self.devices[r["id"]] = r
            elif t == "stream":
                self.streams[r["id"]] = r
            elif t == "frame":
                self.frames[r["id"]] = r
            elif t == "site":
                self.sites[r["id"]] = r["frames"]
            elif t == "scope":
                self.scopes[r["id"]] = (r.get("parent", 0), r["name"])
            elif t == "counter_series":
                self.series[r["id"]] = r
            elif t == "mem":
                r = dict(r)
                r.setdefault("seq", nmem)
                r["index"] = nmem
                nmem += 1
                self.mem.append(r)
            elif t == "kernel":
                self.kernels.append(r)
            elif t == "annotation":
                self.annotations.append(r)
            elif t == "counter":
                self.counters.append(r)
            elif t == "anomaly":
                self.anomalies.append(r)
        self._paths = {}

    def scope_path(self, scope):
        if scope in self._paths:
            return self._paths[scope]
        names, s, seen = [], scope, set()
        while s and s not in seen:
            seen.add(s)
            parent, name = self.scopes.get(s, (0, f"<scope {s}>"))
            names.append(name)
            s = parent
        p = "/".join(reversed(names))
        self._paths[scope] = p
        return p

    def library(self, site):
        """The site's library. The tracer's one-frame site has file = CUPTI's allocation source
        (the .so's path) and function = its file name, or a static variable's name for
        __device__ variables of a module; the file tells the library either way."""
        frames = self.sites.get(site, [])
        f = self.frames.get(frames[0]) if frames else None
        if not f:
            return ""
        return os.path.basename(f.get("file", "")) or f["name"]

    def device_of(self, ev):
        return self.devices.get(ev.get("device", 0), {})

    def stream_handle(self, ev):
        return self.streams.get(ev.get("stream", 0), {}).get("handle", 0)

    def series_samples(self, name):
        ids = {i for i, s in self.series.items() if s["name"] == name}
        return sorted(((c["t"], c["value"]) for c in self.counters if c["series"] in ids), key=lambda x: x[0])


# ------------------------------------------------------------------------------------ checks

class Report:
    def __init__(self):
        self.results = []  # (name, status, detail)
        self.first_problem = {}  # check name -> its first problem (FAIL only)

    def add(self, name, ok, detail, problems=()):
        problems = list(problems)
        status = "PASS" if ok and not problems else "FAIL"
        if status == "FAIL":
            self.first_problem.setdefault(name, problems[0] if problems else detail)
        if problems:
            shown = "; ".join(problems[:6]) + (f"; … {len(problems) - 6} more" if len(problems) > 6 else "")
            detail = f"{detail}: {shown}" if detail else shown
        self.results.append((name, status, detail))

    def skip(self, name, detail):
        self.results.append((name, "SKIP", detail))

    def info(self, name, detail):
        self.results.append((name, "INFO", detail))

    def failed(self):
        return [r for r in self.results if r[1] == "FAIL"]

    def status(self, name):
        return next((s for n, s, _ in self.results if n == name), None)

    def text(self):
        return "\n".join(f"{s:4} {n}: {d}" for n, s, d in self.results)


def describe(op):
    return f"#{op['order']} {op['api']} {op['id']} ({op['size']} B, {op['range']})"


def live_peak(ops, memory):
    live, peak = 0, 0
    for op in ops:
        if op.get("memory") != memory:
            continue
        if op["op"] == "alloc":
            live += op["size"]
            peak = max(peak, live)
        elif op["op"] == "free":
            live -= op["size"]
    return peak


def check_plan(rep, run, plan):
    if plan is None:
        rep.skip("plan", "no --plan given")
        return
    keys = ("order", "op", "api", "id", "memory", "size", "range", "path")
    problems = []
    if len(run.ops) != len(plan.ops):
        problems.append(f"the run made {len(run.ops)} operations, the plan {len(plan.ops)}")
    for a, b in zip(run.ops, plan.ops):
        if any(a.get(k) != b.get(k) for k in keys):
            problems.append(f"run {describe(a)} but plan {describe(b)}")
            break
    if any(run.kernels.get(k) != plan.kernels.get(k) for k in ("own", "gemm_calls", "allreduce_calls")):
        problems.append("kernel launch counts differ between run and plan")
    if run.nccl != plan.nccl:
        problems.append(f"NCCL {'on' if run.nccl else 'off'} in the run, {'on' if plan.nccl else 'off'} in the plan")
    if problems and run.failed:
        problems.append("parts failed on this machine: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in run.failed.items()))
    rep.add("plan", True, f"the run did the {len(plan.ops)} planned operations (--plan is truthful)", problems)


def op_kind(op):
    return ALLOC_KIND.get(op["api"]) or FREE_KIND.get(op["api"]) or MAP_KIND.get(op["api"])


def match_ops(run, trace):
    """Pairs each planned memory operation with its trace event: an unused event of the expected
    kind at the same address, preferably inside the call's host-time window [t0, t1] (± SLACK_NS,
    never past the neighbouring planned operations at that address), else the first one between
    the previous and the next planned operation at that address (the order check reports it).
    Returns ({order: event}, {order: inside window}, unused events)."""
    queues = {}
    for ev in trace.mem:
        queues.setdefault((ev["kind"], ev["addr"]), []).append(ev)
    at_addr = {}
    for op in run.ops:
        if op_kind(op) and "addr" in op:
            at_addr.setdefault(op["addr"], []).append(op)
    matched, inside, used = {}, {}, set()
    for ops in at_addr.values():
        for i, op in enumerate(ops):
            cands = [e for e in queues.get((op_kind(op), op["addr"]), []) if id(e) not in used]
            if not cands:
                continue
            pick, ok = None, False
            if "t0" in op:
                after = ops[i - 1]["t1"] if i > 0 else float("-inf")
                before = ops[i + 1]["t0"] if i + 1 < len(ops) else float("inf")
                lo, hi = max(op["t0"] - SLACK_NS, after), min(op["t1"] + SLACK_NS, before)
                pick = next((e for e in cands if lo <= e["t"] <= hi), None)
                ok = pick is not None
                if pick is None:
                    pick = next((e for e in cands if after < e["t"] < before), None)
            else:
                pick, ok = cands[0], True
            if pick is not None:
                used.add(id(pick))
                matched[op["order"]] = pick
                inside[op["order"]] = ok
    return matched, inside, [e for e in trace.mem if id(e) not in used]


def check_memory(rep, run, trace, matched):
    allocs = [op for op in run.ops if op["api"] in ALLOC_KIND]
    frees = [op for op in run.ops if op["api"] in FREE_KIND]
    no_addr = [describe(op) for op in allocs + frees if "addr" not in op]
    if no_addr:
        rep.add("allocations", False, "the list has no addresses (is it a plan, not a run?)", no_addr[:1])
        return False
    problems = []
    pool_streams = set()
    for op in allocs:
        ev = matched.get(op["order"])
        if ev is None:
            problems.append(f"{describe(op)} at 0x{op['addr']:x} is not in the trace")
            continue
        if ev["size"] != op["size"]:
            problems.append(f"{describe(op)} has size {ev['size']} in the trace")
        dev = trace.device_of(ev)
        if op["memory"] == "pinned":
            if dev.get("kind") != "cpu" or dev.get("name") != "pinned host":
                problems.append(f"{describe(op)} is on device {dev.get('kind')}/{dev.get('name', '')!r}, "
                                "not cpu/'pinned host'")
        elif dev.get("kind") != "cuda":
            problems.append(f"{describe(op)} is on a {dev.get('kind')} device, not cuda")
        handle = trace.stream_handle(ev)
        if op["memory"] == "pool":
            pool_streams.add(handle)
            if handle == 0:
                problems.append(f"{describe(op)} has no stream (handle 0) in the trace")
        elif handle != 0:
            problems.append(f"{describe(op)} (synchronous) has stream handle {handle}")
    if len(pool_streams) > 1:
        problems.append(f"the pool allocations, all on one stream, are on {len(pool_streams)} trace streams")
    n_dev = sum(1 for op in allocs if op["memory"] == "device")
    n_pin = sum(1 for op in allocs if op["memory"] == "pinned")
    n_pool = sum(1 for op in allocs if op["memory"] == "pool")
    rep.add("allocations", True, f"{len(allocs)} allocations ({n_dev} cudaMalloc, {n_pin} cudaMallocHost, "
            f"{n_pool} cudaMallocAsync/FromPoolAsync) found with address, exact size, device and stream", problems)
    fp = []
    for op in frees:
        if matched.get(op["order"]) is None:
            fp.append(f"{describe(op)} at 0x{op['addr']:x} is not in the trace")
    rep.add("frees", True, f"{len(frees)} frees (cudaFree, cudaFreeHost, cudaFreeAsync) found", fp)
    sids = {op.get("stream") for op in allocs if op["memory"] == "pool"} - {None}
    if pool_streams and sids:
        same = pool_streams == sids
        rep.info("stream-id", f"pool allocations' trace stream handle {sorted(pool_streams)}; cudaStreamGetId "
                 f"gave {sorted(sids)} ({'the same' if same else 'different'})")
    return True


def check_order(rep, run, matched, inside):
    seq = [(op["order"], matched[op["order"]]) for op in run.ops if op["order"] in matched]
    problems = []
    for o, ev in seq:
        op = run.ops[o]
        if not inside.get(o, True):
            problems.append(f"{describe(op)} is recorded at t={ev['t']}, outside its call "
                            f"[{op['t0']}, {op['t1']}] by {min(abs(ev['t'] - op['t0']), abs(ev['t'] - op['t1']))} ns")
    for (oa, a), (ob, b) in zip(seq, seq[1:]):
        if (b["t"], b["seq"]) < (a["t"], a["seq"]):
            problems.append(f"#{ob} ({run.ops[ob]['api']} {run.ops[ob]['id']}) is recorded before #{oa} "
                            f"({run.ops[oa]['api']} {run.ops[oa]['id']})")
    rep.add("order", True, f"{len(seq)} matched events lie within their calls' host times, in the "
            f"program's order", problems)


def check_nvtx(rep, run, trace, matched):
    problems = []
    n = 0
    for op in run.ops:
        ev = matched.get(op["order"])
        if ev is None or ev["kind"] not in ALLOCATING_KINDS:
            continue
        n += 1
        got = trace.scope_path(ev.get("scope", 0))
        if got != op["range"]:
            problems.append(f"{describe(op)} is in range {got!r}" if got else f"{describe(op)} has no NVTX range")
    steps = {}
    for a in trace.annotations:
        if a.get("kind", "range") == "range" and a["name"].startswith("step "):
            steps.setdefault(a["name"], []).append(a)
    nsteps = run.header.get("steps", 0)
    for s in range(nsteps):
        got = steps.get(f"step {s}", [])
        if len(got) != 1:
            problems.append(f"{len(got)} annotations named 'step {s}' (expected 1)")
    for op in run.ops:
        ev = matched.get(op["order"])
        parts = op["range"].split("/")
        if ev is None or len(parts) < 2 or not parts[1].startswith("step "):
            continue
        ann = steps.get(parts[1], [])
        if len(ann) == 1 and not ann[0]["start"] <= ev["t"] <= ann[0]["end"]:
            problems.append(f"{describe(op)} at t={ev['t']} lies outside its '{parts[1]}' range "
                            f"[{ann[0]['start']}, {ann[0]['end']}]")
    for name in ("forward", "backward"):
        c = sum(1 for a in trace.annotations if a["name"] == name)
        if c != nsteps:
            problems.append(f"{c} '{name}' ranges (expected {nsteps})")
    rep.add("nvtx", True, f"{n} allocations carry their NVTX range path; {nsteps} step ranges hold their "
            f"steps' events", problems)
    frees = [ev for op in run.ops
             if (ev := matched.get(op["order"])) is not None and ev["kind"] in ("free", "segment_free")]
    if frees:
        bare = sum(1 for ev in frees if not ev.get("scope", 0))
        rep.info("nvtx-frees", f"{bare} of {len(frees)} frees carry no NVTX range (the tracer joins ranges to "
                 f"allocations only; not checked)")


def check_pool(rep, run, trace, matched):
    pool_ops = [op for op in run.ops if op["memory"] == "pool" and op["op"] == "alloc"]
    if not pool_ops:
        rep.skip("pool", "the program made no pool allocations")
        return
    # The converter samples "pool <base> used/reserved" at each pool allocation's own time.
    used_names = {s["name"]: i for i, s in trace.series.items()
                  if s["name"].endswith(" used") and s["name"].startswith("pool ")}
    at_time = {}
    for c in trace.counters:
        at_time.setdefault(c["t"], set()).add(c["series"])
    bases = set()
    problems = []
    for op in pool_ops:
        ev = matched.get(op["order"])
        if ev is None:
            continue
        hit = {n for n, i in used_names.items() if i in at_time.get(ev["t"], set())}
        if not hit:
            problems.append(f"{describe(op)} has no 'pool … used' sample at its time")
        bases |= {n[len("pool "):-len(" used")] for n in hit}
    if len(bases) != 1:
        problems.append(f"the pool allocations point at {len(bases)} pools "
                        f"({', '.join(sorted(bases)) or 'none'}); expected 1")
        rep.add("pool", False, "", problems)
        return
    base = bases.pop()
    names = [a["name"] for a in trace.annotations]
    for op, want in (("pool_create", f"pool {base} created"), ("pool_trim", f"pool {base} trimmed to 0 bytes"),
                     ("pool_destroy", f"pool {base} destroyed")):
        if any(o["op"] == op for o in run.ops) and want not in names:
            problems.append(f"no annotation '{want}'")
    used = trace.series_samples(f"pool {base} used")
    reserved = dict(trace.series_samples(f"pool {base} reserved"))
    # Whether CUPTI samples the pool before or after the operation is not documented, so each
    # sample must cover at least the program's pool bytes live apart from that operation.
    used_at = {}
    for t, v in used:
        used_at.setdefault(t, v)
    live, low = 0, []
    for op in run.ops:
        if op.get("memory") != "pool" or op["op"] not in ("alloc", "free"):
            continue
        before = live
        live += op["size"] if op["op"] == "alloc" else -op["size"]
        ev = matched.get(op["order"])
        if ev is not None and ev["t"] in used_at and used_at[ev["t"]] < min(before, live):
            low.append(f"{describe(op)}: 'pool {base} used' is {used_at[ev['t']]} B, the program has "
                       f"{min(before, live)} B live in the pool")
    problems += low
    peak = live_peak(run.ops, "pool")
    top = max((v for _, v in used), default=0)
    over = [(t, v) for t, v in used if t in reserved and reserved[t] < v]
    if over:
        problems.append(f"{len(over)} samples with used > reserved")
    rep.add("pool", True, f"pool {base}: created, trimmed, destroyed; used peaks at {top} B "
            f"(program's peak {peak} B)", problems)


def check_vmm(rep, run, trace, matched):
    maps = [op for op in run.ops if op["api"] in MAP_KIND]
    problems = [f"VMM failed on this machine: {r}" for r in run.failed.get("vmm", [])]
    if not maps and not problems:
        rep.skip("vmm", "the program made no VMM calls")
        return
    for op in maps:
        ev = matched.get(op["order"])
        where = f"{describe(op)} via {op.get('path', '?')}"
        if ev is None:
            problems.append(f"{where} is not in the trace")
        elif ev["size"] != op["size"]:
            problems.append(f"{where} has size {ev['size']}")
    samples = trace.series_samples(VMM_SERIES)
    deltas = [b - a for (_, a), (_, b) in zip([(0, 0)] + samples, samples)]
    for op in run.ops:
        if op["api"] not in ("cuMemCreate", "cuMemRelease"):
            continue
        want = op["size"] if op["api"] == "cuMemCreate" else -op["size"]
        if want in deltas:
            deltas.remove(want)
        else:
            problems.append(f"{describe(op)} via {op.get('path', '?')}: no step of {want:+d} B in '{VMM_SERIES}'")
    untraced = sorted({op["api"] for op in run.ops if op["api"] in NOT_TRACED})
    rep.add("vmm", True, f"{len(maps)} cuMemMap/cuMemUnmap and the cuMemCreate/cuMemRelease steps of "
            f"'{VMM_SERIES}' (dlsym and driver-entry-point paths); not recorded by design: {', '.join(untraced)}",
            problems)


# Ranges (path components) inside which a library allocates: NCCL in its init, all-reduce and
# destroy; cuBLAS at handle creation and (lazily) at its first GEMMs of a stream.
NCCL_RANGES = {"nccl", "allreduce"}
CUBLAS_RANGES = {"cublas", "forward", "backward"}


def check_libraries(rep, run, trace, unmatched):
    """The allocations the program did not make itself: cuBLAS's and NCCL's, told apart by the
    library the tracer names (its one-frame site from CUPTI's allocation source)."""
    libs = {}
    problems = {"cublas": [], "nccl": [], "unplanned": []}
    outside = {}
    for ev in unmatched:
        if ev["kind"] not in ALLOCATING_KINDS:
            continue
        lib = trace.library(ev.get("site", 0))
        path = trace.scope_path(ev.get("scope", 0))
        libs.setdefault(lib, []).append(ev)
        if not path.startswith("gpu_check"):
            outside[lib or "<no site>"] = outside.get(lib or "<no site>", 0) + 1
            continue
        parts = set(path.split("/"))
        what = f"{ev['kind']} of {ev['size']} B at 0x{ev['addr']:x} in {path!r} attributed to {lib or 'no library'}"
        if parts & NCCL_RANGES:
            if not lib.startswith(NCCL_LIBS):
                problems["nccl"].append(what)
        elif parts & CUBLAS_RANGES:
            if not lib.startswith(CUBLAS_LIBS):
                problems["cublas"].append(what)
        elif not lib.startswith(CUBLAS_LIBS + NCCL_LIBS):
            problems["unplanned"].append(what)

    def total(prefixes):
        evs = [e for lib, es in libs.items() if lib.startswith(prefixes) for e in es]
        return len(evs), sum(e["size"] for e in evs)

    n, b = total(CUBLAS_LIBS)
    if n == 0:
        problems["cublas"].insert(0, "no allocation in the trace is attributed to libcublas (the tracer's site "
                                     "from CUPTI's allocation source)")
    rep.add("cublas", True, f"{n} allocations ({b} B) attributed to cuBLAS; every allocation the program did "
            f"not make in its cuBLAS ranges is cuBLAS's", problems["cublas"])
    if "nccl" in run.failed:
        rep.add("nccl", False, "", [f"NCCL failed on this machine: {r}" for r in run.failed["nccl"]] + problems["nccl"])
    elif not run.nccl:
        rep.skip("nccl", f"the program ran without NCCL: {run.header.get('nccl_reason', 'no reason given')}")
    else:
        n, b = total(NCCL_LIBS)
        if n == 0:
            problems["nccl"].insert(0, "no allocation in the trace is attributed to libnccl")
        rep.add("nccl", True, f"{n} allocations ({b} B) attributed to NCCL; every allocation the program did not "
                f"make in its NCCL ranges is NCCL's", problems["nccl"])
    rep.add("unplanned", True, "no allocation in the program's other ranges that neither the program nor a "
            "library made", problems["unplanned"])
    if outside:
        rep.info("other-threads", "allocations outside the program's ranges (library threads), by library: "
                 + ", ".join(f"{k} {v}" for k, v in sorted(outside.items())))


def check_kernels(rep, run, trace):
    own = run.kernels.get("own", {})
    counts = {}
    problems = []
    for k in trace.kernels:
        counts[k["name"]] = counts.get(k["name"], 0) + 1
        if not k["name"] or k["name"] == "<unnamed kernel>":
            problems.append("a kernel without a name")
        if not 0 < k["start"] <= k["end"]:
            problems.append(f"kernel {k['name']} has start {k['start']}, end {k['end']}")
    for name, want in sorted(own.items()):
        if counts.get(name, 0) != want:
            problems.append(f"{name}: {counts.get(name, 0)} launches in the trace, {want} made")
    gemm = sum(c for n, c in counts.items() if n not in own and "gemm" in n.lower())
    want = run.kernels.get("gemm_calls", 0)
    if gemm < want:
        problems.append(f"{gemm} kernels named like a GEMM for {want} cublasSgemm calls")
    nccl = sum(c for n, c in counts.items() if "nccl" in n.lower())
    rep.add("kernels", True, f"{sum(own.values())} launches of the program's {len(own)} kernels by name, "
            f"{gemm} cuBLAS GEMM kernels (≥ {want} calls), {nccl} NCCL kernels", problems)


def check_complete(rep, trace):
    problems = []
    for a in trace.anomalies:
        if a["code"] in INCOMPLETE or a.get("severity") == "error":
            problems.append(f"anomaly {a['code']} ×{a.get('count', 1)}: {a.get('detail', '')}")
    md = trace.metadata
    if md.get("exit") != "normal":
        problems.append(f"metadata exit is {md.get('exit')!r}, not 'normal'")
    if "tracer_disabled" in md:
        problems.append(f"the tracer switched itself off: {md['tracer_disabled']}")
    if md.get("allocation_source") is not True:
        problems.append(f"allocation_source is {md.get('allocation_source')!r}: library attribution is off")
    rep.add("complete", True, f"no dropped records, exit normal, CUPTI {md.get('cupti_runtime_version', '?')}",
            problems)


def median_step_ns(exp):
    times = [s["ns"] for s in exp.steps if s["step"] > 0]  # step 0 pays one-time costs
    return statistics.median(times) if times else None


def check_overhead(rep, run, baseline, max_ratio):
    if baseline is None:
        rep.skip("overhead", "no --baseline run given")
        return None
    a, b = median_step_ns(run), median_step_ns(baseline)
    if not a or not b:
        rep.add("overhead", False, "", ["no step times in the traced or the baseline list"])
        return None
    ratio = a / b
    rep.add("overhead", True, f"median step {a / 1e6:.3f} ms traced, {b / 1e6:.3f} ms without the tracer: "
            f"ratio {ratio:.3f} (limit {max_ratio})",
            [] if ratio <= max_ratio else [f"ratio {ratio:.3f} is above {max_ratio}"])
    return ratio


def check_all(run, trace, plan=None, baseline=None, max_overhead=1.5):
    rep = Report()
    if not run.finished:
        rep.add("finished", False, "", [f"{run.path} has no 'kernels' line: gpu_check stopped after "
                                        f"{len(run.ops)} operations and {len(run.steps)} steps"])
    check_plan(rep, run, plan)
    matched, inside, unmatched = match_ops(run, trace)
    if check_memory(rep, run, trace, matched):
        check_order(rep, run, matched, inside)
        check_nvtx(rep, run, trace, matched)
        check_pool(rep, run, trace, matched)
        check_vmm(rep, run, trace, matched)
        check_libraries(rep, run, trace, unmatched)
    check_kernels(rep, run, trace)
    check_complete(rep, trace)
    ratio = check_overhead(rep, run, baseline, max_overhead)
    return rep, ratio


# -------------------------------------------------------------------------- synthetic traces

T0 = 1_764_000_000_000_000_000
CUBLAS_SO = "/usr/local/cuda/lib64/libcublasLt.so.13"
NCCL_SO = "/usr/local/cuda/lib64/libnccl.so.2"
PROGRAM = "/work/build/ci/gpu_check/gpu_check"  # its own allocations' source (cudart is linked in)
PROGRAM_SITE = 3
POOL_BASE = 0x7F2000000000
STREAM_HANDLE = 13


def synthesize(plan, mutate=None):
    """The run list, the baseline list and the trace records the tracer should produce for `plan`
    (docs/tracer.md "Events"); `mutate` names one defect to put in (MUTATIONS)."""
    if plan.header.get("mode") != "plan":
        raise InputError(f"{plan.path}: not a plan (mode {plan.header.get('mode')!r})")
    header = dict(plan.header, mode="run", device="synthetic H200")
    run_ops, mem, ann, counters, kernels = [], [], [], [], []
    scopes = {"": 0}
    scope_rows = []

    def scope(path):
        if path in scopes:
            return scopes[path]
        parent, _, name = path.rpartition("/")
        pid = scope(parent) if parent else 0
        scopes[path] = len(scope_rows) + 1
        scope_rows.append({"type": "scope", "id": scopes[path], "parent": pid, "name": name, "kind": "range"})
        return scopes[path]

    free_lists, next_addr = {}, {"device": 0x7F0000000000, "pinned": 0x7E0000000000, "pool": POOL_BASE + 0x200000}
    addr_of, time = {}, [T0]
    seq = [1000]
    live_pool, reserved_pool, vmm_total = [0], [0], [0]
    pending = []  # (after op order, list of extra events) for library memory

    def tick(dt=1000):
        time[0] += dt
        seq[0] += 1
        return time[0], seq[0]

    def emit(kind, dev, stream, addr, size, path, site=0, requested=None):
        t, s = tick()
        ev = {"type": "mem", "t": t, "kind": kind, "device": dev, "stream": stream, "addr": addr, "size": size}
        if kind in ("alloc", "segment_alloc", "segment_map"):
            ev["requested"] = size if requested is None else requested
        ev["scope"] = scope(path) if path and kind in ("alloc", "segment_alloc", "segment_map", "segment_unmap") else 0
        ev["site"] = site
        ev["thread"] = 4242
        ev["seq"] = s
        mem.append(ev)
        return ev

    def bracket(o, ev):
        o["t0"], o["t1"] = ev["t"] - 300, ev["t"] + 300

    vmm_base = 0x7D0000000000
    range_spans = {}
    for op in plan.ops:
        o = dict(op)
        api, memory, size = op["api"], op["memory"], op["size"]
        path = op["range"]
        if api in ALLOC_KIND or api in FREE_KIND:
            allocating = api in ALLOC_KIND
            if allocating:
                fl = free_lists.get((memory, size), [])
                if fl:  # the allocator hands back the last freed block of this size
                    addr = fl.pop()
                else:
                    addr = next_addr[memory]
                    next_addr[memory] += (size + 0xFFFFF) & ~0xFFFFF
                addr_of[op["id"]] = addr
            else:
                addr = addr_of.pop(op["id"])
                free_lists.setdefault((memory, size), []).append(addr)
            o["addr"] = addr
            dev = 1 if memory == "pinned" else 0
            stream = 1 if memory == "pool" else (2 if memory == "pinned" else 0)
            if memory == "pool":
                o["stream"] = STREAM_HANDLE
            ev = emit((ALLOC_KIND if allocating else FREE_KIND)[api], dev, stream, addr, size, path, site=PROGRAM_SITE)
            bracket(o, ev)
            if memory == "pool":
                live_pool[0] += size if allocating else -size
                reserved_pool[0] = max(reserved_pool[0], (live_pool[0] + 0x1FFFFF) & ~0x1FFFFF)
                counters.append((ev["t"], 1, live_pool[0]))
                counters.append((ev["t"], 0, reserved_pool[0]))
        elif api in MAP_KIND:
            chunk = int(op["id"][-1])
            addr = vmm_base + chunk * size
            o["addr"] = addr
            bracket(o, emit(MAP_KIND[api], 0, 0, addr, size, path))
        elif api in ("cuMemCreate", "cuMemRelease"):
            t, _ = tick()
            vmm_total[0] += size if api == "cuMemCreate" else -size
            counters.append((t, 2, vmm_total[0]))
        elif api in NOT_TRACED:
            o["addr"] = vmm_base
        elif api.startswith("cudaMemPool"):
            t, _ = tick()
            what = {"cudaMemPoolCreate": "created", "cudaMemPoolTrimTo": "trimmed to 0 bytes",
                    "cudaMemPoolDestroy": "destroyed"}[api]
            ann.append({"type": "annotation", "start": t, "end": t, "name": f"pool 0x{POOL_BASE:x} {what}",
                        "kind": "instant", "device": 0})
            if api == "cudaMemPoolTrimTo":
                reserved_pool[0] = live_pool[0]
                counters.append((t, 0, reserved_pool[0]))
        if "t0" not in o:
            o["t0"] = o["t1"] = time[0]
        run_ops.append(o)
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            p = "/".join(parts[:i])
            lo, hi = range_spans.get(p, (time[0], time[0]))
            range_spans[p] = (min(lo, time[0]), max(hi, time[0]))
        # Library memory, as the tracer would see it: cuBLAS's workspace at the first GEMM (in the
        # first forward layer), NCCL's buffers inside ncclCommInitAll and from its proxy thread.
        if op["range"] == "gpu_check/setup/vmm" and op["api"] == "cuMemSetAccess" and plan.nccl:
            for k in range(3):
                emit("segment_alloc", 0, 0, 0x7C0000000000 + k * 0x400000, 4 << 20, "gpu_check/setup/nccl", site=2)
            emit("segment_alloc", 0, 0, 0x7C0000100000 + 3 * 0x400000, 1 << 20, "", site=2)
            range_spans["gpu_check/setup/nccl"] = (time[0] - 4000, time[0])
        if op["id"] == "step0.layer1.activation" and op["op"] == "alloc":
            emit("segment_alloc", 0, 0, 0x7B0000000000, 32 << 20, op["range"], site=1)
    # Frees of library memory at teardown (no scope: the tracer joins scopes to allocations only).
    if plan.nccl:
        for k in range(3):
            emit("segment_free", 0, 0, 0x7C0000000000 + k * 0x400000, 4 << 20, "")
    emit("segment_free", 0, 0, 0x7B0000000000, 32 << 20, "")

    # Range annotations: every range that held an operation, spanning its operations.
    for p, (lo, hi) in range_spans.items():
        name = p.rsplit("/", 1)[-1]
        ann.append({"type": "annotation", "start": lo - 100, "end": hi + 100, "name": name, "thread": 4242})
    # Kernels: the program's own by count, one cuBLAS GEMM kernel per call, NCCL's per all-reduce.
    kt = T0 + 10
    for name, count in sorted(plan.kernels["own"].items()):
        for _ in range(count):
            kernels.append({"type": "kernel", "start": kt, "end": kt + 5000, "stream": 1, "name": name})
            kt += 7
    for _ in range(plan.kernels["gemm_calls"]):
        kernels.append({"type": "kernel", "start": kt, "end": kt + 20000, "stream": 1,
                        "name": "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_kernel__5x_cublas"})
        kt += 7
    for _ in range(plan.kernels.get("allreduce_calls", 0)):
        kernels.append({"type": "kernel", "start": kt, "end": kt + 3000, "stream": 1,
                        "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"})
        kt += 7
    steps = [{"type": "step", "step": s, "ns": 2_000_000 + 1000 * (s % 3)} for s in range(plan.header["steps"])]
    base_steps = [{"type": "step", "step": s, "ns": 1_900_000 + 1000 * (s % 5)} for s in range(plan.header["steps"])]
    anomalies = []
    metadata = {"tool": "gpumem-tracer", "exit": "normal", "allocation_source": True,
                "cupti_runtime_version": 130001, "command": ["gpu_check"]}

    # ------------------------------------------------------------------ the defects
    def first(pred):
        return next(i for i, e in enumerate(mem) if pred(e))

    if mutate == "drop_alloc":
        del mem[first(lambda e: e["kind"] == "alloc" and e["size"] == 1 << 20)]
    elif mutate == "drop_free":
        del mem[first(lambda e: e["kind"] == "segment_free")]
    elif mutate == "wrong_size":
        mem[first(lambda e: e["kind"] == "segment_alloc" and e["site"] == PROGRAM_SITE)]["size"] += 512
    elif mutate == "wrong_range":
        e = mem[first(lambda e: e["kind"] == "alloc" and "step 3/forward/layer 2" in path_of(scope_rows, e["scope"]))]
        e["scope"] = scope("gpu_check/step 3/forward/layer 1")
    elif mutate == "no_range":
        mem[first(lambda e: e["kind"] == "segment_alloc" and e["site"] == PROGRAM_SITE)]["scope"] = 0
    elif mutate == "outside_step":
        e = mem[first(lambda e: e["kind"] == "alloc" and "step 2/" in path_of(scope_rows, e["scope"]))]
        ann_step = next(a for a in ann if a["name"] == "step 2")
        ann_step["start"] = e["t"] + 1
    elif mutate == "swap_order":
        a = first(lambda e: e["kind"] == "segment_alloc" and e["site"] == PROGRAM_SITE)
        b = first(lambda e: e["kind"] == "segment_alloc" and e["site"] == PROGRAM_SITE and e is not mem[a])
        mem[a]["t"], mem[b]["t"] = mem[b]["t"], mem[a]["t"]
        mem[a]["seq"], mem[b]["seq"] = mem[b]["seq"], mem[a]["seq"]
    elif mutate == "pinned_as_device":
        mem[first(lambda e: e["device"] == 1)]["device"] = 0
    elif mutate == "pool_no_stream":
        mem[first(lambda e: e["kind"] == "alloc")]["stream"] = 0
    elif mutate == "dropped_records":
        anomalies.append({"type": "anomaly", "code": "dropped_records", "severity": "error", "count": 12,
                          "detail": "CUPTI dropped activity records for lack of buffer space; the trace is incomplete"})
    elif mutate == "exit_signal":
        metadata["exit"] = "signal"
    elif mutate == "missing_kernel":
        del kernels[next(i for i, k in enumerate(kernels) if k["name"] == "gc_relu_backward")]
    elif mutate == "unnamed_kernel":
        kernels[0]["name"] = "<unnamed kernel>"
    elif mutate == "few_gemms":
        del kernels[next(i for i, k in enumerate(kernels) if "gemm" in k["name"])]
    elif mutate == "cublas_unattributed":
        for e in mem:
            if e["site"] == 1:
                e["site"] = 0
    elif mutate == "nccl_unattributed":
        mem[first(lambda e: e["site"] == 2 and e["scope"] != 0)]["site"] = 0
    elif mutate == "extra_event":
        e = dict(mem[first(lambda e: e["kind"] == "alloc")])
        e["addr"] += 0x100
        e["seq"] += 100000
        mem.append(e)
    elif mutate == "unplanned_event":
        e = dict(mem[first(lambda e: e["kind"] == "segment_alloc"
                           and "step 1/loss" in path_of(scope_rows, e["scope"]))])
        e["addr"] += 0x40000000
        e["seq"] += 100000
        mem.append(e)
    elif mutate == "drop_map":
        del mem[first(lambda e: e["kind"] == "segment_map")]
    elif mutate == "drop_vmm_create":
        del counters[next(i for i, c in enumerate(counters) if c[1] == 2)]
    elif mutate == "no_pool_trim":
        del ann[next(i for i, a in enumerate(ann) if "trimmed" in a["name"])]
    elif mutate == "pool_used_low":
        counters = [(t, s, v // 4 if s == 1 else v) for t, s, v in counters]
    elif mutate == "vmm_failed":
        run_ops.append({"type": "failed", "part": "vmm", "reason": "cuMemCreate returned CUresult 801"})
    elif mutate == "nccl_failed":
        run_ops.append({"type": "failed", "part": "nccl", "reason": "ncclAllReduce: unhandled system error"})
    elif mutate == "unfinished":
        pass  # the run list loses its kernels line below
    elif mutate == "slow":
        base_steps = [dict(s, ns=s["ns"] // 2) for s in base_steps]
    elif mutate == "plan_mismatch":
        run_ops[5]["id"] += ".renamed"
    elif mutate is not None:
        raise InputError(f"unknown mutation {mutate!r}; one of {', '.join(MUTATIONS)}")

    mem.sort(key=lambda e: (e["t"], e["seq"]))
    records = [{"format": "gpumem-jsonl", "version": 1, "metadata": metadata},
               {"type": "device", "id": 0, "kind": "cuda", "ordinal": 0, "name": "synthetic H200"},
               {"type": "device", "id": 1, "kind": "cpu", "ordinal": -1, "name": "pinned host"},
               {"type": "stream", "id": 0, "device": 0, "handle": 0},
               {"type": "stream", "id": 1, "device": 0, "handle": STREAM_HANDLE},
               {"type": "stream", "id": 2, "device": 1, "handle": 0},
               {"type": "frame", "id": 1, "name": os.path.basename(CUBLAS_SO), "file": CUBLAS_SO, "line": 0},
               {"type": "frame", "id": 2, "name": os.path.basename(NCCL_SO), "file": NCCL_SO, "line": 0},
               {"type": "frame", "id": 3, "name": os.path.basename(PROGRAM), "file": PROGRAM, "line": 0},
               {"type": "site", "id": 1, "frames": [1]},
               {"type": "site", "id": 2, "frames": [2]},
               {"type": "site", "id": 3, "frames": [3]}]
    records += scope_rows
    records += [{"type": "counter_series", "id": 0, "name": f"pool 0x{POOL_BASE:x} reserved", "device": 0},
                {"type": "counter_series", "id": 1, "name": f"pool 0x{POOL_BASE:x} used", "device": 0},
                {"type": "counter_series", "id": 2, "name": VMM_SERIES, "device": 0}]
    records += mem
    records += sorted(kernels, key=lambda k: k["start"])
    records += sorted(ann, key=lambda a: a["start"])
    records += [{"type": "counter", "t": t, "series": s, "value": v} for t, s, v in sorted(counters)]
    records += anomalies
    run = [header] + run_ops + ([] if mutate == "unfinished" else [dict(plan.kernels)]) + steps
    baseline = [dict(header, mode="run")] + run_ops + [dict(plan.kernels)] + base_steps
    return run, baseline, records


def path_of(scope_rows, sid):
    by_id = {r["id"]: r for r in scope_rows}
    names = []
    while sid:
        names.append(by_id[sid]["name"])
        sid = by_id[sid]["parent"]
    return "/".join(reversed(names))


# mutation -> the check that must fail on it
MUTATIONS = {
    "drop_alloc": "allocations", "drop_free": "frees", "wrong_size": "allocations",
    "wrong_range": "nvtx", "no_range": "nvtx", "outside_step": "nvtx", "swap_order": "order",
    "pinned_as_device": "allocations", "pool_no_stream": "allocations",
    "dropped_records": "complete", "exit_signal": "complete",
    "missing_kernel": "kernels", "unnamed_kernel": "kernels", "few_gemms": "kernels",
    "cublas_unattributed": "cublas", "nccl_unattributed": "nccl", "extra_event": "cublas",
    "unplanned_event": "unplanned",
    "drop_map": "vmm", "drop_vmm_create": "vmm", "no_pool_trim": "pool", "pool_used_low": "pool",
    "vmm_failed": "vmm", "nccl_failed": "nccl", "slow": "overhead", "plan_mismatch": "plan",
    "unfinished": ("finished", "plan"),  # no kernels line: the launch counts differ from the plan too
}


def write_jsonl(path, records):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")


def roundtrip(gpumem, src, workdir):
    """src .jsonl -> .gmt -> .jsonl through `gpumem convert`; returns the final path."""
    gmt = os.path.join(workdir, os.path.basename(src) + ".gmt")
    back = os.path.join(workdir, os.path.basename(src) + ".back.jsonl")
    for args in ([gpumem, "convert", src, "-o", gmt], [gpumem, "convert", "--to", "jsonl", gmt, "-o", back]):
        p = subprocess.run(args, capture_output=True, text=True)
        if p.returncode != 0:
            raise InputError(f"{' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
    return back


def selftest(plan_path, gpumem=None, workdir=None):
    plan = Expected(read_jsonl(plan_path), plan_path)
    own_dir = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="gpu-check-selftest.")
    os.makedirs(workdir, exist_ok=True)
    failures = []
    for mutate in [None] + list(MUTATIONS):
        run, base, records = synthesize(plan, mutate)
        tag = mutate or "clean"
        tpath = os.path.join(workdir, f"{tag}.trace.jsonl")
        write_jsonl(tpath, records)
        if gpumem:
            tpath = roundtrip(gpumem, tpath, workdir)
        rep, _ = check_all(Expected(run, "run"), Trace(read_jsonl(tpath), tpath), plan=plan,
                           baseline=Expected(base, "baseline"))
        failed = sorted(n for n, _, _ in rep.failed())
        if mutate is None:
            ok = not failed and all(rep.status(n) == "PASS" for n in
                                    ("allocations", "frees", "order", "nvtx", "pool", "vmm", "cublas", "kernels",
                                     "unplanned", "complete", "overhead", "plan"))
            ok = ok and rep.status("nccl") == ("PASS" if plan.nccl else "SKIP")
            verdict = "passes" if ok else f"FAILS ({', '.join(failed) or 'a check did not run'})"
            if not ok:
                failures.append(f"clean synthetic trace: {rep.text()}")
        else:
            want = MUTATIONS[mutate]
            want = sorted(want) if isinstance(want, tuple) else [want]
            ok = failed == want
            verdict = f"fails {', '.join(want)}" if ok else f"WRONG: failed checks {failed or 'none'}, expected {want}"
            if not ok:
                failures.append(f"{mutate}: {verdict}\n{rep.text()}")
        detail = rep.first_problem.get(want[0], "") if mutate else ""
        shown = f": {detail[:70]}" + ("…" if len(detail) > 70 else "") if mutate and ok else ""
        print(f"selftest {tag:20} {verdict}{shown}")
    if own_dir and not failures:
        for f in os.listdir(workdir):
            os.unlink(os.path.join(workdir, f))
        os.rmdir(workdir)
    via = "through gpumem convert (.jsonl → .gmt → .jsonl)" if gpumem else "without gpumem (no round trip)"
    if failures:
        print("\n\n".join(failures), file=sys.stderr)
        print(f"selftest: {len(failures)} of {len(MUTATIONS) + 1} cases wrong ({via})")
        return 1
    print(f"selftest: the clean trace passes and all {len(MUTATIONS)} broken ones fail their check ({via})")
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="check a recorded trace against gpu_check's list")
    c.add_argument("--expected", required=True, help="gpu_check's list from the traced run")
    c.add_argument("--trace", required=True, help="the trace as gpumem .jsonl")
    c.add_argument("--plan", help="gpu_check --plan output, to prove the plan matches the run")
    c.add_argument("--baseline", help="gpu_check's list from a run without the tracer")
    c.add_argument("--max-overhead", type=float, default=1.5, help="largest traced/untraced median step time")
    c.add_argument("--summary", help="write the results as JSON here")
    s = sub.add_parser("synth", help="a synthetic run list and trace from a plan")
    s.add_argument("--plan", required=True)
    s.add_argument("--expected-out", required=True)
    s.add_argument("--trace-out", required=True)
    s.add_argument("--baseline-out")
    s.add_argument("--mutate", choices=sorted(MUTATIONS))
    t = sub.add_parser("selftest", help="the checker against synthetic traces, clean and broken")
    t.add_argument("--plan", required=True)
    t.add_argument("--gpumem", help="gpumem executable for the .gmt round trip")
    t.add_argument("--workdir", help="keep the synthetic traces here")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "check":
            run = Expected(read_jsonl(a.expected), a.expected)
            trace = Trace(read_jsonl(a.trace), a.trace)
            plan = Expected(read_jsonl(a.plan), a.plan) if a.plan else None
            base = Expected(read_jsonl(a.baseline), a.baseline) if a.baseline else None
            rep, ratio = check_all(run, trace, plan, base, a.max_overhead)
            print(rep.text())
            bad = rep.failed()
            skipped = [n for n, st, _ in rep.results if st == "SKIP"]
            print(f"check_trace.py: {'FAILED' if bad else 'PASSED'}: {len(bad)} checks failed"
                  + (f" ({', '.join(n for n, _, _ in bad)})" if bad else "")
                  + (f", skipped: {', '.join(skipped)}" if skipped else ""))
            if a.summary:
                with open(a.summary, "w", encoding="utf-8") as f:
                    json.dump({"passed": not bad, "overhead_ratio": ratio,
                               "results": [{"check": n, "status": st, "detail": d} for n, st, d in rep.results],
                               "trace_metadata": trace.metadata,
                               "counts": {"mem": len(trace.mem), "kernels": len(trace.kernels),
                                          "annotations": len(trace.annotations)}}, f, indent=1)
            return 1 if bad else 0
        if a.cmd == "synth":
            plan = Expected(read_jsonl(a.plan), a.plan)
            run, base, records = synthesize(plan, a.mutate)
            write_jsonl(a.expected_out, run)
            write_jsonl(a.trace_out, records)
            if a.baseline_out:
                write_jsonl(a.baseline_out, base)
            return 0
        return selftest(a.plan, a.gpumem, a.workdir)
    except InputError as e:
        print(f"check_trace.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
