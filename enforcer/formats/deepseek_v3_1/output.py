"""DeepSeek-V3.1 output ids -> OpenAI message parts: the shared section reader
(:mod:`enforcer.formats.section_reader`, its rules) with V3.1's markers; a header is the bare
tool name (stripped), the call id ``functions.NAME:N`` with N its position in the message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..reading import think_ids
from ..section_reader import Markers, SectionReader
from . import CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, EOS, SEP, THINK_BEGIN, THINK_END, call_id

if TYPE_CHECKING:
    from ...vocabulary import Vocabulary


def markers(vocabulary: "Vocabulary") -> Markers:
    think_begin, think_end = think_ids(vocabulary, THINK_BEGIN, THINK_END)
    return Markers(section_begin=vocabulary.token_id(CALLS_BEGIN), section_end=vocabulary.token_id(CALLS_END),
                   call_begin=vocabulary.token_id(CALL_BEGIN), argument_begin=vocabulary.token_id(SEP),
                   call_end=vocabulary.token_id(CALL_END), think_begin=think_begin, think_end=think_end,
                   stop=vocabulary.token_id(EOS))


def read_header(text: str, index: int) -> tuple[str, str]:
    name = text.strip()
    return call_id(name, index), name


def new_reader(vocabulary: "Vocabulary", in_reasoning: bool = False) -> SectionReader:
    return SectionReader(vocabulary, markers(vocabulary), read_header, in_reasoning)
