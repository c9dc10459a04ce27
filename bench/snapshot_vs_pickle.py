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
import resource
import sys
import glob
import json
import math
import os
import pickle
import shutil
import subprocess
import tempfile
import itertools
import struct
import time
import pickletools

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
    ap.add_argument("--scale", help="generated snapshots of these entry counts (e.g. 1e6,1e7): pickle.load against "
                    "gpumem info and analyze as whole processes, CPU time and peak RSS")
    ap.add_argument("--source", help="--scale: the snapshot to repeat (default: cs336-bcrafton)")
    ap.add_argument("--gpumem", default=os.path.join(ROOT, "build/ci/cli/gpumem"), help="--scale: the CLI to time")
    ap.add_argument("--memory-limit-gib", type=float, default=8.0, help="--scale: stop any process above this RSS")
    ap.add_argument("--baseline-gpumem", help="--scale: another CLI (e.g. main's build) whose info runs in the same rounds")
    ap.add_argument("--check", action="store_true", help="--scale: print the generated files' anomalies first")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    if args.scale:
        return scale(args)
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


# ---- generated large snapshots (--scale) -------------------------------------------------------------
# A real snapshot repeated to N trace entries, written as the bytes pickle.dump (protocol 4, as
# torch.cuda.memory._dump_snapshot uses) writes. The source file's own opcodes are reused: its trace
# entries are cut out of it (FRAME opcodes removed, the result re-framed), copied once per repetition
# with time_us shifted by one window length per copy, and batched 1000 to an APPENDS as the pickler
# does; the memo references inside a copy point at the first copy's objects (the same frame dicts,
# strings and frames lists: equal content), so the file shares what a long dump shares. What follows
# the traces (allocator_settings, external_annotations) has its memo references shifted past the
# copies' MEMOIZE opcodes.
#
# Consistency: a window starts with blocks live from before it and ends with blocks it leaves live
# (the cs336-bcrafton window, one training step: 222 and 222, of equal sizes, 202 at the same
# address). Between two copies, entries like PyTorch's own put the state back to the window's start:
# the blocks the window left live (and did not find live) are freed, and those it found live are
# allocated again, each after a filler block from the free space before it in its segment (freed
# right after), so that it starts a free block as the importer's split rule needs. Every copy then
# runs from the same state, the last one ends in the file's `segments`, and the importer reports
# the file's own anomalies and no others (checked by gpumem info in the script).


def _unframed(data):
    """`data` without its FRAME opcodes (framing is optional in protocol 4; the output is re-framed)."""
    out, last = bytearray(), 0
    for op, _, pos in pickletools.genops(data):
        if op.name == "FRAME":
            out += data[last:pos]
            last = pos + 9
    out += data[last:]
    return bytes(out)


class _Node:
    __slots__ = ("kind", "start", "end", "items", "value", "target", "memo")

    def __init__(self, kind, start, end, value=None):
        self.kind, self.start, self.end, self.items, self.value, self.target = kind, start, end, [], value, None
        self.memo = None

    def resolved(self):
        return self.target if self.kind == "ref" else self


def _decode_tree(data):
    """Each value of the plain-data pickle `data` as a _Node with its byte range [start, end); returns
    (root, positions of the MEMOIZE opcodes, [(opcode name, arg, pos, end)])."""
    ops = list(pickletools.genops(data))
    ends = [pos for _, _, pos in ops[1:]] + [len(data)]
    stack, memo, memoize_at, listed = [], [], [], []
    mark = object()
    for (op, arg, pos), end in zip(ops, ends):
        name = op.name
        listed.append((name, arg, pos, end))
        if name in ("BINGET", "LONG_BINGET"):
            n = _Node("ref", pos, end)
            n.target = memo[arg]
            stack.append(n)
        elif name in ("SHORT_BINUNICODE", "BINUNICODE", "BININT1", "BININT2", "BININT", "LONG1", "NEWTRUE",
                      "NEWFALSE", "NONE", "BINFLOAT"):
            stack.append(_Node("scalar", pos, end, arg))
        elif name in ("EMPTY_DICT", "EMPTY_LIST"):
            stack.append(_Node(name, pos, end))
        elif name == "MEMOIZE":
            stack[-1].memo = len(memo)
            memo.append(stack[-1])
            memoize_at.append(pos)
        elif name == "MARK":
            stack.append(mark)
        elif name in ("SETITEMS", "APPENDS"):
            i = len(stack) - 1 - stack[::-1].index(mark)
            items = stack[i + 1:]
            del stack[i:]
            stack[-1].items.extend(items)
            stack[-1].end = end
        elif name in ("APPEND", "SETITEM"):
            k = 1 if name == "APPEND" else 2
            items = stack[-k:]
            del stack[-k:]
            stack[-1].items.extend(items)
            stack[-1].end = end
        elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            k = int(name[-1])
            items = stack[-k:]
            del stack[-k:]
            t = _Node("tuple", items[0].start, end)
            t.items = items
            stack.append(t)
        elif name in ("PROTO", "STOP"):
            pass
        else:
            raise SystemExit(f"snapshot generator: opcode {name} at {pos} is not handled")
    return stack[0], memoize_at, listed


def _fields(node):
    """A dict node's {key text: value node}."""
    d = node.resolved()
    return {d.items[i].resolved().value: d.items[i + 1] for i in range(0, len(d.items), 2)}


def _long1(v):
    """LONG1 of an int (pickle.encode_long: little-endian two's complement, as few bytes as fit)."""
    b = pickle.encode_long(v)
    return b"\x8a" + bytes([len(b)]) + b


def write_repeated_snapshot(source, entries, out_path):
    """Writes `source` (a snapshot pickle with one device's trace) repeated to at least `entries`
    trace entries as `out_path`; returns the entry count."""
    data = _unframed(open(source, "rb").read())
    root, memoize_at, listed = _decode_tree(data)
    top = _fields(root)
    devices = top["device_traces"].resolved().items
    with_entries = [d for d in devices if d.resolved().items]
    if len(with_entries) != 1:
        raise SystemExit("snapshot generator: the source must have one device with trace entries")
    trace = with_entries[0]
    if data[trace.start:trace.start + 2] != b"]\x94":
        raise SystemExit("snapshot generator: the trace list does not start with EMPTY_LIST MEMOIZE")
    items = trace.items
    # Per entry: its bytes, where time_us's 7 bytes are, its fields' nodes and values.
    rows = []
    for e in items:
        f = _fields(e)
        t = f["time_us"]
        if data[t.start:t.start + 2] != b"\x8a\x07":
            raise SystemExit("snapshot generator: a time_us is not a 7-byte LONG1")
        rows.append(dict(start=e.start, end=e.end, time_off=t.start + 2 - e.start, time=t.value, fields=f,
                         addr=f["addr"].resolved().value, size=f["size"].resolved().value,
                         action=f["action"].resolved().value))
    action_memo = {r["action"]: r["fields"]["action"].resolved().memo for r in rows}
    if None in action_memo.values() or "alloc" not in action_memo:
        raise SystemExit("snapshot generator: the action strings are not memoized")
    live, before = {}, {}
    for r in rows:
        if r["action"] == "alloc":
            live[r["addr"]] = r
        elif r["action"] == "free_requested":
            if r["addr"] in live:
                del live[r["addr"]]
            else:
                before[r["addr"]] = r

    def entry(r, action, addr, size, when):
        """The bytes of entry `r` with action, addr, size and time_us replaced."""
        f = r["fields"]
        new = {"action": b"j" + struct.pack("<I", action_memo[action]), "addr": _long1(addr),
               "size": b"J" + struct.pack("<i", size), "time_us": _long1(when)}
        out, at = bytearray(), r["start"]
        for key, node in sorted(((k, f[k]) for k in new), key=lambda kv: kv[1].start):
            out += data[at:node.start] + new[key]
            at = node.end
        return bytes(out + data[at:r["end"]])

    # The state between two copies: the segments, and the blocks active at the end except those the
    # window left live without finding them live.
    left_live = {a for a in live if a not in before}
    found_live = [before[a] for a in sorted(before) if a not in live]
    segments = []
    active = []
    for seg in top["segments"].resolved().items:
        sf = _fields(seg)
        base = sf["address"].resolved().value
        segments.append((base, base + sf["total_size"].resolved().value))
        for blk in sf["blocks"].resolved().items:
            bf = _fields(blk)
            addr = bf["address"].resolved().value
            if bf["state"].resolved().value == "active_allocated" and addr not in left_live:
                active.append((addr, addr + bf["size"].resolved().value))

    def reset(when):
        out = []
        for a in sorted(left_live):
            out += [entry(live[a], act, a, live[a]["size"], when) for act in ("free_requested", "free_completed")]
        occupied = list(active)
        for r in found_live:
            y = r["addr"]
            seg = next(g for g in segments if g[0] <= y < g[1])
            start = max([e for b, e in occupied if seg[0] <= b < y] + [seg[0]])
            if start < y:
                out.append(entry(r, "alloc", start, y - start, when))
            out.append(entry(r, "alloc", y, r["size"], when))
            if start < y:
                out += [entry(r, act, start, y - start, when) for act in ("free_requested", "free_completed")]
            occupied.append((y, y + r["size"]))
        return out

    first = [data[r["start"]:r["end"]] for r in rows]
    memoizes = sum(1 for p in memoize_at if trace.start + 2 <= p < trace.end)  # one copy's
    boundary = sum(1 for p in memoize_at if p < trace.end)
    gap = max(1, (rows[-1]["time"] - rows[0]["time"]) // len(rows))
    period = rows[-1]["time"] - rows[0]["time"] + 2 * gap
    per_copy = len(rows) + len(reset(0))
    copies = max(1, -(-(entries - len(rows)) // per_copy) + 1)
    shift = (memoizes + len(reset(0))) * (copies - 1)  # every reset entry memoizes its dict

    with open(out_path, "wb") as out:
        frame = bytearray()

        def emit(piece):
            nonlocal frame
            frame += piece
            if len(frame) >= 64 * 1024:
                out.write(b"\x95" + struct.pack("<Q", len(frame)) + frame)
                frame = bytearray()

        out.write(data[:2])  # PROTO 4
        emit(data[2:trace.start + 2])  # up to the trace list's EMPTY_LIST MEMOIZE
        n = 0
        for k in range(copies):
            dt = k * period
            pieces = (b[:r["time_off"]] + (r["time"] + dt).to_bytes(7, "little", signed=True) + b[r["time_off"] + 7:]
                      for b, r in zip(first, rows))
            if k + 1 < copies:
                pieces = itertools.chain(pieces, reset(rows[-1]["time"] + dt + gap))
            for piece in pieces:
                if n % 1000 == 0:
                    emit(b"(")  # MARK
                emit(piece)
                n += 1
                if n % 1000 == 0:
                    emit(b"e")  # APPENDS
        if n % 1000 != 0:
            emit(b"e")
        # The rest, memo references past the traces moved past the copies' memo entries.
        tail = bytearray()
        for name, arg, pos, end in listed:
            if pos < trace.end:
                continue
            if name in ("BINGET", "LONG_BINGET") and arg >= boundary:
                tail += b"j" + struct.pack("<I", arg + shift)
            else:
                tail += data[pos:end]
        emit(bytes(tail[:-1]))
        if frame:
            out.write(b"\x95" + struct.pack("<Q", len(frame)) + frame)
        out.write(b".")  # STOP, outside a frame as the pickler writes it
    return n


# ---- --scale: generated 1 M / 10 M-entry snapshots, whole processes -----------------------------------
PY_LOAD = "import pickle, sys\nwith open(sys.argv[1], 'rb') as f:\n    pickle.load(f)\n"


def run_child(argv, limit_bytes, optional=False):
    """Runs `argv` to its end with stdout discarded; returns (CPU seconds user + system, peak RSS bytes,
    exit status), or None for an `optional` run stopped at the limit. The child's address space is capped at twice `limit_bytes` (prlimit's RLIMIT_AS, a
    backstop) and it is killed when its resident memory passes `limit_bytes` (polled every 20 ms), so
    that no run can take the shared machine's memory."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (2 * limit_bytes, 2 * limit_bytes))

    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=cap)
    killed = False
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        try:
            with open(f"/proc/{child.pid}/statm") as f:
                rss = int(f.read().split()[1]) * resource.getpagesize()
        except OSError:
            rss = 0
        if rss > limit_bytes and not killed:
            child.kill()
            killed = True
        time.sleep(0.02)
    err = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    if killed and optional:
        return None
    if killed:
        raise SystemExit(f"{argv[0]} passed the memory limit ({limit_bytes / 2**30:.1f} GiB) and was stopped")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({code}): {err.strip()[-500:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def scale(args):
    sizes = [int(float(n)) for n in args.scale.split(",")]
    source = args.source or os.path.join(ROOT, "../shared/traces/public/cs336-bcrafton/memory_snapshot.pickle")
    if not os.path.isfile(source):
        # A clean clone has no ../shared (review finding: a traceback said so before).
        raise SystemExit(f"snapshot_vs_pickle.py: {source}: no such snapshot to repeat; give one with "
                         f"--source SNAPSHOT.pickle (the default is the public cs336-bcrafton snapshot, "
                         f"../shared/traces/public, SOURCES.md)")
    limit = int(args.memory_limit_gib * 2**30)
    gpumem = args.gpumem
    folder = tempfile.mkdtemp(prefix="gpumem_snapshot_scale_", dir="/tmp")
    print(f"source: {os.path.relpath(source, ROOT)}; times: best of {args.rounds} rounds, CPU time (user + system)"
          f" of the whole process; peak RSS of that process; every process capped at {args.memory_limit_gib:g} GiB")
    print(f"{'entries':>9} {'MiB':>6} {'pickle.load':>12} {'RSS':>8} {'info':>9} {'RSS':>8} {'analyze':>9} {'RSS':>8}"
          f" {'speed':>6} {'memory':>6} {'an/info':>7} {'B/entry':>7}")
    try:
        for n in sizes:
            path = os.path.join(folder, f"snapshot_{n}.pickle")
            written = write_repeated_snapshot(source, n, path)
            if args.check:  # the generated file must give the source's anomalies and no others
                out = subprocess.run([gpumem, "info", "--format", "json", path], check=True, capture_output=True,
                                     text=True).stdout
                kinds = sorted(a["code"] for a in json.loads(out)[0]["anomalies"])
                print(f"  {written} entries: anomalies {', '.join(kinds)}")
            runs = {"py": [sys.executable, "-c", PY_LOAD, path], "info": [gpumem, "info", path],
                    "analyze": [gpumem, "analyze", "--format", "json", path]}
            if args.baseline_gpumem:
                runs["base"] = [args.baseline_gpumem, "info", path]
            best = {k: (math.inf, 0) for k in runs}
            for _ in range(max(1, args.rounds)):
                for name, argv in runs.items():  # alternating: each round sees the same load
                    got = run_child(argv, limit, optional=name == "base")
                    if got is None:
                        best[name] = None
                    elif best[name] is not None:
                        best[name] = (min(best[name][0], got[0]), max(best[name][1], got[1]))
            py, info, an = best["py"], best["info"], best["analyze"]
            print(f"{written:9d} {os.path.getsize(path) / 2**20:6.0f} {py[0]:10.2f} s {py[1] / 2**30:5.2f} G"
                  f" {info[0]:7.2f} s {info[1] / 2**30:5.2f} G {an[0]:7.2f} s {an[1] / 2**30:5.2f} G"
                  f" {py[0] / info[0]:5.2f}x {info[1] / py[1]:5.2f}x {an[0] / info[0]:6.2f}x {info[1] / written:7.0f}")
            if args.baseline_gpumem:
                base = best["base"]
                if base is None:
                    print(f"  baseline info ({args.baseline_gpumem}): stopped above {args.memory_limit_gib:g} GiB")
                else:
                    print(f"  baseline info ({args.baseline_gpumem}): {base[0]:.2f} s, {base[1] / 2**30:.2f} G:"
                          f" speed {py[0] / base[0]:.2f}x, memory {base[1] / py[1]:.2f}x, {base[1] / written:.0f} B/entry")
            os.remove(path)
    finally:
        shutil.rmtree(folder)
    print("speed: pickle.load CPU time / gpumem info CPU time (higher = gpumem faster); memory: info peak RSS /"
          " pickle.load peak RSS; an/info: analyze CPU time / info CPU time; B/entry: info peak RSS per entry")
    print("the RSS columns are the largest of the rounds (peak RSS barely varies); the times the smallest")


if __name__ == "__main__":
    main()
