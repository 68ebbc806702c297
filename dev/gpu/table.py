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
    for T in (4096, 16384):
        add(f"MoE fwd ms T={T} (vs HF)", m.get(f"moe_fwd_ms_T{T}"), h.get(f"hf_moe_fwd_ms_T{T}"), False)
        add(f"MoE fwd+bwd ms T={T} (vs HF)", m.get(f"moe_fwdbwd_ms_T{T}"), h.get(f"hf_moe_fwdbwd_ms_T{T}"), False)
        mm = m.get("matmul_bf16_tflops")
        add(f"MoE fwd TFLOP/s T={T} (vs matmul)", m.get(f"moe_fwd_tflops_T{T}"), mm, True)
        add(f"MoE fwd+bwd TFLOP/s T={T} (vs matmul)", m.get(f"moe_fwdbwd_tflops_T{T}"), mm, True)
        add(f"grouped_mm alone fwd TFLOP/s T={T}", m.get(f"grouped_mm_fwd_tflops_T{T}"), mm, True)
    for k in ("pack", "unpack", "combine"):
        add(f"EP {k} GB/s (vs copy)", m.get(f"ep_{k}_gbps"), m.get("copy_gbps"), True)
    add("torch index_select GB/s (vs copy)", m.get("torch_index_select_gbps"), m.get("copy_gbps"), True)
    for B in (16, 128):
        add(f"generate new tok/s B={B} (vs HF)", g.get(f"gen_tok_per_s_B{B}"), h.get(f"hf_gen_tok_per_s_B{B}"), True)
    add("generate tok/s B=128, generic experts (vs HF)", g.get("generic_gen_tok_per_s_B128"),
        h.get("hf_gen_tok_per_s_B128"), True)
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    for i, r in enumerate(rows):
        print("| " + " | ".join(c.ljust(w[j]) for j, c in enumerate(r)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (x + 2) for x in w) + "|")


if __name__ == "__main__":
    main()
