"""The conformance runner's strict-mode walker (``benchmarks.conformance.SchemaWalker``) agrees
with the strict compiler on which keys are declared. Its verdict decides whether a valid
instance is expected to be refused in strict mode and whether a mutant counts as invalid, so a
walker stricter than the compiler reports wrong "mutant accepted" failures (found on
jsonschemabench Github_medium o72196 and o73925)."""

import json

import pytest

from benchmarks.conformance import SchemaWalker
from enforcer.json_schema import SchemaOptions
from enforcer.matcher import compile_schema_dfa

CASES = [
    # draft-06 schema-valued dependencies declare the keys of their schema
    ({"$schema": "http://json-schema.org/draft-06/schema#", "type": "object",
      "properties": {"kind": {"enum": ["a", "b"]}},
      "dependencies": {"kind": {"properties": {"rate": {"type": "integer"}}}}},
     {"kind": "a", "rate": 3}),
    # anyOf whose first valid branch declares nothing of the value: another valid branch does
    ({"type": "object", "properties": {"task": {"anyOf": [
        {"properties": {"files": {"type": "array"}}},
        {"type": "object", "properties": {"src": {"type": "string"}, "dest": {"type": "string"}}}]}}},
     {"task": {"src": "a", "dest": "b"}}),
]


@pytest.mark.parametrize("schema, value", CASES)
def test_walker_declares_what_the_strict_compiler_accepts(schema, value):
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=True))
    ordered, undeclared = SchemaWalker(schema).walk(value)
    assert dfa.matches(json.dumps(ordered)), "the strict compiler accepts the value"
    assert not undeclared, "so the walker must not call its keys undeclared"


def test_walker_still_finds_undeclared_keys():
    schema = {"type": "object", "properties": {"task": {"anyOf": [
        {"type": "object", "properties": {"src": {"type": "string"}}},
        {"type": "object", "properties": {"dest": {"type": "string"}}}]}}}
    value = {"task": {"src": "a", "dest": "b"}}  # no single branch declares both keys
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=True))
    assert not dfa.matches(json.dumps(value))
    assert SchemaWalker(schema).walk(value)[1]


def test_walker_orders_dependent_keys_as_the_compiler_writes_them():
    """Keys named by a dependent schema come after the rest of the schema's keys (MaskBench
    Handwritten dep3)."""
    schema = {"type": "object", "allOf": [
        {"dependencies": {"a": {"anyOf": [{"required": ["b"]}, {"required": ["c"]}]}, "b": {"not": {"required": ["a"]}}}},
        {"required": ["a"]}]}
    ordered, _ = SchemaWalker(schema).walk({"c": True, "a": True})
    assert list(ordered) == ["a", "c"]
    assert compile_schema_dfa(schema, SchemaOptions(strict=True)).matches(json.dumps(ordered))


def test_walker_orders_named_keys_after_every_declared_property():
    """``allOf`` parts merge into one object: all their ``properties`` first, then the keys only
    ``required`` names (jsonschemabench Github_hard o12459, a ``volume`` required beside no
    ``properties``, written after the later part's ``offset``)."""
    schema = {"type": "object", "allOf": [
        {"properties": {"flow": {"type": "number"}}},
        {"required": ["volume"]},
        {"properties": {"offset": {"type": "number"}}}]}
    ordered, undeclared = SchemaWalker(schema).walk({"flow": 1, "volume": 2, "offset": 3})
    assert list(ordered) == ["flow", "offset", "volume"]
    assert not undeclared
    assert compile_schema_dfa(schema, SchemaOptions(strict=True)).matches(json.dumps(ordered))


def test_walker_ignores_keywords_beside_a_draft7_ref():
    """Draft 4-7 ignore a ``$ref``'s siblings, as the compiler does: a key only a sibling
    ``required`` names is undeclared in strict mode (jsonschemabench Github_hard o13693)."""
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "properties": {"flow": {"required": ["config"], "$ref": "#/definitions/flow"}},
              "definitions": {"flow": {"properties": {"id": {"type": "string"}}}}}
    value = {"flow": {"id": "a", "config": {}}}
    assert not compile_schema_dfa(schema, SchemaOptions(strict=True)).matches(json.dumps(value))
    assert SchemaWalker(schema).walk(value)[1]


def test_walker_ignores_a_draft4_condition():
    """Draft 4 has no ``if``: its ``then`` declares nothing (as for the compiler)."""
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
              "properties": {"a": {"type": "string"}}, "if": {"required": ["a"]},
              "then": {"properties": {"b": {"type": "string"}}}}
    value = {"a": "x", "b": "y"}
    assert not compile_schema_dfa(schema, SchemaOptions(strict=True)).matches(json.dumps(value))
    assert SchemaWalker(schema).walk(value)[1]
