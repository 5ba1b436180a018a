"""The conformance runner hands the Test-Suite's remote documents to the compiler as resources
(a corpus folder made here: one case referring to one remote)."""

import json
from pathlib import Path

from benchmarks.conformance import REMOTES_BASE, load_test_suite, make_encoder, run_conformance

CASE = {"description": "remote ref", "schema": {"$ref": REMOTES_BASE + "draft2020-12/int.json#/$defs/n"},
        "tests": [{"description": "int", "data": 3, "valid": True},
                  {"description": "str", "data": "3", "valid": False}]}


def _corpus(root: Path, with_remotes: bool) -> Path:
    suite = root / "json-schema-test-suite"
    (suite / "draft2020-12").mkdir(parents=True)
    (suite / "draft2020-12" / "refRemote.json").write_text(json.dumps([CASE]))
    if with_remotes:
        (suite / "remotes" / "draft2020-12").mkdir(parents=True)
        (suite / "remotes" / "draft2020-12" / "int.json").write_text(json.dumps({"$defs": {"n": {"type": "integer"}}}))
    return root


def test_remote_documents_reach_the_compiler(tmp_path, kimi_vocab, kimi_tokenizer):
    cases = load_test_suite(_corpus(tmp_path / "with", True))
    assert list(cases[0].resources) == [REMOTES_BASE + "draft2020-12/int.json"]
    summary = run_conformance(cases, kimi_vocab, make_encoder(kimi_tokenizer))
    row = summary.row("ALL")
    assert (row["compiled"], row["valid_accepted"], row["invalid_rejected"], row["invalid_accepted"]) == (1, 1, 1, 0)


def test_without_remotes_the_case_is_refused_not_fetched(tmp_path, kimi_vocab, kimi_tokenizer):
    cases = load_test_suite(_corpus(tmp_path / "without", False))
    summary = run_conformance(cases, kimi_vocab, make_encoder(kimi_tokenizer))
    assert summary.row("ALL")["unsupported"] == 1 and summary.unsupported == {"$ref": 1}


def test_an_instance_refused_past_the_decode_budget_is_counted_apart(tmp_path, kimi_vocab, kimi_tokenizer):
    """A refusal once the compiled automaton has passed its decode budget is no verdict: neither
    valid rejected nor invalid rejected, but "decode_budget" (the strict-mode table once counted
    such refusals of a schema that could not be decoded as invalid instances rejected). The
    budget here (300,000 bytes) lets the compile through (262,400 at first) and stops the walk
    of nested values."""
    schema = {"type": "array", "items": {"type": ["string", "array", "object", "integer"]}}
    case = {"description": "list", "schema": schema,
            "tests": [{"description": "nested", "data": ["a", [1, {"x": [2, {"y": [3]}]}]], "valid": True},
                      {"description": "null", "data": [None], "valid": False}]}
    suite = tmp_path / "json-schema-test-suite" / "draft2020-12"
    suite.mkdir(parents=True)
    (suite / "items.json").write_text(json.dumps([case]))
    cases = load_test_suite(tmp_path)
    keys = ("compiled", "valid_accepted", "valid_rejected", "invalid_rejected", "decode_budget")
    fits = run_conformance(cases, kimi_vocab, make_encoder(kimi_tokenizer)).row("ALL")
    assert tuple(fits[k] for k in keys) == (1, 1, 0, 1, 0)
    starved = run_conformance(cases, kimi_vocab, make_encoder(kimi_tokenizer), max_automaton_bytes=300_000).row("ALL")
    assert tuple(starved[k] for k in keys) == (1, 0, 0, 0, 2)
