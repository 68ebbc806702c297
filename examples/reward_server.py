#!/usr/bin/env python3
"""A minimal remote reward service for moerl's `[task] reward = "http"` (standard library only).

It speaks the format of docs/formats/reward_http.md, which is also what OpenRLHF's
`--remote_rm_url` clients send: a POST with {"query", "prompts", "labels", ...} answered with
{"rewards": [...], "extra_logs": {...}}. Replace `score()` with your own code (a sandbox, unit
tests, an LLM judge); everything else is plumbing.

    python3 examples/reward_server.py --port 8000            # then, in the job's [task]:
    #   reward = "http"
    #   reward_url = "http://127.0.0.1:8000/score"

The scorer here grades the built-in arithmetic tasks the way moerl's verifier does: 1 for the
exact reference answer (the completion's first line, blanks trimmed), `--format-reward` for a
well-formed number that is wrong, else 0; `extra_logs` reports `format` (well-formed or not)
and `length` (characters) per item.

Options for testing clients (moerl's tests use them): `--fail-first N` answers the first N
scoring requests with 503, `--fail-always` answers every one with 503, `--delay S` waits S
seconds before each answer, `--reply-with TEXT` answers 200 with TEXT. GET /stats returns
{"requests", "in_flight", "max_in_flight"}.
With `--port 0` the kernel picks a free port; the first line on stdout says which:
"reward_server: listening on http://HOST:PORT/score".
"""
import argparse
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def score(response, label, args):
    """(reward, extra logs) of one response against its reference answer."""
    answer = response.split("\n", 1)[0].strip(" \t\r")
    well_formed = re.fullmatch(r"[0-9]{1,%d}" % args.max_answer_digits, answer) is not None
    if answer == label:
        reward = 1.0
    elif well_formed:
        reward = args.format_reward
    else:
        reward = 0.0
    return reward, {"format": 1.0 if well_formed else 0.0, "length": float(len(response))}


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0


def make_handler(args, stats):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections

        def log_message(self, fmt, *a):  # quiet; errors still go to stderr below
            pass

        def reply(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path != "/stats":
                return self.reply(404, {"error": "unknown path " + self.path})
            with stats.lock:
                self.reply(200, {"requests": stats.requests, "in_flight": stats.in_flight,
                                 "max_in_flight": stats.max_in_flight})

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            with stats.lock:
                stats.requests += 1
                n = stats.requests
                stats.in_flight += 1
                stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
            try:
                if args.delay > 0:
                    time.sleep(args.delay)
                if args.fail_always or n <= args.fail_first:
                    return self.reply(503, {"error": "failing on purpose (request %d)" % n})
                if args.reply_with is not None:
                    body = args.reply_with.encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    return self.wfile.write(body)
                try:
                    req = json.loads(raw)
                    queries, labels = req["query"], req["labels"]
                    prompts = req.get("prompts") or [""] * len(queries)
                except (ValueError, KeyError, TypeError) as e:
                    return self.reply(400, {"error": "bad request: %s" % e})
                rewards, logs = [], {}
                for q, p, label in zip(queries, prompts, labels):
                    # OpenRLHF sends prompt + response as one "query"; moerl also sends
                    # "responses", but the query alone is enough.
                    response = q[len(p):] if q.startswith(p) else q
                    r, extra = score(response, label, args)
                    rewards.append(r)
                    for k, v in extra.items():
                        logs.setdefault(k, []).append(v)
                self.reply(200, {"rewards": rewards, "scores": rewards, "extra_logs": logs})
            finally:
                with stats.lock:
                    stats.in_flight -= 1

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000, help="0: any free port (printed)")
    ap.add_argument("--format-reward", type=float, default=0.0)
    ap.add_argument("--max-answer-digits", type=int, default=10)
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--fail-always", action="store_true")
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--reply-with", default=None, help="answer every POST with 200 and this body (tests)")
    args = ap.parse_args()
    stats = Stats()
    server = ThreadingHTTPServer((args.host, args.port), make_handler(args, stats))
    server.daemon_threads = True
    host, port = server.server_address[:2]
    print("reward_server: listening on http://%s:%d/score" % (host, port), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
