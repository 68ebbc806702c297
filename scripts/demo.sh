#!/usr/bin/env bash
# `make demo`: the main job on embedded defaults (examples/demo.toml): a tiny Qwen3-MoE
# trained from scratch on addition (SFT warm start, then GRPO). Results in runs/demo/:
# summary.json, metrics.jsonl, plot.png, final_model/, store/ (checkpoints).
# Usage: scripts/demo.sh BUILD_DIR [extra moerl train args]
set -euo pipefail
build=${1:-build}
shift || true
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
"$build/src/cli/moerl" train examples/demo.toml --run-dir runs/demo --fresh "$@"
echo "demo: results in runs/demo (summary.json, metrics.jsonl, plot.png)"
