#!/usr/bin/env python3
"""Decode tok/s of one package with a tuning store and without, on random weights (issue 7's acceptance).

  python3 bench/tune_e2e.py --kiln build-gpu/kiln --package PKG --db tune.db [--batches 1,8,32,64] [--reps 2]

Each batch size runs `kiln run PKG --random-weights 1 -v` with --db DB and with --no-db, alternating, REPS
times each (16-token random prompts, 128 new tokens, --ignore-eos); the figure is kiln's own "tok/s after
the first" line, the median of the reps. Prints the store's per-kernel routing (-v "tuning:" lines) once,
then a table: batch, tuned tok/s, default tok/s, ratio, open seconds of each.
"""
import argparse
import random
import re
import statistics
import subprocess
import sys


def run(kiln, pkg, batch, extra):
    rnd = random.Random(batch)
    cmd = [kiln, "run", pkg, "--random-weights", "1", "--max-tokens", "128", "--ignore-eos", "--print-ids", "-v",
           *extra]
    for _ in range(batch):
        cmd += ["--prompt-ids", " ".join(str(rnd.randrange(1000, 30000)) for _ in range(16))]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"kiln run failed ({' '.join(extra)}, batch {batch}): {r.stderr.strip()[-600:]}")
    tps = float(re.search(r"\(([0-9.]+) tok/s after the first\)", r.stderr).group(1))
    opened = float(re.search(r"open ([0-9.]+) s", r.stderr).group(1))
    return tps, opened, r.stderr, r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--package", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--batches", default="1,8,32,64")
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    rows, shown = [], False
    for b in [int(x) for x in a.batches.split(",")]:
        got = {"db": [], "no": []}
        for _ in range(a.reps):
            for mode, extra in (("db", ["--db", a.db]), ("no", ["--no-db"])):
                tps, opened, log, ids = run(a.kiln, a.package, b, extra)
                got[mode].append((tps, opened, ids))
                if mode == "db" and not shown:
                    shown = True
                    print("\n".join(x for x in log.splitlines() if "tuning" in x or "store" in x), flush=True)
        t = statistics.median(x[0] for x in got["db"])
        d = statistics.median(x[0] for x in got["no"])
        same = got["db"][0][2] == got["no"][0][2]
        rows.append((b, t, d, t / d, statistics.median(x[1] for x in got["db"]),
                     statistics.median(x[1] for x in got["no"]), same))
        print(f"batch {b}: tuned {t:.1f} tok/s, default {d:.1f} ({t / d:.3f}x)", flush=True)
    print("\n| batch | tuned tok/s | default tok/s | ratio | open s (tuned / default) | same tokens |")
    print("|---|---|---|---|---|---|")
    for b, t, d, r, ot, od, same in rows:
        print(f"| {b} | {t:.1f} | {d:.1f} | {r:.3f} | {ot:.1f} / {od:.1f} | {same} |")
    worst = min(x[3] for x in rows)
    print(f"worst ratio {worst:.3f} (target >= 1: tuned no slower than the defaults at every batch)")


if __name__ == "__main__":
    main()
