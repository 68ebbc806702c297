#!/usr/bin/env bash
# Builds dev/tokenizer/bench_main.cc into a fully static binary (tokenizer library, PCRE2,
# utf8proc, libstdc++, glibc) at OUT (default build-static/tokenizer_bench), for running the
# tokenizer benchmark on a machine without moerl's build dependencies (the H200 machine).
# Needs the moerl_tokenizer and moerl_base libraries of a configured build (BUILD, default build).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build}
out=${1:-$root/build-static/tokenizer_bench}
cmake --build "$build" --target moerl_tokenizer moerl_base
mkdir -p "$(dirname "$out")"
g++ -std=c++20 -O2 -DNDEBUG -I"$root/src" "$root/dev/tokenizer/bench_main.cc" \
  "$build/src/model/libmoerl_tokenizer.a" "$build/src/base/libmoerl_base.a" \
  -static -lpcre2-8 -lutf8proc -lpthread -o "$out"
strip "$out"
ls -la "$out"
