#!/usr/bin/env python3
"""serve_client.py BASE_URL KILN PACKAGE MODEL_FILE: `kiln serve` checked with the real `openai` client
(PyPI) and raw HTTP (tests/cli/serve_openai.sh starts the server). Greedy outputs are compared with
`kiln run`'s; streams with non-streams; 16 concurrent clients with the sequential answers. Prints one line
per check ("ok ..." or "FAIL ..."); exits 1 if any failed."""
import concurrent.futures
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

import openai

BASE, KILN, PKG, MODEL_FILE = sys.argv[1:5]
MODEL = "smol"
fails = 0
# the sanitizer build (reduced tier) runs the same checks with fewer kiln run comparisons
quick = os.environ.get("KILN_TEST_TIER_DEFAULT") == "reduced"


def check(ok, what, detail=""):
    global fails
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f": {detail}"), flush=True)
    fails += 0 if ok else 1


client = openai.OpenAI(base_url=BASE + "/v1", api_key="none", max_retries=0, timeout=300)
url = urllib.parse.urlparse(BASE)


def raw(method, path, body=None, headers=None):
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def kiln_run(prompt, n, special):
    args = [KILN, "run", PKG, "--weights", MODEL_FILE, "--device", "host", "--max-tokens", str(n), "--prompt",
            prompt] + (["--special"] if special else [])
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    return out.stdout[:-1] if out.stdout.endswith("\n") else out.stdout


# ---- chat and completions against kiln run, streams against non-streams, all at once (one batch) ----
q, p = "What is the capital of France?", "def fibonacci(n):"
chat = [{"role": "user", "content": q}]
kw = dict(model=MODEL, prompt="Once upon a time", max_tokens=6, temperature=0.9, top_p=0.95)
jobs = {
    "chat": lambda: client.chat.completions.create(model=MODEL, messages=chat, max_tokens=10),
    "chat_stream": lambda: list(client.chat.completions.create(model=MODEL, messages=chat, max_tokens=10, stream=True,
                                                               stream_options={"include_usage": True})),
    "comp": lambda: client.completions.create(model=MODEL, prompt=p, max_tokens=8),
    "comp_stream": lambda: "".join(x.choices[0].text for x in
                                   client.completions.create(model=MODEL, prompt=p, max_tokens=8, stream=True)),
    "echo": lambda: client.completions.create(model=MODEL, prompt=p, max_tokens=8, echo=True),
    "seed_a": lambda: client.completions.create(seed=7, **kw).choices[0].text,
    "seed_b": lambda: client.completions.create(seed=7, **kw).choices[0].text,
    "n2": lambda: client.completions.create(seed=11, n=2, **dict(kw, temperature=1.5)),
    "n2_stream": lambda: list(client.chat.completions.create(model=MODEL, messages=chat, max_tokens=6, n=2,
                                                             seed=5, temperature=1.5, stream=True)),
}
with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
    futures = {k: pool.submit(f) for k, f in jobs.items()}
    res = {k: f.result() for k, f in futures.items()}

r, chunks = res["chat"], res["chat_stream"]
text = r.choices[0].message.content
# the model's own chat template (SmolLM2's adds its default system message), rendered by kiln
rendered = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n")
check(text == kiln_run(rendered, 10, True), "chat: greedy text equals kiln run of the model's template", repr(text))
check(r.usage.completion_tokens <= 10 and r.usage.prompt_tokens > 5 and
      r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, "chat: usage", r.usage)
check(r.choices[0].finish_reason in ("stop", "length") and r.object == "chat.completion", "chat: fields")
streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
check(streamed == text, "chat stream: the deltas add up to the non-stream text", repr(streamed))
check(chunks[0].choices[0].delta.role == "assistant", "chat stream: the first chunk carries the role")
finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
check(finals == [r.choices[0].finish_reason], "chat stream: one finish_reason, the non-stream's", finals)
check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == r.usage.completion_tokens,
      "chat stream: usage in the last chunk", chunks[-1])
c = res["comp"]
ctext = c.choices[0].text
if not quick:
    check(ctext == kiln_run(p, 8, False), "completions: greedy text equals kiln run", repr(ctext))
check(c.choices[0].finish_reason == "length" and c.usage.completion_tokens == 8, "completions: length 8")
check(res["comp_stream"] == ctext, "completions stream equals non-stream", repr(res["comp_stream"]))
e = res["echo"]
check(e.choices[0].text == p + ctext, "completions echo: the prompt, then the text", repr(e.choices[0].text))
check(res["seed_a"] == res["seed_b"], "seed 7 twice: the same text", (res["seed_a"], res["seed_b"]))
n2 = res["n2"]
check(len(n2.choices) == 2 and [x.index for x in n2.choices] == [0, 1] and n2.choices[0].text != n2.choices[1].text
      and n2.usage.completion_tokens == 12, "n 2: two choices, their own draws, usage of both", n2)
by = {0: "", 1: ""}
ends = {}
for x in res["n2_stream"]:
    for ch in x.choices:
        by[ch.index] += ch.delta.content or ""
        if ch.finish_reason:
            ends[ch.index] = ch.finish_reason
check(sorted(ends) == [0, 1] and by[0] and by[1], "n 2 streamed: both choices, each finished", (by, ends))

# ---- stop_token_ids: the request ends at the first of them (its text shown) ----
ids = subprocess.run([KILN, "run", PKG, "--weights", MODEL_FILE, "--device", "host", "--max-tokens", "8", "--prompt", p,
                      "--print-ids"], capture_output=True, text=True, timeout=300).stdout.split()
first = ids.index(ids[2])
st = client.completions.create(model=MODEL, prompt=p, max_tokens=8, extra_body={"stop_token_ids": [int(ids[2])]})
check(st.choices[0].finish_reason == "stop" and st.usage.completion_tokens == first + 1 and
      ctext.startswith(st.choices[0].text), "stop_token_ids: ends at the id's first occurrence", (ids, st))

# ---- stop strings: the text ends before the first occurrence, never shows it, streamed or not ----
words = ctext.split()
stop = words[len(words) // 2] if words else ctext[-2:]
want = ctext[:ctext.index(stop)]
with concurrent.futures.ThreadPoolExecutor(2) as pool:
    f1 = pool.submit(lambda: client.completions.create(model=MODEL, prompt=p, max_tokens=8, stop=[stop, "@@never@@"]))
    f2 = pool.submit(lambda: "".join(x.choices[0].text for x in client.completions.create(
        model=MODEL, prompt=p, max_tokens=8, stop=stop, stream=True)))
    got, gs = f1.result(), f2.result()
check(got.choices[0].text == want and got.choices[0].finish_reason == "stop", f"stop {stop!r}: text cut before it",
      repr(got.choices[0].text))
check(gs == want, f"stop {stop!r} streamed: never shown", repr(gs))

# ---- logprobs: greedy picks the top alternative; the tokens spell the text; not with stream (yet) ----
lc = client.completions.create(model=MODEL, prompt=p, max_tokens=6, logprobs=2)
lpc = lc.choices[0].logprobs
check(lpc is not None and "".join(lpc.tokens) == lc.choices[0].text and len(lpc.token_logprobs) == 6 and
      all(abs(lp - max(top.values())) < 1e-6 and lp <= 0 for lp, top in zip(lpc.token_logprobs, lpc.top_logprobs)) and
      lpc.text_offset[0] == 0, "completions logprobs 2: the chosen token is the top one, the tokens spell the text",
      lpc)
lch = client.chat.completions.create(model=MODEL, messages=chat, max_tokens=4, logprobs=True, top_logprobs=3)
cont = lch.choices[0].logprobs.content
check(len(cont) == 4 and "".join(x.token for x in cont) == lch.choices[0].message.content and
      all(x.top_logprobs[0].token == x.token and len(x.top_logprobs) == 3 and bytes(x.bytes).decode() == x.token
          for x in cont), "chat logprobs, top_logprobs 3: the chosen token first, bytes, text", cont)

# ---- errors through the client: 400 and 404 with OpenAI's error body ----
def status_of(fn):
    try:
        fn()
        return 200
    except openai.APIStatusError as x:
        return x.status_code


check(status_of(lambda: client.completions.create(model=MODEL, prompt=p, extra_body={"bogus": 1})) == 400,
      "an unknown field: 400")
check(status_of(lambda: client.completions.create(model="gpt-9", prompt=p)) == 404, "another model: 404")
check(status_of(lambda: client.completions.create(model=MODEL, prompt=p, max_tokens=10 ** 7)) == 400,
      "max_tokens past the context: 400")
check(status_of(lambda: client.completions.create(model=MODEL, prompt=p, temperature=-1)) == 400,
      "temperature -1: 400")
check(status_of(lambda: client.completions.create(model=MODEL, prompt=p, n=17)) == 400, "n 17: 400")
sl = list(client.completions.create(model=MODEL, prompt=p, max_tokens=6, logprobs=1, stream=True))
stoks = [t for x in sl if x.choices and x.choices[0].logprobs for t in x.choices[0].logprobs.tokens]
check(len(stoks) == 6 and "".join(stoks) == "".join(x.choices[0].text for x in sl if x.choices) == lc.choices[0].text,
      "logprobs streamed: each token once, across the chunks, spelling the text", stoks)
scs = list(client.chat.completions.create(model=MODEL, messages=chat, max_tokens=4, logprobs=True, stream=True))
sct = [t.token for x in scs if x.choices and x.choices[0].logprobs for t in x.choices[0].logprobs.content]
check(sct == [x.token for x in cont], "chat logprobs streamed: the non-stream tokens", (sct, cont))
check(status_of(lambda: client.completions.create(model=MODEL, prompt=p, logprobs=21)) == 400, "logprobs 21: 400")
# ---- penalties, logit_bias, min_p: the host's sampling path (the engine's tests check each draw) ----
the = int(subprocess.run([KILN, "tokenize", MODEL_FILE], input=" the", capture_output=True, text=True).stdout.split()[-1])
lb = client.completions.create(model=MODEL, prompt=p, max_tokens=5, logit_bias={str(the): 100})
check(lb.choices[0].text == " the" * 5, f"logit_bias +100 on ' the' ({the}): five of it", lb.choices[0].text)
loop = "The cat sat on the mat. The cat sat on the mat. The cat sat on the mat."
plain_loop = client.completions.create(model=MODEL, prompt=loop, max_tokens=12).choices[0].text
pn = client.completions.create(model=MODEL, prompt=loop, max_tokens=12, frequency_penalty=2, presence_penalty=1,
                               extra_body={"repetition_penalty": 1.2})
pns = "".join(x.choices[0].text for x in client.completions.create(
    model=MODEL, prompt=loop, max_tokens=12, frequency_penalty=2, presence_penalty=1,
    extra_body={"repetition_penalty": 1.2}, stream=True))
check(pn.choices[0].text != plain_loop and pns == pn.choices[0].text,
      "penalties change the greedy text of a looping prompt; streamed the same", (plain_loop, pn.choices[0].text, pns))
mp = [client.completions.create(model=MODEL, prompt=p, max_tokens=6, temperature=1, seed=3,
                                extra_body={"min_p": 0.2}).choices[0].text for _ in range(2)]
check(mp[0] == mp[1], "min_p 0.2 with seed 3 twice: the same text", mp)
for bad in ({"presence_penalty": 2.5}, {"frequency_penalty": "x"}, {"repetition_penalty": 0}, {"min_p": 1.5},
            {"logit_bias": {"abc": 1}}, {"logit_bias": {str(the): 101}}, {"logit_bias": {"99999999": 1}},
            {"logit_bias": [1]}):
    check(status_of(lambda: client.completions.create(model=MODEL, prompt=p, max_tokens=2, extra_body=bad)) == 400,
          f"{bad}: 400")
st, body = raw("POST", "/v1/completions", b'{"model": "smol", "prompt": "x", "max_tokens": "5"}')
err = json.loads(body).get("error", {})
check(st == 400 and "max_tokens" in err.get("message", "") and err.get("type") == "invalid_request_error",
      "a badly typed field: 400 naming it", body)

# ---- hostile HTTP: every answer a status, /health throughout ----
cases = [("POST", "/v1/completions", b"{", 400), ("POST", "/v1/completions", b"", 400),
         ("POST", "/v1/completions", b"[1,2]", 400), ("POST", "/v1/completions", b'{"model":"smol","prompt":"\xff\xfe"}', 400),
         ("POST", "/v1/completions", b'{"model":"smol","model":"smol","prompt":"x"}', 400),
         ("POST", "/v1/chat/completions", b'{"model":"smol","messages":[]}', 400),
         ("POST", "/v1/chat/completions", b'{"model":"smol","messages":[{"role":"tool","content":"x"}]}', 400),
         ("POST", "/v1/completions", b'{"model":"smol","prompt":[99999999]}', 400),
         ("POST", "/v1/completions", b"{" + b" " * (1 << 20) + b"}", 400),
         ("GET", "/v1/completions", None, 405), ("GET", "/nope", None, 404), ("POST", "/health", b"", 405)]
for method, path, body, want in cases:
    st, _ = raw(method, path, body)
    check(st == want, f"{method} {path} {body[:40] if body else ''!r}: {want}", st)
check(raw("GET", "/health")[0] == 200, "/health answers after the hostile requests")

# a client that leaves mid-stream: its request is aborted and its pages go back
sock = socket.create_connection((url.hostname, url.port))
req = json.dumps({"model": MODEL, "prompt": p, "max_tokens": 400, "stream": True}).encode()
sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
             str(len(req)).encode() + b"\r\n\r\n" + req)
sock.recv(200)
sock.close()
used = None
for _ in range(100):
    m = raw("GET", "/metrics")[1].decode()
    used = int(next(l.split()[1] for l in m.splitlines() if l.startswith("kiln_kv_pages_used ")))
    running = int(next(l.split()[1] for l in m.splitlines() if l.startswith("kiln_requests_running ")))
    if running == 0:
        break
    time.sleep(0.2)
check(running == 0, "a client gone mid-stream: its request ends", m)
check("kiln_time_to_first_token_seconds_bucket" in m and "kiln_requests_total{status=\"400\"}" in m, "/metrics")

# ---- hostile connections: idle ones by the thousand, a slow body, a truncated one, huge headers ----
# (and the load test: the Release build's; the sanitizer build runs the rest)
def hostile_and_load():
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want_fd = min(hard, 4096)
    if soft < want_fd:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want_fd, hard))
    limit = int(next(l.split()[1] for l in raw("GET", "/metrics")[1].decode().splitlines()
                     if l.startswith("kiln_connection_limit ")))
    idle = []
    for _ in range(min(2000, want_fd - 200, limit - 50)):
        try:
            idle.append(socket.create_connection((url.hostname, url.port), timeout=5))
        except OSError:
            break
    slow = socket.create_connection((url.hostname, url.port))
    body = json.dumps({"model": MODEL, "prompt": "Hi", "max_tokens": 2}).encode()
    slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    cut = socket.create_connection((url.hostname, url.port))
    cut.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"model\"")
    cut.close()
    t0 = time.time()
    health = raw("GET", "/health")[0]
    meanwhile = client.completions.create(model=MODEL, prompt="Hi", max_tokens=2).choices[0].text
    for i in range(0, len(body), 8):  # the slow body, 8 bytes at a time, while the others were answered
        slow.sendall(body[i:i + 8])
        time.sleep(0.02)
    slow_reply = slow.recv(4096).split(b"\r\n")[0]
    slow.close()
    big = raw("GET", "/health", headers={"X-Big": "x" * 100000})[0]
    check(len(idle) >= min(1000, limit - 50) and health == 200 and meanwhile is not None and b"200" in slow_reply and big >= 400,
          f"{len(idle)} idle connections, a slow body, a cut one, 100 kB of headers: /health {health}, the slow "
          f"request {slow_reply!r}, the big header {big}", (len(idle), health, slow_reply, big))
    for c in idle:
        c.close()
    check(raw("GET", "/health")[0] == 200, "/health after the hostile connections")

    # ---- a bounded load test on loopback: 16 streaming clients, 2 requests each ----
    ttft, tokens, t_load = [], [0], time.time()


    def stream_one(i):
        t = time.time()
        first = None
        n = 0
        for x in client.completions.create(model=MODEL, prompt=f"Item {i}:", max_tokens=8, stream=True, seed=i,
                                           temperature=0.8):
            if first is None and x.choices and x.choices[0].text:
                first = time.time() - t
            n += 1
        ttft.append(first if first is not None else time.time() - t)
        tokens[0] += n


    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(stream_one, range(32)))
    wall = time.time() - t_load
    ttft.sort()
    print(f"load: 32 streamed requests, 16 at a time, 8 tokens each: TTFT P50 {ttft[15] * 1e3:.0f} ms, P99 "
          f"{ttft[-1] * 1e3:.0f} ms; {tokens[0] / wall:.1f} chunks/s over {wall:.1f} s (host backend)")
    check(len(ttft) == 32, "load test: every request answered")


if not quick:
    hostile_and_load()

# ---- 16 concurrent clients: the sequential greedy answers (continuous batching) ----
prompts = [f"Count from {i} to {i + 5}:" for i in range(16)]
seq = [client.completions.create(model=MODEL, prompt=x, max_tokens=4).choices[0].text for x in prompts[:4]]
got = [None] * 16
t0 = time.time()


def one(i):
    got[i] = client.completions.create(model=MODEL, prompt=prompts[i], max_tokens=4).choices[0].text


threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check(all(g is not None for g in got) and got[:4] == seq, "16 concurrent clients: all answered, as sequentially",
      (got[:4], seq))
print(f"16 concurrent clients, 4 tokens each: {time.time() - t0:.1f} s")
sys.exit(1 if fails else 0)
