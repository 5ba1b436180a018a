"""Read a generated assistant turn back into OpenAI's message shape, in one go or streamed.

Structure is recognised by token id only: the marker ids come from the vocabulary
(``Vocabulary.token_id``), and text that merely spells a marker stays text. Text is decoded
from the exact token bytes, joined per channel (content, reasoning, each call's arguments) and
decoded as UTF-8 once (``errors="replace"``); the streaming parser uses incremental decoders so
it never emits half a character, and the concatenation of its deltas equals the batch result.

Kimi K2 rules (the only format so far; others plug in through ``_FORMATS``):

- ``<|im_end|>`` ends the turn; later ids are ignored.
- Reasoning is the text between ``<think>`` and ``</think>``. K2-Thinking may open the
  tool-call section inside ``<think>``: reasoning then ends at the section begin.
- A ``<|tool_call_begin|>`` outside a section opens a call as if the section had begun (the
  model skipped the wrapper); stray markers elsewhere are dropped, never turned into text.
- A call is reported once its ``<|tool_call_argument_begin|>`` arrived: its id is the header
  text, its name the id without the ``functions.`` prefix (removed once) and without the
  ``:N`` counter (split on the last ``:``). Arguments are the text generated up to
  ``<|tool_call_end|>`` (or up to whatever ends the call or the turn), stripped of surrounding
  whitespace. A call cut off before its arguments began is dropped; a call cut off inside its
  arguments keeps what was generated, because a stream has already sent it.
- Content is the text outside reasoning and outside the section.

Cost: O(1) per token; a parser holds only the text of the current turn. Parsers are cheap,
one per sequence, not thread-safe.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

from .errors import TokenizerError
from .formats import kimi_k2

if TYPE_CHECKING:
    from .vocabulary import Vocabulary

__all__ = ["Delta", "StreamingToolCallParser", "merge_deltas", "parse_tool_calls"]


# --------------------------------------------------------------------------------------------
# Formats


@dataclass(frozen=True, slots=True)
class _Markers:
    """Marker token ids of one format for one vocabulary (``None``: the vocabulary lacks it)."""

    section_begin: int
    section_end: int
    call_begin: int
    argument_begin: int
    call_end: int
    think_begin: int | None
    think_end: int | None
    stop: int


@dataclass(frozen=True, slots=True)
class _Format:
    """What the parser needs to know about a format: its markers and how a call header reads."""

    markers: Callable[[Vocabulary], _Markers]
    read_header: Callable[[str], tuple[str, str]]
    """Header text -> (call id, function name)."""


def _optional_id(vocabulary: Vocabulary, name: str) -> int | None:
    try:
        return vocabulary.token_id(name)
    except TokenizerError:
        return None


def _kimi_k2_markers(vocabulary: Vocabulary) -> _Markers:
    think_begin = _optional_id(vocabulary, kimi_k2.THINK_BEGIN)
    think_end = _optional_id(vocabulary, kimi_k2.THINK_END)
    if (think_begin is None) != (think_end is None):
        missing = kimi_k2.THINK_BEGIN if think_begin is None else kimi_k2.THINK_END
        raise TokenizerError(f"the tokenizer has one think token but lacks {missing!r}")
    return _Markers(
        section_begin=vocabulary.token_id(kimi_k2.SECTION_BEGIN),
        section_end=vocabulary.token_id(kimi_k2.SECTION_END),
        call_begin=vocabulary.token_id(kimi_k2.CALL_BEGIN),
        argument_begin=vocabulary.token_id(kimi_k2.ARGUMENT_BEGIN),
        call_end=vocabulary.token_id(kimi_k2.CALL_END),
        think_begin=think_begin,
        think_end=think_end,
        stop=vocabulary.token_id(kimi_k2.IM_END),
    )


def _kimi_k2_header(text: str) -> tuple[str, str]:
    call_id = text.strip()
    name = call_id
    if name.startswith(kimi_k2.CALL_ID_PREFIX):
        name = name[len(kimi_k2.CALL_ID_PREFIX) :]
    if kimi_k2.CALL_ID_SEPARATOR in name:
        name = name.rpartition(kimi_k2.CALL_ID_SEPARATOR)[0]
    return call_id, name


_FORMATS: dict[str, _Format] = {
    "kimi_k2": _Format(markers=_kimi_k2_markers, read_header=_kimi_k2_header),
}


def _get_format(format: str) -> _Format:
    try:
        return _FORMATS[format]
    except KeyError:
        known = ", ".join(sorted(_FORMATS))
        raise ValueError(f"unknown tool-call format {format!r} (known: {known})") from None


# --------------------------------------------------------------------------------------------
# The state machine shared by both parsers

_TEXT, _THINK, _SECTION, _HEADER, _ARGUMENTS, _STOPPED = range(6)


class _Sink:
    """Receives what the machine recognises; the batch and streaming parsers implement it."""

    def content(self, data: bytes) -> None: ...
    def reasoning(self, data: bytes) -> None: ...
    def call_header(self, index: int, call_id: str, name: str) -> None: ...
    def arguments(self, index: int, data: bytes) -> None: ...
    def call_end(self, index: int) -> None: ...
    def stop(self) -> None: ...


class _Machine:
    """Token-id state machine: O(1) per token, holds only the current call header's bytes."""

    def __init__(self, vocabulary: Vocabulary, format: str, in_reasoning: bool) -> None:
        fmt = _get_format(format)
        self._markers = fmt.markers(vocabulary)
        if in_reasoning and self._markers.think_begin is None:
            raise TokenizerError("in_reasoning=True but the tokenizer has no think tokens")
        self._read_header = fmt.read_header
        self._token_bytes = vocabulary.token_bytes
        self._mode = _THINK if in_reasoning else _TEXT
        self._header = bytearray()
        self._calls = 0

    @property
    def stopped(self) -> bool:
        return self._mode == _STOPPED

    def step(self, token_id: int, sink: _Sink) -> None:
        """Consume one id and report to ``sink`` what it completes."""
        token_id = int(token_id)  # numpy and torch scalars compare and index like ints after this
        mode = self._mode
        if mode == _STOPPED:
            return
        m = self._markers
        if token_id == m.stop:
            self.finish(sink)
        elif token_id == m.section_begin:
            if mode in (_TEXT, _THINK):
                self._mode = _SECTION
        elif token_id == m.call_begin:
            self._end_call(sink)
            self._header.clear()
            self._mode = _HEADER
        elif token_id == m.argument_begin:
            if mode == _HEADER:
                call_id, name = self._read_header(self._header.decode("utf-8", errors="replace"))
                sink.call_header(self._calls, call_id, name)
                self._calls += 1
                self._mode = _ARGUMENTS
        elif token_id == m.call_end:
            if mode in (_HEADER, _ARGUMENTS):
                self._end_call(sink)
                self._mode = _SECTION
        elif token_id == m.section_end:
            if mode in (_SECTION, _HEADER, _ARGUMENTS):
                self._end_call(sink)
                self._mode = _TEXT
        elif token_id == m.think_begin:
            if mode == _TEXT:
                self._mode = _THINK
        elif token_id == m.think_end:
            if mode == _THINK:
                self._mode = _TEXT
        else:
            data = self._token_bytes(token_id)
            if not data:
                return
            if mode == _TEXT:
                sink.content(data)
            elif mode == _THINK:
                sink.reasoning(data)
            elif mode == _HEADER:
                self._header += data
            elif mode == _ARGUMENTS:
                sink.arguments(self._calls - 1, data)

    def finish(self, sink: _Sink) -> None:
        """End the turn: close an open call and tell the sink (idempotent)."""
        if self._mode == _STOPPED:
            return
        self._end_call(sink)
        self._mode = _STOPPED
        sink.stop()

    def _end_call(self, sink: _Sink) -> None:
        """Close the open call, if one is in its arguments (the caller sets the next mode)."""
        if self._mode == _ARGUMENTS:
            sink.call_end(self._calls - 1)


# --------------------------------------------------------------------------------------------
# Batch


def _decode(data: bytes | bytearray) -> str:
    return bytes(data).decode("utf-8", errors="replace")


def _tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


class _Collector(_Sink):
    def __init__(self) -> None:
        self.content_bytes = bytearray()
        self.reasoning_bytes = bytearray()
        self.calls: list[tuple[str, str, bytearray]] = []

    def content(self, data: bytes) -> None:
        self.content_bytes += data

    def reasoning(self, data: bytes) -> None:
        self.reasoning_bytes += data

    def call_header(self, index: int, call_id: str, name: str) -> None:
        self.calls.append((call_id, name, bytearray()))

    def arguments(self, index: int, data: bytes) -> None:
        self.calls[index][2].extend(data)

    def result(self) -> dict[str, Any]:
        return {
            "content": _decode(self.content_bytes) or None,
            "reasoning_content": _decode(self.reasoning_bytes) or None,
            "tool_calls": [_tool_call(i, n, _decode(a).strip()) for i, n, a in self.calls],
        }


def parse_tool_calls(
    token_ids: Iterable[int],
    vocabulary: Vocabulary,
    format: str = "kimi_k2",
    *,
    in_reasoning: bool = False,
) -> dict[str, Any]:
    """Split a generated turn into ``{"content", "reasoning_content", "tool_calls"}``.

    ``token_ids`` are the generated ids (a trailing stop id and anything after it are fine).
    ``in_reasoning``: the prompt already opened ``<think>`` (K2.5-style prefill). Never raises
    on malformed output; raises ``TokenizerError`` when the vocabulary lacks a marker and
    ``ValueError`` for an unknown format. Cost: O(len(token_ids)).
    """
    machine = _Machine(vocabulary, format, in_reasoning)
    collector = _Collector()
    for token_id in token_ids:
        machine.step(token_id, collector)
        if machine.stopped:
            break
    machine.finish(collector)
    return collector.result()


# --------------------------------------------------------------------------------------------
# Streaming


@dataclass(frozen=True, slots=True)
class Delta:
    """One streamed piece; exactly one field is set.

    ``tool_call`` is in OpenAI's streaming shape: the first delta of a call is
    ``{"index", "id", "type": "function", "function": {"name", "arguments": ""}}``, later ones
    ``{"index", "function": {"arguments": fragment}}``.
    """

    content: str | None = None
    reasoning_content: str | None = None
    tool_call: dict[str, Any] | None = None

    def to_openai(self) -> dict[str, Any]:
        """The ``choices[0].delta`` object of an OpenAI chat-completion chunk."""
        if self.tool_call is not None:
            return {"tool_calls": [self.tool_call]}
        if self.reasoning_content is not None:
            return {"reasoning_content": self.reasoning_content}
        return {"content": self.content}


def _utf8_decoder() -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")(errors="replace")


class _StrippedArguments:
    """Decodes one call's argument bytes, holding back leading and trailing whitespace."""

    def __init__(self) -> None:
        self._decoder = _utf8_decoder()
        self._started = False
        self._held = ""

    def push(self, data: bytes, final: bool = False) -> str:
        text = self._decoder.decode(data, final)
        if not self._started:
            text = text.lstrip()
            if not text:
                return ""
            self._started = True
        body = text.rstrip()
        if not body:
            self._held += text
            return ""
        out = self._held + body
        self._held = text[len(body) :]
        return out


class _Streamer(_Sink):
    def __init__(self) -> None:
        self.out: list[Delta] = []
        self._content = _utf8_decoder()
        self._reasoning = _utf8_decoder()
        self._arguments: _StrippedArguments | None = None

    def content(self, data: bytes) -> None:
        self._emit_content(self._content.decode(data))

    def reasoning(self, data: bytes) -> None:
        self._emit_reasoning(self._reasoning.decode(data))

    def call_header(self, index: int, call_id: str, name: str) -> None:
        self._arguments = _StrippedArguments()
        self.out.append(Delta(tool_call={"index": index, **_tool_call(call_id, name, "")}))

    def arguments(self, index: int, data: bytes) -> None:
        assert self._arguments is not None
        self._emit_arguments(index, self._arguments.push(data))

    def call_end(self, index: int) -> None:
        assert self._arguments is not None
        self._emit_arguments(index, self._arguments.push(b"", final=True))
        self._arguments = None

    def stop(self) -> None:
        self._emit_reasoning(self._reasoning.decode(b"", True))
        self._emit_content(self._content.decode(b"", True))

    def _emit_content(self, text: str) -> None:
        if text:
            self.out.append(Delta(content=text))

    def _emit_reasoning(self, text: str) -> None:
        if text:
            self.out.append(Delta(reasoning_content=text))

    def _emit_arguments(self, index: int, text: str) -> None:
        if text:
            self.out.append(Delta(tool_call={"index": index, "function": {"arguments": text}}))


class StreamingToolCallParser:
    """Turns generated ids into deltas as they arrive (one parser per sequence).

    ``feed`` returns the deltas that the id completes: a text token that ends mid-character
    yields nothing until the character is complete, a call appears when its argument marker
    arrives, and marker ids never yield text. Call ``finish`` when generation stops without
    ``<|im_end|>`` (it is implied by the stop id). Cost: O(1) per id.
    """

    def __init__(
        self, vocabulary: Vocabulary, format: str = "kimi_k2", *, in_reasoning: bool = False
    ) -> None:
        self._machine = _Machine(vocabulary, format, in_reasoning)
        self._streamer = _Streamer()

    @property
    def is_finished(self) -> bool:
        """True once the stop id arrived or ``finish`` was called; later ids are ignored."""
        return self._machine.stopped

    def feed(self, token_id: int) -> list[Delta]:
        """Consume one generated id; return the deltas it completes."""
        self._machine.step(token_id, self._streamer)
        return self._take()

    def feed_many(self, token_ids: Iterable[int]) -> list[Delta]:
        """Consume several ids; return their deltas in order."""
        for token_id in token_ids:
            self._machine.step(token_id, self._streamer)
        return self._take()

    def finish(self) -> list[Delta]:
        """End the turn: flush held bytes and an unfinished call (idempotent)."""
        self._machine.finish(self._streamer)
        return self._take()

    def _take(self) -> list[Delta]:
        out = self._streamer.out
        self._streamer.out = []
        return out


def merge_deltas(deltas: Iterable[Delta]) -> dict[str, Any]:
    """Accumulate streamed deltas into the shape ``parse_tool_calls`` returns."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for delta in deltas:
        if delta.content is not None:
            content.append(delta.content)
        elif delta.reasoning_content is not None:
            reasoning.append(delta.reasoning_content)
        elif delta.tool_call is not None:
            part = delta.tool_call
            index = part["index"]
            if index not in calls:
                calls[index] = _tool_call(part["id"], part["function"]["name"], "")
            calls[index]["function"]["arguments"] += part["function"].get("arguments", "")
    return {
        "content": "".join(content) or None,
        "reasoning_content": "".join(reasoning) or None,
        "tool_calls": [calls[i] for i in sorted(calls)],
    }
