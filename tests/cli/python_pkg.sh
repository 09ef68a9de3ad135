#!/usr/bin/env bash
# The kiln Python package (python/, ctypes over libkiln.so): `pip install ./python` into a scratch
# directory, then on the real SmolLM2 (host): greedy generate equals `kiln run` (plain and --chat), the
# streamed pieces add up to it, tokenize/detokenize round-trip, a seed repeats, and a missing weights file
# raises KilnError with the library's message. Skips without the model, except under CI=true.
set -u
. "$(dirname "$0")/checks.bash"
model=$src/models/SmolLM2-135M-Instruct.Q4_1.gguf
skip() { in_ci && { echo "FAIL: $1 (CI=true)"; exit 1; }; echo "SKIP: $1"; exit 77; }
# the sanitizer build's libkiln.so needs the ASan runtime loaded first, which python is not; the Release
# half of CI runs this test
if [ "${KILN_TEST_TIER_DEFAULT:-}" = reduced ]; then echo "SKIP: a sanitized libkiln.so (python cannot load it)"; exit 77; fi
[ -f "$model" ] || skip "$model is absent (make models fetches it)"
[ "${KILN_HAVE_LLVM:-ON}" = OFF ] && skip "this build has no LLVM host backend"
lib=$(cd "$(dirname "$kiln")" && pwd)/libkiln.so
[ -f "$lib" ] || { echo "FAIL: $lib is missing"; exit 1; }
cp -r "$src/python" "$d/python-src" # pip builds in the directory it installs from: not in the source tree
python3 -m pip install -q --disable-pip-version-check --no-deps --target "$d/py" "$d/python-src" \
  > "$d/pip.log" 2>&1 || { cat "$d/pip.log"; echo "FAIL pip install ./python"; exit 1; }
"$kiln" compile "$src/recipes/llama.lua" --set weight_dtype=q4_1 --set dtype=f32 --target host \
  -o "$d/smol.kiln" 2> "$d/err" || { cat "$d/err"; echo "FAIL compile"; exit 1; }
run() { "$kiln" run "$d/smol.kiln" --weights "$model" --device host --max-tokens 8 "$@" 2> /dev/null; }
run --prompt 'def fibonacci(n):' > "$d/plain.txt"
run --chat --prompt 'What is the capital of France?' > "$d/chat.txt"
cd "$d" && PYTHONPATH="$d/py" KILN_LIB="$lib" python3 - "$d/smol.kiln" "$model" "$d" << 'EOF'
import sys
import kiln

pkg, model, d = sys.argv[1:4]
fails = 0


def check(ok, what, detail=""):
    global fails
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f": {detail!r}"))
    fails += 0 if ok else 1


want = open(f"{d}/plain.txt").read()[:-1]
want_chat = open(f"{d}/chat.txt").read()[:-1]
with kiln.Engine(pkg, model, device="host") as e:
    got = e.generate("def fibonacci(n):", max_tokens=8)
    check(got == want, "generate: greedy text equals kiln run", (got, want))
    check(e.finish_reason == "length", "finish_reason length", e.finish_reason)
    pieces = list(e.stream("def fibonacci(n):", max_tokens=8))
    check("".join(pieces) == want and len(pieces) > 1, "stream: the pieces add up", pieces)
    chat = e.generate("What is the capital of France?", chat=True, max_tokens=8)
    check(chat == want_chat, "chat: equals kiln run --chat", (chat, want_chat))
    text = "Héllo, wörld! 你好 <|im_end|>"
    ids = e.tokenize(text, bos=False)
    check(e.detokenize(ids) == text and 2 not in ids, "tokenize/detokenize round trip; control text stays text",
          ids)
    a = e.generate("Once upon a time", max_tokens=6, temperature=0.9, seed=3)
    b = e.generate("Once upon a time", max_tokens=6, temperature=0.9, seed=3)
    check(a == b, "a seed repeats", (a, b))
try:
    kiln.Engine(pkg, f"{d}/missing.gguf", device="host")
    check(False, "a missing weights file raises")
except kiln.KilnError as x:
    check("missing.gguf" in str(x), "a missing weights file: KilnError naming it", str(x))
sys.exit(1 if fails else 0)
EOF
