#!/usr/bin/env bash
# The GPU check of the tracer (docs/gpu-check.md): builds tests/gpu/gpu_check.cu (a 3-layer MLP
# trained with cuBLAS, with cudaMalloc, pinned, pool, VMM and NCCL allocations and NVTX ranges per
# step and layer), runs it without the tracer and under `gpumem record`, and checks the trace
# against the program's own expected-allocation list with tests/gpu/check_trace.py.
#
#   scripts/gpu-check.sh --cpu-only [--build-dir DIR]   the CPU half (CI): build the program where
#        nvcc exists, its --plan (no GPU needed), and the checker against synthetic traces made
#        from that plan, clean and broken, through `gpumem convert`
#   scripts/gpu-check.sh [--build-dir DIR] [--out DIR] [--results DIR]   the GPU half, where
#        nvidia-smi sees a GPU; --results gets at most 4 files, even when a step fails: the trace
#        gpu_check.gmt, check.txt, summary.json and gpu-check.tar.gz (everything in --out)
#   scripts/gpu-check.sh --stage DIR [--build-dir DIR]  copy what a GPU machine needs (gpumem, the
#        tracer, gpu_check, their non-system libraries) into DIR, a small folder to carry there;
#        then run `scripts/gpu-check.sh --build-dir DIR` on it
#
# Options: --steps N (20), --max-overhead R (1.5: largest traced/untraced median step time),
# --gpumem PATH (default: found in the build folder); NVCC=PATH picks the CUDA compiler.
# Exit status: 0 passed, 1 failed, 2 usage.
# The whole run is bounded to 5 minutes (each program run to 2).
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."
root=$PWD
# Paths given on the command line are relative to where the script was called from.
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$caller/$1" ;; esac; }

mode=gpu
build=$root/build/ci
out=
stage=
results=
steps=20
max_overhead=1.5
gpumem=
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu-only) mode=cpu ;;
    --build-dir) build=$(absolute "${2:?}"); shift ;;
    --out) out=$(absolute "${2:?}"); shift ;;
    --stage) mode=stage; stage=$(absolute "${2:?}"); shift ;;
    --results) results=$(absolute "${2:?}"); shift ;;
    --steps) steps=${2:?}; shift ;;
    --max-overhead) max_overhead=${2:?}; shift ;;
    --gpumem) gpumem=$(absolute "${2:?}"); shift ;;
    -h|--help) usage ;;
    *) echo "gpu-check: unknown option $1" >&2; usage ;;
  esac
  shift
done
out=${out:-$build/gpu-check}
mkdir -p "$out"
log() { echo "gpu-check: $*"; }
die() { echo "gpu-check: $*" >&2; exit 1; }
deadline=$((SECONDS + 300))
left() { echo $((deadline - SECONDS)); }
# At most $1 seconds, and never past the 5-minute deadline.
cap() { local l; l=$(left); [ "$l" -gt 10 ] || die "out of time (5 minutes)"; echo $(( l < $1 ? l : $1 )); }

# ------------------------------------------------------------------------ what the build holds
# A ci/dev build folder (cli/gpumem, tracer/libgpumem_tracer.so, gpu_check/gpu_check) or a staged
# one (bin/ and lib/).
first_file() { for f in "$@"; do [ -f "$f" ] && { echo "$f"; return 0; }; done; return 1; }
gpumem=${gpumem:-$(first_file "$build/bin/gpumem" "$build/cli/gpumem" || true)}
tracer=$(first_file "$build/lib/libgpumem_tracer.so" "$build/tracer/libgpumem_tracer.so" || true)
# GPU_CHECK_PROGRAM replaces gpu_check (tests/gpu/rehearse_gpu_half.sh runs a stand-in).
program=${GPU_CHECK_PROGRAM:-$(first_file "$build/bin/gpu_check" "$build/gpu_check/gpu_check" || true)}
src=$root/tests/gpu/gpu_check.cu
checker=$root/tests/gpu/check_trace.py
sample_plan=$root/tests/gpu/data/plan-steps4.jsonl
if [ -d "$build/lib" ]; then
  export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# $NVCC picks the compiler (a path that is not executable means none: the CI-without-nvcc test).
if [ -n "${NVCC:-}" ]; then
  nvcc=$NVCC
  [ -x "$nvcc" ] || nvcc=
else
  nvcc=$(command -v nvcc || true)
  [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
fi
cuda_home=${CUDA_HOME:-/usr/local/cuda}

# Builds gpu_check with nvcc into $build/gpu_check/ when it is missing or older than its source.
# cuBLAS is linked (the program is an MLP on it); NCCL is opened with dlopen at run time, and
# compiled in only where nccl.h exists (the program then says so in its header line).
build_program() {
  local dir=$build/gpu_check bin=$build/gpu_check/gpu_check
  if [ -x "$bin" ] && [ "$bin" -nt "$src" ]; then program=$bin; return 0; fi
  if [ -z "$nvcc" ]; then
    log "SKIP build: nvcc not found (${NVCC:+NVCC=$NVCC, }PATH, /usr/local/cuda/bin); gpu_check is not built"
    return 1
  fi
  if ! ls "$cuda_home"/lib64/libcublas.so* >/dev/null 2>&1 && ! ls "$cuda_home"/lib/libcublas.so* >/dev/null 2>&1; then
    log "SKIP build: cuBLAS (libcublas.so) not found in $cuda_home; gpu_check is not built"
    return 1
  fi
  if [ ! -f "$cuda_home/include/nccl.h" ] && [ ! -f /usr/include/nccl.h ]; then
    log "NOTE: nccl.h not found ($cuda_home/include, /usr/include): gpu_check is built without NCCL"
  fi
  mkdir -p "$dir"
  log "building $bin with $nvcc"
  # sm_80 (A100), sm_90 (H100/H200) and compute_90 PTX for newer GPUs.
  "$nvcc" -std=c++17 -O2 -Xcompiler -Wall,-Wextra,-Werror -Werror all-warnings \
    -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code='[sm_90,compute_90]' \
    -I"$cuda_home/include" "$src" -o "$bin.tmp.$$" \
    -L"$cuda_home/lib64" -lcublas -ldl -Xlinker -rpath,"$cuda_home/lib64" \
    || die "nvcc failed to build $src"
  mv "$bin.tmp.$$" "$bin"
  program=$bin
}

# ------------------------------------------------------------------------------- the CPU half
cpu_half() {
  local plan=$out/plan.jsonl
  if build_program && [ -n "$program" ]; then
    "$program" --plan --steps 4 -o "$plan" || die "$program --plan failed"
    log "gpu_check --plan --steps 4: $(grep -c '"type":"op"' "$plan") planned operations (no GPU touched)"
    # The committed plan is what the program plans; a change to the program must update it.
    if ! cmp -s "$plan" "$sample_plan"; then
      diff "$sample_plan" "$plan" | head -20 >&2 || true
      die "the plan differs from $sample_plan; if the program changed on purpose, run:" \
          "$program --plan --steps 4 -o tests/gpu/data/plan-steps4.jsonl"
    fi
  else
    log "using the committed plan $sample_plan instead of a fresh one"
    cp "$sample_plan" "$plan"
  fi
  local via=()
  if [ -n "$gpumem" ] && [ -x "$gpumem" ]; then
    via=(--gpumem "$gpumem")
  else
    log "NOTE: no gpumem in $build: the synthetic traces skip the .gmt round trip"
  fi
  python3 "$checker" selftest --plan "$plan" "${via[@]}" --workdir "$out/selftest" || die "the checker's self-test failed"
  # The command-line path the GPU half takes: synth → (gmt → jsonl) → check, clean and broken.
  local s=$out/selftest
  python3 "$checker" synth --plan "$plan" --expected-out "$s/run.jsonl" --trace-out "$s/trace.jsonl" \
    --baseline-out "$s/baseline.jsonl"
  python3 "$checker" synth --plan "$plan" --mutate drop_alloc --expected-out "$s/run-bad.jsonl" \
    --trace-out "$s/trace-bad.jsonl"
  local trace=$s/trace.jsonl bad=$s/trace-bad.jsonl
  if [ ${#via[@]} -gt 0 ]; then
    "$gpumem" convert "$trace" -o "$s/trace.gmt" >/dev/null
    "$gpumem" convert --to jsonl "$s/trace.gmt" -o "$s/trace.back.jsonl" >/dev/null
    trace=$s/trace.back.jsonl
  fi
  python3 "$checker" check --expected "$s/run.jsonl" --trace "$trace" --plan "$plan" \
    --baseline "$s/baseline.jsonl" --summary "$s/summary.json" >"$s/check.txt" \
    || { cat "$s/check.txt"; die "check_trace.py check fails the clean synthetic trace"; }
  local rc=0
  python3 "$checker" check --expected "$s/run-bad.jsonl" --trace "$bad" >"$s/check-bad.txt" || rc=$?
  [ "$rc" = 1 ] || { cat "$s/check-bad.txt"; die "check_trace.py check gave $rc, not 1, on a trace missing an allocation"; }
  log "check_trace.py check: 0 on the clean synthetic trace, 1 on one missing an allocation"
  tracer_replay "$plan" "$s"
  log "PASSED (CPU half)"
}

# The tracer's own code (tests/gpu/tracer_replay.cpp) writes the trace of a run list; the checker
# must pass it, also when NCCL's buffers come through cuMem* (the tracer names the library that
# called cuMemMap from the calling stack; until 2026-12-04 it named none, a gap the first GPU run
# showed: 194 of NCCL's maps, docs/gpu-check.md).
tracer_replay() {
  local plan=$1 s=$2 replay=$build/tests/gpu/gpu_check_tracer_replay
  if [ ! -x "$replay" ] || [ -z "$gpumem" ]; then
    log "SKIP tracer replay: no $replay or no gpumem (a build with the tracer has both)"
    return 0
  fi
  "$replay" "$s/run.jsonl" "$s/replay.gmt" || die "gpu_check_tracer_replay failed"
  "$gpumem" convert --to jsonl "$s/replay.gmt" -o "$s/replay.jsonl" >/dev/null
  python3 "$checker" check --expected "$s/run.jsonl" --trace "$s/replay.jsonl" --plan "$plan" \
    --baseline "$s/baseline.jsonl" >"$s/replay-check.txt" \
    || { cat "$s/replay-check.txt"; die "the checker fails the trace the tracer's code wrote"; }
  "$replay" "$s/run.jsonl" "$s/replay-cumem.gmt" --nccl-cumem || die "gpu_check_tracer_replay --nccl-cumem failed"
  "$gpumem" convert --to jsonl "$s/replay-cumem.gmt" -o "$s/replay-cumem.jsonl" >/dev/null
  python3 "$checker" check --expected "$s/run.jsonl" --trace "$s/replay-cumem.jsonl" >"$s/replay-cumem-check.txt" \
    || { cat "$s/replay-cumem-check.txt"; die "the checker fails the trace with NCCL's buffers through cuMem*"; }
  log "tracer replay: the tracer's own code writes a trace the checker passes, NCCL through cudaMalloc or cuMem*"
}

# ----------------------------------------------------------------------------------- staging
# Copies a library and the non-system libraries it needs (ldd) into $1/lib; glibc's own stay out.
copy_deps() {
  local dest=$1 bin=$2
  ldd "$bin" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libutil.so*|ld-linux*|libcuda.so*|libnvidia*) ;;
      libcublas*|libnccl*) ;;  # hundreds of MB: found on the GPU machine instead (find_cuda_libs)
      libstdc++*|libgcc_s*) cp -L "$lib" "$dest/lib/fallback/" ;;
      *) cp -L "$lib" "$dest/lib/" ;;
    esac
  done
}

stage_build() {
  [ -n "$gpumem" ] && [ -x "$gpumem" ] || die "no gpumem in $build (build it: cmake --build --preset ci --target gpumem)"
  [ -n "$tracer" ] || die "no libgpumem_tracer.so in $build (the tracer needs the CUDA toolkit with CUPTI)"
  build_program || die "gpu_check cannot be built here (see above)"
  rm -rf "$stage"
  mkdir -p "$stage/bin" "$stage/lib/fallback"
  cp "$gpumem" "$program" "$stage/bin/"
  cp "$tracer" "$stage/lib/"
  copy_deps "$stage" "$gpumem"
  copy_deps "$stage" "$tracer"
  copy_deps "$stage" "$program"
  # libcupti (4 MB) goes along: the tracer needs one that matches its headers (13.x).
  local cupti
  cupti=$(ldd "$tracer" | awk '/libcupti/{print $3}')
  [ -n "$cupti" ] && cp -L "$cupti" "$stage/lib/"
  local glibc
  glibc=$(objdump -T "$stage"/bin/* "$stage"/lib/*.so* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
  log "staged in $stage ($(du -sh "$stage" | cut -f1)); needs $glibc or newer on the GPU machine:"
  ls -l "$stage/bin" "$stage/lib" | sed 's/^/  /'
  log "carry it and run: scripts/gpu-check.sh --build-dir ${stage#"$root"/} --out \$OUT"
}

# ------------------------------------------------------------------------------- the GPU half
# Puts on LD_LIBRARY_PATH the folders that hold what gpu_check and the tracer need and the loader
# cannot find: cuBLAS and NCCL from the CUDA toolkit, or from PyTorch's nvidia-* wheels.
find_cuda_libs() {
  local want=(libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libcupti.so.13) roots=() extra=()
  roots+=("$cuda_home/lib64" "$cuda_home/lib" /usr/local/cuda-13*/lib64 /usr/lib/x86_64-linux-gnu)
  local py
  for py in python3 python; do
    command -v "$py" >/dev/null || continue
    while read -r d; do [ -d "$d/nvidia" ] && roots+=("$d/nvidia"); done \
      < <("$py" -c 'import site,sys; print("\n".join(site.getsitepackages()+[site.getusersitepackages()]))' 2>/dev/null || true)
  done
  local name r hit known
  known=$(ldconfig -p 2>/dev/null || true)  # (grep -q on a pipe would die of SIGPIPE under pipefail)
  for name in "${want[@]}"; do
    if grep -q " $name " <<<"$known"; then continue; fi
    hit=
    for r in "${roots[@]}"; do
      [ -d "$r" ] || continue
      hit=$(find "$r" -maxdepth 3 -name "$name" 2>/dev/null | head -1)
      [ -n "$hit" ] && break
    done
    if [ -n "$hit" ]; then
      extra+=("$(dirname "$hit")")
    else
      log "NOTE: $name not found (ldconfig, ${roots[*]})"
    fi
  done
  if [ ${#extra[@]} -gt 0 ]; then
    local joined
    joined=$(printf '%s\n' "${extra[@]}" | awk '!seen[$0]++' | paste -sd:)
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$joined"
  fi
}

# The few files a GPU machine sends back (at most 8 come back from a device run): copied on any exit.
collect_results() {
  [ -n "$results" ] || return 0
  mkdir -p "$results"
  local f
  for f in gpu_check.gmt check.txt summary.json; do
    [ -f "$out/$f" ] && cp "$out/$f" "$results/"
  done
  tar -czf "$results/gpu-check.tar.gz" -C "$(dirname "$out")" "$(basename "$out")" 2>/dev/null || true
}

gpu_half() {
  trap collect_results EXIT
  command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 \
    || die "no GPU (nvidia-smi sees none); the CPU half is scripts/gpu-check.sh --cpu-only"
  [ -n "$gpumem" ] && [ -x "$gpumem" ] || die "no gpumem in $build"
  [ -n "$tracer" ] || die "no libgpumem_tracer.so in $build"
  [ -n "$program" ] || build_program || die "no gpu_check in $build and it cannot be built here"
  find_cuda_libs
  if ! "$gpumem" --version >/dev/null 2>&1 && [ -d "$build/lib/fallback" ]; then
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$build/lib/fallback"
  fi
  "$gpumem" --version >/dev/null || die "$gpumem does not run here: $("$gpumem" --version 2>&1 | head -3)"
  local missing
  missing=$(ldd "$program" 2>/dev/null | grep 'not found' || true)
  [ -z "$missing" ] || die "gpu_check cannot load: $(echo "$missing" | tr -s ' \t\n' ' ')"
  export GPUMEM_TRACER_LIBRARY=$tracer
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    "$gpumem" --version
  } | tee "$out/environment.txt"
  rm -rf "$out/trace" && mkdir -p "$out/trace"
  "$program" --plan --steps "$steps" -o "$out/plan.jsonl" || die "gpu_check --plan failed"
  # From here on a failed step is noted and the rest still runs: one GPU run should tell all it can.
  local problems=() rc=0 base=(--baseline "$out/baseline.jsonl")
  log "baseline run (no tracer), $steps steps"
  timeout "$(cap 120)" "$program" --steps "$steps" -o "$out/baseline.jsonl" >"$out/baseline.log" 2>&1 || rc=$?
  cat "$out/baseline.log"
  if [ "$rc" != 0 ]; then
    problems+=("gpu_check without the tracer failed (exit $rc; baseline.log)")
    base=()
  fi
  log "traced run: gpumem record -o $out/trace -- gpu_check"
  rc=0
  GPUMEM_TRACER_VERBOSE=1 timeout "$(cap 150)" "$gpumem" record -o "$out/trace" -- \
    "$program" --steps "$steps" -o "$out/run.jsonl" >"$out/record.txt" 2>"$out/record.log" || rc=$?
  cat "$out/record.log" "$out/record.txt"
  [ "$rc" = 0 ] || problems+=("gpumem record -- gpu_check failed (exit $rc; record.log)")
  local files
  files=$(find "$out/trace" -name '*.gmt' | sort)
  if [ "$(echo "$files" | grep -c .)" != 1 ]; then
    die "expected one .gmt in $out/trace, found: ${files:-none}${problems:+; ${problems[*]}}"
  fi
  cp "$files" "$out/gpu_check.gmt"
  "$gpumem" info "$out/gpu_check.gmt" | tee "$out/info.txt" || problems+=("gpumem info cannot read the trace")
  "$gpumem" convert --to jsonl "$out/gpu_check.gmt" -o "$out/trace.jsonl" >/dev/null \
    || die "gpumem convert cannot read $out/gpu_check.gmt${problems:+; ${problems[*]}}"
  log "checking ($(left) s left of 300)"
  local crc=0
  python3 "$checker" check --expected "$out/run.jsonl" --trace "$out/trace.jsonl" --plan "$out/plan.jsonl" \
    "${base[@]}" --max-overhead "$max_overhead" --summary "$out/summary.json" \
    | tee "$out/check.txt" || crc=${PIPESTATUS[0]}
  gzip -kf "$out/trace.jsonl"
  log "outputs in $out: gpu_check.gmt (commit to traces/), check.txt, summary.json, *.log"
  [ "$crc" = 0 ] || problems+=("the checker found failures (check.txt)")
  if [ ${#problems[@]} -gt 0 ]; then
    printf 'gpu-check: %s\n' "${problems[@]}" | tee -a "$out/check.txt" >&2
    die "FAILED (GPU half)"
  fi
  log "PASSED (GPU half)"
}

case "$mode" in
  cpu) cpu_half ;;
  stage) stage_build ;;
  gpu) gpu_half ;;
esac
