#!/usr/bin/env bash
# hostile_cli.sh — the hostile probe's CLI findings (F10-F13), each asserting the exit status, the exact
# one-line error and that no file is left or changed:
#   F10 text from a package or a store printed raw: kernel names and configs holding a newline (a forged
#       line) or an ESC (terminal escapes) must print as '?' in kiln kernels, db list, db show and
#       tune --report; db import skips rows whose text holds control characters, saying why.
#   F11 an output that is the same file as an input (recipe, weights, store) is refused before anything
#       is written.
#   F12 an empty option value (--device '', --db '', KILN_TUNE_DB=) is refused, never read as "all" or
#       as the default store.
#   F13 --set numbers go through cli_num's strict rules; empty target lists, repeated single-valued
#       options are refused; a refused import leaves no new store; a legal 250-byte output name works.
#   (session 22) a compile killed by SIGINT/SIGTERM or stopped by the file-size limit leaves nothing.
set -u
. "$(dirname "$0")/checks.bash"
command -v sqlite3 > /dev/null || { in_ci && { echo "FAIL: no sqlite3 shell (CI=true)"; exit 1; }
                                    echo "skip: no sqlite3 shell"; exit 77; }
recipe=$src/recipes/llama.lua
w=$d/w
mkdir -p "$w"
export KILN_TUNE_DB="$d/never.db" # a test that fell back to the default store would show up here

# state: a listing of $w with each file's checksum (what "no file left or changed" compares)
state() { (cd "$w" && for f in $(ls -A); do printf '%s %s\n' "$f" "$(cksum < "$f" 2> /dev/null)"; done) }
# expect NAME STATUS LINE ARGS...: kiln ARGS (run in $w) exits STATUS with exactly LINE on stderr and
# leaves $w as it was.
expect() {
  local name=$1 want_rc=$2 want=$3 rc before
  shift 3
  before=$(state)
  (cd "$w" && "$kiln" "$@" > "$d/out" 2> "$d/err" < /dev/null)
  rc=$?
  if [ $rc != "$want_rc" ]; then bad "$name: exit $rc, want $want_rc: $(head -c 300 "$d/err")"
  elif [ "$(cat "$d/err")" != "$want" ]; then bad "$name: stderr '$(head -c 300 "$d/err")', want '$want'"
  elif [ "$(state)" != "$before" ]; then bad "$name: changed $w: $(ls -A "$w" | tr '\n' ' ')"
  else ok "$name"; fi
}
# clean FILE: FILE holds no control character but newlines (no ESC, no CR, no forged line)
clean() { ! LC_ALL=C grep -q '[[:cntrl:]]' "$1" && ! grep -q '^forged' "$1"; }

# a store with one honest row and one whose kernel holds a newline and whose config holds ESC
"$kiln" db upgrade --db "$w/src.db" > /dev/null || bad "db upgrade"
sqlite3 "$w/src.db" "INSERT INTO devices VALUES ('7cf3ce9c10f9db45', 'NVIDIA H200', 'sm_90a', 132,
  150754820096, '580.159', '13.0', '2026-01-01T00:00:00Z');
INSERT INTO results(device, kernel, ir_hash, bucket, config, median_us, p20_us, p80_us, samples, default_us,
  candidates, invalid, kiln_version, tuned_at) VALUES
  ('7cf3ce9c10f9db45', 'rms'||char(10)||'forged', '1111', 'T=128', 'BLOCK=1024'||char(27)||'[2J', 3.2, 3.1,
   3.3, 20, 4.0, 60, 3, '0.1.0', '2026-01-01T00:00:00Z'),
  ('7cf3ce9c10f9db45', 'good', '2222', 'T=128', 'BLOCK=1024', 3.2, 3.1, 3.3, 20, 4.0, 60, 3, '0.1.0',
   '2026-01-01T00:00:00Z');"

# ---- F10: control characters from a file print as '?' ----
for c in "db list" "db show 1" "tune --report"; do
  "$kiln" $c --db "$w/src.db" > "$d/out" 2> "$d/err"
  if [ $? = 0 ] && clean "$d/out" && grep -q 'rms?forged' "$d/out"; then ok "$c: control characters as '?'"
  else bad "$c: $(cat -v "$d/out" "$d/err" | head -c 400)"; fi
done
"$kiln" db show 1 --db "$w/src.db" | grep -qx 'config      BLOCK=1024?\[2J' && ok "db show: the ESC as '?'" ||
  bad "db show config"
"$kiln" db import --db "$w/in.db" "$w/src.db" > "$d/out" 2> "$d/err"
if [ $? = 0 ] && [ "$(cat "$d/out")" = "$w/src.db: 1 inserted, 0 replaced, 0 kept (pinned), 0 kept (not beaten), 0 binaries, 1 skipped (a text field holds a control character)" ] &&
   [ "$(sqlite3 "$w/in.db" 'SELECT group_concat(kernel) FROM results')" = good ]
then ok "db import skips a row with control characters, saying why"
else bad "db import of control characters: $(cat "$d/out" "$d/err")"; fi
rm -f "$w/in.db"*

if [ "${KILN_HAVE_LLVM:-ON}" = OFF ]; then
  if in_ci; then bad "this build has no LLVM host backend (CI=true)"; else echo "skip: kiln kernels (no LLVM)"; fi
elif ! "$kiln" compile "$recipe" --model tiny --target host -o "$d/tiny.kiln" 2> "$d/err"; then
  bad "compile tiny: $(cat "$d/err")"
else
  cp "$d/tiny.kiln" "$d/bad.kiln"
  sqlite3 "$d/bad.kiln" "UPDATE kernels SET name = 'x'||char(10)||'forged'||char(27)||'[31m' WHERE id = 6;
    UPDATE binaries SET config = config||char(13)||char(10)||'forged' WHERE kernel_id = 6"
  "$kiln" kernels "$d/bad.kiln" > "$d/out" 2> "$d/err"
  if [ $? = 0 ] && clean "$d/out" && [ "$(grep -c 'x?forged?\[31m' "$d/out")" -ge 2 ] && grep -q '??forged$' "$d/out"
  then ok "kernels: names and binary configs with control characters as '?'"
  else bad "kernels: $(cat -v "$d/out" "$d/err" | head -c 400)"; fi
fi

# ---- F11: an output that is the same file as an input is refused before anything is written ----
cp "$recipe" "$w/r.lua"
ln "$w/r.lua" "$w/hard.lua"
echo "not weights" > "$w/w.gguf"
sfx="; kiln does not write over its input"
expect "compile -o the recipe" 1 "kiln: r.lua: is the same file as the recipe r.lua$sfx" \
  compile r.lua --model tiny -o r.lua
expect "compile -o a hard link of the recipe" 1 "kiln: ./hard.lua: is the same file as the recipe r.lua$sfx" \
  compile r.lua --model tiny -o ./hard.lua
fline=$(grep -n 'g:file_dtype(' "$recipe" | head -1 | cut -d: -f1) # where the recipe reads the file
expect "compile -o the weights" 1 "kiln: r.lua:$fline: w.gguf: is the same file as the weights file $w/w.gguf$sfx" \
  compile r.lua --model tiny --set "weight_dtype=gguf:$w/w.gguf" -o w.gguf
expect "tune --report --html the store" 1 "kiln: src.db: is the same file as the tuning store $w/src.db$sfx" \
  tune --report --db "$w/src.db" --html src.db
expect "tune: the store is the package" 1 "kiln: r.lua: is the same file as the package ./r.lua$sfx" \
  tune ./r.lua --db r.lua
expect "tune: the store is the weights" 1 "kiln: w.gguf: is the same file as the weights file ./w.gguf$sfx" \
  tune r.lua --db w.gguf --weights ./w.gguf
expect "db import of the store itself" 1 "kiln: src.db: is the same file as the store to import ./src.db$sfx" \
  db import --db src.db ./src.db
rm -f "$w/r.lua" "$w/hard.lua" "$w/w.gguf"

# ---- F12: an empty value is refused, never read as "every row" or "the default store" ----
cp "$w/src.db" "$w/pr.db"
for c in "prune --device" "prune --ir-hash" "prune --kernels" "prune --bucket" "prune --kiln-version" \
         "pin --device" "unpin --ir-hash" "list --device"; do
  expect "db $c ''" 2 "kiln db: ${c#* } wants a non-empty value" db ${c% *} ${c#* } '' --db pr.db
done
expect "db list --db ''" 2 "kiln db: --db wants a non-empty value" db list --db ''
for o in --db --kernels --html; do
  expect "tune --report $o ''" 2 "kiln tune: $o wants a non-empty value" tune --report $o ''
done
expect "tune --weights ''" 2 "kiln tune: --weights wants a non-empty value" tune p.kiln --weights ''
for o in -o --model --cache-dir --dump-after; do
  expect "compile $o ''" 2 "kiln compile: $o wants a non-empty value" compile "$recipe" $o ''
done
expect "compile --model=" 2 "kiln compile: --model wants a non-empty value" compile "$recipe" --model= -o o.kiln
for o in --weights --db --prompt; do
  expect "run $o ''" 2 "kiln run: $o wants a non-empty value" run p.kiln $o ''
done
empty_env="kiln: KILN_TUNE_DB is set but empty: name a store, give --db FILE, or unset it for the default"
KILN_TUNE_DB= expect "KILN_TUNE_DB= db list" 1 "$empty_env" db list
KILN_TUNE_DB= expect "KILN_TUNE_DB= db prune" 1 "$empty_env" db prune --kernels x
KILN_TUNE_DB= expect "KILN_TUNE_DB= tune --report" 1 "$empty_env" tune --report
KILN_TUNE_DB= expect "KILN_TUNE_DB= run" 1 "$empty_env" run p.kiln --random-weights 1 --prompt-ids 1
rm -f "$w/pr.db"

# ---- F13: --set numbers are strict, target lists not empty, options not repeated ----
for v in +2 ' 2' '2 ' 0x2 2e0; do
  expect "compile --set n_layers='$v'" 1 \
    "kiln: $recipe: --set: config key 'n_layers' is an integer in -2147483648..2147483647, got '$v'" \
    compile "$recipe" --model tiny --set "n_layers=$v" -o o.kiln
done
for v in ' 1e-5' 0x1p-3 inf nan '1e-5 ' 1e-5x; do
  expect "compile --set rms_eps='$v'" 1 "kiln: $recipe: --set: config key 'rms_eps' is a number, got '$v'" \
    compile "$recipe" --model tiny --set "rms_eps=$v" -o o.kiln
done
for t in ,,, host, ,host host,,host; do
  expect "compile --target '$t'" 2 \
    "kiln compile: --target wants a comma-separated list of targets, none empty, got '$t'" \
    compile "$recipe" --model tiny --target "$t" -o o.kiln
done
expect "compile --target ''" 2 "kiln compile: --target wants a non-empty value" \
  compile "$recipe" --model tiny --target '' -o o.kiln
expect "compile -o twice" 2 "kiln compile: -o given more than once" compile "$recipe" -o a.kiln -o b.kiln
expect "compile --model twice" 2 "kiln compile: --model given more than once" \
  compile "$recipe" --model tiny --model=tiny -o a.kiln
expect "db --device twice" 2 "kiln db: --device given more than once" db prune --device a --device b --db x.db
expect "db --pinned --unpinned" 2 "kiln db: --pinned and --unpinned exclude each other" db list --pinned --unpinned
expect "tune --db twice" 2 "kiln tune: --db given more than once" tune --report --db a.db --db b.db
expect "run --weights twice" 2 "kiln run: --weights given more than once" run p.kiln --weights a --weights b
expect "run --seed twice" 2 "kiln run: --seed given more than once" run p.kiln --seed 1 --seed 2
echo "not a store" > "$w/junk.db"
expect "db import of a non-store into a new store" 1 "kiln: junk.db: not an SQLite file, so not a kiln tuning DB" \
  db import --db new.db junk.db
expect "db import: one bad file of two" 1 "kiln: junk.db: not an SQLite file, so not a kiln tuning DB" \
  db import --db new.db src.db junk.db
rm -f "$w/junk.db"
long=$(printf 'a%.0s' $(seq 245)).kiln # 250 bytes: legal, but "<name>.tmp.XXXXXX" would not be
if (cd "$w" && "$kiln" compile "$recipe" --model tiny -o "$long" 2> "$d/err") && [ -f "$w/$long" ] &&
   ! ls -A "$w" | grep -q '\.tmp\.'
then ok "compile -o a 250-byte name"; else bad "compile -o a 250-byte name: $(cat "$d/err")"; fi
rm -f "$w/$long"

# a recipe's print and error text reach the terminal as one line each, control bytes as '?'
printf 'print("hello\\nforged line\\27[2J x\\ry")\nerror("bad \\27[2J\\nforged")\n' > "$d/evil.lua"
(cd "$w" && "$kiln" compile "$d/evil.lua" -o evil.kiln > /dev/null 2> "$d/err"); rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$d/err")" = 2 ] && clean "$d/err" && ! ls -A "$w" | grep -q evil &&
  ok "recipe print/error text: one line each, no control bytes" || bad "recipe text (rc $rc): $(cat -v "$d/err")"

# an interrupted compile (SIGINT, SIGTERM) and one past the file-size limit leave no temporary
for sig in INT TERM; do
  (cd "$w" && timeout -s $sig 0.3 "$kiln" compile "$recipe" --model tiny --set n_layers=8 --target host --no-cache \
     -o sig.kiln > /dev/null 2>&1)
  rc=$?
  if [ -z "$(ls -A "$w" | grep 'sig\.kiln')" ] && [ $rc != 0 ]; then ok "compile killed by SIG$sig (rc $rc): nothing left"
  else bad "compile killed by SIG$sig (rc $rc): left $(ls -A "$w" | tr '\n' ' ')"; fi
done
(cd "$w" && ulimit -f 100 && "$kiln" compile "$recipe" --model tiny --target host -o big.kiln > /dev/null 2> "$d/err")
rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$d/err")" = 1 ] && [ -z "$(ls -A "$w" | grep 'big\.kiln')" ] &&
  ok "compile past the file-size limit: one line, nothing left" ||
  bad "compile past the file-size limit (rc $rc): $(cat "$d/err"); left $(ls -A "$w" | tr '\n' ' ')"

checks_done hostile_cli
