"""Malformed, deep and cyclic schemas: the library's own error (with its pointer) or a bounded
compile, never a foreign exception (RecursionError, TypeError, UnicodeEncodeError...)."""

from __future__ import annotations

import pytest

from enforcer import compile_json_schema, compile_tools
from enforcer.automaton import compile_node
from enforcer.errors import (EnforcerError, InvalidSchemaError, InvalidToolsError, SchemaTooComplexError,
                             UnsupportedSchemaError)
from enforcer.json_schema import MAX_NESTING, SchemaCompiler, SchemaOptions
from enforcer.matcher import compile_schema_dfa
from enforcer.schema_check import MAX_DOCUMENT_DEPTH
from jsonschema_oracle import check_against_jsonschema


@pytest.mark.parametrize("schema,pointer", [
    ({"type": 5}, "/type"),
    ({"$ref": 5}, "/$ref"),
    ({"type": "object", "required": "ab"}, "/required"),
    ({"type": "object", "dependentRequired": {"a": "b"}}, "/dependentRequired/a"),
    ({"type": "object", "properties": {"a": {"type": "strnig"}}}, "/properties/a/type"),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "required": []}, "/required"),
    ({"type": "object", "properties": {"a\ud800": {"type": "string"}}}, "/properties"),
    ({"enum": ["ok", "bad\udfff"]}, "/enum/1"),
])
def test_malformed_schema_is_invalid_with_pointer(schema, pointer):
    with pytest.raises(InvalidSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions())
    assert info.value.pointer == pointer


def test_malformed_schema_through_the_public_front_doors(kimi_vocab):
    with pytest.raises(InvalidSchemaError):
        compile_json_schema({"type": "object", "required": "ab"}, kimi_vocab)
    with pytest.raises(InvalidToolsError, match="/tools/0/function/parameters/properties"):
        compile_tools([{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"a\ud800": {"type": "string"}}}}}], kimi_vocab)


def _nested_objects(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def _nested_any_of(levels: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(levels):
        schema = {"anyOf": [{"type": "integer"}, {"type": "array", "items": schema}]}
    return schema


def _deep_list(levels: int) -> list:
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("schema", [
    _nested_objects(300), _nested_any_of(200), {"const": _deep_list(2000)}, {"enum": [1, _deep_list(5000)]},
    {"type": "array", "items": _nested_objects(MAX_DOCUMENT_DEPTH)},
])
def test_deep_documents_are_refused_by_the_documented_limit(schema):
    with pytest.raises(SchemaTooComplexError, match="nests deeper than"):
        compile_schema_dfa(schema, SchemaOptions())


@pytest.mark.parametrize("document, pointer", [
    ({"properties": {"a": {"description": "x\ud800y"}}}, "/properties/a/description"),
    ({"properties": {"a": {"enum": ["ok", 1, ["é", "\udfff"]]}}}, "/properties/a/enum/2/1"),
    ({"properties": {"a\ud800": {}}}, "/properties"),
    ({"properties": {"a": {1: {}}}}, "/properties/a"),
    ({"$defs": {"x~y/z": [{"enum": [object()]}]}}, "/$defs/x~0y~1z/0/enum/0"),
])
def test_a_document_error_names_its_pointer(document, pointer):
    """Text that is not Unicode (a lone surrogate, in a value, a key, past ASCII text beside
    it), a key that is not a string and a value that is not JSON each name where they are."""
    from enforcer.schema_check import check_document

    with pytest.raises(InvalidSchemaError) as raised:
        check_document(document)
    assert raised.value.pointer == pointer


def test_too_deep_a_document_names_where_it_passes_the_limit():
    from enforcer.schema_check import check_document

    with pytest.raises(SchemaTooComplexError) as raised:
        check_document(_nested_objects(MAX_DOCUMENT_DEPTH))
    assert str(raised.value).endswith(f"nests deeper than {MAX_DOCUMENT_DEPTH} levels at "
                                      + "/properties/a" * (MAX_DOCUMENT_DEPTH // 2))


def test_deep_schema_text_is_refused_not_a_recursion_error(kimi_vocab):
    with pytest.raises(EnforcerError):
        compile_json_schema("[" * 100_000 + "]" * 100_000, kimi_vocab)


def test_nesting_within_the_limits_compiles():
    dfa = compile_schema_dfa(_nested_objects(30), SchemaOptions())
    text = '{"a": ' * 30 + '"x"' + "}" * 30
    assert dfa.matches(text) and not dfa.matches(text.replace('"x"', "1"))


def test_reference_chain_of_a_thousand_links_compiles():
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(1000)}
    defs["d1000"] = {"type": "string", "maxLength": 2}
    dfa = compile_schema_dfa({"$defs": defs, "$ref": "#/$defs/d0"}, SchemaOptions())
    assert dfa.matches('"ab"') and not dfa.matches('"abc"')


def test_sub_schemas_nested_past_the_limit_are_refused_with_the_pointer():
    defs = {f"d{i}": {"type": "array", "items": {"$ref": f"#/$defs/d{i + 1}"}} for i in range(MAX_NESTING + 10)}
    defs[f"d{MAX_NESTING + 10}"] = {"type": "null"}
    with pytest.raises(SchemaTooComplexError, match="nest more than"):
        compile_schema_dfa({"$defs": defs, "$ref": "#/$defs/d0"}, SchemaOptions(max_recursion=1))


@pytest.mark.parametrize("keyword", ["allOf", "anyOf", "oneOf"])
def test_reference_cycle_without_descent_is_refused_with_the_cycle_named(keyword):
    schema = {"$defs": {"a": {keyword: [{"$ref": "#/$defs/a"}, {"type": "object"}]}}, "$ref": "#/$defs/a"}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions())
    assert info.value.keyword == "$ref" and "#/$defs/a -> #/$defs/a" in str(info.value)


_DEFINITIONS = {"content": {"type": "object", "properties": {"id": {"type": "string"}}},
                "reference": {"type": "object", "properties": {"referent": {"type": "string"}}, "required": ["referent"]}}
_ONE_OF = {"oneOf": [{"$ref": "#/$defs/content"}, {"$ref": "#/$defs/reference"}, {"type": "string"}]}
_MEMBERS = [None, 1, "x", {}, {"id": "a"}, {"id": 1}, {"referent": "r"}, {"referent": 1}, {"id": "a", "referent": "r"},
            {"id": "a", "referent": 1}, {"referent": "r", "id": 1}]  # keys in the order the matching branch writes


@pytest.mark.parametrize("schema", [
    # jsonschemabench WashingtonPost wp_78: a key both properties and patternProperties describe
    {"$defs": _DEFINITIONS, "type": "object", "properties": {"basic": _ONE_OF}, "patternProperties": {"^b": _ONE_OF}},
    {"$defs": _DEFINITIONS, "allOf": [_ONE_OF, _ONE_OF]},
    {"$defs": _DEFINITIONS, "allOf": [_ONE_OF, {"anyOf": [{"$ref": "#/$defs/content"}, {"maxLength": 1}]}]},
    {"$defs": _DEFINITIONS, "$ref": "#/$defs/content", "anyOf": [{"$ref": "#/$defs/content"}, {"type": "null"}]},
])
def test_a_definition_met_again_beside_its_expansion_is_no_cycle(schema):
    """Unions over the same definitions met at one value (the branch of one is compiled with
    the other beside it, so the other's branches meet the same ``$ref`` again without
    descending): no cycle in the schema, so exact, not refused."""
    pool = [*_MEMBERS, *({key: m} for key in ("basic", "bx", "other") for m in _MEMBERS),
            *({"basic": m, "bb": n} for m in _MEMBERS[3:] for n in _MEMBERS[2:6])]
    check_against_jsonschema(schema, pool)


def test_a_definition_met_twice_the_same_way_is_compiled_once():
    """``allOf: [$ref x, $ref x, ...]`` is x: its sub-values are built once, as for x alone
    (JsonSchemaStore theme.json distributed such a union over its own copy at every style
    value: 750,000 sub-values, 40 s before its refusal)."""
    definitions = {"x": {"oneOf": [{"type": "string"}, {"$ref": "#/$defs/y"}]},
                   "y": {"type": "object", "properties": {"ref": {"type": "string"}}}}

    def built(copies: int) -> int:
        compiler = SchemaCompiler({"$defs": definitions, "allOf": [{"$ref": "#/$defs/x"}] * copies}, SchemaOptions())
        compiler.compile()
        return len(compiler._values)

    assert built(3) == built(1)
    check_against_jsonschema({"$defs": definitions, "allOf": [{"$ref": "#/$defs/x"}] * 3},
                             ["a", 1, None, {}, {"ref": "r"}, {"ref": 1}])


@pytest.mark.parametrize("definitions,cycle", [
    ({"a": {"allOf": [{"$ref": "#/$defs/b"}, {"type": "object"}]}, "b": {"anyOf": [{"$ref": "#/$defs/a"}, True]}},
     "#/$defs/a -> #/$defs/b -> #/$defs/a"),
    ({"a": {"if": {"type": "object"}, "then": {"$ref": "#/$defs/a"}}}, "#/$defs/a -> #/$defs/a"),
])
def test_a_cycle_through_a_definition_met_twice_at_one_value_is_refused_with_the_cycle_named(definitions, cycle):
    """The definition is met twice at one value (a key under ``properties`` and
    ``patternProperties``): its own cycle, through its body, is still refused and named."""
    ref = {"$ref": "#/$defs/a"}
    schema = {"$defs": definitions, "type": "object", "properties": {"x": ref}, "patternProperties": {"^x": ref}}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions())
    assert info.value.keyword == "$ref" and cycle in str(info.value)


@pytest.mark.parametrize("definition", [
    {"type": "object", "propertyNames": {"$ref": "#/$defs/a"}},
    {"type": ["object", "string"], "maxLength": 1, "propertyNames": {"$ref": "#/$defs/a"}},
])
def test_property_names_are_values_nested_in_the_object(definition):
    """A key is a value of its own: ``propertyNames`` naming the object's own definition is
    recursion (cut by ``max_recursion``), not a cycle at the object's depth."""
    pool = [{}, {"a": 1}, {"ab": 1}, {"a": {"b": 1}}, "a", "ab"]
    check_against_jsonschema({"$defs": {"a": definition}, "$ref": "#/$defs/a"}, pool)


def test_reference_cycle_through_all_of_under_properties_is_followed_as_deep_as_the_text():
    """``Foo.properties.childFoos = allOf[$ref Foo, $ref ChildFoo]``: a knot (the merged parts'
    ``childFoos`` meets itself), so no depth is cut; recursion cut on each path (documents with
    ``$dynamicRef``) stops after ``max_recursion``."""
    schema = {"$defs": {
        "Foo": {"type": "object", "properties": {"childFoos": {"allOf": [{"$ref": "#/$defs/Foo"},
                                                                         {"$ref": "#/$defs/ChildFoo"}]}}},
        "ChildFoo": {"type": "object", "properties": {"x": {"type": "string"}}}}, "$ref": "#/$defs/Foo"}
    dfa = compile_schema_dfa(schema, SchemaOptions(max_recursion=3, strict=False))
    assert dfa.matches('{"childFoos": {"childFoos": {}, "x": "y"}}')
    assert not dfa.matches('{"childFoos": {"childFoos": {"x": 1}}}')
    deep = "{}"
    for _ in range(20):
        deep = '{"childFoos": ' + deep + ', "x": "y"}'
    assert dfa.matches(deep) and not dfa.matches(deep.replace('"y"', "1", 1))
    node = SchemaCompiler(schema, SchemaOptions(max_recursion=3, strict=False), knots=False).compile()
    cut = compile_node(node)
    assert cut.matches('{"childFoos": {"childFoos": {}, "x": "y"}}')
    assert not cut.matches('{"childFoos": {"childFoos": {"childFoos": {"childFoos": {}}}}}'), "cut at depth 3"


def test_meta_schema_check_does_not_judge_patterns_by_python_re():
    """``\\p{Letter}`` is ECMA-262, not Python ``re``: the pattern compiler decides it."""
    dfa = compile_schema_dfa({"type": "string", "pattern": "^\\p{Letter}+$"}, SchemaOptions())
    assert dfa.matches('"é"') and not dfa.matches('"1"')



@pytest.mark.parametrize("schema", [
    {"type": "object", "required": ("a", "a")}, {"type": "object", "required": ()}, {"type": ("string", "string")},
    {"enum": ()}, {"enum": (1, 1)}, {"items": ()}, {"allOf": ()}, {"examples": ()}, {"const": ()},
    {"dependentRequired": {"a": ("b", "b")}}, {"$schema": "http://json-schema.org/draft-04/schema#", "required": ()},
    {"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": {"a": ("b", "b")}},
])
def test_a_document_in_memory_gets_the_verdict_of_its_json(schema):
    """The compiled meta-schema predicate reads the document as given (no JSON round trip):
    tuples where the JSON has lists get jsonschema's verdict on that JSON."""
    import json

    import jsonschema

    from enforcer.schema_check import check_schema, validator_class

    cls = validator_class(schema)
    as_json = json.loads(json.dumps(schema))
    if next(iter(cls(cls.META_SCHEMA).iter_errors(as_json)), None) is None:
        check_schema(schema)
    else:
        with pytest.raises(InvalidSchemaError):
            check_schema(schema)


class _NoWalk(dict):
    """A schema object whose members must not be read (a walk over it fails the test)."""

    def values(self):  # type: ignore[override]
        raise AssertionError("the document was walked")


@pytest.mark.parametrize("schema, cyclic", [
    ({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}}, False),
    ({"type": "object", "properties": {"$ref": {"type": "string"}}}, False),  # a key named $ref: walked
    ({"$defs": {"n": {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"}, True),
])
def test_a_reference_cycle_is_looked_for_only_where_a_reference_is_written(schema, cyclic):
    """Whether a ``$ref`` leads back to itself decides how recursion is built; a document
    without one has no cycle, known from the keywords the compile looks up once, without a
    second walk of the document (a compile's sub-values of 500 NFA states or more ask)."""
    compiler = SchemaCompiler(schema, SchemaOptions())
    assert compiler._reference_cycle() is cyclic
    if "$ref" not in str(schema):
        compiler = SchemaCompiler(schema, SchemaOptions())
        compiler.root = _NoWalk(schema)
        assert compiler._reference_cycle() is False


def _random_document(rng, depth: int = 0):
    """A random JSON-like document: the scalars, texts (some with a lone surrogate), lists,
    tuples and objects (some keys not strings) that check_document judges."""
    choice = rng.randrange(10 if depth < 6 else 6)
    if choice == 0:
        return rng.choice([None, True, False, 0, -7, 2.5, 1e300])
    if choice in (1, 2):
        return rng.choice(["", "a", "type", "é", "bad\ud800", "日本", "$ref"])
    if choice == 3:
        return rng.choice([{1, 2}, b"x", object()]) if rng.random() < 0.05 else "plain"
    if choice in (4, 5):
        return "leaf"
    if choice in (6, 7):
        items = [_random_document(rng, depth + 1) for _ in range(rng.randrange(4))]
        return tuple(items) if rng.random() < 0.2 else items
    keys = ["type", "properties", "$ref", "items", "é", "k\udfff"]
    out = {}
    for _ in range(rng.randrange(5)):
        key = rng.choice(keys) if rng.random() < 0.97 else rng.choice([1, None])
        out[key] = _random_document(rng, depth + 1)
    return out


def _walk_verdict(document) -> bool:
    from enforcer import schema_check
    try:
        schema_check.check_document(document)
    except (InvalidSchemaError, SchemaTooComplexError):
        return False
    return True


def test_compiled_document_check_is_the_walk(monkeypatch):
    """The compiled plain_document clears exactly the documents the Python walk passes (the
    walk then runs only to name a problem): random documents with bad keys, lone surrogates,
    foreign values and depths around the limit, differential against the walk alone."""
    import random

    from enforcer import schema_check
    if schema_check.plain_document is None:
        pytest.skip("the compiled kernels are not built")
    kernel = schema_check.plain_document
    monkeypatch.setattr(schema_check, "plain_document", None)
    rng = random.Random(7)
    documents = [_random_document(rng) for _ in range(3000)]
    for depth in (MAX_DOCUMENT_DEPTH - 1, MAX_DOCUMENT_DEPTH, MAX_DOCUMENT_DEPTH + 1):
        for leaf in ({}, [], "x", ("t",)):
            doc = leaf
            for k in range(depth):
                doc = {"a": doc} if k % 2 else [doc]
            documents.append(doc)
    verdicts = [(kernel(doc, MAX_DOCUMENT_DEPTH), _walk_verdict(doc)) for doc in documents]
    assert all(compiled == walked for compiled, walked in verdicts)
    assert sum(walked for _, walked in verdicts) not in (0, len(verdicts))  # both verdicts occur


def test_compiled_keys_present_is_the_reference():
    """The compiled keys_present finds what the Python reference finds (the same stopping
    point), on random documents for several key sets and stopping counts."""
    import random

    from enforcer import schema_resources
    if schema_resources._keys_present_kernel is None:
        pytest.skip("the compiled kernels are not built")
    rng = random.Random(11)
    documents = [_random_document(rng) for _ in range(2000)]
    for keys in (frozenset(), frozenset({"$ref"}), frozenset({"$ref", "items", "é"}), frozenset({"absent"})):
        for wanted in (0, 1, 2, len(keys)):
            found = [schema_resources._keys_present_kernel(d, keys, wanted) for d in documents]
            assert found == [schema_resources._keys_present_reference(d, keys, wanted) for d in documents]
            assert any(found) or not keys or keys == frozenset({"absent"})

    class Schema(dict):  # a subclass: left to the reference, which reads it through its methods
        def keys(self):
            return {"$ref": 0}.keys()

    document = {"items": [Schema(type="string")]}
    assert schema_resources._keys_present_kernel(document, frozenset({"$ref"}), 1) is None
    assert schema_resources.keys_present(document, frozenset({"$ref"})) == frozenset({"$ref"})
