#!/usr/bin/env bash
# The GPU RL run: `moerl train examples/gpu.toml` in async mode on one GPU, the trainer and
# one rollout worker as two processes sharing it, joined by a redis-server on loopback
# (packed in .gpudeps/bin by dev/gpu/pack-deps.sh). Prints the summary's figures.
#   dev/gpu/rl-run.sh BUILD_DIR OUT_DIR [--set key=value ...]
set -euo pipefail
B=$1 OUT=$2; shift 2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEPS=$ROOT/.gpudeps
export LD_LIBRARY_PATH=$DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PORT=${RL_RUN_REDIS_PORT:-6391}
mkdir -p "$OUT"
REDIS=$(command -v redis-server || echo "$DEPS/bin/redis-server")
"$REDIS" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$OUT" >"$OUT/redis.log" 2>&1 &
RPID=$!
trap 'kill $RPID 2>/dev/null || true' EXIT
sleep 0.5
start=$(date +%s)
# RL_RUN_WRAP: e.g. "cuda-gdb -batch -ex run -ex bt --args" for a backtrace of the trainer.
${RL_RUN_WRAP:-} "$B/src/cli/moerl" train "$ROOT/examples/gpu.toml" --fresh --no-plot --run-dir "$OUT/run" \
  --set runtime.queue_url="redis://127.0.0.1:$PORT/0" "$@" 2>&1 | tail -25
echo "rl-run wall $(( $(date +%s) - start )) s"
python3 - "$OUT/run/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
t, a, e = s["throughput"], s["accounting"], s["eval"]
print(f"GPU RL run: eval {e['sft']:.3f} -> {e['final']:.3f} ({e['num_prompts']} prompts), "
      f"{s['steps']['rl']} RL steps, {s['parameters']} parameters")
print(f"  trainer samples/s {t['samples_per_s']:.1f}, train tokens/s {t['train_tokens_per_s']:.0f}, "
      f"rollout tokens/s (per worker, generating) {t['rollout_tokens_per_s']:.0f}")
print(f"  accounting: lost {a.get('lost')}, duplicates_dropped {a.get('duplicates_dropped')}, "
      f"stale_dropped {a.get('stale_dropped')}, tasks_requeued {a.get('tasks_requeued')}")
PY
