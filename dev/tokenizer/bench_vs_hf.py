#!/usr/bin/env python3
"""moerl's tokenizer beside Hugging Face `tokenizers` (Rust, one thread) on the same text, in
one run: encode MB/s of the whole text in one call and line by line, and the ratio.

The text is what `moerl bench tokenize` builds: the corpus lines ("text" of each JSONL line)
joined by "\\n", repeated --repeat times back to back (make_tokenizer_refs.py measured
`tokenizers` 0.23.2 this way: ~1.0 MB/s on Qwen3 at x200 on the H200 machine). Both sides warm
up once and report the median of --runs. Token counts must agree (the ids themselves are
checked by the unit tests against tests/fixtures/tokenizers/expected/).

Usage (on a machine with python3 + tokenizers and a built moerl):
  python3 dev/tokenizer/bench_vs_hf.py [--moerl build/src/cli/moerl] [--tokdir tools/tokenizers/data]
      [--corpus tests/fixtures/tokenizers/corpus.jsonl] [--repeat 200] [--runs 5] [--names qwen3,deepseek_v3,llama2]
Prints a table and, last, one JSON object.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers starts its thread pool
os.environ["TOKENIZERS_PARALLELISM"] = "false"


def timed(runs, f):
    t0 = time.perf_counter()
    f()
    cold = time.perf_counter() - t0
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), cold


def hf_bench(tokdir, name, big, runs):
    import tokenizers
    tok = tokenizers.Tokenizer.from_file(os.path.join(tokdir, name, "tokenizer.json"))
    out = {"version": tokenizers.__version__}
    n = [0]

    def whole():
        n[0] = len(tok.encode(big, add_special_tokens=False).ids)

    s, cold = timed(runs, whole)
    out["whole"] = {"bytes": len(big.encode()), "tokens": n[0], "seconds": s, "cold_seconds": cold}
    lines = big.split("\n")

    def per_line():
        n[0] = sum(len(tok.encode(l, add_special_tokens=False).ids) for l in lines)

    s, cold = timed(runs, per_line)
    line_bytes = sum(len(l.encode()) for l in lines)
    out["lines"] = {"bytes": line_bytes, "tokens": n[0], "seconds": s, "cold_seconds": cold, "count": len(lines)}

    def batch():  # one call, no Python loop; serial with RAYON_NUM_THREADS=1
        n[0] = sum(len(e.ids) for e in tok.encode_batch(lines, add_special_tokens=False))

    s, cold = timed(runs, batch)
    out["lines_batch"] = {"bytes": line_bytes, "tokens": n[0], "seconds": s, "cold_seconds": cold}
    for k in ("whole", "lines", "lines_batch"):
        out[k]["mb_per_s"] = out[k]["bytes"] / out[k]["seconds"] / 1e6
    return out


def moerl_bench(moerl, tokdir, name, corpus, repeat, runs):
    cmd = [moerl, "bench", "tokenize", "--model", os.path.join(tokdir, name), "--input", corpus,
           "--repeat", str(repeat), "--runs", str(runs)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit("moerl bench tokenize failed (%d):\n%s%s" % (r.returncode, r.stdout, r.stderr))
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap.add_argument("--moerl", default=os.path.join(root, "build", "src", "cli", "moerl"))
    ap.add_argument("--tokdir", default=os.path.join(root, "tools", "tokenizers", "data"))
    ap.add_argument("--corpus", default=os.path.join(root, "tests", "fixtures", "tokenizers", "corpus.jsonl"))
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--names", default="qwen3,deepseek_v3,llama2")
    a = ap.parse_args()

    with open(a.corpus, encoding="utf-8") as f:
        texts = [json.loads(l)["text"] for l in f if l.strip()]
    big = "\n".join(texts) * a.repeat
    report = {"repeat": a.repeat, "runs": a.runs, "bytes": len(big.encode()), "results": {}}
    print("%-12s %-12s %10s %10s %10s %8s" % ("tokenizer", "mode", "hf MB/s", "moerl MB/s", "tokens", "ratio"))
    for name in a.names.split(","):
        hf = hf_bench(a.tokdir, name, big, a.runs)
        mo = moerl_bench(a.moerl, a.tokdir, name, a.corpus, a.repeat, a.runs)
        rows = {"whole": (hf["whole"], mo), "lines": (hf["lines"], mo["lines"]),
                "lines_batch": (hf["lines_batch"], mo["lines"])}
        res = {"hf": hf, "moerl": mo}
        for mode, (h, m) in rows.items():
            if h["tokens"] != m["tokens"] or h["bytes"] != m["bytes"]:
                sys.exit("%s %s: token/byte counts differ: hf %d/%d, moerl %d/%d" % (
                    name, mode, h["tokens"], h["bytes"], m["tokens"], m["bytes"]))
            ratio = m["mb_per_s"] / h["mb_per_s"]
            res["ratio_" + mode] = ratio
            print("%-12s %-12s %10.2f %10.2f %10d %7.1fx" % (name, mode, h["mb_per_s"], m["mb_per_s"], m["tokens"], ratio))
        report["results"][name] = res
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
