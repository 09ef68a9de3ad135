#!/usr/bin/env python3
"""serve_bench.py URL PROMPTS [--streams 1,32] [--new N] [--reps R]: the HTTP side of issue 29's server
figures. PROMPTS holds one JSON array of token ids per line (bench_serve.c writes it); for each stream
count, one warm-up round, then R rounds of the first S prompts sent at once by S threads as streamed
/v1/completions (greedy, ignore_eos, N tokens, usage in the last chunk): every stream's socket connected
first, the S requests then sent back to back (a burst, as bench_serve submits in-process), the answers
read by one thread through a selector, each event timed at the recv that brought it. Per round: tok/s (tokens after
each request's first over the wall time from the first first token to the last token, as bench_serve
counts in-process) and each request's time to first token (request sent to the first chunk that carries
a choice), and how far apart the sends were. Prints one JSON line per stream count: medians over the
rounds. Standard library only (the device has no openai package)."""
import json
import selectors
import socket
import statistics
import sys
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


class Stream:
    """One streamed request on its own socket, read without blocking: the chunked body decoded, each SSE
    line timed at the recv that completed it."""

    def __init__(self, ids):
        body = json.dumps({"model": MODEL, "prompt": ids, "max_tokens": N, "temperature": 0, "ignore_eos": True,
                           "stream": True, "stream_options": {"include_usage": True}}).encode()
        self.req = (f"POST /v1/completions HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
        self.sock = socket.create_connection((u.hostname, u.port), timeout=300)
        self.raw, self.body, self.head = bytearray(), bytearray(), None
        self.t_send = self.t_first = self.t_last = None
        self.tokens, self.done, self.error = 0, False, None

    def send(self):
        self.t_send = time.monotonic()  # before the request's first byte leaves
        self.sock.sendall(self.req)
        self.sock.setblocking(False)

    def feed(self, data, now):
        self.raw += data
        if self.head is None:
            end = self.raw.find(b"\r\n\r\n")
            if end < 0:
                return
            self.head, self.raw = bytes(self.raw[:end]), self.raw[end + 4:]
            if not self.head.startswith(b"HTTP/1.1 200"):
                self.error = self.head.split(b"\r\n")[0]
        while not self.done:  # chunked transfer coding: hex size line, data, CRLF
            eol = self.raw.find(b"\r\n")
            if eol < 0:
                break
            size = int(self.raw[:eol].split(b";")[0], 16)
            if len(self.raw) < eol + 2 + size + 2:
                break
            self.body += self.raw[eol + 2:eol + 2 + size]
            del self.raw[:eol + 2 + size + 2]
            self.done = size == 0
        while (nl := self.body.find(b"\n")) >= 0:
            line = bytes(self.body[:nl])
            del self.body[:nl + 1]
            if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                continue
            ev = json.loads(line[6:])
            if ev.get("choices"):
                self.t_first = self.t_first or now
                self.t_last = now
            if ev.get("usage"):
                self.tokens = ev["usage"]["completion_tokens"]


def round_of(S):
    streams = [Stream(prompts[i]) for i in range(S)]  # connected first: the sends then go out together
    sel = selectors.DefaultSelector()
    for st in streams:
        st.send()
    for st in streams:
        sel.register(st.sock, selectors.EVENT_READ, st)
    live, deadline = S, time.monotonic() + 600
    while live and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=5):
            st, now = key.data, time.monotonic()
            data = st.sock.recv(1 << 16)
            if data:
                st.feed(data, now)
            if not data or st.done or st.error:
                sel.unregister(st.sock)
                st.sock.close()
                live -= 1
    res = [("error", st.error) if st.error else (st.t_send, st.t_first, st.t_last, st.tokens) for st in streams]
    bad = [x for x in res if x is None or x[0] == "error" or x[1] is None]
    if bad:
        sys.exit(f"serve_bench: {len(bad)} of {S} requests failed: {bad[0]}")
    t0, t1 = min(x[1] for x in res), max(x[2] for x in res)
    n = sum(x[3] - 1 for x in res)
    spread = 1e3 * (max(x[0] for x in res) - min(x[0] for x in res))
    return n / (t1 - t0), [1e3 * (x[1] - x[0]) for x in res], sum(x[3] for x in res), spread


for S in streams:
    round_of(S)  # warm-up
    tps, ttft, toks, spreads = [], [], 0, []
    for _ in range(R):
        t, f, n, sp = round_of(S)
        tps.append(t)
        spreads.append(sp)
        ttft += f
        toks += n
    ttft.sort()
    print(json.dumps({"side": "server", "streams": S, "new": N, "reps": R, "tok_s": round(statistics.median(tps), 1),
                      "ttft_ms_p50": round(statistics.median(ttft), 3),
                      "ttft_ms_p99": round(ttft[round(0.99 * (len(ttft) - 1))], 3), "tokens": toks,
                      "send_spread_ms": round(statistics.median(spreads), 3)}), flush=True)
