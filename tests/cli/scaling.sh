#!/usr/bin/env bash
# scaling.sh — compile time grows about linearly in the graph's size (finding F9: duplicate-name scans in
# the builder and the verifier, and the arena planner's scan of every placed buffer, made a chain of 45k
# weighted rms_norms take over 3 minutes). tests/recipes/many_leaves.lua with n = 40,000 weights (80,002
# nodes; the recipe memory cap allows about 45k) must compile within 60 s: it takes about 1 s in a
# release build and a few in the sanitized one, while the quadratic code took about 150 s in release, so
# the bound separates the two on any machine without timing noise deciding (a ratio of two timings would
# not). Also, at that size, a duplicate weight name is still found: one line, at its recipe line.
set -u
. "$(dirname "$0")/checks.bash" "$@"
recipe=$src/tests/recipes/many_leaves.lua
n=40000

start=$(date +%s)
timeout 60 "$kiln" compile "$recipe" --set n=$n -o "$d/o.kiln" -v > "$d/out" 2> "$d/err"
rc=$? secs=$(( $(date +%s) - start ))
if [ $rc = 124 ]; then bad "compile n=$n: still running after 60 s (quadratic again?)"
elif [ $rc != 0 ]; then bad "compile n=$n: exit $rc: $(head -c 300 "$d/err")"
elif ! grep -q ": $((2 * n + 2)) nodes, $n launches, 1 kernels" "$d/err"; then bad "compile n=$n: $(cat "$d/err")"
else ok "compile n=$n in ${secs} s"; fi

timeout 60 "$kiln" compile "$recipe" --set n=$n --set dup=true -o "$d/dup.kiln" > "$d/out" 2> "$d/err"
rc=$?
want="kiln: $recipe:16: weight 'w1' is declared twice (first at line 13)"
if [ $rc != 1 ] || [ "$(cat "$d/err")" != "$want" ] || [ -e "$d/dup.kiln" ]; then
  bad "duplicate weight at n=$n: exit $rc: '$(head -c 300 "$d/err")', want '$want'"
else ok "duplicate weight at n=$n"; fi
checks_done scaling
