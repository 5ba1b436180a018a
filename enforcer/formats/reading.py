"""What every family's output reader shares: the sink it reports to, and the id contract.

An output reader is a token-id state machine, one per sequence: ``step(token_id, sink)``
consumes one generated id and tells ``sink`` what it completes, ``finish(sink)`` ends the turn
(idempotent), ``stopped`` says the stop id arrived. :mod:`enforcer.parser` drives it for the
batch and the streaming parser, so both agree by construction. Readers never raise on
generated output; O(1) per token unless the family says otherwise.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..errors import TokenizerError
from ..ids import as_token_id

__all__ = ["OutputReader", "Sink", "decode", "optional_id", "valid_id"]


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
