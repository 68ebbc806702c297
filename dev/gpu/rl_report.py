#!/usr/bin/env python3
"""Figures of dev/gpu/rl-qwen3.sh's runs: per run (OUT/LABEL.json, the run's summary, and
OUT/LABEL.mem.csv, nvidia-smi's per-process memory samples) samples/s, rollout and train
tokens/s, MFU of the train phase (6 x active parameters x train tokens/s / the bf16 matmul rate
of a square 8192 product timed here), staleness, the peak GPU memory of each process; then the
async/sync ratio of samples/s.
    python3 dev/gpu/rl_report.py CONFIG.json OUT LABEL...
"""
import collections
import json
import sys

import torch


def active_parameters(c):
    H, q, kv = c["hidden_size"], c["num_attention_heads"] * c["head_dim"], c["num_key_value_heads"] * c["head_dim"]
    attn = H * (q + 2 * kv) + q * H
    moe = c["num_experts_per_tok"] * 3 * H * c["moe_intermediate_size"] + H * c["num_experts"]
    return c["num_hidden_layers"] * (attn + moe) + c["vocab_size"] * H  # lm_head; not the embedding rows


def matmul_tflops():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20):
        a @ a
    e.record()
    e.synchronize()
    return 20 * 2 * 8192 ** 3 / (s.elapsed_time(e) / 1e3) / 1e12


def peaks(path):
    top = collections.defaultdict(int)
    try:
        for line in open(path):
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[1].isdigit():
                top[parts[0]] = max(top[parts[0]], int(parts[1]))
    except FileNotFoundError:
        pass
    return sorted((v / 1024 for v in top.values()), reverse=True)


def step_medians(path):
    """Median seconds per RL step after the first (warm-up), by phase, from a run's metrics.jsonl."""
    rows = []
    try:
        rows = [json.loads(l) for l in open(path) if l.strip()]
    except FileNotFoundError:
        return {}
    rows = [r for r in rows if r.get("phase") == "rl"][1:]
    out = {}
    for k in ("step_s", "experience_s", "train_s", "publish_s", "staleness_mean"):
        v = sorted(r[k] for r in rows if k in r)
        if v:
            out[k] = round(v[len(v) // 2], 3)
    return out


def main():
    cfg, out, labels = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3:]
    active, rate = active_parameters(cfg), matmul_tflops()
    print(f"layers {cfg['num_hidden_layers']}, active parameters {active / 1e6:.0f}M, "
          f"bf16 matmul {rate:.0f} TFLOP/s, {torch.cuda.get_device_name()}")
    sps = {}
    for label in labels:
        s = json.load(open(f"{out}/{label}.json"))
        t, a = s["throughput"], s.get("accounting", {})
        sps[label] = t["samples_per_s"]
        mfu = 6 * active * t["train_tokens_per_s"] / (rate * 1e12)
        print(f"{label}: rl steps {s['steps']['rl']}, samples/s {t['samples_per_s']:.1f}, response tok/s "
              f"{t['response_tokens_per_s']:.0f}, rollout tok/s {t['rollout_tokens_per_s']:.0f}, train tok/s "
              f"{t['train_tokens_per_s']:.0f}, train-phase MFU {100 * mfu:.1f}%, GPU memory peaks GiB "
              f"{[round(p, 1) for p in peaks(f'{out}/{label}.mem.csv')]}")
        print("  per step (median after the first):", step_medians(f"{out}/{label}.metrics.jsonl"))
        if a:
            keys = ("lost", "duplicates_dropped", "stale_dropped", "tasks_requeued", "staleness_histogram",
                    "rollout_idle_fraction", "trainer_idle_fraction")
            print("  accounting", {k: a.get(k) for k in keys})
    for label in (l for l in labels if l != "sync" and "sync" in sps):
        print(f"{label}/sync samples/s: {sps[label] / sps['sync']:.2f}")


if __name__ == "__main__":
    main()
