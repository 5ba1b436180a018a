"""Hostile inputs (issue 14): schemas and tool lists built to break a compiler. Each case runs in
its own forked process under a 10 s alarm and an address-space cap of 1 GiB above the loaded
runner, and must end in bounded success (compiled, a few random-logit tokens decoded, nothing
raised in the decode loop) or one of the library's own errors, never a foreign exception.

The runner is this file run as a script (``python tests/test_hostile.py [--table] [names]``): it
loads the Kimi K2 vocabulary once, then forks one child per case (two at a time), so each case
starts from the same warm state and its peak RSS is its own (``wait4``). Tool-set cases also
generate through the transformers processor (random logits, ``tool_choice="required"``).
The default test run takes a quick representative subset; ``--run-slow`` takes every case.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

TIME_LIMIT_S = 10
MEMORY_LIMIT_BYTES = 1 << 30
TOKENS = 8
"""Random-logit tokens decoded after a successful compile (the first masks cost the most)."""


@dataclass(frozen=True)
class Case:
    kind: str  # "schema" (compile_json_schema, then decode) or "tools" (compile_tools, K2 generation)
    build: Callable[[], Any]  # built in the child: huge payloads never live in the runner
    expect: str | None = None  # the library error class the case must end in (None: any outcome allowed)
    seconds: int = TIME_LIMIT_S


KNOWN_SLOW = {
    "huge-enum-10000-objects": "10,000 distinct object constants: one minimal acyclic automaton of ~250,000 "
                               "symbols, each a whitespace, key or character node built into the NFA (6.6 s "
                               "on two loaded cores, ~3 s idle)",
}
"""Cases that end correctly near ``TIME_LIMIT_S`` on two loaded cores: given 40 s, so that a
loaded CI machine does not fail them (the issue's goal is 10 s for every case; measured in the
closing table)."""


CASES: dict[str, Case] = {}


def case(name: str, kind: str, build: Callable[[], Any], expect: str | None = None) -> None:
    assert name not in CASES, name
    CASES[name] = Case(kind, build, expect, 40 if name in KNOWN_SLOW else TIME_LIMIT_S)


# ---- issue 14, as filed ---------------------------------------------------------------------


def nested_any_of(depth: int) -> dict:
    s: dict = {"type": "integer"}
    for _ in range(depth):
        s = {"anyOf": [{"type": "integer"}, {"type": "array", "items": s, "maxItems": 2}]}
    return s


def unshared_nested_any_of(depth: int) -> dict:
    """:func:`nested_any_of` around a string of up to 1,200 characters (24,001 states), a block too
    large for a level built on demand to copy: no level is held as a share (one placeholder per
    use), so the NFA doubles per level."""
    s: dict = {"type": "string", "maxLength": 1200}
    for _ in range(depth):
        s = {"anyOf": [{"type": "integer"}, {"type": "array", "items": s, "maxItems": 2}]}
    return s


def ref_fan_out(depth: int) -> dict:
    defs: dict = {"l0": {"type": "integer"}}
    for i in range(1, depth + 1):
        defs[f"l{i}"] = {"type": "array", "prefixItems": [{"$ref": f"#/$defs/l{i - 1}"}] * 2, "items": False}
    return {"$defs": defs, "$ref": f"#/$defs/l{depth}"}


def nest(keyword: str, depth: int, leaf: Any = None) -> Any:
    """``depth`` levels of one keyword around a leaf."""
    s: Any = {"type": "integer"} if leaf is None else leaf
    for _ in range(depth):
        if keyword == "properties":
            s = {"type": "object", "properties": {"a": s}, "required": ["a"]}
        elif keyword == "items":
            s = {"type": "array", "items": s}
        elif keyword == "prefixItems":
            s = {"type": "array", "prefixItems": [s]}
        elif keyword == "additionalProperties":
            s = {"type": "object", "additionalProperties": s}
        elif keyword in ("anyOf", "oneOf", "allOf"):
            s = {keyword: [s]}
        elif keyword == "not":
            s = {"not": s}
        elif keyword == "if":
            s = {"if": s, "then": {"type": "object"}}
        elif keyword == "then":
            s = {"if": {"required": ["a"]}, "then": s}
        elif keyword == "patternProperties":
            s = {"type": "object", "patternProperties": {"^a": s}}
        elif keyword == "propertyNames":
            s = {"type": "object", "propertyNames": s}
        elif keyword == "dependentSchemas":
            s = {"type": "object", "dependentSchemas": {"a": s}}
        elif keyword == "contains":
            s = {"type": "array", "contains": s}
        else:
            raise ValueError(keyword)
    return s


def ref_chain(length: int) -> dict:
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(length)}
    defs[f"d{length}"] = {"type": "string"}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


def nested_const_list(depth: int) -> dict:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return {"const": value}


STRING_2048 = {"type": "string", "maxLength": 2048}
# a sub-value met again (the items of a counted repeat, a definition named twice) is one
# share per use: these blow-ups compile small; written out distinctly they are refused
case("anyOf-nest-16", "schema", lambda: nested_any_of(16))
case("anyOf-nest-20", "schema", lambda: nested_any_of(20))
case("anyOf-nest-12", "schema", lambda: nested_any_of(12))
case("anyOf-nest-unshared-16", "schema", lambda: unshared_nested_any_of(16), "SchemaTooComplexError")
case("ref-fan-out-16", "schema", lambda: ref_fan_out(16))
case("ref-fan-out-8", "schema", lambda: ref_fan_out(8))
case("props-40-maxLength-2048", "schema",
     lambda: {"type": "object", "properties": {f"p{i}": STRING_2048 for i in range(40)}})
# 256 counted strings: 10.5 million NFA states, all of them embedded blocks (no edges), within
# max_nfa_states by their weight since session 13 (compiles in ~1 s, +45 MB); 1,024 are not
case("maxItems-256-strings-2048", "schema", lambda: {"type": "array", "items": STRING_2048, "maxItems": 256})
case("maxItems-1024-strings-2048", "schema", lambda: {"type": "array", "items": STRING_2048, "maxItems": 1024},
     "SchemaTooComplexError")
for n in (5_000, 10_000, 20_000, 100_000):
    case(f"enum-{n}-strings", "schema", lambda n=n: {"enum": [f"value-{i}" for i in range(n)]})
case("multipleOf-1e-300", "schema", lambda: {"type": "number", "multipleOf": 1e-300})
case("minLength-100000", "schema", lambda: {"type": "string", "minLength": 100000})
case("minLength-1000000", "schema", lambda: {"type": "string", "minLength": 1_000_000}, "SchemaTooComplexError")
case("pattern-any-1000", "schema", lambda: {"type": "string", "pattern": "[\\s\\S]{1000}"})
case("const-1MB-string", "schema", lambda: {"const": "x" * 1_000_000}, "SchemaTooComplexError")
case("objects-300-deep", "schema", lambda: nest("properties", 300), "SchemaTooComplexError")
case("arrays-500-deep", "schema", lambda: nest("items", 500), "SchemaTooComplexError")
case("const-list-2000-deep", "schema", lambda: nested_const_list(2000), "SchemaTooComplexError")
case("ref-chain-1000", "schema", lambda: ref_chain(1000))
case("anyOf-200-deep", "schema", lambda: nest("anyOf", 200), "SchemaTooComplexError")
case("ref-cycle-allOf", "schema", lambda: {"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}, {"type": "object"}]}},
                                           "$ref": "#/$defs/a"}, "UnsupportedSchemaError")
case("ref-cycle-anyOf", "schema", lambda: {"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}},
                                           "$ref": "#/$defs/a"}, "UnsupportedSchemaError")
case("type-5", "schema", lambda: {"type": 5}, "InvalidSchemaError")
case("ref-5", "schema", lambda: {"$ref": 5}, "InvalidSchemaError")
case("lone-surrogate-property", "schema", lambda: {"type": "object", "properties": {"a\ud800": {"type": "string"}}},
     "InvalidSchemaError")
case("required-string", "schema", lambda: {"type": "object", "required": "ab"}, "InvalidSchemaError")
case("dependentRequired-string", "schema", lambda: {"type": "object", "dependentRequired": {"a": "b"}},
     "InvalidSchemaError")

# ---- deep nesting of each keyword -------------------------------------------------------------

NESTED_KEYWORDS = ("properties", "items", "prefixItems", "additionalProperties", "anyOf", "oneOf", "allOf", "not",
                   "if", "then", "patternProperties", "propertyNames", "dependentSchemas", "contains")
for keyword in NESTED_KEYWORDS:
    for depth in (40, 150, 1000):
        case(f"nest-{keyword}-{depth}", "schema", lambda k=keyword, d=depth: nest(k, d))
case("ref-chain-5000", "schema", lambda: ref_chain(5000))

# ---- $ref cycles through every keyword ----------------------------------------------------------

REF_A = {"$ref": "#/$defs/a"}
CYCLES: dict[str, Any] = {
    "self": REF_A,
    "mutual": {"$ref": "#/$defs/b"},
    "allOf": {"allOf": [REF_A]},
    "anyOf": {"anyOf": [REF_A, {"type": "null"}]},
    "oneOf": {"oneOf": [REF_A, {"type": "null"}]},
    "not": {"not": REF_A},
    "if": {"if": REF_A, "then": {"type": "null"}},
    "then": {"if": {"type": "object"}, "then": REF_A},
    "else": {"if": {"type": "object"}, "else": REF_A},
    "properties": {"type": "object", "properties": {"x": REF_A}},
    "properties-required": {"type": "object", "properties": {"x": REF_A}, "required": ["x"]},
    "items": {"type": "array", "items": REF_A},
    "prefixItems": {"type": "array", "prefixItems": [REF_A, REF_A]},
    "additionalProperties": {"type": "object", "additionalProperties": REF_A},
    "patternProperties": {"type": "object", "patternProperties": {"^x": REF_A}},
    "propertyNames": {"type": "object", "propertyNames": REF_A},
    "contains": {"type": "array", "contains": REF_A},
    "dependentSchemas": {"type": "object", "dependentSchemas": {"x": REF_A}},
    "allOf-ref-sibling": {"allOf": [REF_A, {"properties": {"y": REF_A}}]},
    "childFoos": {"type": "object", "properties": {"children": {"type": "array", "items": {
        "allOf": [REF_A, {"$ref": "#/$defs/b"}]}}}},
}
for name, body in CYCLES.items():
    case(f"cycle-{name}", "schema", lambda b=body: {"$defs": {"a": b, "b": {"$ref": "#/$defs/a"}},
                                                        "$ref": "#/$defs/a"})

# ---- malformed keywords of every type ------------------------------------------------------------

KEYWORDS = ("type", "enum", "const", "properties", "required", "items", "prefixItems", "additionalProperties",
            "patternProperties", "propertyNames", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
            "multipleOf", "minLength", "maxLength", "pattern", "format", "minItems", "maxItems", "minProperties",
            "maxProperties", "anyOf", "oneOf", "allOf", "not", "if", "$ref", "$defs", "dependentRequired",
            "dependentSchemas", "uniqueItems", "contains", "$schema", "$id", "$anchor")
BAD_VALUES: dict[str, Any] = {"int": 5, "negative": -1, "float": 1.5, "string": "x", "list": [1, "x"],
                              "dict": {"x": 5}, "null": None}
for keyword in KEYWORDS:
    for label, value in BAD_VALUES.items():
        case(f"malformed-{keyword}-{label}", "schema", lambda k=keyword, v=value: {k: v})

# ---- huge numbers and bounds ---------------------------------------------------------------------

HUGE: dict[str, Any] = {
    "minimum-1e308": {"type": "number", "minimum": 1e308},
    "maximum--1e308": {"type": "number", "maximum": -1e308},
    "minimum-10^400": {"type": "integer", "minimum": 10 ** 400},
    "bounds-crossed": {"type": "integer", "minimum": 10, "maximum": 5},
    "bounds-tiny-window": {"type": "number", "minimum": 1e-300, "maximum": 2e-300},
    "exclusive-huge": {"type": "number", "exclusiveMinimum": 123456789012345678901234567890, "exclusiveMaximum": 10 ** 31},
    "multipleOf-7e-300": {"type": "number", "multipleOf": 7e-300},
    "multipleOf-1e-5000": {"type": "number", "multipleOf": 10 ** -300 * 1e-8},
    "multipleOf-huge": {"type": "integer", "multipleOf": 10 ** 300},
    "multipleOf-bounded": {"type": "number", "multipleOf": 0.0001, "minimum": -1e6, "maximum": 1e6},
    "maxItems-10^9": {"type": "array", "items": {"type": "integer"}, "maxItems": 10 ** 9},
    "minItems-10^6": {"type": "array", "items": {"type": "integer"}, "minItems": 10 ** 6},
    "maxItems-5000-ints": {"type": "array", "items": {"type": "integer"}, "maxItems": 5000},
    "maxLength-10^12": {"type": "string", "maxLength": 10 ** 12},
    "minLength-10^12": {"type": "string", "minLength": 10 ** 12},
    "minLength-gt-maxLength": {"type": "string", "minLength": 10, "maxLength": 5},
    "minProperties-10^6": {"type": "object", "minProperties": 10 ** 6},
    "maxProperties-0": {"type": "object", "maxProperties": 0},
    "enum-10^400": {"enum": [10 ** 400, -10 ** 400]},
    "const-1e308": {"const": 1e308},
    "enum-100000-ints": {"enum": list(range(100_000))},
    "enum-10000-objects": {"enum": [{"k": i, "v": [i, str(i)]} for i in range(10_000)]},
    "enum-100-long-strings": {"enum": ["y" * 10_000 + str(i) for i in range(100)]},
    "const-deep-object": {"const": {"a": {"b": {"c": {"d": [1, 2, {"e": None}]}}}}},
    "pattern-nested-star": {"type": "string", "pattern": "(a*)*b"},
    "pattern-alternation-star": {"type": "string", "pattern": "^(a|aa)*c$"},
    "pattern-counted-counted": {"type": "string", "pattern": "^(?:a{100}){100}$"},
    "pattern-big-repeat": {"type": "string", "pattern": "a{99999}"},
    "pattern-unicode-500": {"type": "string", "pattern": "^[\\u0000-\\uffff]{500}$"},
    "pattern-lookahead": {"type": "string", "pattern": "^(?=a)a$"},
    "pattern-backref": {"type": "string", "pattern": "^(a)\\1$"},
    "pattern-invalid": {"type": "string", "pattern": "("},
    "pattern-property-class": {"type": "string", "pattern": "^\\p{L}+$"},
    "patternProperties-many": {"type": "object", "patternProperties": {f"^p{i}": {"type": "integer"} for i in range(50)}},
    "properties-2000": {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(2000)}},
    "required-2000": {"type": "object", "required": [f"k{i}" for i in range(2000)]},
    "format-unknown": {"type": "string", "format": "no-such-format"},
    "format-on-integer": {"type": "integer", "format": "date-time"},
    "schema-unknown-dialect": {"$schema": "https://example.com/my-schema", "type": "string"},
    "ref-remote": {"$ref": "https://example.com/schema.json"},
    "ref-dangling": {"$ref": "#/$defs/missing"},
    "ref-bad-pointer": {"$ref": "#/$defs/a~2"},
    "anyOf-empty": {"anyOf": []},
    "false-schema": False,
    "true-schema": True,
    "not-true": {"not": True},
    "schema-as-list": [1, 2, 3],
    "schema-as-string": "not a schema",
    "nan-minimum": {"type": "number", "minimum": float("nan")},
    "inf-maximum": {"type": "number", "maximum": float("inf")},
    "key-with-nul": {"type": "object", "properties": {"a\u0000b": {"type": "string"}}, "required": ["a\u0000b"]},
    "enum-lone-surrogate": {"enum": ["ok", "bad\udfff"]},
    "const-lone-surrogate": {"const": "\ud800"},
    "pattern-lone-surrogate": {"type": "string", "pattern": "\ud800+"},
    "description-lone-surrogate": {"type": "string", "description": "\udc00"},
    "allOf-1000-siblings": {"allOf": [{"type": "object", "properties": {f"k{i}": {"type": "integer"}}}
                                      for i in range(1000)]},
    "anyOf-1000-branches": {"anyOf": [{"const": f"v{i}"} for i in range(1000)]},
    "oneOf-1000-consts": {"oneOf": [{"const": i} for i in range(1000)]},
    "uniqueItems-10000-arrays": {"type": "object", "properties": {
        f"k{i}": {"type": "array", "items": {"type": "string"}, "uniqueItems": True} for i in range(10_000)}},
    "uniqueItems-nested-3000": {"type": "array", "items": {"type": "object", "properties": {
        f"k{i}": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True} for i in range(3000)}}},
}
for name, schema in HUGE.items():
    case(f"huge-{name}", "schema", lambda s=schema: s)

# ---- tool lists ----------------------------------------------------------------------------------


def tool(name: Any, parameters: Any = None) -> dict:
    fn: dict = {"name": name}
    if parameters is not None:
        fn["parameters"] = parameters
    return {"type": "function", "function": fn}


PARAMS = {"type": "object", "properties": {"q": {"type": "string", "maxLength": 16}}, "required": ["q"]}
TOOLS: dict[str, Callable[[], Any]] = {
    "plain": lambda: [tool("search", PARAMS)],
    "duplicate-names": lambda: [tool("search", PARAMS), tool("search", PARAMS)],
    "name-10000-chars": lambda: [tool("n" * 10_000, PARAMS)],
    "name-empty": lambda: [tool("", PARAMS)],
    "name-not-string": lambda: [tool(5, PARAMS)],
    "name-with-marker-text": lambda: [tool("a<|tool_call_begin|>b", PARAMS)],
    "name-with-colon": lambda: [tool("a:b", PARAMS)],
    "name-with-space-newline": lambda: [tool("a b\nc", PARAMS)],
    "name-lone-surrogate": lambda: [tool("a\ud800", PARAMS)],
    "tools-1000": lambda: [tool(f"tool_{i}", PARAMS) for i in range(1000)],
    "tools-not-list": lambda: {"name": "x"},
    "tool-not-dict": lambda: ["search"],
    "missing-function": lambda: [{"type": "function"}],
    "parameters-not-object": lambda: [tool("search", [1, 2])],
    "parameters-type-string": lambda: [tool("search", {"type": "string"})],
    "parameters-false": lambda: [tool("search", False)],
    "no-parameters": lambda: [tool("search")],
    "parameters-anyOf-nest-16": lambda: [tool("nest", {"type": "object", "properties": {"x": nested_any_of(16)}})],
    "parameters-anyOf-nest-unshared-16": lambda: [tool("nest", {"type": "object", "properties": {
        "x": unshared_nested_any_of(16)}})],
    "parameters-ref-fan-out-16": lambda: [tool("fan", {"type": "object", "properties": {"x": ref_fan_out(16)}})],
    "parameters-props-40-maxLength-2048": lambda: [tool("big", {"type": "object", "properties": {
        f"p{i}": STRING_2048 for i in range(40)}})],
    "parameters-maxItems-256-strings": lambda: [tool("big", {"type": "object", "properties": {
        "xs": {"type": "array", "items": STRING_2048, "maxItems": 256}}})],
    "parameters-ref-cycle": lambda: [tool("cyc", {"$defs": {"a": {"allOf": [REF_A, {"type": "object"}]}},
                                                  "type": "object", "properties": {"x": REF_A}})],
    "parameters-deep-200": lambda: [tool("deep", nest("properties", 200))],
    "parameters-enum-100000": lambda: [tool("e", {"type": "object", "properties": {
        "v": {"enum": [f"value-{i}" for i in range(100_000)]}}, "required": ["v"]})],
    "parameters-mixed-good-bad": lambda: [tool("good", PARAMS), tool("bad", {"type": 5})],
    "parameters-type-5": lambda: [tool("bad", {"type": "object", "properties": {"x": {"type": 5}}})],
}
for name, build in TOOLS.items():
    case(f"tools-{name}", "tools", build)

QUICK = ["anyOf-nest-16", "anyOf-nest-unshared-16", "ref-fan-out-16", "maxItems-256-strings-2048", "maxItems-1024-strings-2048",
         "multipleOf-1e-300", "minLength-1000000",
         "objects-300-deep", "ref-cycle-allOf", "type-5", "ref-5", "lone-surrogate-property", "required-string",
         "enum-5000-strings", "nest-contains-1000", "cycle-childFoos", "malformed-$schema-list",
         "huge-maxLength-10^12", "huge-enum-10^400", "tools-plain", "tools-duplicate-names",
         "tools-parameters-anyOf-nest-16", "tools-parameters-anyOf-nest-unshared-16", "tools-name-lone-surrogate"]
"""The default run's subset: cheap cases from each family, the filed ones first (the costly
filed cases, a 100,000-value enum or 40 strings of 2,048, run with ``--run-slow``)."""


# ---- the runner (this file as a script) --------------------------------------------------------


class CaseTimeout(BaseException):
    """Raised by the alarm; a BaseException so that no ``except Exception`` swallows it."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout()


def _classify(exc: BaseException) -> str:
    from enforcer.errors import EnforcerError
    if isinstance(exc, CaseTimeout):
        return "timeout"
    if isinstance(exc, EnforcerError):
        return "refused"
    return "foreign"


def _vm_size_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _decode_schema(compiled: Any, vocab: Any, rng: Any) -> dict:
    """A few random-logit tokens through fill_bitmask / accept_token / rollback; every decode-loop
    call is checked for raising (a failure whatever it raises)."""
    import numpy as np
    matcher = compiled.matcher(stop_token_ids=[vocab.token_id("<|im_end|>")])
    bitmask = np.zeros((1, (vocab.vocab_size + 31) // 32), np.int32)
    tokens = 0
    for step in range(TOKENS):
        matcher.fill_bitmask(bitmask)
        allowed = np.flatnonzero(np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[:vocab.vocab_size])
        if allowed.size == 0:
            break
        token = int(allowed[int(np.argmax(rng.standard_normal(allowed.size)))])
        if not matcher.accept_token(token):
            return {"decode": f"allowed token {token} was not accepted ({matcher.error})"}
        tokens += 1
        if step == 1:  # speculative-decoding edge: undo one token and take it again
            matcher.rollback(1)
            if not matcher.accept_token(token):
                return {"decode": "a token accepted before rollback was refused after it"}
        if matcher.is_finished:
            break
    return {"tokens": tokens, "error": matcher.error}


def _generate_tools(tools: Any, vocab: Any, tokenizer: Any, seed: int) -> dict:
    """K2 generation through the transformers processor: random logits, greedy on the masked
    scores, up to ``4 * TOKENS`` steps (a failure if anything raises inside the loop)."""
    import torch
    from enforcer.integrations.transformers import ToolCallLogitsProcessor
    proc = ToolCallLogitsProcessor(tokenizer, tools, tool_choice="required", allow_thinking=False,
                                   parallel_tool_calls=False, vocabulary=vocab)
    prompt = tokenizer.encode("Call a tool, please.")
    generator = torch.Generator().manual_seed(seed)
    ids = torch.tensor([prompt])
    stop = set(proc.stop_token_ids)
    tokens = 0
    try:
        for _ in range(4 * TOKENS):
            scores = torch.randn((1, vocab.vocab_size), generator=generator)
            token = int(torch.argmax(proc(ids, scores)[0]))
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
            tokens += 1
            if token in stop:
                break
    except CaseTimeout:
        raise
    except BaseException as exc:  # noqa: BLE001 - anything raised in the loop is the failure reported
        return {"decode": f"{type(exc).__name__}: {exc}"[:300]}
    return {"tokens": tokens, "error": proc.errors[0]}


def _run_case(name: str, vocab: Any, tokenizer: Any) -> dict:
    import numpy as np
    from enforcer import compile_json_schema, compile_tools
    spec = CASES[name]
    start = time.perf_counter()
    out: dict = {"name": name}
    try:
        payload = spec.build()
        if spec.kind == "schema":
            compiled = compile_json_schema(payload, vocab)
            out["compile_s"] = round(time.perf_counter() - start, 3)
            try:
                out.update(_decode_schema(compiled, vocab, np.random.default_rng(0)))
            except CaseTimeout:
                raise
            except BaseException as exc:  # noqa: BLE001 - nothing may raise in the decode loop
                out["decode"] = f"{type(exc).__name__}: {exc}"[:300]
        else:
            compile_tools(payload, vocab, tool_choice="required", allow_thinking=False, parallel_tool_calls=False)
            out["compile_s"] = round(time.perf_counter() - start, 3)
            out.update(_generate_tools(payload, vocab, tokenizer, seed=0))
        out["outcome"] = "decode-raised" if "decode" in out else "ok"
    except BaseException as exc:  # noqa: BLE001 - classified: the library's own, a timeout, or foreign
        out["outcome"] = _classify(exc)
        out["error_class"] = type(exc).__name__
        out["message"] = str(exc)[:300]
        if hasattr(exc, "pointer"):
            out["pointer"] = exc.pointer
        if hasattr(exc, "budget"):
            out["budget"] = exc.budget
    out["seconds"] = round(time.perf_counter() - start, 3)
    return out


def run_cases(names: list[str], jobs: int = 2) -> list[dict]:
    """Every case in a forked child of this process (which must hold the vocabulary already):
    alarm at ``TIME_LIMIT_S``, address space capped ``MEMORY_LIMIT_BYTES`` above the runner, a
    hard kill 3 s after the alarm. Returns one record per case with ``peak_rss_mb`` (the child's
    high-water mark) and ``base_rss_mb`` (the runner's at fork)."""
    from enforcer.testing import tokenizers as tt
    from enforcer import Vocabulary
    tokenizer = tt.kimi_k2_tokenizer("fast")
    vocab = Vocabulary.from_tokenizer(tokenizer)
    import enforcer.integrations.transformers  # noqa: F401 - loaded before forking (torch)
    from enforcer import compile_json_schema
    compile_json_schema({"type": "integer"}, vocab)  # per-vocabulary tables built once, before forking
    base_rss = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    results: list[dict] = []
    pending = list(names)
    running: dict[int, tuple[str, int, float]] = {}
    while pending or running:
        while pending and len(running) < jobs:
            name = pending.pop(0)
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: caps, the case, one JSON line, exit without cleanup
                os.close(read_fd)
                cap = _vm_size_bytes() + MEMORY_LIMIT_BYTES
                resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
                signal.signal(signal.SIGALRM, _on_alarm)
                signal.alarm(CASES[name].seconds)
                try:
                    record = _run_case(name, vocab, tokenizer)
                except BaseException as exc:  # noqa: BLE001 - e.g. the alarm between two steps
                    record = {"name": name, "outcome": _classify(exc), "error_class": type(exc).__name__}
                signal.alarm(0)
                os.write(write_fd, (json.dumps(record) + "\n").encode())
                os._exit(0)
            os.close(write_fd)
            running[pid] = (name, read_fd, time.monotonic())
        for pid, (name, fd, started) in list(running.items()):
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done == 0 and time.monotonic() - started > CASES[name].seconds + 3:
                os.kill(pid, signal.SIGKILL)
                done, status, usage = os.wait4(pid, 0)
            if done == 0:
                continue
            text = b""
            while select.select([fd], [], [], 0)[0]:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                text += chunk
            os.close(fd)
            del running[pid]
            if text:
                record = json.loads(text)
            else:
                record = {"name": name, "outcome": "killed", "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                          "seconds": round(time.monotonic() - started, 3)}
            record["peak_rss_mb"] = round(usage.ru_maxrss / 1024)
            record["base_rss_mb"] = round(base_rss)
            results.append(record)
        time.sleep(0.01)
    order = {n: i for i, n in enumerate(names)}
    return sorted(results, key=lambda r: order[r["name"]])


def table(results: list[dict]) -> str:
    """The closing note's table: case, outcome (the error class for refusals), time, peak RSS."""
    lines = ["| case | outcome | s | peak RSS MB (runner at fork) |", "|---|---|---|---|"]
    for r in results:
        outcome = r["outcome"] + (f" {r['error_class']}" if "error_class" in r else "")
        if r["outcome"] == "ok":
            outcome += f" ({r.get('tokens', 0)} tokens)"
        lines.append(f"| {r['name']} | {outcome} | {r.get('seconds', '')} | {r['peak_rss_mb']} ({r['base_rss_mb']}) |")
    return "\n".join(lines)


# ---- the tests -------------------------------------------------------------------------------


def _run_in_runner(names: list[str]) -> list[dict]:
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, __file__, "--json", *names], capture_output=True, text=True,
                          env=env, timeout=60 + 8 * len(names))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _check(results: list[dict], names: list[str]) -> None:
    assert [r["name"] for r in results] == names
    failures = []
    for r in results:
        spec = CASES[r["name"]]
        problems = []
        if r["outcome"] not in ("ok", "refused"):
            problems.append(f"outcome {r['outcome']}")
        if spec.expect is not None and r.get("error_class") != spec.expect:
            problems.append(f"expected {spec.expect}")
        if r.get("seconds", spec.seconds + 1) > spec.seconds:
            problems.append("over the time limit")
        if (r["peak_rss_mb"] - r["base_rss_mb"]) * (1 << 20) > MEMORY_LIMIT_BYTES:
            problems.append("over the memory limit")
        if r.get("error_class") == "SchemaTooComplexError" and r.get("pointer") is None:
            problems.append("a budget refusal must name its pointer")
        if problems:
            failures.append(f"{r['name']}: {', '.join(problems)} -> {json.dumps(r)[:400]}")
    assert not failures, "\n".join(failures)


def test_quick_hostile_subset() -> None:
    _check(_run_in_runner(QUICK), QUICK)


@pytest.mark.slow
def test_every_hostile_case() -> None:
    names = list(CASES)
    _check(_run_in_runner(names), names)


def test_enough_cases_of_our_own() -> None:
    assert len(CASES) >= 26 + 100
    assert set(QUICK) <= set(CASES)


def test_budget_refusals_name_pointer_keyword_and_budget() -> None:
    """The budget is checked before any NFA exists: refusals are immediate, name the
    sub-schema and the option, and the option moves the line."""
    from enforcer import SchemaOptions, SchemaTooComplexError, UnsupportedSchemaError
    from enforcer.json_schema import SchemaCompiler
    with pytest.raises(SchemaTooComplexError) as info:
        SchemaCompiler(unshared_nested_any_of(16), SchemaOptions()).compile()
    assert info.value.pointer.startswith("/anyOf/1/items") and info.value.budget.startswith("max_nfa_states=")
    assert isinstance(info.value, UnsupportedSchemaError)
    with pytest.raises(SchemaTooComplexError) as info:
        SchemaCompiler({"type": "object", "properties": {"s": {"type": "string", "minLength": 1_000_000}}},
                       SchemaOptions()).compile()
    assert (info.value.pointer, info.value.keyword) == ("/properties/s", "minLength")
    SchemaCompiler(unshared_nested_any_of(8), SchemaOptions()).compile()
    with pytest.raises(SchemaTooComplexError):
        SchemaCompiler(unshared_nested_any_of(8), SchemaOptions(max_nfa_states=10_000)).compile()


def test_budget_in_tools_keeps_class_and_tool_pointer(kimi_vocab: Any) -> None:
    from enforcer import SchemaTooComplexError, compile_tools
    with pytest.raises(SchemaTooComplexError) as info:
        compile_tools([tool("nest", {"type": "object", "properties": {"x": unshared_nested_any_of(16)}})], kimi_vocab)
    assert info.value.pointer.startswith("/tools/0/function/parameters/properties/x/anyOf/1")
    assert "in tool 'nest'" in str(info.value)


def test_size_meter_counts_exactly_the_states_the_builder_makes() -> None:
    from enforcer.automaton import _NFA
    from enforcer.automaton import nfa_size
    from enforcer.json_schema import SchemaCompiler, SchemaOptions
    schemas = [nested_any_of(5), ref_fan_out(4), {"type": "object", "properties": {"a": STRING_2048, "b": {
        "type": "array", "items": {"enum": ["x", "yy", 3]}, "minItems": 2, "maxItems": 5}},
        "required": ["b"], "minProperties": 1}, {"type": "string", "pattern": "^(ab|c){2,4}d*$"}, True]
    for schema in schemas:
        node = SchemaCompiler(schema, SchemaOptions()).compile()
        nfa = _NFA(deferred=True)  # as a lazily built automaton builds it: free-form values are placeholders
        start, end = nfa.new(), nfa.new()
        nfa.build(node, start, end)
        assert nfa_size(node) + 2 == nfa.num_states, schema


if __name__ == "__main__":
    args = sys.argv[1:]
    as_json = "--json" in args
    show_table = "--table" in args
    selected = [a for a in args if not a.startswith("--")] or list(CASES)
    unknown = [n for n in selected if n not in CASES]
    if unknown:
        sys.exit(f"unknown cases: {unknown}")
    records = run_cases(selected)
    if as_json:
        for rec in records:
            print(json.dumps(rec))
    if show_table or not as_json:
        print(table(records))
