#!/usr/bin/env bash
# The tuning DB through the CLI: kiln db list/show/pin/unpin/export/import/prune/upgrade, the default
# path ($KILN_TUNE_DB, $XDG_CACHE_HOME, ~/.cache), hostile files (one line, exit 1, file unchanged),
# usage errors (exit 2), kiln tune of a package without binaries, and kiln run -v --db: tuned / nearest / default per
# kernel from a store holding binaries (copied from a host package, standing in for tuned ones).
set -u
. "$(dirname "$0")/checks.bash"
command -v sqlite3 > /dev/null || { in_ci && { echo "FAIL: no sqlite3 shell (CI=true)"; exit 1; }
                                    echo "skip: no sqlite3 shell"; exit 77; }

db="$d/t.db"
"$kiln" db upgrade --db "$db" > /dev/null && ok "create with upgrade" || bad "create"
[ "$(sqlite3 "$db" 'PRAGMA application_id')" = 1263818062 ] && ok "application_id KTUN" || bad "application_id"
[ "$(sqlite3 "$db" 'PRAGMA journal_mode')" = wal ] && ok "WAL" || bad "journal mode"
# rows as a tuner would write them (the store is plain SQLite: sqlite3 can read and write it); the recent row is
# dated yesterday so that "prune --older-than 30" keeps it on any day the test runs
recent="$(date -u -d '1 day ago' +%Y-%m-%dT%H:%M:%SZ)"
sqlite3 "$db" "INSERT INTO devices VALUES ('7cf3ce9c10f9db45', 'NVIDIA H200', 'sm_90a', 132, 150754820096,
  '580.159', '13.0', '2026-01-01T00:00:00Z');
INSERT INTO results(device, kernel, ir_hash, bucket, config, median_us, p20_us, p80_us, samples, default_us,
  candidates, invalid, kiln_version, tuned_at) VALUES
  ('7cf3ce9c10f9db45', 'rmsnorm_4096_bf16_1e_05', '1111', 'T=128', 'BLOCK=1024 WARPS=4 ROWS=1', 3.2, 3.1, 3.3,
   20, 4.0, 60, 3, '0.1.0', '$recent'),
  ('7cf3ce9c10f9db45', 'matmul_4096_4096_bf16_none', '2222', 'T=16', 'BM=16 BN=128 BK=64 WARPS=4', 21.5, 21,
   22, 20, 30.1, 256, 40, '0.1.0', '2025-01-01T10:00:00Z'),
  ('7cf3ce9c10f9db45', 'matmul_4096_4096_bf16_none', '2222', 'T=512', 'BM=128 BN=128 BK=64 WARPS=8', 80, 79,
   81, 20, NULL, 256, 40, '0.0.9', '2025-01-01T10:00:00Z');"

"$kiln" db list --db "$db" > "$d/list" 2> "$d/err" && grep -q "NVIDIA H200, sm_90a, 132 SMs" "$d/list" &&
  grep -q "^3 results" "$d/list" && grep -q "1.25x" "$d/list" && ok "list" || { bad "list"; cat "$d/list" "$d/err"; }
"$kiln" db list --db "$db" --kernels 'matmul*' --bucket ' T = 512 ' > "$d/list" && grep -q "^1 result" "$d/list" &&
  grep -q "BM=128" "$d/list" && ok "list with filters" || { bad "list with filters"; cat "$d/list"; }
"$kiln" db show 2 --db "$db" > "$d/show" && grep -q "^config      BM=16 BN=128 BK=64 WARPS=4" "$d/show" &&
  grep -q "speedup 1.40x" "$d/show" && ok "show" || { bad "show"; cat "$d/show"; }
"$kiln" db show 99 --db "$db" > /dev/null 2> "$d/err"; [ $? = 1 ] && grep -q "no result with id 99" "$d/err" &&
  ok "show of a missing id" || bad "show 99"

"$kiln" db pin 1 3 --db "$db" | grep -q "pinned 2 results" && ok "pin by id" || bad "pin by id"
[ "$(sqlite3 "$db" 'SELECT group_concat(id) FROM results WHERE pinned = 1')" = "1,3" ] && ok "pin flags" || bad "pin flags"
"$kiln" db unpin --kernels 'rms*' --db "$db" | grep -q "unpinned 1 result" && ok "unpin by pattern" || bad "unpin"
"$kiln" db pin --db "$db" > /dev/null 2>&1; [ $? = 2 ] && ok "pin without a selection is a usage error" || bad "pin usage"

"$kiln" db export "$d/out.db" --db "$db" --kernels 'matmul*' | grep -q "exported 2 results" && ok "export" || bad "export"
[ ! -e "$d/out.db-wal" ] && [ "$(sqlite3 "$d/out.db" 'PRAGMA journal_mode')" = delete ] && ok "export is one file" || bad "export file"
"$kiln" db export "$d/out.db" --db "$db" > /dev/null 2> "$d/err"; [ $? = 1 ] && grep -q "exists" "$d/err" &&
  ok "export never overwrites" || bad "export overwrite"
"$kiln" db import "$d/out.db" --db "$d/other.db" | grep -q "2 inserted" && ok "import into a new store" || bad "import"
[ "$(sqlite3 "$d/other.db" 'SELECT pinned FROM results WHERE bucket = "T=512"')" = 1 ] && ok "import keeps pins" || bad "import pins"

"$kiln" db prune --older-than 30 --db "$db" | grep -q "pruned 1 result (pinned results kept)" && ok "prune keeps pinned" || bad "prune"
"$kiln" db prune --kiln-version 0.0.9 --include-pinned --db "$db" | grep -q "pruned 1 result" && ok "prune by version" || bad "prune by version"
"$kiln" db prune --db "$db" > /dev/null 2>&1; [ $? = 2 ] && ok "prune needs a criterion" || bad "prune usage"
[ "$(sqlite3 "$db" 'SELECT count(*) FROM results')" = 1 ] && ok "one result left" || bad "rows left"

# hostile files: one line, exit 1, never modified
printf 'not a database, just text that is long enough to look like something......................\n' > "$d/text.db"
cp "$d/text.db" "$d/text.orig"
for sub in "list" "pin 1" "import $d/text.db"; do
  target="$d/text.db"; [ "$sub" = "import $d/text.db" ] && target="$d/other.db"
  "$kiln" db $sub --db "$target" > /dev/null 2> "$d/err"; rc=$?
  if [ "$sub" = "import $d/text.db" ]; then
    [ $rc = 1 ] && [ "$(wc -l < "$d/err")" = 1 ] && grep -q "not an SQLite file" "$d/err" && ok "import of a text file" || { bad "import text"; cat "$d/err"; }
  else
    [ $rc = 1 ] && [ "$(wc -l < "$d/err")" = 1 ] && grep -q "^kiln: $d/text.db: not an SQLite file" "$d/err" &&
      ok "db $sub on a text file" || { bad "db $sub on a text file"; cat "$d/err"; }
  fi
done
cmp -s "$d/text.db" "$d/text.orig" && ok "text file unchanged" || bad "text file modified"
"$kiln" compile "$src/recipes/llama.lua" --model tiny -o "$d/tiny.kiln" 2> /dev/null &&
  { cp "$d/tiny.kiln" "$d/tiny.orig"
    "$kiln" db pin 1 --db "$d/tiny.kiln" > /dev/null 2> "$d/err"; [ $? = 1 ] && grep -q "a kiln package, not a kiln tuning DB" "$d/err" &&
      cmp -s "$d/tiny.kiln" "$d/tiny.orig" && ok "a package is refused, untouched" || { bad "package as DB"; cat "$d/err"; }; }
"$kiln" db list --db "$d/none.db" > /dev/null 2> "$d/err"; [ $? = 1 ] && grep -q "does not exist (nothing tuned yet" "$d/err" &&
  [ ! -e "$d/none.db" ] && ok "list of a missing store creates nothing" || bad "missing store"

# the default path
home="$d/home"; mkdir -p "$home"
env -u KILN_TUNE_DB HOME="$home" XDG_CACHE_HOME= "$kiln" db upgrade > /dev/null && [ -f "$home/.cache/kiln/tune.db" ] &&
  [ "$(stat -c %a "$home/.cache/kiln")" = 700 ] && ok "default: ~/.cache/kiln/tune.db" || bad "default HOME path"
env -u KILN_TUNE_DB HOME="$home" XDG_CACHE_HOME="$d/xdg" "$kiln" db upgrade > /dev/null && [ -f "$d/xdg/kiln/tune.db" ] &&
  ok "default: \$XDG_CACHE_HOME/kiln/tune.db" || bad "default XDG path"
HOME="$home" KILN_TUNE_DB="$db" "$kiln" db list | grep -q "^tuning DB $db" && ok "\$KILN_TUNE_DB" || bad "KILN_TUNE_DB"

"$kiln" db frob > /dev/null 2>&1; [ $? = 2 ] && ok "unknown subcommand: exit 2" || bad "unknown subcommand"
"$kiln" db help | grep -q "kiln db <command>" && ok "db help" || bad "db help"
"$kiln" help | grep -q "db list|show|pin" && ok "help mentions db" || bad "help"
"$kiln" tune "$d/tiny.kiln" --device host --db "$d/tune.db" > /dev/null 2> "$d/err"; rc=$?
[ $rc = 1 ] && grep -q "no host binary" "$d/err" && [ ! -e "$d/tune.db" ] &&
  ok "kiln tune of a package without binaries for the device: one line" || { bad "tune"; cat "$d/err"; }

# kiln run --db on the host: random bf16 weights for the tiny model, a store with the package's own binaries
if "$kiln" compile "$src/recipes/llama.lua" --model tiny --target host -o "$d/host.kiln" 2> /dev/null; then
  python3 "$src/tests/cli/random_weights.py" "$d/host.kiln" "$d/w.safetensors"
  fp=$("$kiln" db device host | awk '{print $2}')
  store="$d/run.db"
  "$kiln" db upgrade --db "$store" > /dev/null
  # kernel $1's package binary (the one whose config starts with $3: a linear layer has one per row
  # count) stored for bucket $2, as a tuner would store a tuned one
  put() { sqlite3 "$store" "ATTACH '$d/host.kiln' AS p;
    INSERT OR IGNORE INTO devices VALUES ('$fp', 'cpu', 'host', 1, 1, 'x', 'none', 'now');
    INSERT OR IGNORE INTO binaries SELECT '$fp', k.ir_hash, b.config, 'host', b.format, b.entry, k.params, b.grid,
      b.block, b.smem, b.data, b.hash, b.compile_ms, '0.1.0', 'now'
      FROM p.binaries b JOIN p.kernels k ON k.id = b.kernel_id WHERE k.name = '$1' AND b.config LIKE '$3%';
    INSERT INTO results(device, kernel, ir_hash, bucket, config, median_us, p20_us, p80_us, samples, kiln_version,
      tuned_at) SELECT '$fp', k.name, k.ir_hash, '$2', b.config, 2, 1, 3, 20, '0.1.0', 'now'
      FROM p.binaries b JOIN p.kernels k ON k.id = b.kernel_id WHERE k.name = '$1' AND b.config LIKE '$3%';"; }
  put rmsnorm_64_1e_05_bf16_0 "" ""
  put matmul_64_64_bf16_none "T=16" "BM=16 "
  run=("$kiln" run "$d/host.kiln" --weights "$d/w.safetensors" --prompt-ids "1 2 3 4 5" --max-tokens 6 --print-ids
       --device host)
  "${run[@]}" --no-db > "$d/ids0" 2> /dev/null
  "${run[@]}" -v --db "$store" > "$d/ids1" 2> "$d/log" &&
    grep -q "tuning: rmsnorm_64_1e_05_bf16_0: tuned$" "$d/log" && grep -q "tuning: embedding_64_256_bf16: default$" "$d/log" &&
    grep -q "tuning: matmul_64_64_bf16_none: T=1..8 nearest T=16, T=16 tuned, T=32..2048 nearest T=16$" "$d/log" &&
    grep -q "(2 tuned, loaded from the store)" "$d/log" && cmp -s "$d/ids0" "$d/ids1" && [ -s "$d/ids0" ] &&
    ok "run -v --db: tuned, nearest and default per kernel, same tokens" || { bad "run --db"; cat "$d/log"; }
  cp "$store" "$d/damaged.db"
  sqlite3 "$d/damaged.db" "UPDATE binaries SET data = CAST(x'00' || substr(data, 2) AS BLOB) WHERE entry LIKE 'rmsnorm%'"
  "${run[@]}" -v --db "$d/damaged.db" > "$d/ids2" 2> "$d/log" && grep -q "binary damaged (hash" "$d/log" &&
    grep -q "tuning: rmsnorm_64_1e_05_bf16_0: default$" "$d/log" && cmp -s "$d/ids0" "$d/ids2" &&
    ok "run --db: a damaged binary is ignored with a note" || { bad "run damaged"; cat "$d/log"; }
  "${run[@]}" --db "$d/text.db" > /dev/null 2> "$d/err"; rc=$?
  [ $rc = 1 ] && [ "$(wc -l < "$d/err")" = 1 ] && grep -q "not an SQLite file" "$d/err" &&
    ok "run --db with a broken store: one line, exit 1" || { bad "run broken store"; cat "$d/err"; }
  "${run[@]}" --db "$d/none.db" > /dev/null 2> "$d/err"; [ $? = 1 ] && grep -q "does not exist" "$d/err" &&
    ok "run --db with a missing store: exit 1" || bad "run missing store"
  empty="$d/emptyhome"; mkdir -p "$empty"
  env -u KILN_TUNE_DB HOME="$empty" XDG_CACHE_HOME= "${run[@]}" -v > /dev/null 2> "$d/log" &&
    grep -q "tuning: no store" "$d/log" && ok "run without a default store: defaults, silently" || { bad "run no default"; cat "$d/log"; }
  mkdir -p "$empty/.cache/kiln"; cp "$store" "$empty/.cache/kiln/tune.db"
  env -u KILN_TUNE_DB HOME="$empty" XDG_CACHE_HOME= "${run[@]}" -v > /dev/null 2> "$d/log" &&
    grep -q "tuning: rmsnorm_64_1e_05_bf16_0: tuned$" "$d/log" && ok "run uses the default store" || { bad "run default store"; cat "$d/log"; }
else
  bad "compile for the host"
fi

checks_done
