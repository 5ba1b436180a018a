"""Kimi K2 tool calls through ``compile_tools`` + ``ToolCallMatcher``, on the Kimi-shaped tokenizer.

Golden transcripts are accepted token by token (each id set in ``fill_bitmask`` *and*
``accept_token`` True); the traps of FORMATS.md are refused at exactly the right token (the bit
is clear, ``accept_token`` is False and the state does not move). Markers are inserted by id
(``Vocabulary.token_id``); text, including text that spells a marker, is encoded with
``encode_as_text`` (the fast tokenizer's ``split_special_tokens`` does not split added tokens
that are not special, so it cannot spell a marker as text).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import enforcer
from enforcer import compile_tools
from enforcer.declarations import render_chat
from enforcer.errors import InvalidToolsError, TokenizerError, UnsupportedSchemaError
from enforcer.formats import get_format, kimi_k2
from enforcer.parser import parse_tool_calls
from enforcer.testing.tokenizers import encode_as_text
from enforcer.text_rules import ChoiceRule

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
SECTION_BEGIN, SECTION_END = kimi_k2.SECTION_BEGIN, kimi_k2.SECTION_END
CALL_BEGIN, ARG_BEGIN, CALL_END = kimi_k2.CALL_BEGIN, kimi_k2.ARGUMENT_BEGIN, kimi_k2.CALL_END
THINK, UNTHINK, IM_END, EOS = kimi_k2.THINK_BEGIN, kimi_k2.THINK_END, kimi_k2.IM_END, "[EOS]"
TOOL_TOKENS = kimi_k2.TOOL_TOKENS


def load_tools(name: str) -> list[dict]:
    return json.loads((SCHEMAS / f"{name}.json").read_text(encoding="utf-8"))


def fn(name: str, properties: dict | None = None, required: list[str] | None = None) -> dict:
    """An OpenAI tool with a strict object schema."""
    params: dict[str, Any] = {"type": "object", "properties": properties or {}, "additionalProperties": False}
    if required:
        params["required"] = required
    return {"type": "function", "function": {"name": name, "parameters": params}}


class Transcript:
    """Token ids built from text pieces (encoded as text) and marker ids; ``at[label]`` is the
    index of a labelled piece's first token."""

    def __init__(self, tokenizer: Any, vocab: Any) -> None:
        self.tokenizer, self.vocab = tokenizer, vocab
        self.ids: list[int] = []
        self.at: dict[str, int] = {}

    def text(self, s: str, label: str | None = None) -> "Transcript":
        if label:
            self.at[label] = len(self.ids)
        pieces = encode_as_text(self.tokenizer, s)
        assert self.vocab.decode_bytes(pieces) == s.encode(), "text must round-trip through its tokens"
        self.ids += pieces
        return self

    def mark(self, name: str, label: str | None = None) -> "Transcript":
        if label:
            self.at[label] = len(self.ids)
        self.ids.append(self.vocab.token_id(name))
        return self

    def call(self, name: str, counter: int, arguments: str) -> "Transcript":
        self.mark(CALL_BEGIN).text(f"functions.{name}:{counter}").mark(ARG_BEGIN).text(arguments)
        return self.mark(CALL_END)


def new_bitmask(vocab: Any, rows: int = 1) -> np.ndarray:
    return np.full((rows, (vocab.vocab_size + 31) // 32), -1, dtype=np.int32)  # garbage: rows must be overwritten


def bit(bitmask: np.ndarray, token_id: int, row: int = 0) -> bool:
    return bool((int(bitmask[row, token_id >> 5]) >> (token_id & 31)) & 1)


def feed(matcher: Any, ids: list[int], vocab: Any) -> int | None:
    """Feed ``ids``; the index of the first refused id (None when all were accepted). At every
    step the bitmask and ``accept_token`` must agree, and a refusal must change nothing."""
    bitmask = new_bitmask(vocab)
    for i, t in enumerate(ids):
        bitmask[:] = -1
        matcher.fill_bitmask(bitmask, 0)
        allowed = bit(bitmask, t)
        before = matcher.token_ids
        accepted = matcher.accept_token(t)
        assert accepted == allowed, f"token {i} (id {t}): bitmask says {allowed}, accept_token {accepted}"
        if not accepted:
            assert matcher.token_ids == before
            after = new_bitmask(vocab)
            matcher.fill_bitmask(after, 0)
            assert not bit(after, t)
            return i
    return None


def accept_all(matcher: Any, ids: list[int], vocab: Any) -> None:
    refused = feed(matcher, ids, vocab)
    assert refused is None, f"token {refused} refused: {vocab.decode_bytes([t for t in ids[:refused + 1] if vocab.token_bytes(t)])[-80:]!r}"


def check_calls(matcher: Any, ids: list[int], vocab: Any, expected: list[tuple[str, int, Any]], **parse: Any) -> None:
    """``matcher.calls`` are ``expected`` (name, counter, arguments) and equal the parser's."""
    calls = matcher.calls
    assert [(c["function"]["name"], c["id"]) for c in calls] == [(n, f"functions.{n}:{k}") for n, k, _ in expected]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [a for _, _, a in expected]
    assert calls == parse_tool_calls(ids, vocab, **parse)["tool_calls"]


@pytest.fixture(scope="module")
def T(kimi_tokenizer: Any, kimi_vocab: Any):
    return lambda: Transcript(kimi_tokenizer, kimi_vocab)


@pytest.fixture(scope="module")
def weather(kimi_vocab: Any):
    return compile_tools(load_tools("weather"), kimi_vocab)


WEATHER_ARGS = {"city": "Paris", "unit": "celsius"}
TIME_ARGS = {"tz": "Asia/Tokyo"}


# ---- golden transcripts ----------------------------------------------------------------------


def test_single_call(weather: Any, T: Any, kimi_vocab: Any) -> None:
    t = T().text("Let me check.").mark(SECTION_BEGIN).call("get_weather", 0, json.dumps(WEATHER_ARGS))
    t.mark(SECTION_END).mark(IM_END)
    m = weather.matcher()
    accept_all(m, t.ids, kimi_vocab)
    assert m.is_finished and m.is_accepting() and m.error is None
    assert m.allowed_token_ids() == []
    check_calls(m, t.ids, kimi_vocab, [("get_weather", 0, WEATHER_ARGS)])
    assert parse_tool_calls(t.ids, kimi_vocab)["content"] == "Let me check."


def test_parallel_calls_count_0_1_2(weather: Any, T: Any, kimi_vocab: Any) -> None:
    berlin = {"city": "Berlin", "unit": "fahrenheit"}
    t = T().mark(SECTION_BEGIN).call("get_weather", 0, json.dumps(WEATHER_ARGS))
    t.call("get_time", 1, json.dumps(TIME_ARGS)).call("get_weather", 2, json.dumps(berlin))
    t.mark(SECTION_END).mark(IM_END)
    m = weather.matcher()
    accept_all(m, t.ids, kimi_vocab)
    assert m.is_finished
    check_calls(m, t.ids, kimi_vocab, [("get_weather", 0, WEATHER_ARGS), ("get_time", 1, TIME_ARGS), ("get_weather", 2, berlin)])


HISTORY = [
    {"role": "user", "content": "Weather in Paris and the time in Tokyo?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(WEATHER_ARGS)}},
        {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": json.dumps(TIME_ARGS)}},
    ]},
    {"role": "tool", "tool_call_id": "call_a", "content": "18 C"},
    {"role": "tool", "tool_call_id": "call_b", "content": "09:00"},
    {"role": "user", "content": "And Berlin?"},
]


def test_counter_from_history(weather: Any, T: Any, kimi_tokenizer: Any, kimi_vocab: Any) -> None:
    prompt = kimi_tokenizer.encode(render_chat(HISTORY, load_tools("weather")), add_special_tokens=False)
    assert prompt.count(kimi_vocab.token_id(CALL_BEGIN)) == 2
    berlin = {"city": "Berlin", "unit": "celsius"}
    good = T().mark(SECTION_BEGIN).call("get_weather", 2, json.dumps(berlin)).call("get_time", 3, json.dumps(TIME_ARGS))
    good.mark(SECTION_END).mark(IM_END)
    m = weather.matcher(prompt_ids=prompt)
    assert m.call_index == 2
    accept_all(m, good.ids, kimi_vocab)
    check_calls(m, good.ids, kimi_vocab, [("get_weather", 2, berlin), ("get_time", 3, TIME_ARGS)])
    # restarting at 0 is the trap: refused at the counter's first token
    bad = T().mark(SECTION_BEGIN).mark(CALL_BEGIN).text("functions.get_weather:").text("0", "counter")
    assert feed(weather.matcher(prompt_ids=prompt), bad.ids, kimi_vocab) == bad.at["counter"]
    # first_call_index overrides what the prompt says
    seven = T().mark(SECTION_BEGIN).call("get_weather", 7, json.dumps(berlin)).mark(SECTION_END).mark(IM_END)
    m = weather.matcher(prompt_ids=prompt, first_call_index=7)
    accept_all(m, seven.ids, kimi_vocab)
    check_calls(m, seven.ids, kimi_vocab, [("get_weather", 7, berlin)])
    assert feed(weather.matcher(prompt_ids=prompt, first_call_index=7), good.ids, kimi_vocab) is not None
    with pytest.raises(ValueError):
        weather.matcher(first_call_index=-1)


def test_two_digit_counter(weather: Any, T: Any, kimi_vocab: Any) -> None:
    t = T().mark(SECTION_BEGIN).call("get_time", 10, json.dumps(TIME_ARGS)).call("get_time", 11, json.dumps(TIME_ARGS))
    t.mark(SECTION_END).mark(IM_END)
    m = weather.matcher(first_call_index=10)
    accept_all(m, t.ids, kimi_vocab)
    check_calls(m, t.ids, kimi_vocab, [("get_time", 10, TIME_ARGS), ("get_time", 11, TIME_ARGS)])
    short = T().mark(SECTION_BEGIN).mark(CALL_BEGIN).text("functions.get_time:1").mark(ARG_BEGIN, "arg")
    assert feed(weather.matcher(first_call_index=10), short.ids, kimi_vocab) == short.at["arg"]


def test_section_inside_prefilled_think(weather: Any, T: Any, kimi_tokenizer: Any, kimi_vocab: Any) -> None:
    """K2-Thinking opens the section inside ``<think>`` without closing it."""
    prompt = kimi_tokenizer.encode(render_chat(HISTORY[:1], load_tools("weather"), thinking=True) + THINK,
                                   add_special_tokens=False)
    assert prompt[-1] == kimi_vocab.token_id(THINK)
    t = T().text("The user wants the weather; call the tool.").mark(SECTION_BEGIN)
    t.call("get_weather", 0, json.dumps(WEATHER_ARGS)).mark(SECTION_END).mark(IM_END)
    m = weather.matcher(prompt_ids=prompt)
    accept_all(m, t.ids, kimi_vocab)
    assert m.is_finished
    check_calls(m, t.ids, kimi_vocab, [("get_weather", 0, WEATHER_ARGS)], in_reasoning=True)
    parsed = parse_tool_calls(t.ids, kimi_vocab, in_reasoning=True)
    assert parsed["reasoning_content"] == "The user wants the weather; call the tool." and parsed["content"] is None
    # inside the prefilled think block a second <think> is refused, </think> allowed
    m = weather.matcher(prompt_ids=prompt)
    assert feed(m, [kimi_vocab.token_id(THINK)], kimi_vocab) == 0
    assert kimi_vocab.token_id(UNTHINK) in m.allowed_token_ids()


def test_section_inside_emitted_think(weather: Any, T: Any, kimi_vocab: Any) -> None:
    t = T().mark(THINK).text("Need the weather.").mark(SECTION_BEGIN).call("get_weather", 0, json.dumps(WEATHER_ARGS))
    t.mark(SECTION_END).mark(IM_END)
    m = weather.matcher()
    accept_all(m, t.ids, kimi_vocab)
    check_calls(m, t.ids, kimi_vocab, [("get_weather", 0, WEATHER_ARGS)])
    # closed think, then content, then the section
    t2 = T().mark(THINK).text("Need the weather.").mark(UNTHINK).text("Checking.").mark(SECTION_BEGIN)
    t2.call("get_time", 0, json.dumps(TIME_ARGS)).mark(SECTION_END).mark(IM_END)
    m = weather.matcher()
    accept_all(m, t2.ids, kimi_vocab)
    check_calls(m, t2.ids, kimi_vocab, [("get_time", 0, TIME_ARGS)])
    # a second think block after </think> is refused
    t3 = T().mark(THINK).text("x").mark(UNTHINK).mark(THINK, "again")
    assert feed(weather.matcher(), t3.ids, kimi_vocab) == t3.at["again"]


def test_chinese_and_emoji_arguments(kimi_vocab: Any, T: Any) -> None:
    cjk = compile_tools(load_tools("cjk"), kimi_vocab)
    a1 = {"city": "北京", "cuisine": "川菜", "price_level": 2, "open_now": True}
    a2 = {"text": "今天天气很好 😀🌧️🦜，龘靐我们去吃火锅吧！", "target": "日本語"}
    t = T().mark(SECTION_BEGIN).call("search_restaurants", 0, json.dumps(a1, ensure_ascii=False))
    t.call("translate", 1, json.dumps(a2, ensure_ascii=False)).mark(SECTION_END).mark(IM_END)
    m = cjk.matcher()
    accept_all(m, t.ids, kimi_vocab)
    # a token holding half of a UTF-8 character is judged at the byte level
    assert any(b is not None and b.decode("utf-8", "ignore").encode() != b
               for b in (kimi_vocab.token_bytes(i) for i in t.ids))
    check_calls(m, t.ids, kimi_vocab, [("search_restaurants", 0, a1), ("translate", 1, a2)])
    # \u escapes are JSON too
    t = T().mark(SECTION_BEGIN).call("translate", 0, json.dumps(a2)).mark(SECTION_END).mark(IM_END)
    m = cjk.matcher()
    accept_all(m, t.ids, kimi_vocab)
    check_calls(m, t.ids, kimi_vocab, [("translate", 0, a2)])
    # a value outside the enum, in Chinese, is refused inside the string
    bad = T().mark(SECTION_BEGIN).mark(CALL_BEGIN).text("functions.search_restaurants:0").mark(ARG_BEGIN)
    bad.text('{"city": "北京", "cuisine": "').text("西餐", "dish")
    assert feed(cjk.matcher(), bad.ids, kimi_vocab) == bad.at["dish"]


def test_dotted_hyphenated_and_non_ascii_names(kimi_vocab: Any, T: Any) -> None:
    travel = compile_tools(load_tools("travel"), kimi_vocab)
    f = {"origin": "CDG", "destination": "NRT", "departure_date": "2025-10-01", "passengers": {"adults": 2}}
    h = {"hotel_id": "H-1", "check_in": "2025-10-01", "nights": 3, "rooms": [{"type": "double", "guests": 2}],
         "guest": {"name": "Ana", "email": "a@x.io", "loyalty_number": None}}
    t = T().mark(SECTION_BEGIN).call("flights.search", 0, json.dumps(f)).call("hotel-book", 1, json.dumps(h))
    t.mark(SECTION_END).mark(IM_END)
    m = travel.matcher()
    accept_all(m, t.ids, kimi_vocab)
    check_calls(m, t.ids, kimi_vocab, [("flights.search", 0, f), ("hotel-book", 1, h)])
    tools = [fn("météo_v2", {"ville": {"type": "string"}}, ["ville"]), fn("天气-查询.v1", {"城市": {"type": "string"}}, ["城市"])]
    uni = compile_tools(tools, kimi_vocab)
    t = T().mark(SECTION_BEGIN).call("météo_v2", 0, '{"ville": "Zürich"}').call("天气-查询.v1", 1, '{"城市": "上海"}')
    t.mark(SECTION_END).mark(IM_END)
    m = uni.matcher()
    accept_all(m, t.ids, kimi_vocab)
    check_calls(m, t.ids, kimi_vocab, [("météo_v2", 0, {"ville": "Zürich"}), ("天气-查询.v1", 1, {"城市": "上海"})])


@pytest.mark.parametrize("style", ["default", "compact", "indent2"])
def test_argument_styles(style: str, kimi_vocab: Any, T: Any) -> None:
    tools = load_tools("small_nested")
    order = {"customer": {"name": "Li Wei", "email": "li@example.cn",
                          "address": {"street": "1 Nanjing Rd", "city": "上海", "country": "CN"}},
             "items": [{"sku": "A-1", "quantity": 2, "gift_wrap": False}, {"sku": "B-7", "quantity": 1}],
             "shipping": "express", "note": "call \"before\" \\ delivery\n"}
    dumps = {"default": lambda v: json.dumps(v, ensure_ascii=False),
             "compact": lambda v: json.dumps(v, separators=(",", ":")),
             "indent2": lambda v: json.dumps(v, indent=2, ensure_ascii=False)}[style]
    t = T().mark(SECTION_BEGIN).call("create_order", 0, dumps(order)).call("get_weather", 1, dumps(WEATHER_ARGS))
    t.mark(SECTION_END).mark(IM_END)
    m = compile_tools(tools, kimi_vocab).matcher()
    accept_all(m, t.ids, kimi_vocab)
    check_calls(m, t.ids, kimi_vocab, [("create_order", 0, order), ("get_weather", 1, WEATHER_ARGS)])


def test_content_only_turn(weather: Any, T: Any, kimi_vocab: Any) -> None:
    t = T().text("It is sunny. Anything else?").mark(IM_END)
    m = weather.matcher()
    accept_all(m, t.ids, kimi_vocab)
    assert m.is_finished and m.calls == []


# ---- traps: each refused at exactly the right token -------------------------------------------


def test_bare_call_without_section(weather: Any, T: Any, kimi_vocab: Any) -> None:
    t = T().mark(CALL_BEGIN, "bare").text("functions.get_weather:0")
    assert feed(weather.matcher(), t.ids, kimi_vocab) == 0
    t = T().text("Sure.").mark(CALL_BEGIN, "bare")
    assert feed(weather.matcher(), t.ids, kimi_vocab) == t.at["bare"]
    for marker in (SECTION_END, ARG_BEGIN, CALL_END):
        assert feed(weather.matcher(), T().text("Hi").mark(marker).ids, kimi_vocab) == 1


def test_wrong_counter(weather: Any, T: Any, kimi_vocab: Any) -> None:
    t = T().mark(SECTION_BEGIN).mark(CALL_BEGIN).text("functions.get_weather:").text("1", "counter")
    assert feed(weather.matcher(), t.ids, kimi_vocab) == t.at["counter"]


def test_repeated_counter(weather: Any, T: Any, kimi_vocab: Any) -> None:
    t = T().mark(SECTION_BEGIN).call("get_weather", 0, json.dumps(WEATHER_ARGS))
    t.mark(CALL_BEGIN).text("functions.get_time:").text("0", "counter")
    assert feed(weather.matcher(), t.ids, kimi_vocab) == t.at["counter"]


def test_undeclared_name(weather: Any, T: Any, kimi_vocab: Any) -> None:
    t = T().mark(SECTION_BEGIN).mark(CALL_BEGIN).text("functions.").text("lookup_stock:0", "name")
    assert feed(weather.matcher(), t.ids, kimi_vocab) == t.at["name"]
    # a declared name's prefix may not end the header
    t = T().mark(SECTION_BEGIN).mark(CALL_BEGIN).text("functions.get_:0").mark(ARG_BEGIN)
    assert feed(weather.matcher(), t.ids, kimi_vocab) is not None
    # the prefix is required: the bare name is refused at its first token
    t = T().mark(SECTION_BEGIN).mark(CALL_BEGIN).text("get_weather:0", "name")
    assert feed(weather.matcher(), t.ids, kimi_vocab) == t.at["name"]


def test_marker_id_inside_json_string(weather: Any, T: Any, kimi_vocab: Any) -> None:
    head = lambda: T().mark(SECTION_BEGIN).mark(CALL_BEGIN).text("functions.get_weather:0").mark(ARG_BEGIN)
    t = head().text('{"city": "Par').mark(CALL_END, "marker")
    assert feed(weather.matcher(), t.ids, kimi_vocab) == t.at["marker"]
    for marker in (SECTION_END, IM_END, SECTION_BEGIN, CALL_BEGIN, THINK):
        t = head().text('{"city": "Par').mark(marker, "marker")
        assert feed(weather.matcher(), t.ids, kimi_vocab) == t.at["marker"], marker
    # the marker spelled as text inside the string is just text (and `<` does not fool the parser)
    city = "Par<|tool_call_end|>is</think>"
    t = head().text(json.dumps({"city": city, "unit": "celsius"})).mark(CALL_END).mark(SECTION_END).mark(IM_END)
    m = weather.matcher()
    accept_all(m, t.ids, kimi_vocab)
    check_calls(m, t.ids, kimi_vocab, [("get_weather", 0, {"city": city, "unit": "celsius"})])


def test_trigger_spelled_as_text_stays_content(weather: Any, T: Any, kimi_vocab: Any) -> None:
    t = T().text("I would write <|tool_calls_section_begin|> here.")
    m = weather.matcher()
    accept_all(m, t.ids, kimi_vocab)
    assert not m.in_tool_section
    assert feed(m, [kimi_vocab.token_id(CALL_BEGIN)], kimi_vocab) == 0
    accept_all(m, [kimi_vocab.token_id(IM_END)], kimi_vocab)
    parsed = parse_tool_calls(t.ids + [kimi_vocab.token_id(IM_END)], kimi_vocab)
    assert parsed["tool_calls"] == [] and "<|tool_calls_section_begin|>" in parsed["content"]


def test_only_im_end_after_section(weather: Any, T: Any, kimi_vocab: Any) -> None:
    t = T().mark(SECTION_BEGIN).call("get_weather", 0, json.dumps(WEATHER_ARGS)).mark(SECTION_END)
    m = weather.matcher()
    accept_all(m, t.ids, kimi_vocab)
    assert m.allowed_token_ids() == [kimi_vocab.token_id(IM_END)] and m.is_accepting() and not m.is_finished
    for name in (EOS, SECTION_BEGIN, CALL_BEGIN, SECTION_END, THINK, UNTHINK):
        assert feed(m, [kimi_vocab.token_id(name)], kimi_vocab) == 0, name
    assert feed(m, T().text("Done.").ids, kimi_vocab) == 0
    accept_all(m, [kimi_vocab.token_id(IM_END)], kimi_vocab)
    assert m.is_finished
    assert feed(m, T().text("x").ids, kimi_vocab) == 0


def test_single_call_when_parallel_off(kimi_vocab: Any, T: Any) -> None:
    single = compile_tools(load_tools("weather"), kimi_vocab, parallel_tool_calls=False)
    t = T().mark(SECTION_BEGIN).call("get_weather", 0, json.dumps(WEATHER_ARGS)).mark(CALL_BEGIN, "second")
    assert feed(single.matcher(), t.ids, kimi_vocab) == t.at["second"]
    ok = T().mark(SECTION_BEGIN).call("get_weather", 0, json.dumps(WEATHER_ARGS)).mark(SECTION_END).mark(IM_END)
    m = single.matcher()
    accept_all(m, ok.ids, kimi_vocab)
    check_calls(m, ok.ids, kimi_vocab, [("get_weather", 0, WEATHER_ARGS)])


def test_named_tool_choice(kimi_vocab: Any, T: Any) -> None:
    named = compile_tools(load_tools("weather"), kimi_vocab,
                          tool_choice={"type": "function", "function": {"name": "get_weather"}})
    vid = kimi_vocab.token_id
    assert set(named.matcher().allowed_token_ids()) == {vid(SECTION_BEGIN), vid(THINK)}
    t = T().mark(SECTION_BEGIN).mark(CALL_BEGIN).text("functions.get_").text("time:0", "other")
    assert feed(named.matcher(), t.ids, kimi_vocab) == t.at["other"]
    assert feed(named.matcher(), T().text("Hello").ids, kimi_vocab) == 0
    ok = T().mark(SECTION_BEGIN).call("get_weather", 0, json.dumps(WEATHER_ARGS))
    ok.call("get_weather", 1, json.dumps(WEATHER_ARGS)).mark(SECTION_END).mark(IM_END)
    m = named.matcher()
    accept_all(m, ok.ids, kimi_vocab)
    check_calls(m, ok.ids, kimi_vocab, [("get_weather", 0, WEATHER_ARGS), ("get_weather", 1, WEATHER_ARGS)])
    with pytest.raises(InvalidToolsError, match="nope"):
        compile_tools(load_tools("weather"), kimi_vocab, tool_choice={"type": "function", "function": {"name": "nope"}})


def test_tool_choice_none_refuses_the_trigger(kimi_vocab: Any, T: Any) -> None:
    none = compile_tools(load_tools("weather"), kimi_vocab, tool_choice="none")
    allowed = set(none.matcher().allowed_token_ids())
    assert not allowed & {kimi_vocab.token_id(n) for n in TOOL_TOKENS}
    assert kimi_vocab.token_id(IM_END) in allowed
    assert feed(none.matcher(), [kimi_vocab.token_id(SECTION_BEGIN)], kimi_vocab) == 0
    t = T().mark(THINK).text("no tools").mark(SECTION_BEGIN, "trigger")
    assert feed(none.matcher(), t.ids, kimi_vocab) == t.at["trigger"]
    ok = T().mark(THINK).text("no tools").mark(UNTHINK).text("Hello!").mark(IM_END)
    m = none.matcher()
    accept_all(m, ok.ids, kimi_vocab)
    assert m.is_finished and m.calls == []


def test_tool_choice_required(kimi_vocab: Any, T: Any) -> None:
    req = compile_tools(load_tools("weather"), kimi_vocab, tool_choice="required")
    vid = kimi_vocab.token_id
    m = req.matcher()
    assert set(m.allowed_token_ids()) == {vid(SECTION_BEGIN), vid(THINK)} and not m.is_accepting()
    for bad in (T().text("Hi").ids, [vid(IM_END)], [vid(EOS)], [vid(CALL_BEGIN)]):
        assert feed(req.matcher(), bad, kimi_vocab) == 0
    # reasoning is free text; after </think> only the section may open
    t = T().mark(THINK).text("Think first.").mark(UNTHINK)
    m = req.matcher()
    accept_all(m, t.ids, kimi_vocab)
    assert m.allowed_token_ids() == [vid(SECTION_BEGIN)]
    assert feed(m, T().text("Sure").ids, kimi_vocab) == 0
    assert feed(m, [vid(IM_END)], kimi_vocab) == 0
    rest = T().mark(SECTION_BEGIN).call("get_time", 0, json.dumps(TIME_ARGS)).mark(SECTION_END).mark(IM_END)
    accept_all(m, rest.ids, kimi_vocab)
    check_calls(m, t.ids + rest.ids, kimi_vocab, [("get_time", 0, TIME_ARGS)])
    # the section may also open inside the think block; im_end is refused there
    inside = T().mark(THINK).text("Go.").mark(IM_END, "stop")
    assert feed(req.matcher(), inside.ids, kimi_vocab) == inside.at["stop"]
    no_think = compile_tools(load_tools("weather"), kimi_vocab, tool_choice="required", allow_thinking=False)
    assert no_think.matcher().allowed_token_ids() == [vid(SECTION_BEGIN)]


def test_eos_is_not_the_stop(weather: Any, T: Any, kimi_vocab: Any) -> None:
    eos, im_end = kimi_vocab.token_id(EOS), kimi_vocab.token_id(IM_END)
    assert weather.stop_token_ids == (im_end,) and eos != im_end
    m = weather.matcher()
    accept_all(m, T().text("Hi").ids, kimi_vocab)
    if m.accept_token(eos):  # free text may carry other special ids; they never end the turn
        assert not m.is_finished
    t = T().mark(SECTION_BEGIN).call("get_weather", 0, json.dumps(WEATHER_ARGS)).mark(SECTION_END).mark(EOS, "eos")
    assert feed(weather.matcher(), t.ids, kimi_vocab) == t.at["eos"]


def test_free_text_allows_every_token_the_format_does_not_control(kimi_vocab: Any) -> None:
    """Before a call, any text token and any special token but the format's own markers and
    the stop; the mask is one per vocabulary and controlled set, whatever the tools."""
    first = compile_tools(load_tools("weather"), kimi_vocab).matcher()
    second = compile_tools([fn("other", {"a": {"type": "string"}})], kimi_vocab).matcher()
    controlled = {kimi_vocab.token_id(name) for name in get_format("kimi_k2").controlled} | {kimi_vocab.token_id(IM_END)}
    allowed = set(first.allowed_token_ids())
    specials = {i for i in kimi_vocab.special_ids if i < kimi_vocab.vocab_size}
    text = {i for i in range(kimi_vocab.vocab_size) if kimi_vocab.byte_tokens[i]}
    assert specials - controlled and allowed - controlled == text | (specials - controlled)
    exits = {kimi_vocab.token_id(name) for name in (SECTION_BEGIN, THINK, IM_END)}
    assert kimi_vocab.token_id(SECTION_BEGIN) in allowed and allowed & controlled <= exits
    assert first.state.frame.rule.words is second.state.frame.rule.words  # one array, made once


# ---- compile_tools errors and names ---------------------------------------------------------------


def test_compile_errors(kimi_vocab: Any) -> None:
    good = fn("ok", {"a": {"type": "string"}})
    with pytest.raises(InvalidToolsError, match="name"):
        compile_tools([{"type": "function", "function": {"parameters": {"type": "object"}}}], kimi_vocab)
    with pytest.raises(InvalidToolsError, match="duplicate.*'ok'"):
        compile_tools([good, fn("ok")], kimi_vocab)
    with pytest.raises(InvalidToolsError, match="':'"):
        compile_tools([fn("a:b")], kimi_vocab)
    for marker in (CALL_END, IM_END, SECTION_BEGIN):
        with pytest.raises(InvalidToolsError, match="marker"):
            compile_tools([fn(f"get{marker}x")], kimi_vocab)
    with pytest.raises(InvalidToolsError, match="/tools/1/function/parameters/properties/a/type"):
        compile_tools([good, fn("bad", {"a": {"type": "strin"}})], kimi_vocab)
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_tools([good, fn("uniq", {"xs": {"type": "array", "uniqueItems": True}})], kimi_vocab)
    assert "uniq" in str(info.value) and "/tools/1/function/parameters/properties/xs" in str(info.value)
    assert info.value.keyword == "uniqueItems"
    with pytest.raises(InvalidToolsError, match="object"):
        compile_tools([{"type": "function", "function": {"name": "s", "parameters": {"type": "string"}}}], kimi_vocab)
    with pytest.raises(InvalidToolsError, match="tool_choice"):
        compile_tools([good], kimi_vocab, tool_choice="sometimes")


def test_tokenizer_without_markers(deepseek_vocab: Any) -> None:
    with pytest.raises(TokenizerError, match=r"kimi_k2.*<\|im_end\|>|<\|tool_calls_section_begin\|>"):
        compile_tools(load_tools("weather"), deepseek_vocab)


@pytest.mark.parametrize("name", ["a.b", "a-b", "a_b", "tool2", "9lives", "x.y-z_0", "météo", "天气", "Ωmega"])
def test_names_that_work(name: str, kimi_vocab: Any, T: Any) -> None:
    m = compile_tools([fn(name, {"q": {"type": "integer"}}, ["q"])], kimi_vocab).matcher()
    t = T().mark(SECTION_BEGIN).call(name, 0, '{"q": 42}').mark(SECTION_END).mark(IM_END)
    accept_all(m, t.ids, kimi_vocab)
    check_calls(m, t.ids, kimi_vocab, [(name, 0, {"q": 42})])


def test_empty_tool_list(kimi_vocab: Any, T: Any) -> None:
    """No tools: the section can never be completed, so it must not open."""
    compiled = compile_tools([], kimi_vocab)
    m = compiled.matcher()
    assert feed(m, [kimi_vocab.token_id(SECTION_BEGIN)], kimi_vocab) == 0
    accept_all(m, T().text("No tools here.").mark(IM_END).ids, kimi_vocab)


def test_padded_vocabulary_and_out_of_range_ids(kimi_tokenizer: Any, kimi_vocab: Any, T: Any) -> None:
    """Ids past the tokenizer (logits wider than the tokenizer) are never allowed; odd ids are refused."""
    padded = enforcer.Vocabulary.from_tokenizer(kimi_tokenizer, vocab_size=kimi_vocab.vocab_size + 165)
    compiled = compile_tools(load_tools("weather"), padded)
    assert compiled is not compile_tools(load_tools("weather"), kimi_vocab)
    t = T().text("Hi").mark(SECTION_BEGIN).call("get_time", 0, json.dumps(TIME_ARGS)).mark(SECTION_END).mark(IM_END)
    m = compiled.matcher()
    for tok in [None] + t.ids:
        if tok is not None:
            assert m.accept_token(tok)
        bitmask = new_bitmask(padded)
        m.fill_bitmask(bitmask, 0)
        bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little")
        assert not bits[kimi_vocab.vocab_size:].any()
        for bad in (-1, kimi_vocab.vocab_size, padded.vocab_size - 1, padded.vocab_size, 10**9):
            assert m.accept_token(bad) is False
    assert m.is_finished


def test_compile_is_cached(kimi_vocab: Any) -> None:
    a = compile_tools(load_tools("travel"), kimi_vocab, tool_choice="required")
    assert compile_tools(load_tools("travel"), kimi_vocab, tool_choice="required") is a
    assert compile_tools(load_tools("travel"), kimi_vocab, tool_choice="auto") is not a
    assert compile_tools(load_tools("travel"), kimi_vocab, tool_choice="required", parallel_tool_calls=False) is not a


# ---- rollback, bitmask forms ----------------------------------------------------------------------


def _snapshot(m: Any, vocab: Any) -> tuple:
    bitmask = new_bitmask(vocab)
    m.fill_bitmask(bitmask, 0)
    return (bitmask.tobytes(), m.token_ids, m.calls, m.is_finished, m.is_accepting(), m.in_tool_section, m.call_index)


def test_rollback_restores_state(weather: Any, T: Any, kimi_vocab: Any) -> None:
    t = T().mark(THINK).text("Plan.").mark(SECTION_BEGIN).call("get_weather", 0, json.dumps(WEATHER_ARGS))
    t.call("get_time", 1, json.dumps(TIME_ARGS)).mark(SECTION_END).mark(IM_END)
    reference = weather.matcher()
    states = [_snapshot(reference, kimi_vocab)]
    for tok in t.ids:
        assert reference.accept_token(tok)
        states.append(_snapshot(reference, kimi_vocab))
    m = weather.matcher()
    assert m.accept_tokens(t.ids)
    for k in range(1, len(t.ids) + 1, 3):
        m.rollback(k)
        assert _snapshot(m, kimi_vocab) == states[len(t.ids) - k], k
        assert m.accept_tokens(t.ids[len(t.ids) - k:])
        assert _snapshot(m, kimi_vocab) == states[-1]
    with pytest.raises(ValueError):
        m.rollback(len(t.ids) + 1)
    # accept_tokens is all or nothing
    m = weather.matcher()
    before = _snapshot(m, kimi_vocab)
    assert not m.accept_tokens(t.ids[:5] + [kimi_vocab.token_id(CALL_END)])
    assert _snapshot(m, kimi_vocab) == before


def test_torch_bitmask_matches_numpy(weather: Any, T: Any, kimi_vocab: Any) -> None:
    torch = pytest.importorskip("torch")
    t = T().text("Hm.").mark(SECTION_BEGIN).call("get_weather", 0, json.dumps(WEATHER_ARGS)).mark(SECTION_END).mark(IM_END)
    m = weather.matcher()
    words = (kimi_vocab.vocab_size + 31) // 32
    for tok in [None] + t.ids[:-1]:
        if tok is not None:
            assert m.accept_token(tok)
        np_mask = np.full((2, words), -1, dtype=np.int32)
        m.fill_bitmask(np_mask, 1)
        th_mask = torch.full((2, words), -1, dtype=torch.int32)
        m.fill_bitmask(th_mask, 1)
        assert np.array_equal(th_mask.numpy()[1], np_mask[1])
        assert (th_mask[0] == -1).all() and (np_mask[0] == -1).all()
        ids = np.flatnonzero(np.unpackbits(np_mask[1].view(np.uint8), bitorder="little"))
        assert ids.tolist() == m.allowed_token_ids()


def test_public_exports() -> None:
    assert enforcer.compile_tools is compile_tools
    assert enforcer.ToolCallMatcher.__name__ == "ToolCallMatcher"


@pytest.mark.parametrize("name,message", [
    ("get<|im_end|>", "cannot contain the marker '<|im_end|>'"),
    ("a<|tool_call_begin|>b", "cannot contain the marker '<|tool_call_begin|>'"),
    ("get weather", "whitespace or control"),
    ("get\x07", "whitespace or control"),
    ("get\tweather", "whitespace or control"),
    ("get\u00a0weather", "whitespace or control"),
    ("get\u200bweather", "whitespace or control"),
    ("get:weather", "cannot contain ':'"),
])
def test_tool_names_holding_markers_or_separators_are_refused(kimi_vocab, name, message):
    tool = {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    with pytest.raises(InvalidToolsError, match=re.escape(message)):
        compile_tools([tool], kimi_vocab, format="kimi_k2")


def test_tool_names_with_marker_characters_but_no_marker_compile(kimi_vocab):
    for name in ("a<b", "x|y", "im_end", "<|not_a_marker", "météo_à_paris"):
        tool = {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
        assert compile_tools([tool], kimi_vocab, format="kimi_k2").matcher() is not None


def test_compile_builds_each_tools_arguments_nfa(kimi_vocab: Any) -> None:
    """A tool set's argument automata have their NFA when the compile returns (built while the
    expressions are warm, not at the call's first mask mid-stream); their states are still
    built lazily. A lone schema's automaton is left to its first mask, needed at once. The
    compile makes a turn's first mask; K2's header holds the call counter: the compile makes
    the first call's (its text trie and its first ids), a matcher whose turn starts at another
    counter makes that one's, and a call past them makes its own when it begins."""
    enforcer.clear_cache()
    tools = compile_tools(load_tools("weather"), kimi_vocab)
    lazy = [s.dfa for s in tools.schemas if s is not None]
    assert lazy and all(dfa.nfa_built and dfa.num_states == 1 for dfa in lazy)
    alone = enforcer.compile_json_schema({"type": "object", "properties": {"q": {"type": "string"}}}, kimi_vocab)
    assert not alone.dfa.nfa_built

    def headers() -> dict[tuple, ChoiceRule]:
        return {key: r for key, r in tools._rules.items() if isinstance(r, ChoiceRule)}

    def first_ids_made(rule: ChoiceRule) -> bool:  # a fill finds them without a walk
        return rule.table.few_ids(0, compute=False) is not None or rule.table.cached(0) is not None

    first = headers()
    assert list(first) == [("header", 0)] and first_ids_made(first[("header", 0)])
    start = tools.enter(tools.place_index[tools.format.start], 0, None, 0, None, 0)
    assert tools.cached_mask(start, 0) is not None  # the turn's first fill: made too
    tools.matcher()
    assert list(headers()) == [("header", 0)]
    third = tools.matcher(first_call_index=2)
    assert list(headers()) == [("header", 0), ("header", 2)] and first_ids_made(headers()[("header", 2)])
    begin, call_id = kimi_vocab.token_id(CALL_BEGIN), kimi_vocab.encode_text(kimi_k2.call_id("get_weather", 2))
    assert third.accept_tokens([kimi_vocab.token_id(SECTION_BEGIN), begin, *call_id])
    arguments = kimi_vocab.encode_text('{"city": "Oslo", "unit": "celsius"}')
    assert third.accept_tokens(arguments) is False  # the argument marker first
    assert third.accept_tokens([kimi_vocab.token_id(ARG_BEGIN), *arguments, kimi_vocab.token_id(CALL_END), begin])
    assert ("header", 3) in headers()


def test_header_text_trie_masks_equal_the_lazy_unions(kimi_vocab: Any) -> None:
    """A call header's options are literal texts, built as a text trie whole; every state a
    header's bytes reach has the mask and the tool the lazily built union of the same texts
    gives (names that prefix one another included)."""
    from enforcer.automaton import TaggedUnion, literal
    from enforcer.masks import MaskTable, token_index
    index = token_index(kimi_vocab)
    texts = [f"functions.{name}:{counter}".encode() for counter in (0, 7, 12)
             for name in ("get_weather", "get", "get_time", "search.web")]
    options = [(text, i) for i, text in enumerate(texts)]
    trie = ChoiceRule(options, index, kimi_vocab.byte_tokens)
    union = TaggedUnion([literal(text) for text in texts])
    union_masks = MaskTable(union, index)
    for i, text in enumerate(texts):
        a = b = 0
        for byte in text:
            assert np.array_equal(trie.mask(a), union_masks.mask(b)), (text, a)
            a, b = trie.dfa.row(a)[byte], union.row(b)[byte]
        assert trie.payload(a) == i and union.branch(b) == i
        assert np.array_equal(trie.mask(a), union_masks.mask(b))
