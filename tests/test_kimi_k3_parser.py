"""Kimi K3 ("XTML") in parse_tool_calls, StreamingToolCallParser, encode_chat and
render_tool_declaration, on real ids from the K3-shaped tokenizer (fast and tiktoken): text
pieces are encoded with ``Vocabulary.encode_text`` (so text that spells a control token stays
text), control ids are inserted by name."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from enforcer.declarations import encode_chat, render_tool_declaration
from enforcer.errors import InvalidToolsError
from enforcer.formats import kimi_k3 as k3
from enforcer.parser import StreamingToolCallParser, merge_deltas, parse_tool_calls
from enforcer.testing.tokenizers import kimi_k3_tokenizer
from enforcer.vocabulary import Vocabulary

OPEN, CLOSE, SEP, END = k3.OPEN, k3.CLOSE, k3.SEP, k3.END_OF_MSG


@pytest.fixture(scope="module", params=["fast", "tiktoken"])
def vocab(request) -> Vocabulary:
    return Vocabulary.from_tokenizer(kimi_k3_tokenizer(request.param))


class Bytes(str):
    """Text encoded one byte per token, so every multi-byte character is split across tokens."""


def control_ids(vocab) -> dict[str, int]:
    return {name: vocab.token_id(name) for name in k3.CONTROL_TOKENS}


def turn(vocab, *pieces: str) -> list[int]:
    """Control-token names become their ids; other strings are encoded as text."""
    controls = control_ids(vocab)
    single = {b[0]: i for i, b in enumerate(vocab.byte_tokens) if b is not None and len(b) == 1}
    ids: list[int] = []
    for piece in pieces:
        if isinstance(piece, Bytes):
            ids += [single[b] for b in piece.encode()]
        elif piece in controls:
            ids.append(controls[piece])
        else:
            encoded = vocab.encode_text(piece)
            assert not set(encoded) & set(controls.values()), f"{piece!r} produced a control id"
            ids += encoded
    return ids


def segments(vocab, ids: list[int]) -> list[str]:
    """Ids as control-token names and the decoded text between them (tokenization-independent)."""
    names = {i: name for name, i in control_ids(vocab).items()}
    out: list[str] = []
    text = bytearray()
    for token_id in ids:
        if token_id in names:
            if text:
                out.append(text.decode())
                text.clear()
            out.append(names[token_id])
        else:
            text += vocab.token_bytes(token_id)
    return out + ([text.decode()] if text else [])


def tag(text: str) -> tuple[str, ...]:
    return (OPEN, text, SEP)


def end(name: str) -> tuple[str, ...]:
    return (CLOSE, name, SEP)


def argument(key: str, json_type: str, value: str) -> tuple[str, ...]:
    return (*tag(k3.tag_text("argument", [("key", key), ("type", json_type)])), value, *end("argument"))


def call(name: str, index: int, *body: str) -> tuple[str, ...]:
    return (*tag(k3.tag_text("call", [("tool", name), ("index", str(index))])), *body, *end("call"))


def stream(vocab, ids: list[int], **kwargs):
    parser = StreamingToolCallParser(vocab, "kimi_k3", **kwargs)
    deltas = [d for token_id in ids for d in parser.feed(token_id)]
    return deltas + parser.finish()


def both(vocab, ids: list[int], **kwargs) -> dict:
    """The batch result, checked against the one streamed token by token."""
    batch = parse_tool_calls(ids, vocab, "kimi_k3", **kwargs)
    assert merge_deltas(stream(vocab, ids, **kwargs)) == batch
    return batch


def expected(name: str, index: int, arguments: str) -> dict:
    return {"id": f"functions.{name}:{index}", "type": "function", "function": {"name": name, "arguments": arguments}}


WEATHER_ARGUMENTS = [
    ("city", "string", 'São "Paulo"\nline 2 🌆'),
    ("days", "number", "1e2"),
    ("metric", "boolean", "true"),
    ("station", "null", "null"),
]
SEARCH_ARGUMENTS = [
    ("filters", "object", '{"lang": "日本語", "n": 3}'),
    ("tags", "array", '["a", 1.50, false]'),
    ("query", "string", "tab\there \\ back"),
]


def golden(vocab, *, prefix: tuple[str, ...] = ()) -> list[int]:
    return turn(
        vocab,
        *prefix,
        "The user wants weather; ünïcode ok.", *end("think"),
        *tag("response"), "Checking two things.", *end("response"),
        *tag("tools"),
        *call("get_weather", 1, *(p for a in WEATHER_ARGUMENTS for p in argument(*a))),
        *call("search", 2, *(p for a in SEARCH_ARGUMENTS for p in argument(*a))),
        *end("tools"), *end("message"), END,
    )


GOLDEN = {
    "content": "Checking two things.",
    "reasoning_content": "The user wants weather; ünïcode ok.",
    "tool_calls": [
        expected(
            "get_weather", 1,
            '{"city": "São \\"Paulo\\"\\nline 2 🌆", "days": 1e2, "metric": true, "station": null}',
        ),
        expected(
            "search", 2,
            '{"filters": {"lang": "日本語", "n": 3}, "tags": ["a", 1.50, false], "query": "tab\\there \\\\ back"}',
        ),
    ],
    "incomplete_tool_call": None,
}


# ------------------------------------------------------------------------------------------
# Batch and streaming results


def test_golden_turn(vocab):
    result = both(vocab, golden(vocab), in_reasoning=True)
    assert result == GOLDEN
    # the arguments are exactly kimi_k3.arguments_json of the generated values, and valid JSON
    arguments = [c["function"]["arguments"] for c in result["tool_calls"]]
    assert arguments == [k3.arguments_json(WEATHER_ARGUMENTS), k3.arguments_json(SEARCH_ARGUMENTS)]
    assert json.loads(arguments[0])["city"] == 'São "Paulo"\nline 2 🌆'
    assert json.loads(arguments[1])["tags"] == ["a", 1.5, False]


def test_turn_may_start_at_its_first_open(vocab):
    """A generated ``<|open|>think<|sep|>`` (or the whole message tag) reads like the prefill."""
    assert both(vocab, golden(vocab, prefix=tag("think"))) == GOLDEN
    opened = (*tag('message role="assistant"'), *tag("think"))
    assert both(vocab, golden(vocab, prefix=opened), in_reasoning=True) == GOLDEN


def test_response_prefill_and_text_outside_blocks(vocab):
    ids = turn(vocab, "Hello", *end("response"), "\n", *end("message"), END)
    assert both(vocab, ids) == {"content": "Hello\n", "reasoning_content": None, "tool_calls": [], "incomplete_tool_call": None}
    # in_reasoning=True: the text up to the think close is reasoning
    ids = turn(vocab, "Hmm", *end("think"), *tag("response"), "Hi", *end("response"), END)
    assert both(vocab, ids, in_reasoning=True) == {"content": "Hi", "reasoning_content": "Hmm", "tool_calls": [], "incomplete_tool_call": None}


def test_text_that_spells_control_tokens_stays_text(vocab):
    spelled_close = "a <|close|>argument<|sep|> b"
    spelled_section = "<|open|>tools<|sep|><|open|>call tool=\"x\" index=\"1\"<|sep|>"
    ids = turn(
        vocab, spelled_section, *end("response"), *tag("tools"),
        *call("echo", 1, *argument("text", "string", spelled_close)), *end("tools"), END,
    )
    result = both(vocab, ids)
    assert result["content"] == spelled_section
    assert json.loads(result["tool_calls"][0]["function"]["arguments"]) == {"text": spelled_close}


def test_attribute_values_are_unescaped(vocab):
    # tag_text escapes: the tokens carry &quot; and &amp;
    text = k3.tag_text("argument", [("key", 'a"b&c &quot;'), ("type", "string")])
    assert "&quot;" in text and "&amp;" in text
    ids = turn(
        vocab, *end("response"), *tag("tools"),
        *tag('call tool="do&amp;undo" index="1"'), *tag(text), "v", *end("argument"), *end("call"),
        *end("tools"), END,
    )
    [only] = both(vocab, ids)["tool_calls"]
    assert only["function"]["name"] == "do&undo"
    assert only["id"] == "functions.do&undo:1"
    assert json.loads(only["function"]["arguments"]) == {'a"b&c &quot;': "v"}


def test_json_fallback_form(vocab):
    ids = turn(
        vocab, *end("response"), *tag("tools"),
        *call("raw", 1, *tag('json type="object"'), "  not {json} at all\n", *end("json")),
        *call("empty", 2),
        *end("tools"), END,
    )
    assert both(vocab, ids)["tool_calls"] == [expected("raw", 1, "not {json} at all"), expected("empty", 2, "{}")]


def test_ids_after_end_of_msg_are_ignored(vocab):
    tail = ("more text", *tag("tools"), *call("late", 1), *tag("think"), "x")
    ids = golden(vocab) + turn(vocab, *tail)
    assert both(vocab, ids, in_reasoning=True) == GOLDEN
    parser = StreamingToolCallParser(vocab, "kimi_k3", in_reasoning=True)
    parser.feed_many(golden(vocab))
    assert parser.is_finished
    assert parser.feed_many(turn(vocab, *tail)) == []


def test_malformed_structure_is_dropped_not_raised(vocab):
    ids = turn(
        vocab,
        "A", *tag("unknown x=1"), "dropped", *end("unknown"), "B",  # unreadable tag: its text dropped
        *end("nothing-open"), "C",  # a close that matches nothing is ignored
        *end("response"),
        *call("no_tools_wrapper", 7,  # a call outside tools opens the section implicitly
             *argument("bad", "decimal", "1"),  # unknown type: argument ignored
             *argument("empty", "number", " "),  # empty literal: argument ignored
             *argument("n", "number", " 5"),
             *tag('json type="object"'), "ignored after arguments", *end("json")),
        *tag('call index="2"'), *argument("x", "string", "no tool name"), *end("call"),
        *call("unclosed", 3, *tag('argument key="s" type="string"'), "abc"),  # the call close ends the argument
        *end("tools"), END,
    )
    assert both(vocab, ids) == {
        "content": "ABC",
        "reasoning_content": None,
        "tool_calls": [expected("no_tools_wrapper", 7, '{"n": 5}'), expected("unclosed", 3, '{"s": "abc"}')],
        "incomplete_tool_call": None,
    }


def test_cut_off_call_is_incomplete_with_what_was_generated(vocab):
    ids = turn(vocab, *end("response"), *tag("tools"), *tag('call tool="f" index="1"'),
               *argument("a", "number", "1"), *tag('argument key="b" type="string"'), "Par")
    result = both(vocab, ids)
    assert result["tool_calls"] == [] and result["incomplete_tool_call"] == expected("f", 1, '{"a": 1, "b": "Par')
    closed = both(vocab, ids + turn(vocab, *end("call"), *tag('call tool="g" index="2"')))
    assert closed["tool_calls"] == [expected("f", 1, '{"a": 1, "b": "Par"}')]
    assert closed["incomplete_tool_call"] == expected("g", 2, "")


def test_every_prefix_parses_and_streams_alike(vocab):
    ids = golden(vocab)
    for cut in range(len(ids) + 1):
        result = both(vocab, ids[:cut], in_reasoning=True)
        assert len(result["tool_calls"]) <= 2
    assert result == GOLDEN


def test_streaming_is_incremental(vocab):
    """The call header comes at the call tag's <|sep|>, string fragments before the value closes."""
    head = turn(vocab, *end("response"), *tag("tools"), *tag('call tool="f" index="1"'))
    value = turn(vocab, *tag('argument key="q" type="string"'), "hello world and more")
    parser = StreamingToolCallParser(vocab, "kimi_k3")
    header = parser.feed_many(head)
    assert [d.tool_call for d in header] == [
        {"index": 0, "id": "functions.f:1", "type": "function", "function": {"name": "f", "arguments": ""}}
    ]
    fragments = "".join(d.tool_call["function"]["arguments"] for d in parser.feed_many(value))
    assert fragments == '{"q": "hello world and more'
    rest = parser.feed_many(turn(vocab, *end("argument"), *end("call")))
    assert "".join(d.tool_call["function"]["arguments"] for d in rest) == '"}'


def test_split_characters_never_stream_half(vocab):
    text = Bytes('é🌆"\n')
    ids = turn(vocab, Bytes("ü"), *end("response"), *tag("tools"), *tag('call tool="f" index="1"'),
               *tag('argument key="k" type="string"'), text, *end("argument"),
               *tag('argument key="o" type="object"'), Bytes('{"日": 1}'), *end("argument"), *end("call"), END)
    deltas = stream(vocab, ids)
    pieces = [d.content or d.reasoning_content or d.tool_call["function"]["arguments"] for d in deltas]
    assert all("\ufffd" not in piece for piece in pieces)
    result = both(vocab, ids)
    assert result["content"] == "ü"
    assert json.loads(result["tool_calls"][0]["function"]["arguments"]) == {"k": 'é🌆"\n', "o": {"日": 1}}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from([
    OPEN, CLOSE, SEP, END, "think", "response", "tools", "call", "argument", "json", "message",
    ' tool="f"', ' index="2"', ' key="k"', ' type="string"', ' type="number"', ' type="object"',
    "x", " 1e2 ", '"', "é", Bytes("🌆"),
]), max_size=60))
def test_random_ids_never_raise_and_stream_alike(vocab, pieces):
    ids = turn(vocab, *pieces)
    for in_reasoning in (False, True):
        result = both(vocab, ids, in_reasoning=in_reasoning)
        assert set(result) == {"content", "reasoning_content", "tool_calls", "incomplete_tool_call"}


def test_unknown_format_lists_kimi_k3(vocab):
    with pytest.raises(ValueError, match="kimi_k3"):
        parse_tool_calls([], vocab, "kimi_k9")


# ------------------------------------------------------------------------------------------
# encode_chat and the declaration

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "城市"}}},
    },
}

ASSISTANT = {
    "role": "assistant",
    "reasoning_content": "Two calls needed.",
    "content": "On it <|close|>response<|sep|>.",
    "tool_calls": [
        {"id": "call_a", "type": "function", "function": {
            "name": "get_weather",
            "arguments": json.dumps({
                "city": 'Zürich "HB"\n<|close|>argument<|sep|>', "days": 1e2, "ok": False, "none": None,
                "nested": {"a": [1, {"b": "ß"}]}, "list": [], "amp": "&quot; &amp;",
            }, ensure_ascii=False),
        }},
        {"id": "call_b", "type": "function", "function": {"name": "raw_tool", "arguments": "[1, 2, 3]"}},
        {"id": "call_c", "type": "function", "function": {"name": "no_args", "arguments": "{}"}},
    ],
}


def test_encode_chat_round_trips_through_the_parser(vocab):
    history = [{"role": "user", "content": "Weather? <|open|>tools<|sep|>"}]
    prompt = encode_chat(history, vocab, tools=[WEATHER_TOOL])
    full = encode_chat([*history, ASSISTANT], vocab, tools=[WEATHER_TOOL], add_generation_prompt=False)
    assert full[: len(prompt)] == prompt  # the generation prompt is the rendered message's start
    result = both(vocab, full[len(prompt):], in_reasoning=True)
    assert result["reasoning_content"] == ASSISTANT["reasoning_content"]
    assert result["content"] == ASSISTANT["content"]
    assert [c["function"]["name"] for c in result["tool_calls"]] == ["get_weather", "raw_tool", "no_args"]
    assert [c["id"] for c in result["tool_calls"]] == [
        "functions.get_weather:1", "functions.raw_tool:2", "functions.no_args:3"]
    for got, original in zip(result["tool_calls"], ASSISTANT["tool_calls"]):
        assert json.loads(got["function"]["arguments"]) == json.loads(original["function"]["arguments"])
    # user text that spells control tokens stays text: one message holds exactly its own controls
    controls = control_ids(vocab)
    assert prompt.count(controls[END]) == 2 and prompt.count(controls[CLOSE]) == 2


def test_encode_chat_layout(vocab):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "x1", "function": {"name": "f", "arguments": '{"a": "1"}'}},
            {"id": "x2", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "x2", "content": "G"},  # out of call order: re-sorted
        {"role": "tool", "tool_call_id": "x1", "content": "F"},
    ]
    expected_pieces = [
        *tag('message role="system"'), "Be brief.", *end("message"), END,
        *tag('message role="user"'), "Hi", *end("message"), END,
        *tag('message role="assistant"'), *tag("response"), *end("response"), *tag("tools"),
        *call("f", 1, *argument("a", "string", "1")), *call("g", 2), *end("tools"), *end("message"), END,
        *tag('message role="tool" tool="f" index="1"'), "F", *end("message"), END,
        *tag('message role="tool" tool="g" index="2"'), "G", *end("message"), END,
        *tag('message role="assistant"'), *tag("response"),
    ]
    ids = encode_chat(messages, vocab, thinking=False)
    assert segments(vocab, ids) == segments(vocab, turn(vocab, *expected_pieces))
    # tag text is encoded piece by piece: ' role' and '="' are their own tokens
    assert ids[1:1 + len(vocab.encode_text("message"))] == vocab.encode_text("message")
    pieces = k3.tag_pieces("message", [("role", "system")])
    assert ids[1: ids.index(control_ids(vocab)[SEP])] == [i for p in pieces for i in vocab.encode_text(p)]


def test_encode_chat_declares_tools_first(vocab):
    ids = encode_chat([{"role": "user", "content": "q"}], vocab, tools=[WEATHER_TOOL], add_generation_prompt=False)
    body = render_tool_declaration([WEATHER_TOOL], format="kimi_k3")
    first = ids[: ids.index(control_ids(vocab)[END]) + 1]
    assert segments(vocab, first) == [
        OPEN, 'message role="system" type="tool-declare"', SEP, body, CLOSE, "message", SEP, END]


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([{"role": "tool", "tool_call_id": "nope", "content": "x"}], r"messages\[0\] \(tool\): tool_call_id 'nope'"),
        ([{"role": "wizard", "content": "x"}], r"messages\[0\] must be an object with role"),
        ([{"role": "user", "content": [{"type": "image_url"}]}], r"messages\[0\] \(user\)"),
        ([{"role": "assistant", "tool_calls": [{"function": {}}]}], r"messages\[0\] \(assistant\): tool_calls\[0\]"),
        ([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 3}}]}], r"messages\[0\]"),
    ],
)
def test_encode_chat_names_bad_messages(vocab, messages, message):
    with pytest.raises(InvalidToolsError, match=message):
        encode_chat(messages, vocab)


def test_encode_chat_rejects_other_formats(vocab):
    with pytest.raises(ValueError, match="kimi_k2"):
        encode_chat([], vocab, format="kimi_k2")


def test_render_tool_declaration_layout():
    tools = [WEATHER_TOOL, {"type": "function", "function": {"name": "now"}}]
    text = render_tool_declaration(tools, format="kimi_k3")
    compact = json.dumps(tools, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    assert text == f"# Tools\n\nYou may call the following functions.\n\n```json\n{compact}\n```"
    assert "城市" in text and '"description":"Weather for a city.","name":"get_weather"' in text
    assert render_tool_declaration(tools) == compact  # K2 unchanged
    with pytest.raises(ValueError, match="typescript"):
        render_tool_declaration(tools, style="typescript", format="kimi_k3")
    with pytest.raises(ValueError, match="kimi_k9"):
        render_tool_declaration(tools, format="kimi_k9")
