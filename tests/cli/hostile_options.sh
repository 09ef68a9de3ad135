#!/usr/bin/env bash
# hostile_options.sh — issue 27's option class: every numeric option of every subcommand (run, compile,
# ir, tune, db) refuses hostile text (empty, words, trailing bytes, leading space, '+', hex, exponent in
# an integer, NaN/inf, overflow past 64 bits) and values just outside its declared range with exit 2 and
# exactly one line naming the option, the text and the range (cli/cli_num.h), and leaves no file behind;
# the edges of each range are accepted. Then `--set` values outside the recipe's limits (exit 1, one
# line, no package), values inside them that a kernel family refuses (one line at the op's recipe line,
# from compile and ir alike) and, on the tiny model with random weights, the runtime's own checks
# through kiln run: a KV cache beyond physical memory and a token outside the vocabulary (exit 1, one
# line).
set -u
. "$(dirname "$0")/checks.bash" "$@"
recipe=$src/recipes/llama.lua
w=$d/w
mkdir -p "$w"

# expect NAME STATUS LINE ARGS...: kiln ARGS (run in $w) exits STATUS with exactly LINE on stderr and
# leaves $w as it was (no package, no store, no temporary file).
expect() {
  local name=$1 want_rc=$2 want=$3 rc
  shift 3
  local before
  before=$(ls -A "$w")
  (cd "$w" && "$kiln" "$@" > "$d/out" 2> "$d/err" < /dev/null)
  rc=$?
  if [ $rc != "$want_rc" ]; then bad "$name: exit $rc, want $want_rc: $(head -c 300 "$d/err")"
  elif [ "$(cat "$d/err")" != "$want" ]; then bad "$name: stderr '$(head -c 300 "$d/err")', want '$want'"
  elif [ "$(ls -A "$w")" != "$before" ]; then bad "$name: left $(ls -A "$w" | tr '\n' ' ')"
  else ok "$name"; fi
}

# A port no one listens on now (the OS picks it): the server listens before it loads, so a taken port
# would hide the check that follows the load.
free_port() {
  python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
}

# The message quotes the text as cli_num_quote does: printable ASCII as is.
int_bad=('' abc 12abc ' 5' '5 ' +5 0x10 1e3 1.5 - 99999999999999999999 -99999999999999999999)
real_bad=('' abc nan NaN -nan inf -inf infinity 0x1p3 1e999 -1e999 1.5x 1..2 e5 . '1 ')

# int_opt CMD FLAG LO HI PREFIX...: FLAG takes whole numbers in LO..HI after the PREFIX arguments.
int_opt() {
  local cmd=$1 flag=$2 lo=$3 hi=$4 v
  shift 4
  local vals=("${int_bad[@]}" "$((lo - 1))")
  [ "$hi" != 9223372036854775807 ] && vals+=("$((hi + 1))")
  for v in "${vals[@]}"; do
    expect "$cmd $flag '$v'" 2 "kiln $cmd: $flag wants a whole number in $lo..$hi, got '$v'" "$@" "$flag" "$v"
  done
}
u64_opt() { # CMD FLAG PREFIX...
  local cmd=$1 flag=$2 v
  shift 2
  for v in "${int_bad[@]}" -1 18446744073709551616; do
    expect "$cmd $flag '$v'" 2 "kiln $cmd: $flag wants a whole number in 0..18446744073709551615, got '$v'" \
      "$@" "$flag" "$v"
  done
}
real_opt() { # CMD FLAG RANGE-TEXT OUTSIDE... -- PREFIX...
  local cmd=$1 flag=$2 range=$3 v
  shift 3
  local out=()
  while [ "$1" != -- ]; do out+=("$1"); shift; done
  shift
  for v in "${real_bad[@]}" "${out[@]}"; do
    expect "$cmd $flag '$v'" 2 "kiln $cmd: $flag wants a number in $range, got '$v'" "$@" "$flag" "$v"
  done
}
device_opt() { # CMD FLAG WANT PREFIX...
  local cmd=$1 flag=$2 want=$3 v
  shift 3
  for v in '' abc -1 -2 1x ' 1' +1 1024 99999999999999999999 0x1 gpu0; do
    expect "$cmd $flag '$v'" 2 "kiln $cmd: $flag wants $want, got '$v'" "$@" "$flag" "$v"
  done
}

# ---- kiln run: every check comes before the package is opened (p.kiln does not exist) ----
run=(run p.kiln --random-weights 1 --prompt-ids 1)
int_opt run --max-tokens 1 16777216 "${run[@]}"
int_opt run --top-k 0 16777216 "${run[@]}"
int_opt run --threads 1 1024 "${run[@]}"
int_opt run --kv-cache-mb 1 16777216 "${run[@]}"
u64_opt run --seed "${run[@]}"
u64_opt run --random-weights run p.kiln --prompt-ids 1
real_opt run --temperature '[0, 100]' -1 -0.001 100.5 1e9 -- "${run[@]}"
real_opt run --top-p '(0, 1]' 0 -0.5 1.0001 2 1e-999 -- "${run[@]}"
device_opt run --device 'auto, host or a GPU number in 0..1023' "${run[@]}"
ids_want="token ids in 0..2147483647 separated by spaces or commas"
for v in 4294967297 2147483648 -1 x 1e3 0x10 +1 99999999999999999999; do
  expect "run --prompt-ids '1 $v 2'" 2 "kiln run: --prompt-ids wants $ids_want, got '$v'" \
    run p.kiln --random-weights 1 --prompt-ids "1 $v 2"
done
expect "run --prompt-ids ''" 2 "kiln run: --prompt-ids wants at least one token id, got ''" \
  run p.kiln --random-weights 1 --prompt-ids ''
expect "run --prompt-ids ' , '" 2 "kiln run: --prompt-ids wants $ids_want, got ''" \
  run p.kiln --random-weights 1 --prompt-ids ' , '
expect "run --prompt-ids '1,,2'" 2 "kiln run: --prompt-ids wants $ids_want, got ',,'" \
  run p.kiln --random-weights 1 --prompt-ids '1,,2'
expect "run --prompt-ids '1 2,'" 2 "kiln run: --prompt-ids wants $ids_want, got 'a trailing comma'" \
  run p.kiln --random-weights 1 --prompt-ids '1 2,'
expect "run --max-tokens (no value)" 2 "kiln run: --max-tokens wants a value" "${run[@]}" --max-tokens
expect "run --chat with ids" 2 "kiln run: --chat and --special apply to --prompt text, not --prompt-ids" \
  "${run[@]}" --chat
expect "run --spec-k without --spec" 2 "kiln run: --spec-k goes with --spec ngram or --spec draft" \
  "${run[@]}" --spec-k 3
expect "run --spec-branches with ngram" 2 "kiln run: --spec-branches goes with --spec draft" \
  "${run[@]}" --spec ngram --spec-branches 2
expect "run --spec-branches 9" 2 "kiln run: --spec-branches wants a whole number in 1..8, got '9'" \
  "${run[@]}" --spec draft --spec-branches 9
expect "serve --port 0" 2 "kiln serve: --port wants a whole number in 1..65535, got '0'" \
  serve p.kiln --random-weights 1 --port 0
expect "serve --spec draft" 2 "kiln serve: --spec wants ngram or none, got 'draft'" \
  serve p.kiln --random-weights 1 --spec draft
expect "serve --max-queue 0" 2 "kiln serve: --max-queue wants a whole number in 1..65536, got '0'" \
  serve p.kiln --random-weights 1 --max-queue 0
expect "serve --port twice" 2 "kiln serve: --port given more than once" \
  serve p.kiln --random-weights 1 --port 1 --port 2
nl=$'1\n2'
expect "run --max-tokens with a newline" 2 \
  "kiln run: --max-tokens wants a whole number in 1..16777216, got '1\\x0a2'" "${run[@]}" --max-tokens "$nl"

# ---- kiln compile / ir: -j, and --set against the recipe's limits ----
int_opt compile -j 1 64 compile "$recipe" --model tiny -o "$w/o.kiln"
int_opt ir -j 1 64 ir "$recipe" --model tiny
for s in n_layers=-1 n_layers=0 n_layers=1025 max_seq_len=0 hidden_size=0 vocab_size=-5 page_size=0 \
         n_heads=0 head_dim=-1; do
  k=${s%%=*}
  case $k in
    n_layers|n_heads) r=1..1024 ;; max_seq_len|vocab_size) r=1..16777216 ;; hidden_size) r=1..65536 ;;
    page_size) r=1..1024 ;; head_dim) r=0..1024 ;;
  esac
  expect "compile --set $s" 1 \
    "kiln: $recipe: --set $s: $k wants a whole number in $r (the recipe's limits)" \
    compile "$recipe" --model tiny --set "$s" -o "$w/o.kiln"
done
expect "compile --set rms_eps=0" 1 \
  "kiln: $recipe: --set rms_eps=0: rms_eps wants a number in [1e-12, 1] (the recipe's limits)" \
  compile "$recipe" --model tiny --set rms_eps=0 -o "$w/o.kiln"
expect "compile --set dtype=i32" 1 \
  "kiln: $recipe: --set dtype=i32: dtype wants one of bf16, f16, f32 (the recipe's limits)" \
  compile "$recipe" --model tiny --set dtype=i32 -o "$w/o.kiln"
expect "ir --set n_layers=2^40" 1 \
  "kiln: $recipe: --set: config key 'n_layers' is an integer in -2147483648..2147483647, got '1099511627776'" \
  ir "$recipe" --model tiny --set n_layers=1099511627776
expect "compile --set rms_eps=nan" 1 "kiln: $recipe: --set: config key 'rms_eps' is a number, got 'nan'" \
  compile "$recipe" --model tiny --set rms_eps=nan -o "$w/o.kiln"
if "$kiln" ir "$recipe" --model tiny --set n_layers=1 --set max_seq_len=16777216 --set page_size=1024 \
     --set rms_eps=1 > /dev/null 2> "$d/err"
then ok "ir: the limits' edges are accepted"; else bad "ir at the limits' edges: $(cat "$d/err")"; fi

# ---- kernel specs the recipe's limits let through: the family's check, one line at the recipe line of
# the op the kernel serves (finding F13), from kiln compile and, the same check, from kiln ir ----
line_of() { grep -n "$1" "$recipe" | head -1 | cut -d: -f1; }
kv_line=$(line_of 'g:kv_write(') emb_line=$(line_of 'g:embedding(') mm_line=$(line_of 'return g:matmul(x, w)$')
kspec() { # NAME LINE MESSAGE SETS...
  local name=$1 want="kiln: $recipe:$2: $3" c
  shift 3
  for c in compile ir; do
    local out=()
    [ $c = compile ] && out=(-o "$w/o.kiln")
    expect "$c: $name" 1 "$want" $c "$recipe" --model tiny "$@" "${out[@]}"
  done
}
kspec "rope theta 1" "$kv_line" \
  "kv_write_2_16_8_bf16_1_1_none_4: kv_write: rope needs an even D, theta > 1 and factor > 0" \
  --set rope_theta=1
kspec "llama3 rope with equal factors" "$kv_line" \
  "kv_write_2_16_8_bf16_1_10000_llama3_1_4_4_8192_4: kv_write: llama3 needs high_freq_factor > low_freq_factor > 0" \
  --set rope_scaling=llama3 --set rope_low_freq_factor=4.0
kspec "embedding past 32-bit offsets" "$emb_line" \
  "embedding_8192_16777216_bf16: embedding: V*C = 137438953472 needs 64-bit offsets" \
  --set hidden_size=8192 --set vocab_size=16777216 --set n_heads=64 --set n_kv_heads=8
kspec "grouped matmul past 2^24 columns" "$mm_line" \
  "matmul_65536_65536_bf16_group_65536_65536: matmul: epilogue group needs N2 (and optionally N3) in [1, 2^24]" \
  --set intermediate_size=1048576 --set hidden_size=65536 --set n_heads=1024 --set n_kv_heads=1024
if "$kiln" ir "$recipe" --model tiny --raw --set rope_theta=1 > /dev/null 2> "$d/err"; then
  ok "ir --raw: the graph as built, no kernel checks"
else bad "ir --raw --set rope_theta=1: $(cat "$d/err")"; fi

# ---- kiln tune: checked before the package or the store is opened ----
tune=(tune p.kiln --db "$w/t.db")
real_opt tune --budget '[0, 1e+07]' -1 10000001 1e300 -- "${tune[@]}"
device_opt tune --device 'auto, host or a GPU number in 0..1023' "${tune[@]}"
int_opt tune --max-step-tokens 1 1048576 "${tune[@]}"
int_opt tune --max-candidates 1 65536 "${tune[@]}"
int_opt tune --samples 1 100000 "${tune[@]}"
int_opt tune --threads 1 1024 "${tune[@]}"
int_opt tune --compile-threads 0 64 "${tune[@]}"
u64_opt tune --seed "${tune[@]}"

# ---- kiln db ----
real_opt db --older-than '[0, 100000]' -1 100001 -- db prune --db "$w/t.db"
for v in 0 abc 12abc ' 5' +5 0x10 99999999999999999999 9223372036854775808; do
  expect "db show '$v'" 2 "kiln db: ID wants a whole number in 1..9223372036854775807, got '$v'" \
    db show "$v" --db "$w/t.db"
  expect "db pin 1 '$v'" 2 "kiln db: ID wants a whole number in 1..9223372036854775807, got '$v'" \
    db pin 1 "$v" --db "$w/t.db"
done
for v in abc 1x ' 1' +1 1024 99999999999999999999 0x1; do
  expect "db device '$v'" 2 "kiln db: device wants host, auto or a GPU number in 0..1023, got '$v'" db device "$v"
done

# ---- the runtime's own checks, through kiln run on the tiny model (needs the LLVM host backend) ----
if [ "${KILN_HAVE_LLVM:-ON}" = OFF ]; then
  if in_ci; then bad "this build has no LLVM host backend (CI=true)"; else echo "skip: the runtime checks (no LLVM)"; fi
elif ! "$kiln" compile "$recipe" --model tiny --target host --no-cache -o "$d/tiny.kiln" 2> "$d/err"; then
  bad "compile tiny: $(cat "$d/err")"
else
  tiny=(run "$d/tiny.kiln" --random-weights 1 --device host --threads 1)
  "$kiln" "${tiny[@]}" --prompt-ids 1,2 --max-tokens 2 --top-k 16777216 --top-p 1 --temperature 100 \
    --seed 18446744073709551615 --print-ids > "$d/out" 2> "$d/err"
  rc=$?
  if [ $rc = 0 ] && [ "$(wc -w < "$d/out")" = 2 ]; then ok "run: every range's edge is accepted"
  else bad "run at the ranges' edges: rc $rc: $(cat "$d/err" "$d/out")"; fi
  "$kiln" "${tiny[@]}" --prompt-ids 1 --kv-cache-mb 16777216 > "$d/out" 2> "$d/err"
  rc=$?
  if [ $rc = 1 ] && [ "$(wc -l < "$d/err")" = 1 ] &&
     grep -q "^kiln: kiln_engine_open: options.kv_cache_bytes 17592186044416: more than the [0-9]* bytes of physical memory of the host$" "$d/err"
  then ok "run: a KV cache beyond physical memory is refused before allocating"
  else bad "run --kv-cache-mb 16777216: rc $rc: $(cat "$d/err")"; fi
  expect "run: a token outside the vocabulary" 1 "kiln: submit: token 256 at 1 is outside the vocabulary (256)" \
    "${tiny[@]}" --prompt-ids "1 256"
  expect "run: the largest id" 1 "kiln: submit: token 2147483647 at 0 is outside the vocabulary (256)" \
    "${tiny[@]}" --prompt-ids 2147483647
  expect "serve without a tokenizer" 1 \
    "kiln: $d/tiny.kiln: kiln serve needs a tokenizer (GGUF weights carry one, or --tokenizer PATH): no tokenizer: random weights carry none (give token ids)" \
    serve "$d/tiny.kiln" --random-weights 1 --device host --port "$(free_port)"
fi
checks_done hostile_options
