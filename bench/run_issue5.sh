#!/usr/bin/env bash
# Issue 5's one device run for the w4a16 decode copy path (docs/KERNELS.md, qmatmul plan d00 and d1):
# the qmatmul GPU sweep first (its BULK=1 and wtile cases included: a kernel that computes garbage is
# timed for nothing), then the default and BULK=1 kernels on the row word layout and on wtile 16 and 64,
# M = 1, 4, 8, 16, 64, for 28672x4096 and 4096x14336, cuBLAS bf16 timed in the same process; the table
# is printed last. Usage (repo root, the build folder carried; build it here as bench/run_h200.sh says):
#   bash bench/run_issue5.sh build-gpu
set -u
B=${1:-build-gpu}
OUTDIR=${OUT:-/tmp/kiln-out}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
KILN_TEST_EXECUTORS=cuda timeout "${TEST_TIMEOUT:-300}" stdbuf -oL "$B/tests/test_kfam_qmatmul" \
  > "$OUTDIR/test_kfam_qmatmul.log" 2>&1
echo "test_kfam_qmatmul rc=$? $(tail -1 "$OUTDIR/test_kfam_qmatmul.log")"
grep -m 20 -i "fail" "$OUTDIR/test_kfam_qmatmul.log"
timeout "${BENCH_TIMEOUT:-400}" python3 bench/bench_qmatmul.py --lib "$B/bench/libkbench.so" --m 1,4,8,16,64 \
  --wtile 0,16,64 --config "BULK=1" > "$OUTDIR/qmatmul.log" 2>&1
echo "bench_qmatmul rc=$?"
sed -n '/^GPU:/,$p' "$OUTDIR/qmatmul.log"
grep -m 10 -E "BAD|Error|error" "$OUTDIR/qmatmul.log"
