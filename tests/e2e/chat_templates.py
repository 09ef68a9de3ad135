#!/usr/bin/env python3
"""chat_templates.py KILN DIR: kiln's chat templates (cli/chat_tpl.c, `kiln template`) against jinja2 as
Hugging Face's apply_chat_template sets it up (a sandboxed environment with trim_blocks and lstrip_blocks,
raise_exception), for the chat templates of SmolLM2, Qwen2, Llama 2, Llama 3, Mistral, Gemma and ChatML,
and one that exercises the rest of the subset (elif, for-else, inline if, filters, tests, slices, ~, loop
variables, whitespace control, comments). Each on four conversations, with and without the generation
prompt: the same text, or both refuse (raise_exception). Also: the marks keep a message's "<|im_end|>" as
message text, and a construct outside the subset is refused with its line. Exit 1 if any check failed."""
import json
import os
import subprocess
import sys

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

KILN, D = sys.argv[1], sys.argv[2]
os.makedirs(D, exist_ok=True)

T = {
    "smollm2": "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
    "qwen2": "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
    "chatml": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
    "llama2": "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
    "llama3": "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}",
    "mistral": "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
    "gemma": "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}",
    "subset": """{# every construct of the subset #}
{%- set sys = messages[0]['content'] if messages[0].role == 'system' else 'default system' -%}
<sys>{{ sys | upper }}</sys>
{% for m in messages[1:] if false is not defined %}
  {%- if m.role == 'user' and 'secret' in m.content %}
    [redacted {{ loop.index }}/{{ loop.length }}]
  {% elif m.role in ['user', 'assistant'] -%}
    {{ m.role ~ ': ' ~ m.content.strip() | lower }}{{ ' (last)' if loop.last }}
  {%- else %}other{% endif %}
{% else %}
  (nothing after the first)
{% endfor %}
{%+ if add_generation_prompt is defined and add_generation_prompt %}GEN {{ messages | length }} {{ 7 // 2 }} {{ -3 + 10 * 2 % 7 }}{% endif %}
{{ (messages | first).role }} {{ (messages | last)['role'] }} {{ messages[-1].content | length > 3 }} {{ undefined_var is undefined }} {{ none is none }}""",
}
CONVS = {
    "user": [{"role": "user", "content": "Hello! <|im_end|> What's 2+2?"}],
    "system": [{"role": "system", "content": "  You are terse.  "}, {"role": "user", "content": "Hi there  "}],
    "turns": [{"role": "user", "content": "one"}, {"role": "assistant", "content": " two "},
              {"role": "user", "content": "a secret three\n"}],
    "all": [{"role": "system", "content": "S"}, {"role": "user", "content": "u1"},
            {"role": "assistant", "content": "a1"}, {"role": "user", "content": "ünïcödé 你好 🤖 (upper and lower map ASCII letters only)"}],
}
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)


def raise_exception(msg):
    raise TemplateError(msg)


env.globals["raise_exception"] = raise_exception
fails = 0
for name, tpl in T.items():
    if name == "subset":  # jinja2 loop filter: not in kiln's subset, so the test template drops it for kiln
        kiln_tpl = tpl.replace(" if false is not defined", "")
    else:
        kiln_tpl = tpl
    path = os.path.join(D, name + ".jinja")
    with open(path, "w") as f:
        f.write(kiln_tpl)
    bad = []
    for cname, msgs in CONVS.items():
        for gen in (True, False):
            try:
                want = env.from_string(kiln_tpl).render(messages=msgs, bos_token="<s>", eos_token="</s>",
                                                        add_generation_prompt=gen)
            except TemplateError:
                want = None
            args = [KILN, "template", path, "--bos", "<s>", "--eos", "</s>"] + ([] if gen else ["--no-generation"])
            r = subprocess.run(args, input=json.dumps(msgs).encode(), capture_output=True)
            got = r.stdout.decode() if r.returncode == 0 else None
            if got != want or (want is None and r.returncode != 3):
                bad.append((cname, gen, want, got, r.stderr.decode()[-200:]))
    print(("ok   " if not bad else "FAIL ") + f"{name}: {8 - len(bad)} of 8 renders as jinja2"
          + ("" if not bad else f": {bad[:2]!r}"))
    fails += bool(bad)

# the marks: template bytes T, message bytes '.', so a message's <|im_end|> is never a control token
r = subprocess.run([KILN, "template", os.path.join(D, "chatml.jinja"), "--marks"],
                   input=json.dumps(CONVS["user"]).encode(), capture_output=True)
text = subprocess.run([KILN, "template", os.path.join(D, "chatml.jinja")], input=json.dumps(CONVS["user"]).encode(),
                      capture_output=True).stdout.decode()
marks = r.stdout.decode()
raw = text.encode()
inner = raw.index(b"Hello! <|im_end|>") + 7  # the message's own <|im_end|>
last = raw.rindex(b"<|im_end|>", 0, raw.rindex(b"<|im_start|>"))  # the template's, after the message
ok = (len(marks) == len(raw) and marks[:12] == "T" * 12 and marks[inner:inner + 10] == "." * 10
      and marks[last:last + 10] == "T" * 10)
print(("ok   " if ok else "FAIL ") + "marks: the template's bytes T, the message's (its <|im_end|> too) not"
      + ("" if ok else f": {marks!r}"))
fails += not ok
for bad_tpl, what in [("{% macro m() %}x{% endmacro %}", "macro"), ("{{ x | tojson }}", "tojson"),
                      ("{% for m in messages %}", "endfor"), ("{{ 'a' ", "not closed")]:
    p = os.path.join(D, "bad.jinja")
    with open(p, "w") as f:
        f.write(bad_tpl)
    r = subprocess.run([KILN, "template", p], input=b'[{"role": "user", "content": "x"}]', capture_output=True)
    e = r.stderr.decode()
    ok = r.returncode == 1 and e.count("\n") == 1 and "chat template line 1" in e and what in e
    print(("ok   " if ok else "FAIL ") + f"refused: {bad_tpl!r}" + ("" if ok else f": {r.returncode} {e!r}"))
    fails += not ok
sys.exit(1 if fails else 0)
