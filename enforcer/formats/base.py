"""Tool-call formats as data: which tokens open and close a section, and what one call is.

A :class:`FormatSpec` holds token *names* and an ordered template of :data:`Segment` values;
ids are read from the vocabulary when tools are compiled. One engine
(:class:`enforcer.engine.ToolCallMatcher`) runs every spec, so a new format is a new spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True)
class Token:
    """Exactly one special token, by name."""

    name: str


@dataclass(frozen=True)
class CallHeader:
    """Text naming the call: ``template`` with ``{name}`` (one of the declared tool names) and
    ``{index}`` (the call counter). Must be followed by a :class:`Token`."""

    template: str


@dataclass(frozen=True)
class JsonArguments:
    """The chosen tool's arguments as one JSON object under its ``parameters`` schema. Must be
    followed by a :class:`Token`."""


Segment = Union[Token, CallHeader, JsonArguments]


@dataclass(frozen=True)
class FormatSpec:
    """One tool-call format. ``call`` is the template of a single call; calls follow each
    other back to back between ``section_begin`` and ``section_end``; after the section only
    ``stop`` may follow."""

    name: str
    stop: str
    section_begin: str
    section_end: str
    call: tuple[Segment, ...]
    structural: tuple[str, ...]
    """Tokens that are only allowed where the template puts them."""
    think_begin: str | None = None
    think_end: str | None = None
    assistant_header: str | None = None
    """Token that opens an assistant turn (used to read the thinking state of a prompt)."""
    first_index: int = 0
    counter_scope: str = "dialog"
    """``"dialog"``: the counter continues from the calls already in the prompt;
    ``"message"``: it restarts at ``first_index`` in every message."""
    call_begin: str | None = None
    """Token that starts a call (counted in prompts for ``counter_scope="dialog"``)."""

    def __post_init__(self) -> None:
        for i, seg in enumerate(self.call):
            if isinstance(seg, (CallHeader, JsonArguments)):
                nxt = self.call[i + 1] if i + 1 < len(self.call) else None
                if not isinstance(nxt, Token):
                    raise ValueError(f"format {self.name!r}: segment {i} must be followed by a token")
        if not self.call or not isinstance(self.call[0], Token):
            raise ValueError(f"format {self.name!r}: a call must start with a token")
        if sum(isinstance(s, CallHeader) for s in self.call) != 1:
            raise ValueError(f"format {self.name!r}: a call needs exactly one header")
