#!/usr/bin/env bash
# One device run: CUDA executors of the kernel tests named, then bench/e2e_llama.py on the configs named.
# Usage: bash bench/run_e2e_h200.sh BUILD PKGDIR "test_a test_b" "config[:layers] ..."
# Packages PKGDIR/<config>.kiln (config:N -> <config>_LN.kiln, with --set n_layers=N; optional -f32 twins:
# --set dtype=f32) are compiled on the build machine (kiln compile ... --target sm_90a).
set -u
B=$1 P=$2 TESTS=$3 CONFIGS=$4
OUTDIR=${OUT:-/tmp/kiln-out}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
for t in $TESTS; do
  KILN_TEST_EXECUTORS=cuda timeout "${TEST_TIMEOUT:-150}" stdbuf -oL "$B/tests/$t" > "$OUTDIR/$t.log" 2>&1
  echo "$t rc=$? $(tail -1 "$OUTDIR/$t.log")"
done
for c in $CONFIGS; do
  name=${c%%:*} layers=0 pkg=${c%%:*}
  [ "$name" != "$c" ] && layers=${c##*:} pkg=${name}_L$layers
  f32=; [ -f "$P/$pkg-f32.kiln" ] && f32="--f32-package $P/$pkg-f32.kiln"
  timeout "${E2E_TIMEOUT:-300}" python3 bench/e2e_llama.py --kiln "$B/kiln" --lib "$B/libkiln.so" \
    --package "$P/$pkg.kiln" --config "$name" --layers "$layers" --json "$OUTDIR/e2e_$pkg.json" \
    $f32 ${E2E_ARGS:-} 2>&1 | grep -v -e Warning -e "Writing model" | tail -40
  echo "e2e $c rc=${PIPESTATUS[0]}"
done
