"""Kimi K3 split arguments against the real corpora (``--corpus``): MaskBench's BFCL, MCP-spec and
JSON-mode object schemas as K3 tools, their instances (and mutants of the valid ones) written as
K3 calls and teacher-forced through the matcher.

Each object instance becomes ``<|open|>call tool="NAME" index="1"<|sep|>`` + one argument per key
(in the schema's declared order, :class:`~benchmarks.conformance.SchemaWalker`; type by
``kimi_k3.value_type``; a string raw, anything else ``json.dumps``) + the closing tags; each id
must be set in ``fill_bitmask`` and accepted. A valid instance must be accepted to the end of the
message (excluded, as in the JSON conformance runner, when it holds keys that ``strict=True``
rules out or a bad ``format``); an invalid one, or a mutant jsonschema calls invalid, must be
refused somewhere. Values K3 cannot carry are skipped and counted: non-object instances.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from enforcer import compile_tools
from benchmarks.conformance import SchemaWalker, load_maskbench, mutants
from enforcer.errors import InvalidSchemaError, SchemaTooComplexError, UnsupportedSchemaError
from enforcer.formats import kimi_k3
from enforcer.formats.kimi_k3 import CLOSE, END_OF_MSG, OPEN, SEP

pytestmark = pytest.mark.corpus
SUBSETS = ("BFCL", "MCPspec", "JME")
MUTANTS = 4


def tools_of(schema: dict) -> list[tuple[str, dict]]:
    """BFCL's multi-function schemas (``anyOf`` of ``{NAME: arguments}``) as one tool per branch."""
    branches = schema.get("anyOf")
    if isinstance(branches, list) and branches and all(
            isinstance(b, dict) and len(b.get("properties", {})) == 1 and b.get("required") == list(b["properties"])
            for b in branches):
        return [(name, params) for b in branches for name, params in b["properties"].items()]
    return [("f", schema)]


class Writer:
    """K3 token ids of a call, text encoded as the tokenizer would (nothing special recognised)."""

    def __init__(self, vocab: Any) -> None:
        self.vocab = vocab
        self.o, self.c, self.s, self.e = (vocab.token_id(n) for n in (OPEN, CLOSE, SEP, END_OF_MSG))

    def tag(self, word: str, attrs: list[tuple[str, str]] = ()) -> list[int]:
        return [t for p in kimi_k3.tag_pieces(word, attrs) for t in self.vocab.encode_text(p)]

    def turn(self, name: str, args: dict) -> list[int]:
        ids = [self.c, *self.tag("response"), self.s, self.o, *self.tag("tools"), self.s,
               self.o, *self.tag("call", [("tool", name), ("index", "1")]), self.s]
        for key, value in args.items():
            json_type = kimi_k3.value_type(value)
            text = value if json_type == "string" else json.dumps(value, ensure_ascii=False)
            ids += [self.o, *self.tag("argument", [("key", key), ("type", json_type)]), self.s,
                    *self.vocab.encode_text(text), self.c, *self.tag("argument"), self.s]
        return ids + [self.c, *self.tag("call"), self.s, self.c, *self.tag("tools"), self.s,
                      self.c, *self.tag("message"), self.s, self.e]

    def prompt(self) -> list[int]:
        return [self.o, *self.tag("message", [("role", "assistant")]), self.s, self.o, *self.tag("response"), self.s]


def accepted(matcher: Any, ids: list[int], bitmask: np.ndarray) -> bool:
    """Whether every id is allowed and accepted and the turn finished; mask and accept_token
    must agree on every id."""
    for t in ids:
        matcher.fill_bitmask(bitmask, 0)
        allowed = bool((int(bitmask[0, t >> 5]) >> (t & 31)) & 1)
        ok = matcher.accept_token(t)
        assert allowed == ok, f"mask and accept_token disagree on id {t}"
        if not ok:
            return False
    return matcher.is_finished


def test_k3_split_arguments_conformance(corpus_dir: Path, kimi_k3_vocab: Any) -> None:
    writer = Writer(kimi_k3_vocab)
    bitmask = np.zeros((1, (kimi_k3_vocab.vocab_size + 31) // 32), dtype=np.int32)
    counts: Counter = Counter()
    failures: list[str] = []
    for case in load_maskbench(corpus_dir):
        if case.subset not in SUBSETS or not isinstance(case.schema, dict):
            continue
        for name, params in tools_of(case.schema):
            if not isinstance(params, dict) or params.get("type", "object") != "object":
                counts["not an object schema"] += 1
                continue
            tool = {"type": "function", "function": {"name": name, "parameters": params}}
            try:
                compiled = compile_tools([tool], kimi_k3_vocab, format="kimi_k3", tool_choice="required")
            except (UnsupportedSchemaError, SchemaTooComplexError, InvalidSchemaError) as exc:
                counts[f"{case.subset} not split ({getattr(exc, 'keyword', type(exc).__name__)})"] += 1
                continue
            counts[f"{case.subset} tools"] += 1
            walker = SchemaWalker(params)
            validator = Draft202012Validator(params, format_checker=Draft202012Validator.FORMAT_CHECKER)
            instances = []
            for instance in case.instances:
                data = instance.data
                if len(tools_of(case.schema)) > 1:
                    if not (isinstance(data, dict) and list(data) == [name]):
                        continue
                    data = data[name]
                instances.append((data, instance.valid))
                if instance.valid:
                    instances += [(m, False) for _, m in mutants(data, MUTANTS)]
            for data, valid in instances:
                if not isinstance(data, dict):
                    counts["non-object instances skipped"] += 1
                    continue
                valid = validator.is_valid(data) if not valid else valid
                ordered, undeclared = walker.walk(data)
                ok = accepted(compiled.matcher(prompt_ids=writer.prompt()), writer.turn(name, ordered), bitmask)
                if valid and not ok:
                    if undeclared:
                        counts["valid excluded (undeclared keys)"] += 1
                    elif not validator.is_valid(data):
                        counts["valid excluded (format)"] += 1
                    else:
                        counts["valid rejected"] += 1
                        failures.append(f"{case.name}: valid {json.dumps(data)[:200]} rejected")
                elif valid:
                    counts["valid accepted"] += 1
                elif ok:
                    counts["invalid accepted"] += 1
                    failures.append(f"{case.name}: invalid {json.dumps(data)[:200]} accepted")
                else:
                    counts["invalid rejected"] += 1
    print("\nK3 corpus conformance:", json.dumps(dict(sorted(counts.items())), indent=1))
    assert counts["valid accepted"] > 500 and counts["invalid rejected"] > 500
    assert not failures, "\n".join(failures[:20])
