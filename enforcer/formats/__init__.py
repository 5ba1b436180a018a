"""Tool-call formats: templates as data (:mod:`.base`), one module per model family."""

from __future__ import annotations

from . import kimi_k2, kimi_k3
from .base import (ArgumentTag, ArgumentValue, CallHeader, CallTag, Edge, FormatSpec, FreeText, JsonArguments, Place,
                   Text, Word)

_FORMATS = {"kimi_k2": kimi_k2.spec, "kimi_k3": kimi_k3.spec,
            "kimi_k3_json": lambda: kimi_k3.spec(json_arguments=True)}
FORMAT_NAMES = tuple(sorted(_FORMATS))
"""The names ``format=`` takes (a :class:`FormatSpec` is taken too, e.g. ``kimi_k3.spec(any_order=True)``)."""


def get_format(name: str | FormatSpec) -> FormatSpec:
    """The :class:`FormatSpec` called ``name`` (a spec is returned as is)."""
    if isinstance(name, FormatSpec):
        return name
    try:
        return _FORMATS[name]()
    except KeyError:
        raise ValueError(f"unknown tool-call format {name!r}; known: {sorted(_FORMATS)}") from None


__all__ = ["FORMAT_NAMES", "ArgumentTag", "ArgumentValue", "CallHeader", "CallTag", "Edge", "FormatSpec", "FreeText", "JsonArguments",
           "Place", "Text", "Word", "get_format"]
