"""Per-request settings of the vLLM adapter: ``SamplingParams.extra_args["enforcer"]`` (over HTTP
``vllm_xargs={"enforcer": "<json>"}``), read into a :class:`RequestSettings`.

Shared by the logits processor (:mod:`.vllm`) and the tool parsers (:mod:`.vllm_tool_parser`),
which import it rather than each other. Needs no vLLM import. Pure; one small JSON parse.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..formats.registry import format_names

__all__ = ["FORMATS", "SETTINGS_KEY", "RequestSettings", "read_settings"]

SETTINGS_KEY = "enforcer"
"""The ``SamplingParams.extra_args`` key (``vllm_xargs`` over HTTP) of the per-request settings."""
FORMATS = format_names()
"""The formats a request's ``format`` setting may name (every registered family's)."""

_SETTING_NAMES = ("tools", "tool_choice", "parallel_tool_calls", "first_call_index", "enabled", "format")


@dataclass(frozen=True)
class RequestSettings:
    """What one request asks of the enforcer. ``tools=None``: read them from the prompt;
    ``format=None``: the engine's."""

    tools: list[Any] | None = None
    tool_choice: Any = "auto"
    parallel_tool_calls: bool = True
    first_call_index: int | None = None
    enabled: bool = True
    format: str | None = None


def read_settings(extra_args: Mapping[str, Any] | None) -> RequestSettings | None:
    """The settings under ``extra_args["enforcer"]``, or None when there are none.

    The value is a mapping or its JSON text (``vllm_xargs`` only carries strings and numbers).
    Raises ``ValueError`` naming the bad field. Cost: one small JSON parse.
    """
    if not extra_args or SETTINGS_KEY not in extra_args:
        return None
    raw = extra_args[SETTINGS_KEY]
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"extra_args[{SETTINGS_KEY!r}] is not valid JSON: {exc}") from None
    if not isinstance(raw, Mapping):
        raise ValueError(f"extra_args[{SETTINGS_KEY!r}] must be an object (or its JSON text), "
                         f"got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(_SETTING_NAMES))
    if unknown:
        raise ValueError(f"extra_args[{SETTINGS_KEY!r}] has unknown field(s) {unknown}; "
                         f"known: {list(_SETTING_NAMES)}")
    tools = raw.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise ValueError(f"{SETTINGS_KEY}.tools must be a list of OpenAI tools, got {type(tools).__name__}")
    tool_choice = raw.get("tool_choice", "auto")
    if tool_choice is None:
        tool_choice = "auto"
    if not isinstance(tool_choice, (str, Mapping)):
        raise ValueError(f"{SETTINGS_KEY}.tool_choice must be a string or an object, "
                         f"got {type(tool_choice).__name__}")
    flags = {}
    for name, default in (("parallel_tool_calls", True), ("enabled", True)):
        value = raw.get(name, default)
        if value is None:
            value = default
        if not isinstance(value, bool):
            raise ValueError(f"{SETTINGS_KEY}.{name} must be true or false, got {value!r}")
        flags[name] = value
    first = raw.get("first_call_index")
    if first is not None and (isinstance(first, bool) or not isinstance(first, int) or first < 0):
        raise ValueError(f"{SETTINGS_KEY}.first_call_index must be an integer >= 0, got {first!r}")
    fmt = raw.get("format")
    if fmt is not None and (not isinstance(fmt, str) or fmt not in FORMATS):
        raise ValueError(f"{SETTINGS_KEY}.format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return RequestSettings(tools=tools, tool_choice=dict(tool_choice) if isinstance(tool_choice, Mapping)
                           else tool_choice, first_call_index=first, format=fmt, **flags)
