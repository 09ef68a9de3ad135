#!/usr/bin/env bash
# Issue 29's device run: `kiln serve` against the same engine driven in-process, Llama-3-8B package, random
# weights (seed 1 on both sides), the same 32-id prompts, greedy, EOS ignored: tok/s at 1 and 32 concurrent
# streams and time to first token (bench/bench_serve.c in-process, then bench/serve_bench.py over HTTP).
# The server detokenizes with a Llama-3-shaped tokenizer.json of random merges (bench/synth_tokenizer.py):
# random weights carry no tokenizer and kiln serve needs one.
# Usage (repo root, build folder carried): [WAITS='300 0'] bash bench/run_issue29.sh build-gpu
# (WAITS: the --batch-wait-us values to serve with, one server each)
# Build first (here): cmake --build build-gpu -j2 --target kiln_cli bench_serve; the package as in
#   run_issue28.sh (build-gpu/pkgs/l3.kiln); python3 bench/synth_tokenizer.py build-gpu/pkgs/tok; and, for a
#   machine without libmicrohttpd, its shared library and what it needs in build-gpu/lib (ldd build-gpu/kiln).
set -u
B=${1:-build-gpu}
PKG=${PKG:-$B/pkgs/l3.kiln} TOK=${TOK:-$B/pkgs/tok} N=${NEW:-128} R=${REPS:-5} PORT=${PORT:-8199}
OUTDIR=${OUT:-/tmp/kiln-out}
mkdir -p "$OUTDIR"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
if ldd "$B/kiln" | grep -q "not found"; then export LD_LIBRARY_PATH=$PWD/$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; fi
ldd "$B/kiln" | grep "not found" && exit 1
timeout 300 "$B/bench/bench_serve" "$PKG" --prompts "$OUTDIR/prompts.jsonl" --new "$N" --reps "$R" --tokenizer "$TOK" \
  | tee "$OUTDIR/inproc.jsonl" || exit 1
rm -f "$OUTDIR/server.jsonl"
for w in ${WAITS:-300}; do  # --batch-wait-us: each value its own server and rows
  "$B/kiln" serve "$PKG" --random-weights 1 --tokenizer "$TOK" --port "$PORT" --batch-wait-us "$w" > "$OUTDIR/serve.log" 2>&1 &
  srv=$!
  for _ in $(seq 240); do
    python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$PORT/health', timeout=2)" 2> /dev/null && break
    kill -0 $srv 2> /dev/null || { tail -5 "$OUTDIR/serve.log"; exit 1; }
    sleep 1
  done
  timeout 240 python3 bench/serve_bench.py "http://127.0.0.1:$PORT" "$OUTDIR/prompts.jsonl" --new "$N" --reps "$R" \
    | sed "s/^{/{\"wait_us\": $w, /" | tee -a "$OUTDIR/server.jsonl"
  python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:$PORT/metrics').read().decode())" > "$OUTDIR/metrics.txt"
  kill -TERM $srv
  wait $srv
  echo "kiln serve --batch-wait-us $w: exit status $?; $(tail -1 "$OUTDIR/serve.log")"
done
python3 - "$OUTDIR" <<'PY'
import json, sys
rows = [json.loads(l) for f in ("inproc.jsonl", "server.jsonl") for l in open(f"{sys.argv[1]}/{f}") if l.startswith("{")]
inp = {r["streams"]: r for r in rows if r["side"] == "in-process"}
print(f"{'wait us':>7} {'streams':>7} {'in-process tok/s':>16} {'server tok/s':>12} {'ratio':>6} {'TTFT p50 in/srv ms':>19} {'overhead ms':>11} {'TTFT p99 in/srv':>16} {'sends ms':>8}")
for v in (r for r in rows if r["side"] == "server"):
    s, i = v["streams"], inp.get(v["streams"])
    if i:
        print(f"{v['wait_us']:>7} {s:>7} {i['tok_s']:>16.1f} {v['tok_s']:>12.1f} {v['tok_s'] / i['tok_s']:>6.3f} "
              f"{i['ttft_ms_p50']:>8.2f} / {v['ttft_ms_p50']:<8.2f} {v['ttft_ms_p50'] - i['ttft_ms_p50']:>11.2f} "
              f"{i['ttft_ms_p99']:>7.2f} / {v['ttft_ms_p99']:<7.2f} {v['send_spread_ms']:>8.2f}")
PY
