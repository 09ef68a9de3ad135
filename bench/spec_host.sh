#!/usr/bin/env bash
# spec_host.sh — speculative decoding on the host with the real SmolLM2-135M-Instruct (issue 28's host
# line): greedy, three prompts in one batch (a chat question, a code prompt, a text the answer repeats),
# plain decoding against the n-gram proposer, a draft model cut from the target's first 4 layers
# (bench/gguf_prune.py: the same vocabulary and weights, 4 of 30 blocks) as a chain and as a tree of 4
# candidates per depth. Prints, per row, tok/s (after the first token, the batch together), the ratio to
# plain, the acceptance and tokens per verify from `kiln run -v`, and whether the ids equal plain's.
# Usage (repo root, after make build and make models): bash bench/spec_host.sh [BUILD] [MAX_TOKENS]
# Needs the `gguf` package from PyPI (pip install gguf) for the draft's GGUF.
set -eu
B=${1:-build}
N=${2:-48}
kiln=$B/kiln
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
python3 bench/gguf_prune.py "$model" "$d/draft.gguf" 4
opts=(--set weight_dtype=q4_1 --set dtype=f32 --target host)
"$kiln" compile recipes/llama.lua "${opts[@]}" --set tree=true -o "$d/t.kiln" 2> "$d/err"
"$kiln" compile recipes/llama.lua "${opts[@]}" --set n_layers=4 -o "$d/d.kiln" 2> "$d/err"
prompts=(--special --prompt $'<|im_start|>user\nName three colors.<|im_end|>\n<|im_start|>assistant\n'
  --prompt 'def fibonacci(n):'
  --prompt 'Repeat after me: the quick brown fox jumps over the lazy dog. the quick brown')
draft=(--spec draft --draft "$d/d.kiln" --draft-weights "$d/draft.gguf")
run() { # NAME ARGS...: one row
  local name=$1
  shift
  "$kiln" run "$d/t.kiln" --weights "$model" --device host --max-tokens "$N" --ignore-eos --print-ids -v \
    "${prompts[@]}" "$@" > "$d/$name.ids" 2> "$d/$name.err"
  local tps acc per sib
  tps=$(sed -n 's/.*(\([0-9.]*\) tok\/s after the first).*/\1/p' "$d/$name.err")
  acc=$(sed -n 's/.*accepted (\([0-9.]*%\)), \([0-9.]*\) tokens per verify.*/\1 \2/p' "$d/$name.err")
  sib=$(sed -n 's/.*draft trees: \([0-9]*\) sibling tokens verified, \([0-9]*\) kept.*/\2 of \1 siblings/p' \
    "$d/$name.err")
  [ -z "${base:-}" ] && base=$tps
  same=differ
  cmp -s "$d/plain.ids" "$d/$name.ids" && same=same
  printf '%-12s %8s %6.2f %-16s %-20s ids %s\n' "$name" "$tps" "$(awk -v a="$tps" -v b="$base" 'BEGIN { print a / b }')" \
    "${acc:--}" "${sib:-}" "$same"
}
echo "SmolLM2-135M-Instruct q4_1 (f32 activations), host, $(nproc) threads, 3 prompts, $N new tokens each"
printf '%-12s %8s %6s %-16s %-20s\n' row tok/s ratio "accept tok/vf" "tree"
run plain
run ngram4 --spec ngram --spec-k 4
run draft4 "${draft[@]}" --spec-k 4
run tree4x4 "${draft[@]}" --spec-k 4 --spec-branches 4
