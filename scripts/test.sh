#!/usr/bin/env bash
# Builds gpumem with the ci preset (Release, warnings as errors) and runs the whole test suite.
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
