#!/usr/bin/env bash
# Packages and stores as untrusted data (docs/PACKAGE.md, "Reading and validation", "Threat model"): a
# fresh tiny host package edited with sqlite3 — a kernel bound to a smaller weight, a weight plane past
# its tensor, an input of another dtype bound to a param, a cache of the wrong shape, deleted, swapped
# and missing steps, a grid that its config does not give, edited config rows, an activation smaller than
# its shape or aliased while live, weight rows that contradict their shape, meta maxima past 32 bits,
# split rows past the workspace, config rows that contradict the plan even with a recomputed hash — each
# refused by `kiln run` with exit 1 and one exact line; a tuning store whose binary's grid was edited is imported and its
# kernel falls back to the default (one log line, the same tokens); NaN weights fail the open (an all-NaN
# checkpoint by the default sample, a single NaN only with --check-weights). Session 22: a family or spec
# not what the kernel IR was built from, a quantized weight bound to a plain param or off its plane
# offsets, i32 arguments bound to the wrong value, a config and grid edited together, a binary entry that
# names another symbol or truncated code, a step that overwrites a live value or works in place, config
# head counts and page size against the kernels. Edits are followed by rehash_binaries.py (REHASH=0 keeps
# the stored hashes), so the checks behind the hashes are what is tested.
set -u
. "$(dirname "$0")/checks.bash"
command -v sqlite3 > /dev/null || { in_ci && { echo "FAIL: no sqlite3 shell (CI=true)"; exit 1; }
                                    echo "skip: no sqlite3 shell"; exit 77; }
if [ "${KILN_HAVE_LLVM:-ON}" = OFF ]; then
  in_ci && { echo "FAIL: this build has no LLVM host backend (CI=true)"; exit 1; }
  echo "skip: this build has no LLVM host backend (KILN_HAVE_LLVM=OFF)"; exit 77
fi
"$kiln" compile "$src/recipes/llama.lua" --model tiny --target host -o "$d/tiny.kiln" 2> "$d/err" &&
"$kiln" compile "$src/recipes/llama.lua" --model tiny --target host --set weight_dtype=w4g32z -o "$d/w4.kiln" 2>> "$d/err" ||
  { cat "$d/err"; echo "FAIL compile tiny --target host"; exit 1; }
python3 "$src/tests/cli/random_weights.py" "$d/tiny.kiln" "$d/w.safetensors"

run() { "$kiln" run "$1" --prompt-ids "1 2 3" --max-tokens 3 --print-ids --device host --no-db "${@:2}"; }
# tamper NAME BASE SQL WANT: the edited package fails to open with exactly the line WANT. The binaries'
# hashes are recomputed after the edit (as an editor could) so the checks behind them are what is tested;
# REHASH=0 keeps the stored hashes.
tamper() {
  cp "$d/$2" "$d/bad.kiln"; sqlite3 "$d/bad.kiln" "$3"
  [ "${REHASH:-1}" = 0 ] || python3 "$src/tests/cli/rehash_binaries.py" "$d/bad.kiln"
  run "$d/bad.kiln" --random-weights 1 > /dev/null 2> "$d/err"; local rc=$?
  if [ $rc = 1 ] && [ "$(cat "$d/err")" = "kiln: $d/bad.kiln: $4" ]; then ok "$1"
  else bad "$1 (rc $rc): $(cat "$d/err")"; fi
}
swap() { echo "UPDATE launch_plan SET step = 1000 WHERE step = $1; UPDATE launch_plan SET step = $1 WHERE step = $2;
               UPDATE launch_plan SET step = $2 WHERE step = 1000"; }
run "$d/tiny.kiln" --random-weights 1 > /dev/null 2> "$d/err" && ok "the untouched package runs" || bad "untouched: $(cat "$d/err")"

tamper "kernel bound to a smaller weight" tiny.kiln \
  "UPDATE launch_plan SET args = replace(args, 'o_proj.weight', 'k_proj.weight') WHERE step = 6" \
  "step 6 (kernel matmul_64_64_bf16_none): param w needs a weight of shape [64,64], weight model.layers.0.self_attn.k_proj.weight is [32,64]"
tamper "weight plane moved" w4.kiln \
  "UPDATE launch_plan SET args = replace(args, 'q_proj.weight@2304', 'q_proj.weight@2400') WHERE step = 2" \
  "step 2 (kernel qmatmul_64_64_bf16_none_w4a16_32_1_f16): param zeros reads weight model.layers.0.self_attn.q_proj.weight at offset 2400, but its plane starts at 2304"
tamper "weight plane misaligned" w4.kiln \
  "UPDATE launch_plan SET args = replace(args, 'q_proj.weight@2048', 'q_proj.weight@2049') WHERE step = 2" \
  "step 2 (kernel qmatmul_64_64_bf16_none_w4a16_32_1_f16): param scales reads weight model.layers.0.self_attn.q_proj.weight at offset 2049, but its plane starts at 2048"
tamper "weight codes off their start" w4.kiln \
  "UPDATE launch_plan SET args = replace(args, 'weight:model.layers.0.self_attn.q_proj.weight weight', 'weight:model.layers.0.self_attn.q_proj.weight@1 weight') WHERE step = 2" \
  "step 2 (kernel qmatmul_64_64_bf16_none_w4a16_32_1_f16): param w reads weight model.layers.0.self_attn.q_proj.weight at offset 1, but its plane starts at 0"
tamper "weight plane past its tensor" w4.kiln \
  "UPDATE weights SET shape = '[64,32]', nbytes = 1216 WHERE name = 'model.layers.0.self_attn.q_proj.weight'" \
  "launch of qmatmul_64_64_bf16_none_w4a16_32_1_f16: argument 2 'weight:model.layers.0.self_attn.q_proj.weight@2048' does not fit"
tamper "a step inserted that overwrites a live value" tiny.kiln \
  "UPDATE launch_plan SET step = step + 100 WHERE step >= 7; UPDATE launch_plan SET step = step - 99 WHERE step >= 107;
   INSERT INTO launch_plan VALUES (7, 6, 'act:%21 weight:model.layers.0.self_attn.o_proj.weight act:%7 sym:T')" \
  "step 7 (kernel matmul_64_64_bf16_none): param out writes %7, which an earlier step wrote (one writer per value)"
tamper "a launch reading and writing one buffer" tiny.kiln \
  "UPDATE launch_plan SET args = 'act:%21 weight:model.layers.0.self_attn.o_proj.weight act:%21 sym:T' WHERE step = 6" \
  "step 6 (kernel matmul_64_64_bf16_none): param out writes %21, which an earlier step wrote (one writer per value)"
tamper "in place on a fresh buffer" tiny.kiln \
  "UPDATE launch_plan SET args = 'act:%7 weight:model.layers.0.input_layernorm.weight act:%7 sym:T' WHERE step = 1" \
  "step 1 (kernel rmsnorm_64_1e_05_bf16_0): param out writes %7, which an earlier step wrote (one writer per value)"
tamper "two outputs of a launch in one buffer" tiny.kiln \
  "UPDATE launch_plan SET args = replace(args, 'act:%14 act:%15', 'act:%14 act:%14') WHERE step = 2" \
  "step 2 (kernel matmul_64_64_bf16_group_32_32): params out2 and out3 are both bound to %14, which the kernel writes"
tamper "an input the engine does not provide" tiny.kiln \
  "INSERT INTO buffers VALUES ('extra', 'input', 'i32', '[T]', -1, 0, NULL)" \
  "package input extra [T]: not one this engine provides"
tamper "binary entry another symbol" tiny.kiln "UPDATE binaries SET entry = 'getpid' WHERE kernel_id = 6" \
  "kernel matmul_64_64_bf16_none: host binary's entry getpid is not the kernel's name"
tamper "binary truncated" tiny.kiln "UPDATE binaries SET data = substr(data, 1, 5000) WHERE kernel_id = 6" \
  "kernel matmul_64_64_bf16_none: host code is not a whole ELF64 shared object (5000 bytes)"
tamper "binary empty" tiny.kiln "UPDATE binaries SET data = x'' WHERE kernel_id = 6" \
  "kernel matmul_64_64_bf16_none: host binary is empty"
tamper "input of another dtype" tiny.kiln \
  "UPDATE launch_plan SET args = replace(args, 'input:tokens', 'input:sampling') WHERE step = 0" \
  "step 0 (kernel embedding_64_256_bf16): param ids is ptr<i32>, buffer sampling is f32"
tamper "cache of the wrong shape" tiny.kiln \
  "UPDATE buffers SET shape = '[P,8,2,8]' WHERE name = 'k_cache.0'" \
  "step 3 (kernel kv_write_2_16_8_bf16_1_10000_none_4): param k_cache needs 256*P elements, buffer k_cache.0 is bf16[P,8,2,8]"
tamper "deleted step" tiny.kiln "DELETE FROM launch_plan WHERE step = 5" \
  "launch plan step 5 is missing (steps must be 0..20, each once)"
tamper "deleted step, renumbered" tiny.kiln \
  "DELETE FROM launch_plan WHERE step = 1; UPDATE launch_plan SET step = step - 1 WHERE step > 1" \
  "step 1 (kernel matmul_64_64_bf16_group_32_32): param x reads %9 before any step writes it (steps deleted or out of order)"
tamper "last step deleted" tiny.kiln "DELETE FROM launch_plan WHERE step = 21" \
  "output next_tokens (buffer %64) is written by no step of the launch plan"
tamper "swapped steps" tiny.kiln "$(swap 6 7)" \
  "step 6 (kernel rmsnorm_64_1e_05_bf16_1): param r reads %23 before any step writes it (steps deleted or out of order)"
tamper "grid its config does not give" tiny.kiln \
  "UPDATE binaries SET grid = 'cdiv(M*1,128) 4 1' WHERE kernel_id = 2 AND config LIKE 'BM=1 %'" \
  "kernel matmul_64_64_bf16_group_32_32: host binary BM=1 BN=32 BK=64 WARPS=1 STAGES=1 SPLIT_K=1: grid cdiv(M*1,128) 4 1, but its config gives cdiv(M*1,1) 4 1"
# the code was compiled for its config: a config and grid edited together (consistent with each other)
# no longer match the row's hash
cp "$d/tiny.kiln" "$d/bad.kiln"
sqlite3 "$d/bad.kiln" "UPDATE binaries SET config = replace(config, 'BM=1 ', 'BM=128 '),
                              grid = 'cdiv(M*1,128) 4 1' WHERE kernel_id = 2 AND config LIKE 'BM=1 %'"
run "$d/bad.kiln" --random-weights 1 > /dev/null 2> "$d/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$d/err")" = 1 ] &&
  grep -qx "kiln: $d/bad.kiln: kernel matmul_64_64_bf16_group_32_32: host binary damaged (hash [0-9a-f]\{16\}, stored [0-9a-f]\{16\}; it covers the code, its config, grid and launch fields)" "$d/err" &&
  ok "config and grid edited together" || bad "config and grid edited together (rc $rc): $(cat "$d/err")"
tamper "spec edited" tiny.kiln "UPDATE kernels SET spec = replace(spec, 'N=64', 'N=32') WHERE id = 6" \
  "kernel matmul_64_64_bf16_none: its family 'matmul' and spec 'matmul N=32 K=64 dtype=bf16 epilogue=none' are not what its kernel IR was built from"
tamper "spec and name edited together" tiny.kiln \
  "UPDATE kernels SET spec = replace(spec, 'N=64', 'N=32'), name = 'matmul_32_64_bf16_none' WHERE id = 6" \
  "kernel matmul_32_64_bf16_none: its family 'matmul' and spec 'matmul N=32 K=64 dtype=bf16 epilogue=none' are not what its kernel IR was built from"
tamper "family unknown" tiny.kiln "UPDATE kernels SET family = 'mystery' WHERE id = 6" \
  "kernel matmul_64_64_bf16_none: its family 'mystery' and spec 'matmul N=64 K=64 dtype=bf16 epilogue=none' are not what its kernel IR was built from"
tamper "family edited to another family's" tiny.kiln "UPDATE kernels SET family = 'rope' WHERE id = 6" \
  "kernel matmul_64_64_bf16_none: its family 'rope' and spec 'matmul N=64 K=64 dtype=bf16 epilogue=none' are not what its kernel IR was built from"
tamper "params edited" tiny.kiln "UPDATE kernels SET params = replace(params, 'x:ptr<bf16>', 'x:ptr<f32>') WHERE id = 6" \
  "kernel matmul_64_64_bf16_none: params 'x:ptr<f32> w:ptr<bf16> out:ptr<bf16> M:i32' disagree with its kernel IR"
ch=$(sqlite3 "$d/tiny.kiln" "SELECT value FROM meta WHERE key = 'config_hash'")
tamper "config rows edited" tiny.kiln "UPDATE config SET value = '3' WHERE key = 'n_layers'" \
  "corrupt package (config rows hash to db78c9f3a805d9f2, meta config_hash says $ch: edited)"

# the buffer and weight tables, the meta maxima and the config as untrusted data (the plan's shapes are
# symbolic: the tables are what make them fit)
tamper "activation smaller than its shape" tiny.kiln "UPDATE buffers SET bytes = 512 WHERE name = '%7'" \
  "buffer %7: 512 bytes hold less than bf16 [T,64] at the plan's maxima"
tamper "activations aliased while both live" tiny.kiln \
  "UPDATE buffers SET offset = (SELECT offset FROM buffers WHERE name = '%7') WHERE name = '%9'" \
  "buffers %7 and %9 share arena bytes while both are in use (steps 0..7 and 1..2)"
tamper "weight bytes edited (random weights)" tiny.kiln "UPDATE weights SET nbytes = 10 WHERE name = 'model.norm.weight'" \
  "tensor model.norm.weight: the package says 10 bytes, but bf16 [64] is 128 bytes"
tamper "weight dtype edited (random weights)" tiny.kiln "UPDATE weights SET dtype = 'q9_9' WHERE name = 'model.norm.weight'" \
  "step 19 (kernel rmsnorm_64_1e_05_bf16_1): param w is ptr<bf16>, weight model.norm.weight is q9_9: not the quantized format this kernel reads"
tamper "quantized weight bound to a plain param" w4.kiln \
  "UPDATE launch_plan SET args = replace(args, 'weight:model.layers.0.input_layernorm.weight', 'weight:model.layers.0.self_attn.q_proj.weight') WHERE step = 1" \
  "step 1 (kernel rmsnorm_64_1e_05_bf16_0): param w is ptr<bf16>, weight model.layers.0.self_attn.q_proj.weight is w4g32z: not the quantized format this kernel reads"
tamper "quantized weight of another group" w4.kiln \
  "UPDATE kernels SET spec = replace(spec, 'group=32', 'group=64'), name = replace(name, '_32_1_', '_64_1_'), ir_text = replace(ir_text, '_32_1_', '_64_1_') WHERE id = 2;
   UPDATE kernels SET ir_hash = '0' WHERE id = 2" \
  "kernel qmatmul_64_64_bf16_none_w4a16_64_1_f16: kernel IR text does not hash to its ir_hash 0"
# i32 arguments: the split-attention workspaces are sized for the runtime's n_splits, and a step size
# bound where a runtime value belongs (or the reverse) is refused
tamper "n_splits rebound to a step size" tiny.kiln \
  "UPDATE launch_plan SET args = replace(args, 'rt:n_splits', 'sym:T') WHERE step = 4" \
  "step 4 (kernel attention_mixed_4_2_16_8_1_0_bf16_1): param n_splits must be bound to rt:n_splits"
tamper "a step size rebound to a runtime value" tiny.kiln \
  "UPDATE launch_plan SET args = replace(args, 'sym:T', 'rt:max_q') WHERE step = 6" \
  "step 6 (kernel matmul_64_64_bf16_none): param M takes a step size (sym:), not rt:max_q"
tamper "merge output into a smaller buffer" tiny.kiln \
  "INSERT INTO buffers VALUES ('%half', 'act', 'bf16', '[T,32]', 7602176, 524288, NULL);
   UPDATE meta SET value = '8126464' WHERE key = 'plan_act_bytes';
   UPDATE launch_plan SET args = replace(args, 'act:%21', 'act:%half') WHERE step = 5" \
  "step 5 (kernel attention_merge_4_16_bf16): param out needs 64*T elements, buffer %half is bf16[T,32]"
tamper "plan maximum past i32" tiny.kiln "UPDATE meta SET value = '4294967296' WHERE key = 'plan_max_seqs'" \
  "meta plan_max_seqs 4294967296: above 2147483647"
tamper "split rows past the workspace" tiny.kiln "UPDATE meta SET value = '100000' WHERE key = 'plan_max_split_rows'" \
  "step 4: workspace %ws_o.17 holds fewer than meta plan_max_split_rows 100000 rows"
# weights beyond the device's memory are refused before any is read (not allocated until killed)
cp "$d/tiny.kiln" "$d/big.kiln"
sqlite3 "$d/big.kiln" "INSERT INTO weights VALUES ('model.extra.weight', 'bf16', '[33554432,1048576]', 70368744177664)"
run "$d/big.kiln" --random-weights 1 > /dev/null 2> "$d/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$d/err")" = 1 ] &&
  grep -q "^kiln: $d/big.kiln: the weights take 70368.7 GB; the host's physical memory has [0-9.]* GB$" "$d/err" &&
  ok "weights beyond memory refused at once" || bad "weights beyond memory (rc $rc): $(cat "$d/err")"
# config rows edited with a matching config_hash (an integrity hash, not a signature): still contradictions
rehash() { python3 - "$1" "$2" << 'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1]); db.executescript(sys.argv[2])
h = 0xcbf29ce484222325
for k, v in db.execute("SELECT key, value FROM config ORDER BY key"):
    for x in ("%s=%s\n" % (k, v)).encode(): h = ((h ^ x) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
db.execute("UPDATE meta SET value = ? WHERE key = 'config_hash'", ("%016x" % h,)); db.commit()
EOF
}
retamper() { cp "$d/tiny.kiln" "$d/re.kiln"; rehash "$d/re.kiln" "$2"
  run "$d/re.kiln" --random-weights 1 > /dev/null 2> "$d/err"; local rc=$?
  if [ $rc = 1 ] && [ "$(cat "$d/err")" = "kiln: $3" ]; then ok "$1"; else bad "$1 (rc $rc): $(cat "$d/err")"; fi; }
retamper "page_size against the kernels' pages" "UPDATE config SET value = '16' WHERE key = 'page_size'" \
  "$d/re.kiln: config page_size is 16, but kernel kv_write_2_16_8_bf16_1_10000_none_4 has page_size=8"
retamper "page_size and the caches' pages against the kernels" \
  "UPDATE config SET value = '1' WHERE key = 'page_size'; UPDATE buffers SET shape = '[P,1,2,128]' WHERE name LIKE '_\_cache.%' ESCAPE '\\'" \
  "$d/re.kiln: config page_size is 1, but kernel kv_write_2_16_8_bf16_1_10000_none_4 has page_size=8"
retamper "head counts against the kernels" "UPDATE config SET value = '8' WHERE key = 'n_heads'" \
  "$d/re.kiln: config n_heads is 8, but kernel kv_write_2_16_8_bf16_1_10000_none_4 has H=4"
retamper "max_seq_len past 32 bits" "UPDATE config SET value = '4294967300' WHERE key = 'max_seq_len'" \
  "$d/re.kiln: package config max_seq_len '4294967300': want an integer in 1..16777216"
retamper "vocab_size against the logits" "UPDATE config SET value = '128' WHERE key = 'vocab_size'" \
  "$d/re.kiln: config vocab_size is 128, but kernel embedding_64_256_bf16 has V=256"
retamper "rms_eps against the kernels" "UPDATE config SET value = '0.1' WHERE key = 'rms_eps'" \
  "$d/re.kiln: config rms_eps is 0.1, but kernel rmsnorm_64_1e_05_bf16_0 has eps=1e-05"
retamper "rope_theta against the kernels" "UPDATE config SET value = '500000' WHERE key = 'rope_theta'" \
  "$d/re.kiln: config rope_theta is 500000, but kernel kv_write_2_16_8_bf16_1_10000_none_4 has theta=10000"
retamper "n_layers against the plan" "UPDATE config SET value = '3' WHERE key = 'n_layers'" \
  "$d/re.kiln: config n_layers is 3, but the plan writes 2 KV caches"

# NaN weights: the default sample catches an all-NaN checkpoint; one NaN off the sample needs --check-weights
python3 - "$d/w.safetensors" "$d" << 'EOF'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read()); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
nan = bytearray(b); nan[8 + n:] = b"\xc0\x7f" * ((len(b) - 8 - n) // 2)
open(sys.argv[2] + "/nan.safetensors", "wb").write(nan)
one = bytearray(b); at = 8 + n + h["model.embed_tokens.weight"]["data_offsets"][0] + 2 * 100  # element 100: off the sample
one[at:at + 2] = b"\xc0\x7f"; open(sys.argv[2] + "/one.safetensors", "wb").write(one)
EOF
nanrun() { run "$d/tiny.kiln" --weights "$d/$1" "${@:2}" > /dev/null 2> "$d/err"; echo $?; }
rc=$(nanrun nan.safetensors)
[ "$rc" = 1 ] && [ "$(cat "$d/err")" = "kiln: $d/nan.safetensors: weight lm_head.weight: element 0 is NaN or Inf (a sample of each tensor checked)" ] &&
  ok "all-NaN checkpoint refused by the sample" || bad "all-NaN (rc $rc): $(cat "$d/err")"
rc=$(nanrun one.safetensors)
[ "$rc" = 0 ] && ok "one NaN off the sample: not looked at by default" || bad "one NaN, default (rc $rc): $(cat "$d/err")"
rc=$(nanrun one.safetensors --check-weights)
[ "$rc" = 1 ] && [ "$(cat "$d/err")" = "kiln: $d/one.safetensors: weight model.embed_tokens.weight: element 100 is NaN or Inf (every value checked)" ] &&
  ok "one NaN found by --check-weights" || bad "one NaN, --check-weights (rc $rc): $(cat "$d/err")"

# FP8 weights: a NaN code (e4m3fn 0x7f) found by --check-weights, a NaN or Inf scale by the sample
if "$kiln" compile "$src/recipes/llama.lua" --model tiny --target host --set weight_dtype=f8g32 -o "$d/f8.kiln" 2> "$d/err"; then
  for m in nan-code nan-scale inf-scale; do
    python3 "$src/tests/cli/fp8_checkpoint.py" "$d/f8.kiln" "$d/$m.safetensors" $m
    extra=(); [ $m = nan-code ] && extra=(--check-weights)
    run "$d/f8.kiln" --weights "$d/$m.safetensors" "${extra[@]}" > /dev/null 2> "$d/err"; rc=$?
    [ $rc = 1 ] && grep -qx "kiln: $d/$m.safetensors: weight model.layers.0.self_attn.q_proj.weight: element [0-9]* is NaN or Inf (.*)" "$d/err" &&
      ok "FP8 checkpoint with a $m refused" || bad "FP8 $m (rc $rc): $(cat "$d/err")"
  done
else
  bad "compile f8g32: $(cat "$d/err")"
fi

# A tuning store from elsewhere whose binary's grid was edited: imported, then at engine load that kernel
# falls back to its default with one log line, and the tokens are those of a run without the store.
mm=matmul_64_64_bf16_none
if "$kiln" tune "$d/tiny.kiln" --device host --max-step-tokens 2 --max-candidates 2 --samples 3 --kernels "$mm" \
     --db "$d/far.db" > /dev/null 2> "$d/err"; then
  sqlite3 "$d/far.db" "UPDATE binaries SET grid = 'cdiv(M*1,1024) 1 1'"
  python3 "$src/tests/cli/rehash_binaries.py" "$d/far.db"
  "$kiln" db import --db "$d/here.db" "$d/far.db" > /dev/null 2> "$d/err" || bad "db import: $(cat "$d/err")"
  rr=("$kiln" run "$d/tiny.kiln" --weights "$d/w.safetensors" --prompt-ids "1 2 3" --max-tokens 4 --print-ids --device host)
  "${rr[@]}" --no-db > "$d/ids0" 2> /dev/null
  "${rr[@]}" -v --db "$d/here.db" > "$d/ids1" 2> "$d/log"
  n=$(grep -c "^kiln: tuning: $mm: ignored .*grid cdiv(M\*1,1024) 1 1, but its config gives" "$d/log")
  [ "$n" -ge 1 ] && grep -q "tuning: $mm: default$" "$d/log" && [ -s "$d/ids0" ] && cmp -s "$d/ids0" "$d/ids1" &&
    ok "tampered store grid: default config, same tokens" || { bad "tampered store grid"; grep tuning "$d/log"; }
else
  bad "tune: $(cat "$d/err")"
fi
checks_done tampered_packages
