#!/usr/bin/env bash
# One device call: GPU-only CUDA build, the GPU tests, the routing-mismatch measurement (R3),
# transformers loading moerl's saved checkpoints back, TensorBoard's reader on a run's events.
# Carry .gpudeps (dev/gpu/pack-deps.sh), .loadback (check_hf_loadback.py make), .tbcheck.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
source dev/gpu/env.sh
t0=$(date +%s)
gpu_configure build-gpu ON > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; }
ninja -C build-gpu -j16 moerl_gpu_tests moerl_routing_mismatch > "$OUT/build.log" 2>&1 || grep -E "error|FAILED" "$OUT/build.log" | head -40
echo "build done at +$(( $(date +%s) - t0 ))s"
"${RUNENV[@]}" timeout 200 build-gpu/src/model/cuda/moerl_gpu_tests > "$OUT/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^\[  (FAILED|PASSED) |Failure|Expected|Which is|error" "$OUT/tests.log" | head -40
"${RUNENV[@]}" timeout 200 build-gpu/dev/gpu/moerl_routing_mismatch "$OUT/routing_mismatch.json" 8 32 128 > "$OUT/rm.log" 2>&1; echo "rm rc=$?"; tail -3 "$OUT/rm.log"; cat "$OUT/routing_mismatch.json"
timeout 150 python3 tests/fixtures/check_hf_loadback.py check .loadback > "$OUT/loadback.log" 2>&1; echo "loadback rc=$?"; tail -8 "$OUT/loadback.log"
timeout 60 python3 dev/tb/read_events.py .tbcheck > "$OUT/tb.log" 2>&1; echo "tb rc=$?"; tail -5 "$OUT/tb.log"
echo "all done at +$(( $(date +%s) - t0 ))s"
