# checks.bash — sourced by the CLI tests (not a test itself: ctest runs tests/cli/*.sh): the arguments
# (kiln, the source tree, a scratch directory made fresh), ok/bad with their counts, and checks_done,
# which prints "[name: ]N passed, N failed" and fails when any check did; seed, the run's random seed
# (KILN_TEST_SEED, else fresh; printed so that a failure replays); in_ci, 1 under CI=true (where a missing
# capability is a failure, not a skip).
kiln=$1 src=$2 d=$3
rm -rf "$d"; mkdir -p "$d"
pass=0 fail=0
ok()  { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
checks_done() { echo "${1:+$1: }$pass passed, $fail failed"; [ $fail = 0 ]; }
seed=${KILN_TEST_SEED:-$(( (($(date +%s) << 16) ^ $$) & 0x7fffffff ))}
echo "seed $seed (KILN_TEST_SEED=$seed repeats this run)"
in_ci() { [ "${CI:-}" = true ]; }
