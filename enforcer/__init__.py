"""toolcall-enforcer: token-level enforcement of LLM tool calls (Kimi K2 and K3 sections, JSON
Schema arguments), compiled to cached token masks.

The names below are imported on first use (PEP 562), so ``import enforcer`` loads nothing but
this module; ``from enforcer import compile_tools`` loads the compiler (numpy, jsonschema).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "EnforcerError": "errors", "InvalidSchemaError": "errors", "InvalidToolsError": "errors",
    "SchemaTooComplexError": "errors", "TokenizerError": "errors", "UnsupportedSchemaError": "errors",
    "SchemaOptions": "json_schema",
    "encode_chat": "declarations", "read_tool_declaration": "declarations", "render_chat": "declarations",
    "render_tool_declaration": "declarations",
    "ToolCallMatcher": "engine",
    "CompiledSchema": "matcher", "JsonMatcher": "matcher", "compile_json_schema": "matcher",
    "cache_size_bytes": "lru", "set_cache_limit": "lru",
    "StreamingToolCallParser": "parser", "parse_tool_calls": "parser",
    "CompiledTools": "tools", "clear_cache": "tools", "compile_tools": "tools",
    "Vocabulary": "vocabulary",
}
"""Public name -> the submodule that defines it."""

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .declarations import encode_chat, read_tool_declaration, render_chat, render_tool_declaration
    from .engine import ToolCallMatcher
    from .errors import (EnforcerError, InvalidSchemaError, InvalidToolsError, SchemaTooComplexError,
                         TokenizerError, UnsupportedSchemaError)
    from .json_schema import SchemaOptions
    from .lru import cache_size_bytes, set_cache_limit
    from .matcher import CompiledSchema, JsonMatcher, compile_json_schema
    from .parser import StreamingToolCallParser, parse_tool_calls
    from .tools import CompiledTools, clear_cache, compile_tools
    from .vocabulary import Vocabulary


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'enforcer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
