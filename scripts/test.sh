#!/usr/bin/env bash
# Builds gpumem with the ci preset (Release, warnings as errors) and runs the whole test suite, then
# core's and the importers' tests once more in a build without libdeflate (the zlib fallback, preset ci-zlib).
# Tests labelled `gpu` run only where nvidia-smi sees a GPU. Then builds the .deb and runs it from a
# temporary root (scripts/package-check.sh), and the fuzz harnesses, each run once over its kept inputs
# (scripts/fuzz.sh check). Exits non-zero on any failure; the last lines say which
# parts were built and how many tests of each passed (scripts/test_summary.py).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset ci >build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
tail -n 30 build-configure.log
rm -f build-configure.log
cmake --build --preset ci -j "$(nproc)"
exclude=()
if ! (command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1); then
  echo "test.sh: no GPU found: tests labelled 'gpu' are excluded" >&2
  exclude=(-LE gpu)
fi
junit=$PWD/build/ci/ctest-results.xml
rm -f "$junit"
ctest_rc=0
ctest --preset ci -j "$(nproc)" "${exclude[@]}" --output-junit "$junit" || ctest_rc=$?
if [ "$ctest_rc" -ne 0 ]; then
  [ -f "$junit" ] && python3 scripts/test_summary.py build/ci "$junit" "FAILED: ctest exited $ctest_rc"
  exit "$ctest_rc"
fi
# The zlib fallback (a build without libdeflate-dev: gunzip, the cut-gzip recovery and .gmt checksums
# take other code paths) is built too, with core's and the importers' tests only.
cmake --preset ci-zlib >build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
rm -f build-configure.log
cmake --build --preset ci-zlib -j "$(nproc)"
zlib=""
for suite in test_core test_importers; do
  build/ci-zlib/tests/$suite --gtest_brief=1 | tee build/ci-zlib/$suite.log
  zlib+="${zlib:+, }$suite $(grep -o '\[  PASSED  \] [0-9]* tests\?' build/ci-zlib/$suite.log | grep -o '[0-9]*' || echo 0)"
done
# The .deb, unpacked into a temporary root and run from there.
scripts/package-check.sh build/ci
# The libFuzzer harnesses (clang, ASan, UBSan; build/fuzz) built, and each run once over the inputs kept in
# fuzz/corpus/ and its seeds: a harness that no longer builds, or a kept regression that crashes again, fails
# here rather than at the next fuzzing run (the clang build had stopped compiling unnoticed, 2026-12-03).
scripts/fuzz.sh check | tee build/fuzz-check.log
python3 scripts/test_summary.py build/ci "$junit" \
  "zlib fallback (build/ci-zlib): $zlib passed" \
  "package: $(cd build/ci && ls gpumem_*.deb) unpacked into a temporary root and run (scripts/package-check.sh)" \
  "$(tail -n 1 build/fuzz-check.log) (scripts/fuzz.sh check)"
