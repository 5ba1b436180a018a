"""Reading formats whose calls sit in a marker-delimited section (Kimi K2, DeepSeek-V3.1).

The shape: free text or a think block, then ``SECTION_BEGIN (CALL_BEGIN header ARGUMENT_BEGIN
arguments CALL_END)+ SECTION_END``, then the stop token. A family gives its marker ids
(:class:`Markers`) and how a header reads (text -> call id and name, the call's index given).
Rules (Kimi K2's, documented in :mod:`enforcer.parser`): the stop id ends the turn; reasoning
is the text between the think markers, and ends at the section begin too; a ``CALL_BEGIN``
outside a section opens a call as if the section had begun; stray markers are dropped; a call is
reported once its ``ARGUMENT_BEGIN`` arrived; arguments are the text up to the marker that ends
the call (stripped by the parser); a call still open when the turn ends is incomplete.
O(1) per token, holds only the current call header's bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ..errors import TokenizerError
from .reading import Sink, optional_id, valid_id

if TYPE_CHECKING:
    from ..vocabulary import Vocabulary

__all__ = ["Markers", "SectionReader", "think_ids"]


@dataclass(frozen=True, slots=True)
class Markers:
    """Marker token ids of one section format for one vocabulary (``None``: it lacks the think
    tokens)."""

    section_begin: int
    section_end: int
    call_begin: int
    argument_begin: int
    call_end: int
    think_begin: int | None
    think_end: int | None
    stop: int


def think_ids(vocabulary: "Vocabulary", begin: str, end: str) -> tuple[int | None, int | None]:
    """Both think ids, or neither (``TokenizerError`` when the vocabulary has only one)."""
    think_begin, think_end = optional_id(vocabulary, begin), optional_id(vocabulary, end)
    if (think_begin is None) != (think_end is None):
        raise TokenizerError(f"the tokenizer has one think token but lacks {begin if think_begin is None else end!r}")
    return think_begin, think_end


_TEXT, _THINK, _SECTION, _HEADER, _ARGUMENTS, _STOPPED = range(6)


class SectionReader:
    """The section formats' output reader. ``read_header(text, index) -> (call id, name)``."""

    def __init__(self, vocabulary: "Vocabulary", markers: Markers, read_header: Callable[[str, int], tuple[str, str]],
                 in_reasoning: bool) -> None:
        self._markers = markers
        if in_reasoning and markers.think_begin is None:
            raise TokenizerError("in_reasoning=True but the tokenizer has no think tokens")
        self._read_header = read_header
        self._token_bytes = vocabulary.token_bytes
        self._size = vocabulary.vocab_size
        self._mode = _THINK if in_reasoning else _TEXT
        self._header = bytearray()
        self._calls = 0

    @property
    def stopped(self) -> bool:
        return self._mode == _STOPPED

    def step(self, token_id: int, sink: Sink) -> None:
        """Consume one id and report to ``sink`` what it completes."""
        mode = self._mode
        if mode == _STOPPED or (token_id := valid_id(token_id, self._size)) is None:
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
                call_id, name = self._read_header(self._header.decode("utf-8", errors="replace"), self._calls)
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

    def finish(self, sink: Sink) -> None:
        """End the turn: a call still in its arguments is incomplete; tell the sink (idempotent)."""
        if self._mode == _STOPPED:
            return
        if self._mode == _ARGUMENTS:
            sink.call_incomplete(self._calls - 1)
        self._mode = _STOPPED
        sink.stop()

    def _end_call(self, sink: Sink) -> None:
        """Close the open call, if one is in its arguments (the caller sets the next mode)."""
        if self._mode == _ARGUMENTS:
            sink.call_end(self._calls - 1)
