"""Kimi K2 (Instruct, 0905, Thinking): the tool-call section as data.

Token names only; ids are always read from the tokenizer (``Vocabulary.token_id``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ..base import CALL_ID, CALL_ID_PREFIX, CALL_ID_SEPARATOR, call_id  # noqa: F401 - the output reader and prompt use them
from ..messages import think_resume

if TYPE_CHECKING:
    from ...vocabulary import Vocabulary
    from ..base import FormatSpec
    from ..registry import FormatFamily

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


def resume(prompt_ids: Sequence[int], vocabulary: "Vocabulary") -> str | None:
    """The place a turn starts in after ``prompt_ids``: inside reasoning when the last assistant
    header is followed by an open ``<think>``, after it when ``</think>`` closed it, otherwise
    ``None`` (the start, where a think block may still open)."""
    return think_resume(prompt_ids, vocabulary.special_tokens, IM_ASSISTANT, THINK_BEGIN, THINK_END)


def spec() -> "FormatSpec":
    """The K2 turn: free text (a ``<think>`` block may open at the start), then optionally
    ``SECTION_BEGIN (CALL_BEGIN functions.NAME:N ARGUMENT_BEGIN {json} CALL_END)+ SECTION_END``,
    then ``<|im_end|>``. The section may also open inside reasoning (K2-Thinking does)."""
    from ..base import CallHeader, Edge, FormatSpec, FreeText, JsonArguments, Place

    to_section = Edge(SECTION_BEGIN, "section", "may_call")
    end_turn = Edge(IM_END, "done", "may_end")
    places = (
        Place("start", FreeText("content", "none"), (Edge(THINK_BEGIN, "think", "may_think"), to_section, end_turn),
              after_text="content"),
        Place("content", FreeText("content", "none"), (to_section, end_turn)),
        Place("think", FreeText("think", "text"), (Edge(THINK_END, "content"), to_section, end_turn)),
        Place("section", None, (Edge(CALL_BEGIN, "header"),), in_section=True),
        Place("header", CallHeader(CALL_ID),  # the header is the call id (N counts the dialog's calls)
              (Edge(ARGUMENT_BEGIN, "arguments"),), in_section=True),
        Place("arguments", JsonArguments(), (Edge(CALL_END, "after_call"),), in_section=True),
        Place("after_call", None, (Edge(SECTION_END, "after_section"), Edge(CALL_BEGIN, "header", "parallel")),
              ends_call=True, in_section=True),
        Place("after_section", None, (Edge(IM_END, "done"),), in_section=True),
        Place("done"),
    )
    return FormatSpec(
        name="kimi_k2",
        stop=IM_END,
        places=places,
        start="start",
        controlled=(*TOOL_TOKENS, THINK_BEGIN, THINK_END),
        first_index=0,
        counter_scope="dialog",
        call_begin=CALL_BEGIN,
        call_id=CALL_ID,
        resume=resume,
    )


def _family() -> "FormatFamily":
    from ..registry import FormatFamily

    return FormatFamily(
        name="kimi_k2",
        formats={"kimi_k2": spec},
        markers=(SECTION_BEGIN,),
        validation_tokens=(*TOOL_TOKENS, THINK_BEGIN, THINK_END, IM_END, IM_USER, IM_ASSISTANT, IM_SYSTEM, IM_MIDDLE),
        reader=f"{__name__}.output:new_reader",
        prompt=f"{__name__}.prompt",
        test_tokenizer="enforcer.testing.tokenizers:kimi_k2_tokenizer",
        description="Kimi K2",
        parser_class="KimiK2",
    )


FAMILY = _family()
"""This package's entry in :mod:`enforcer.formats.registry`."""
