#!/usr/bin/env bash
# Golden test: the printed graph IR of every named config of recipes/llama.lua, after the pass pipeline,
# must equal tests/golden/<model>.gir. Regenerate on purpose with KILN_UPDATE_GOLDEN=1.
set -u
kiln=$1 src=$2 scratch=$3
mkdir -p "$scratch"
pass=0 fail=0
models=$("$kiln" models "$src/recipes/llama.lua" | sed 's/ (default)//') || { echo "kiln models failed"; exit 1; }
[ -n "$models" ] || { echo "no models listed"; exit 1; }
for m in $models; do
  golden="$src/tests/golden/$m.gir"
  out="$scratch/$m.gir"
  if ! "$kiln" ir "$src/recipes/llama.lua" --model "$m" > "$out"; then
    echo "FAIL $m: kiln ir failed"; fail=$((fail + 1)); continue
  fi
  if [ "${KILN_UPDATE_GOLDEN:-}" = 1 ]; then cp "$out" "$golden"; fi
  if [ ! -f "$golden" ]; then
    echo "FAIL $m: missing $golden (run with KILN_UPDATE_GOLDEN=1)"; fail=$((fail + 1))
  elif diff -u "$golden" "$out" > "$scratch/$m.diff"; then
    echo "ok   $m"; pass=$((pass + 1))
  else
    echo "FAIL $m: graph differs from golden"; head -40 "$scratch/$m.diff"; fail=$((fail + 1))
  fi
done
# Every golden file must belong to a listed model (no stale goldens).
for f in "$src"/tests/golden/*.gir; do
  m=$(basename "$f" .gir)
  if ! printf '%s\n' $models | grep -qx "$m"; then echo "FAIL stale golden $f"; fail=$((fail + 1)); fi
done
echo "golden: $pass passed, $fail failed"
[ $fail = 0 ]
