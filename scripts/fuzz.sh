#!/usr/bin/env bash
# Builds the libFuzzer targets in a clang + ASan + UBSan configuration (build-fuzz, no
# libtorch) and runs each for MOERL_FUZZ_SECONDS (default 60) from a generated seed corpus:
# safetensors_fuzz (the safetensors parser) and hf_config_fuzz (config.json parse/save).
# Exits non-zero on any crash, sanitizer report or uncaught non-moerl exception.
# Usage: scripts/fuzz.sh            (MOERL_FUZZ_SECONDS=10 scripts/fuzz.sh for a quick run)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-fuzz
seconds=${MOERL_FUZZ_SECONDS:-60}
targets=(safetensors_fuzz hf_config_fuzz)

mkdir -p "$build"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DMOERL_FUZZ=ON -DMOERL_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
cmake --build "$build" --target "${targets[@]}"

# Seeds and dictionaries (Python stdlib only): small valid safetensors files covering every
# dtype, metadata, scalars, empty tensors and gaps; config.json files of both architectures
# in both transformers naming generations.
mkdir -p "$build/corpus/safetensors_fuzz" "$build/corpus/hf_config_fuzz"
python3 - "$build" <<'PY'
import json, os, struct, sys

build = sys.argv[1]
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

tensor_seeds = {
    "every_dtype": image([(f"t.{d.lower()}", d, [2, 3]) for d in sizes], {"format": "pt"}),
    "scalar_and_empty": image([("s", "F32", []), ("e", "I64", [0, 4]), ("v", "U8", [5])]),
    "gaps": image([("a", "BF16", [4]), ("b", "F16", [1, 2, 2]), ("c", "I32", [3])], gap=3),
    "layer_names": image([("model.layers.0.mlp.experts.0.gate_proj.weight", "F32", [4, 2]),
                          ("model.norm.weight", "F32", [2]), ("lm_head.weight", "BF16", [3, 2])],
                         {"format": "pt", "step": "7"}),
    "unpadded": image([("x", "BOOL", [3])], pad=False),
    "empty_header": image([]),
}
qwen = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 64,
        "hidden_size": 32, "intermediate_size": 48, "moe_intermediate_size": 16,
        "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 8, "num_experts": 4, "num_experts_per_tok": 2, "norm_topk_prob": True,
        "decoder_sparse_step": 1, "mlp_only_layers": [1], "rms_norm_eps": 1e-6,
        "rope_theta": 1e6, "max_position_embeddings": 128, "tie_word_embeddings": False,
        "eos_token_id": 3, "bos_token_id": None, "torch_dtype": "float32"}
qwen5 = dict(qwen, num_local_experts=4, rope_parameters={"rope_type": "default", "rope_theta": 1e4},
             dtype="bfloat16", eos_token_id=[3, 4])
for k in ("num_experts", "rope_theta", "torch_dtype"):
    del qwen5[k]
mixtral = {"model_type": "mixtral", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
           "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": None}
config_seeds = {"qwen_v4": qwen, "qwen_v5": qwen5, "mixtral": mixtral}

for name, data in tensor_seeds.items():
    with open(os.path.join(build, "corpus/safetensors_fuzz", "seed_" + name), "wb") as f:
        f.write(data)
for name, cfg in config_seeds.items():
    with open(os.path.join(build, "corpus/hf_config_fuzz", "seed_" + name), "w") as f:
        json.dump(cfg, f, indent=1)

def write_dict(path, words):
    with open(path, "w") as f:
        for w in words:
            f.write('"%s"\n' % w.replace("\\", "\\\\").replace('"', '\\"'))

punct = ["{", "}", "[", "]", ":", ",", "0", "-1", "1e3", "null", "true", "18446744073709551615"]
write_dict(os.path.join(build, "safetensors_fuzz.dict"),
           ['"%s"' % w for w in ["__metadata__", "dtype", "shape", "data_offsets", "format", "pt"]
            + list(sizes)] + punct)
keys = set(qwen) | set(qwen5) | set(mixtral) | {"rope_scaling", "rope_type", "use_sliding_window",
                                                "hidden_act", "pad_token_id", "attention_bias"}
write_dict(os.path.join(build, "hf_config_fuzz.dict"),
           ['"%s"' % k for k in sorted(keys)] + ['"qwen3_moe"', '"mixtral"', '"default"'] + punct)
PY

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build/artifacts"
for t in "${targets[@]}"; do
  log="$build/$t.log"
  echo "fuzz: $t for ${seconds}s (log: $log)"
  if ! "$build/src/io/$t" "$build/corpus/$t" -dict="$build/$t.dict" \
      -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -max_len=4096 \
      -artifact_prefix="$build/artifacts/$t-" -print_final_stats=1 > "$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz: $t FAILED; reproducer in $build/artifacts/ (run $build/src/io/$t FILE)" >&2
    exit 1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" | sed "s/^/fuzz: $t /" || true
done
echo "fuzz: all targets passed"
