"""The benchmarks' timing driver (``benchmarks.measure_side_by_side``): libraries take turns
repetition by repetition, in an order rotated per round; one that refuses the workload is
recorded and left out of the later rounds. Every library here is our own adapter over the real
Kimi vocabulary; the subclasses only record when each compile runs, or refuse as a library
would (the peers cannot be assumed installed under the README's test command)."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("torch")

from benchmarks import measure_side_by_side  # noqa: E402
from benchmarks.peers import Ours, Setup  # noqa: E402

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _library(name: str, vocab: Any, tokenizer: Any, log: list[str], refuses: bool = False) -> Ours:
    class Recorded(Ours):
        def compile(self, schema: dict[str, Any]) -> Any:
            log.append(name)
            if refuses:
                raise ValueError(f"{name} refuses the schema")
            return super().compile(schema)

    library = Recorded(Setup.from_tokenizer(tokenizer, vocab), vocab)
    library.name = name
    return library


def test_libraries_take_turns_in_rotated_order(kimi_vocab: Any, kimi_tokenizer: Any) -> None:
    log: list[str] = []
    libraries = [_library(n, kimi_vocab, kimi_tokenizer, log) for n in ("a", "b", "c")]
    ids = kimi_tokenizer.encode(json.dumps({"n": 42}), add_special_tokens=False)
    results = measure_side_by_side(libraries, lambda a: a.compile, SCHEMA, ids, kimi_vocab.vocab_size,
                                   repetitions=3, later_passes=2)
    # each round: one cold compile per library (then its cache hit, also logged), order rotated
    cold = log[::2]
    assert log[1::2] == cold
    assert cold == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    for result in results:
        assert result.ok and result.repetitions == 3 and result.later_passes == 6
        assert len(result.pass1_ns) == 3 * len(ids) and len(result.later_ns) == 6 * len(ids)
        assert len(result.cold_compile_s) == len(result.cached_compile_s) == 3


def test_a_refusing_library_is_recorded_and_skipped(kimi_vocab: Any, kimi_tokenizer: Any) -> None:
    log: list[str] = []
    libraries = [_library("ok", kimi_vocab, kimi_tokenizer, log),
                 _library("no", kimi_vocab, kimi_tokenizer, log, refuses=True)]
    ids = kimi_tokenizer.encode(json.dumps({"n": 7}), add_special_tokens=False)
    ok, refused = measure_side_by_side(libraries, lambda a: a.compile, SCHEMA, ids, kimi_vocab.vocab_size,
                                       repetitions=2, later_passes=1)
    assert refused.error == "ValueError: no refuses the schema" and refused.repetitions == 0
    assert log.count("no") == 1
    assert ok.ok and ok.repetitions == 2 and len(ok.pass1_ns) == 2 * len(ids)


def test_a_budget_stops_further_rounds(kimi_vocab: Any, kimi_tokenizer: Any) -> None:
    log: list[str] = []
    libraries = [_library("a", kimi_vocab, kimi_tokenizer, log)]
    ids = kimi_tokenizer.encode(json.dumps({"n": 1}), add_special_tokens=False)
    (result,) = measure_side_by_side(libraries, lambda a: a.compile, SCHEMA, ids, kimi_vocab.vocab_size,
                                     repetitions=5, later_passes=4, budget_s=0.0)
    assert result.repetitions == 1 and result.later_passes == 1  # the first later pass always runs
