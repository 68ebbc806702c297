"""What the local rehearsal (scripts/rehearse_deploy.py) checks once the trainer group has
exited: the job trained (summary.json in async mode, every RL step done, accounting.lost == 0,
a reward per step and some reward signal, one EP group of the rehearsed size when the summary
reports one) and the store holds checkpoints and weight versions.
"""
import json
import math
import subprocess
import tomllib


def note(msg):
    print(f"rehearse-deploy: {msg}", flush=True)


def check_trained(work, moerl, store, world, env):
    run = f"{work}/trainer/runs/app"
    problems = []
    try:
        summary = json.load(open(f"{run}/summary.json"))
        effective = tomllib.load(open(f"{run}/config.toml", "rb"))
    except (OSError, ValueError) as e:
        note(f"no summary.json / config.toml in the trainer's run dir {run}: {e}")
        return False
    steps = effective["train"]["steps"]
    rows = []
    for line in open(f"{run}/metrics.jsonl"):
        if line.strip():
            row = json.loads(line)
            if row.get("phase") == "rl":
                rows.append(row)
    rewards = [r.get("reward") for r in rows]
    if summary.get("mode") != "async":
        problems.append(f"summary mode {summary.get('mode')}, expected async")
    if summary["steps"]["rl"] != steps:
        problems.append(f"{summary['steps']['rl']} RL steps done, config says {steps}")
    ep = summary.get("ep") or {}
    if world > 1 and ep.get("size", world) != world:
        problems.append(f"summary ep.size {ep.get('size')}: the trainer ranks did not form one group of {world}")
    if summary["accounting"].get("lost") != 0:
        problems.append(f"accounting.lost = {summary['accounting'].get('lost')}")
    if len(rows) != steps or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in rewards):
        problems.append(f"metrics.jsonl has {len(rows)} RL rows with rewards {rewards}, expected {steps}")
    elif max(rewards) <= 0 and summary["eval"]["sft"] <= 0:
        problems.append(f"no reward signal at all (RL rewards {rewards}, eval after SFT {summary['eval']['sft']})")
    r = subprocess.run([moerl, "store", "ls", store + "/"],
                       capture_output=True, text=True, env=env)
    listing = r.stdout
    if r.returncode != 0:
        problems.append(f"moerl store ls {store}/ failed: {r.stderr.strip()}")
    else:
        for want in ("ckpt/", "weights/"):
            if want not in listing:
                problems.append(f"no {want} in the store {store}: {listing.strip()}")
    for p in problems:
        note(f"check failed: {p}")
    if problems:
        return False
    note(f"trained: {steps} RL steps, accounting.lost 0, policy version {summary.get('policy_version')}, "
         f"reward per step {[round(x, 3) for x in rewards]}, eval {summary['eval']['sft']} -> {summary['eval']['final']}; "
         f"store {store} holds ckpt/ and weights/")
    return True
