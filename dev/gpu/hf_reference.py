#!/usr/bin/env python3
"""Hugging Face baselines on the same GPU: Qwen3MoeSparseMoeBlock forward and forward+backward
(bf16, Qwen3-30B-A3B shape) at 4096/16384 tokens, and model.generate of a random 8-layer
Qwen3-MoE (batch 16 and 128, 64-token prompts, 128 sampled tokens).
    python3 dev/gpu/hf_reference.py OUT.json
"""
import json
import sys
import time

import torch
from transformers import Qwen3MoeConfig
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeForCausalLM, Qwen3MoeSparseMoeBlock


def median_ms(fn, warmup=3, reps=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def first(o):
    return o[0] if isinstance(o, tuple) else o


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "hf.json"
    res = {}
    torch.manual_seed(0)
    H, I, E, K = 2048, 768, 128, 8
    for impl in (None, "grouped_mm"):
        sfx = "" if impl is None else "_" + impl
        cfg = Qwen3MoeConfig(hidden_size=H, moe_intermediate_size=I, num_experts=E, num_experts_per_tok=K,
                             norm_topk_prob=True)
        if impl:
            cfg._experts_implementation = impl
        try:
            block = Qwen3MoeSparseMoeBlock(cfg).cuda().to(torch.bfloat16)
        except Exception as e:  # an implementation this transformers lacks
            print("block", impl, "failed:", e)
            continue
        with torch.no_grad():
            for p in block.parameters():
                p.normal_(0, 0.02)
        for T in (4096, 16384):
            x = torch.randn(1, T, H, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            dy = torch.randn(1, T, H, device="cuda", dtype=torch.bfloat16)

            def fwd():
                with torch.no_grad():
                    block(x)

            def fwdbwd():
                block.zero_grad(set_to_none=True)
                x.grad = None
                first(block(x)).backward(dy)

            try:
                res[f"hf_moe_fwd_ms_T{T}{sfx}"] = median_ms(fwd)
                res[f"hf_moe_fwdbwd_ms_T{T}{sfx}"] = median_ms(fwdbwd)
            except Exception as e:
                print("block", impl, T, "failed:", e)
            print({k: v for k, v in res.items() if str(T) in k}, flush=True)
        del block
        torch.cuda.empty_cache()

    gcfg = Qwen3MoeConfig(vocab_size=32000, hidden_size=1024, intermediate_size=3072, moe_intermediate_size=512,
                          num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4, head_dim=64,
                          num_experts=32, num_experts_per_tok=4, norm_topk_prob=True, max_position_embeddings=4096,
                          rope_theta=1e6, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    for impl in (None, "grouped_mm"):
        sfx = "" if impl is None else "_" + impl
        if impl:
            gcfg._experts_implementation = impl
        model = Qwen3MoeForCausalLM(gcfg).cuda().to(torch.bfloat16).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0, 0.02)
        for B in (16, 128):
            ids = torch.randint(3, 32000, (B, 64), device="cuda")
            mask = torch.ones_like(ids)
            kw = dict(attention_mask=mask, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, pad_token_id=0)
            try:
                with torch.no_grad():
                    model.generate(ids, max_new_tokens=8, min_new_tokens=8, **kw)
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    o = model.generate(ids, max_new_tokens=128, min_new_tokens=128, **kw)
                    torch.cuda.synchronize()
                    dt = time.perf_counter() - t0
            except Exception as e:
                print("generate", impl, B, "failed:", e)
                continue
            new = (o.shape[1] - 64) * B
            res[f"hf_gen_tok_per_s_B{B}{sfx}"] = new / dt
            print(impl, B, new, dt, new / dt, flush=True)
        del model
        torch.cuda.empty_cache()
    with open(out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
