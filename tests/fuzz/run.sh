#!/usr/bin/env bash
# run.sh BUILD SECONDS JOBS [TARGET...]: runs each libFuzzer target of BUILD (make fuzz built it) for
# SECONDS, JOBS at a time, from a working corpus in BUILD/fuzz-corpus/<name> seeded with
# tests/fuzz/corpus/<name> (the committed seeds are never written). A crash, leak, timeout or broken
# invariant leaves its input in BUILD/fuzz-findings/<name>/ and fails the run; add it to
# tests/fuzz/corpus/<name>/ once fixed (its ctest fuzz.<name> then replays it in every build).
# Prints one line per target: executions, coverage (edges), features, corpus size, verdict.
set -uo pipefail
build=$1 secs=$2 jobs=$3
shift 3
src=$(cd "$(dirname "$0")" && pwd)
names=("$@")
if [ ${#names[@]} = 0 ]; then
  for f in "$src"/fuzz_*.c; do n=$(basename "$f" .c); [ "$n" = fuzz_main ] || names+=("${n#fuzz_}"); done
fi
one() {
  local n=$1 work="$build/fuzz-corpus/$1" found="$build/fuzz-findings/$1" log="$build/fuzz-$1.log"
  mkdir -p "$work" "$found"
  cp -n "$src/corpus/$n"/* "$work"/ 2> /dev/null
  local dict=()
  [ -f "$src/$n.dict" ] && dict=(-dict="$src/$n.dict")
  "$build/tests/fuzz/fuzz_$n" "$work" "${dict[@]}" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$found/" -print_final_stats=1 > "$log" 2>&1
  echo $? > "$log.rc"
}
running=0
for n in "${names[@]}"; do
  [ -x "$build/tests/fuzz/fuzz_$n" ] || { echo "fuzz: no target fuzz_$n in $build (make fuzz builds them)"; exit 1; }
  one "$n" &
  running=$((running + 1))
  if [ $running -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
done
wait
status=0
printf '%-12s %10s %8s %8s %7s  %s\n' target execs cov ft corpus verdict
for n in "${names[@]}"; do
  log="$build/fuzz-$n.log" rc=$(cat "$build/fuzz-$n.log.rc" 2> /dev/null || echo 1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1)
  cov=$(echo "$done_line" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$done_line" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
  corp=$(ls "$build/fuzz-corpus/$n" | wc -l)
  verdict=ok
  if [ "$rc" != 0 ]; then
    verdict="FINDING (rc $rc): $(ls "$build/fuzz-findings/$n" | head -3 | tr '\n' ' ')- see $log"
    status=1
    grep -m3 -E 'ERROR|fuzz finding|runtime error' "$log" | sed 's/^/    /'
  fi
  printf '%-12s %10s %8s %8s %7s  %s\n' "$n" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$corp" "$verdict"
done
exit $status
