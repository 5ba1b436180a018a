"""parse_tool_calls and StreamingToolCallParser on real token sequences from the Kimi-shaped
tokenizer: text pieces are encoded, marker ids are inserted explicitly by name."""

from __future__ import annotations

import functools
import json

import numpy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from enforcer.formats import kimi_k2 as k2
from enforcer.parser import Delta, StreamingToolCallParser, merge_deltas, parse_tool_calls

MARKERS = (
    k2.SECTION_BEGIN,
    k2.SECTION_END,
    k2.CALL_BEGIN,
    k2.ARGUMENT_BEGIN,
    k2.CALL_END,
    k2.THINK_BEGIN,
    k2.THINK_END,
    k2.IM_END,
)


class Spelled(str):
    """Text that spells a marker: encoded in pieces so that it stays ordinary text tokens."""


class Bytes(str):
    """Text encoded one byte per token, so every multi-byte character is split across tokens."""


@functools.lru_cache(maxsize=None)
def marker_ids(vocab) -> frozenset[int]:
    return frozenset(vocab.token_id(name) for name in MARKERS)


@functools.lru_cache(maxsize=None)
def single_byte_ids(vocab) -> dict[int, int]:
    """byte value -> id of its single-byte token (byte-level BPE has all 256)."""
    return {b[0]: i for i, b in enumerate(vocab.byte_tokens) if b is not None and len(b) == 1}


def byte_ids(vocab, data: bytes) -> list[int]:
    """One token per byte: every multi-byte character is split across tokens."""
    single = single_byte_ids(vocab)
    return [single[b] for b in data]


def encode_text(tok, vocab, text: str) -> list[int]:
    ids = tok.encode(text, add_special_tokens=False)
    assert not marker_ids(vocab) & set(ids), f"{text!r} produced a marker id"
    assert vocab.decode_bytes(ids) == text.encode()
    return ids


def spelled_ids(tok, vocab, text: str) -> list[int]:
    """Encode ``text`` split after every ``<`` and before every ``|``: no piece holds a marker."""
    pieces = text.replace("<", "<\0").replace("|", "\0|").split("\0")
    ids = [i for piece in pieces if piece for i in tok.encode(piece, add_special_tokens=False)]
    assert all(vocab.token_bytes(i) is not None for i in ids)
    assert vocab.decode_bytes(ids) == text.encode()
    return ids


def turn(tok, vocab, *pieces: str) -> list[int]:
    """Marker names become their ids; other strings are encoded as text."""
    ids: list[int] = []
    for piece in pieces:
        if isinstance(piece, Spelled):
            ids += spelled_ids(tok, vocab, piece)
        elif isinstance(piece, Bytes):
            ids += byte_ids(vocab, piece.encode())
        elif piece in MARKERS:
            ids.append(vocab.token_id(piece))
        else:
            ids += encode_text(tok, vocab, piece)
    return ids


def call(name_id: str, arguments: str) -> tuple[str, ...]:
    return (k2.CALL_BEGIN, name_id, k2.ARGUMENT_BEGIN, arguments, k2.CALL_END)


def expected_call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def stream(vocab, ids: list[int], **kwargs) -> list[Delta]:
    parser = StreamingToolCallParser(vocab, **kwargs)
    deltas = [d for token_id in ids for d in parser.feed(token_id)]
    return deltas + parser.finish()


def both(vocab, ids: list[int], **kwargs) -> dict:
    """The batch result, checked against the streamed one."""
    batch = parse_tool_calls(ids, vocab, **kwargs)
    assert merge_deltas(stream(vocab, ids, **kwargs)) == batch
    return batch


# ------------------------------------------------------------------------------------------
# Batch parsing


def test_single_call(kimi_tokenizer, kimi_vocab):
    ids = turn(
        kimi_tokenizer, kimi_vocab,
        "Let me check.", k2.SECTION_BEGIN,
        *call("functions.get_weather:0", '{"city": "Paris"}'),
        k2.SECTION_END, k2.IM_END,
    )
    assert both(kimi_vocab, ids) == {
        "content": "Let me check.",
        "reasoning_content": None,
        "tool_calls": [expected_call("functions.get_weather:0", "get_weather", '{"city": "Paris"}')],
        "incomplete_tool_call": None,
    }


def test_parallel_calls_keep_order_and_ids(kimi_tokenizer, kimi_vocab):
    ids = turn(
        kimi_tokenizer, kimi_vocab,
        k2.SECTION_BEGIN,
        *call("functions.get_weather:3", '{"city": "Paris"}'),
        "\n",  # text between calls belongs to the section: neither content nor arguments
        *call("functions.get_time:4", '{"tz": "CET"}'),
        *call("functions.get_weather:5", "{}"),
        k2.SECTION_END, k2.IM_END,
    )
    result = both(kimi_vocab, ids)
    assert result["content"] is None
    assert result["tool_calls"] == [
        expected_call("functions.get_weather:3", "get_weather", '{"city": "Paris"}'),
        expected_call("functions.get_time:4", "get_time", '{"tz": "CET"}'),
        expected_call("functions.get_weather:5", "get_weather", "{}"),
    ]


def test_reasoning_then_content(kimi_tokenizer, kimi_vocab):
    ids = turn(kimi_tokenizer, kimi_vocab, k2.THINK_BEGIN, "The user greets me.", k2.THINK_END, "Hello!", k2.IM_END)
    assert both(kimi_vocab, ids) == {
        "content": "Hello!",
        "reasoning_content": "The user greets me.",
        "tool_calls": [],
        "incomplete_tool_call": None,
    }


def test_section_opened_inside_think_ends_reasoning(kimi_tokenizer, kimi_vocab):
    ids = turn(
        kimi_tokenizer, kimi_vocab,
        k2.THINK_BEGIN, "I need the weather.", k2.SECTION_BEGIN, " ",
        *call("functions.get_weather:0", '{"city": "Oslo"}'),
        k2.SECTION_END, k2.IM_END,
    )
    assert both(kimi_vocab, ids) == {
        "content": None,
        "reasoning_content": "I need the weather.",
        "tool_calls": [expected_call("functions.get_weather:0", "get_weather", '{"city": "Oslo"}')],
        "incomplete_tool_call": None,
    }


def test_reasoning_prefilled_by_the_prompt(kimi_tokenizer, kimi_vocab):
    ids = turn(kimi_tokenizer, kimi_vocab, "Thinking it over.", k2.THINK_END, "Done.", k2.IM_END)
    assert both(kimi_vocab, ids, in_reasoning=True)["reasoning_content"] == "Thinking it over."
    assert both(kimi_vocab, ids)["content"] == "Thinking it over.Done."


def test_non_ascii_arguments_split_across_tokens(kimi_tokenizer, kimi_vocab):
    arguments = '{"city": "北京", "note": "🌧️ 下雨了"}'
    ids = turn(
        kimi_tokenizer, kimi_vocab,
        Bytes("天气"), k2.SECTION_BEGIN,
        k2.CALL_BEGIN, "functions.get_weather:0", k2.ARGUMENT_BEGIN, Bytes(arguments), k2.CALL_END,
        k2.SECTION_END, k2.IM_END,
    )
    pieces = [kimi_vocab.token_bytes(i) for i in ids]
    assert any(p is not None and len(p) == 1 and p[0] >= 0x80 for p in pieces), "no character was split"
    result = both(kimi_vocab, ids)
    assert result["content"] == "天气"
    assert json.loads(result["tool_calls"][0]["function"]["arguments"]) == json.loads(arguments)


def test_tokenizer_merges_do_not_change_the_result(kimi_tokenizer, kimi_vocab):
    arguments = '{"q": "東京の天気 ☀️", "n": 3}'
    head, tail = (k2.SECTION_BEGIN,), (k2.IM_END,)
    as_bytes = turn(kimi_tokenizer, kimi_vocab, *head, *call("functions.search:0", Bytes(arguments)), *tail)
    as_tokens = turn(kimi_tokenizer, kimi_vocab, *head, *call("functions.search:0", arguments), *tail)
    assert as_bytes != as_tokens
    assert both(kimi_vocab, as_bytes) == both(kimi_vocab, as_tokens)
    assert both(kimi_vocab, as_tokens)["tool_calls"][0]["function"]["arguments"] == arguments


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("functions.mcp.github-search:0", "mcp.github-search"),
        ("functions.a.b.c:12", "a.b.c"),
        ("functions.functions.run:1", "functions.run"),
        ("functions.my-tool_v2:7", "my-tool_v2"),
        ("get_weather:0", "get_weather"),
        ("  functions.spaced:2 ", "spaced"),
    ],
)
def test_names_with_dots_and_hyphens(kimi_tokenizer, kimi_vocab, header, name):
    ids = turn(kimi_tokenizer, kimi_vocab, k2.SECTION_BEGIN, *call(header, '{"x": 1}'), k2.SECTION_END, k2.IM_END)
    (parsed,) = both(kimi_vocab, ids)["tool_calls"]
    assert parsed["id"] == header.strip()
    assert parsed["function"]["name"] == name


def test_marker_spelled_in_arguments_is_argument_text(kimi_tokenizer, kimi_vocab):
    arguments = '{"text": "<|tool_call_end|><|tool_calls_section_end|> and </think>"}'
    ids = turn(
        kimi_tokenizer, kimi_vocab,
        k2.SECTION_BEGIN, k2.CALL_BEGIN, "functions.echo:0", k2.ARGUMENT_BEGIN,
        Spelled(arguments), k2.CALL_END, k2.SECTION_END, k2.IM_END,
    )
    result = both(kimi_vocab, ids)
    assert result["content"] is None
    assert result["tool_calls"] == [expected_call("functions.echo:0", "echo", arguments)]


def test_marker_spelled_in_content_stays_content(kimi_tokenizer, kimi_vocab):
    text = "Write <|tool_calls_section_begin|><|tool_call_begin|> then <think> to start."
    ids = turn(kimi_tokenizer, kimi_vocab, Spelled(text), k2.IM_END)
    assert both(kimi_vocab, ids) == {"content": text, "reasoning_content": None, "tool_calls": [], "incomplete_tool_call": None}


def test_stray_markers_never_become_text(kimi_tokenizer, kimi_vocab):
    ids = turn(
        kimi_tokenizer, kimi_vocab,
        "Hello", k2.CALL_END, k2.SECTION_END, k2.ARGUMENT_BEGIN, k2.THINK_END, " world", k2.IM_END,
    )
    assert both(kimi_vocab, ids) == {"content": "Hello world", "reasoning_content": None, "tool_calls": [], "incomplete_tool_call": None}


def test_bare_call_without_section_is_still_a_call(kimi_tokenizer, kimi_vocab):
    ids = turn(kimi_tokenizer, kimi_vocab, "ok", *call("functions.f:0", "{}"), k2.IM_END)
    result = both(kimi_vocab, ids)
    assert result["content"] == "ok"
    assert result["tool_calls"] == [expected_call("functions.f:0", "f", "{}")]


def test_arguments_are_stripped_of_surrounding_whitespace(kimi_tokenizer, kimi_vocab):
    arguments = ' \n {"a": " x "}\n  '
    ids = turn(kimi_tokenizer, kimi_vocab, k2.SECTION_BEGIN, *call("functions.f:0", arguments), k2.IM_END)
    assert both(kimi_vocab, ids)["tool_calls"][0]["function"]["arguments"] == '{"a": " x "}'


def test_stops_at_im_end(kimi_tokenizer, kimi_vocab):
    ids = turn(
        kimi_tokenizer, kimi_vocab, "first", k2.IM_END, "second", k2.SECTION_BEGIN, *call("functions.f:0", "{}")
    )
    assert both(kimi_vocab, ids) == {"content": "first", "reasoning_content": None, "tool_calls": [], "incomplete_tool_call": None}


@pytest.mark.parametrize(
    ("tail", "calls", "incomplete"),
    [
        ((k2.SECTION_BEGIN,), [], None),
        ((k2.SECTION_BEGIN, k2.CALL_BEGIN, "functions.get_wea"), [], None),
        ((k2.SECTION_BEGIN, k2.CALL_BEGIN, "functions.get_weather:1", k2.CALL_END, k2.SECTION_END), [], None),
        (
            (k2.SECTION_BEGIN, k2.CALL_BEGIN, "functions.get_weather:1", k2.ARGUMENT_BEGIN, '{"city": "Par'),
            [], expected_call("functions.get_weather:1", "get_weather", '{"city": "Par'),
        ),
        (
            (k2.SECTION_BEGIN, k2.CALL_BEGIN, "functions.get_weather:1", k2.ARGUMENT_BEGIN, '{"city": "Par',
             k2.IM_END),
            [], expected_call("functions.get_weather:1", "get_weather", '{"city": "Par'),
        ),
        (
            (*call("functions.a:0", "{}")[:-1], k2.CALL_BEGIN, "functions.b:1", k2.ARGUMENT_BEGIN, "{}"),
            [expected_call("functions.a:0", "a", "{}")], expected_call("functions.b:1", "b", "{}"),
        ),
        (
            (*call("functions.a:0", "{}")[:-1], k2.SECTION_END),
            [expected_call("functions.a:0", "a", "{}")], None,
        ),
    ],
    ids=["section-only", "mid-header", "no-arguments", "mid-arguments", "stop-in-arguments", "missing-call-end",
         "closed-by-section-end"],
)
def test_truncated_sections(kimi_tokenizer, kimi_vocab, tail, calls, incomplete):
    """A call the turn ends inside (max_tokens reached) is never a tool call: it is reported apart."""
    ids = turn(kimi_tokenizer, kimi_vocab, "Checking.", *tail)
    result = both(kimi_vocab, ids)
    assert result == {"content": "Checking.", "reasoning_content": None, "tool_calls": calls,
                      "incomplete_tool_call": incomplete}


def test_ids_outside_the_vocabulary_are_skipped(kimi_tokenizer, kimi_vocab):
    """The parsers' id contract: what is not an integer id in range(vocab_size) is skipped."""
    ids = turn(kimi_tokenizer, kimi_vocab, "Checking.", k2.SECTION_BEGIN,
               *call("functions.get_weather:0", '{"city": "Paris"}'), k2.SECTION_END, k2.IM_END)
    junk = [-1, kimi_vocab.vocab_size, 10**12, 1.5, None, "7", True]
    noisy = [x for token in ids for x in (token, junk[token % len(junk)])]
    assert both(kimi_vocab, noisy) == both(kimi_vocab, ids)
    as_numpy = [numpy.int64(token) for token in ids]
    assert both(kimi_vocab, as_numpy) == both(kimi_vocab, ids)


def test_utf8_is_decoded_once_per_channel(kimi_vocab):
    ids = byte_ids(kimi_vocab, "中".encode())
    assert parse_tool_calls(ids, kimi_vocab)["content"] == "中"
    broken = byte_ids(kimi_vocab, "中".encode()[:2]) + [kimi_vocab.token_id(k2.IM_END)]
    assert parse_tool_calls(broken, kimi_vocab)["content"] == "\ufffd"


def test_unknown_format_is_named(kimi_vocab):
    with pytest.raises(ValueError, match="'hermes'"):
        parse_tool_calls([], kimi_vocab, format="hermes")


# ------------------------------------------------------------------------------------------
# Streaming


def test_stream_shape_of_a_call(kimi_tokenizer, kimi_vocab):
    ids = turn(
        kimi_tokenizer, kimi_vocab,
        "Hi", k2.SECTION_BEGIN, *call("functions.get_weather:0", '{"city": "Paris"}'), k2.SECTION_END, k2.IM_END,
    )
    deltas = stream(kimi_vocab, ids)
    chunks = [d.to_openai() for d in deltas]
    first_call = next(n for n, d in enumerate(deltas) if d.tool_call is not None)
    assert all(set(c) == {"content"} for c in chunks[:first_call])
    assert "".join(c["content"] for c in chunks[:first_call]) == "Hi"
    header = chunks[first_call]["tool_calls"][0]
    assert header == {
        "index": 0,
        "id": "functions.get_weather:0",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    fragments = [c["tool_calls"][0] for c in chunks[first_call + 1 :]]
    assert len(fragments) > 1, "arguments should stream in several fragments"
    assert all(set(f) == {"index", "function"} and f["index"] == 0 for f in fragments)
    assert "".join(f["function"]["arguments"] for f in fragments) == '{"city": "Paris"}'


def test_stream_holds_incomplete_characters(kimi_vocab):
    parser = StreamingToolCallParser(kimi_vocab)
    first, second, third = byte_ids(kimi_vocab, "中".encode())
    assert parser.feed(first) == []
    assert parser.feed(second) == []
    assert parser.feed(third) == [Delta(content="中")]


def test_stream_of_pretty_printed_arguments(kimi_tokenizer, kimi_vocab):
    arguments = json.dumps({"a": [1, {"b": "x  y"}], "c": "\u4e2d\u6587"}, indent=2, ensure_ascii=False)
    ids = turn(kimi_tokenizer, kimi_vocab, k2.SECTION_BEGIN, *call("functions.f:0", arguments), k2.IM_END)
    pieces = [kimi_vocab.token_bytes(i) for i in encode_text(kimi_tokenizer, kimi_vocab, arguments)]
    assert any(p.rstrip() and p.rstrip() != p for p in pieces), "no token ends in whitespace after text"
    assert both(kimi_vocab, ids)["tool_calls"][0]["function"]["arguments"] == arguments


def test_stream_holds_trailing_whitespace_of_arguments(kimi_tokenizer, kimi_vocab):
    parser = StreamingToolCallParser(kimi_vocab)
    opening = turn(kimi_tokenizer, kimi_vocab, k2.SECTION_BEGIN, k2.CALL_BEGIN, "functions.f:0", k2.ARGUMENT_BEGIN)
    assert [d.tool_call["id"] for d in parser.feed_many(opening)] == ["functions.f:0"]
    out = parser.feed_many(turn(kimi_tokenizer, kimi_vocab, '  {"a": 1}  '))
    assert "".join(d.tool_call["function"]["arguments"] for d in out) == '{"a": 1}'
    assert parser.feed_many(turn(kimi_tokenizer, kimi_vocab, k2.CALL_END)) == []


def test_stream_after_stop_and_finish(kimi_tokenizer, kimi_vocab):
    parser = StreamingToolCallParser(kimi_vocab)
    held = byte_ids(kimi_vocab, "中".encode())[:1]
    assert parser.feed_many(held) == []
    assert parser.feed(kimi_vocab.token_id(k2.IM_END)) == [Delta(content="\ufffd")]
    assert parser.is_finished
    assert parser.feed_many(turn(kimi_tokenizer, kimi_vocab, "more")) == []
    assert parser.finish() == []


# ------------------------------------------------------------------------------------------
# Property: streaming == batch, no partial characters, no marker text


@st.composite
def transcripts(draw, vocab):
    """Random turns: marker ids (in any order), random vocabulary ids, and byte-split text."""
    markers = sorted(marker_ids(vocab) | {vocab.token_id(k2.IM_USER), vocab.token_id(k2.IM_MIDDLE)})
    element = st.one_of(
        st.sampled_from(markers).map(lambda i: [i]),
        st.integers(0, vocab.vocab_size - 1).map(lambda i: [i]),
        st.text(max_size=6).map(lambda s: byte_ids(vocab, s.encode())),
    )
    parts = draw(st.lists(element, max_size=40))
    return [i for part in parts for i in part]


@st.composite
def well_formed_turns(draw, tok, vocab):
    """Valid K2 turns with random UTF-8 text (reasoning, content, parallel calls), maybe cut short.

    Returns ``(ids, complete)``; the text never spells a marker or holds U+FFFD itself. Arguments
    are encoded by the tokenizer or one byte per token.
    """
    text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="<[\ufffd"), max_size=12)
    pieces: list[str] = []
    if draw(st.booleans()):
        pieces += [k2.THINK_BEGIN, Bytes(draw(text))]
        if draw(st.booleans()):
            pieces.append(k2.THINK_END)
    pieces.append(Bytes(draw(text)))
    names = st.from_regex(r"[a-z][a-z0-9_.\-]{0,10}", fullmatch=True)
    calls = draw(st.lists(st.tuples(names, text), max_size=3))
    if calls:
        pieces.append(k2.SECTION_BEGIN)
        for n, (name, value) in enumerate(calls):
            arguments = json.dumps({"v": value}, ensure_ascii=False, indent=draw(st.sampled_from([None, 1])))
            pieces += call(f"functions.{name}:{n}", Bytes(arguments) if draw(st.booleans()) else arguments)
        pieces.append(k2.SECTION_END)
    pieces.append(k2.IM_END)
    ids = turn(tok, vocab, *pieces)
    if draw(st.booleans()):
        return ids[: draw(st.integers(0, len(ids)))], False
    return ids, True


def check_stream(vocab, ids, chunk_sizes):
    """Stream ``ids`` in the given chunking; returns (deltas before finish, deltas of finish)."""
    batch = parse_tool_calls(ids, vocab)
    parser = StreamingToolCallParser(vocab)
    deltas: list[Delta] = []
    position = 0
    for size in chunk_sizes:
        deltas += parser.feed_many(ids[position : position + size])
        position += size
    for token_id in ids[position:]:
        deltas += parser.feed(token_id)
    final = parser.finish()
    assert merge_deltas(deltas + final) == batch
    for delta in deltas + final:
        set_fields = [f for f in (delta.content, delta.reasoning_content, delta.tool_call,
                                  delta.incomplete_tool_call) if f is not None]
        assert len(set_fields) == 1
        assert delta.content != "" and delta.reasoning_content != ""
    return deltas, final


def delta_text(delta: Delta) -> str:
    if delta.tool_call is not None:
        return delta.tool_call["function"]["arguments"]
    return delta.content or delta.reasoning_content or ""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_stream_equals_batch_on_random_transcripts(kimi_vocab, data):
    ids = data.draw(transcripts(kimi_vocab))
    chunk_sizes = data.draw(st.lists(st.integers(0, 5), max_size=8))
    check_stream(kimi_vocab, ids, chunk_sizes)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_stream_equals_batch_on_well_formed_turns(kimi_tokenizer, kimi_vocab, data):
    ids, complete = data.draw(well_formed_turns(kimi_tokenizer, kimi_vocab))
    chunk_sizes = data.draw(st.lists(st.integers(0, 5), max_size=8))
    deltas, final = check_stream(kimi_vocab, ids, chunk_sizes)
    # Before finish nothing is ever a partial character; a turn cut mid-character may flush one.
    for delta in deltas + (final if complete else []):
        assert "\ufffd" not in delta_text(delta), "a partial character was emitted"
    for delta in deltas + final:
        assert "<" not in delta_text(delta), "marker text leaked"  # the generated text has no "<"
