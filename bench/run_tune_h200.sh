#!/usr/bin/env bash
# Issue 7's acceptance on the H200, one phase per device call (each call is at most 10 minutes).
# Usage (repo root, build folder carried; packages compiled here with build-gpu/kiln for sm_90a):
#   bash bench/run_tune_h200.sh tune   PKG DB BUDGET   kiln tune PKG into DB within BUDGET s, then the report
#   bash bench/run_tune_h200.sh e2e    PKG DB CONFIG   decode tok/s with DB and without a store (e2e_llama.py)
#   bash bench/run_tune_h200.sh same   DB1 DB2         share of (kernel, bucket) keys with the same winner
#   bash bench/run_tune_h200.sh load   PKG DB CONFIG   the e2e run on a copy of DB (a second machine): open time
# DB lives under $OUT so it comes back; carry it (copied into scratch/) to the next call.
set -u
B=${BUILD:-build-gpu}
OUTDIR=${OUT:-/tmp/kiln-out}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
case "${1:-}" in
tune)
  /usr/bin/time -f "kiln tune wall %e s" "$B/kiln" tune "$2" --db "$3" --budget "$4" > "$OUTDIR/tune.log" 2>&1
  echo "tune rc=$?"; tail -3 "$OUTDIR/tune.log"
  "$B/kiln" tune --report --db "$3" --html "$OUTDIR/report.html" | tee "$OUTDIR/report.txt" | head -60 ;;
e2e)
  pkgdir=$(dirname "$2")
  echo "== with the store"
  KILN_TUNE_DB=$3 E2E_ARGS="--batches=1,8,32,64" bash bench/run_e2e_h200.sh "$B" "$pkgdir" "" "$4" | grep -E "decode|rc="
  echo "== without a store"
  E2E_ARGS="--batches=1,8,32,64" bash bench/run_e2e_h200.sh "$B" "$pkgdir" "" "$4" | grep -E "decode|rc=" ;;
same)
  python3 - "$2" "$3" <<'PY'
import sqlite3, sys
rows = [dict(((k, b), c) for k, b, c in sqlite3.connect(p).execute("SELECT ir_hash, bucket, config FROM results"))
        for p in sys.argv[1:3]]
keys = rows[0].keys() & rows[1].keys()
same = sum(rows[0][k] == rows[1][k] for k in keys)
print(f"same winner for {same} of {len(keys)} keys ({100 * same / max(len(keys), 1):.1f}%; target >= 90%)")
PY
  ;;
load)
  cp "$3" "$OUTDIR/copied.db"
  KILN_TUNE_DB=$OUTDIR/copied.db E2E_ARGS="--batches=1" bash bench/run_e2e_h200.sh "$B" "$(dirname "$2")" "" "$4" |
    grep -E "decode|open|rc=" ;;
*) sed -n 2,8p "$0"; exit 2 ;;
esac
