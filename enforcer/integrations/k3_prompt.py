"""Kimi K3 prompts read by token id, for the vLLM adapter (tools the prompt declares, and
whether generation starts inside the think block).

The tool declaration is the body of the first ``<|open|>message role="system"
type="tool-declare"<|sep|>`` message (attributes in any order): a ``# Tools`` header, a sentence
and the tools as JSON in a ```` ```json ```` fence (:func:`enforcer.declarations.encode_chat`
writes it so). Structure is found by the four control ids only; tag text and the body are read
from the exact token bytes, so any tokenization of the text (piece by piece, or a chat template
tokenized whole) reads the same. Pure functions; cost linear in the prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..formats import kimi_k3
from ..vocabulary import Vocabulary

__all__ = ["TOOL_DECLARE_TYPE", "opens_reasoning", "read_tool_declaration"]

TOOL_DECLARE_TYPE = "tool-declare"
"""The ``type`` attribute of K3's tool-declaration system message."""

_FENCE = re.compile(r"```json[ \t]*\r?\n(.*?)\r?\n```", re.DOTALL)
"""The fenced JSON: a JSON text cannot hold a raw newline inside a string, so the first
newline followed by a fence closes it."""


def _text(vocabulary: Vocabulary, ids: Sequence[int]) -> str | None:
    """The UTF-8 text of ``ids``, or None when one of them is not a text token."""
    data = bytearray()
    for token_id in ids:
        try:
            piece = vocabulary.token_bytes(int(token_id))
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if piece is None:
            return None
        data += piece
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def read_tool_declaration(prompt_ids: Iterable[int], vocabulary: Vocabulary) -> list[Any] | None:
    """The tools of the prompt's first K3 tool-declaration message, or None.

    None when there is no such message, when its body is not closed by ``<|close|>``, holds a
    non-text id, has no ```` ```json ```` fence or the fenced text is not a JSON array. Never
    raises on a strange prompt; raises ``TokenizerError`` when the vocabulary lacks the K3
    control tokens. Cost: O(len(prompt_ids)).
    """
    ids = list(prompt_ids)
    open_id, close_id, sep_id = (vocabulary.token_id(n) for n in (kimi_k3.OPEN, kimi_k3.CLOSE, kimi_k3.SEP))
    position = 0
    while True:
        try:
            start = ids.index(open_id, position)
            sep = ids.index(sep_id, start + 1)
        except ValueError:
            return None
        position = start + 1
        text = _text(vocabulary, ids[start + 1:sep])
        tag = kimi_k3.read_tag(text) if text is not None else None
        if tag is None or tag[0] != kimi_k3.MESSAGE:
            continue
        if tag[1].get("role") != "system" or tag[1].get("type") != TOOL_DECLARE_TYPE:
            continue
        try:
            end = ids.index(close_id, sep + 1)
        except ValueError:
            return None
        body = _text(vocabulary, ids[sep + 1:end])
        fence = _FENCE.search(body) if body is not None else None
        if fence is None:
            return None
        try:
            tools = json.loads(fence.group(1))
        except (ValueError, RecursionError):
            return None
        return tools if isinstance(tools, list) else None


def opens_reasoning(prompt_ids: Sequence[int] | None, vocabulary: Vocabulary) -> bool:
    """Whether generation after ``prompt_ids`` starts inside a think block (the prompt ends
    with ``<|open|>think<|sep|>``). False for an empty prompt; never raises for a K3 vocabulary."""
    if not prompt_ids:
        return False
    return kimi_k3.resume(list(prompt_ids), vocabulary) == "think"
