#!/usr/bin/env bash
# Hugging Face tokenizer.json (runtime/rt_tokenizer_hf.c) against the `tokenizers` library from PyPI:
# tests/e2e/hf_tokenizers.py trains and saves four tokenizers (byte-level BPE with GPT-2's regex,
# SmolLM2's and Llama 3's pre-tokenizers; SentencePiece-style BPE with byte fallback) and compares `kiln
# tokenize` with them on a corpus of tricky strings; a Unigram model and a truncated file are refused;
# `kiln run` with safetensors weights finds the tokenizer.json beside them.
# Skips without the tokenizers package, except under CI=true (make deps installs it).
set -u
. "$(dirname "$0")/checks.bash"
if ! python3 -c "import tokenizers" 2> /dev/null; then
  in_ci && { echo "FAIL: the tokenizers package is missing (CI=true)"; exit 1; }
  echo "SKIP: the tokenizers package is missing (make deps installs it)"; exit 77
fi
python3 "$src/tests/e2e/hf_tokenizers.py" "$kiln" "$d" "$src"
