#!/usr/bin/env bash
# One device run on the H200: GPU tests, then every dense family against PyTorch; the table is printed
# last. Usage (from the repo root, build folder carried): bash bench/run_h200.sh build-gpu
set -u
B=${1:-build-gpu}
OUTDIR=${OUT:-/tmp/kiln-out}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
for t in test_rt_device test_cg_cuda; do
  [ -x "$B/tests/$t" ] || continue
  timeout 150 "$B/tests/$t" > "$OUTDIR/$t.log" 2>&1
  echo "$t rc=$? $(tail -1 "$OUTDIR/$t.log")"
done
timeout "${BENCH_TIMEOUT:-420}" python3 bench/bench_kernels.py --lib "$B/bench/libkbench.so" --json "$OUTDIR/bench.json" \
  "${@:2}" 2>&1 | tee "$OUTDIR/bench.log" | tail -60
