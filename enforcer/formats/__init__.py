"""Tool-call formats: templates as data (:mod:`.base`), one package per model family
(:mod:`.kimi_k2`, :mod:`.kimi_k3`, ...), found by :mod:`.registry`."""

from __future__ import annotations

from .base import (ArgumentTag, ArgumentValue, CallHeader, CallTag, Edge, FormatSpec, FreeText, JsonArguments,
                   NamedJson, Place, Separator, Text, Word)
from .registry import FormatFamily, detect_family, families, family_of, format_names, get_family

FORMAT_NAMES = format_names()
"""The names ``format=`` takes (a :class:`FormatSpec` is taken too, e.g. ``kimi_k3.spec(any_order=True)``)."""


def get_format(name: str | FormatSpec) -> FormatSpec:
    """The :class:`FormatSpec` called ``name`` (a spec is returned as is)."""
    if isinstance(name, FormatSpec):
        return name
    return family_of(name).formats[name]()


__all__ = ["FORMAT_NAMES", "ArgumentTag", "ArgumentValue", "CallHeader", "CallTag", "Edge", "FormatFamily", "FormatSpec",
           "FreeText", "JsonArguments", "NamedJson", "Place", "Separator", "Text", "Word", "detect_family", "families", "family_of",
           "get_family", "get_format"]
