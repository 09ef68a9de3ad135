#!/usr/bin/env bash
# kiln tune on the host (docs/AUTOTUNE.md): a tiny host package tuned for a few candidates writes results
# and binaries for every bucket it meets; kiln run -v --db then says tuned / nearest for the tuned kernel
# and gives the greedy tokens of a run without the store; a re-tune keeps pinned rows; --kernels filters;
# --budget stops within a candidate; bad inputs are one line, a non-zero exit and an untouched store;
# --report prints speedups and writes the HTML chart whole or not at all.
set -u
. "$(dirname "$0")/checks.bash"
command -v sqlite3 > /dev/null || { in_ci && { echo "FAIL: no sqlite3 shell (CI=true)"; exit 1; }
                                    echo "skip: no sqlite3 shell"; exit 77; }
# the build's capability (ctest passes it from the configure step), not an error message, decides a skip
if [ "${KILN_HAVE_LLVM:-ON}" = OFF ]; then
  in_ci && { echo "FAIL: this build has no LLVM host backend (CI=true)"; exit 1; }
  echo "skip: this build has no LLVM host backend (KILN_HAVE_LLVM=OFF)"; exit 77
fi
"$kiln" compile "$src/recipes/llama.lua" --model tiny --target host --no-cache -o "$d/tiny.kiln" 2> "$d/err" ||
  { cat "$d/err"; echo "FAIL compile tiny --target host"; exit 1; }

db="$d/t.db" mm=matmul_64_64_bf16_none
# tune_base: without --max-candidates, which a run may set once (a repeated option is refused)
tune_base=("$kiln" tune "$d/tiny.kiln" --device host --max-step-tokens 16 --samples 20)
tune=("${tune_base[@]}" --max-candidates 3)
"${tune[@]}" --db "$db" --kernels "$mm" --budget 60 > "$d/out" 2> "$d/log"; rc=$?
[ $rc = 0 ] && grep -q "^$mm: 3 candidates" "$d/out" && grep -q "T=16 .*\[inserted\]" "$d/out" &&
  ok "tune one kernel" || { bad "tune one kernel"; cat "$d/out" "$d/log"; }
rows=$(sqlite3 "$db" "SELECT group_concat(bucket, ' ') FROM (SELECT bucket FROM results WHERE kernel = '$mm' ORDER BY id)")
[ "$rows" = "T=1 T=2 T=4 T=8 T=16" ] && ok "a result per bucket the runtime meets" || bad "buckets: $rows"
[ "$(sqlite3 "$db" "SELECT count(DISTINCT kernel) FROM results")" = 1 ] && ok "--kernels: only that kernel" || bad "--kernels"
missing=$(sqlite3 "$db" "SELECT count(*) FROM results r WHERE NOT EXISTS (SELECT 1 FROM binaries b WHERE
  b.device = r.device AND b.ir_hash = r.ir_hash AND b.config = r.config AND b.target = 'host' AND b.format = 'host-so')")
[ "$missing" = 0 ] && ok "every result has its host-so binary" || bad "results without binaries: $missing"
[ "$(sqlite3 "$db" "SELECT count(*) FROM results WHERE default_us > 0 AND samples >= 20 AND candidates = 3")" = 5 ] &&
  ok "default times, samples, candidates recorded" || bad "result fields"
grep -q "kiln: tune \[1/1\] $mm: 3/3 candidates, best .* us" "$d/log" && ok "progress lines (not a tty)" || { bad "progress"; cat "$d/log"; }
fp=$("$kiln" db device host | awk '{print $2}')
[ "$(sqlite3 "$db" "SELECT DISTINCT device FROM results")" = "$fp" ] && ok "the runtime's device fingerprint" || bad "fingerprint"

# kiln run: tuned (T=1..16) and nearest above; the same greedy tokens as without the store
python3 "$src/tests/cli/random_weights.py" "$d/tiny.kiln" "$d/w.safetensors"
run=("$kiln" run "$d/tiny.kiln" --weights "$d/w.safetensors" --prompt-ids "1 2 3 4 5 6 7 8 9" --max-tokens 8
     --print-ids --device host)
"${run[@]}" --no-db > "$d/ids0" 2> /dev/null
"${run[@]}" -v --db "$db" > "$d/ids1" 2> "$d/runlog" &&
  grep -q "tuning: $mm: T=1..16 tuned, T=32..2048 nearest T=16$" "$d/runlog" &&
  grep -q "tuning: rmsnorm_64_1e_05_bf16_0: default$" "$d/runlog" && [ -s "$d/ids0" ] && cmp -s "$d/ids0" "$d/ids1" &&
  ok "run -v --db: tuned and nearest, same greedy tokens" || { bad "run --db"; cat "$d/runlog" "$d/ids0" "$d/ids1"; }

# kiln run --random-weights S (timing without a checkpoint): the tuner's weights, the same tokens per seed;
# --weights and --random-weights together (or neither) is a usage error
rw=("$kiln" run "$d/tiny.kiln" --prompt-ids "1 2 3 4 5 6 7 8 9" --max-tokens 8 --print-ids --device host --no-db)
"${rw[@]}" --random-weights 5 > "$d/r1" 2> /dev/null && "${rw[@]}" --random-weights 5 > "$d/r2" 2> /dev/null &&
  "${rw[@]}" --random-weights 6 > "$d/r3" 2> /dev/null && [ -s "$d/r1" ] && cmp -s "$d/r1" "$d/r2" &&
  ! cmp -s "$d/r1" "$d/r3" && ok "run --random-weights: same seed, same tokens" || bad "run --random-weights"
"${rw[@]}" --random-weights 5 --weights "$d/w.safetensors" > /dev/null 2>&1; rc1=$?
"${rw[@]}" > /dev/null 2>&1; rc2=$?
[ $rc1 = 2 ] && [ $rc2 = 2 ] && ok "run: weights from a file or random, exactly one" || bad "run weights usage ($rc1 $rc2)"
# one prompt without --print-ids and no tokenizer to stream text with: all the tokens, printed as ids
"$kiln" run "$d/tiny.kiln" --prompt-ids "1 2 3" --max-tokens 6 --ignore-eos --device host --no-db \
  --random-weights 5 > "$d/r4" 2> "$d/r4err"
[ "$(wc -w < "$d/r4")" = 6 ] && ok "run: one prompt, no tokenizer: 6 ids" ||
  bad "run one prompt without a tokenizer: $(cat "$d/r4" "$d/r4err")"

# every family tuned once (attention, kv_write, embedding, sample, ...): one candidate each
"${tune_base[@]}" --db "$d/all.db" --max-candidates 1 --budget 120 > "$d/out" 2> "$d/log" &&
  [ "$(sqlite3 "$d/all.db" "SELECT count(DISTINCT kernel) FROM results")" = 12 ] &&
  "${run[@]}" --db "$d/all.db" > "$d/ids2" 2> /dev/null && cmp -s "$d/ids0" "$d/ids2" &&
  ok "every kernel of the package tuned, same tokens" || { bad "all kernels"; cat "$d/out" "$d/log"; }

# pins: a pinned row survives a re-tune (the winner may differ; the row may not)
"$kiln" db pin --kernels "$mm" --bucket T=4 --db "$db" > /dev/null
before=$(sqlite3 "$db" "SELECT config || median_us || tuned_at FROM results WHERE bucket = 'T=4'")
"${tune[@]}" --db "$db" --kernels "$mm" --budget 60 > "$d/out" 2> "$d/log"
after=$(sqlite3 "$db" "SELECT config || median_us || tuned_at FROM results WHERE bucket = 'T=4'")
[ "$before" = "$after" ] && grep -q "T=4 .*\[kept (pinned)\]" "$d/out" && grep -q "T=8 .*\[replaced\]" "$d/out" &&
  ok "re-tune keeps the pinned row, replaces the others" || { bad "pinned re-tune"; cat "$d/out"; }

# the budget: no new candidate starts after it (so at most one candidate past it)
start=$(date +%s)
"${tune_base[@]}" --db "$d/b.db" --kernels 'matmul*' --max-candidates 40 --budget 2 > "$d/out" 2> "$d/log"; rc=$?
took=$(( $(date +%s) - start ))
[ $rc = 0 ] && grep -q "the budget ran out" "$d/out" && [ $took -le 12 ] && grep -q "skipped" "$d/out" &&
  ok "--budget 2: stopped in ${took}s, best so far stored" || { bad "budget (${took}s)"; cat "$d/out"; }

# --compile-threads 2: candidates compiled ahead on threads (a GPU's default; the host's is inline)
"${tune[@]}" --db "$d/c.db" --kernels "$mm" --compile-threads 2 --budget 60 > "$d/out" 2> "$d/log" &&
  grep -q "^$mm: 3 candidates .* 3 tried, 0 invalid" "$d/out" &&
  [ "$(sqlite3 "$d/c.db" "SELECT count(*) FROM results WHERE candidates = 3")" = 5 ] &&
  [ "$(sqlite3 "$d/c.db" "SELECT count(*) FROM binaries")" -ge 1 ] &&
  ok "--compile-threads 2: the same candidates, results and binaries" || { bad "compile threads"; cat "$d/out" "$d/log"; }
"$kiln" tune "$d/tiny.kiln" --compile-threads many > /dev/null 2>&1; [ $? = 2 ] && ok "bad --compile-threads: usage error" ||
  bad "compile-threads usage"

# isolation: a candidate that kills the tuner process (KILN_TUNE_KILL injects a SIGKILL at that config) is
# INVALID, and a new process goes on from its kernel; with --no-isolate the run dies
second=$(sqlite3 "$db" "SELECT config FROM results WHERE kernel = '$mm' AND bucket = 'T=1'")
KILN_TUNE_KILL="$second" "${tune[@]}" --db "$d/k.db" --kernels 'matmul_64_64*' --budget 60 -v > "$d/out" 2> "$d/log"; rc=$?
[ $rc = 0 ] && grep -q "killed the tuner process (signal 9): INVALID" "$d/log" &&
  grep -q "INVALID (launch) $second: killed an earlier tuner process" "$d/out" &&
  [ "$(sqlite3 "$d/k.db" "SELECT count(DISTINCT kernel) || ' ' || count(*) FROM results")" = "2 10" ] &&
  [ "$(sqlite3 "$d/k.db" "SELECT count(*) FROM results WHERE config = '$second' AND kernel = '$mm'")" = 0 ] &&
  ok "a candidate that kills the tuner: INVALID, the run goes on" || { bad "isolation"; cat "$d/out" "$d/log"; }
KILN_TUNE_KILL="$second" "${tune[@]}" --db "$d/k2.db" --kernels "$mm" --budget 60 --no-isolate > /dev/null 2>&1; rc=$?
[ $rc -ne 0 ] && ok "--no-isolate: the same candidate ends the run (rc $rc)" || bad "no-isolate rc $rc"

# bad inputs: one line, exit 1, nothing written
cp "$db" "$d/t.orig"
"${tune[@]}" --db "$db" --kernels "$mm" --budget 60 --weights "$d/none.safetensors" > /dev/null 2> "$d/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$d/err")" = 1 ] && grep -q "none.safetensors" "$d/err" && ok "missing weights" || { bad "missing weights"; cat "$d/err"; }
"$kiln" tune "$d/nothere.kiln" --db "$db" > /dev/null 2> "$d/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$d/err")" = 1 ] && grep -q "nothere.kiln: does not exist" "$d/err" && ok "missing package" || { bad "missing package"; cat "$d/err"; }
head -c 5000 "$d/tiny.kiln" > "$d/cut.kiln"
"$kiln" tune "$d/cut.kiln" --db "$db" > /dev/null 2> "$d/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$d/err")" = 1 ] && grep -q "cut.kiln: truncated" "$d/err" && ok "corrupt package" || { bad "corrupt package"; cat "$d/err"; }
cmp -s "$db" "$d/t.orig" && ok "the store is untouched by failed runs" || bad "store modified"
"${tune[@]}" --db "$d/nodir/t.db" --kernels "$mm" > /dev/null 2> "$d/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$d/err")" = 1 ] && grep -q "cannot create: directory" "$d/err" && ok "unwritable --db" || { bad "unwritable db"; cat "$d/err"; }
cp "$d/tiny.kiln" "$d/p.kiln"
"${tune[@]}" --db "$d/p.kiln" --kernels "$mm" > /dev/null 2> "$d/err"; rc=$?
[ $rc = 1 ] && grep -q "a kiln package, not a kiln tuning DB" "$d/err" && cmp -s "$d/p.kiln" "$d/tiny.kiln" &&
  ok "a package as --db: refused, untouched" || { bad "package as db"; cat "$d/err"; }
"${tune[@]}" --db "$db" --kernels 'nothing*' > /dev/null 2> "$d/err"; [ $? = 1 ] && grep -q "no kernel to tune matches" "$d/err" &&
  ok "--kernels matching nothing" || { bad "no kernels"; cat "$d/err"; }
"$kiln" tune > /dev/null 2>&1; [ $? = 2 ] && ok "no package: usage error" || bad "usage"
"$kiln" tune "$d/tiny.kiln" --budget soon > /dev/null 2>&1; [ $? = 2 ] && ok "bad --budget: usage error" || bad "budget usage"
"$kiln" tune --help | grep -q "kiln tune --report" && ok "tune --help" || bad "help"

# the report
"$kiln" tune --report --db "$db" --html "$d/r.html" > "$d/rep" 2> "$d/err" &&
  grep -q "^$mm *T=16 .* us .* us .*x" "$d/rep" && grep -q "geometric mean speedup" "$d/rep" &&
  grep -q "<svg" "$d/r.html" && grep -q "</html>" "$d/r.html" && ! ls "$d"/r.html.tmp.* > /dev/null 2>&1 &&
  ok "--report: table and HTML chart" || { bad "report"; cat "$d/rep" "$d/err"; }
"$kiln" tune --report --db "$db" --html "$d/nodir/r.html" > /dev/null 2> "$d/err"; rc=$?
[ $rc = 1 ] && grep -q "r.html: cannot create" "$d/err" && [ ! -e "$d/nodir" ] && ok "--html unwritable: one line, exit 1" || { bad "html unwritable"; cat "$d/err"; }
"$kiln" tune --report --db "$d/none.db" > /dev/null 2> "$d/err"; [ $? = 1 ] && grep -q "does not exist" "$d/err" &&
  ok "--report of a missing store" || bad "report missing store"

checks_done
