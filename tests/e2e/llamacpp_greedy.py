#!/usr/bin/env python3
"""Greedy reference tokens for SmolLM2-135M-Instruct Q4_1 from llama.cpp (the peer), for kiln's end-to-end test.

Needs llama-cpp-python (CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install llama-cpp-python, into a venv) and the model
(make models). Regenerate:
    python tests/e2e/llamacpp_greedy.py [MODEL] [-o tests/data/smollm2_llamacpp_greedy.txt]
For each prompt: tokenize with llama.cpp (BOS as the GGUF metadata says), then decode greedily by taking the
argmax of the last-position logits ourselves (no sampler), stopping early only when the argmax is an
end-of-generation token. The output format is described in the header of the file it writes.
"""
import hashlib, os, sys

import jinja2
import llama_cpp
import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
N_NEW = 48
CHAT_USER = "List three primary colors."
CASES = [  # (name, prompt text or None for the chat case)
    ("english", "Once upon a time, in a small village by the sea, there lived an old fisherman who"),
    ("code", 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'),
    ("chat", None),
    ("numbers", "Q: 12 * 34 = ? A: 408. Q: (7 + 15) / 2 = ? A: 11. Q: 3.14 * 2 = ? A:"),
    ("unicode", "Le café coûte 3,50 € — naïve façade. 日本語: こんにちは世界! Ελληνικά: καλημέρα."),
    ("whitespace", "  two leading spaces\n\n\tthen a tab,   three spaces,\r\nand CRLF:"),
]


def c_escape(s):
    """C string escapes: \\\\ \\" \\n \\t \\r, \\ooo (3 octal digits) for every other byte outside printable ASCII."""
    out = []
    for b in s.encode("utf-8"):
        c = chr(b)
        if c in '\\"':
            out.append("\\" + c)
        elif c in "\n\t\r":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[c])
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append("\\%03o" % b)
    return "".join(out)


def last_logits(llm):
    ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).copy()


def main():
    args = sys.argv[1:]
    out_path = os.path.join(ROOT, "tests", "data", "smollm2_llamacpp_greedy.txt")
    if "-o" in args:
        i = args.index("-o")
        out_path = args[i + 1]
        del args[i:i + 2]
    model_path = args[0] if args else os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    with open(model_path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()

    llm = llama_cpp.Llama(model_path=model_path, n_ctx=512, logits_all=False, n_threads=2, verbose=False, seed=0)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
    template = jinja2.Template(llm.metadata["tokenizer.chat_template"])
    chat_prompt = template.render(messages=[{"role": "user", "content": CHAT_USER}], add_generation_prompt=True)

    lines = [
        f"# SmolLM2-135M-Instruct Q4_1: greedy decoding by llama.cpp (llama-cpp-python {llama_cpp.__version__}, "
        f"CPU, n_ctx 512, 2 threads)",
        f"# model sha256 {sha}",
        "# regenerate: python3 tests/e2e/llamacpp_greedy.py (with llama-cpp-python installed; make models first)",
        f"# vocab {llm.n_vocab()}, bos {llm.token_bos()}, eos {llm.token_eos()}, metadata add_bos_token "
        f"{llm.metadata.get('tokenizer.ggml.add_bos_token', '?')} -> llama.cpp add_bos {int(add_bos)}",
        "# One block per case, lines in this order ('#' lines are comments):",
        "#   case NAME",
        "#   prompt TEXT          C escapes: \\\\ \\\" \\n \\t \\r, \\ooo (3 octal digits) for other bytes; UTF-8",
        "#   tokenize add_bos B special S   llama_tokenize flags (special 1: <|im_start|> etc. parse as special tokens)",
        "#   prompt_tokens IDS",
        "#   top5 ID:LOGIT x5     last-position logits after the prompt, best first",
        "#   greedy IDS           argmax at each step, up to " + str(N_NEW) + " new tokens",
        "#   second IDS           runner-up at each step",
        "#   margin VALUES        top1 - top2 logit at each step (2 decimals; near 0 = near-tie)",
        "#   stop eos|length      eos: the last greedy token is end-of-generation (argmax), decoding stopped there",
        "#   end",
        "# llama.cpp itself moves these logits by up to ~0.4 when the prompt is evaluated one token at a time",
        "# (n_batch 1, another matmul path): treat steps with margin below ~0.5 as near-ties, not bugs.",
    ]
    for name, text in CASES:
        special = text is None
        if special:
            text = chat_prompt
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special)
        llm.reset()
        llm.eval(tokens)
        greedy, second, margin, top5, stop = [], [], [], None, "length"
        for step in range(N_NEW):
            logits = last_logits(llm)
            order = np.argsort(-logits, kind="stable")  # ties: the lower id first, as np.argmax
            if top5 is None:
                top5 = " ".join(f"{i}:{logits[i]:.4f}" for i in order[:5])
            best = int(order[0])
            greedy.append(best)
            second.append(int(order[1]))
            margin.append(float(logits[order[0]] - logits[order[1]]))
            if llama_cpp.llama_vocab_is_eog(vocab, best):
                stop = "eos"
                break
            if step + 1 < N_NEW:
                llm.eval([best])
        continuation = llm.detokenize(greedy).decode("utf-8", errors="replace")
        lines += [
            "",
            f"case {name}",
            f"prompt {c_escape(text)}",
            f"tokenize add_bos {int(add_bos)} special {int(special)}",
            "prompt_tokens " + " ".join(map(str, tokens)),
            "top5 " + top5,
            "greedy " + " ".join(map(str, greedy)),
            "second " + " ".join(map(str, second)),
            "margin " + " ".join(f"{m:.2f}" for m in margin),
            f"stop {stop}",
            f"# continuation: {c_escape(continuation)}",
            "end",
        ]
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
