#!/usr/bin/env bash
# bad_recipes.sh — hostile recipes must fail cleanly.
#
#   bash bad_recipes.sh <kiln binary> <source dir> <scratch dir>
#
# For every tests/recipes/bad_<what>.lua, runs `kiln compile <file> -o <scratch>/out.kiln` and checks:
# a non-zero exit status that is not a crash (< 128, and not a timeout), exactly one line on stderr, that
# the line names "bad_<what>.lua:<LINE>:" and contains the expected substring, and that no out.kiln and no
# temporary file (out.kiln.tmp.*) was left behind. The expectation is the file's first line:
#
#   -- expect: <LINE>: <substring>
#
# LINE "-" means the error has no line ("bad_<what>.lua: ..."), e.g. a file that never calls recipe{}.
# Prints one line per case and a final "N passed, N failed"; exits non-zero on any failure.
set -u

if [ $# -ne 3 ]; then
    echo "usage: bash bad_recipes.sh <kiln binary> <source dir> <scratch dir>" >&2
    exit 2
fi
kiln=$1
src=$2
scratch=$3
mkdir -p "$scratch" || exit 1

limit=""
if command -v timeout >/dev/null 2>&1; then
    limit="timeout 120"
fi

pass=0
fail=0
for f in "$src"/tests/recipes/bad_*.lua; do
    [ -e "$f" ] || continue
    name=$(basename "$f")
    first=$(head -n 1 "$f")
    spec=${first#-- expect: }
    line=${spec%%: *}
    sub=${spec#*: }
    why=""
    if [ "$spec" = "$first" ] || [ "$line" = "$spec" ] || [ -z "$sub" ]; then
        why="first line is not '-- expect: <LINE>: <substring>'"
    fi
    if [ "$line" = "-" ]; then
        where="$name: "
    else
        where="$name:$line:"
    fi

    out="$scratch/out.kiln"
    rm -f "$out" "$out".tmp.* "$scratch/stderr"
    $limit "$kiln" compile "$f" -o "$out" >/dev/null 2>"$scratch/stderr"
    rc=$?
    msg=$(head -n 1 "$scratch/stderr")
    nlines=$(awk 'END { print NR }' "$scratch/stderr")

    if [ -n "$why" ]; then
        :
    elif [ "$rc" -eq 0 ]; then
        why="compiled (exit status 0)"
    elif [ -n "$limit" ] && [ "$rc" -eq 124 ]; then
        why="timed out"
    elif [ "$rc" -ge 128 ]; then
        why="crashed (exit status $rc)"
    elif [ "$nlines" -ne 1 ]; then
        why="stderr has $nlines lines, want 1"
    elif ! printf '%s\n' "$msg" | grep -qF -- "$where"; then
        why="message does not point at '$where'"
    elif ! printf '%s\n' "$msg" | grep -qF -- "$sub"; then
        why="message lacks '$sub'"
    elif [ -e "$out" ]; then
        why="left $out behind"
    elif ls "$scratch" | grep -q '\.tmp\.'; then
        why="left a temporary file: $(ls "$scratch" | grep '\.tmp\.' | head -n 1)"
    fi

    if [ -z "$why" ]; then
        pass=$((pass + 1))
        echo "PASS $name: $msg"
    else
        fail=$((fail + 1))
        echo "FAIL $name: $why"
        sed 's/^/    stderr: /' "$scratch/stderr"
    fi
done
rm -f "$scratch/out.kiln" "$scratch/stderr"

if [ $((pass + fail)) -eq 0 ]; then
    echo "no tests/recipes/bad_*.lua under $src"
    fail=1
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
