#!/usr/bin/env python3
"""Checks kiln's greedy tokens on SmolLM2 against llama.cpp's (tests/data/smollm2_llamacpp_greedy.txt).

usage: check_greedy.py KILN PACKAGE MODEL GOLDEN

All cases run in one `kiln run` (several --prompt: continuous batching, so batching is checked too).
Per case: kiln's prompt tokens must equal llama.cpp's exactly; generated tokens must equal llama.cpp's
greedy tokens up to the first step where they differ, and a difference is only accepted at a near-tie
(llama.cpp's top-2 margin below NEAR_TIE logits) where kiln picked llama.cpp's runner-up; comparison of
that case ends there. Prints, per case, how many tokens agree before any divergence.
"""
import subprocess
import sys

NEAR_TIE = 0.5


def unescape(text):
    out, i = bytearray(), 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        n = text[i + 1]
        simple = {"\\": b"\\", '"': b'"', "n": b"\n", "t": b"\t", "r": b"\r"}
        if n in simple:
            out += simple[n]
            i += 2
        else:
            out.append(int(text[i + 1:i + 4], 8))
            i += 4
    return out.decode("utf-8")


def read_cases(path):
    cases, cur = [], None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        key, _, val = line.partition(" ")
        if key == "case":
            cur = {"name": val}
        elif key == "prompt":
            cur["prompt"] = unescape(val)
        elif key in ("prompt_tokens", "greedy", "second"):
            cur[key] = [int(x) for x in val.split()]
        elif key == "margin":
            cur[key] = [float(x) for x in val.split()]
        elif key == "end":
            cases.append(cur)
    return cases


def main():
    kiln, pkg, model, golden = sys.argv[1:5]
    cases = read_cases(golden)
    n_max = max(len(c["greedy"]) for c in cases)
    cmd = [kiln, "run", pkg, "--weights", model, "--device", "host", "--max-tokens", str(n_max),
           "--print-prompt-ids", "--print-ids", "--special"]  # the chat case's prompt is its rendered template
    for c in cases:
        cmd += ["--prompt", c["prompt"]]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr.strip())
        return 1
    lines = out.stdout.strip("\n").split("\n")
    if len(lines) != 2 * len(cases):
        print(f"expected {2 * len(cases)} lines of ids, got {len(lines)}:\n{out.stdout}")
        return 1
    bad = 0
    for i, c in enumerate(cases):
        ptoks = [int(x) for x in lines[i].split()]
        got = [int(x) for x in lines[len(cases) + i].split()]
        want = c["greedy"]
        if ptoks != c["prompt_tokens"]:
            print(f"{c['name']}: prompt tokens differ from llama.cpp's\n  kiln  {ptoks}\n  llama {c['prompt_tokens']}")
            bad += 1
            continue
        same = 0
        while same < min(len(got), len(want)) and got[same] == want[same]:
            same += 1
        verdict = "ok"
        if same < len(want):
            if same == len(got):
                verdict = f"FAIL: kiln stopped after {len(got)} tokens, llama.cpp went on"
            elif c["margin"][same] < NEAR_TIE and got[same] == c["second"][same]:
                verdict = (f"diverges at a near-tie (margin {c['margin'][same]:.2f}) on llama.cpp's "
                           f"runner-up: ok")
            else:
                verdict = (f"FAIL: token {same} is {got[same]}, llama.cpp {want[same]} "
                           f"(margin {c['margin'][same]:.2f}, runner-up {c['second'][same]})")
        elif len(got) > len(want):
            verdict = f"FAIL: kiln went on after llama.cpp stopped ({len(got)} > {len(want)})"
        print(f"{c['name']:12s} {same:3d}/{len(want)} tokens identical to llama.cpp: {verdict}")
        bad += verdict.startswith("FAIL")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
