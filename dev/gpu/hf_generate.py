#!/usr/bin/env python3
"""The transformers baseline of `moerl bench gen --baseline`: `model.generate` of a random bf16
model of a config.json geometry (experts through transformers' `grouped_mm`), timed the way
bench gen times moerl: decode ms per step = (time of 8 + N new tokens - time of 8) / N.
Prints one JSON object: {"baseline": "transformers ...", "rows": [{batch, decode_ms_per_step,
new_tokens_per_s} or {batch, error}]}.
    python3 dev/gpu/hf_generate.py --config C.json [--layers L] --batch 64,128 --prompt 512 --new-tokens 32
"""
import argparse
import json
import sys
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--layers", type=int, default=0)
    ap.add_argument("--batch", default="64,128,256")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--experts", default="grouped_mm", help="transformers experts implementation")
    a = ap.parse_args()
    cfg = AutoConfig.from_pretrained(a.config)
    if a.layers:
        cfg.num_hidden_layers = a.layers
    cfg._experts_implementation = a.experts
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    warm, rows = 8, []
    vocab = min(cfg.vocab_size, 100000)
    for B in (int(b) for b in a.batch.split(",")):
        ids = torch.randint(3, vocab, (B, a.prompt), device="cuda")
        kw = dict(attention_mask=torch.ones_like(ids), do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                  pad_token_id=0, eos_token_id=None)

        def timed(n):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model.generate(ids, max_new_tokens=n, min_new_tokens=n, **kw)
            torch.cuda.synchronize()
            return time.perf_counter() - t0

        try:
            with torch.no_grad():
                timed(warm)
                t_short, t_long = timed(warm), timed(warm + a.new_tokens)
            step = max(1e-9, (t_long - t_short) / a.new_tokens)
            rows.append({"batch": B, "decode_ms_per_step": 1e3 * step, "new_tokens_per_s": B / step,
                         "prefill_and_8_tokens_s": t_short})
        except torch.OutOfMemoryError as e:
            rows.append({"batch": B, "error": "out of memory: " + str(e).split("\n")[0][:160]})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        torch.cuda.empty_cache()
    print(json.dumps({"baseline": f"transformers {transformers.__version__} generate, experts {a.experts}",
                      "new_tokens": a.new_tokens, "rows": rows}))


if __name__ == "__main__":
    main()
