"""Kimi K3 (XTML) tool calls through ``compile_tools(format="kimi_k3")`` + ``ToolCallMatcher``, on
the K3-shaped tokenizer (K2's ranks, K3's four control tokens at the K3 offsets).

Golden transcripts are accepted token by token (each id set in ``fill_bitmask`` *and*
``accept_token`` True); traps are refused at exactly the token where they go wrong (the bit is
clear, ``accept_token`` is False, the state does not move). Control tokens are inserted by id;
text, including text that spells a control token, is encoded with ``Vocabulary.encode_text``
(nothing special recognised), tag text piece by piece as the format tokenizes it.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from jsonschema import Draft202012Validator

import enforcer
from enforcer import compile_tools
from enforcer.errors import InvalidSchemaError, UnsupportedSchemaError
from enforcer.formats import kimi_k3
from enforcer.formats.kimi_k3 import CLOSE, END_OF_MSG, OPEN, SEP

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "ratio": {"type": "number"},
        "alerts": {"type": "boolean"},
        "note": {"type": ["string", "null"]},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                  "required": ["lat", "lon"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["city"],
    "additionalProperties": False,
}
TIME = {"type": "object", "properties": {"tz": {"type": "string", "pattern": "^[A-Z]{3}$"}}, "required": ["tz"]}


def tool(name: str, params: dict) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": params}}


TOOLS = [tool("get_weather", WEATHER), tool("get_time", TIME)]


class K3:
    """Builds K3 token ids: control tokens by id, text as text, tags in their canonical pieces;
    ``at[label]`` is the index of a labelled piece's first token."""

    def __init__(self, vocab: Any) -> None:
        self.vocab = vocab
        self.ids: list[int] = []
        self.at: dict[str, int] = {}
        self.open_id, self.close_id, self.sep_id, self.end_id = (vocab.token_id(n) for n in (OPEN, CLOSE, SEP, END_OF_MSG))

    def _mark(self, label: str | None) -> None:
        if label:
            self.at[label] = len(self.ids)

    def text(self, s: str, label: str | None = None) -> "K3":
        self._mark(label)
        self.ids += self.vocab.encode_text(s)
        return self

    def pieces(self, word: str, attrs: list[tuple[str, str]] = ()) -> list[int]:
        return [t for p in kimi_k3.tag_pieces(word, attrs) for t in self.vocab.encode_text(p)]

    def open(self, word: str, attrs: list[tuple[str, str]] = (), label: str | None = None) -> "K3":
        self._mark(label)
        self.ids += [self.open_id, *self.pieces(word, attrs), self.sep_id]
        return self

    def close(self, word: str, label: str | None = None) -> "K3":
        self._mark(label)
        self.ids += [self.close_id, *self.pieces(word), self.sep_id]
        return self

    def arg(self, key: str, json_type: str, value: str, label: str | None = None) -> "K3":
        return self.open("argument", [("key", key), ("type", json_type)], label).text(value).close("argument")

    def call(self, name: str, index: int, args: list[tuple[str, str, str]], label: str | None = None) -> "K3":
        self.open("call", [("tool", name), ("index", str(index))], label)
        for key, json_type, value in args:
            self.arg(key, json_type, value)
        return self.close("call")

    def end(self) -> "K3":
        self.close("message")
        self.ids.append(self.end_id)
        return self


def prompt(vocab: Any, block: str = "think") -> list[int]:
    """The generation prompt: ``<|open|>message role="assistant"<|sep|><|open|>BLOCK<|sep|>``."""
    return K3(vocab).open("message", [("role", "assistant")]).open(block).ids


def opening(vocab: Any, think: str = "Let me look.", response: str = "Sure.") -> K3:
    """A turn up to the end of the response block (the think block was opened by the prompt)."""
    return K3(vocab).text(think).close("think").open("response").text(response).close("response")


def feed(matcher: Any, ids: list[int], vocab: Any) -> int | None:
    """Feed ``ids``; the index of the first refused id (None if all accepted). Every id is also
    checked against the bitmask, and a refusal must leave the mask unchanged."""
    bitmask = np.zeros((1, (vocab.vocab_size + 31) // 32), dtype=np.int32)
    for i, t in enumerate(ids):
        matcher.fill_bitmask(bitmask, 0)
        allowed = bool((int(bitmask[0, t >> 5]) >> (t & 31)) & 1)
        accepted = matcher.accept_token(t)
        assert allowed == accepted, f"mask and accept_token disagree on id {t} at {i}"
        if not accepted:
            after = np.zeros_like(bitmask)
            matcher.fill_bitmask(after, 0)
            assert np.array_equal(bitmask, after), "a refused id changed the state"
            return i
    return None


@pytest.fixture(scope="module")
def compiled(kimi_k3_vocab: Any) -> Any:
    return compile_tools(TOOLS, kimi_k3_vocab, format="kimi_k3")


def validate(calls: list[dict]) -> list[dict]:
    """Every call passes the vendor-verifier rule; returns the parsed arguments."""
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    out = []
    for call in calls:
        args = json.loads(call["function"]["arguments"])
        Draft202012Validator(schemas[call["function"]["name"]]).validate(args)
        out.append(args)
    return out


# ---- goldens --------------------------------------------------------------------------------------


def test_golden_two_calls_every_value_type(compiled: Any, kimi_k3_vocab: Any) -> None:
    v = kimi_k3_vocab
    t = opening(v).open("tools").call("get_weather", 1, [
        ("city", "string", 'São Paulo "centro"\nzona <|close|>argument<|sep|> sul'),
        ("unit", "string", "celsius"),
        ("days", "number", "3"),
        ("ratio", "number", "1e2"),
        ("alerts", "boolean", "true"),
        ("note", "null", "null"),
        ("where", "object", '{"lat": -23.5, "lon": -46.6}'),
        ("tags", "array", '["rain", "東京"]'),
    ]).call("get_time", 2, [("tz", "string", "BRT")]).close("tools").end()
    m = compiled.matcher(prompt_ids=prompt(v))
    assert feed(m, t.ids, v) is None
    assert m.is_finished and m.is_accepting() and m.allowed_token_ids() == []
    calls = m.calls
    assert [(c["id"], c["function"]["name"]) for c in calls] == [("functions.get_weather:1", "get_weather"),
                                                                 ("functions.get_time:2", "get_time")]
    weather, when = validate(calls)
    assert weather["city"] == 'São Paulo "centro"\nzona <|close|>argument<|sep|> sul'
    assert weather["where"] == {"lat": -23.5, "lon": -46.6} and weather["tags"] == ["rain", "東京"]
    assert '"ratio": 1e2' in calls[0]["function"]["arguments"]  # the literal is kept as written
    assert when == {"tz": "BRT"}


def test_golden_no_call_and_response_prompt(compiled: Any, kimi_k3_vocab: Any) -> None:
    v = kimi_k3_vocab
    t = opening(v).end()
    m = compiled.matcher(prompt_ids=prompt(v))
    assert feed(m, t.ids, v) is None and m.is_finished and m.calls == []
    # thinking off: the prompt opened the response block
    t = K3(v).text("Hello.").close("response").open("tools").call("get_time", 1, [("tz", "string", "UTC")])
    m = compiled.matcher(prompt_ids=prompt(v, "response"))
    assert feed(m, t.close("tools").end().ids, v) is None
    assert validate(m.calls) == [{"tz": "UTC"}]


def test_turn_from_the_message_header(compiled: Any, kimi_k3_vocab: Any) -> None:
    """After ``<|open|>message role="assistant"<|sep|>`` the model opens think or response."""
    v = kimi_k3_vocab
    header = K3(v).open("message", [("role", "assistant")]).ids
    t = K3(v).open("response").text("Hi.").close("response").end()
    assert feed(compiled.matcher(prompt_ids=header), t.ids, v) is None
    t = K3(v).open("think").text("Hmm.").close("think").open("response").close("response").end()
    assert feed(compiled.matcher(prompt_ids=header), t.ids, v) is None
    assert feed(compiled.matcher(prompt_ids=header), K3(v).open("tools").ids, v) == 1  # not a block here


def test_stop_token_and_counter(compiled: Any, kimi_k3_vocab: Any) -> None:
    v = kimi_k3_vocab
    assert compiled.stop_token_ids == (v.token_id(END_OF_MSG),)
    m = compiled.matcher(prompt_ids=prompt(v))
    assert m.call_index == 1
    assert compiled.matcher(first_call_index=5).call_index == 5


# ---- traps ----------------------------------------------------------------------------------------


def test_text_spelling_control_tokens_stays_value_text(compiled: Any, kimi_k3_vocab: Any) -> None:
    """A value that spells ``<|close|>argument<|sep|>`` as text does not end the argument; only the
    control id does. The id itself is refused where the value cannot end (minLength 1)."""
    v = kimi_k3_vocab
    base = opening(v).open("tools").open("call", [("tool", "get_weather"), ("index", "1")])
    base.open("argument", [("key", "city"), ("type", "string")])
    m = compiled.matcher(prompt_ids=prompt(v))
    assert feed(m, base.ids, v) is None
    assert not m.accept_token(base.close_id)  # empty city: minLength 1
    for control in (base.open_id, base.sep_id, base.end_id):
        assert not m.accept_token(control)
    spelled = v.encode_text("<|close|>argument<|sep|><|close|>call<|sep|>")
    assert feed(m, spelled, v) is None
    assert m.in_tool_section and not m.calls
    assert feed(m, K3(v).close("argument").close("call").close("tools").end().ids, v) is None
    assert validate(m.calls)[0]["city"] == "<|close|>argument<|sep|><|close|>call<|sep|>"


def _odd_split(v: Any) -> list[int]:
    """``<|open|>argument key="unit"...`` with the tag word split as ``arg`` + ``ument``."""
    t = K3(v)
    return [t.open_id, *v.encode_text("arg"), *v.encode_text("ument"),
            *t.pieces("", [("key", "unit"), ("type", "string")]), t.sep_id]


TRAPS = {
    # name: (good continuation, bad continuation), after a call to get_weather opened and city written
    "wrong_type": (lambda v: K3(v).arg("unit", "string", "celsius").ids,
                   lambda v: K3(v).arg("unit", "number", "1").ids),
    "unknown_key": (lambda v: K3(v).arg("unit", "string", "celsius").ids,
                    lambda v: K3(v).arg("units", "string", "celsius").ids),
    "bad_literal": (lambda v: K3(v).arg("days", "number", "3").ids,
                    lambda v: K3(v).arg("days", "number", "three").ids),
    "out_of_range": (lambda v: K3(v).arg("days", "number", "3").ids,
                     lambda v: K3(v).arg("days", "number", "30").ids),
    "bad_enum": (lambda v: K3(v).arg("unit", "string", "celsius").ids,
                 lambda v: K3(v).arg("unit", "string", "kelvin").ids),
    "bad_boolean": (lambda v: K3(v).arg("alerts", "boolean", "true").ids,
                    lambda v: K3(v).arg("alerts", "boolean", "yes").ids),
    "nested_schema": (lambda v: K3(v).arg("where", "object", '{"lat": 1, "lon": 2}').ids,
                      lambda v: K3(v).arg("where", "object", '{"lat": 1}').ids),
    "odd_split": (lambda v: K3(v).open("argument", [("key", "unit"), ("type", "string")]).ids, _odd_split),
    "index_zero": (lambda v: K3(v).close("call").open("call", [("tool", "get_time"), ("index", "2")]).ids,
                   lambda v: K3(v).close("call").open("call", [("tool", "get_time"), ("index", "0")]).ids),
    "index_repeats": (lambda v: K3(v).close("call").open("call", [("tool", "get_time"), ("index", "2")]).ids,
                      lambda v: K3(v).close("call").open("call", [("tool", "get_time"), ("index", "1")]).ids),
    "undeclared_tool": (lambda v: K3(v).close("call").open("call", [("tool", "get_time"), ("index", "2")]).ids,
                        lambda v: K3(v).close("call").open("call", [("tool", "get_timezone"), ("index", "2")]).ids),
}


@pytest.mark.parametrize("trap", sorted(TRAPS))
def test_traps_refused_at_the_token(trap: str, compiled: Any, kimi_k3_vocab: Any) -> None:
    """The good continuation is accepted; the bad one is accepted up to the first token where it
    differs from the good one and refused exactly there."""
    v = kimi_k3_vocab
    base = opening(v).open("tools").open("call", [("tool", "get_weather"), ("index", "1")]).arg("city", "string", "Oslo")
    good, bad = (build(v) for build in TRAPS[trap])
    assert feed(compiled.matcher(prompt_ids=prompt(v)), base.ids + good, v) is None
    k = next(i for i, (a, b) in enumerate(zip(good + [-1], bad)) if a != b)
    m = compiled.matcher(prompt_ids=prompt(v))
    assert feed(m, base.ids, v) is None
    assert feed(m, bad, v) == k, f"{trap}: refused at the wrong token"


def test_missing_required_key_and_order(compiled: Any, kimi_k3_vocab: Any) -> None:
    v = kimi_k3_vocab
    t = opening(v).open("tools").open("call", [("tool", "get_weather"), ("index", "1")])
    m = compiled.matcher(prompt_ids=prompt(v))
    assert feed(m, t.ids, v) is None
    assert not m.accept_token(t.close_id)  # city is required
    assert set(m.allowed_token_ids()) == {t.open_id}
    # keys in declared order: after "unit", "city" cannot come back
    t2 = K3(v).arg("city", "string", "Oslo").arg("unit", "string", "celsius")
    assert feed(m, t2.ids, v) is None
    again = K3(v).arg("city", "string", "Rome").ids
    assert feed(m, again, v) is not None
    unit_again = K3(v).arg("unit", "string", "celsius").ids
    assert feed(m, unit_again, v) is not None  # no key twice


def test_any_order_spec(kimi_k3_vocab: Any) -> None:
    v = kimi_k3_vocab
    compiled = compile_tools(TOOLS, v, format=kimi_k3.spec(any_order=True))
    t = opening(v).open("tools").call("get_weather", 1, [("unit", "string", "celsius"), ("city", "string", "Oslo")])
    m = compiled.matcher(prompt_ids=prompt(v))
    assert feed(m, t.close("tools").end().ids, v) is None
    assert validate(m.calls) == [{"unit": "celsius", "city": "Oslo"}]
    dup = opening(v).open("tools").open("call", [("tool", "get_weather"), ("index", "1")]) \
        .arg("city", "string", "Oslo").arg("city", "string", "Rome")
    assert feed(compiled.matcher(prompt_ids=prompt(v)), dup.ids, v) is not None


def test_nothing_after_end_of_message(compiled: Any, kimi_k3_vocab: Any) -> None:
    v = kimi_k3_vocab
    m = compiled.matcher(prompt_ids=prompt(v))
    assert feed(m, opening(v).end().ids, v) is None
    for t in (v.token_id(OPEN), v.token_id(END_OF_MSG), *v.encode_text("more")):
        assert not m.accept_token(t)
    assert m.error is None and m.is_finished


def test_json_argument_block_when_asked(kimi_k3_vocab: Any) -> None:
    v = kimi_k3_vocab
    compiled = compile_tools(TOOLS, v, format="kimi_k3_json")
    t = opening(v).open("tools").open("call", [("tool", "get_time"), ("index", "1")])
    t.open("json", [("type", "object")]).text('{"tz": "UTC"}').close("json").close("call").close("tools").end()
    m = compiled.matcher(prompt_ids=prompt(v))
    assert feed(m, t.ids, v) is None
    assert m.calls[0]["function"]["arguments"] == '{"tz": "UTC"}'
    bad = opening(v).open("tools").open("call", [("tool", "get_time"), ("index", "1")])
    bad.open("json", [("type", "object")]).text('{"tz": "utc"}')
    assert feed(compiled.matcher(prompt_ids=prompt(v)), bad.ids, v) is not None
    # the split form is not accepted by the JSON variant
    split = opening(v).open("tools").open("call", [("tool", "get_time"), ("index", "1")]).arg("tz", "string", "UTC")
    assert feed(compile_tools(TOOLS, v, format="kimi_k3_json").matcher(prompt_ids=prompt(v)), split.ids, v) is not None


# ---- tool_choice and parallel calls --------------------------------------------------------------


def test_tool_choice_modes(kimi_k3_vocab: Any) -> None:
    v = kimi_k3_vocab
    call = K3(v).open("tools").call("get_time", 1, [("tz", "string", "UTC")]).close("tools").end().ids
    tail_none = K3(v).end().ids
    for choice, with_call, without in (("auto", True, True), ("none", False, True), ("required", True, False),
                                       ({"type": "function", "function": {"name": "get_time"}}, True, False)):
        compiled = compile_tools(TOOLS, v, format="kimi_k3", tool_choice=choice)
        head = opening(v).ids
        m = compiled.matcher(prompt_ids=prompt(v))
        assert feed(m, head, v) is None
        assert (feed(m, call, v) is None) == with_call, choice
        m = compiled.matcher(prompt_ids=prompt(v))
        feed(m, head, v)
        assert (feed(m, tail_none, v) is None) == without, choice
    named = compile_tools(TOOLS, v, format="kimi_k3", tool_choice={"type": "function", "function": {"name": "get_time"}})
    m = named.matcher(prompt_ids=prompt(v))
    wrong = opening(v).open("tools").open("call", [("tool", "get_weather"), ("index", "1")]).ids
    assert feed(m, wrong, v) is not None


def test_parallel_off_allows_one_call(kimi_k3_vocab: Any) -> None:
    v = kimi_k3_vocab
    compiled = compile_tools(TOOLS, v, format="kimi_k3", parallel_tool_calls=False)
    t = opening(v).open("tools").call("get_time", 1, [("tz", "string", "UTC")])
    m = compiled.matcher(prompt_ids=prompt(v))
    assert feed(m, t.ids, v) is None
    assert not m.accept_token(t.open_id)
    assert feed(m, K3(v).close("tools").end().ids, v) is None


def test_no_thinking_when_a_call_is_forced(kimi_k3_vocab: Any) -> None:
    v = kimi_k3_vocab
    compiled = compile_tools(TOOLS, v, format="kimi_k3", tool_choice="required", allow_thinking=False)
    header = K3(v).open("message", [("role", "assistant")]).ids
    assert feed(compiled.matcher(prompt_ids=header), K3(v).open("think").ids, v) is not None
    assert feed(compiled.matcher(prompt_ids=header), K3(v).open("response").ids, v) is None


def test_rollback_restores_state_and_calls(compiled: Any, kimi_k3_vocab: Any) -> None:
    v = kimi_k3_vocab
    t = opening(v).open("tools").call("get_time", 1, [("tz", "string", "UTC")])
    m = compiled.matcher(prompt_ids=prompt(v))
    assert feed(m, t.ids, v) is None and len(m.calls) == 1
    before = m.allowed_token_ids()
    m.rollback(3)
    assert m.calls == []
    assert feed(m, t.ids[-3:], v) is None
    assert m.allowed_token_ids() == before and len(m.calls) == 1


# ---- declarations that cannot be split -------------------------------------------------------------


@pytest.mark.parametrize("params,keyword", [
    ({"type": "object", "properties": {"a": {"type": "string"}}, "minProperties": 1}, "minProperties"),
    ({"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
      "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}, "anyOf"),
    ({"type": "object", "patternProperties": {"^x": {"type": "string"}}}, "patternProperties"),
])
def test_unsplittable_schema_names_keyword(params: dict, keyword: str, kimi_k3_vocab: Any) -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_tools([tool("f", params)], kimi_k3_vocab, format="kimi_k3")
    assert info.value.keyword == keyword
    assert info.value.pointer.startswith("/tools/0/function/parameters")
    # the JSON block variant takes what the JSON compiler takes
    if keyword == "anyOf":
        compile_tools([tool("f", params)], kimi_k3_vocab, format="kimi_k3_json")


def test_undeclared_keys_where_allowed(kimi_k3_vocab: Any) -> None:
    """Undeclared keys follow the JSON policy (strict closes objects that declare properties
    unless additionalProperties says otherwise): free key text, escaped, never a declared name,
    after the declared keys in declared order, value and type under additionalProperties."""
    v = kimi_k3_vocab
    closed = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert compile_tools([tool("f", closed)], v, format="kimi_k3").arguments[0].extra is None
    assert compile_tools([tool("f", closed)], v, format="kimi_k3", strict=False).arguments[0].extra is not None
    params = {**closed, "additionalProperties": {"type": "integer"}}
    compiled = compile_tools([tool("f", params)], v, format="kimi_k3")
    head = opening(v).open("tools").open("call", [("tool", "f"), ("index", "1")])
    good = K3(v).arg("a", "string", "x").arg('say "hi" & go', "number", "7").arg("zz", "number", "-1")
    m = compiled.matcher(prompt_ids=prompt(v))
    assert feed(m, head.ids + good.close("call").close("tools").end().ids, v) is None
    assert json.loads(m.calls[0]["function"]["arguments"]) == {"a": "x", 'say "hi" & go': 7, "zz": -1}
    for bad in (K3(v).arg("zz", "string", "x"),  # type outside additionalProperties
                K3(v).arg("zz", "number", "1.5"),  # value outside it
                K3(v).arg("zz", "number", "1").arg("a", "string", "x"),  # declared key after an undeclared one
                "unescaped"):
        ids = bad.ids if isinstance(bad, K3) else [head.open_id] + [t for p in ("argument", " key", '="', 'q"x"', " type",
                                                                            '="', "number", '"') for t in v.encode_text(p)]
        start = len(head.ids)
        m = compiled.matcher(prompt_ids=prompt(v))
        refused = feed(m, head.ids + ids, v)
        assert refused is not None and refused >= start
    # the declared name cannot come through the free path: its tokens are the declared option's
    any_order = compile_tools([tool("f", params)], v, format=kimi_k3.spec(any_order=True))
    m = any_order.matcher(prompt_ids=prompt(v))
    twice = K3(v).arg("a", "string", "x").arg("a", "string", "y")
    assert feed(m, head.ids + twice.ids, v) is not None


def test_top_level_ref_and_all_of_are_split(kimi_k3_vocab: Any) -> None:
    """A top-level ``$ref`` (pydantic writes one) is followed, and ``allOf`` merged, before the
    split: the arguments are the referenced object's keys."""
    v = kimi_k3_vocab
    params = {"$ref": "#/$defs/Args", "$defs": {"Args": {"type": "object", "properties": {"a": {"type": "string"}},
                                                         "required": ["a"]}},
              "allOf": [{"properties": {"n": {"type": "integer"}}}]}
    compiled = compile_tools([tool("f", params)], v, format="kimi_k3", strict=False)
    head = opening(v).open("tools").open("call", [("tool", "f"), ("index", "1")])
    m = compiled.matcher(prompt_ids=prompt(v))
    good = K3(v).arg("a", "string", "x").arg("n", "number", "3")
    assert feed(m, head.ids + good.close("call").close("tools").end().ids, v) is None
    assert json.loads(m.calls[0]["function"]["arguments"]) == {"a": "x", "n": 3}
    m = compiled.matcher(prompt_ids=prompt(v))
    assert feed(m, head.ids + K3(v).arg("n", "number", "3").close("call").ids, v) is not None  # a is required


def test_required_key_without_a_value(kimi_k3_vocab: Any) -> None:
    params = {"type": "object", "properties": {"a": False}, "required": ["a"]}
    with pytest.raises(InvalidSchemaError, match="required property 'a'") as info:
        compile_tools([tool("f", params)], kimi_k3_vocab, format="kimi_k3")
    assert info.value.pointer == "/tools/0/function/parameters/properties/a"


def test_escaped_attribute_values(kimi_k3_vocab: Any) -> None:
    v = kimi_k3_vocab
    params = {"type": "object", "properties": {'say "hi" & go': {"type": "string"}}, "required": ['say "hi" & go']}
    compiled = compile_tools([tool("a&b", params)], v, format="kimi_k3")
    t = opening(v).open("tools").call("a&b", 1, [('say "hi" & go', "string", "x")]).close("tools").end()
    assert b"a&amp;b" in v.decode_bytes(t.ids) and b"say &quot;hi&quot; &amp; go" in v.decode_bytes(t.ids)
    m = compiled.matcher(prompt_ids=prompt(v))
    assert feed(m, t.ids, v) is None
    assert m.calls[0]["function"]["name"] == "a&b"
    assert json.loads(m.calls[0]["function"]["arguments"]) == {'say "hi" & go': "x"}


def test_vocabulary_without_a_tokenizer_is_refused_at_compile(kimi_k3_vocab: Any, tmp_path: Any) -> None:
    """K3 tag text is forced in the tokenizer's own tokenization: a vocabulary loaded from disk
    (no tokenizer to encode with) is refused when compiling, never while decoding."""
    from enforcer import Vocabulary
    from enforcer.errors import TokenizerError

    from enforcer.tools import clear_cache

    kimi_k3_vocab.save(tmp_path / "vocab.bin")
    loaded = Vocabulary.load(tmp_path / "vocab.bin")
    clear_cache()  # compiled tools are cached by fingerprint: a hit would reuse the encoder
    with pytest.raises(TokenizerError, match="encode"):
        compile_tools(TOOLS, loaded, format="kimi_k3")


def test_compile_builds_every_argument_values_nfa(kimi_k3_vocab: Any) -> None:
    """Each key's value automata have their NFA when the compile returns (built warm, not cold
    when a call first writes the key mid-stream); their states are still built lazily."""
    enforcer.clear_cache()
    tools = compile_tools(TOOLS, kimi_k3_vocab, format="kimi_k3")
    values = [value.dfa for split in tools.arguments if split is not None
              for key in (*split.keys, *([split.extra] if split.extra else [])) for value in key.values]
    assert values and all(dfa.nfa_built and dfa.num_states == 1 for dfa in values)
