"""Kimi K3 ("XTML"): four control tokens and XML-like tags written as text.

An assistant turn (the generation prompt ends with ``<|open|>think<|sep|>``, or with
``<|open|>response<|sep|>`` when thinking is off)::

    <|open|>think<|sep|>REASONING<|close|>think<|sep|>
    <|open|>response<|sep|>CONTENT<|close|>response<|sep|>
    <|open|>tools<|sep|>
      <|open|>call tool="NAME" index="N"<|sep|>
        <|open|>argument key="K" type="T"<|sep|>VALUE<|close|>argument<|sep|>  (per argument)
      <|close|>call<|sep|>                                                      (per call)
    <|close|>tools<|sep|>
    <|close|>message<|sep|><|end_of_msg|>

(back to back in reality). ``N`` counts the calls of the message from 1. ``T`` is one of
:data:`VALUE_TYPES`; a string VALUE is raw text, any other VALUE its exact JSON literal.
Attribute values escape ``&`` then ``"``. Tag text is tokenized piece by piece
(:func:`tag_pieces`): the tag word, then per attribute `` key``, ``="``, the value and ``"``.

Token names only here; ids are read from the tokenizer. The spec for the engine is :func:`spec`.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Iterable, Sequence

from ..base import CALL_ID, call_id

if TYPE_CHECKING:
    from ...vocabulary import Vocabulary
    from ..base import FormatSpec
    from ..registry import FormatFamily

END_OF_MSG = "<|end_of_msg|>"
OPEN = "<|open|>"
CLOSE = "<|close|>"
SEP = "<|sep|>"
CONTROL_TOKENS = (END_OF_MSG, OPEN, CLOSE, SEP)

THINK = "think"
RESPONSE = "response"
TOOLS = "tools"
CALL = "call"
ARGUMENT = "argument"
MESSAGE = "message"
JSON_TAG = "json"

FIRST_INDEX = 1

VALUE_TYPES = ("string", "number", "boolean", "null", "object", "array")
"""The type of a split argument (an integer is a ``number``)."""

__all__ = ["ARGUMENT", "ATTRIBUTE_ESCAPES", "CALL", "CLOSE", "CONTROL_TOKENS", "END_OF_MSG", "FIRST_INDEX", "JSON_TAG", "MESSAGE", "OPEN",
           "FAMILY", "RESPONSE", "SEP", "THINK", "TOOLS", "VALUE_TYPES", "arguments_json", "call_id", "escape_attribute",
           "read_tag", "resume", "spec", "tag_pieces", "tag_text", "unescape_attribute", "value_type"]


OBJECT_OPEN, MEMBER_SEPARATOR, OBJECT_CLOSE, QUOTE = b"{", b", ", b"}", b'"'
"""The pieces of the OpenAI ``arguments`` text a K3 call's split arguments make."""
_STRING_ESCAPES = {bytes([b]): json.dumps(chr(b))[1:-1].encode() for b in range(0x80)}
_MUST_ESCAPE = re.compile(rb'[\x00-\x1f"\\]')


def member_prefix(key: str) -> bytes:
    """``"KEY": `` (the key JSON-encoded, non-ASCII kept)."""
    return json.dumps(key, ensure_ascii=False).encode() + b": "


def string_body(data: bytes) -> bytes:
    """UTF-8 bytes as the inside of a JSON string, escaped as ``json.dumps(ensure_ascii=False)``
    escapes. Only ASCII bytes change, so a character split across tokens stays intact (the
    output reader escapes token by token)."""
    return _MUST_ESCAPE.sub(lambda match: _STRING_ESCAPES[match.group()], data)


def arguments_json(arguments: Iterable[tuple[str, str, str]]) -> str:
    """OpenAI ``arguments`` text from ``(key, type, value text)``: a JSON object with ``", "`` and
    ``": "`` separators; string values JSON-encoded (non-ASCII kept), every other value exactly
    as written (``1e2`` stays ``1e2``). The same pieces as the output reader streams."""
    out = bytearray(OBJECT_OPEN)
    for i, (key, json_type, value) in enumerate(arguments):
        if i:
            out += MEMBER_SEPARATOR
        out += member_prefix(key)
        out += QUOTE + string_body(value.encode()) + QUOTE if json_type == "string" else value.encode()
    return (out + OBJECT_CLOSE).decode()


ATTRIBUTE_ESCAPES = (("&", "&amp;"), ('"', "&quot;"))
"""How an attribute value is escaped, in the order the replacements apply."""


def escape_attribute(value: str) -> str:
    """An attribute value as the format writes it: ``&`` -> ``&amp;``, then ``"`` -> ``&quot;``."""
    for char, escape in ATTRIBUTE_ESCAPES:
        value = value.replace(char, escape)
    return value


def unescape_attribute(value: str) -> str:
    """Inverse of :func:`escape_attribute`."""
    for char, escape in reversed(ATTRIBUTE_ESCAPES):
        value = value.replace(escape, char)
    return value


def tag_pieces(tag: str, attributes: Iterable[tuple[str, str]] = ()) -> list[str]:
    """The text between ``<|open|>`` and ``<|sep|>`` as the pieces the format tokenizes one by
    one: ``[tag, " k1", '="', v1, '"', ...]`` (values escaped, empty pieces dropped)."""
    pieces = [tag]
    for key, value in attributes:
        pieces += [f" {key}", '="', escape_attribute(value), '"']
    return [p for p in pieces if p]


_TAG = re.compile(r'\s*([^\s="]+)((?:\s+[^\s="]+="[^"]*")*)\s*')
_ATTRIBUTE = re.compile(r'([^\s="]+)="([^"]*)"')


def read_tag(text: str) -> tuple[str, dict[str, str]] | None:
    """``TAG key="v" ...`` -> (TAG, unescaped attributes; the first of a repeated key), or None
    when the text is not a tag."""
    match = _TAG.fullmatch(text)
    if match is None:
        return None
    attributes: dict[str, str] = {}
    for key, value in _ATTRIBUTE.findall(match.group(2)):
        attributes.setdefault(key, unescape_attribute(value))
    return match.group(1), attributes


def tag_text(tag: str, attributes: Iterable[tuple[str, str]] = ()) -> str:
    """The text between ``<|open|>`` and ``<|sep|>``: ``tag key="value" ...``."""
    return "".join(tag_pieces(tag, attributes))


def value_type(value: object) -> str:
    """The ``type`` attribute of a Python JSON value."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def resume(prompt_ids: Sequence[int], vocabulary: "Vocabulary") -> str | None:
    """The place a turn starts in after ``prompt_ids``: inside the think or response body when
    the prompt ends with that block's open tag, at the first block after
    ``<|open|>message role="assistant"<|sep|>``; otherwise ``None`` (the spec's start)."""
    ids = list(prompt_ids)
    open_id, sep_id = vocabulary.token_id(OPEN), vocabulary.token_id(SEP)
    if len(ids) < 2 or ids[-1] != sep_id or open_id not in ids:
        return None
    begin = len(ids) - 1 - ids[::-1].index(open_id)
    text = vocabulary.decode_bytes(ids[begin + 1:-1]).decode("utf-8", "replace")
    if any(t in vocabulary.special_ids for t in ids[begin + 1:-1]):
        return None
    if text == THINK:
        return "think"
    if text == RESPONSE:
        return "response"
    if text == tag_text(MESSAGE, [("role", "assistant")]):
        return "turn"
    return None


def spec(json_arguments: bool = False, any_order: bool = False) -> "FormatSpec":
    """The K3 assistant turn as places of the format engine. ``json_arguments``: every call
    carries its arguments as one ``<|open|>json type="object"<|sep|>{...}<|close|>json<|sep|>``
    block instead of one tag per argument. ``any_order``: argument keys in any order (default:
    the declared order)."""
    from ..base import ArgumentTag, ArgumentValue, CallTag, Edge, FormatSpec, FreeText, JsonArguments, Place, Word

    def word(name: str, word_text: str, to: str, attributes: tuple = (), in_section: bool = False) -> Place:
        return Place(name, Word(((word_text, attributes, to, ""),)), (Edge(SEP, None),), in_section=in_section)

    if json_arguments:
        body = (
            Place("call", CallTag(CALL, "tool", "index"), (Edge(SEP, "json_open"),), in_section=True),
            Place("json_open", None, (Edge(OPEN, "json_tag"),), in_section=True),
            word("json_tag", JSON_TAG, "json_body", (("type", "object"),), in_section=True),
            Place("json_body", JsonArguments(), (Edge(CLOSE, "json_end"),), in_section=True),
            word("json_end", JSON_TAG, "json_done", in_section=True),
            Place("json_done", None, (Edge(CLOSE, "call_end"),), in_section=True),
        )
    else:
        body = (
            Place("call", CallTag(CALL, "tool", "index"), (Edge(SEP, "call_body"),), in_section=True),
            Place("call_body", None, (Edge(OPEN, "argument", "more_arguments"),
                                      Edge(CLOSE, "call_end", "arguments_complete")), in_section=True),
            Place("argument", ArgumentTag(ARGUMENT, "key", "type", ATTRIBUTE_ESCAPES), (Edge(SEP, "value"),),
                  in_section=True),
            Place("value", ArgumentValue(), (Edge(CLOSE, "value_end"),), in_section=True),
            word("value_end", ARGUMENT, "call_body", in_section=True),
        )
    places = (
        Place("turn", None, (Edge(OPEN, "block"),)),
        Place("block", Word(((THINK, (), "think", "may_think"), (RESPONSE, (), "response", ""))), (Edge(SEP, None),)),
        Place("think", FreeText("think", "text"), (Edge(CLOSE, "think_end"),)),
        word("think_end", THINK, "after_think"),
        Place("after_think", None, (Edge(OPEN, "response_open"),)),
        word("response_open", RESPONSE, "response"),
        Place("response", FreeText("content", "text"), (Edge(CLOSE, "response_end"),)),
        word("response_end", RESPONSE, "after_response"),
        Place("after_response", None, (Edge(OPEN, "tools_open", "may_call"), Edge(CLOSE, "message_end", "may_end"))),
        word("tools_open", TOOLS, "section", in_section=True),
        Place("section", None, (Edge(OPEN, "call"),), in_section=True),
        *body,
        word("call_end", CALL, "after_call", in_section=True),
        Place("after_call", None, (Edge(OPEN, "call", "parallel"), Edge(CLOSE, "tools_end")), ends_call=True,
              in_section=True),
        word("tools_end", TOOLS, "after_section", in_section=True),
        Place("after_section", None, (Edge(CLOSE, "message_end"),), in_section=True),
        word("message_end", MESSAGE, "end"),
        Place("end", None, (Edge(END_OF_MSG, "done"),)),
        Place("done"),
    )
    return FormatSpec(
        name="kimi_k3_json" if json_arguments else "kimi_k3",
        stop=END_OF_MSG,
        places=places,
        start="turn",
        controlled=(OPEN, CLOSE, SEP),
        first_index=FIRST_INDEX,
        counter_scope="message",
        call_id=CALL_ID,  # K3 names a call by its tool and its index in the message
        resume=resume,
        tag_pieces=tag_pieces,
        any_order=any_order,
    )


def _family() -> "FormatFamily":
    from ..registry import FormatFamily

    return FormatFamily(
        name="kimi_k3",
        formats={"kimi_k3": spec, "kimi_k3_json": lambda: spec(json_arguments=True)},
        markers=CONTROL_TOKENS,
        validation_tokens=CONTROL_TOKENS,
        reader=f"{__name__}.output:new_reader",
        prompt=f"{__name__}.prompt",
        test_tokenizer="enforcer.testing.tokenizers:kimi_k3_tokenizer",
        description="Kimi K3",
        parser_class="KimiK3",
        settings_format="kimi_k3",
    )


FAMILY = _family()
"""This package's entry in :mod:`enforcer.formats.registry`."""
