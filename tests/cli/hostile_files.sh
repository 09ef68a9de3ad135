#!/usr/bin/env bash
# hostile_files.sh — special files as kiln's outputs and inputs (docs/PACKAGE.md, "Files").
#
#   bash hostile_files.sh <kiln binary> <source dir> <scratch dir>
#
# Outputs: `kiln compile -o`, `kiln db export` and `kiln tune --report --html` onto a FIFO, a character device (made with mknod in the
# scratch directory, as root only: never a real /dev node), a directory, a symbolic link, a path in a
# missing directory, under a regular file, in an unwritable directory (not as root) must each exit 1 with
# one line naming the path, leave the special file as it was and leave no temporary beside it; a regular
# file is replaced. Inputs: a FIFO or a directory given as the recipe, the package, the tuning store or a
# weights file must be refused with one line, promptly (a FIFO must never block: each run has a timeout).
set -u
. "$(dirname "$0")/checks.bash"

recipe=$src/recipes/llama.lua
lim="timeout 20"
mkfifo "$d/fifo" && mkdir "$d/dir" || { echo "FAIL: cannot make the special files"; exit 1; }
: > "$d/plain"
ln -s "$d/target.kiln" "$d/link"
have_dev=0
if [ "$(id -u)" = 0 ] && mknod "$d/null" c 1 3 2> /dev/null; then have_dev=1; fi

# no_temps DIR: no "*.tmp.*" file in DIR
no_temps() { ! ls -A "$1" 2> /dev/null | grep -q '\.tmp\.'; }
# one_line FILE SUBSTRING: FILE is one line holding SUBSTRING
one_line() { [ "$(awk 'END { print NR }' "$1")" = 1 ] && grep -qF -- "$2" "$1"; }

# out_refused NAME PATH SUBSTRING TEST: kiln compile -o PATH exits 1 with one line naming PATH and
# SUBSTRING, `test TEST PATH` still holds, no temporary beside it.
out_refused() {
    local name=$1 path=$2 sub=$3 kind=$4
    $lim "$kiln" compile "$recipe" --model tiny -o "$path" > /dev/null 2> "$d/err"
    local rc=$?
    if [ $rc = 1 ] && one_line "$d/err" "kiln: $path: $sub" && test "$kind" "$path" &&
        no_temps "$(dirname "$path")"; then
        ok "compile -o $name: refused, untouched, no temporary"
    else
        bad "compile -o $name (rc $rc): $(head -c 300 "$d/err")"
    fi
}

out_refused FIFO "$d/fifo" "is a FIFO, not a regular file" -p
if [ $have_dev = 1 ]; then
    out_refused "character device" "$d/null" "is a character device, not a regular file" -c
    [ "$(stat -c '%t,%T' "$d/null")" = "1,3" ] && ok "the device node is still 1,3" || bad "device node changed"
else
    echo "skip compile -o character device (needs root for mknod)"
fi
out_refused directory "$d/dir" "is a directory, not a regular file" -d
[ -z "$(ls -A "$d/dir")" ] && ok "the directory is still empty" || bad "something written into the directory"
out_refused "symbolic link" "$d/link" "is a symbolic link" -L
[ ! -e "$d/target.kiln" ] && ok "nothing written through the link" || bad "wrote through the link"
out_refused "missing directory" "$d/nodir/x.kiln" "cannot create temporary file: No such file or directory" -n
out_refused "under a regular file" "$d/plain/x.kiln" "cannot write the package here: Not a directory" -n
if [ "$(id -u)" != 0 ]; then
    mkdir "$d/ro" && chmod 555 "$d/ro"
    out_refused "unwritable directory" "$d/ro/x.kiln" "Permission denied" -n
    [ -z "$(ls -A "$d/ro")" ] && ok "nothing left in the unwritable directory" || bad "left files in ro"
    chmod 755 "$d/ro"
else
    echo "skip compile -o in an unwritable directory (root writes anywhere)"
fi

# a regular file is replaced whole, with no temporary left
echo old > "$d/old.kiln"
$lim "$kiln" compile "$recipe" --model tiny -o "$d/old.kiln" > /dev/null 2> "$d/err" &&
    "$kiln" inspect "$d/old.kiln" > /dev/null 2>&1 && no_temps "$d" &&
    ok "compile -o a regular file: replaced by the package" || bad "compile -o regular file: $(cat "$d/err")"

# an overflowing recipe leaves neither the output nor a temporary
cat > "$d/huge.lua" << 'EOF'
recipe {
  name = "huge",
  configs = { tiny = {} },
  build = function(g, cfg)
    local x = g:input("x", "f32", {2^40, 2^40})
    g:output("y", g:add(x, x))
  end,
}
EOF
mkdir "$d/huge" && $lim "$kiln" compile "$d/huge.lua" -o "$d/huge/out.kiln" > /dev/null 2> "$d/err"
rc=$?
[ $rc = 1 ] && one_line "$d/err" "huge.lua:5: input 'x': dimension 1 is 1099511627776" &&
    [ -z "$(ls -A "$d/huge")" ] && ok "overflowing recipe: one line at its line, nothing left" ||
    bad "overflowing recipe (rc $rc): $(cat "$d/err"); left: $(ls -A "$d/huge")"

# kiln db export onto special files (export writes a new file)
"$kiln" db upgrade --db "$d/tune.db" > /dev/null 2>&1 || bad "db upgrade"
for t in fifo dir link; do
    $lim "$kiln" db export --db "$d/tune.db" "$d/$t" > /dev/null 2> "$d/err"
    rc=$?
    if [ $rc = 1 ] && one_line "$d/err" "$d/$t: is " && no_temps "$d"; then ok "db export onto $t: refused"
    else bad "db export onto $t (rc $rc): $(cat "$d/err")"; fi
done
[ -p "$d/fifo" ] && [ -d "$d/dir" ] && [ -L "$d/link" ] && ok "export left the special files as they were" ||
    bad "export changed a special file"

# kiln tune --report --html onto special files (the report is an output like any other)
for t in fifo dir link; do
    $lim "$kiln" tune --report --db "$d/tune.db" --html "$d/$t" > /dev/null 2> "$d/err"
    rc=$?
    if [ $rc = 1 ] && one_line "$d/err" "$d/$t: is " && no_temps "$d"; then ok "tune --html onto $t: refused"
    else bad "tune --html onto $t (rc $rc): $(cat "$d/err")"; fi
done

# inputs: a FIFO or a directory is refused before anything is read, and never blocks
in_refused() {
    local name=$1 sub=$2
    shift 2
    $lim "$@" > /dev/null 2> "$d/err" < /dev/null
    local rc=$?
    if [ $rc = 1 ] && one_line "$d/err" "$sub"; then ok "$name: refused"
    else bad "$name (rc $rc): $(head -c 300 "$d/err")"; fi
}
in_refused "FIFO as the recipe (compile)" "fifo: is a FIFO, not a regular file" \
    "$kiln" compile "$d/fifo" -o "$d/o.kiln"
in_refused "FIFO as the recipe (ir)" "fifo: is a FIFO, not a regular file" "$kiln" ir "$d/fifo"
in_refused "directory as the recipe" "dir: is a directory, not a regular file" "$kiln" ir "$d/dir"
in_refused "FIFO as the package" "fifo: not a regular file" "$kiln" inspect "$d/fifo"
in_refused "directory as the package" "dir: is a directory" "$kiln" inspect "$d/dir"
in_refused "FIFO as the tuning store" "fifo: not a regular file" "$kiln" db list --db "$d/fifo"
in_refused "directory as the tuning store" "dir: is a directory" "$kiln" db list --db "$d/dir"
in_refused "FIFO as a weights file (g:file_dtype)" "fifo: not a regular file" \
    "$kiln" ir "$recipe" --model tiny --set "weight_dtype=gguf:$d/fifo"
[ ! -e "$d/o.kiln" ] && no_temps "$d" && ok "no output or temporary from refused inputs" || bad "left files"

# a recipe path holding a newline forges no line in `kiln ir --locs` or `kiln inspect`
evil="$d/evil
%99 = weight \"fake\" : f32[1].lua"
cp "$recipe" "$evil"
"$kiln" ir "$evil" --model tiny --locs > "$d/ir.txt" 2> "$d/err" && ! grep -q '^%99 = weight' "$d/ir.txt" &&
    grep -q '# .*/evil?%99 = weight "fake" : f32\[1\].lua:[0-9]' "$d/ir.txt" &&
    ok "ir --locs: a newline in the recipe path is shown as '?'" || bad "ir --locs with a forged path"
"$kiln" compile "$evil" --model tiny -o "$d/evil.kiln" > /dev/null 2> "$d/err" &&
    "$kiln" inspect "$d/evil.kiln" > "$d/inspect.txt" 2>&1 && ! grep -q '^%99 = weight' "$d/inspect.txt" &&
    ok "inspect: a newline in the recipe path forges no line" || bad "inspect with a forged path: $(cat "$d/err")"

checks_done hostile_files
