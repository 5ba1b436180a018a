"""Kimi K3 prompts: the tool declaration, the prompt ids of a dialog (control tokens by id,
every text piece encoded on its own, so message text never yields a control id), and reading a
prompt back by id (the declared tools, an open think block).

The tool declaration is the body of the first ``<|open|>message role="system"
type="tool-declare"<|sep|>`` message (attributes in any order): a ``# Tools`` header, a sentence
and the tools as JSON in a ```` ```json ```` fence. Structure is found by the four control ids
only; tag text and the body are read from the exact token bytes, so any tokenization of the text
(piece by piece, or a chat template tokenized whole) reads the same. Pure functions; cost linear
in the input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable

from ...errors import InvalidToolsError
from ..messages import content_text, history_calls, tools_json
from . import (ARGUMENT, CALL, CLOSE, END_OF_MSG, FIRST_INDEX, JSON_TAG, MESSAGE, OPEN, RESPONSE, SEP, THINK, TOOLS,
               read_tag, resume, tag_pieces, value_type)

if TYPE_CHECKING:
    from ...vocabulary import Vocabulary

__all__ = ["K3_TOOLS_SENTENCE", "TOOL_DECLARE_TYPE", "encode_chat", "opens_reasoning", "read_tool_declaration",
           "render_tool_declaration"]

K3_TOOLS_SENTENCE = "You may call the following functions."
"""The one sentence of K3's tool declaration (wording of this project)."""


def render_tool_declaration(tools: Sequence[Mapping[str, Any]], style: str = "json") -> str:
    """The body of K3's ``type="tool-declare"`` system message (``style="json"`` only)::

        # Tools\n\nYou may call the following functions.\n\n```json\nJSON\n```

    where JSON is the compact key-sorted tools array."""
    if style != "json":
        raise ValueError(f"unknown declaration style {style!r} for kimi_k3 (known: json)")
    return f"# Tools\n\n{K3_TOOLS_SENTENCE}\n\n```json\n{tools_json(tools)}\n```"


TOOL_DECLARE_TYPE = "tool-declare"
"""The ``type`` attribute of K3's tool-declaration system message."""
K3_TOOL_DECLARE_TYPE = TOOL_DECLARE_TYPE
_K3_ROLES = ("system", "user", "assistant", "tool")


class _K3Prompt:
    """Accumulates K3 prompt ids: control tokens by id, each text piece encoded on its own."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.ids: list[int] = []
        self._encode = vocabulary.encode_text
        self._open = vocabulary.token_id(OPEN)
        self._close = vocabulary.token_id(CLOSE)
        self._sep = vocabulary.token_id(SEP)
        self._end = vocabulary.token_id(END_OF_MSG)

    def text(self, piece: str) -> None:
        if piece:
            self.ids += self._encode(piece)

    def open(self, tag: str, attributes: Iterable[tuple[str, str]] = ()) -> None:
        self.ids.append(self._open)
        for piece in tag_pieces(tag, attributes):
            self.text(piece)
        self.ids.append(self._sep)

    def close(self, tag: str) -> None:
        self.ids.append(self._close)
        self.text(tag)
        self.ids.append(self._sep)

    def element(self, tag: str, attributes: Iterable[tuple[str, str]], body: str) -> None:
        self.open(tag, attributes)
        self.text(body)
        self.close(tag)

    def message(self, attributes: Sequence[tuple[str, str]], body: Callable[[], None]) -> None:
        self.open(MESSAGE, attributes)
        body()
        self.close(MESSAGE)
        self.ids.append(self._end)


def _k3_arguments(prompt: _K3Prompt, arguments: Any, where: str) -> None:
    """One call's body: an ``argument`` per top-level key, or the ``json`` form for a string
    that is not a JSON object."""
    if isinstance(arguments, Mapping):
        value: Any = arguments
    elif isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except (ValueError, RecursionError):
            value = None
    else:
        raise InvalidToolsError(f"{where}: function.arguments must be a JSON string, got {type(arguments).__name__}")
    if not isinstance(value, Mapping):
        prompt.element(JSON_TAG, [("type", "object")], arguments)
        return
    for key, item in value.items():
        if not isinstance(key, str):
            raise InvalidToolsError(f"{where}: argument names must be strings, got {key!r}")
        try:
            json_type = value_type(item)
            text = item if json_type == "string" else json.dumps(item, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise InvalidToolsError(f"{where}: argument {key!r} is not a JSON value: {exc}") from exc
        prompt.element(ARGUMENT, [("key", key), ("type", json_type)], text)


def _k3_calls(prompt: _K3Prompt, calls: Any, where: str) -> list[tuple[Any, str]]:
    """The tools section of an assistant message; returns each call's (original id, name)."""
    named = []
    prompt.open(TOOLS)
    for position, call in enumerate(history_calls(calls, where, InvalidToolsError)):
        index = str(FIRST_INDEX + position)
        prompt.open(CALL, [("tool", call.name), ("index", index)])
        _k3_arguments(prompt, call.arguments, f"{where} tool_calls[{position}]")
        prompt.close(CALL)
        named.append((call.id, call.name))
    prompt.close(TOOLS)
    return named


def encode_chat(
    messages: Sequence[Mapping[str, Any]],
    vocabulary: Vocabulary,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    thinking: bool = True,
) -> list[int]:
    """The prompt ids of ``messages`` in Kimi K3's layout (``format="kimi_k3"`` only).

    Every message is ``<|open|>message role="ROLE"[ attrs]<|sep|>BODY<|close|>message<|sep|>
    <|end_of_msg|>``; ``tools`` come first as a ``role="system" type="tool-declare"`` message
    (body: :func:`render_tool_declaration`). An assistant body is its
    think block (when it has ``reasoning_content``), its response block (``content``) and its
    tools section: one ``call tool="NAME" index="N"`` per call (N from 1), whose arguments (an
    OpenAI JSON string, or an object) are split one level deep into ``argument key type``
    elements (strings raw, other values ``json.dumps``), or carried whole in ``json
    type="object"`` when they are not a JSON object. A tool result is ``role="tool"
    tool="NAME" index="N"`` of the call its ``tool_call_id`` names; consecutive results are put
    in call order. The generation prompt opens the assistant message and its think block
    (``thinking=True``) or its response block. Control tokens are added by id and every text
    piece (tag words, attribute keys, ``="``, values, bodies) is encoded on its own with
    :meth:`Vocabulary.encode_text`, so no text yields a control id.

    Raises ``InvalidToolsError`` naming the message for malformed messages or tools,
    ``TokenizerError`` when the vocabulary lacks a control token or cannot encode a piece. Cost: linear in the size of the dialog.
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidToolsError("messages must be a list of message objects")
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") not in _K3_ROLES:
            raise InvalidToolsError(f"messages[{position}] must be an object with role one of {', '.join(_K3_ROLES)}")
    prompt = _K3Prompt(vocabulary)
    if tools:
        declaration = render_tool_declaration(tools)
        prompt.message([("role", "system"), ("type", K3_TOOL_DECLARE_TYPE)], lambda: prompt.text(declaration))
    calls: dict[str, tuple[str, int, int]] = {}  # original id -> (name, index, order of the call)
    results: list[tuple[int, str, str, int]] = []  # pending run of tool results: (order, name, body, index)
    order = 0

    def flush_results() -> None:
        for _, name, body, index in sorted(results, key=lambda result: result[0]):
            attributes = [("role", "tool"), ("tool", name), ("index", str(index))]
            prompt.message(attributes, lambda: prompt.text(body))
        results.clear()

    for position, message in enumerate(messages):
        role = message["role"]
        where = f"messages[{position}] ({role})"
        try:
            body = content_text(message, where)
        except ValueError as exc:
            raise InvalidToolsError(str(exc)) from exc
        if role == "tool":
            original = message.get("tool_call_id")
            if not isinstance(original, str) or original not in calls:
                raise InvalidToolsError(f"{where}: tool_call_id {original!r} names no earlier tool call")
            name, index, call_order = calls[original]
            results.append((call_order, name, body, index))
            continue
        flush_results()
        if role != "assistant":
            prompt.message([("role", role)], lambda: prompt.text(body))
            continue
        reasoning = message.get("reasoning_content")
        if reasoning is not None and not isinstance(reasoning, str):
            raise InvalidToolsError(f"{where}: reasoning_content must be a string")
        named: list[tuple[Any, str]] = []

        def assistant_body() -> None:
            if reasoning:
                prompt.element(THINK, (), reasoning)
            prompt.element(RESPONSE, (), body)
            if message.get("tool_calls"):
                named.extend(_k3_calls(prompt, message["tool_calls"], where))

        prompt.message([("role", "assistant")], assistant_body)
        for offset, (original, name) in enumerate(named):
            if isinstance(original, str):
                calls[original] = (name, FIRST_INDEX + offset, order)
            order += 1
    flush_results()
    if add_generation_prompt:
        prompt.open(MESSAGE, [("role", "assistant")])
        prompt.open(THINK if thinking else RESPONSE)
    return prompt.ids


# --------------------------------------------------------------------------------------------
# Reading prompts

_FENCE = re.compile(r"```json[ \t]*\r?\n(.*?)\r?\n```", re.DOTALL)
"""The fenced JSON: a JSON text cannot hold a raw newline inside a string, so the first
newline followed by a fence closes it."""


def _text(vocabulary: "Vocabulary", ids: Sequence[int]) -> str | None:
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


def read_tool_declaration(prompt_ids: Iterable[int], vocabulary: "Vocabulary") -> list[Any] | None:
    """The tools of the prompt's first K3 tool-declaration message, or None.

    None when there is no such message, when its body is not closed by ``<|close|>``, holds a
    non-text id, has no ```` ```json ```` fence or the fenced text is not a JSON array. Never
    raises on a strange prompt; raises ``TokenizerError`` when the vocabulary lacks the K3
    control tokens. Cost: O(len(prompt_ids)).
    """
    ids = list(prompt_ids)
    open_id, close_id, sep_id = (vocabulary.token_id(n) for n in (OPEN, CLOSE, SEP))
    position = 0
    while True:
        try:
            start = ids.index(open_id, position)
            sep = ids.index(sep_id, start + 1)
        except ValueError:
            return None
        position = start + 1
        text = _text(vocabulary, ids[start + 1:sep])
        tag = read_tag(text) if text is not None else None
        if tag is None or tag[0] != MESSAGE:
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


def opens_reasoning(prompt_ids: Sequence[int] | None, vocabulary: "Vocabulary") -> bool:
    """Whether generation after ``prompt_ids`` starts inside a think block (the prompt ends
    with ``<|open|>think<|sep|>``). False for an empty prompt; never raises for a K3 vocabulary."""
    if not prompt_ids:
        return False
    return resume(list(prompt_ids), vocabulary) == "think"
