#!/usr/bin/env bash
# One device call for the decode step's own kernels (model/cuda/decode_kernels.h): build,
# their GPU tests, memcheck on them, the MoE bench's decode shapes and `bench gen
# --compare-kernels` at all 48 layers of Qwen3-30B-A3B (24 on a card under 100 GB).
#   dev/gpu/pack-deps.sh; then on the device (carry .gpudeps): dev/gpu/kernels-check.sh
# Logs and JSON under $OUT (or ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
source dev/gpu/env.sh
step() { echo "== $(date -u +%T) $*"; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
step configure
gpu_configure build-gpu OFF >/tmp/configure.log 2>&1 || { tail -30 /tmp/configure.log; exit 1; }
step build
ninja -C build-gpu -j16 moerl moerl_gpu_tests moerl_moe_bench >/tmp/build.log 2>&1 ||
  { grep -E "error|FAILED" -A3 /tmp/build.log | head -60; exit 1; }
T=build-gpu/src/model/cuda/moerl_gpu_tests
K='ExpertGemmGpu*:DecodeAttentionGpu*:SampleRowsGpu*'
step tests
timeout 180 "${RUNENV[@]}" $T --gtest_filter="$K:DecodeKernelsGpu*:MoeGpu*:FastGenerate*" >"$OUT/tests.log" 2>&1
echo "tests rc=$?"
grep -E "^\[  (FAILED|PASSED) |^\[       OK|Failure|Expected|Which is|error|exception" "$OUT/tests.log" | head -70
step memcheck
timeout 90 "${RUNENV[@]}" compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter="$K" \
  >"$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|Invalid|at 0x" "$OUT/memcheck.log" | head -12
step moe bench
timeout 100 "${RUNENV[@]}" build-gpu/dev/gpu/moerl_moe_bench "$OUT/moe.json" >"$OUT/moe.log" 2>&1
echo "moe bench rc=$?"; grep -iE "decode|copy" "$OUT/moe.log" | head -20
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
layers=(); [ "$mem" -lt 100000 ] && layers=(--layers 24)
step "bench gen ${layers[*]}"
timeout 330 "${RUNENV[@]}" build-gpu/src/cli/moerl bench gen --config examples/bench/qwen3-30b-a3b.json \
  --device cuda "${layers[@]}" --batch 64,256 --prompt 512 --new-tokens 64 --compare-kernels \
  --profile /tmp/gen-trace.json \
  >"$OUT/gen.json" 2>"$OUT/gen.log"
echo "bench gen rc=$?"; tail -15 "$OUT/gen.log"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("copy GB/s", d["copy_GBps"]); [print(json.dumps(r)) for r in d["rows"]]; pr=d.get("profile", {}); print("profile wall_ms", pr.get("wall_ms"), "gpu_busy_ms", pr.get("gpu_busy_ms")); [print(json.dumps(k)) for k in pr.get("top", [])[:14]]' "$OUT/gen.json"
step done
