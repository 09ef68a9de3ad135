#!/usr/bin/env bash
# Is a GPU row's greedy text batch-invariant? Prompt 1 alone, in a batch of 8, and in a batch of 8 with
# n-gram speculation: where each diverges from alone (kernel variants and K splits follow the step's M).
# Usage (repo root): bash bench/spec_batch_check.sh build-gpu   (after bench/run_issue28.sh's build)
# Each run opens Llama-3-8B with random weights (~40-50 s, mostly generating 16 GB on the host): give the
# call 400 s. Session 21's first try had 150 s and printed nothing.
set -u
B=${1:-build-gpu} N=${NEW:-64}
ids() { python3 -c "import random; r=random.Random($1); print(' '.join(str(r.randrange(1000, 120000)) for _ in range(32)))"; }
a8=(); for s in 1 2 3 4 5 6 7 8; do a8+=(--prompt-ids "$(ids $s)"); done
r() { timeout 100 "$B/kiln" run "$B/pkgs/l3.kiln" --random-weights 1 --ignore-eos --max-tokens "$N" --print-ids "$@" 2> /dev/null | head -1; }
one=$(r --prompt-ids "$(ids 1)"); echo "alone: $one"
b8=$(r "${a8[@]}"); s8=$(r "${a8[@]}" --spec ngram); g8=$(r "${a8[@]}" --spec ngram --no-cuda-graphs)
python3 - "$one" "$b8" "$s8" "$g8" << 'PY'
import sys
a = sys.argv[1].split()
for name, x in zip(["batch 8 plain", "batch 8 ngram", "batch 8 ngram, no graphs"], sys.argv[2:]):
    x = x.split(); d = next((i for i, (p, q) in enumerate(zip(a, x)) if p != q), None)
    print(f"{name}: {len(x)} tokens, " + ("identical to batch 1 plain" if d is None and len(x) == len(a) else f"first differs at token {d}"))
PY
