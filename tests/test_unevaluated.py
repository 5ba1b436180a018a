"""``unevaluatedProperties``/``unevaluatedItems`` folded into ``additionalProperties``/``items``
where exact (beside plain sub-schemas), refused with the blocking keyword elsewhere; checked
against jsonschema on a value pool in both modes."""

import json

import pytest

from enforcer import UnsupportedSchemaError
from enforcer.json_schema import SchemaOptions
from enforcer.matcher import compile_schema_dfa
from jsonschema_oracle import check_against_jsonschema

POOL = [None, 1, "x", [], [1], ["a"], [1, "a"], ["a", 1], [1, 2, 3], ["test", "test"], {}, {"foo": 1},
        {"foo": "a"}, {"bar": "b"}, {"foo": "a", "bar": "b"}, {"foo": "a", "baz": 1}, {"foo": {"bar": "t"}},
        {"foo": {"bar": "t", "faz": "t"}}, {"foo": {"faz": "t"}}, {"prop1": "match"}, {"foo": ["test", "test"]},
        {"foo": ["test"]}]


def check(schema):
    check_against_jsonschema(schema, POOL)


@pytest.mark.parametrize("schema", [
    {"properties": {"foo": {"type": "string"}}, "unevaluatedProperties": False},
    {"properties": {"foo": {"type": "string"}}, "allOf": [{"properties": {"bar": {"type": "string"}}}],
     "unevaluatedProperties": False},
    {"allOf": [{"properties": {"foo": True}}, {"unevaluatedProperties": False}]},
    {"allOf": [{"unevaluatedProperties": False}, {"properties": {"foo": True}}]},
    {"properties": {"foo": {"properties": {"bar": {"type": "string"}}, "unevaluatedProperties": False}},
     "allOf": [{"properties": {"foo": {"properties": {"faz": {"type": "string"}}}}}]},
    {"$defs": {"A": {"unevaluatedProperties": False}}, "properties": {"prop1": {"type": "string"}},
     "$ref": "#/$defs/A"},
    {"properties": {"foo": {"type": "string"}}, "allOf": [{"unevaluatedProperties": True}],
     "unevaluatedProperties": False},
    {"unevaluatedProperties": {"type": "integer"}, "patternProperties": {"^b": {"type": "string"}}},
    {"prefixItems": [{"type": "integer"}], "unevaluatedItems": False},
    {"allOf": [{"prefixItems": [True]}, {"unevaluatedItems": False}]},
    {"prefixItems": [True], "allOf": [{"prefixItems": [True, {"type": "string"}]}], "unevaluatedItems": False},
    {"properties": {"foo": {"prefixItems": [{"type": "string"}], "unevaluatedItems": False}},
     "allOf": [{"properties": {"foo": {"prefixItems": [True, {"type": "string"}]}}}]},
    {"items": {"type": "string"}, "unevaluatedItems": False},
    # a failed condition evaluates nothing: its ways of failing are negated (a pattern, items)
    {"if": {"properties": {"foo": {"pattern": "a"}}}, "then": {"properties": {"foo": True}},
     "else": {"properties": {"bar": True}}, "unevaluatedProperties": False},
    {"if": {"items": {"type": "string"}}, "then": {"prefixItems": [True]}, "unevaluatedItems": False},
])
def test_folded_unevaluated_is_exact(schema):
    check(schema)


def test_unevaluated_beside_branches_not_negated_exactly_is_refused():
    schema = {"properties": {"foo": True}, "anyOf": [{"properties": {"bar": True}}, {"const": [1, 2]}],
              "unevaluatedProperties": False}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions(strict=False))  # strict: one branch at a time
    assert info.value.keyword == "unevaluatedProperties" and "'anyOf'" in str(info.value)
    assert "branch 1 may match beside branch 0 and is not negated exactly" in str(info.value)


def test_strict_any_of_branches_fold_one_by_one():
    """Strict mode accepts an object when one branch, with the keys beside it, declares every
    key (as anyOf compiles elsewhere and as the conformance walker judges): keys that two
    overlapping branches evaluate together are refused there, accepted in spec mode."""
    schema = {"properties": {"foo": {"type": "string"}}, "anyOf": [
        {"properties": {"bar": {"const": "bar"}}, "required": ["bar"]},
        {"properties": {"baz": {"const": "baz"}}, "required": ["baz"]}], "unevaluatedProperties": False}
    strict, spec = (compile_schema_dfa(schema, SchemaOptions(strict=mode)) for mode in (True, False))
    both = json.dumps({"bar": "bar", "baz": "baz"})
    assert spec.matches(both) and not strict.matches(both)
    for value in ({"bar": "bar"}, {"foo": "s", "baz": "baz"}):
        assert strict.matches(json.dumps(value)) and spec.matches(json.dumps(value))


def test_unevaluated_items_beside_draft_2019_contains_is_refused():
    # draft 2019-09 says contains evaluates nothing, jsonschema counts its matches: refused
    schema = {"$schema": "https://json-schema.org/draft/2019-09/schema", "contains": {"type": "string"},
              "unevaluatedItems": False}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions())
    assert "not folded beside 'contains'" in str(info.value)


def test_unevaluated_beside_many_overlapping_any_of_branches_is_refused():
    branches = [{"properties": {f"k{i}": {"const": "v"}}, "required": [f"k{i}"]} for i in range(7)]
    schema = {"anyOf": branches, "unevaluatedProperties": False}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions(strict=False))
    assert "7 branches that may match together" in str(info.value)


KEYED = [None, "x", {}, {"foo": "s"}, {"bar": "bar"}, {"bar": "no"}, {"baz": "baz"}, {"bar": "bar", "baz": "baz"},
         {"bar": "bar", "baz": 1}, {"foo": "s", "bar": "bar", "quux": "quux"}, {"quux": "quux"}, {"quux": 0},
         {"bar": "bar", "baz": "baz", "quux": "quux"}, {"foo": 1, "bar": "bar"}, {"other": 1}, {"foo": "s", "other": 1},
         {"x": 1}, {"y": 1}, {"x": 1, "y": 2}, {"b": 2, "x": 1}, {"b": 2, "y": 1}, {"foo2": 1}, {"foo2": 1, "bar": 1}, {"foo": "s", "bar": 2}]
ARRAYS = [None, {}, [], ["a"], [1], ["a", 1], [1, "a"], ["foo"], ["foo", "bar"], ["foo", "baz"], ["foo", "bar", 1],
          ["foo", 1, "baz"], ["foo", "x", "baz"], [2, 3], [2], [3], [6], [2, 3, 5], [2, 3, 7], [10, 9, 25], [7],
          [4, 9, 1], ["a", "b", "c"], ["b", "a"], ["a", "c"], ["a", "b"], [True, "a"]]


@pytest.mark.parametrize("schema,pool", [
    # anyOf branches that may match together: split by which of them match (the others failing)
    ({"properties": {"foo": {"type": "string"}}, "anyOf": [
        {"properties": {"bar": {"const": "bar"}}, "required": ["bar"]},
        {"properties": {"baz": {"const": "baz"}}, "required": ["baz"]},
        {"properties": {"quux": {"const": "quux"}}, "required": ["quux"]}], "unevaluatedProperties": False}, KEYED),
    ({"properties": {"foo": True}, "anyOf": [{"properties": {"bar": True}}, {"required": ["x"]}],
      "unevaluatedProperties": False}, KEYED + POOL),
    # oneOf branches that may overlap: one matches, the others fail beside it
    ({"properties": {"foo": {"type": "string"}}, "oneOf": [
        {"properties": {"bar": {"const": "bar"}}, "required": ["bar"]},
        {"properties": {"baz": {"const": "baz"}}, "required": ["baz"]}], "unevaluatedProperties": False}, KEYED),
    ({"$defs": {"two": {"required": ["x"], "properties": {"x": True}}}, "allOf": [
        {"properties": {"b": True}}, {"oneOf": [{"$ref": "#/$defs/two"}, {"required": ["y"], "properties": {"y": True}}]}],
      "unevaluatedProperties": False}, KEYED),
    ({"prefixItems": [{"const": "foo"}], "anyOf": [{"prefixItems": [True, {"const": "bar"}]},
                                                   {"prefixItems": [True, True, {"const": "baz"}]}],
      "unevaluatedItems": False}, ARRAYS),
    # dependentSchemas: the key absent, or present with its schema's evaluations
    ({"properties": {"foo": {"type": "string"}}, "dependentSchemas": {
        "foo": {"properties": {"bar": {"const": "bar"}}, "required": ["bar"]}}, "unevaluatedProperties": False}, KEYED),
    ({"properties": {"foo2": {}}, "dependentSchemas": {"foo": {}, "foo2": {"properties": {"bar": {}}}},
      "unevaluatedProperties": False}, KEYED),
    # contains evaluates the items it matches (draft 2020-12), minContains 0 too; not in 2019-09
    ({"prefixItems": [True], "contains": {"type": "string"}, "unevaluatedItems": False}, ARRAYS),
    ({"contains": {"type": "string"}, "minContains": 0, "unevaluatedItems": False}, ARRAYS),
    ({"allOf": [{"contains": {"multipleOf": 2}}, {"contains": {"multipleOf": 3}}], "unevaluatedItems": {"multipleOf": 5}},
     ARRAYS),
    ({"if": {"contains": {"const": "a"}}, "then": {"if": {"contains": {"const": "b"}}}, "unevaluatedItems": False},
     ARRAYS),
])
def test_unevaluated_with_overlapping_branches_dependents_and_contains_is_exact(schema, pool):
    check_against_jsonschema(schema, pool)


@pytest.mark.parametrize("schema", [
    # beside $ref: the target's evaluations count (its own unevaluated* first sees its own)
    {"$defs": {"bar": {"properties": {"bar": {"type": "string"}}}}, "$ref": "#/$defs/bar",
     "properties": {"foo": {"type": "string"}}, "unevaluatedProperties": False},
    {"$defs": {"A": {"prefixItems": [True]}}, "$ref": "#/$defs/A", "unevaluatedItems": False},
    # beside disjoint oneOf/anyOf branches: exactly one matches, its evaluations count
    {"properties": {"foo": True}, "oneOf": [{"type": "object", "properties": {"bar": {"const": "b"}}, "required": ["bar"]},
                                            {"type": "object", "properties": {"bar": {"type": "integer"}}, "required": ["bar"]}],
     "unevaluatedProperties": False},
    {"anyOf": [{"type": "array", "prefixItems": [True]}, {"type": "object"}], "unevaluatedItems": False},
    # beside if/then/else: the condition's evaluations count only when it holds
    {"if": {"properties": {"bar": {"const": "b"}}, "required": ["bar"]}, "then": {"properties": {"foo": True}},
     "else": {"properties": {"baz": True}}, "unevaluatedProperties": False},
    {"if": {"properties": {"foo": {"const": "a"}}, "required": ["foo"]}, "unevaluatedProperties": False},
    # beside not: it evaluates nothing
    {"properties": {"foo": True}, "not": {"type": "string"}, "unevaluatedProperties": False},
])
def test_unevaluated_beside_applicators_is_exact(schema):
    check(schema)


def test_unevaluated_beside_recursive_ref_is_refused():
    schema = {"$defs": {"A": {"properties": {"foo": True}, "allOf": [{"$ref": "#/$defs/A"}]}}, "$ref": "#/$defs/A",
              "unevaluatedProperties": False}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions())
    assert info.value.keyword == "unevaluatedProperties" and "recursive $ref" in str(info.value)


def test_unevaluated_beside_inexact_if_is_refused():
    schema = {"if": {"const": [1, 2]}, "then": {"properties": {"foo": True}}, "unevaluatedProperties": False}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions())
    assert info.value.keyword == "unevaluatedProperties" and "'if'" in str(info.value)
