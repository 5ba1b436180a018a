"""``$dynamicRef`` resolved against the dynamic scope of each compiled path (2020-12): the
outermost resource entered with a matching ``$dynamicAnchor`` wins when the reference first
resolves to a ``$dynamicAnchor``; otherwise it is a plain ``$ref``. Checked against jsonschema on
a value pool in spec mode (strict mode only rejects more)."""

import pytest

from enforcer.json_schema import SchemaOptions
from enforcer.matcher import compile_schema_dfa
from jsonschema_oracle import check_against_jsonschema

POOL = [None, 1, 1.5, "x", "", [], [1], ["a"], [1, "a"], [None], [[1]], {}, {"a": 1}, {"a": "x"}, {"a": None},
        {"a": [1]}, {"a": {"a": 1}}, {"a": {"a": "x"}}, {"b": 1}]

BASE = "https://example.test/"


def check(schema):
    check_against_jsonschema(schema, POOL)


LIST = {"$id": "list", "type": "array", "items": {"$dynamicRef": "#item"},
        "$defs": {"default": {"$dynamicAnchor": "item"}}}


@pytest.mark.parametrize("schema", [
    # the root's anchor overrides the list's default: items are strings
    {"$id": BASE + "root", "$ref": "list", "$defs": {"s": {"$dynamicAnchor": "item", "type": "string"}, "list": LIST}},
    # without an override the list's own anchor: any item
    {"$id": BASE + "root", "$ref": "list", "$defs": {"list": LIST}},
    # an intermediate resource without the anchor changes nothing
    {"$id": BASE + "root", "$ref": "mid", "$defs": {"s": {"$dynamicAnchor": "item", "type": "integer"},
                                                    "mid": {"$id": "mid", "$ref": "list"}, "list": LIST}},
    # an $anchor of the same name is no dynamic anchor: a plain $ref to it
    {"$id": BASE + "root", "$ref": "list", "$defs": {"s": {"$anchor": "item", "type": "string"}, "list": LIST}},
    # a $dynamicRef to a plain $anchor is a $ref
    {"$id": BASE + "root", "properties": {"a": {"$dynamicRef": "#n"}}, "$defs": {"n": {"$anchor": "n", "type": "null"}}},
    # a $ref may name a $dynamicAnchor as a plain anchor
    {"$id": BASE + "root", "properties": {"a": {"$ref": "#n"}}, "$defs": {"n": {"$dynamicAnchor": "n", "type": "null"}}},
    # recursion through the dynamic anchor, cut like $ref's
    {"$id": BASE + "tree", "$dynamicAnchor": "node", "anyOf": [{"type": "integer"},
                                                              {"type": "object", "properties": {"a": {"$dynamicRef": "#node"}}}]},
])
def test_dynamic_ref_is_exact(schema):
    check(schema)


def test_dynamic_scope_of_each_path():
    """Two paths reach one $dynamicRef with different scopes: each path gets its own target."""
    generic = {"$id": "generic", "properties": {"a": {"items": {"$dynamicRef": "#t"}}},
               "$defs": {"d": {"$dynamicAnchor": "t"}}}
    schema = {"$id": BASE + "main", "anyOf": [{"$ref": "ints"}, {"$ref": "strs"}],
              "$defs": {"generic": generic,
                        "ints": {"$id": "ints", "$ref": "generic", "$defs": {"t": {"$dynamicAnchor": "t", "type": "integer"}}},
                        "strs": {"$id": "strs", "$ref": "generic", "$defs": {"t": {"$dynamicAnchor": "t", "type": "string"}}}}}
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False))
    assert dfa.matches('{"a": [1, 2]}') and dfa.matches('{"a": ["x"]}')
    assert not dfa.matches('{"a": [1, "x"]}') and not dfa.matches('{"a": [null]}')
