"""What every family's output reader shares: the sink it reports to, and the id contract.

An output reader is a token-id state machine, one per sequence: ``step(token_id, sink)``
consumes one generated id and tells ``sink`` what it completes, ``finish(sink)`` ends the turn
(idempotent), ``stopped`` says the stop id arrived. :mod:`enforcer.parser` drives it for the
batch and the streaming parser, so both agree by construction. Readers never raise on
generated output; O(1) per token unless the family says otherwise. :class:`TurnReader` is the
part of a reader outside the calls (the stop id, content, the think block), which the families
whose calls sit between marker ids share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Collection, Protocol

from ..errors import TokenizerError
from ..ids import as_token_id

if TYPE_CHECKING:
    from ..vocabulary import Vocabulary

__all__ = ["OutputReader", "Sink", "TurnReader", "decode", "optional_id", "think_ids", "valid_id"]


class Sink:
    """Receives what a reader recognises; the batch and streaming parsers implement it."""

    def content(self, data: bytes) -> None: ...
    def reasoning(self, data: bytes) -> None: ...
    def call_header(self, index: int, call_id: str, name: str) -> None: ...
    def arguments(self, index: int, data: bytes) -> None: ...
    def call_end(self, index: int) -> None: ...
    def call_incomplete(self, index: int) -> None: ...
    def stop(self) -> None: ...


class OutputReader(Protocol):
    @property
    def stopped(self) -> bool: ...
    def step(self, token_id: int, sink: Sink) -> None: ...
    def finish(self, sink: Sink) -> None: ...


def valid_id(token_id: Any, size: int) -> int | None:
    """``token_id`` as an int in ``range(size)``, or None (readers skip it)."""
    if type(token_id) is not int:
        token_id = as_token_id(token_id)
        if token_id is None:
            return None
    return token_id if 0 <= token_id < size else None


def decode(data: bytes | bytearray) -> str:
    return bytes(data).decode("utf-8", errors="replace")


def optional_id(vocabulary: Any, name: str) -> int | None:
    """The id of token ``name``, or None when the vocabulary lacks it."""
    try:
        return vocabulary.token_id(name)
    except TokenizerError:
        return None


def think_ids(vocabulary: "Vocabulary", begin: str, end: str) -> tuple[int | None, int | None]:
    """Both think ids, or neither (``TokenizerError`` when the vocabulary has only one)."""
    think_begin, think_end = optional_id(vocabulary, begin), optional_id(vocabulary, end)
    if (think_begin is None) != (think_end is None):
        raise TokenizerError(f"the tokenizer has one think token but lacks {begin if think_begin is None else end!r}")
    return think_begin, think_end


TEXT, THINK, STOPPED = range(3)
"""The modes of a :class:`TurnReader` outside the calls (a family adds its own from 3 on)."""


class TurnReader:
    """A reader's part outside the calls, by id: ``stop`` ends the turn (later ids are ignored);
    text is content, or reasoning between ``think_begin`` and ``think_end`` (a think id out of
    place is dropped); ids outside the vocabulary are skipped. A family subclasses it with its
    structural ids (``markers``, handed to :meth:`_marker`, which sets the mode), what the text
    of a call does (:meth:`_call_text`, in any mode past ``STOPPED``) and what the turn end
    closes (:meth:`_end_turn`). O(1) per token here."""

    def __init__(self, vocabulary: "Vocabulary", stop: int, think: tuple[int | None, int | None],
                 markers: Collection[int], in_reasoning: bool) -> None:
        self._think_begin, self._think_end = think
        if in_reasoning and self._think_begin is None:
            raise TokenizerError("in_reasoning=True but the tokenizer has no think tokens")
        self._stop = stop
        self._markers = frozenset(markers)
        self._token_bytes = vocabulary.token_bytes
        self._size = vocabulary.vocab_size
        self._mode = THINK if in_reasoning else TEXT

    @property
    def stopped(self) -> bool:
        return self._mode == STOPPED

    def step(self, token_id: int, sink: Sink) -> None:
        """Consume one id and report to ``sink`` what it completes."""
        mode = self._mode
        if mode == STOPPED or (token_id := valid_id(token_id, self._size)) is None:
            return
        if token_id == self._stop:
            self.finish(sink)
        elif token_id in self._markers:
            self._marker(token_id, sink)
        elif token_id == self._think_begin:
            if mode == TEXT:
                self._mode = THINK
        elif token_id == self._think_end:
            if mode == THINK:
                self._mode = TEXT
        else:
            data = self._token_bytes(token_id)
            if not data:
                return
            if mode == TEXT:
                sink.content(data)
            elif mode == THINK:
                sink.reasoning(data)
            else:
                self._call_text(data, sink)

    def finish(self, sink: Sink) -> None:
        """End the turn: close what is open (:meth:`_end_turn`) and tell the sink (idempotent)."""
        if self._mode == STOPPED:
            return
        self._end_turn(sink)
        self._mode = STOPPED
        sink.stop()

    def _marker(self, token_id: int, sink: Sink) -> None:
        """One of the family's structural ids arrived."""
        raise NotImplementedError

    def _call_text(self, data: bytes, sink: Sink) -> None:
        """Text inside a call (the mode is the family's)."""
        raise NotImplementedError

    def _end_turn(self, sink: Sink) -> None:
        """The turn ends in the current mode (nothing to close by default)."""
