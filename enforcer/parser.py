"""Read a generated assistant turn back into OpenAI's message shape, in one go or streamed.

Structure is recognised by token id only: the marker ids come from the vocabulary
(``Vocabulary.token_id``), and text that merely spells a marker stays text. Text is decoded
from the exact token bytes, joined per channel (content, reasoning, each call's arguments) and
decoded as UTF-8 once (``errors="replace"``); the streaming parser uses incremental decoders so
it never emits half a character, and the concatenation of its deltas equals the batch result.
Both parsers run the same state machine, so they agree by construction.

Kimi K2 rules (``format="kimi_k2"``):

- ``<|im_end|>`` ends the turn; later ids are ignored.
- Reasoning is the text between ``<think>`` and ``</think>``. K2-Thinking may open the
  tool-call section inside ``<think>``: reasoning then ends at the section begin.
- A ``<|tool_call_begin|>`` outside a section opens a call as if the section had begun (the
  model skipped the wrapper); stray markers elsewhere are dropped, never turned into text.
- A call is reported once its ``<|tool_call_argument_begin|>`` arrived: its id is the header
  text, its name the id without the ``functions.`` prefix (removed once) and without the
  ``:N`` counter (split on the last ``:``). Arguments are the text generated up to
  ``<|tool_call_end|>`` (or up to the marker that ends the call: the section end, the next
  call), stripped of surrounding whitespace. A call cut off before its arguments began is
  dropped; a call still open when the turn ends (``<|im_end|>`` or the end of the ids, e.g.
  ``max_tokens`` reached) is *incomplete* (see below).
- Content is the text outside reasoning and outside the section.

Kimi K3 rules (``format="kimi_k3"``, :mod:`enforcer.formats.kimi_k3`):

- Only the four control ids are structure. The text between ``<|open|>`` and ``<|sep|>`` is an
  open tag ``TAG key="v" ...`` (values unescaped), between ``<|close|>`` and ``<|sep|>`` a
  close tag; ``<|end_of_msg|>`` ends the turn (later ids are ignored). A tag that cannot be read
  opens an ignored element (its text is dropped up to its close); a close tag that matches no
  open element is dropped; a close tag closes the elements opened inside it too.
- The turn is the body of the assistant message: ``in_reasoning=True`` starts inside the think
  block, ``False`` inside the response block; opening ``message``, ``think``, ``response`` or
  ``tools`` first closes the block in progress, so a turn that starts at its first
  ``<|open|>`` reads the same.
- Reasoning is the think body; content is the response body and any text outside blocks.
- ``call tool="NAME" index="N"`` (inside ``tools``, or opening it implicitly) is reported when
  its tag is complete, with id ``functions.NAME:N`` (N the call's position from 1 when the
  index is not a number); a call without a tool name is ignored. Its arguments are built as
  they arrive: ``argument key="K" type="T"`` adds ``"K": VALUE`` to a JSON object, a string
  VALUE JSON-escaped and quoted, any other VALUE its literal as written (leading whitespace
  dropped; an empty literal drops the argument); an argument without a key or with an unknown
  type is ignored. A call whose first child is ``json`` has the json body as its arguments
  (stripped). A closed call with no argument has ``{}``. A call closed by a later tag (the next
  call, another block) counts as closed; a call still open when the turn ends is *incomplete*.
  Text between the elements of a call is dropped.

Both formats:

- An incomplete call (the turn ended inside it: ``max_tokens`` reached, or an unenforced model
  ended the turn there) is never one of the ``tool_calls``: it is reported apart, as
  ``incomplete_tool_call`` in OpenAI's call shape with the arguments as generated (K3: an open
  string is not closed), so a caller can show or drop it; streamed, its deltas have already
  gone out and the final delta says ``incomplete_tool_call=index``.
- Ids are taken by the matchers' contract (:func:`enforcer.ids.as_token_id`): an id that
  is not an integer in ``range(vocab_size)`` is skipped, as a hole in the vocabulary is; the
  parsers never raise on generated output.

Cost: O(1) per token (a K3 tag is read once, when its ``<|sep|>`` arrives); a parser holds
only the text of the current turn. Parsers are cheap, one per sequence, not thread-safe.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

from .errors import TokenizerError
from .formats import kimi_k2, kimi_k3
from .ids import as_token_id

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


def _new_machine(vocabulary: Vocabulary, format: str, in_reasoning: bool) -> _Machine | _K3Machine:
    """The state machine of ``format`` (``ValueError`` for an unknown one)."""
    if format == "kimi_k3":
        return _K3Machine(vocabulary, in_reasoning)
    if format not in _FORMATS:
        known = ", ".join(sorted([*_FORMATS, "kimi_k3"]))
        raise ValueError(f"unknown tool-call format {format!r} (known: {known})")
    return _Machine(vocabulary, _FORMATS[format], in_reasoning)


# --------------------------------------------------------------------------------------------
# The state machine shared by both parsers


def _valid_id(token_id: Any, size: int) -> int | None:
    """``token_id`` as an int in ``range(size)``, or None (the parsers skip it)."""
    if type(token_id) is not int:
        token_id = as_token_id(token_id)
        if token_id is None:
            return None
    return token_id if 0 <= token_id < size else None


_TEXT, _THINK, _SECTION, _HEADER, _ARGUMENTS, _STOPPED = range(6)


class _Sink:
    """Receives what the machine recognises; the batch and streaming parsers implement it."""

    def content(self, data: bytes) -> None: ...
    def reasoning(self, data: bytes) -> None: ...
    def call_header(self, index: int, call_id: str, name: str) -> None: ...
    def arguments(self, index: int, data: bytes) -> None: ...
    def call_end(self, index: int) -> None: ...
    def call_incomplete(self, index: int) -> None: ...
    def stop(self) -> None: ...


class _Machine:
    """K2-family token-id state machine: O(1) per token, holds only the current call header's bytes."""

    def __init__(self, vocabulary: Vocabulary, fmt: _Format, in_reasoning: bool) -> None:
        self._markers = fmt.markers(vocabulary)
        if in_reasoning and self._markers.think_begin is None:
            raise TokenizerError("in_reasoning=True but the tokenizer has no think tokens")
        self._read_header = fmt.read_header
        self._token_bytes = vocabulary.token_bytes
        self._size = vocabulary.vocab_size
        self._mode = _THINK if in_reasoning else _TEXT
        self._header = bytearray()
        self._calls = 0

    @property
    def stopped(self) -> bool:
        return self._mode == _STOPPED

    def step(self, token_id: int, sink: _Sink) -> None:
        """Consume one id and report to ``sink`` what it completes."""
        mode = self._mode
        if mode == _STOPPED or (token_id := _valid_id(token_id, self._size)) is None:
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
        """End the turn: a call still in its arguments is incomplete; tell the sink (idempotent)."""
        if self._mode == _STOPPED:
            return
        if self._mode == _ARGUMENTS:
            sink.call_incomplete(self._calls - 1)
        self._mode = _STOPPED
        sink.stop()

    def _end_call(self, sink: _Sink) -> None:
        """Close the open call, if one is in its arguments (the caller sets the next mode)."""
        if self._mode == _ARGUMENTS:
            sink.call_end(self._calls - 1)


# --------------------------------------------------------------------------------------------
# The Kimi K3 state machine

_ROOT, _BLOCK_THINK, _BLOCK_RESPONSE, _BLOCK_TOOLS, _CALL, _ARGUMENT, _RAW_JSON, _IGNORED = range(8)
_K3_BLOCKS = {kimi_k3.THINK: _BLOCK_THINK, kimi_k3.RESPONSE: _BLOCK_RESPONSE, kimi_k3.TOOLS: _BLOCK_TOOLS}
_BODY_NONE, _BODY_PAIRS, _BODY_RAW = range(3)
"""What the open call's body turned out to be: nothing yet, ``argument`` elements, or ``json``."""

_K3_MAX_DEPTH = 64
"""Open elements kept at most; an unreadable tag past it opens no element (bounds the stack)."""

_INDEX = re.compile(r"[0-9]{1,18}")
_JSON_WHITESPACE = b" \t\r\n"
_STRING_ESCAPES = {bytes([b]): json.dumps(chr(b))[1:-1].encode() for b in range(0x80)}
_MUST_ESCAPE = re.compile(rb'[\x00-\x1f"\\]')


def _json_string_bytes(data: bytes) -> bytes:
    """UTF-8 bytes as the inside of a JSON string, escaped as ``json.dumps(ensure_ascii=False)``
    escapes. Only ASCII bytes change, so a character split across tokens stays intact."""
    return _MUST_ESCAPE.sub(lambda match: _STRING_ESCAPES[match.group()], data)


@dataclass(slots=True)
class _Element:
    """One open K3 element: its kind, its tag word (what a close tag names) and, for an
    argument, whether its value is a string and the ``"KEY": `` prefix it has not written yet."""

    kind: int
    name: str
    string: bool = False
    pending: bytes | None = None


class _K3Machine:
    """Kimi K3 state machine over the stack of open elements (see the module docstring).

    O(1) per text token; a tag's text is held until its ``<|sep|>`` and read once.
    """

    def __init__(self, vocabulary: Vocabulary, in_reasoning: bool) -> None:
        self._end = vocabulary.token_id(kimi_k3.END_OF_MSG)
        self._open = vocabulary.token_id(kimi_k3.OPEN)
        self._close = vocabulary.token_id(kimi_k3.CLOSE)
        self._sep = vocabulary.token_id(kimi_k3.SEP)
        self._token_bytes = vocabulary.token_bytes
        self._size = vocabulary.vocab_size
        first = _Element(_BLOCK_THINK, kimi_k3.THINK) if in_reasoning else _Element(_BLOCK_RESPONSE, kimi_k3.RESPONSE)
        self._stack = [_Element(_ROOT, kimi_k3.MESSAGE), first]
        self._tag: bytearray | None = None
        self._closing = False
        self._stopped = False
        self._calls = 0
        self._body = _BODY_NONE
        self._written = False

    @property
    def stopped(self) -> bool:
        return self._stopped

    def step(self, token_id: int, sink: _Sink) -> None:
        """Consume one id and report to ``sink`` what it completes."""
        if self._stopped or (token_id := _valid_id(token_id, self._size)) is None:
            return
        if token_id == self._end:
            self.finish(sink)
        elif token_id == self._open or token_id == self._close:
            self._tag = bytearray()
            self._closing = token_id == self._close
        elif token_id == self._sep:
            if self._tag is not None:
                text = _decode(self._tag)
                self._tag = None
                if self._closing:
                    self._close_tag(text.strip(), sink)
                else:
                    self._open_tag(text, sink)
        else:
            data = self._token_bytes(token_id)
            if not data:
                return
            if self._tag is not None:
                self._tag += data
            else:
                self._text(data, sink)

    def finish(self, sink: _Sink) -> None:
        """End the turn: an open call is incomplete, as generated (nothing is closed; idempotent)."""
        if self._stopped:
            return
        if any(element.kind == _CALL for element in self._stack):
            sink.call_incomplete(self._calls - 1)
        self._stopped = True
        sink.stop()

    def _text(self, data: bytes, sink: _Sink) -> None:
        top = self._stack[-1]
        if top.kind in (_ROOT, _BLOCK_RESPONSE):
            sink.content(data)
        elif top.kind == _BLOCK_THINK:
            sink.reasoning(data)
        elif top.kind == _RAW_JSON:
            sink.arguments(self._calls - 1, data)
        elif top.kind == _ARGUMENT:
            if top.string:
                sink.arguments(self._calls - 1, _json_string_bytes(data))
                return
            if top.pending is not None:
                data = data.lstrip(_JSON_WHITESPACE)
                if not data:
                    return
                sink.arguments(self._calls - 1, self._separator() + top.pending)
                top.pending = None
            sink.arguments(self._calls - 1, data)

    def _separator(self) -> bytes:
        """What comes before the open call's next ``"KEY": VALUE``."""
        first = not self._written
        self._written = True
        return b"{" if first else b", "

    def _open_tag(self, text: str, sink: _Sink) -> None:
        read = kimi_k3.read_tag(text)
        if read is None:
            words = text.split(maxsplit=1)
            self._push_ignored(words[0] if words else "")
            return
        name, attributes = read
        if name == kimi_k3.MESSAGE:
            self._pop_to(_ROOT, sink)
        elif name in _K3_BLOCKS:
            self._pop_to(_ROOT, sink)
            self._stack.append(_Element(_K3_BLOCKS[name], name))
        elif name == kimi_k3.CALL:
            self._open_call(attributes, sink)
        elif name == kimi_k3.ARGUMENT:
            self._open_argument(attributes, sink)
        elif name == kimi_k3.JSON_TAG and self._pop_to(_CALL, sink) and self._body == _BODY_NONE:
            self._body = _BODY_RAW
            self._stack.append(_Element(_RAW_JSON, name))
        else:
            self._push_ignored(name)

    def _open_call(self, attributes: dict[str, str], sink: _Sink) -> None:
        if not self._pop_to(_BLOCK_TOOLS, sink):
            self._pop_to(_ROOT, sink)
            self._stack.append(_Element(_BLOCK_TOOLS, kimi_k3.TOOLS))
        name = attributes.get("tool")
        if not name:
            self._push_ignored(kimi_k3.CALL)
            return
        index = attributes.get("index", "")
        self._calls += 1
        number = int(index) if _INDEX.fullmatch(index) else self._calls
        self._body, self._written = _BODY_NONE, False
        self._stack.append(_Element(_CALL, kimi_k3.CALL))
        sink.call_header(self._calls - 1, kimi_k3.call_id(name, number), name)

    def _open_argument(self, attributes: dict[str, str], sink: _Sink) -> None:
        key, json_type = attributes.get("key"), attributes.get("type")
        if (
            not self._pop_to(_CALL, sink)
            or self._body == _BODY_RAW
            or key is None
            or json_type not in kimi_k3.VALUE_TYPES
        ):
            self._push_ignored(kimi_k3.ARGUMENT)
            return
        self._body = _BODY_PAIRS
        prefix = json.dumps(key, ensure_ascii=False).encode() + b": "
        if json_type == "string":
            sink.arguments(self._calls - 1, self._separator() + prefix + b'"')
            self._stack.append(_Element(_ARGUMENT, kimi_k3.ARGUMENT, string=True))
        else:
            self._stack.append(_Element(_ARGUMENT, kimi_k3.ARGUMENT, pending=prefix))

    def _close_tag(self, name: str, sink: _Sink) -> None:
        for depth in range(len(self._stack) - 1, -1, -1):
            if self._stack[depth].name == name:
                self._pop_above(max(depth, 1) - 1, sink)
                return

    def _pop_to(self, kind: int, sink: _Sink) -> bool:
        """Close the elements above the innermost one of ``kind``; False (nothing closed) if none."""
        for depth in range(len(self._stack) - 1, -1, -1):
            if self._stack[depth].kind == kind:
                self._pop_above(depth, sink)
                return True
        return False

    def _pop_above(self, depth: int, sink: _Sink) -> None:
        while len(self._stack) > depth + 1:
            element = self._stack.pop()
            if element.kind == _ARGUMENT and element.string:
                sink.arguments(self._calls - 1, b'"')
            elif element.kind == _CALL:
                if self._body != _BODY_RAW:
                    sink.arguments(self._calls - 1, b"}" if self._written else b"{}")
                sink.call_end(self._calls - 1)

    def _push_ignored(self, name: str) -> None:
        if len(self._stack) < _K3_MAX_DEPTH:
            self._stack.append(_Element(_IGNORED, name))


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
        calls = [_tool_call(i, n, _decode(a).strip()) for i, n, a in self.calls]
        return _result(_decode(self.content_bytes), _decode(self.reasoning_bytes), calls, self.incomplete)


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
    machine = _new_machine(vocabulary, format, in_reasoning)
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
        self._machine = _new_machine(vocabulary, format, in_reasoning)
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
