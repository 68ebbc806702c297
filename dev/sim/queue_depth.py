#!/usr/bin/env python3
"""A model (not a measurement) of one streaming rollout worker fed by the controller's queue.

Why: on the GPU the two-process streaming run left the trainer idle half the time while the
worker made ~20k tokens/s (docs/perf.md, "The streaming worker as its own process"). This
model asks how many of the worker's rows have work when at most `queue_ahead` tasks are
ready, leased or buffered, as runtime::AsyncController::top_up keeps them.

Model: `rows` decode rows; a group of `group` answers, each ~Geometric(1/mean) tokens capped at
`cap`, is leased when a row is free and holds its lease until its last answer ends; one decode
step takes `step_s` seconds, twice that while the trainer trains (two processes take turns on
one GPU); the trainer takes `batch` groups once they are buffered, trains `train_s` seconds
and then publishes the next version; it tops the queue up whenever it asks for a batch.
Staleness of a group = versions published between its lease and its training.

    python3 dev/sim/queue_depth.py [--steps 200] [--queue 32,48,64,80]
"""
import argparse
import collections
import random


def simulate(queue_ahead, steps, rows=256, group=16, batch=16, mean=270, cap=1024, step_s=0.003, train_s=0.95,
             seed=1):
    rnd = random.Random(seed)
    ready, leased, buffered, running = collections.deque(), {}, [], []  # running: [group id, tokens left]
    started, staleness = {}, collections.Counter()
    t, version, next_id, trained, busy, decode_steps = 0.0, 0, 0, 0, 0, 0
    train_end = None  # when the batch being trained is done (None: trainer waiting)

    def top_up():
        nonlocal next_id
        while len(ready) + len(leased) + len(buffered) < queue_ahead:
            ready.append(next_id)
            next_id += 1

    top_up()
    while trained < steps:
        if train_end is not None and t >= train_end:  # the step ends: a new version
            train_end, version = None, version + 1
        if train_end is None:
            top_up()
            if len(buffered) >= batch:
                for g in buffered[:batch]:
                    staleness[version - started[g]] += 1
                del buffered[:batch]
                trained += 1
                train_end = t + train_s
                top_up()
        while ready and len(running) + group <= rows:  # lease for free rows
            g = ready.popleft()
            leased[g], started[g] = group, version
            running += [[g, min(cap, 1 + int(rnd.expovariate(1 / mean)))] for _ in range(group)]
        busy += len(running)
        decode_steps += 1
        t += step_s * (2 if train_end is not None else 1)
        still = []
        for r in running:
            r[1] -= 1
            if r[1] > 0:
                still.append(r)
                continue
            leased[r[0]] -= 1
            if leased[r[0]] == 0:
                del leased[r[0]]
                buffered.append(r[0])
        running = still
    return {"queue_ahead": queue_ahead, "samples_per_s": round(trained * batch * group / t, 1),
            "rows_busy_mean": round(busy / decode_steps), "staleness": dict(sorted(staleness.items()))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--queue", default="32,48,64,80")
    args = ap.parse_args()
    for q in (int(x) for x in args.queue.split(",")):
        print(simulate(q, args.steps))


if __name__ == "__main__":
    main()
