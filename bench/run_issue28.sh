#!/usr/bin/env bash
# Issue 28's device run: speculative decoding (n-gram proposer) in the engine on the GPU, against plain
# decoding of the same package in the same run. Llama-3-8B bf16, random weights (acceptance then says
# nothing about real text: it measures the machinery on whatever the random model repeats).
#   - every speculative run's ids must equal the plain run's (with and without CUDA graphs: verify steps
#     of equal draft lengths replay captured graphs);
#   - tok/s at batch 1, 8 and 32 (ngram k 4 and 8), acceptance and tokens per verify;
#   - a copy workload: the prompt holds the plain run's own continuation, and the request continues it.
# Usage (repo root, build folder carried): bash bench/run_issue28.sh build-gpu
# Build first (here): cmake -S . -B build-gpu -DKILN_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release &&
#   cmake --build build-gpu -j2 --target kiln_cli &&
#   build/kiln compile recipes/llama.lua --model llama-3-8b --target sm_90a -o build-gpu/pkgs/l3.kiln &&
#   build/kiln compile recipes/llama.lua --model llama-3.2-1b --target sm_90a -o build-gpu/pkgs/l32.kiln
# (the Llama-3.2-1B-shaped draft: random weights, so acceptance near 0: its rows measure the overhead of a
# bad draft with adaptive k). Each run opens the 8B model with random weights (~45 s): give the call 600 s
# and set RUNS to a subset (names below) when the rest is known.
set -u
B=${1:-build-gpu}
PKG=$B/pkgs/l3.kiln
OUTDIR=${OUT:-/tmp/kiln-out}
N=${NEW:-192}
mkdir -p "$OUTDIR"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
prompt_ids() { # SEED LEN: a prompt of random ids
  python3 -c "import random,sys; r=random.Random($1); print(' '.join(str(r.randrange(1000, 120000)) for _ in range($2)))"
}
run() { # NAME ARGS...: one kiln run; ids to $OUTDIR/NAME.ids, the -v lines to NAME.err; prints tok/s
  local name=$1
  shift
  [ -n "${RUNS:-}" ] && ! [[ " $RUNS " == *" $name "* ]] && return 0
  timeout 150 "$B/kiln" run "$PKG" --random-weights 1 --ignore-eos --max-tokens "$N" --print-ids -v "$@" \
    > "$OUTDIR/$name.ids" 2> "$OUTDIR/$name.err"
  local rc=$? tps acc
  tps=$(sed -n 's/.*(\([0-9.]*\) tok\/s after the first).*/\1/p' "$OUTDIR/$name.err")
  acc=$(sed -n 's/^kiln: speculation: //p' "$OUTDIR/$name.err")
  printf '%-22s rc %s  %8s tok/s  %s\n' "$name" "$rc" "${tps:-?}" "${acc:-}"
  echo "$name ${tps:-0}" >> "$OUTDIR/tps"
}
same() { cmp -s "$OUTDIR/$1.ids" "$OUTDIR/$2.ids" && echo "ids $2 == $1" || echo "IDS DIFFER: $2 vs $1"; }
P1=$(prompt_ids 1 32)
args1=(--prompt-ids "$P1")
args8=()
for s in 1 2 3 4 5 6 7 8; do args8+=(--prompt-ids "$(prompt_ids $s 32)"); done
args32=()
for s in $(seq 1 32); do args32+=(--prompt-ids "$(prompt_ids $s 32)"); done

run b1_plain "${args1[@]}"
run b1_ngram4 "${args1[@]}" --spec ngram --spec-k 4
run b1_ngram8 "${args1[@]}" --spec ngram --spec-k 8
run b1_ngram4_nograph "${args1[@]}" --spec ngram --spec-k 4 --no-cuda-graphs
run b1_plain_nograph "${args1[@]}" --no-cuda-graphs
same b1_plain b1_ngram4; same b1_plain b1_ngram8; same b1_plain b1_ngram4_nograph
# copy workload: the prompt is P1 followed by the plain run's first half; the request continues it
C=$(head -1 "$OUTDIR/b1_plain.ids" | cut -d' ' -f1-$((N / 2)))
run b1_copy_plain --prompt-ids "$P1 $C $P1"
run b1_copy_ngram4 --prompt-ids "$P1 $C $P1" --spec ngram --spec-k 4
same b1_copy_plain b1_copy_ngram4
run b8_plain "${args8[@]}"
run b8_ngram4 "${args8[@]}" --spec ngram --spec-k 4
same b8_plain b8_ngram4
run b32_plain "${args32[@]}"
run b32_ngram4 "${args32[@]}" --spec ngram --spec-k 4
same b32_plain b32_ngram4
if [ -f "$B/pkgs/l32.kiln" ]; then
  run b1_draft4 "${args1[@]}" --spec draft --draft "$B/pkgs/l32.kiln" --spec-k 4
  same b1_plain b1_draft4
  run b8_draft4 "${args8[@]}" --spec draft --draft "$B/pkgs/l32.kiln" --spec-k 4
fi
grep -h "captured" "$OUTDIR"/b1_ngram4.err | head -5
echo "--- table (tok/s after the first token, $N new tokens, Llama-3-8B bf16 random weights)"
cat "$OUTDIR/tps"
