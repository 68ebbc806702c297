#!/usr/bin/env bash
# Builds the libFuzzer targets in a clang + ASan + UBSan configuration (build-fuzz, no
# libtorch) and runs each for MOERL_FUZZ_SECONDS (default 60) from a generated seed corpus.
# Exits non-zero on any crash, sanitizer report or uncaught non-moerl exception.
# Usage: scripts/fuzz.sh            (MOERL_FUZZ_SECONDS=10 scripts/fuzz.sh for a quick run)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-fuzz
seconds=${MOERL_FUZZ_SECONDS:-60}

CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DMOERL_FUZZ=ON -DMOERL_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
cmake --build "$build" --target safetensors_fuzz

corpus="$build/corpus/safetensors"
artifacts="$build/artifacts/"
mkdir -p "$corpus" "$artifacts"

# Seeds: small valid files covering every dtype, metadata, scalars, empty tensors and gaps,
# plus a dictionary of header tokens. Python stdlib only.
python3 - "$corpus" "$build/safetensors.dict" <<'PY'
import json, os, struct, sys

corpus, dict_path = sys.argv[1], sys.argv[2]
sizes = {"F32": 4, "BF16": 2, "F16": 2, "I64": 8, "I32": 4, "U8": 1, "BOOL": 1}

def image(tensors, metadata=None, gap=0, pad=True):
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = sizes[dtype]
        for d in shape:
            n *= d
        data += b"\0" * gap
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        data += bytes((i * 37 + 11) % 256 for i in range(n))
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data

seeds = {
    "every_dtype": image([(f"t.{d.lower()}", d, [2, 3]) for d in sizes], {"format": "pt"}),
    "scalar_and_empty": image([("s", "F32", []), ("e", "I64", [0, 4]), ("v", "U8", [5])]),
    "gaps": image([("a", "BF16", [4]), ("b", "F16", [1, 2, 2]), ("c", "I32", [3])], gap=3),
    "layer_names": image([("model.layers.0.mlp.experts.0.gate_proj.weight", "F32", [4, 2]),
                          ("model.norm.weight", "F32", [2]), ("lm_head.weight", "BF16", [3, 2])],
                         {"format": "pt", "step": "7"}),
    "unpadded": image([("x", "BOOL", [3])], pad=False),
    "empty_header": image([]),
}
for name, data in seeds.items():
    with open(os.path.join(corpus, "seed_" + name), "wb") as f:
        f.write(data)

tokens = ["__metadata__", "dtype", "shape", "data_offsets", "format", "pt"] + list(sizes)
with open(dict_path, "w") as f:
    for t in tokens:
        f.write('"\\"%s\\""\n' % t)
    for t in ["{", "}", "[", "]", ":", ",", "0", "18446744073709551615", "-1", "1e3", "null"]:
        f.write('"%s"\n' % t)
PY

log="$build/safetensors_fuzz.log"
echo "fuzz: safetensors_fuzz for ${seconds}s (log: $log)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if ! "$build/src/io/safetensors_fuzz" "$corpus" -dict="$build/safetensors.dict" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -max_len=4096 \
    -artifact_prefix="$artifacts" -print_final_stats=1 > "$log" 2>&1; then
  tail -n 60 "$log"
  echo "fuzz: safetensors_fuzz FAILED; reproducer in $artifacts (run the binary on it)" >&2
  exit 1
fi
grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" | sed 's/^/fuzz: /' || true
echo "fuzz: safetensors_fuzz passed"
