"""A long bounded list of small items kept as one counted repeat of ``separator item`` (the
unit's rows, no copy per count): the same language as the copies it replaces, at the bounds
and in every writing, and the same masks (the copies are its oracle here)."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from enforcer import clear_cache, compile_json_schema, json_schema
from enforcer.automaton import CountedDFA
from enforcer.json_schema import SchemaOptions
from enforcer.matcher import compile_schema_dfa

from test_masks import assert_table_matches_reference, make_encoder, teacher_forced_masks

HEX = {"type": "string", "pattern": "^[A-Fa-f0-9]{6}$"}


def _counted_blocks(dfa) -> list[CountedDFA]:
    return [b.dfa for b in dfa._determiniser().blocks if isinstance(b.dfa, CountedDFA)]


def _writings(value) -> set[str]:
    return {json.dumps(value), json.dumps(value, separators=(",", ":")), json.dumps(value, indent=2)}


@pytest.mark.parametrize("schema, items", [
    ({"type": "array", "items": HEX, "minItems": 2, "maxItems": 1000}, lambda n: [f"{i:06x}" for i in range(n)]),
    ({"type": "array", "items": HEX, "maxItems": 700}, lambda n: [f"{i:06X}" for i in range(n)]),
    ({"type": "array", "prefixItems": [{"type": "integer"}], "items": {"enum": ["alpha", "beta"]}, "minItems": 3,
      "maxItems": 900}, lambda n: [7, *(["alpha", "beta"] * n)[:n - 1]] if n else []),
])
def test_a_long_bounded_list_is_one_counted_repeat(schema, items) -> None:
    dfa = compile_schema_dfa(schema, SchemaOptions())
    edges = dfa._determiniser()._edge_dst.size  # the NFA's byte edges outside blocks: copies hold 30,000 or more
    assert edges < 2_000 and len(_counted_blocks(dfa)) == 1
    validator = jsonschema.Draft202012Validator(schema)
    high = schema["maxItems"]
    for n in (0, 1, 2, 3, 4, 17, high - 1, high, high + 1):
        value = items(n)
        for text in _writings(value):
            assert dfa.matches(text) == validator.is_valid(value), (n, text[:60])
    wrong = items(high)
    wrong[high // 2] = "zz"  # one item out of its schema, deep inside the count
    assert not any(dfa.matches(text) for text in _writings(wrong))
    assert not dfa.matches(json.dumps(items(5))[:-1] + ",]")


def test_an_item_that_a_longer_item_extends_is_copied() -> None:
    """Integers: ``1`` is a prefix of ``12``, so ``, item`` is no counted unit; the copies stay."""
    schema = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "maxItems": 3000}
    dfa = compile_schema_dfa(schema, SchemaOptions())
    assert not _counted_blocks(dfa)
    for n, ok in ((0, True), (3000, True), (3001, False)):
        assert dfa.matches(json.dumps([12] * n)) == ok


def test_counted_and_copied_lists_give_the_same_masks(monkeypatch, kimi_tokenizer, kimi_vocab) -> None:
    """The same schema compiled both ways (copies forced by a huge ``COUNTED_ITEMS_MIN_STATES``):
    identical masks at every token of the same streams, each equal to the reference walk."""
    schema = {"type": "object", "properties": {"ids": {"type": "array", "items": HEX, "minItems": 1,
                                                        "maxItems": 400}}, "required": ["ids"]}
    encode = make_encoder(kimi_tokenizer)
    texts = [json.dumps({"ids": [f"{i:06x}" for i in range(n)]}, indent=indent) for n, indent in
             ((1, None), (40, None), (400, None), (3, 2))]
    streams = [encode(text) for text in texts]
    masks = []
    for counted in (True, False):
        monkeypatch.setattr(json_schema, "COUNTED_ITEMS_MIN_STATES", 0 if counted else 10**9)
        clear_cache()
        compiled = compile_json_schema(schema, kimi_vocab)
        # the unit's shortest writing (',"' six digits '"') bounds the units a token completes
        assert [block.shortest_unit for block in _counted_blocks(compiled.dfa)] == ([9] if counted else [])
        masks.append(teacher_forced_masks(compiled, kimi_vocab, streams))
        if counted:
            assert assert_table_matches_reference(compiled.masks) > 0
    for counted_rows, copied_rows in zip(*masks):
        assert len(counted_rows) == len(copied_rows)
        assert all(np.array_equal(a, b) for a, b in zip(counted_rows, copied_rows))
