#!/usr/bin/env bash
# Issue 26's device run: the refactored compile pipeline and kernel stage on the H200. The launch geometry
# now comes from the CUDA backend with each binary (CgBinary.threads/smem) instead of a second generation,
# so: the CUDA executor of the kernel tests, whole-model logits against HF (packages compiled by
# pl_compile on the build machine), `kiln run` on a q4_1 package, and `kiln tune` (candidates through
# at_compile -> cg_kernel_jobs) followed by a run that loads the tuned binaries.
# Usage (repo root, build folder carried): bash bench/run_issue26.sh build-gpu
# Build first (here, not on the GPU machine):
#   cmake -S . -B build-gpu -DKILN_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release
#   cmake --build build-gpu -j2 --target kiln_cli kiln kbench test_rt_device test_cg_cuda test_kfam_matmul \
#     test_kfam_qmatmul test_kfam_attention test_kfam_spec_verify test_kfam_kv_write
#   kiln compile recipes/llama.lua --model M [--set n_layers=2] --target sm_90a -o build-gpu/pkgs/...
set -u
B=${1:-build-gpu}
P=$B/pkgs
OUTDIR=${OUT:-/tmp/kiln-out}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# TESTS: the kernel tests to run first (the sweeps take 2-7 minutes each on the CUDA executor)
for t in ${TESTS-test_rt_device test_cg_cuda test_kfam_spec_verify test_kfam_kv_write}; do
  KILN_TEST_EXECUTORS=cuda timeout 400 stdbuf -oL "$B/tests/$t" > "$OUTDIR/$t.log" 2>&1
  echo "$t rc=$? $(grep -E 'cuda:|seed' "$OUTDIR/$t.log" | tr '\n' ' ' | cut -c1-220) | $(tail -1 "$OUTDIR/$t.log")"
done
for c in smollm2-135m llama-3.2-1b:2; do
  name=${c%%:*} layers=0 pkg=${c%%:*}
  [ "$name" != "$c" ] && layers=${c##*:} pkg=${name}_L$layers
  timeout 240 python3 bench/e2e_llama.py --kiln "$B/kiln" --lib "$B/libkiln.so" --package "$P/$pkg.kiln" \
    --config "$name" --layers "$layers" --batches 1 --new-tokens 32 2>&1 | grep -v -e Warning -e "Writing model" | tail -8
  echo "e2e $c rc=${PIPESTATUS[0]}"
done
timeout 60 "$B/kiln" run "$P/smollm2-q41.kiln" --random-weights 1 --prompt-ids "1 2 3 4" --max-tokens 24 --ignore-eos --print-ids -v 2>&1 | tail -4
echo "run q4_1 rc=${PIPESTATUS[0]}"
export KILN_TUNE_DB=$OUTDIR/tune.db
timeout 150 "$B/kiln" tune "$P/smollm2-135m.kiln" --budget 90 --kernels 'rmsnorm*' --max-candidates 12 2>&1 | tail -6
echo "tune rc=${PIPESTATUS[0]}"
timeout 60 "$B/kiln" run "$P/smollm2-135m.kiln" --random-weights 1 --prompt-ids "1 2 3 4" --max-tokens 24 --ignore-eos --print-ids -v 2>&1 | tail -4
echo "run tuned rc=${PIPESTATUS[0]}"
