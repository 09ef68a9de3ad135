#!/usr/bin/env bash
# The package through the CLI: compile -> inspect round trip; compile errors leave no file (and an old
# file untouched); hostile packages given to `kiln inspect` fail with one clear line, never a crash.
set -u
. "$(dirname "$0")/checks.bash"

# Round trip.
if "$kiln" compile "$src/recipes/llama.lua" --model tiny -o "$d/tiny.kiln" 2> "$d/err" &&
   "$kiln" inspect "$d/tiny.kiln" > "$d/summary" && grep -q "tiny" "$d/summary" &&
   grep -q "model.embed_tokens.weight" "$d/summary"; then ok "compile + inspect"; else bad "compile + inspect"; cat "$d/err" "$d/summary"; fi
[ "$(sqlite3 "$d/tiny.kiln" 'PRAGMA application_id')" = 1263094862 ] && ok "readable by sqlite3" || bad "sqlite3 application_id"
n=$(sqlite3 "$d/tiny.kiln" 'SELECT count(*) FROM weights')
# tiny: embed + 2 layers x 9 + final norm + lm_head = 21 weights
[ "$n" = 21 ] && ok "weight table ($n rows)" || bad "weight table has $n rows, want 21"
ls "$d" | grep -q tmp && bad "temporary file left behind" || ok "no temporary files"

# Kernels for the host target: a package with binaries and a launch plan; a second compile is served by
# the kernel cache. (Skipped when this build has no LLVM backend.)
cache="$d/cache"
if "$kiln" compile "$src/recipes/llama.lua" --model tiny --target host --cache-dir "$cache" -v -o "$d/host.kiln" 2> "$d/err"; then
  nb=$(sqlite3 "$d/host.kiln" "SELECT count(*) FROM binaries WHERE target = 'host' AND format = 'host-so'")
  nkb=$(sqlite3 "$d/host.kiln" "SELECT count(DISTINCT kernel_id) FROM binaries WHERE target = 'host' AND format = 'host-so'")
  nk=$(sqlite3 "$d/host.kiln" "SELECT count(DISTINCT kernel_id) FROM launch_plan WHERE kernel_id IN (SELECT kernel_id FROM binaries)")
  [ "$nkb" -ge 8 ] && [ "$nkb" = "$nk" ] && ok "host binaries ($nb for $nkb kernels)" ||
    bad "host binaries: $nkb kernels with binaries, $nk launched kernels with binaries"
  # a linear layer's host binaries: rows sized for a decode step (BM 1), a few rows (16) and prefill (128)
  bms=$(sqlite3 "$d/host.kiln" "SELECT group_concat(binaries.config, ' | ') FROM binaries JOIN kernels ON kernels.id = kernel_id
                                WHERE target = 'host' AND kernels.name = 'matmul_64_64_bf16_none'")
  bm_missing=""
  for bm in 1 16 128; do echo "$bms" | grep -q "BM=$bm " || bm_missing="$bm_missing $bm"; done
  [ -z "$bm_missing" ] && ok "host row variants: $bms" || bad "host row variants (no BM$bm_missing): $bms"
  "$kiln" kernels "$d/host.kiln" > "$d/kernels" && grep -q "host-so" "$d/kernels" && ok "kiln kernels lists binaries" || bad "kiln kernels"
  "$kiln" compile "$src/recipes/llama.lua" --model tiny --target host --cache-dir "$cache" -v -o "$d/host2.kiln" 2> "$d/err2"
  grep -q "($nb from cache)" "$d/err2" && ok "recompile served from the cache" || bad "recompile not cached: $(grep binaries "$d/err2")"
  [ "$(sqlite3 "$d/host.kiln" 'SELECT group_concat(hash) FROM (SELECT hash FROM binaries ORDER BY kernel_id)')" = \
    "$(sqlite3 "$d/host2.kiln" 'SELECT group_concat(hash) FROM (SELECT hash FROM binaries ORDER BY kernel_id)')" ] &&
    ok "cached binaries identical" || bad "cached binaries differ"
  [ "$(stat -c %a "$cache")" = 700 ] && [ "$(stat -c %a "$cache/tmp")" = 700 ] &&
    ok "cache directory created 0700" || bad "cache directory mode $(stat -c %a "$cache")"
  # a cache that others may write is refused with one warning line; the compile goes on without it
  open="$d/opencache"; mkdir -p "$open"; chmod 777 "$open"
  if "$kiln" compile "$src/recipes/llama.lua" --model tiny --target host --cache-dir "$open" -o "$d/host3.kiln" 2> "$d/err3" &&
     [ "$(wc -l < "$d/err3")" = 1 ] && grep -q "^kiln: warning: kernel cache $open: writable by group or others" "$d/err3" &&
     [ -z "$(ls -A "$open")" ] &&
     [ "$(sqlite3 "$d/host.kiln" 'SELECT group_concat(hash) FROM (SELECT hash FROM binaries ORDER BY kernel_id)')" = \
       "$(sqlite3 "$d/host3.kiln" 'SELECT group_concat(hash) FROM (SELECT hash FROM binaries ORDER BY kernel_id)')" ]; then
    ok "world-writable cache refused: $(cat "$d/err3")"
  else
    bad "world-writable cache: $(cat "$d/err3")"
  fi
  # Small-M variants (docs/RUNTIME.md): the GPU target gets the down projection's split-K variant (BM 64,
  # below the default's 128, so the runtime picks it only for M <= 64); the host's (BM 1, 16, 128) never
  # split K.
  if "$kiln" compile "$src/recipes/llama.lua" --model llama-3-8b --set n_layers=1 --target sm_90a,host \
       --cache-dir "$cache" -o "$d/l8.kiln" 2> "$d/err4" && "$kiln" kernels "$d/l8.kiln" > "$d/k8"; then
    down="matmul_4096_14336_bf16_none_1 "
    grep "$down.*sm_90a" "$d/k8" | grep -q "BM=64 .*SPLIT_K=4" &&
      grep "$down.*sm_90a" "$d/k8" | grep -q "BM=128 .*SPLIT_K=1" &&
      grep "$down.*host" "$d/k8" | grep -q "SPLIT_K=1" && ! grep "$down.*host" "$d/k8" | grep -q "SPLIT_K=[2-9]" &&
      ok "split-K only in a GPU small-M variant" || bad "split-K variants: $(grep "$down" "$d/k8")"
  else
    bad "compile llama-3-8b for sm_90a,host: $(cat "$d/err4")"
  fi
  # w4a16 planes are "weight:NAME@OFFSET" launch arguments: an offset outside the weight, zero or not a
  # number is a corrupt package, refused at open in one line
  if "$kiln" compile "$src/recipes/llama.lua" --model tiny --set weight_dtype=w4g32z --target host \
       --cache-dir "$cache" -o "$d/w4.kiln" 2> "$d/err5" && grep -q "q_proj.weight@2048 " <(sqlite3 "$d/w4.kiln" "SELECT args FROM launch_plan"); then
    for off in 0 99999999 2048x -8; do
      cp "$d/w4.kiln" "$d/w4bad.kiln"
      sqlite3 "$d/w4bad.kiln" "UPDATE launch_plan SET args = replace(args, 'q_proj.weight@2048 ', 'q_proj.weight@$off ')"
      "$kiln" run "$d/w4bad.kiln" --weights "$d/none.safetensors" --prompt-ids "1 2" --device host > /dev/null 2> "$d/err6"; rc=$?
      [ $rc != 0 ] && [ "$(wc -l < "$d/err6")" = 1 ] && grep -q "does not fit" "$d/err6" &&
        ok "weight plane offset @$off refused" || bad "weight plane offset @$off (rc $rc): $(cat "$d/err6")"
    done
  else
    bad "compile tiny w4g32z: $(cat "$d/err5")"
  fi
elif [ "${KILN_HAVE_LLVM:-ON}" = OFF ] && ! in_ci; then # (ctest passes the build's capabilities)
  echo "skip host kernels: this build has no LLVM (KILN_HAVE_LLVM=OFF)"
else
  bad "compile --target host: $(cat "$d/err")"
fi

# Compile errors leave nothing behind, and an existing package is not touched.
"$kiln" compile "$src/recipes/llama.lua" --model nope -o "$d/none.kiln" 2> "$d/err"; rc=$?
[ $rc != 0 ] && [ ! -e "$d/none.kiln" ] && [ "$(wc -l < "$d/err")" = 1 ] && ok "unknown model: no file" || bad "unknown model (rc $rc)"
cp "$d/tiny.kiln" "$d/keep.kiln"; before=$(md5sum < "$d/keep.kiln")
"$kiln" compile "$src/recipes/llama.lua" --model tiny --set n_heads=3 -o "$d/keep.kiln" 2> "$d/err"; rc=$?
[ $rc != 0 ] && [ "$(md5sum < "$d/keep.kiln")" = "$before" ] && ok "failed compile keeps old file" || bad "failed compile touched old file (rc $rc)"
grep -q "llama.lua:[0-9]*:" "$d/err" && ok "shape error names recipe line: $(cat "$d/err")" || bad "shape error without line: $(cat "$d/err")"
"$kiln" compile "$src/recipes/llama.lua" --model tiny -o "$d/no/such/dir/x.kiln" 2> "$d/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$d/err")" = 1 ] && ok "unwritable output: $(cat "$d/err")" || bad "unwritable output (rc $rc)"
"$kiln" compile "$src/recipes/llama.lua" --model tiny --target sm_99 -o "$d/t.kiln" 2> "$d/err"; rc=$?
[ $rc = 2 ] && [ ! -e "$d/t.kiln" ] && ok "unknown target" || bad "unknown target (rc $rc)"

# Hostile packages.
good="$d/tiny.kiln"; size=$(stat -c %s "$good")
: > "$d/empty.kiln"
head -c $((size / 2)) "$good" > "$d/half.kiln"
head -c 100 "$good" > "$d/head100.kiln"
head -c $((size - 4096)) "$good" > "$d/short.kiln"
# b-tree page header of page 2 (quick_check's side) and a changed graph text (the stored hash's side)
psize=$(sqlite3 "$good" 'PRAGMA page_size')
cp "$good" "$d/flipped.kiln"; printf '\xde\xad\xbe\xef\xde\xad\xbe\xef' | dd of="$d/flipped.kiln" bs=1 seek=$psize conv=notrunc 2> /dev/null
cp "$good" "$d/tampered.kiln"; sqlite3 "$d/tampered.kiln" "UPDATE graph SET text = replace(text, 'bf16', 'f16')"
python3 -c "import random, sys; sys.stdout.buffer.write(random.Random($seed).randbytes(65536))" > "$d/random.kiln"
echo "this is not a package" > "$d/text.kiln"
sqlite3 "$d/foreign.kiln" "CREATE TABLE t(x); INSERT INTO t VALUES (1);"
sqlite3 "$d/nometa.kiln" "PRAGMA application_id = 1263094862; PRAGMA user_version = 2; CREATE TABLE x(y);"
cp "$good" "$d/future.kiln"; sqlite3 "$d/future.kiln" "PRAGMA user_version = 99"
mkdir -p "$d/dir.kiln"
for f in empty half head100 short flipped tampered random text foreign nometa future dir missing; do
  p="$d/$f.kiln"
  sum=$( [ -f "$p" ] && md5sum < "$p")
  "$kiln" inspect "$p" > "$d/out" 2> "$d/err"; rc=$?
  lines=$(wc -l < "$d/err")
  if [ $rc = 1 ] && [ "$lines" = 1 ] && grep -q "^kiln: .*$f.kiln" "$d/err" && [ "$sum" = "$( [ -f "$p" ] && md5sum < "$p")" ]; then
    ok "$f: $(cat "$d/err")"
  else
    bad "$f: rc=$rc lines=$lines: $(head -c 300 "$d/err")"
  fi
done
ls "$d" | grep -qE -- '-journal|-wal' && bad "inspect left journal files" || ok "inspect wrote nothing"
checks_done package
