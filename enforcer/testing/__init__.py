"""Helpers for tests, the CLI and benchmarks: real tokenizers built offline (see ``tokenizers``).

Importing this package imports no heavy dependency; the builders import theirs when called.
"""

from .tokenizers import deepseek_v3_tokenizer, kimi_k2_tokenizer

__all__ = ["kimi_k2_tokenizer", "deepseek_v3_tokenizer"]
