#!/usr/bin/env bash
# One-call GPU check for the device machine (H200): configure with MOERL_CUDA=ON against
# the machine's CUDA libtorch, build (Release, -j16), run the GPU tests, compute-sanitizer
# on the EP kernels, the moerl benchmarks and the Hugging Face baselines, print one table.
#   scripts/gpu-check.sh            # logs and JSON under $OUT (or ./gpu-out)
# Build deps the GPU image lacks travel packed in .gpudeps/ (dev/gpu/pack-deps.sh).
# Env: GPU_CHECK_SKIP_HF=1 skips the HF baselines; GPU_CHECK_FULL_BUILD_S (default 120) bounds
# the final whole-project build that reports other parts' compile errors against libtorch 2.x.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
L=$OUT/logs
mkdir -p "$L"
B=${GPU_BUILD_DIR:-build-gpu}
source "$ROOT/dev/gpu/env.sh"
step() { echo "== $(date -u +%T) $*"; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv; nvcc --version | tail -1;
  python3 -c 'import torch,transformers;print("torch",torch.__version__,"transformers",transformers.__version__)'; } 2>&1 | tee "$L/env.txt"

step configure
GPU_ONLY=OFF
if ! gpu_configure "$B" OFF >"$L/configure.log" 2>&1; then
  step "full configure failed (see configure.log); retrying with MOERL_GPU_ONLY=ON"
  grep -E "Error|error" -A3 "$L/configure.log" | head -20
  GPU_ONLY=ON
  gpu_configure "$B" ON >>"$L/configure.log" 2>&1 || { tail -30 "$L/configure.log"; exit 1; }
fi
step "build GPU targets"
if ! ninja -C "$B" -j16 moerl_gpu_tests moerl_moe_bench moerl_gen_bench >"$L/build.log" 2>&1; then
  grep -E "error|FAILED" "$L/build.log" | head -40
fi

if [ -x "$B/src/model/cuda/moerl_gpu_tests" ]; then
  step "GPU tests"
  "${RUNENV[@]}" "$B/src/model/cuda/moerl_gpu_tests" --gtest_output=json:"$OUT/tests.json" >"$L/tests.log" 2>&1
  rc=$?; echo "tests rc=$rc" | tee -a "$L/tests.log"
  grep -E "^\[  (FAILED|PASSED) |Failure|Expected|Which is|rel_err|error|exception" "$L/tests.log" | head -40
  if [ $rc -gt 128 ]; then  # crashed: where (cuda-gdb also debugs host code here)
    last=$(grep -E "^\[ RUN" "$L/tests.log" | tail -1 | awk '{print $4}')
    "${RUNENV[@]}" timeout 120 cuda-gdb -batch -ex run -ex bt --args "$B/src/model/cuda/moerl_gpu_tests" --gtest_filter="$last" \
      >"$L/tests_gdb.log" 2>&1; grep -E "^#" "$L/tests_gdb.log" | head -15
    "${RUNENV[@]}" "$B/src/model/cuda/moerl_gpu_tests" --gtest_filter="-$last" >"$L/tests_rest.log" 2>&1
    echo "tests without $last rc=$?"; grep -E "^\[  (FAILED|PASSED) |Failure|exception" "$L/tests_rest.log" | head -20
  fi
  step "compute-sanitizer (memcheck, racecheck) on EP kernels"
  for tool in memcheck racecheck; do
    timeout 240 "${RUNENV[@]}" compute-sanitizer --tool $tool --error-exitcode 9 \
      "$B/src/model/cuda/moerl_gpu_tests" --gtest_filter='EpCudaKernels.*:MoeGpu.Swiglu*' >"$L/sanitizer_$tool.log" 2>&1
    echo "sanitizer $tool rc=$?" | tee -a "$L/sanitizer_$tool.log"; tail -3 "$L/sanitizer_$tool.log"
  done
fi
if [ -x "$B/dev/gpu/moerl_moe_bench" ]; then
  step "moe bench"; "${RUNENV[@]}" "$B/dev/gpu/moerl_moe_bench" "$OUT/moe.json" 2>&1 | tee "$L/moe_bench.log"
fi
if [ -x "$B/dev/gpu/moerl_gen_bench" ]; then
  step "gen bench"; "${RUNENV[@]}" timeout 200 "$B/dev/gpu/moerl_gen_bench" "$OUT/gen.json" 2>&1 | tee "$L/gen_bench.log"
  if [ "${PIPESTATUS[0]}" -gt 128 ]; then
    "${RUNENV[@]}" timeout 120 cuda-gdb -batch -ex run -ex bt --args "$B/dev/gpu/moerl_gen_bench" /dev/null \
      >"$L/gen_gdb.log" 2>&1; grep -E "^#" "$L/gen_gdb.log" | head -15
  fi
fi
if [ "${GPU_CHECK_SKIP_HF:-0}" != 1 ]; then
  step "HF baselines"; timeout 240 python3 dev/gpu/hf_reference.py "$OUT/hf.json" 2>&1 | tail -20 | tee "$L/hf.log"
fi
if [ "$GPU_ONLY" = OFF ]; then
  step "whole project against this libtorch (bounded ${GPU_CHECK_FULL_BUILD_S:-120}s)"
  timeout "${GPU_CHECK_FULL_BUILD_S:-120}" ninja -C "$B" -j16 -k 0 >"$L/full_build.log" 2>&1
  echo "full build rc=$? (124 = ran out of time)"; grep -E "FAILED|error:" "$L/full_build.log" | head -30
fi
step table
python3 dev/gpu/table.py "$OUT/moe.json" "$OUT/gen.json" "$OUT/hf.json" | tee "$OUT/table.md"
tar -czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"
