#!/usr/bin/env python3
"""The last lines of scripts/test.sh: which parts a build folder holds and what its tests did.

usage: scripts/test_summary.py BUILD_DIR JUNIT_XML [NOTE...]

BUILD_DIR is a configured and built CMake folder (its CMakeCache.txt says which parts were ON);
JUNIT_XML is what `ctest --output-junit` wrote for the run; each NOTE is printed as one more line
(the zlib build, the package check). Tests are counted by their first CTest label, which is their
test binary's folder (core, importers, replay, analyze, cli, gui, tracer) for the GoogleTest suites. A test
counts as skipped when CTest did not run it or reported it skipped (GTEST_SKIP, SKIP_RETURN_CODE).
Exits 0; the caller decides what failed.
"""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET


def cache_values(build):
    values = {}
    with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8") as f:
        for line in f:
            if ":" in line and "=" in line and not line.startswith(("#", "//")):
                key, _, rest = line.partition(":")
                values[key] = rest.partition("=")[2].strip()
    return values


def is_on(values, key):
    return values.get(key, "").upper() in ("ON", "TRUE", "1", "YES")


def labels_by_test(build):
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True, text=True, check=True)
    labels = {}
    for test in json.loads(out.stdout).get("tests", []):
        for prop in test.get("properties", []):
            if prop.get("name") == "LABELS":
                labels[test["name"]] = [l for l in prop.get("value", []) if l]
        labels.setdefault(test["name"], [])
    return labels


def executables(folder):
    if not os.path.isdir(folder):
        return []
    return sorted(n for n in os.listdir(folder)
                  if os.path.isfile(os.path.join(folder, n)) and os.access(os.path.join(folder, n), os.X_OK))


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    build, junit, notes = argv[1], argv[2], argv[3:]
    values = cache_values(build)
    built, missing = ["gpumem"], []
    for key, what, where in (("GPUMEM_BUILD_GUI", "gpumem-gui (viewer)", "gui/gpumem-gui"),
                             ("GPUMEM_BUILD_TRACER", "libgpumem_tracer.so (tracer)", "tracer/libgpumem_tracer.so")):
        (built if is_on(values, key) and os.path.exists(os.path.join(build, where)) else missing).append(what)
    # MPI: the gpumem binary links Open MPI's library (GPUMEM_BUILD_MPI); tests labelled mpi run it.
    (built if is_on(values, "GPUMEM_BUILD_MPI") else missing).append("MPI (mpirun/srun spreading)")
    benches = executables(os.path.join(build, "bench"))
    (built if is_on(values, "GPUMEM_BUILD_BENCHMARKS") and benches else missing).append(
        f"{len(benches)} benchmark programs" if benches else "benchmarks")
    man = os.path.join(build, "man", "man1")
    pages = [n for n in os.listdir(man) if n.endswith(".1.gz")] if os.path.isdir(man) else []
    (built if pages else missing).append(f"{len(pages)} man pages" if pages else "man pages")

    labels = labels_by_test(build)
    counts, totals = {}, {"passed": 0, "skipped": 0, "failed": 0}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name")
        if case.find("failure") is not None or case.get("status") == "fail":
            result = "failed"
        elif case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
            result = "skipped"
        else:
            result = "passed"
        label = (labels.get(name) or ["(no label)"])[0]
        counts.setdefault(label, {"passed": 0, "skipped": 0, "failed": 0})[result] += 1
        totals[result] += 1
    order = ["core", "importers", "replay", "analyze", "mpi", "cli", "gui", "tracer"]
    ran = sorted(counts, key=lambda l: (order.index(l) if l in order else len(order), l))
    per_label = []
    for label in ran:
        c = counts[label]
        extra = ", ".join(f"{c[k]} {k}" for k in ("skipped", "failed") if c[k])
        per_label.append(f"{label} {c['passed']}" + (f" ({extra})" if extra else ""))
    gpu_tests = sum(1 for ls in labels.values() if "gpu" in ls)
    ran_names = {case.get("name") for case in ET.parse(junit).getroot().iter("testcase")}
    gpu_left_out = sum(1 for n, ls in labels.items() if "gpu" in ls and n not in ran_names)

    print(f"test.sh: built in {build}: " + ", ".join(built))
    print("test.sh: not built: " + (", ".join(missing) if missing else "nothing (every part was built)"))
    print("test.sh: passed per label: " + ", ".join(per_label))
    total = sum(totals.values())
    print(f"test.sh: {total} tests in {build}: {totals['passed']} passed, {totals['skipped']} skipped, "
          f"{totals['failed']} failed" + (f"; {gpu_left_out} of {gpu_tests} 'gpu' tests not run (no GPU)"
                                          if gpu_left_out else ""))
    for note in notes:
        print(f"test.sh: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
