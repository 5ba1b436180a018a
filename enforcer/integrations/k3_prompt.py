"""Kimi K3 prompts read by token id: moved to :mod:`enforcer.formats.kimi_k3.prompt` (this module
keeps the old import path)."""

from ..formats.kimi_k3.prompt import TOOL_DECLARE_TYPE, opens_reasoning, read_tool_declaration

__all__ = ["TOOL_DECLARE_TYPE", "opens_reasoning", "read_tool_declaration"]
