"""Kimi K2 output ids -> OpenAI message parts (:class:`~enforcer.formats.section_reader.SectionReader`).

- ``<|im_end|>`` ends the turn; later ids are ignored.
- Reasoning is the text between ``<think>`` and ``</think>``. K2-Thinking may open the
  tool-call section inside ``<think>``: reasoning then ends at the section begin.
- A ``<|tool_call_begin|>`` outside a section opens a call as if the section had begun (the
  model skipped the wrapper); stray markers elsewhere are dropped, never turned into text.
- A call is reported once its ``<|tool_call_argument_begin|>`` arrived: its id is the header
  text, its name the id without the ``functions.`` prefix (removed once) and without the
  ``:N`` counter (split on the last ``:``). Arguments are the text generated up to
  ``<|tool_call_end|>`` (or up to the marker that ends the call: the section end, the next
  call), stripped of surrounding whitespace. A call cut off before its arguments began is
  dropped; a call still open when the turn ends (``<|im_end|>`` or the end of the ids, e.g.
  ``max_tokens`` reached) is *incomplete* (see below).
- Content is the text outside reasoning and outside the section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..reading import think_ids
from ..section_reader import Markers, SectionReader
from . import ARGUMENT_BEGIN, CALL_BEGIN, CALL_END, CALL_ID_PREFIX, CALL_ID_SEPARATOR, IM_END, SECTION_BEGIN, SECTION_END, \
    THINK_BEGIN, THINK_END

if TYPE_CHECKING:
    from ...vocabulary import Vocabulary


def markers(vocabulary: "Vocabulary") -> Markers:
    think_begin, think_end = think_ids(vocabulary, THINK_BEGIN, THINK_END)
    return Markers(
        section_begin=vocabulary.token_id(SECTION_BEGIN),
        section_end=vocabulary.token_id(SECTION_END),
        call_begin=vocabulary.token_id(CALL_BEGIN),
        argument_begin=vocabulary.token_id(ARGUMENT_BEGIN),
        call_end=vocabulary.token_id(CALL_END),
        think_begin=think_begin,
        think_end=think_end,
        stop=vocabulary.token_id(IM_END),
    )


def read_header(text: str, index: int) -> tuple[str, str]:
    """Header text -> (call id, function name); ``index`` (the call's position) is not used:
    K2 writes its counter in the header."""
    call_id = text.strip()
    name = call_id
    if name.startswith(CALL_ID_PREFIX):
        name = name[len(CALL_ID_PREFIX):]
    if CALL_ID_SEPARATOR in name:
        name = name.rpartition(CALL_ID_SEPARATOR)[0]
    return call_id, name


def new_reader(vocabulary: "Vocabulary", in_reasoning: bool = False) -> SectionReader:
    return SectionReader(vocabulary, markers(vocabulary), read_header, in_reasoning)
