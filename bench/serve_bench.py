#!/usr/bin/env python3
"""serve_bench.py URL PROMPTS [--streams 1,32] [--new N] [--reps R]: the HTTP side of issue 29's server
figures. PROMPTS holds one JSON array of token ids per line (bench_serve.c writes it); for each stream
count, one warm-up round, then R rounds of the first S prompts sent at once by S threads as streamed
/v1/completions (greedy, ignore_eos, N tokens, usage in the last chunk). Per round: tok/s (tokens after
each request's first over the wall time from the first first token to the last token, as bench_serve
counts in-process) and each request's time to first token (request sent to the first chunk that carries
a choice). Prints one JSON line per stream count: medians over the rounds. Standard library only (the
device has no openai package)."""
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse
import urllib.request

args = sys.argv[1:]
url, prompts_file = args[0], args[1]
opt = dict(zip(args[2::2], args[3::2]))
streams = [int(s) for s in opt.get("--streams", "1,32").split(",")]
N, R = int(opt.get("--new", 128)), int(opt.get("--reps", 5))
u = urllib.parse.urlparse(url)
prompts = [json.loads(line) for line in open(prompts_file) if line.strip()]
MODEL = json.loads(urllib.request.urlopen(f"{url}/v1/models").read())["data"][0]["id"]


def one(ids, res, i):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
    body = json.dumps({"model": MODEL, "prompt": ids, "max_tokens": N, "temperature": 0, "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}})
    t_send = time.monotonic()
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        res[i] = ("error", r.status, r.read()[:200])
        return
    t_first = t_last = None
    tokens = 0
    while True:
        line = r.readline()
        if not line:
            break
        if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
            continue
        now = time.monotonic()
        ev = json.loads(line[6:])
        if ev.get("choices"):
            t_first = t_first or now
            t_last = now
        if ev.get("usage"):
            tokens = ev["usage"]["completion_tokens"]
    c.close()
    res[i] = (t_send, t_first, t_last, tokens)


def round_of(S):
    res = [None] * S
    th = [threading.Thread(target=one, args=(prompts[i], res, i)) for i in range(S)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    bad = [x for x in res if x is None or x[0] == "error" or x[1] is None]
    if bad:
        sys.exit(f"serve_bench: {len(bad)} of {S} requests failed: {bad[0]}")
    t0, t1 = min(x[1] for x in res), max(x[2] for x in res)
    n = sum(x[3] - 1 for x in res)
    return n / (t1 - t0), [1e3 * (x[1] - x[0]) for x in res], sum(x[3] for x in res)


for S in streams:
    round_of(S)  # warm-up
    tps, ttft, toks = [], [], 0
    for _ in range(R):
        t, f, n = round_of(S)
        tps.append(t)
        ttft += f
        toks += n
    ttft.sort()
    print(json.dumps({"side": "server", "streams": S, "new": N, "reps": R, "tok_s": round(statistics.median(tps), 1),
                      "ttft_ms_p50": round(statistics.median(ttft), 3),
                      "ttft_ms_p99": round(ttft[round(0.99 * (len(ttft) - 1))], 3), "tokens": toks}), flush=True)
