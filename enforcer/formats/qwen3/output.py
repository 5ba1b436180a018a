"""Qwen3 output ids -> OpenAI message parts, by token id.

Rules: ``<|im_end|>`` ends the turn (later ids are ignored). Reasoning is the text between
``<think>`` and ``</think>`` (a ``<tool_call>`` inside it ends it). Between ``<tool_call>`` and
``</tool_call>`` the call text is held and read once, when ``</tool_call>`` arrives (so a call's
deltas come in one piece): a JSON object with a string ``name``; its arguments are the exact
text of ``"arguments"`` when the call is written as the template writes it (:func:`read_call`;
what the enforcer allows), else ``json.dumps`` of the parsed value (``{}`` when absent), as vLLM's
``hermes`` parser does. A call text that is not such an object is dropped (never content). A
call still open when the turn ends is incomplete, reported when its name can be read, with the
text after ``"arguments":`` as its arguments. Content is the text outside reasoning and calls;
stray markers are dropped. O(1) per token outside calls; a call's text is read once.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ..reading import STOPPED, TEXT, Sink, TurnReader, decode, think_ids
from . import CALL_PREFIX, CALL_SUFFIX, IM_END, THINK_BEGIN, THINK_END, TOOL_CALL, TOOL_CALL_END, call_id

if TYPE_CHECKING:
    from ...vocabulary import Vocabulary

__all__ = ["QwenReader", "new_reader", "read_call"]

_OPEN_NAME = re.compile(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*(?:,\s*"arguments"\s*:\s*)?')


def read_call(text: str) -> tuple[str, str] | None:
    """``(name, arguments)`` of a complete call text, or None when it is not a JSON object with a
    string ``name``."""
    try:
        value: Any = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    name = value["name"]
    head = CALL_PREFIX.replace("{name}", json.dumps(name, ensure_ascii=False)[1:-1])
    if text.startswith(head) and text.endswith(CALL_SUFFIX):
        return name, text[len(head):len(text) - len(CALL_SUFFIX)]
    return name, json.dumps(value.get("arguments", {}), ensure_ascii=False)


def _read_open_call(text: str) -> tuple[str, str] | None:
    """``(name, arguments so far)`` of a call cut off before ``</tool_call>``, or None."""
    match = _OPEN_NAME.match(text)
    if match is None:
        return None
    try:
        name = json.loads(f'"{match.group(1)}"')
    except ValueError:
        return None
    return name, text[match.end():].strip()


_CALL = STOPPED + 1


class QwenReader(TurnReader):
    """Qwen3's output reader (one per sequence)."""

    def __init__(self, vocabulary: "Vocabulary", in_reasoning: bool) -> None:
        self._open = vocabulary.token_id(TOOL_CALL)
        self._close = vocabulary.token_id(TOOL_CALL_END)
        super().__init__(vocabulary, vocabulary.token_id(IM_END), think_ids(vocabulary, THINK_BEGIN, THINK_END),
                         (self._open, self._close), in_reasoning)
        self._call = bytearray()
        self._calls = 0

    def _marker(self, token_id: int, sink: Sink) -> None:
        if token_id == self._open:
            self._call.clear()
            self._mode = _CALL
        elif self._mode == _CALL:  # the call's end
            self._end_call(sink)
            self._mode = TEXT

    def _call_text(self, data: bytes, sink: Sink) -> None:
        self._call += data

    def _end_turn(self, sink: Sink) -> None:
        """A call still open is incomplete (reported when its name can be read)."""
        if self._mode == _CALL:
            read = _read_open_call(decode(self._call))
            if read is not None:
                self._report(sink, *read)
                sink.call_incomplete(self._calls - 1)

    def _end_call(self, sink: Sink) -> None:
        read = read_call(decode(self._call))
        if read is not None:
            self._report(sink, *read)
            sink.call_end(self._calls - 1)

    def _report(self, sink: Sink, name: str, arguments: str) -> None:
        index = self._calls
        self._calls += 1
        sink.call_header(index, call_id(name, index), name)
        sink.arguments(index, arguments.encode("utf-8"))


def new_reader(vocabulary: "Vocabulary", in_reasoning: bool = False) -> QwenReader:
    return QwenReader(vocabulary, in_reasoning)
