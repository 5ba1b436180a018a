"""``unevaluatedProperties``/``unevaluatedItems`` folded into ``additionalProperties``/``items``
where exact (beside plain sub-schemas), refused with the blocking keyword elsewhere; checked
against jsonschema on a value pool in both modes."""

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


def test_unevaluated_beside_instance_dependent_evaluation_is_refused():
    schema = {"properties": {"foo": True}, "anyOf": [{"properties": {"bar": True}}, {"required": ["x"]}],
              "unevaluatedProperties": False}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions())
    assert info.value.keyword == "unevaluatedProperties" and "anyOf" in str(info.value)


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
    schema = {"if": {"multipleOf": 2}, "then": {"properties": {"foo": True}}, "unevaluatedProperties": False}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions())
    assert info.value.keyword == "unevaluatedProperties" and "'if'" in str(info.value)
