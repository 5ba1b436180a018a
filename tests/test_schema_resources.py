"""``$ref`` resolved against base URIs (nested ``$id``), resources and scoped anchors, checked
against jsonschema on a value pool; references outside the document refused, named."""

import json

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


def test_one_reference_text_in_two_resources_names_each_its_own_and_is_resolved_once_per_base(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Resolutions are remembered by reference and base: ``#/$defs/v`` inside two resources names
    each resource's own definition (a string, an integer), and a definition met again at another
    depth does not resolve its reference again."""
    from enforcer.schema_resources import ResourceIndex

    resolved = []
    original = ResourceIndex._resolve

    def counting(self: ResourceIndex, ref: str, base: str):
        resolved.append((ref, base))
        return original(self, ref, base)

    monkeypatch.setattr(ResourceIndex, "_resolve", counting)
    schema = {"$id": "http://example.com/root.json", "properties": {
        "name": {"$ref": "a.json"}, "list": {"type": "array", "items": {"$ref": "a.json"}},
        "foo": {"$ref": "b.json"}},
        "$defs": {"a": {"$id": "a.json", "$ref": "#/$defs/v", "$defs": {"v": {"type": "string"}}},
                  "b": {"$id": "b.json", "$ref": "#/$defs/v", "$defs": {"v": {"type": "integer"}}}}}
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False))
    assert dfa.matches('{"name": "x", "list": ["y"], "foo": 3}')
    assert not dfa.matches('{"foo": "x"}') and not dfa.matches('{"name": 3}') and not dfa.matches('{"list": [3]}')
    assert sorted(resolved) == [("#/$defs/v", "http://example.com/a.json"), ("#/$defs/v", "http://example.com/b.json"),
                                ("a.json", "http://example.com/root.json"), ("b.json", "http://example.com/root.json")]


def test_draft7_id_beside_ref_is_ignored():
    """Drafts 4-7 ignore every keyword beside ``$ref``, ``$id`` included: the reference resolves
    against the enclosing base."""
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "$id": "http://example.com/root.json",
              "definitions": {"a": {"type": "integer"},
                              "b": {"$id": "http://example.com/b/", "$ref": "#/definitions/a"}},
              "properties": {"name": {"$ref": "#/definitions/b"}}}
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False))
    assert dfa.matches('{"name": 1}') and not dfa.matches('{"name": "x"}')


@pytest.mark.parametrize("dialect, id_keyword", [("http://json-schema.org/draft-07/schema#", "$id"),
                                                ("http://json-schema.org/draft-04/schema#", "id")])
def test_draft7_root_id_beside_ref_is_ignored(dialect, id_keyword):
    """The root's own ``$id`` beside a root ``$ref`` is ignored as well (drafts 4-7; JsonSchemaStore
    writes its schemas this way): ``#/definitions/...`` names the document itself."""
    schema = {"$schema": dialect, id_keyword: "https://json.schemastore.org/x.json", "$ref": "#/definitions/a",
              "definitions": {"a": {"type": "object", "properties": {"n": {"$ref": "#/definitions/n"}}},
                              "n": {"type": "integer"}}}
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False))
    validator = jsonschema.validators.validator_for(schema)(schema)
    for text in ('{"n": 1}', '{"n": "x"}', '{}', '1'):
        assert dfa.matches(text) == validator.is_valid(json.loads(text)), text


def test_reference_outside_the_document_is_refused_with_its_uri():
    schema = {"$id": "http://example.com/root.json", "properties": {"a": {"$ref": "other.json#/x"}}}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions())
    assert info.value.pointer == "/properties/a" and "http://example.com/other.json" in str(info.value)


# ---- resources handed in beside the schema (never fetched) ------------------------------------

REMOTE = "http://schemas.example.test/common.json"
COMMON = {"$defs": {"id": {"type": "integer", "minimum": 1}, "tag": {"$anchor": "tag", "type": "string",
                                                                     "maxLength": 3},
                    "pair": {"type": "array", "prefixItems": [{"$ref": "#/$defs/id"}, {"$ref": "#tag"}],
                             "items": False}}}


@pytest.mark.parametrize("ref", [f"{REMOTE}#/$defs/id", f"{REMOTE}#tag", f"{REMOTE}#/$defs/pair", "common.json#tag"])
def test_reference_into_a_given_resource_against_oracle(ref):
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    schema = {"$id": "http://schemas.example.test/root.json", "type": "object",
              "properties": {"a": {"$ref": ref}}, "required": ["a"]}
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False, resources={REMOTE: COMMON}))
    registry = Registry().with_resource(REMOTE, DRAFT202012.create_resource(COMMON))
    validator = jsonschema.Draft202012Validator(schema, registry=registry)
    import json
    for a in [0, 1, 7, -1, "", "ab", "abcd", [1, "ab"], [0, "ab"], [1, "abcd"], [1, "a", 2], None]:
        text = json.dumps({"a": a})
        assert dfa.matches(text) == validator.is_valid({"a": a}), text


def test_reference_outside_the_document_and_the_resources_is_refused_naming_it():
    schema = {"properties": {"a": {"$ref": "http://elsewhere.test/x.json"}}}
    for options in (SchemaOptions(), SchemaOptions(resources={REMOTE: COMMON})):
        with pytest.raises(UnsupportedSchemaError) as info:
            compile_schema_dfa(schema, options)
        assert info.value.keyword == "$ref" and info.value.pointer == "/properties/a"
        assert "http://elsewhere.test/x.json" in str(info.value) and "resources" in str(info.value)


def test_a_resource_of_another_dialect_is_refused_when_referenced():
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"n": {"type": "integer"}}}
    options = SchemaOptions(resources={REMOTE: draft7})
    with pytest.raises(UnsupportedSchemaError, match="draft7"):
        compile_schema_dfa({"$ref": f"{REMOTE}#/definitions/n"}, options)
    assert compile_schema_dfa({"type": "integer"}, options).matches("3")  # unreferenced: not read


def test_a_malformed_resource_is_an_invalid_schema_naming_its_uri():
    from enforcer import InvalidSchemaError

    options = SchemaOptions(resources={REMOTE: {"$defs": {"n": {"type": 5}}}})
    with pytest.raises(InvalidSchemaError) as info:
        compile_schema_dfa({"$ref": f"{REMOTE}#/$defs/n"}, options)
    assert info.value.pointer.startswith(REMOTE + "#/$defs/n")


@pytest.mark.parametrize("resources", [{"relative.json": {}}, {REMOTE + "#frag": {}}, {REMOTE: 5}, {5: {}},
                                       {REMOTE: {"x": float("nan")}}])
def test_bad_resources_option_is_a_value_error_naming_the_entry(resources):
    with pytest.raises(ValueError, match="resources"):
        SchemaOptions(resources=resources)


def test_resources_are_part_of_the_cache_key_and_reach_compile_tools(kimi_vocab):
    from enforcer import compile_json_schema, compile_tools

    schema = {"$ref": f"{REMOTE}#/$defs/id"}
    one = compile_json_schema(schema, kimi_vocab, resources={REMOTE: COMMON})
    other = compile_json_schema(schema, kimi_vocab, resources={REMOTE: {"$defs": {"id": {"type": "string"}}}})
    assert one is not other and one is compile_json_schema(schema, kimi_vocab, resources={REMOTE: COMMON})
    tools = [{"type": "function", "function": {"name": "get", "parameters": {
        "type": "object", "properties": {"id": {"$ref": f"{REMOTE}#/$defs/id"}}, "required": ["id"]}}}]
    with pytest.raises(UnsupportedSchemaError, match=r"\$ref"):
        compile_tools(tools, kimi_vocab)
    assert compile_tools(tools, kimi_vocab, resources={REMOTE: COMMON}) is not None
