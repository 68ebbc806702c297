#!/usr/bin/env bash
# Runs every test: the ctest suite of the build, then the fuzzers (scripts/fuzz.sh).
# Usage: scripts/run-tests.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
start=$(date +%s)
ctest --test-dir "$build" --output-on-failure --timeout 1800
if [ -x scripts/fuzz.sh ]; then bash scripts/fuzz.sh; fi
echo "run-tests: all tests passed in $(( $(date +%s) - start )) s"
