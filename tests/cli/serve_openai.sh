#!/usr/bin/env bash
# `kiln serve` end to end on the host with the real SmolLM2-135M-Instruct (docs/SERVER.md): the openai
# client and raw HTTP against it (tests/e2e/serve_client.py: chat and completions, streams, stop strings,
# seeds, errors, hostile requests, a client that leaves, 16 concurrent clients), then --api-key (401
# without it, constant-time compared), a port in use, and SIGTERM (exit 0). Skips without the model or
# the openai package, except under CI=true.
set -u
. "$(dirname "$0")/checks.bash"
model=$src/models/SmolLM2-135M-Instruct.Q4_1.gguf
skip() { in_ci && { echo "FAIL: $1 (CI=true)"; exit 1; }; echo "SKIP: $1"; exit 77; }
[ -f "$model" ] || skip "$model is absent (make models fetches it)"
[ "${KILN_HAVE_LLVM:-ON}" = OFF ] && skip "this build has no LLVM host backend"
python3 -c "import openai" 2> /dev/null || skip "the openai package is missing (make deps installs it)"
"$kiln" compile "$src/recipes/llama.lua" --set weight_dtype=q4_1 --set dtype=f32 --target host \
  -o "$d/smol.kiln" 2> "$d/err" || { cat "$d/err"; echo "FAIL compile"; exit 1; }
fail=0
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done' EXIT

# start NAME ARGS...: a server on a free port; sets port and pid, waits for /health
start() {
  local name=$1; shift
  for try in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 40000))
    "$kiln" serve "$d/smol.kiln" --weights "$model" --device host --port "$port" "$@" 2> "$d/$name.log" &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 100); do
      curl -sf -o /dev/null "http://127.0.0.1:$port/health" && return 0
      kill -0 "$pid" 2> /dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2> /dev/null
  done
  echo "FAIL $name: the server did not start: $(cat "$d/$name.log")"; exit 1
}

start main --model-name smol
python3 "$src/tests/e2e/serve_client.py" "http://127.0.0.1:$port" "$kiln" "$d/smol.kiln" "$model" || fail=1
main_port=$port main_pid=$pid

# a second server on the same port: refused in one line
"$kiln" serve "$d/smol.kiln" --weights "$model" --device host --port "$main_port" > /dev/null 2> "$d/busy.err"
rc=$?
if [ $rc = 1 ] && grep -q "^kiln serve: cannot listen on 127.0.0.1:$main_port" "$d/busy.err"; then
  echo "ok   a port in use: refused"
else echo "FAIL a port in use (rc $rc): $(cat "$d/busy.err")"; fail=1; fi

kill -TERM "$main_pid"; wait "$main_pid"; rc=$?
if [ $rc = 0 ] && grep -q "SIGTERM: stopping" "$d/main.log"; then echo "ok   SIGTERM: exit 0"
else echo "FAIL SIGTERM (rc $rc): $(tail -3 "$d/main.log")"; fail=1; fi

# a template outside kiln's subset: refused at start, in one line
printf '{%% macro m() %%}{%% endmacro %%}' > "$d/bad.jinja"
for try in 1 2 3 4 5; do # a random port may be taken: another one then (the server listens before loading)
  "$kiln" serve "$d/smol.kiln" --weights "$model" --device host --port $((20000 + RANDOM % 40000)) \
    --chat-template "$d/bad.jinja" > /dev/null 2> "$d/badtpl.err"
  rc=$?
  grep -q "cannot listen" "$d/badtpl.err" || break
done
if [ $rc = 1 ] && [ "$(wc -l < "$d/badtpl.err")" = 1 ] && grep -q "chat template line 1: 'macro' is not in" "$d/badtpl.err"
then echo "ok   a chat template outside the subset: refused at start"
else echo "FAIL a bad chat template (rc $rc): $(cat "$d/badtpl.err")"; fail=1; fi

# --chat-template (Mistral's: no system role, roles alternate) and --api-key
cat > "$d/mistral.jinja" << 'TPL'
{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}
TPL
start keyed --api-key s3cret --chat-template "$d/mistral.jinja"
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
body='{"model":"smol","prompt":"Hi","max_tokens":2}'
u="http://127.0.0.1:$port"
c1=$(code "$u/v1/completions" -d "$body") c2=$(code "$u/v1/completions" -H 'Authorization: Bearer s3cre' -d "$body")
c3=$(code "$u/v1/completions" -H 'Authorization: Bearer s3cret' -d "$body") c4=$(code "$u/health")
c5=$(code "$u/v1/models" -H 'Authorization: Bearer s3cret')
if [ "$c1$c2$c3$c4$c5" = 401401200200200 ]; then echo "ok   --api-key: 401 without it or with another, 200 with it"
else echo "FAIL --api-key: $c1 $c2 $c3 $c4 $c5"; fail=1; fi
chat() { curl -s -H 'Authorization: Bearer s3cret' "$u/v1/chat/completions" -d "$1"; }
r1=$(chat '{"model":"smol","messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}],"max_tokens":2}')
r2=$(chat '{"model":"smol","messages":[{"role":"user","content":"hi"}],"max_tokens":2}')
if echo "$r1" | grep -q '"code":400' && echo "$r1" | grep -q "refuses the conversation: Conversation roles must alternate" &&
   echo "$r2" | grep -q '"chat.completion"'; then echo "ok   --chat-template: its raise_exception is a 400, a valid chat answered"
else echo "FAIL --chat-template: $r1 / $r2"; fail=1; fi
kill -TERM "$pid"; wait "$pid"

[ $fail = 0 ] && echo "serve_openai: all passed"
exit $fail
