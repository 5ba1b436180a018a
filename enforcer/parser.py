"""Read a generated assistant turn back into OpenAI's message shape, in one go or streamed.

Structure is recognised by token id only: the marker ids come from the vocabulary
(``Vocabulary.token_id``), and text that merely spells a marker stays text. Text is decoded
from the exact token bytes, joined per channel (content, reasoning, each call's arguments) and
decoded as UTF-8 once (``errors="replace"``); the streaming parser uses incremental decoders so
it never emits half a character, and the concatenation of its deltas equals the batch result.
Both parsers run the same state machine, so they agree by construction.

Each format family's rules (what is content, reasoning, a call, and what is dropped) are in its
output reader's docstring, ``enforcer.formats.<family>.output`` (the parser finds the reader of
``format`` in :mod:`enforcer.formats.registry`).

Every format:

- An incomplete call (the turn ended inside it: ``max_tokens`` reached, or an unenforced model
  ended the turn there) is never one of the ``tool_calls``: it is reported apart, as
  ``incomplete_tool_call`` in OpenAI's call shape with the arguments as generated (K3: an open
  string is not closed), so a caller can show or drop it; streamed, its deltas have already
  gone out and the final delta says ``incomplete_tool_call=index``.
- Ids are taken by the matchers' contract (:func:`enforcer.ids.as_token_id`): an id that
  is not an integer in ``range(vocab_size)`` is skipped, as a hole in the vocabulary is; the
  parsers never raise on generated output.

Cost: O(1) per token (a tag or a call text is read once, when it closes); a parser holds
only the text of the current turn. Parsers are cheap, one per sequence, not thread-safe.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from .formats.reading import OutputReader, Sink, decode
from .formats.registry import family_of

if TYPE_CHECKING:
    from .vocabulary import Vocabulary

__all__ = ["Delta", "StreamingToolCallParser", "merge_deltas", "parse_tool_calls"]


def _new_reader(vocabulary: Vocabulary, format: str, in_reasoning: bool) -> OutputReader:
    """The output reader of ``format``'s family (``ValueError`` for an unknown format)."""
    return family_of(format).new_reader(vocabulary, in_reasoning)


# --------------------------------------------------------------------------------------------
# Batch


def _tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


class _Collector(Sink):
    def __init__(self) -> None:
        self.content_bytes = bytearray()
        self.reasoning_bytes = bytearray()
        self.calls: list[tuple[str, str, bytearray]] = []
        self.incomplete: int | None = None

    def content(self, data: bytes) -> None:
        self.content_bytes += data

    def reasoning(self, data: bytes) -> None:
        self.reasoning_bytes += data

    def call_header(self, index: int, call_id: str, name: str) -> None:
        self.calls.append((call_id, name, bytearray()))

    def arguments(self, index: int, data: bytes) -> None:
        self.calls[index][2].extend(data)

    def call_incomplete(self, index: int) -> None:
        self.incomplete = index

    def result(self) -> dict[str, Any]:
        calls = [_tool_call(i, n, decode(a).strip()) for i, n, a in self.calls]
        return _result(decode(self.content_bytes), decode(self.reasoning_bytes), calls, self.incomplete)


def _result(content: str, reasoning: str, calls: list[dict[str, Any]], incomplete: int | None) -> dict[str, Any]:
    """The parsers' result; the incomplete call, if any (always the last), apart."""
    return {
        "content": content or None,
        "reasoning_content": reasoning or None,
        "tool_calls": calls if incomplete is None else calls[:incomplete] + calls[incomplete + 1:],
        "incomplete_tool_call": None if incomplete is None else calls[incomplete],
    }


def parse_tool_calls(
    token_ids: Iterable[int],
    vocabulary: Vocabulary,
    format: str = "kimi_k2",
    *,
    in_reasoning: bool = False,
) -> dict[str, Any]:
    """Split a generated turn into ``{"content", "reasoning_content", "tool_calls",
    "incomplete_tool_call"}`` (the last is ``None`` unless the turn ended inside a call: see the
    module docstring).

    ``token_ids`` are the generated ids (a trailing stop id and anything after it are fine).
    ``in_reasoning``: K2: the prompt already opened ``<think>`` (K2.5-style prefill); K3: the
    prompt ended with ``<|open|>think<|sep|>`` (True) or ``<|open|>response<|sep|>`` (False).
    Never raises on malformed output (ids outside the vocabulary are skipped); raises
    ``TokenizerError`` when the vocabulary lacks a marker and ``ValueError`` for an unknown
    format. Cost: O(len(token_ids)).
    """
    machine = _new_reader(vocabulary, format, in_reasoning)
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
    ``{"index", "function": {"arguments": fragment}}``. ``incomplete_tool_call``: the index of
    the call the turn ended inside (its deltas went out before; the last delta of a turn).
    """

    content: str | None = None
    reasoning_content: str | None = None
    tool_call: dict[str, Any] | None = None
    incomplete_tool_call: int | None = None

    def to_openai(self) -> dict[str, Any]:
        """The ``choices[0].delta`` object of an OpenAI chat-completion chunk (an
        ``incomplete_tool_call`` delta is ``{}``: OpenAI reports it as ``finish_reason``
        ``"length"``)."""
        if self.incomplete_tool_call is not None:
            return {}
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


class _Streamer(Sink):
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

    def call_incomplete(self, index: int) -> None:
        self.call_end(index)
        self.out.append(Delta(incomplete_tool_call=index))

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
    (K2) or its call tag's ``<|sep|>`` (K3) arrives, K3 arguments grow value by value, and
    marker ids never yield text. Call ``finish`` when generation stops without the stop id
    (``<|im_end|>``, ``<|end_of_msg|>``; it implies ``finish``). Cost: O(1) per id.
    """

    def __init__(
        self, vocabulary: Vocabulary, format: str = "kimi_k2", *, in_reasoning: bool = False
    ) -> None:
        self._machine = _new_reader(vocabulary, format, in_reasoning)
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
    incomplete: int | None = None
    for delta in deltas:
        if delta.incomplete_tool_call is not None:
            incomplete = delta.incomplete_tool_call
        elif delta.content is not None:
            content.append(delta.content)
        elif delta.reasoning_content is not None:
            reasoning.append(delta.reasoning_content)
        elif delta.tool_call is not None:
            part = delta.tool_call
            index = part["index"]
            if index not in calls:
                calls[index] = _tool_call(part["id"], part["function"]["name"], "")
            calls[index]["function"]["arguments"] += part["function"].get("arguments", "")
    ordered = [calls[i] for i in sorted(calls)]
    return _result("".join(content), "".join(reasoning), ordered, incomplete)
