#!/usr/bin/env bash
# Local rehearsal of a rendered EKS deployment: renders APP + INFRA (default
# examples/deploy/small) with `moerl deploy render`, reads back from the YAML what each
# container runs, and runs Redis, the trainer group (one `moerl launch` per trainer node pod,
# 2 node pods x 1 rank by default) and 2 rollout instances (`moerl launch`, 2 ranks each) as
# local processes with that argv and env, on loopback and the CPU, with only the one-machine
# substitutions (printed; see scripts/rehearse_deploy.py). Passes when the job trained:
# summary.json, every step, accounting.lost == 0, a reward per step, checkpoints and weight
# versions in the store. Runs in `make test` (ctest `deploy`, src/deploy/rehearse_test.cc).
#
# Usage: scripts/rehearse-deploy.sh [--app APP.toml] [--infra INFRA.toml] [--build BUILD]
#          [--store s3|local] [--rollout-workers 2] [--timeout 110] [--set KEY=VALUE ...]
#          [--trainer-nodes 2] [--trainer-ranks 1] [--rollout-ranks 2]
#          [--no-scale-down] [--work DIR] [--keep]
#   MOERL_BIN overrides BUILD/src/cli/moerl. Exit 0 = trained; 1 = it did not (logs shown);
#   2 = bad usage or a missing tool. Every process it starts is stopped on exit, even on
#   failure or Ctrl-C.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="$here/build" work="" keep=0
pass=()
while (($#)); do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --app|--infra|--store|--rollout-workers|--timeout|--set|--trainer-nodes|--trainer-ranks|--rollout-ranks)
      pass+=("$1" "$2"); shift 2 ;;
    --no-scale-down) pass+=("$1"); shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "rehearse-deploy: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
moerl=${MOERL_BIN:-$build/src/cli/moerl}
[ -x "$moerl" ] || { echo "rehearse-deploy: no moerl binary at $moerl (build first or set MOERL_BIN)" >&2; exit 2; }
for tool in redis-server node python3; do
  command -v "$tool" >/dev/null || { echo "rehearse-deploy: $tool not found (scripts/install-deps.sh)" >&2; exit 2; }
done
[ -d "$here/tools/k8s-schemas/node_modules" ] || { echo "rehearse-deploy: tools/k8s-schemas/node_modules missing (scripts/install-deps.sh runs npm ci)" >&2; exit 2; }

if [ -z "$work" ]; then work=$(mktemp -d /tmp/moerl-rehearse.XXXXXX); else mkdir -p "$work"; fi
runner=""
cleanup() {
  # The runner stops its children itself (and they die with it: PR_SET_PDEATHSIG).
  if [ -n "$runner" ] && kill -0 "$runner" 2>/dev/null; then
    kill -TERM "$runner" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$runner" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$runner" 2>/dev/null || true
  fi
  if [ "$keep" = 1 ]; then echo "rehearse-deploy: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

python3 "$here/scripts/rehearse_deploy.py" --moerl "$moerl" --work "$work" "${pass[@]}" &
runner=$!
set +e
wait "$runner"
rc=$?
set -e
runner=""
exit "$rc"
