"""toolcall-enforcer: token-level enforcement of LLM tool calls (Kimi K2 sections, JSON Schema
arguments), compiled to cached token masks."""

from .errors import (EnforcerError, InvalidSchemaError, InvalidToolsError, SchemaTooComplexError,
                     TokenizerError, UnsupportedSchemaError)
from .json_schema import SchemaOptions
from .lru import cache_size_bytes, set_cache_limit
from .declarations import read_tool_declaration, render_chat, render_tool_declaration
from .engine import ToolCallMatcher
from .matcher import CompiledSchema, JsonMatcher, compile_json_schema
from .parser import StreamingToolCallParser, parse_tool_calls
from .tools import CompiledTools, clear_cache, compile_tools
from .vocabulary import Vocabulary

__version__ = "0.1.0"

__all__ = [
    "CompiledSchema", "CompiledTools", "EnforcerError", "InvalidSchemaError", "InvalidToolsError", "JsonMatcher",
    "SchemaOptions", "SchemaTooComplexError", "StreamingToolCallParser", "TokenizerError", "ToolCallMatcher",
    "UnsupportedSchemaError", "Vocabulary", "cache_size_bytes", "clear_cache", "compile_json_schema", "compile_tools",
    "parse_tool_calls", "read_tool_declaration", "render_chat", "render_tool_declaration", "set_cache_limit",
]
