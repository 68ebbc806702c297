#!/usr/bin/env bash
# Object-store throughput: starts the S3 test server (tools/s3/server.js, s3rver on
# 127.0.0.1) and runs `moerl bench store` against it: a 1 GiB object up and down with moerl
# and with `aws s3 cp`, same server, same run. Extra arguments go to `moerl bench store`.
#
#   scripts/bench-store.sh [BUILD_DIR] [--size-mib 1024] [--repeats 1] [--json]   (MOERL=path overrides the binary)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=build
if [ $# -gt 0 ] && [ -d "$1" ]; then build=$1; shift; fi
moerl="${MOERL:-$build/src/cli/moerl}"
[ -x "$moerl" ] || moerl="$build/moerl"
[ -x "$moerl" ] || { echo "bench-store: no moerl binary under $build (build it first: make build)" >&2; exit 2; }
[ -d "$here/tools/s3/node_modules/@20minutes/s3rver" ] || { echo "bench-store: run scripts/install-deps.sh first (npm ci in tools/s3)" >&2; exit 2; }

data=$(mktemp -d "${TMPDIR:-/tmp}/moerl-bench-s3-XXXXXX")
out="$data/server.out"
# The server exits when its stdin closes: feed it from a pipe this script holds open.
exec 3> >(node --openssl-legacy-provider "$here/tools/s3/server.js" --port 0 --dir "$data/objects" --bucket moerl-test >"$out" 2>&1)
server_pid=$!
cleanup() { exec 3>&-; kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; rm -rf "$data"; }
trap cleanup EXIT

port=""
for _ in $(seq 1 200); do  # at most 20 s
  port=$(sed -n 's/^S3_TEST_SERVER_PORT=//p' "$out" 2>/dev/null || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "bench-store: the S3 test server did not start within 20 s:" >&2; cat "$out" >&2; exit 1; }

export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export AWS_REQUEST_CHECKSUM_CALCULATION=when_required AWS_RESPONSE_CHECKSUM_VALIDATION=when_required
TMPDIR="$data" "$moerl" bench store --endpoint "http://127.0.0.1:$port" "$@"
