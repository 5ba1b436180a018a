"""Random-logit fuzz of Kimi K3 tool calls: turns sampled through ``ToolCallMatcher`` over the tool
sets of ``schemas/`` (always on) and MaskBench object schemas wrapped as tools (``--corpus``), in
every ``tool_choice`` mode, with parallel calls on and off, on the K3-shaped tokenizer.

Checks, per turn: it ends with ``<|end_of_msg|>``; every call passes Moonshot's vendor-verifier
rule (declared name, ``json.loads``, Draft 2020-12 validation of the tool's ``parameters``); call
ids count from 1 in the message; the batch and streaming parsers recover exactly
``matcher.calls``; "none" never calls, "required" and named always do (named: only that tool);
one call when parallel calls are off.

The sampler only ever picks ids set in ``fill_bitmask`` (deterministic by seed). Free text and
values are sampled from the masked softmax of random "model" logits (rejection from the
unmasked distribution, then Gumbel-max over the allowed ids). Where the format offers a choice of
control token (another argument or the end of the call, another call or the end of the tools,
tools or the end of the message) a per-turn plan decides. Past a budget, a value is closed: the
control token when allowed, else the next byte of a shortest completion in the value's automaton
(read through the matcher's current text rule only to steer, never to judge).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from enforcer import compile_tools
from benchmarks.conformance import load_maskbench
from completion_route import completion_route
from enforcer.errors import InvalidSchemaError, SchemaTooComplexError, UnsupportedSchemaError
from enforcer.formats.kimi_k3 import CLOSE, END_OF_MSG, OPEN, SEP
from enforcer.parser import StreamingToolCallParser, merge_deltas, parse_tool_calls
from enforcer.text_rules import DfaRule, TrieWithFreeText

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
TOOL_SETS = ("weather", "small_nested", "travel", "cjk")
SEED = 20261130
HARD_CAP = 3000
TEXT_BUDGET = (0, 8)
VALUE_BUDGET = (0, 24)


class Sampler:
    """Generates K3 turns through matchers of one vocabulary; lives for one test module."""

    def __init__(self, vocab: Any, seed: int) -> None:
        self.vocab = vocab
        self.size = vocab.vocab_size
        self.rng = np.random.default_rng(seed)
        self.bitmask = np.zeros((1, (self.size + 31) // 32), dtype=np.int32)
        self.open_id, self.close_id, self.sep_id, self.end_id = (vocab.token_id(n) for n in (OPEN, CLOSE, SEP, END_OF_MSG))
        self.token_of_byte: dict[int, int] = {}
        for token_id, data in enumerate(vocab.byte_tokens):
            if data is not None and len(data) == 1:
                self.token_of_byte.setdefault(data[0], token_id)

    def allowed(self, token_id: int) -> bool:
        return bool((int(self.bitmask[0, token_id >> 5]) >> (token_id & 31)) & 1)

    def sample(self, cdf: np.ndarray, logits: np.ndarray) -> int | None:
        draws = np.minimum(np.searchsorted(cdf, self.rng.random(64) * cdf[-1]), self.size - 1)
        hits = draws[(self.bitmask[0, draws >> 5] >> (draws & 31)) & 1 == 1]
        if len(hits):
            return int(hits[0])
        allowed = np.flatnonzero(np.unpackbits(self.bitmask.view(np.uint8), bitorder="little")[: self.size])
        if not len(allowed):
            return None
        return int(allowed[np.argmax(logits[allowed] + self.rng.gumbel(size=len(allowed)))])

    def completion_byte(self, rule: DfaRule, state: int) -> int | None:
        """The first byte of a cheapest path from ``state`` to acceptance (None: no path)."""
        dfa = rule.dfa
        route = completion_route(dfa, state, self.token_of_byte, lambda s: dfa.accepting_list[s])
        return route[0][1] if route else None

    def generate(self, compiled: Any, matcher: Any, failures: list[str], label: str) -> list[int] | None:
        r = self.rng
        logits = r.standard_normal(self.size) * 2.0
        cdf = np.cumsum(np.exp(logits - logits.max()))
        want_call = compiled.tool_choice != "none" and (compiled.tool_choice != "auto" or r.random() < 0.8)
        calls_wanted = int(r.integers(1, 4)) if compiled.parallel_tool_calls else 1
        more_args_p = float(r.uniform(0.2, 0.9))
        ids: list[int] = []
        run, budget, calls = 0, int(r.integers(*TEXT_BUDGET)), 0
        while not matcher.is_finished:
            if len(ids) >= HARD_CAP:
                failures.append(f"{label}: cap of {HARD_CAP} tokens hit")
                return None
            matcher.fill_bitmask(self.bitmask, 0)
            frame, text_state = matcher.state  # steering only: which kind of text is being written
            kind = compiled.kinds[frame.place]
            rule = frame.rule
            controls = [t for t in (self.open_id, self.close_id, self.sep_id, self.end_id) if self.allowed(t)]
            want = None
            if kind is None and controls:
                if len(controls) == 1:
                    want = controls[0]
                else:
                    place = compiled.places[frame.place].name
                    go_on = {"after_response": want_call, "call_body": r.random() < more_args_p,
                             "after_call": calls < calls_wanted}.get(place, bool(r.random() < 0.5))
                    want = self.open_id if go_on and self.open_id in controls else self.close_id
            elif kind == "argtag" and run >= 4 and isinstance(rule, TrieWithFreeText):
                # an undeclared key's text can run on: end it where an ending may start
                ends = np.flatnonzero(np.unpackbits(rule.endings.mask(0).view(np.uint8), bitorder="little"))
                ends = [int(t) for t in ends if self.allowed(int(t))]
                want = ends[0] if ends else None
            elif kind in ("free", "value", "json") and run >= budget:
                if controls:
                    want = controls[0]
                elif isinstance(rule, DfaRule):
                    byte = self.completion_byte(rule, text_state)
                    if byte is None:
                        failures.append(f"{label}: value state {text_state} cannot finish")
                        return None
                    want = self.token_of_byte[byte]
            if want is None:
                want = self.sample(cdf, logits)
                if want is None:
                    failures.append(f"{label}: no token allowed after {len(ids)} tokens at {compiled.places[frame.place].name}")
                    return None
            if not matcher.accept_token(want):
                failures.append(f"{label}: allowed id {want} refused")
                return None
            ids.append(want)
            run += 1
            if want in (self.open_id, self.close_id, self.sep_id):
                run, budget = 0, int(r.integers(*(VALUE_BUDGET if kind == "argtag" else TEXT_BUDGET)))
                if compiled.ends_call[matcher.state.frame.place] and want == self.sep_id:
                    calls += 1
        return ids


def check_turn(compiled: Any, ids: list[int], matcher: Any, vocab: Any, failures: list[str], label: str) -> int:
    """Checks one turn; returns its number of calls."""
    if ids[-1] != vocab.token_id(END_OF_MSG):
        failures.append(f"{label}: the turn does not end with <|end_of_msg|>")
    calls = matcher.calls
    params = dict(zip(compiled.tool_names, compiled.parameters))
    for i, call in enumerate(calls):
        name = call["function"]["name"]
        if name not in params:
            failures.append(f"{label}: undeclared tool {name!r}")
            continue
        if call["id"] != f"functions.{name}:{i + 1}":
            failures.append(f"{label}: call id {call['id']!r} is not index {i + 1}")
        try:
            args = json.loads(call["function"]["arguments"])
            Draft202012Validator(params[name], format_checker=Draft202012Validator.FORMAT_CHECKER).validate(args)
        except Exception as exc:  # noqa: BLE001 - every failure is reported with its call
            failures.append(f"{label}: call {call} invalid: {str(exc)[:200]}")
    mode = compiled.tool_choice
    if mode == "none" and calls:
        failures.append(f"{label}: a call under tool_choice none")
    if mode in ("required", "named") and not calls:
        failures.append(f"{label}: no call under tool_choice {mode}")
    if mode == "named" and any(c["function"]["name"] != compiled.forced_name for c in calls):
        failures.append(f"{label}: another tool than the named one")
    if not compiled.parallel_tool_calls and len(calls) > 1:
        failures.append(f"{label}: {len(calls)} calls with parallel calls off")
    parsed = parse_tool_calls(ids, vocab, format="kimi_k3", in_reasoning=True)
    if parsed["tool_calls"] != calls:
        failures.append(f"{label}: parser {parsed['tool_calls']} != matcher {calls}")
    streamer = StreamingToolCallParser(vocab, format="kimi_k3", in_reasoning=True)
    deltas = [d for t in ids for d in streamer.feed(t)] + streamer.finish()
    if merge_deltas(deltas) != parsed:
        failures.append(f"{label}: streamed parse differs from the batch parse")
    return len(calls)


def fuzz(tools: list[dict], vocab: Any, sampler: Sampler, turns: int, failures: list[str], label: str,
         prompt: list[int]) -> tuple[int, int]:
    """``turns`` turns per (tool_choice, parallel) mode; returns (turns, calls) checked."""
    names = [t["function"]["name"] for t in tools]
    modes = [("auto", True), ("auto", False), ("required", True), ("none", True),
             ({"type": "function", "function": {"name": names[-1]}}, True)]
    done = total_calls = 0
    for choice, parallel in modes:
        compiled = compile_tools(tools, vocab, format="kimi_k3", tool_choice=choice, parallel_tool_calls=parallel)
        for k in range(turns):
            matcher = compiled.matcher(prompt_ids=prompt)
            where = f"{label} {choice if isinstance(choice, str) else 'named'}/{parallel} #{k}"
            ids = sampler.generate(compiled, matcher, failures, where)
            if ids is not None:
                total_calls += check_turn(compiled, ids, matcher, vocab, failures, where)
                done += 1
    return done, total_calls


def generation_prompt(vocab: Any) -> list[int]:
    encode = vocab.encode_text
    o, s = vocab.token_id(OPEN), vocab.token_id(SEP)
    return [o, *encode("message"), *encode(" role"), *encode('="'), *encode("assistant"), *encode('"'), s,
            o, *encode("think"), s]


@pytest.fixture(scope="module")
def sampler(kimi_k3_vocab: Any) -> Sampler:
    return Sampler(kimi_k3_vocab, SEED)


@pytest.mark.parametrize("name", TOOL_SETS)
def test_fuzz_k3_schema_tool_sets(name: str, kimi_k3_vocab: Any, sampler: Sampler) -> None:
    tools = json.loads((SCHEMAS / f"{name}.json").read_text(encoding="utf-8"))
    failures: list[str] = []
    turns, calls = fuzz(tools, kimi_k3_vocab, sampler, 12, failures, name, generation_prompt(kimi_k3_vocab))
    assert not failures, "\n".join(failures[:20])
    assert turns == 60 and calls >= 40


def as_tools(schema: dict) -> list[dict]:
    """BFCL's multi-function schemas (``anyOf`` of ``{NAME: arguments}`` objects) as one tool per
    branch; any other schema as one tool."""
    branches = schema.get("anyOf")
    if isinstance(branches, list) and all(isinstance(b, dict) and len(b.get("properties", {})) == 1 and
                                          b.get("required") == list(b["properties"]) for b in branches):
        return [{"type": "function", "function": {"name": name, "parameters": params}}
                for b in branches for name, params in b["properties"].items()]
    return [{"type": "function", "function": {"name": "f", "parameters": schema}}]


@pytest.mark.corpus
def test_fuzz_k3_corpus_tools(corpus_dir: Path, kimi_k3_vocab: Any, sampler: Sampler) -> None:
    """MaskBench's BFCL tool schemas (every 8th) and MCP spec schemas as K3 tools: every one that
    can be split one level deep is fuzzed (3 required-call turns); BFCL must split (at most 1%
    refused), MCP's protocol messages are reported."""
    failures: list[str] = []
    counts = {"BFCL": [0, 0], "MCPspec": [0, 0]}
    turns = calls = 0
    cases = [c for c in load_maskbench(corpus_dir) if c.subset in counts]
    bfcl = [c for c in cases if c.subset == "BFCL"][::8]
    for case in bfcl + [c for c in cases if c.subset == "MCPspec"]:
        if not isinstance(case.schema, dict) or case.schema.get("type", "object") != "object":
            continue
        counts[case.subset][0] += 1
        tools = as_tools(case.schema)
        try:
            compiled = compile_tools(tools, kimi_k3_vocab, format="kimi_k3", tool_choice="required")
        except (UnsupportedSchemaError, SchemaTooComplexError, InvalidSchemaError):
            counts[case.subset][1] += 1
            continue
        for k in range(3):
            matcher = compiled.matcher(prompt_ids=generation_prompt(kimi_k3_vocab))
            label = f"{case.name} #{k}"
            ids = sampler.generate(compiled, matcher, failures, label)
            if ids is not None:
                calls += check_turn(compiled, ids, matcher, kimi_k3_vocab, failures, label)
                turns += 1
    print(f"\nK3 corpus fuzz: {counts} (schemas, not splittable), {turns} turns, {calls} calls")
    assert counts["BFCL"][0] and not failures, "\n".join(failures[:20])
    assert counts["BFCL"][1] <= counts["BFCL"][0] // 100
