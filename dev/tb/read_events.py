#!/usr/bin/env python3
"""Reads a moerl run's TensorBoard events with TensorBoard's own reader and checks them.

    python3 dev/tb/read_events.py RUN_DIR [--quiet]

Loads RUN_DIR/tb with the `tensorboard` package's EventAccumulator (the reader behind
`tensorboard --logdir`), prints each scalar tag with its points, and compares every point with
RUN_DIR/metrics.jsonl: each numeric field of each row must appear as tag PHASE/FIELD (nested
objects joined by '/') at the row's step (RL rows: step, SFT rows: sft_step) with the row's
value rounded to float32 (docs/formats/tensorboard.md). Exit 0 when every value matches, 1
otherwise. Needs `pip install tensorboard` (the GPU machine's image has it).
"""
import argparse
import json
import math
import os
import struct
import sys

from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def flatten(value, tag, out):
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(v, tag + "/" + k, out)
    elif value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        out[tag] = value


def expected(metrics_path):
    want = {}
    with open(metrics_path) as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            phase = row.get("phase", "")
            step = row.get("step", row.get("sft_step", -1))
            fields = {}
            for k, v in row.items():
                flatten(v, (phase + "/" if phase else "") + k, fields)
            for tag, v in fields.items():
                want[(tag, step)] = v
    return want


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--quiet", action="store_true", help="print only the summary")
    a = ap.parse_args()
    tb_dir = os.path.join(a.run_dir, "tb")
    acc = EventAccumulator(tb_dir, size_guidance={SCALARS: 0})  # 0: keep every point
    acc.Reload()
    tags = sorted(acc.Tags()["scalars"])
    got = {}
    for tag in tags:
        events = acc.Scalars(tag)
        for e in events:
            got[(tag, e.step)] = e.value
        if not a.quiet:
            pts = ", ".join("%d:%.6g" % (e.step, e.value) for e in events[:8])
            print("%-40s %5d points  %s%s" % (tag, len(events), pts, " ..." if len(events) > 8 else ""))
    want = expected(os.path.join(a.run_dir, "metrics.jsonl"))
    bad = []
    for key, v in sorted(want.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if key not in got:
            bad.append("missing %s at step %d" % key)
        elif v is None:
            if math.isfinite(got[key]):
                bad.append("%s at step %d: %r, expected NaN/Inf (null in metrics.jsonl)" % (key + (got[key],)))
        elif got[key] != f32(float(v)):
            bad.append("%s at step %d: %r, expected %r" % (key + (got[key], f32(float(v)))))
    extra = set(got) - set(want)
    for key in sorted(extra):
        bad.append("unexpected %s at step %d" % key)
    print("read_events: %d tags, %d points; metrics.jsonl has %d values; %d mismatches"
          % (len(tags), len(got), len(want), len(bad)))
    for b in bad[:30]:
        print("  " + b)
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
