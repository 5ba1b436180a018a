"""Kimi K3 output ids -> OpenAI message parts: a state machine over the stack of open elements.
O(1) per text token; a tag's text is held until its ``<|sep|>`` and read once.

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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..reading import Sink, decode, valid_id
from . import (ARGUMENT, CALL, CLOSE, END_OF_MSG, JSON_TAG, MEMBER_SEPARATOR, MESSAGE, OBJECT_CLOSE, OBJECT_OPEN, OPEN,
               QUOTE, RESPONSE, SEP, THINK, TOOLS, VALUE_TYPES, call_id, member_prefix, read_tag, string_body)

if TYPE_CHECKING:
    from ...vocabulary import Vocabulary

_ROOT, _BLOCK_THINK, _BLOCK_RESPONSE, _BLOCK_TOOLS, _CALL, _ARGUMENT, _RAW_JSON, _IGNORED = range(8)
_K3_BLOCKS = {THINK: _BLOCK_THINK, RESPONSE: _BLOCK_RESPONSE, TOOLS: _BLOCK_TOOLS}
_BODY_NONE, _BODY_PAIRS, _BODY_RAW = range(3)
"""What the open call's body turned out to be: nothing yet, ``argument`` elements, or ``json``."""

_K3_MAX_DEPTH = 64
"""Open elements kept at most; an unreadable tag past it opens no element (bounds the stack)."""

_INDEX = re.compile(r"[0-9]{1,18}")
_JSON_WHITESPACE = b" \t\r\n"


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
        self._end = vocabulary.token_id(END_OF_MSG)
        self._open = vocabulary.token_id(OPEN)
        self._close = vocabulary.token_id(CLOSE)
        self._sep = vocabulary.token_id(SEP)
        self._token_bytes = vocabulary.token_bytes
        self._size = vocabulary.vocab_size
        first = _Element(_BLOCK_THINK, THINK) if in_reasoning else _Element(_BLOCK_RESPONSE, RESPONSE)
        self._stack = [_Element(_ROOT, MESSAGE), first]
        self._tag: bytearray | None = None
        self._closing = False
        self._stopped = False
        self._calls = 0
        self._body = _BODY_NONE
        self._written = False

    @property
    def stopped(self) -> bool:
        return self._stopped

    def step(self, token_id: int, sink: Sink) -> None:
        """Consume one id and report to ``sink`` what it completes."""
        if self._stopped or (token_id := valid_id(token_id, self._size)) is None:
            return
        if token_id == self._end:
            self.finish(sink)
        elif token_id == self._open or token_id == self._close:
            self._tag = bytearray()
            self._closing = token_id == self._close
        elif token_id == self._sep:
            if self._tag is not None:
                text = decode(self._tag)
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

    def finish(self, sink: Sink) -> None:
        """End the turn: an open call is incomplete, as generated (nothing is closed; idempotent)."""
        if self._stopped:
            return
        if any(element.kind == _CALL for element in self._stack):
            sink.call_incomplete(self._calls - 1)
        self._stopped = True
        sink.stop()

    def _text(self, data: bytes, sink: Sink) -> None:
        top = self._stack[-1]
        if top.kind in (_ROOT, _BLOCK_RESPONSE):
            sink.content(data)
        elif top.kind == _BLOCK_THINK:
            sink.reasoning(data)
        elif top.kind == _RAW_JSON:
            sink.arguments(self._calls - 1, data)
        elif top.kind == _ARGUMENT:
            if top.string:
                sink.arguments(self._calls - 1, string_body(data))
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
        return OBJECT_OPEN if first else MEMBER_SEPARATOR

    def _open_tag(self, text: str, sink: Sink) -> None:
        read = read_tag(text)
        if read is None:
            words = text.split(maxsplit=1)
            self._push_ignored(words[0] if words else "")
            return
        name, attributes = read
        if name == MESSAGE:
            self._pop_to(_ROOT, sink)
        elif name in _K3_BLOCKS:
            self._pop_to(_ROOT, sink)
            self._stack.append(_Element(_K3_BLOCKS[name], name))
        elif name == CALL:
            self._open_call(attributes, sink)
        elif name == ARGUMENT:
            self._open_argument(attributes, sink)
        elif name == JSON_TAG and self._pop_to(_CALL, sink) and self._body == _BODY_NONE:
            self._body = _BODY_RAW
            self._stack.append(_Element(_RAW_JSON, name))
        else:
            self._push_ignored(name)

    def _open_call(self, attributes: dict[str, str], sink: Sink) -> None:
        if not self._pop_to(_BLOCK_TOOLS, sink):
            self._pop_to(_ROOT, sink)
            self._stack.append(_Element(_BLOCK_TOOLS, TOOLS))
        name = attributes.get("tool")
        if not name:
            self._push_ignored(CALL)
            return
        index = attributes.get("index", "")
        self._calls += 1
        number = int(index) if _INDEX.fullmatch(index) else self._calls
        self._body, self._written = _BODY_NONE, False
        self._stack.append(_Element(_CALL, CALL))
        sink.call_header(self._calls - 1, call_id(name, number), name)

    def _open_argument(self, attributes: dict[str, str], sink: Sink) -> None:
        key, json_type = attributes.get("key"), attributes.get("type")
        if (
            not self._pop_to(_CALL, sink)
            or self._body == _BODY_RAW
            or key is None
            or json_type not in VALUE_TYPES
        ):
            self._push_ignored(ARGUMENT)
            return
        self._body = _BODY_PAIRS
        prefix = member_prefix(key)
        if json_type == "string":
            sink.arguments(self._calls - 1, self._separator() + prefix + QUOTE)
            self._stack.append(_Element(_ARGUMENT, ARGUMENT, string=True))
        else:
            self._stack.append(_Element(_ARGUMENT, ARGUMENT, pending=prefix))

    def _close_tag(self, name: str, sink: Sink) -> None:
        for depth in range(len(self._stack) - 1, -1, -1):
            if self._stack[depth].name == name:
                self._pop_above(max(depth, 1) - 1, sink)
                return

    def _pop_to(self, kind: int, sink: Sink) -> bool:
        """Close the elements above the innermost one of ``kind``; False (nothing closed) if none."""
        for depth in range(len(self._stack) - 1, -1, -1):
            if self._stack[depth].kind == kind:
                self._pop_above(depth, sink)
                return True
        return False

    def _pop_above(self, depth: int, sink: Sink) -> None:
        while len(self._stack) > depth + 1:
            element = self._stack.pop()
            if element.kind == _ARGUMENT and element.string:
                sink.arguments(self._calls - 1, QUOTE)
            elif element.kind == _CALL:
                if self._body != _BODY_RAW:
                    sink.arguments(self._calls - 1, OBJECT_CLOSE if self._written else OBJECT_OPEN + OBJECT_CLOSE)
                sink.call_end(self._calls - 1)

    def _push_ignored(self, name: str) -> None:
        if len(self._stack) < _K3_MAX_DEPTH:
            self._stack.append(_Element(_IGNORED, name))


def new_reader(vocabulary: "Vocabulary", in_reasoning: bool = False) -> _K3Machine:
    return _K3Machine(vocabulary, in_reasoning)
