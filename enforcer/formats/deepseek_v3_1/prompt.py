"""DeepSeek-V3.1 prompts: the tool declaration, the chat layout as text (markers spelled out for
the model's tokenizer to map to ids), and reading a prompt back by id.

The declaration follows the layout of V3.1's model card (``## Tools`` then per tool
``### NAME``, ``Description: ...`` and ``Parameters: JSON`` on one line); the instruction after
it is this project's wording. The layout: ``<｜begin▁of▁sentence｜>SYSTEM``, ``<｜User｜>TEXT``,
``<｜Assistant｜></think>CONTENT[calls section]<｜end▁of▁sentence｜>`` (history turns without
reasoning), tool results ``<｜tool▁output▁begin｜>RESULT<｜tool▁output▁end｜>``; the generation
prompt ``<｜Assistant｜><think>`` (thinking) or ``<｜Assistant｜></think>``. Pure; linear.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..messages import check_tools, content_text, history_calls
from . import (ASSISTANT, BOS, CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, EOS, OUTPUT_BEGIN, OUTPUT_END, SEP,
               THINK_BEGIN, THINK_END, USER, resume)

if TYPE_CHECKING:
    from ...vocabulary import Vocabulary

__all__ = ["opens_reasoning", "read_tool_declaration", "render_chat", "render_tool_declaration"]

TOOLS_HEADER = "## Tools\nYou have access to the following tools:\n"
INSTRUCTIONS = ("\nTo call tools, write " + CALLS_BEGIN + CALL_BEGIN + "NAME" + SEP + "JSON ARGUMENTS" + CALL_END
                + CALLS_END + ", one call after another with nothing between them.\n")


def render_tool_declaration(tools: Sequence[Mapping[str, Any]], style: str = "json") -> str:
    """The tools section of the system prompt (``style="json"`` only)."""
    if style != "json":
        raise ValueError(f"unknown declaration style {style!r} for deepseek_v3_1 (known: json)")
    parts = [TOOLS_HEADER]
    for tool in check_tools(tools):
        function = tool["function"]
        parameters = json.dumps(function.get("parameters", {}), ensure_ascii=False)
        parts.append(f"\n### {function['name']}\nDescription: {function.get('description') or ''}\n\n"
                     f"Parameters: {parameters}\n")
    return "".join(parts) + INSTRUCTIONS


def _calls_text(calls: Any, where: str) -> str:
    parts = [CALLS_BEGIN]
    for call in history_calls(calls, where):
        parts.append(f"{CALL_BEGIN}{call.name}{SEP}{call.arguments_text}{CALL_END}")
    return "".join(parts) + CALLS_END


def render_chat(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None, *,
                add_generation_prompt: bool = True, thinking: bool = False) -> str:
    """The V3.1 layout of ``messages`` as text (see the module docstring)."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ValueError("messages must be a list of message objects")
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise ValueError(f"messages[{position}] must be an object with a string 'role'")
    system = "\n\n".join(content_text(m, f"messages[{i}] (system)") for i, m in enumerate(messages)
                         if m["role"] == "system")
    if tools:
        system = (system + "\n\n" if system else "") + render_tool_declaration(tools)
    parts = [BOS, system]
    for position, message in enumerate(messages):
        role = message["role"]
        where = f"messages[{position}] ({role})"
        body = content_text(message, where)
        if role == "user":
            parts.append(f"{USER}{body}")
        elif role == "assistant":
            calls = _calls_text(message["tool_calls"], where) if message.get("tool_calls") else ""
            parts.append(f"{ASSISTANT}{THINK_END}{body}{calls}{EOS}")
        elif role == "tool":
            parts.append(f"{OUTPUT_BEGIN}{body}{OUTPUT_END}")
    if add_generation_prompt:
        parts.append(ASSISTANT + (THINK_BEGIN if thinking else THINK_END))
    return "".join(parts)


def read_tool_declaration(prompt_ids: Iterable[int], vocabulary: "Vocabulary") -> list[Any] | None:
    """The tools of the system prompt (the text before the first ``<｜User｜>``) declared as
    ``### NAME`` / ``Description:`` / ``Parameters: JSON`` after ``## Tools``, or None. Never
    raises on a strange prompt; ``TokenizerError`` when the vocabulary lacks ``<｜User｜>``."""
    user = vocabulary.token_id(USER)
    data = bytearray()
    for token_id in prompt_ids:
        if token_id == user:
            break
        try:
            piece = vocabulary.token_bytes(int(token_id))
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if piece is not None:
            data += piece
    text = data.decode("utf-8", "replace")
    at = text.find(TOOLS_HEADER)
    if at < 0:
        return None
    tools: list[Any] = []
    name: str | None = None
    description: list[str] = []
    for line in text[at + len(TOOLS_HEADER):].split("\n"):
        if line.startswith("### "):
            name, description = line[4:], []
        elif name is not None and line.startswith("Parameters: "):
            try:
                parameters = json.loads(line[len("Parameters: "):])
            except (ValueError, RecursionError):
                return None
            words = "\n".join(description).strip()
            words = words[len("Description:"):].strip() if words.startswith("Description:") else words
            function = {"name": name, **({"description": words} if words else {}), "parameters": parameters}
            tools.append({"type": "function", "function": function})
            name = None
        elif name is not None:
            description.append(line)
    return tools or None


def opens_reasoning(prompt_ids: Sequence[int] | None, vocabulary: "Vocabulary") -> bool:
    """Whether generation after ``prompt_ids`` starts inside an open ``<think>``."""
    return bool(prompt_ids) and resume(list(prompt_ids), vocabulary) == "think"
