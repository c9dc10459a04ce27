#!/usr/bin/env bash
# Builds gpumem with the ci preset (Release, warnings as errors) and runs the whole test suite, then
# core's tests once more in a build without libdeflate (the zlib fallback, preset ci-zlib).
# Tests labelled `gpu` run only where nvidia-smi sees a GPU. Exits non-zero on any failure.
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
ctest --preset ci -j "$(nproc)" "${exclude[@]}"
# The zlib fallback (a build without libdeflate-dev: gunzip, the cut-gzip recovery and .gmt checksums
# take other code paths) is built too, with core's tests only.
cmake --preset ci-zlib >build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
rm -f build-configure.log
cmake --build --preset ci-zlib -j "$(nproc)"
build/ci-zlib/tests/test_core --gtest_brief=1
