#!/usr/bin/env bash
# Issue 28's device run: speculative decoding in the engine against plain decoding of the same package in
# the same process (bench/bench_spec.c: one open of the target and its draft, then every row). Llama-3-8B
# bf16 target, a Llama-3.2-1B-shaped bf16 draft, random weights (acceptance then says what the random
# models repeat, not what real text gives; the draft's acceptance is near 0, so its rows measure the cost
# of a bad draft with adaptive k).
# Usage (repo root, build folder carried): bash bench/run_issue28.sh build-gpu [--probe]
# Build first (here): cmake -S . -B build-gpu -DKILN_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release &&
#   cmake --build build-gpu -j2 --target kiln_cli bench_spec &&
#   build/kiln compile recipes/llama.lua --model llama-3-8b --target sm_90a -o build-gpu/pkgs/l3.kiln &&
#   build/kiln compile recipes/llama.lua --model llama-3.2-1b --target sm_90a -o build-gpu/pkgs/l32.kiln
# Opening the 8B model with random weights takes most of a minute: give the call 400 s or more.
set -u
B=${1:-build-gpu}
shift $(( $# > 0 ? 1 : 0 ))
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
draft=()
[ -f "$B/pkgs/l32.kiln" ] && draft=(--draft "$B/pkgs/l32.kiln")
timeout 560 stdbuf -oL "$B/bench/bench_spec" "$B/pkgs/l3.kiln" "${draft[@]}" --new "${NEW:-192}" "$@"
