"""Tool-call formats: templates as data (:mod:`.base`), one module per model family."""

from __future__ import annotations

from . import kimi_k2
from .base import CallHeader, FormatSpec, JsonArguments, Segment, Token

_FORMATS = {"kimi_k2": kimi_k2.spec}


def get_format(name: str | FormatSpec) -> FormatSpec:
    """The :class:`FormatSpec` called ``name`` (a spec is returned as is)."""
    if isinstance(name, FormatSpec):
        return name
    try:
        return _FORMATS[name]()
    except KeyError:
        raise ValueError(f"unknown tool-call format {name!r}; known: {sorted(_FORMATS)}") from None


__all__ = ["CallHeader", "FormatSpec", "JsonArguments", "Segment", "Token", "get_format"]
