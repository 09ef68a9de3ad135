#!/usr/bin/env bash
# One device run on the H200: GPU tests (the CUDA executor of every family test), then the dense families
# and attention against PyTorch; the tables are printed last. Usage (from the repo root, build folder
# carried): bash bench/run_h200.sh build-gpu [--quick]
# Build first (here, not on the GPU machine):
#   cmake -S . -B build-gpu -DKILN_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release
#   cmake --build build-gpu -j2 --target kbench test_rt_device test_cg_cuda \
#     test_kfam_attention test_kfam_spec_verify test_kfam_qmatmul test_kfam_kv_write test_kfam_logits \
#     test_kfam_quant_rows test_kfam_rope test_kfam_sample
set -u
B=${1:-build-gpu}
OUTDIR=${OUT:-/tmp/kiln-out}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
for t in test_rt_device test_cg_cuda test_kfam_attention test_kfam_spec_verify test_kfam_qmatmul test_kfam_kv_write \
         test_kfam_logits test_kfam_quant_rows test_kfam_rope test_kfam_sample; do
  [ -x "$B/tests/$t" ] || continue
  KILN_TEST_EXECUTORS=cuda timeout "${TEST_TIMEOUT:-400}" stdbuf -oL "$B/tests/$t" > "$OUTDIR/$t.log" 2>&1
  echo "$t rc=$? $(tail -1 "$OUTDIR/$t.log")"
done
F='Warning|sdpa = |sd = |No available|peer SDP'
timeout "${BENCH_TIMEOUT:-300}" python3 bench/bench_attention.py --lib "$B/bench/libkbench.so" --json "$OUTDIR/attn.json" \
  "${@:2}" 2>&1 | grep -Ev "$F" | tee "$OUTDIR/attn.log" | tail -20
timeout "${BENCH_TIMEOUT:-300}" python3 bench/bench_kernels.py --lib "$B/bench/libkbench.so" --json "$OUTDIR/bench.json" \
  "${@:2}" 2>&1 | tee "$OUTDIR/bench.log" | tail -30
