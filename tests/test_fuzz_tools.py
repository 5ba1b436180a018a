"""Random-logit fuzz of Kimi K2 tool calls: generations sampled through ``ToolCallMatcher`` over
the tool sets of ``schemas/`` (always on) and MaskBench object schemas wrapped as tools
(``--corpus``), in every ``tool_choice`` mode, with parallel calls on and off.

Checks, per generation: a generation that opens the section finishes with ``<|im_end|>``; every
call passes Moonshot's vendor-verifier rule (declared name, ``json.loads``, Draft 2020-12
validation of the tool's ``parameters``); the call ids count from the start index; the batch
parser and the streaming parser recover exactly ``matcher.calls``; "none" never opens the
section, "required" and named always do (named: only that tool); one call when parallel is off.

The sampler (sound: it only ever picks ids set in ``fill_bitmask``; deterministic by seed):
- Each generation draws "model" logits once (normal noise over the vocabulary) and a plan
  (text and reasoning budgets, whether to call, how many calls, an argument budget per call).
- Text is sampled from the masked softmax of those logits by rejection: draws from the
  unmasked distribution until one is allowed (exact for the masked distribution); after 64
  misses, Gumbel-max over the explicit allowed ids.
- Structure follows the plan: past a budget, the sampler picks the marker that moves the turn
  on (``</think>``, the section, ``<|tool_call_begin|>`` or the section end, ``<|im_end|>``)
  whenever the mask allows it, and otherwise samples.
- Arguments: random tokens until the call's budget, then a closing walk over the allowed
  single-byte tokens (the argument constraint is a byte automaton, so one always exists where
  any token does): a random allowed byte weighted towards closers, or, with a probability that
  grows to 1 over ``GREEDY_AFTER`` closing steps, the next byte of a completion path found
  by breadth-first search in the tool's argument automaton (``CompiledTools.schemas[i].dfa``,
  read through ``row``/``accepting_list`` only to steer, never to judge; weighted walks alone
  never finish a pattern such as an unanchored ``\\d{5}``). So every generation ends unless a
  reachable state cannot finish, which is reported; a hard cap counts anything else as
  unfinished.
- Now and then a disallowed marker id is offered and must be refused with no change of state.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from enforcer import compile_tools
from benchmarks.conformance import load_maskbench
from completion_route import completion_route
from jsonschema_oracle import ecma_patterns
from enforcer.errors import InvalidToolsError, SchemaTooComplexError, UnsupportedSchemaError
from enforcer.formats import kimi_k2
from enforcer.parser import StreamingToolCallParser, merge_deltas, parse_tool_calls

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
TOOL_SETS = ("weather", "small_nested", "travel", "cjk")
SEED = 20250918
HARD_CAP = 2500
REJECTION_DRAWS = 64
PROBE_P = 0.03
ARGS_BUDGET = (0, 40)
GREEDY_AFTER = 40
CLOSER_WEIGHTS = {ord("}"): 400.0, ord("]"): 400.0, ord('"'): 60.0}
LOW_WEIGHTS = {ord("{"): 0.2, ord("["): 0.2, ord(","): 1.0, ord(" "): 0.3, ord("\n"): 0.1, ord("\\"): 0.3}
DEFAULT_WEIGHT = 4.0
MARKERS = kimi_k2.TOOL_TOKENS + (kimi_k2.IM_END, kimi_k2.THINK_BEGIN, kimi_k2.THINK_END)

ALWAYS_ON_PER_SET = 50
CORPUS_TOOLS = 240
CORPUS_TOOLS_PER_SET = 4
CORPUS_PER_SET = 32


def mode_cycle(first_tool: str, last_tool: str) -> list[tuple[Any, bool]]:
    """(tool_choice, parallel_tool_calls) pairs that a fuzz run cycles through."""
    named = lambda n: {"type": "function", "function": {"name": n}}
    return [("auto", True), ("required", True), ("auto", False), (named(first_tool), True), ("none", True),
            ("required", False), (named(last_tool), False), ("auto", True)]


@dataclass
class Stats:
    generations: int = 0
    tokens: int = 0
    sections: int = 0
    calls: int = 0
    by_mode: dict[str, int] = field(default_factory=dict)
    unfinished: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    format_only: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"{self.generations} generations ({self.by_mode}), {self.sections} with a section, "
                f"{self.calls} calls, {self.tokens} tokens; unfinished {len(self.unfinished)}, "
                f"failures {len(self.failures)}, format-only {len(self.format_only)}")


@dataclass
class Plan:
    free_budget: int
    think_first: bool
    think_budget: int
    close_think: bool
    want_section: bool
    calls: int
    args_budgets: list[int]
    header_stop_p: float


class Sampler:
    """Generates turns through matchers of one vocabulary; lives for one test.
    Cost per step: one mask fill and a few dozen random draws."""

    def __init__(self, vocab: Any, seed: int) -> None:
        self.vocab = vocab
        self.size = vocab.vocab_size
        self.rng = np.random.default_rng(seed)
        self.bitmask = np.zeros((1, (self.size + 31) // 32), dtype=np.int32)
        self.ids = {name: vocab.token_id(name) for name in MARKERS}
        self.marker_ids = np.array(sorted(self.ids.values()), dtype=np.int64)
        byte_token: dict[int, int] = {}
        for token_id, data in enumerate(vocab.byte_tokens):
            if data is not None and len(data) == 1 and data[0] not in byte_token:
                byte_token[data[0]] = token_id
        self.byte_ids = np.array(sorted(byte_token.values()), dtype=np.int64)
        self.byte_values = np.array([vocab.byte_tokens[i][0] for i in self.byte_ids], dtype=np.int64)
        self.byte_weights = np.array([CLOSER_WEIGHTS.get(b, LOW_WEIGHTS.get(b, DEFAULT_WEIGHT)) for b in self.byte_values])
        self.token_of_byte = {int(b): int(i) for b, i in zip(self.byte_values, self.byte_ids)}
        self._plans: dict[int, tuple[Any, dict[int, int]]] = {}

    # ---- masks --------------------------------------------------------------------------

    def bits(self, ids: np.ndarray) -> np.ndarray:
        return (self.bitmask[0, ids >> 5] >> (ids & 31)) & 1 == 1

    def allowed(self, token_id: int) -> bool:
        return bool((int(self.bitmask[0, token_id >> 5]) >> (token_id & 31)) & 1)

    def all_allowed(self) -> np.ndarray:
        return np.flatnonzero(np.unpackbits(self.bitmask.view(np.uint8), bitorder="little")[: self.size])

    # ---- choices ------------------------------------------------------------------------

    def sample(self, cdf: np.ndarray, logits: np.ndarray) -> int | None:
        """An allowed id from the masked softmax of ``logits`` (None when nothing is allowed)."""
        draws = np.minimum(np.searchsorted(cdf, self.rng.random(REJECTION_DRAWS) * cdf[-1]), self.size - 1)
        hits = draws[self.bits(draws)]
        if len(hits):
            return int(hits[0])
        allowed = self.all_allowed()
        if not len(allowed):
            return None
        return int(allowed[np.argmax(logits[allowed] + self.rng.gumbel(size=len(allowed)))])

    def shortest_completion(self, dfa: Any, start: int) -> dict[int, int] | None:
        """``{state: byte}`` leading from ``start`` to acceptance (None: no path): a cheapest
        route (:func:`completion_route`) that stops at an accepting state or at a state an
        earlier plan already leads home from, so plans never loop; kept per automaton. Cost:
        the states met."""
        known = self._plans.get(id(dfa))
        if known is None or known[0] is not dfa:
            known = self._plans[id(dfa)] = (dfa, {})
        plan = known[1]
        if start in plan:
            return plan
        route = completion_route(dfa, start, self.token_of_byte, lambda s: dfa.accepting_list[s] or s in plan)
        if route is None:
            return None
        plan.update(route)
        return plan

    def closing(self, dfa: Any, state: int, steps: int, label: str, stats: Stats) -> int | None:
        """A single-byte id towards the end of the arguments (see the module docstring)."""
        ok = self.bits(self.byte_ids)
        if not ok.any():
            return None
        if self.rng.random() < steps / GREEDY_AFTER:
            plan = self.shortest_completion(dfa, state)
            if plan is None:
                stats.failures.append(f"{label}: argument state {state} cannot reach acceptance")
                return None
            return self.token_of_byte[plan[state]]
        candidates, weights = self.byte_ids[ok], self.byte_weights[ok]
        return int(candidates[self.rng.choice(len(candidates), p=weights / weights.sum())])

    def probe(self, matcher: Any, label: str, stats: Stats) -> None:
        """A disallowed marker id must be refused without a change of state."""
        refused = self.marker_ids[~self.bits(self.marker_ids)]
        if not len(refused):
            return
        token_id = int(refused[self.rng.integers(len(refused))])
        before = self.bitmask.copy()
        if matcher.accept_token(token_id):
            stats.failures.append(f"{label}: disallowed marker {token_id} accepted")
            matcher.rollback(1)
        matcher.fill_bitmask(self.bitmask, 0)
        if not np.array_equal(before, self.bitmask):
            stats.failures.append(f"{label}: refusing marker {token_id} changed the mask")

    # ---- one generation -------------------------------------------------------------------

    def plan(self, compiled: Any) -> Plan:
        r = self.rng
        calls = int(r.integers(1, 4)) if compiled.parallel_tool_calls else 1
        return Plan(free_budget=int(r.integers(0, 7)), think_first=r.random() < 0.3, think_budget=int(r.integers(0, 7)),
                    close_think=r.random() < 0.6,
                    want_section=compiled.tool_choice != "none" and (compiled.tool_choice != "auto" or r.random() < 0.75),
                    calls=calls, args_budgets=[int(r.integers(*ARGS_BUDGET)) for _ in range(calls + 1)],
                    header_stop_p=float(r.uniform(0.3, 0.9)))

    def generate(self, compiled: Any, matcher: Any, in_think: bool, label: str, stats: Stats) -> list[int] | None:
        """One turn; None (recorded as unfinished) when it cannot finish."""
        ids_of, r = self.ids, self.rng
        logits = r.standard_normal(self.size) * 2.0
        cdf = np.cumsum(np.exp(logits - logits.max()))
        plan = self.plan(compiled)
        phase = "think" if in_think else "free"
        text_run, calls_done, ids = 0, 0, []
        header, dfa, state = bytearray(), None, 0
        while not matcher.is_finished:
            if len(ids) >= HARD_CAP:
                stats.unfinished.append(f"{label}: cap of {HARD_CAP} tokens hit in phase {phase}")
                return None
            matcher.fill_bitmask(self.bitmask, 0)
            if r.random() < PROBE_P:
                self.probe(matcher, label, stats)
            want = None
            if phase == "free":
                if not ids and plan.think_first and self.allowed(ids_of[kimi_k2.THINK_BEGIN]):
                    want = ids_of[kimi_k2.THINK_BEGIN]
                elif text_run >= plan.free_budget:
                    order = [kimi_k2.SECTION_BEGIN, kimi_k2.IM_END] if plan.want_section else [kimi_k2.IM_END]
                    want = next((ids_of[n] for n in order if self.allowed(ids_of[n])), None)
            elif phase == "think" and text_run >= plan.think_budget:
                order = ([kimi_k2.THINK_END] if plan.close_think else []) + \
                        ([kimi_k2.SECTION_BEGIN] if plan.want_section else [kimi_k2.IM_END]) + [kimi_k2.THINK_END]
                want = next((ids_of[n] for n in order if self.allowed(ids_of[n])), None)
            elif phase == "header":
                if self.allowed(ids_of[kimi_k2.ARGUMENT_BEGIN]) and r.random() < plan.header_stop_p:
                    want = ids_of[kimi_k2.ARGUMENT_BEGIN]
            elif phase == "args":
                if self.allowed(ids_of[kimi_k2.CALL_END]) and (text_run >= plan.args_budgets[calls_done] or r.random() < 0.1):
                    want = ids_of[kimi_k2.CALL_END]
                elif text_run >= plan.args_budgets[calls_done]:
                    steps = text_run - plan.args_budgets[calls_done]
                    want = self.closing(dfa, state, steps, label, stats)
            elif phase == "after_call":
                order = [kimi_k2.CALL_BEGIN, kimi_k2.SECTION_END] if calls_done < plan.calls else [kimi_k2.SECTION_END]
                want = next((ids_of[n] for n in order if self.allowed(ids_of[n])), None)
            if want is None:
                want = self.sample(cdf, logits)
                if want is None:
                    stats.unfinished.append(f"{label}: no token allowed after {len(ids)} tokens in phase {phase}")
                    return None
            if not matcher.accept_token(want):
                stats.failures.append(f"{label}: allowed id {want} refused in phase {phase}")
                return None
            ids.append(want)
            text_run += 1
            data = self.vocab.token_bytes(want) or b""
            if phase == "header":
                header += data
            elif phase == "args":
                state = dfa.walk(state, data)
                if state < 0:
                    stats.failures.append(f"{label}: id {want} accepted but the argument automaton refuses it")
                    return None
            if want in self.ids.values():
                text_run = 0
                if want == ids_of[kimi_k2.THINK_BEGIN]:
                    phase = "think"
                elif want == ids_of[kimi_k2.THINK_END]:
                    phase = "free"
                elif want == ids_of[kimi_k2.SECTION_BEGIN]:
                    phase = "section"
                elif want == ids_of[kimi_k2.CALL_BEGIN]:
                    phase, header = "header", bytearray()
                elif want == ids_of[kimi_k2.ARGUMENT_BEGIN]:
                    name = header.decode("utf-8").removeprefix("functions.").rpartition(":")[0]
                    phase, dfa, state = "args", compiled.schemas[compiled.tool_names.index(name)].dfa, 0
                elif want == ids_of[kimi_k2.CALL_END]:
                    phase, calls_done = "after_call", calls_done + 1
                elif want == ids_of[kimi_k2.SECTION_END]:
                    phase = "after_section"
        return ids


def _no_constants(name: str) -> Any:
    raise ValueError(f"non-JSON constant {name}")


def check_generation(compiled: Any, params: dict[str, dict], ids: list[int], matcher: Any, first: int,
                     in_think: bool, vocab: Any, stats: Stats, label: str, formats: bool) -> None:
    """The checks listed in the module docstring."""
    section_id, stop_id = vocab.token_id(kimi_k2.SECTION_BEGIN), vocab.token_id(kimi_k2.IM_END)
    opened = section_id in ids
    stats.sections += opened
    problems = []
    if ids[-1] != stop_id or not matcher.is_finished:
        problems.append("did not end with <|im_end|>")
    mode = compiled.tool_choice
    if mode == "none" and opened:
        problems.append("'none' opened the section")
    if mode in ("required", "named") and not (opened and matcher.calls):
        problems.append(f"'{mode}' made no call")
    calls = matcher.calls
    stats.calls += len(calls)
    if opened and not calls:
        problems.append("a section with no call")
    if not compiled.parallel_tool_calls and len(calls) > 1:
        problems.append(f"{len(calls)} calls with parallel_tool_calls=False")
    for k, call in enumerate(calls):
        name = call["function"]["name"]
        if call["id"] != f"functions.{name}:{first + k}":
            problems.append(f"call {k} has id {call['id']!r}, expected counter {first + k}")
        if name not in params or (mode == "named" and name != compiled.forced_name):
            problems.append(f"call {k}: undeclared or unrequested name {name!r}")
            continue
        try:
            args = json.loads(call["function"]["arguments"], parse_constant=_no_constants)
        except ValueError as exc:
            problems.append(f"call {k} ({name}): arguments are not JSON ({exc}): {call['function']['arguments'][:200]!r}")
            continue
        error = next(Draft202012Validator(params[name]).iter_errors(args), None)
        if error is not None:
            problems.append(f"call {k} ({name}): {error.message[:200]} in {call['function']['arguments'][:200]!r}")
        elif formats:
            checker = Draft202012Validator(params[name], format_checker=Draft202012Validator.FORMAT_CHECKER)
            error = next(checker.iter_errors(args), None)
            if error is not None:
                stats.format_only.append(f"{label} call {k} ({name}): {error.message[:200]}")
    batch = parse_tool_calls(ids, vocab, in_reasoning=in_think)
    if batch["tool_calls"] != calls:
        problems.append(f"parse_tool_calls {batch['tool_calls']} != matcher.calls {calls}")
    stream = StreamingToolCallParser(vocab, in_reasoning=in_think)
    deltas = stream.feed_many(ids) + stream.finish()
    if merge_deltas(deltas)["tool_calls"] != calls:
        problems.append(f"streamed calls {merge_deltas(deltas)['tool_calls']} != matcher.calls {calls}")
    if problems:
        text = vocab.decode_bytes([t for t in ids if vocab.token_bytes(t) is not None]).decode("utf-8", "replace")
        stats.failures.append(f"{label}: {'; '.join(problems)} | {text[-300:]!r}")


def fuzz_tool_set(tools: list[dict], vocab: Any, sampler: Sampler, generations: int, stats: Stats, label: str,
                  formats: bool) -> None:
    """``generations`` turns over ``tools``, cycling through the tool_choice modes."""
    # the oracle's schemas: \d and \w as ECMA-262 (and the compiler) read them
    params = {t["function"]["name"]: ecma_patterns(t["function"].get("parameters", {"type": "object"})) for t in tools}
    names = list(params)
    cycle = mode_cycle(names[0], names[-1])
    call_begin, assistant = vocab.token_id(kimi_k2.CALL_BEGIN), vocab.token_id(kimi_k2.IM_ASSISTANT)
    think = vocab.token_id(kimi_k2.THINK_BEGIN)
    for number in range(generations):
        choice, parallel = cycle[number % len(cycle)]
        compiled = compile_tools(tools, vocab, tool_choice=choice, parallel_tool_calls=parallel)
        # start index: from a prompt's history (sometimes ending in an open <think>) or given
        history = int(sampler.rng.integers(0, 4))
        in_think = bool(sampler.rng.random() < 0.25)
        if sampler.rng.random() < 0.5:
            prompt = [call_begin] * history + [assistant] + ([think] if in_think else [])
            matcher, first = compiled.matcher(prompt_ids=prompt), history
        else:
            first, in_think = int(sampler.rng.integers(0, 12)), False
            matcher = compiled.matcher(first_call_index=first)
        mode = compiled.tool_choice + ("" if parallel else "/single")
        stats.by_mode[mode] = stats.by_mode.get(mode, 0) + 1
        where = f"{label}#{number} [{mode}]"
        ids = sampler.generate(compiled, matcher, in_think, where, stats)
        stats.generations += 1
        if ids is None:
            continue
        stats.tokens += len(ids)
        check_generation(compiled, params, ids, matcher, first, in_think, vocab, stats, where, formats)


@pytest.fixture(scope="module")
def sampler(kimi_vocab: Any) -> Sampler:
    return Sampler(kimi_vocab, SEED)


def _report(stats: Stats, seconds: float, what: str) -> None:
    print(f"\n{what}: {stats.line()}, {seconds:.1f} s")
    for line in stats.format_only[:5]:
        print("  format-only:", line)
    assert not stats.failures, f"{len(stats.failures)} failures:\n" + "\n".join(stats.failures[:15])
    # every generation that opens the section must finish it; the plan always finishes otherwise too
    assert not stats.unfinished, f"{len(stats.unfinished)} unfinished:\n" + "\n".join(stats.unfinished[:15])


@pytest.mark.parametrize("name", TOOL_SETS)
def test_fuzz_schema_tool_sets(name: str, kimi_vocab: Any, sampler: Sampler) -> None:
    tools = json.loads((SCHEMAS / f"{name}.json").read_text(encoding="utf-8"))
    stats, start = Stats(), time.perf_counter()
    fuzz_tool_set(tools, kimi_vocab, sampler, ALWAYS_ON_PER_SET, stats, name, formats=True)
    _report(stats, time.perf_counter() - start, name)
    assert stats.generations == ALWAYS_ON_PER_SET and stats.sections > ALWAYS_ON_PER_SET // 2
    assert not stats.format_only, "\n".join(stats.format_only[:5])


def _is_object_schema(schema: Any) -> bool:
    return isinstance(schema, dict) and (schema.get("type") == "object" or ("type" not in schema and "properties" in schema))


@pytest.mark.corpus
def test_fuzz_corpus_tool_sets(corpus_dir: Path, kimi_vocab: Any, sampler: Sampler) -> None:
    """MaskBench object schemas, one per tool, ``CORPUS_TOOLS_PER_SET`` tools per set."""
    cases = [c for c in load_maskbench(corpus_dir) if _is_object_schema(c.schema)]
    stride = max(1, len(cases) // CORPUS_TOOLS)
    start = time.perf_counter()
    tools, skipped = [], 0
    for case in cases[::stride] + cases[1::stride]:
        if len(tools) >= CORPUS_TOOLS:
            break
        stem = case.name.removesuffix(".json").replace(" ", "_")
        tool = {"type": "function", "function": {"name": f"t{len(tools)}.{stem}", "parameters": case.schema}}
        try:
            compile_tools([tool], kimi_vocab)
        except (UnsupportedSchemaError, SchemaTooComplexError, InvalidToolsError):
            skipped += 1
            continue
        tools.append(tool)
    compile_s = time.perf_counter() - start
    stats = Stats()
    for k in range(0, len(tools), CORPUS_TOOLS_PER_SET):
        group = tools[k:k + CORPUS_TOOLS_PER_SET]
        fuzz_tool_set(group, kimi_vocab, sampler, CORPUS_PER_SET, stats, f"set{k // CORPUS_TOOLS_PER_SET}", formats=False)
    _report(stats, time.perf_counter() - start, f"corpus ({len(tools)} tools, {skipped} not compiled, "
                                                 f"compile {compile_s:.1f} s)")
    assert len(tools) >= 200 and stats.generations >= 1800
