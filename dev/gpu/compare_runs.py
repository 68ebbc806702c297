"""Compares moerl run directories (metrics.jsonl, summary.json) on the device machine.

  compare_runs.py REF RUN...     max relative difference of each RUN's SFT losses from REF's
                                 (RL losses are not comparable: sampled rollouts differ)
  compare_runs.py --rl RUN...    eval before/after RL and the reward / clip / KL trajectory
"""
import json
import sys


def rows(run):
    try:
        return [json.loads(line) for line in open(run + "/metrics.jsonl")]
    except OSError as e:
        return str(e)


def losses(run):
    r = rows(run)
    return r if isinstance(r, str) else [x["loss"] for x in r if x.get("phase") == "sft"]


def compare(ref, runs):
    a = losses(ref)
    for run in runs:
        b = losses(run)
        if isinstance(a, str) or isinstance(b, str):
            print(f"{run}: missing metrics ({a if isinstance(a, str) else b})")
            continue
        n = min(len(a), len(b))
        d = max((abs(x - y) / max(abs(x), 1e-9) for x, y in zip(a[:n], b[:n])), default=float("nan"))
        print(f"{run} vs {ref}: {n} SFT losses compared, max relative difference {d:.3g}; first {b[:3]} vs {a[:3]}")


def rl(runs):
    for run in runs:
        r = rows(run)
        if isinstance(r, str):
            print(f"{run}: missing metrics ({r})")
            continue
        s = json.load(open(run + "/summary.json"))
        rl_rows = [x for x in r if x.get("phase") == "rl"]
        pick = [x for i, x in enumerate(rl_rows) if i in (0, 4, 9, 19, 29, len(rl_rows) - 1)]
        mean = lambda k: sum(x.get(k, 0) for x in rl_rows) / max(len(rl_rows), 1)
        print(f"{run}: eval {s['eval']['sft']:.3f} -> {s['eval']['final']:.3f}; reward at steps "
              + " ".join(f"{x.get('step')}:{x.get('reward', 0):.3f}" for x in pick)
              + f"; mean clip_frac {mean('clip_frac'):.3f} approx_kl {mean('approx_kl'):.4f} "
              f"grad_norm {mean('grad_norm'):.3f}; samples/s {s['throughput'].get('samples_per_s', 0):.0f}")


if __name__ == "__main__":
    if sys.argv[1] == "--rl":
        rl(sys.argv[2:])
    else:
        compare(sys.argv[1], sys.argv[2:])
