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

from .reading import STOPPED, TEXT, THINK, Sink, TurnReader

if TYPE_CHECKING:
    from ..vocabulary import Vocabulary

__all__ = ["Markers", "SectionReader"]


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


_SECTION, _HEADER, _ARGUMENTS = range(STOPPED + 1, STOPPED + 4)


class SectionReader(TurnReader):
    """The section formats' output reader. ``read_header(text, index) -> (call id, name)``."""

    def __init__(self, vocabulary: "Vocabulary", markers: Markers, read_header: Callable[[str, int], tuple[str, str]],
                 in_reasoning: bool) -> None:
        m = markers
        super().__init__(vocabulary, m.stop, (m.think_begin, m.think_end),
                         (m.section_begin, m.section_end, m.call_begin, m.argument_begin, m.call_end), in_reasoning)
        self._m = m
        self._read_header = read_header
        self._header = bytearray()
        self._calls = 0

    def _marker(self, token_id: int, sink: Sink) -> None:
        mode, m = self._mode, self._m
        if token_id == m.section_begin:
            if mode in (TEXT, THINK):
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
        elif mode in (_SECTION, _HEADER, _ARGUMENTS):  # the section end
            self._end_call(sink)
            self._mode = TEXT

    def _call_text(self, data: bytes, sink: Sink) -> None:
        if self._mode == _HEADER:
            self._header += data
        elif self._mode == _ARGUMENTS:
            sink.arguments(self._calls - 1, data)

    def _end_turn(self, sink: Sink) -> None:
        """A call still in its arguments is incomplete."""
        if self._mode == _ARGUMENTS:
            sink.call_incomplete(self._calls - 1)

    def _end_call(self, sink: Sink) -> None:
        """Close the open call, if one is in its arguments (the caller sets the next mode)."""
        if self._mode == _ARGUMENTS:
            sink.call_end(self._calls - 1)
