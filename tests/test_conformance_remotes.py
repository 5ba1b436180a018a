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
