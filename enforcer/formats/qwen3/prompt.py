"""Qwen3 prompts: the tool declaration, the chat layout as text (markers spelled out; the
model's tokenizer maps them to ids), and reading a prompt back by id.

Layout (Qwen3's chat template): ``<|im_start|>ROLE\\nBODY<|im_end|>\\n`` per message; tools go
into the first system message, after its content, as a ``# Tools`` section whose
``<tools>``/``</tools>`` lines hold one tool JSON per line (``json.dumps`` default separators,
non-ASCII kept); the section's instructions are this project's wording. An assistant message is
its content then ``<tool_call>\\n{"name": "NAME", "arguments": ARGS}\\n</tool_call>`` per call
(``\\n`` before each call that follows text or a call); tool results are ``user`` messages of
``<tool_response>\\nRESULT\\n</tool_response>`` lines (consecutive results share one message).
The generation prompt is ``<|im_start|>assistant\\n`` (thinking off: plus
``<think>\\n\\n</think>\\n\\n``). Reading: the declaration is found by the ``<|im_start|>`` and
``<|im_end|>`` ids, the ``<tools>`` lines read from the exact token bytes. Pure; linear.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..messages import HistoryCall, check_tools, content_text, history_calls, tools_json
from . import (CALL_PREFIX, CALL_SEPARATOR, CALL_SUFFIX, IM_END, IM_START, THINK_BEGIN, THINK_END, TOOL_CALL,
               TOOL_CALL_END, TOOL_RESPONSE, TOOL_RESPONSE_END, resume)

if TYPE_CHECKING:
    from ...vocabulary import Vocabulary

__all__ = ["TOOLS_INSTRUCTIONS", "opens_reasoning", "read_tool_declaration", "render_chat", "render_tool_declaration"]

TOOLS_OPEN, TOOLS_CLOSE = "<tools>", "</tools>"
TOOLS_INSTRUCTIONS = ("You may call the functions declared between the tools tags. For each call, write one JSON "
                      "object with the function's name and arguments between <tool_call></tool_call> tags:\n"
                      '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')
"""The instructions after the tools (wording of this project; the layout is Qwen3's)."""


def render_tool_declaration(tools: Sequence[Mapping[str, Any]], style: str = "json") -> str:
    """The ``# Tools`` section of the system message (``style="json"`` only)."""
    if style != "json":
        raise ValueError(f"unknown declaration style {style!r} for qwen3 (known: json)")
    check_tools(tools)
    lines = [tools_json([tool], separators=None, sort_keys=False)[1:-1] for tool in tools]
    return "# Tools\n\n" + TOOLS_OPEN + "\n" + "\n".join(lines) + "\n" + TOOLS_CLOSE + "\n\n" + TOOLS_INSTRUCTIONS


def _call_text(call: HistoryCall) -> str:
    head = CALL_PREFIX.replace("{name}", json.dumps(call.name, ensure_ascii=False)[1:-1])
    return f"{TOOL_CALL}{head}{call.arguments_text}{CALL_SUFFIX}{TOOL_CALL_END}"


def render_chat(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None, *,
                add_generation_prompt: bool = True, thinking: bool = True) -> str:
    """The Qwen3 chat layout of ``messages`` as text (see the module docstring); ``ValueError``
    naming the message for malformed input, ``InvalidToolsError`` for bad tools."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ValueError("messages must be a list of message objects")
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise ValueError(f"messages[{position}] must be an object with a string 'role'")
    parts: list[str] = []
    rest = list(enumerate(messages))
    if tools:
        system = ""
        if rest and rest[0][1]["role"] == "system":
            system = content_text(rest[0][1], "messages[0] (system)") + "\n\n"
            rest = rest[1:]
        parts.append(f"{IM_START}system\n{system}{render_tool_declaration(tools)}{IM_END}\n")
    in_results = False
    for position, message in rest:
        role = message["role"]
        where = f"messages[{position}] ({role})"
        body = content_text(message, where)
        if role == "tool":
            parts.append(("\n" if in_results else f"{IM_START}user\n") + f"{TOOL_RESPONSE}\n{body}\n{TOOL_RESPONSE_END}")
            in_results = True
            continue
        if in_results:
            parts.append(f"{IM_END}\n")
            in_results = False
        if role == "assistant" and message.get("tool_calls"):
            texts = [_call_text(call) for call in history_calls(message["tool_calls"], where)]
            body = body + ("\n" if body else "") + CALL_SEPARATOR.join(texts)
        parts.append(f"{IM_START}{role}\n{body}{IM_END}\n")
    if in_results:
        parts.append(f"{IM_END}\n")
    if add_generation_prompt:
        parts.append(f"{IM_START}assistant\n" + ("" if thinking else f"{THINK_BEGIN}\n\n{THINK_END}\n\n"))
    return "".join(parts)


def _segments(vocabulary: "Vocabulary", ids: Iterable[int]) -> list[bytes | None]:
    """Runs of text bytes, with None for each id that is not text."""
    out: list[bytes | None] = []
    run = bytearray()
    for token_id in ids:
        try:
            data = vocabulary.token_bytes(int(token_id))
        except (TypeError, ValueError, IndexError, OverflowError):
            data = None
        if data is None:
            out += [bytes(run), None]
            run = bytearray()
        else:
            run += data
    out.append(bytes(run))
    return out


def read_tool_declaration(prompt_ids: Iterable[int], vocabulary: "Vocabulary") -> list[Any] | None:
    """The tools of the first system message's ``<tools>`` lines, or None (no system message
    with them, a non-text id among them, a line that is not a JSON object). Never raises on a
    strange prompt; ``TokenizerError`` when the vocabulary lacks the role tokens."""
    start, end = vocabulary.token_id(IM_START), vocabulary.token_id(IM_END)
    ids = list(prompt_ids)
    for position, token_id in enumerate(ids):
        if token_id != start:
            continue
        try:
            stop = ids.index(end, position + 1)
        except ValueError:
            return None
        segments = _segments(vocabulary, ids[position + 1:stop])
        if not (segments[0] or b"").startswith(b"system\n"):
            continue
        for segment in segments:
            text = (segment or b"").decode("utf-8", "replace")
            begin = text.find(f"\n{TOOLS_OPEN}\n")
            if begin < 0:
                continue
            close = text.find(f"\n{TOOLS_CLOSE}", begin + len(TOOLS_OPEN) + 2)
            if close < 0:
                return None
            tools = []
            for line in text[begin + len(TOOLS_OPEN) + 2:close].split("\n"):
                try:
                    tool = json.loads(line)
                except (ValueError, RecursionError):
                    return None
                if not isinstance(tool, dict):
                    return None
                tools.append(tool)
            return tools
        return None
    return None


def opens_reasoning(prompt_ids: Sequence[int] | None, vocabulary: "Vocabulary") -> bool:
    """Whether generation after ``prompt_ids`` starts inside an open ``<think>``."""
    return bool(prompt_ids) and resume(list(prompt_ids), vocabulary) == "think"
