# checks.bash — sourced by the CLI tests (not a test itself: ctest runs tests/cli/*.sh): the arguments
# (kiln, the source tree, a scratch directory made fresh), ok/bad with their counts, and checks_done,
# which prints "[name: ]N passed, N failed" and fails when any check did.
kiln=$1 src=$2 d=$3
rm -rf "$d"; mkdir -p "$d"
pass=0 fail=0
ok()  { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
checks_done() { echo "${1:+$1: }$pass passed, $fail failed"; [ $fail = 0 ]; }
