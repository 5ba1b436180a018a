"""Kimi K2 (Instruct, 0905, Thinking): the tool-call section as data.

Token names only; ids are always read from the tokenizer (``Vocabulary.token_id``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import FormatSpec

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
THINK_BEGIN = "<think>"
THINK_END = "</think>"
IM_END = "<|im_end|>"
IM_USER = "<|im_user|>"
IM_ASSISTANT = "<|im_assistant|>"
IM_SYSTEM = "<|im_system|>"
IM_MIDDLE = "<|im_middle|>"

TOOL_TOKENS = (SECTION_BEGIN, SECTION_END, CALL_BEGIN, ARGUMENT_BEGIN, CALL_END)
"""The five tool tokens: added but not special in the real tokenizer."""

CALL_ID_PREFIX = "functions."
CALL_ID_SEPARATOR = ":"


def call_id(name: str, index: int) -> str:
    """The K2 call id ``functions.NAME:N`` (N counts every call of the dialog from 0)."""
    return f"{CALL_ID_PREFIX}{name}{CALL_ID_SEPARATOR}{index}"


def spec() -> "FormatSpec":
    """The K2 tool-call section: ``SECTION_BEGIN (CALL_BEGIN functions.NAME:N ARGUMENT_BEGIN
    {json} CALL_END)+ SECTION_END`` then ``<|im_end|>``."""
    from .base import CallHeader, FormatSpec, JsonArguments, Token

    return FormatSpec(
        name="kimi_k2",
        stop=IM_END,
        section_begin=SECTION_BEGIN,
        section_end=SECTION_END,
        call=(Token(CALL_BEGIN), CallHeader(CALL_ID_PREFIX + "{name}" + CALL_ID_SEPARATOR + "{index}"),
              Token(ARGUMENT_BEGIN), JsonArguments(), Token(CALL_END)),
        structural=TOOL_TOKENS,
        think_begin=THINK_BEGIN,
        think_end=THINK_END,
        assistant_header=IM_ASSISTANT,
        first_index=0,
        counter_scope="dialog",
        call_begin=CALL_BEGIN,
    )
