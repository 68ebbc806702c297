#!/usr/bin/env python3
"""Merges the GPU benchmark JSON files (moerl and Hugging Face) into one table.
    python3 dev/gpu/table.py moe.json gen.json hf.json tests.txt > table.md
"""
import json
import sys


def load(p):
    try:
        return json.load(open(p))
    except Exception as e:  # a missing file is reported, not fatal
        print(f"(missing {p}: {e})")
        return {}


def main():
    m, g, h = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
    rows = [("what", "moerl", "reference", "ratio")]

    def add(name, ours, ref, higher_better):
        if ours is None:
            rows.append((name, "n/a", f"{ref:.3f}" if ref else "", ""))
            return
        ratio = "" if not ref else f"{(ours / ref if higher_better else ref / ours):.2f}x"
        rows.append((name, f"{ours:.3f}", f"{ref:.3f}" if ref else "", ratio))

    add("bf16 matmul TFLOP/s (8192^3)", m.get("matmul_bf16_tflops"), None, True)
    add("HBM copy GB/s (r+w)", m.get("copy_gbps"), None, True)
    issue = {"fwd16384": 8.5, "fwdbwd16384": 27.2, "gen16": 927.0, "gen128": 10238.0}  # issue 8's HF figures
    mm = m.get("matmul_bf16_tflops")
    for T in (4096, 16384):
        for kind, label in (("fwd", "fwd"), ("fwdbwd", "fwd+bwd")):
            ours = m.get(f"moe_{kind}_ms_T{T}")
            add(f"MoE {label} ms T={T} vs HF default", ours, h.get(f"hf_moe_{kind}_ms_T{T}"), False)
            add(f"MoE {label} ms T={T} vs HF grouped_mm", ours, h.get(f"hf_moe_{kind}_ms_T{T}_grouped_mm"), False)
            if f"{kind}{T}" in issue:
                add(f"MoE {label} ms T={T} vs issue's HF figure", ours, issue[f"{kind}{T}"], False)
            add(f"MoE {label} TFLOP/s T={T} vs matmul", m.get(f"moe_{kind}_tflops_T{T}"), mm, True)
        add(f"grouped_mm alone fwd TFLOP/s T={T} vs matmul", m.get(f"grouped_mm_fwd_tflops_T{T}"), mm, True)
    for k in ("pack", "unpack", "combine"):
        add(f"EP {k} GB/s (vs copy)", m.get(f"ep_{k}_gbps"), m.get("copy_gbps"), True)
    add("torch index_select GB/s (vs copy)", m.get("torch_index_select_gbps"), m.get("copy_gbps"), True)
    for B in (16, 128):
        ours = g.get(f"fast_graph_B{B}_tok_per_s")
        add(f"generate new tok/s B={B} vs HF default", ours, h.get(f"hf_gen_tok_per_s_B{B}"), True)
        add(f"generate new tok/s B={B} vs HF grouped_mm", ours, h.get(f"hf_gen_tok_per_s_B{B}_grouped_mm"), True)
        add(f"generate new tok/s B={B} vs issue's HF figure", ours, issue[f"gen{B}"], True)
    for k, label in (("fast_eager_B128", "fast path, no CUDA graph"), ("generate_B128", "model::generate + grouped experts"),
                     ("generate_B16", "model::generate + grouped experts"), ("generate_generic_B128", "model::generate, generic experts")):
        add(f"generate tok/s {k}: {label}", g.get(f"{k}_tok_per_s"), h.get("hf_gen_tok_per_s_B" + k.split("_B")[-1]), True)
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    for i, r in enumerate(rows):
        print("| " + " | ".join(c.ljust(w[j]) for j, c in enumerate(r)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (x + 2) for x in w) + "|")


if __name__ == "__main__":
    main()
