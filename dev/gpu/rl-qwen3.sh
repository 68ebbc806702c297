#!/usr/bin/env bash
# The GPU RL run at the Qwen3-30B-A3B layer shape (#19): `moerl init` makes a random-weight
# model directory of examples/bench/qwen3-30b-a3b.json cut to LAYERS layers with the real
# Qwen3 tokenizer; examples/gpu-qwen3.toml then runs, in the order RUNS names them
# (default "store shared sync inprocess resumed"):
#   store      async, trainer and one rollout worker as two processes sharing the GPU (Redis on
#              loopback), versions published through the object store;
#   shared     the same with versions through shared memory (a checkpoint at the end);
#   sync       one process, generation then training each step;
#   inprocess  async in one process: the worker is a thread on a CUDA stream of its own,
#              versions handed over on the device;
#   resumed    the shared run resumed from its checkpoint to STEPS + 2 steps (needs shared);
#   streaming  inprocess with a streaming worker ([rollout] streaming: 256 rows fed from the
#              queue as answers end, versions swapped between decode windows, staleness 6,
#              so the trainer keeps prompts_per_step x (6 - 1) = 80 tasks ahead);
#   streaming_shared  shared with a streaming worker process;
# each STEPS steps, and prints, per run: samples/s (one definition for both modes), rollout and
# train tokens/s, MFU of the train phase (6 x active parameters x train tokens/s / the bf16
# matmul rate measured here), staleness, the GPU memory peak of each process, accounting.
#   [RUNS="sync inprocess"] [SKEWED=1] dev/gpu/rl-qwen3.sh BUILD_DIR OUT_DIR [LAYERS=1] [STEPS=4] [--set key=value ...]
# SKEWED=1: real RL's answer-length shape from random weights (docs/perf.md): a stop string
# random tokens complete every ~270 tokens, a 1024-token cap, 256 decode rows refilled as
# answers end, and async leases of two steps' prompts (tasks_per_lease 32: a lease-at-a-time
# worker meets the tail once per two steps; streaming runs take their queue depth from the
# automatic rule, docs/runtime.md queue_ahead, which 32 does not change).
# One layer by default: its checkpoints (~17 GB with float32 AdamW state, two at once while
# one commits) fit a 64 GB disk; two layers need ~30 GB each.
set -euo pipefail
B=$1 OUT=$2 L=${3:-1} STEPS=${4:-4}
shift $(( $# < 4 ? $# : 4 ))
if [ -n "${SKEWED:-}" ]; then
  set -- --set 'rollout.stop=["\n\n"]' --set rollout.max_new_tokens=1024 --set rollout.batch_rows=256 \
    --set runtime.tasks_per_lease=32 "$@"
fi
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEPS=$ROOT/.gpudeps
export LD_LIBRARY_PATH=$DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
TOK=$ROOT/tools/tokenizers/data/qwen3
if [ ! -f "$TOK/tokenizer.json" ]; then  # the copy dev/gpu/pack-deps.sh packs
  TOK=$OUT/qwen3-tokenizer; mkdir -p "$TOK"; tar -C "$TOK" -xJf "$DEPS/share/qwen3-tokenizer.tar.xz"
fi
M=$B/src/cli/moerl
mkdir -p "$OUT"
MODEL=$OUT/qwen3-${L}l
python3 - "${RL_QWEN3_GEOMETRY:-$ROOT/examples/bench/qwen3-30b-a3b.json}" "$OUT/config-${L}l.json" "$L" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["num_hidden_layers"] = int(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
t0=$(date +%s)
[ -f "$MODEL/model.safetensors" ] || "$M" init --config "$OUT/config-${L}l.json" --tokenizer "$TOK" --output "$MODEL"
echo "rl-qwen3: model directory in $(( $(date +%s) - t0 )) s"
PORT=${RL_RUN_REDIS_PORT:-6392}
REDIS=$(command -v redis-server || echo "$DEPS/bin/redis-server")
"$REDIS" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$OUT" >"$OUT/redis.log" 2>&1 &
RPID=$!
MPID=
trap 'kill $RPID $MPID 2>/dev/null || true' EXIT
sleep 0.5

run() {  # LABEL RUN_DIR [moerl train flags...]; GPU memory per process sampled every 200 ms
  local label=$1 dir=$2; shift 2
  local s=$(date +%s)
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 200 >"$OUT/$label.mem.csv" 2>/dev/null &
  MPID=$!
  "$M" train "$ROOT/examples/gpu-qwen3.toml" --no-plot --run-dir "$OUT/$dir" --set model.init="$MODEL" \
    "$@" >"$OUT/$label.log" 2>&1 || { tail -30 "$OUT/$label.log"; return 1; }
  kill $MPID 2>/dev/null || true
  cp "$OUT/$dir/summary.json" "$OUT/$label.json"; cp "$OUT/$dir/metrics.jsonl" "$OUT/$label.metrics.jsonl"
  echo "== $label: wall $(( $(date +%s) - s )) s"
}
# Shared-memory versions: /dev/shm when it holds two bf16 copies with room to spare (a
# container's is often 64 MiB), else a directory on disk (the page cache serves the reads).
need_kb=$(( $(stat -c %s "$MODEL/model.safetensors") / 1024 * 3 / 2 ))
SHM=/dev/shm
[ "$(df --output=avail -k /dev/shm 2>/dev/null | tail -1)" -gt "$need_kb" ] 2>/dev/null || { SHM=$OUT/shm; mkdir -p "$SHM"; }
echo "rl-qwen3: shared weights in $SHM"
# Checkpoints only at each run's end (a 2-layer one is ~30 GB; the device disk is 64 GB).
C=(--set train.checkpoint_every=0 --set runtime.shared_weights_dir="$SHM")
# Streaming workers: rows refilled from the queue, so answers may span versions: a wider
# staleness budget (the oldest version of a sample counts). 6 also deepens the queue: the
# trainer keeps prompts_per_step x (max_staleness - 1) tasks ahead for streaming workers, and
# groups come back ~queue_ahead / prompts_per_step + 1 versions old (docs/perf.md).
S=(--set rollout.streaming=true --set rollout.batch_rows=256 --set runtime.max_staleness=6)
REDIS_URL="redis://127.0.0.1:$PORT/0"
RUNS=${RUNS:-store shared sync inprocess resumed}
for r in $RUNS; do
  case $r in
    store) run async_store async_store --fresh --set train.steps="$STEPS" --set runtime.weight_transport=store \
             --set runtime.queue_url="$REDIS_URL" "${C[@]}" "$@"
           rm -rf "$OUT/async_store" ;;
    shared) run async async --fresh --set train.steps="$STEPS" --set runtime.queue_url="$REDIS_URL" "${C[@]}" "$@" ;;
    sync) run sync sync --fresh --set runtime.mode=sync --set train.steps="$STEPS" "${C[@]}" "$@"
          rm -rf "$OUT/sync" ;;
    inprocess) run async_inprocess async_inprocess --fresh --set train.steps="$STEPS" --set runtime.queue_url=inprocess \
                 "${C[@]}" "$@"
               rm -rf "$OUT/async_inprocess" ;;
    # The resume writes a second checkpoint beside the first (each ~17 GB at one layer), which
    # filled the 64 GB disk of the device machine before the sync run in the first try: last.
    resumed) run async_resumed async --set train.steps=$(( STEPS + 2 )) --set runtime.queue_url="$REDIS_URL" "${C[@]}" "$@"
             grep -iE "resumed at" "$OUT/async_resumed.log" | head -2 || true ;;
    streaming) run async_streaming async_streaming --fresh --set train.steps="$STEPS" --set runtime.queue_url=inprocess \
                 "${C[@]}" "${S[@]}" "$@"
               rm -rf "$OUT/async_streaming" ;;
    streaming_shared) run async_streaming_shared async_streaming_shared --fresh --set train.steps="$STEPS" \
                        --set runtime.queue_url="$REDIS_URL" "${C[@]}" "${S[@]}" "$@"
                      rm -rf "$OUT/async_streaming_shared" ;;
    *) echo "rl-qwen3: unknown run '$r' in RUNS (store, shared, sync, inprocess, resumed, streaming, streaming_shared)" >&2
       exit 2 ;;
  esac
done
rm -rf "$OUT/async"
LABELS=$(for r in $RUNS; do case $r in store) echo async_store ;; shared) echo async ;; inprocess) echo async_inprocess ;;
         resumed) echo async_resumed ;; streaming) echo async_streaming ;; streaming_shared) echo async_streaming_shared ;;
         *) echo "$r" ;; esac; done)
python3 "$ROOT/dev/gpu/rl_report.py" "$OUT/config-${L}l.json" "$OUT" $LABELS
