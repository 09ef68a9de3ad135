#!/usr/bin/env bash
# make_seeds.sh KILN CORPUS_DIR: the package and tuning-store seeds of the fuzz targets, made by kiln
# itself, named .pkg (*.kiln is git-ignored) (the weight-file and tokenizer seeds: make_seeds.py). Needs a build with the LLVM host backend.
set -euo pipefail
kiln=$1 out=$2 src=$(cd "$(dirname "$0")/../.." && pwd) d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir -p "$out/package" "$out/tunedb"
"$kiln" compile "$src/recipes/llama.lua" --model tiny -o "$out/package/tiny_graph.pkg"
"$kiln" compile "$src/recipes/llama.lua" --model tiny --target host --no-cache -o "$out/package/tiny_host.pkg"
"$kiln" tune "$out/package/tiny_host.pkg" --device host --max-step-tokens 4 --max-candidates 2 --samples 5 \
  --db "$d/t.db" --kernels matmul_64_64_bf16_none --budget 30 > /dev/null
rm -f "$out/tunedb/export.db"
"$kiln" db export "$out/tunedb/export.db" --db "$d/t.db"
