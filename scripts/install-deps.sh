#!/usr/bin/env bash
# Installs the Debian 12 packages gpumem builds and tests with — only those missing, so a second run
# does nothing. Needs root (or sudo). The CUPTI tracer additionally needs NVIDIA's CUDA toolkit at
# /usr/local/cuda, which is not a Debian package; without it the tracer is simply not built.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git python3
  nlohmann-json3-dev libboost-program-options-dev zlib1g-dev libdeflate-dev libsimdjson-dev
  libprotobuf-dev protobuf-compiler libsqlite3-dev libutf8proc-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # the viewer; Qt6Charts loads Qt6OpenGL, which is libqt6opengl6-dev (only a Recommends of qt6-base-dev)
  qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev
  # man pages from the help text; the .deb's Depends (dpkg-shlibdeps is in dpkg-dev; CPack needs file)
  help2man dpkg-dev file
  clang libclang-rt-14-dev
  # MPI: ranks and multi-rank what-if over mpirun/srun processes (mpi/, docs/mpi.md)
  openmpi-bin libopenmpi-dev
  # tests that drive real peers: the module helper under Debian's CPU PyTorch, the HTML report in Chromium
  python3-torch chromium
)
# Extra packages a caller asks for (e.g. GPUMEM_EXTRA_PACKAGES="chromium xvfb").
read -r -a extra <<< "${GPUMEM_EXTRA_PACKAGES:-}"
packages+=("${extra[@]}")

missing=()
for p in "${packages[@]}"; do
  [ -n "$p" ] || continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo="sudo"; else
    echo "install-deps: these packages are missing and installing them needs root: ${missing[*]}" >&2
    exit 1
  fi
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
