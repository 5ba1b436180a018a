"""``$ref`` resolved against base URIs (nested ``$id``), resources and scoped anchors, checked
against jsonschema on a value pool; references outside the document refused, named."""

import jsonschema
import pytest

from enforcer import UnsupportedSchemaError
from enforcer.json_schema import SchemaOptions
from enforcer.matcher import compile_schema_dfa

POOL = [None, True, 0, 1, 2.5, -3, "", "a", "abc", [], [1], [1, "a"], ["a", "b"], {}, {"a": 1}, {"a": "x"},
        {"foo": {"bar": "a"}, "bar": "a"}, {"foo": {"bar": 1}, "bar": "a"}, {"name": "x"}, {"name": None},
        {"name": {"first": "x"}}, {"list": [1, 2]}, {"list": ["a"]}]


def check(schema, strict=False):
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=strict, free_form_depth=3))
    validator = jsonschema.Draft202012Validator(schema)
    import json
    for value in POOL:
        valid = validator.is_valid(value)
        text = json.dumps(value)
        assert dfa.matches(text) == valid, (text, valid)


@pytest.mark.parametrize("schema", [
    {"$id": "http://example.com/root.json", "properties": {"list": {"$ref": "item.json"}},
     "$defs": {"item": {"$id": "item.json", "type": "array", "items": {"type": "integer"}}}},
    {"$id": "http://example.com/a/root.json", "items": {"$id": "b/", "$ref": "c.json"},
     "$defs": {"c": {"$id": "http://example.com/a/b/c.json", "type": "integer"}}},
    {"$id": "http://example.com/schema-relative-uri-defs1.json",
     "properties": {"foo": {"$id": "schema-relative-uri-defs2.json",
                            "$defs": {"inner": {"properties": {"bar": {"type": "string"}}}},
                            "$ref": "#/$defs/inner"}},
     "$ref": "schema-relative-uri-defs2.json"},
    {"$id": "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed", "properties": {"name": {"$ref": "#/$defs/n"}},
     "$defs": {"n": {"type": "string"}}},
    {"$ref": "urn:uuid:deadbeef-1234-ff00-00ff-4321feebdaed#/$defs/s",
     "$defs": {"x": {"$id": "urn:uuid:deadbeef-1234-ff00-00ff-4321feebdaed", "$defs": {"s": {"type": "string"}}}}},
    {"$id": "http://example.com/root", "$ref": "nested.json#foo",
     "$defs": {"A": {"$id": "nested.json", "$defs": {"B": {"$anchor": "foo", "type": "integer"}}}}},
])
def test_references_resolve_against_nested_base_uris(schema):
    check(schema)


def test_anchor_is_scoped_to_its_resource():
    """The same anchor name in two resources: each reference finds the one of its own base."""
    schema = {"$id": "http://example.com/root.json",
              "properties": {"name": {"$ref": "#n"}, "list": {"$ref": "other.json#n"}},
              "$defs": {"here": {"$anchor": "n", "type": "string"},
                        "other": {"$id": "other.json", "$defs": {"x": {"$anchor": "n", "type": "array"}}}}}
    check(schema)


def test_draft7_id_beside_ref_is_ignored():
    """Drafts 4-7 ignore every keyword beside ``$ref``, ``$id`` included: the reference resolves
    against the enclosing base."""
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "$id": "http://example.com/root.json",
              "definitions": {"a": {"type": "integer"},
                              "b": {"$id": "http://example.com/b/", "$ref": "#/definitions/a"}},
              "properties": {"name": {"$ref": "#/definitions/b"}}}
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False))
    assert dfa.matches('{"name": 1}') and not dfa.matches('{"name": "x"}')


def test_reference_outside_the_document_is_refused_with_its_uri():
    schema = {"$id": "http://example.com/root.json", "properties": {"a": {"$ref": "other.json#/x"}}}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions())
    assert info.value.pointer == "/properties/a" and "http://example.com/other.json" in str(info.value)
