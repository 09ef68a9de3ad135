#!/usr/bin/env bash
# Chat templates (cli/chat_tpl.c, docs/SERVER.md "Chat templates") against jinja2 configured as Hugging
# Face's apply_chat_template configures it: tests/e2e/chat_templates.py renders the templates of SmolLM2,
# Qwen2, Llama 2, Llama 3, Mistral, Gemma and ChatML and one covering the whole subset, on four
# conversations each, through `kiln template`; checks the provenance marks and refusals. Skips without
# jinja2, except under CI=true.
set -u
. "$(dirname "$0")/checks.bash"
if ! python3 -c "import jinja2" 2> /dev/null; then
  in_ci && { echo "FAIL: the jinja2 package is missing (CI=true)"; exit 1; }
  echo "SKIP: the jinja2 package is missing (make deps installs it)"; exit 77
fi
python3 "$src/tests/e2e/chat_templates.py" "$kiln" "$d"
