"""Prompts of every format family: the tool declaration, the chat layout, and reading a prompt
back by id. Each function dispatches to the family of ``format`` (its ``prompt`` module,
:mod:`enforcer.formats.registry`); see that module for the layout.

Text layouts (``render_chat``) spell markers out for the model's tokenizer to map to ids; id
layouts (``encode_chat``) add control tokens by id and encode every text piece on its own, so
message text never yields a control id. Readers recognise structure by id only. All functions are
pure; cost is linear in the size of their input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Iterable

from .formats.registry import family_of

if TYPE_CHECKING:
    from .vocabulary import Vocabulary

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "count_tool_calls",
    "encode_chat",
    "opens_reasoning",
    "read_tool_declaration",
    "render_chat",
    "render_tool_declaration",
]

_FORMAT_CONSTANTS = {"DEFAULT_SYSTEM_PROMPT": "kimi_k2", "TOOL_DECLARE_ROLE": "kimi_k2",
                     "K3_TOOLS_SENTENCE": "kimi_k3", "K3_TOOL_DECLARE_TYPE": "kimi_k3"}
"""Names this module exported before formats became packages: each is its family's constant."""


def __getattr__(name: str) -> Any:
    if name in _FORMAT_CONSTANTS:
        return getattr(family_of(_FORMAT_CONSTANTS[name]).prompt_module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def render_tool_declaration(tools: Sequence[Mapping[str, Any]], style: str = "json", format: str = "kimi_k2") -> str:
    """The body of ``format``'s tool-declaration message, in ``style`` (the family's styles:
    K2 ``json``/``typescript``, others ``json``). ``InvalidToolsError`` for a malformed tools
    list, ``ValueError`` for an unknown style or format."""
    return family_of(format).prompt_function("render_tool_declaration", "tool declaration")(tools, style)


def render_chat(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None, *,
                format: str = "kimi_k2", **options: Any) -> str:
    """The chat layout of ``messages`` in ``format`` as text with the marker names spelled out
    (``options``: the family's, e.g. ``add_generation_prompt``, ``thinking``, K2's
    ``tool_style``). ``ValueError`` naming the message for malformed input, ``InvalidToolsError``
    for bad tools, ``ValueError`` for a family whose layout is ids only."""
    return family_of(format).prompt_function("render_chat", "text chat layout")(messages, tools, **options)


def encode_chat(messages: Sequence[Mapping[str, Any]], vocabulary: "Vocabulary", *,
                tools: Sequence[Mapping[str, Any]] | None = None, format: str = "kimi_k3", **options: Any) -> list[int]:
    """The prompt ids of ``messages`` in ``format`` (``options``: the family's, e.g.
    ``add_generation_prompt``, ``thinking``); ``ValueError`` for a family without an id layout."""
    return family_of(format).prompt_function("encode_chat", "id chat layout (encode_chat)")(
        messages, vocabulary, tools=tools, **options)


def read_tool_declaration(prompt_ids: Iterable[int], vocabulary: "Vocabulary", format: str = "kimi_k2") -> list[Any] | None:
    """The tools the prompt declares in ``format``'s layout, or None (no declaration, or one that
    cannot be read back exactly). Never raises on a strange prompt; ``TokenizerError`` when the
    vocabulary lacks the family's markers."""
    return family_of(format).prompt_function("read_tool_declaration", "declaration reader")(prompt_ids, vocabulary)


def count_tool_calls(prompt_ids: Iterable[int], vocabulary: "Vocabulary", format: str = "kimi_k2") -> int:
    """The calls already in the prompt, as ``format`` counts them (its next call's counter)."""
    return family_of(format).prompt_function("count_tool_calls", "dialog-wide call counter")(prompt_ids, vocabulary)


def opens_reasoning(prompt_ids: Sequence[int] | None, vocabulary: "Vocabulary", format: str = "kimi_k2") -> bool:
    """Whether generation after ``prompt_ids`` starts inside ``format``'s think block."""
    return family_of(format).prompt_function("opens_reasoning", "reasoning reader")(prompt_ids, vocabulary)
