"""``contains`` with ``minContains``/``maxContains``: matching items counted exactly, checked
against jsonschema on every array of a small pool (all serialisations json.dumps writes)."""

import itertools
import json
import random

import jsonschema
import pytest

from benchmarks.conformance import SchemaWalker
from enforcer import UnsupportedSchemaError
from enforcer.json_schema import SchemaOptions
from enforcer.matcher import compile_schema_dfa

ITEMS = [1, 2, 5, 6, "a", None, 1.5, [1], {"a": 1}]
ARRAYS = [list(p) for n in range(4) for p in itertools.product(ITEMS[:6], repeat=n)] + [[[1], {"a": 1}, 1.5]]


@pytest.mark.parametrize("schema", [
    {"contains": {"minimum": 5}},
    {"contains": {"const": 1}, "minContains": 2},
    {"contains": {"const": 1}, "maxContains": 1},
    {"contains": {"const": 1}, "minContains": 0, "maxContains": 1},
    {"contains": {"type": "string"}, "minContains": 1, "maxContains": 2, "maxItems": 3},
    {"items": {"type": "integer"}, "contains": {"multipleOf": 2}, "minContains": 2},
    {"prefixItems": [{"type": "string"}], "contains": {"type": "integer"}, "maxContains": 1},
    {"contains": {"type": "array"}},
    {"contains": False}, {"contains": True, "minContains": 2},
    {"contains": {"const": 1}, "maxContains": 1, "minContains": 2},
])
def test_contains_counts_exactly(schema):
    validator = jsonschema.Draft202012Validator(schema)
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False, free_form_depth=2))
    for value in ARRAYS:
        valid = validator.is_valid(value)
        for text in (json.dumps(value), json.dumps(value, indent=2), json.dumps(value, separators=(",", ":"))):
            assert dfa.matches(text) == valid, (text, valid)


def test_max_contains_never_counts_an_exponent_form_apart():
    """``1e0`` equals 1: written with an exponent it would escape the count of ``const: 1``; under
    ``maxContains`` numbers are written without exponent."""
    dfa = compile_schema_dfa({"contains": {"const": 1}, "maxContains": 1}, SchemaOptions())
    assert dfa.matches("[1, 2]") and not dfa.matches("[1, 1e0]") and not dfa.matches("[1, 10E-1]")
    assert compile_schema_dfa({"contains": {"const": 1}}, SchemaOptions()).matches("[1e0, 1]")


NESTED = [1, 2, "a", [2], [1, "a"], [[2]], {"a": 1}, {"b": 2}]
NESTED_ARRAYS = [list(p) for n in range(4) for p in itertools.product(NESTED, repeat=n)]
HOLDS_2 = {"type": "array", "contains": {"type": "array", "contains": {"const": 2}}}  # [[2]] is both
ALL_2 = {"type": "array", "contains": {"type": "array", "items": {"const": 2}}}


@pytest.mark.parametrize("schema", [
    {"items": {"type": "array"}, "contains": {"contains": {"const": 2}}},
    {"contains": {"type": "array", "contains": {"const": 2}}, "minContains": 2},
    {"contains": {"type": "array", "items": {"const": 2}}, "maxContains": 1},
    {"items": {"type": "object"}, "contains": {"required": ["a"]}, "maxContains": 1},
    {"contains": {"type": "object", "required": ["a"]}, "minContains": 0, "maxContains": 1},
    {"allOf": [{"contains": {"const": 1}}, {"contains": {"type": "array"}}]},
    {"allOf": [{"contains": {"const": 2}, "maxContains": 1}, {"contains": {"type": "array"}, "minContains": 2}]},
    {"allOf": [{"not": {"contains": {"const": 1}}}, {"not": {"contains": {"type": "array"}}}]},
    {"allOf": [{"items": {"type": "array"}}, {"not": {"items": {"contains": {"const": 2}}}},
               {"not": {"items": {"items": {"const": 2}}}}]},
    {"type": "array", "oneOf": [{"allOf": [{"items": HOLDS_2}, {"contains": ALL_2}]},
                                {"allOf": [{"items": ALL_2}, {"contains": HOLDS_2}]}]},
    {"allOf": [HOLDS_2, {"not": ALL_2}]},
])
def test_contains_of_arrays_and_objects_counts_by_value(schema):
    """Items that are arrays or objects are split by value (the item with ``contains``, the item
    with its negation), so a count is exact whatever the writing, ``maxContains`` included;
    several ``contains`` of one array are counted together, and two ``not`` of arrays become
    the ways to fail them rather than an intersection of whole automata."""
    validator = jsonschema.Draft202012Validator(schema)
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False, free_form_depth=3))
    for value in NESTED_ARRAYS:
        valid = validator.is_valid(value)
        for text in (json.dumps(value), json.dumps(value, separators=(",", ":"))):
            assert dfa.matches(text) == valid, (text, valid)


@pytest.mark.parametrize("schema", [
    {"allOf": [{"contains": {"type": "array", "contains": {"const": 2}}}, {"contains": {"type": "object"}}]},
    {"allOf": [{"not": {"contains": {"type": "array", "contains": {"const": 2}}}},
               {"not": {"contains": {"type": "object", "required": ["a"]}}}]},
])
def test_arrays_of_an_all_of_are_not_intersected_whole(schema):
    """Two ``contains`` (or two ``not``) of arrays in one ``allOf``: counted together (or turned
    into the ways to fail them), so no automaton is built whole; intersecting free-form arrays
    whole needs more than a small eager budget."""
    validator = jsonschema.Draft202012Validator(schema)
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False, free_form_depth=3, max_eager_states=2000))
    for value in NESTED_ARRAYS:
        assert dfa.matches(json.dumps(value)) == validator.is_valid(value), value


def test_max_contains_of_arrays_not_negated_exactly_is_refused():
    """Counting arrays under ``maxContains`` needs their ``contains`` negated exactly (an
    automaton difference would miss writings and let a matching item go uncounted)."""
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa({"items": {"type": "array"}, "contains": {"uniqueItems": True}, "maxContains": 1},
                           SchemaOptions())
    assert info.value.keyword == "maxContains"


def test_dependent_schemas_apply_when_their_key_is_present():
    """dependentSchemas (and draft-7 schema dependencies) as a union over which keys appear."""
    for schema in ({"dependentSchemas": {"bar": {"properties": {"foo": {"type": "integer"}}}, "baz": False},
                    "properties": {"foo": {}, "bar": {}}},
                   {"$schema": "http://json-schema.org/draft-07/schema#",
                    "dependencies": {"bar": {"properties": {"foo": {"type": "integer"}}}, "baz": ["foo"]}}):
        validator = jsonschema.validators.validator_for(schema)(schema)
        dfa = compile_schema_dfa(schema, SchemaOptions(strict=False))
        for value in ({}, {"foo": "x"}, {"foo": 1, "bar": 2}, {"foo": "x", "bar": 2}, {"bar": 1}, {"baz": 1},
                      {"foo": 1, "baz": 1}, {"foo": "x", "bar": 1, "baz": 1}, [], "x", 3):
            ordered = SchemaWalker(schema).walk(value)[0]  # keys in the order the compiler writes them
            assert dfa.matches(json.dumps(ordered)) == validator.is_valid(value), (schema, value)


@pytest.mark.parametrize("schema", [{"not": {"type": "integer"}}, {"not": {"type": ["integer", "boolean"]}},
                                    {"type": ["number", "string"], "not": {"type": "integer"}, "maxLength": 2},
                                    {"not": {"not": {"type": "integer", "minimum": 2}}},
                                    {"type": "integer", "not": {"not": {"maximum": 3}}}])
def test_not_integer_and_double_negation(schema):
    validator = jsonschema.Draft202012Validator(schema)
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False, free_form_depth=2))
    for value in (0, 1, 2, 3, 5, -7, 1.5, -0.25, 2.0, 10.01, "a", "abc", True, None, [], {}, [1.5]):
        text = json.dumps(value)
        accepted = dfa.matches(text)
        assert not (accepted and not validator.is_valid(value)), text
        assert accepted == validator.is_valid(value), text
    assert not dfa.matches("1.5e1") or validator.is_valid(15)  # 1.5e1 is the integer 15


def test_not_integer_writes_only_numbers_that_stay_fractional_as_doubles():
    """A long number with a fraction digit may parse to an integer double (json.loads, then the
    validator, is what a client runs): the corpus fuzz wrote '446153263532818269995202190486.1'
    under not: integer. Every accepted text must load as a non-integer float."""
    dfa = compile_schema_dfa({"not": {"type": "integer"}}, SchemaOptions(strict=False, free_form_depth=1))
    for text in ("446153263532818269995202190486.1", "1.0000000000000001", "1152921504606846976.5",
                 "123456789012345.5", "0.000000000000001"):
        assert not dfa.matches(text), text
    for text in ("12345678901234.5", "0.00000000000001", "-1.5", "0.10"):
        assert dfa.matches(text), text
    rng = random.Random(7)
    for _ in range(5000):
        text = "".join(rng.choice("0123456789.") for _ in range(rng.randint(1, 20)))
        if dfa.matches(text):
            value = json.loads(text)
            assert isinstance(value, float) and not value.is_integer(), text


def test_nested_contains_compiles_lazily():
    """contains inside contains: each level splits its items by value, so nothing is built whole
    (as automaton products, 3 levels took 7 s and 700 MB and 5 passed 1 GB)."""
    schema: dict = {"type": "integer"}
    for _ in range(5):
        schema = {"type": "array", "contains": schema}
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False))
    assert dfa.matches("[[[[[1]]]]]") and dfa.matches('[1, [[[[2, "x"]]], 3]]')
    assert not dfa.matches('[[[[["a"]]]]]') and not dfa.matches("[[[[1]]]]")


def test_scalar_contains_product_is_refused_within_its_budget():
    """Scalar items are split by automaton products, each within its budget: refused there,
    naming keyword, pointer and budget."""
    from enforcer.errors import SchemaTooComplexError

    schema = {"items": {"type": "string", "pattern": "^[ab]*a[ab]{12}$"}, "contains": {"pattern": "^[ab]*b[ab]{13}$"}}
    with pytest.raises(SchemaTooComplexError) as info:
        compile_schema_dfa(schema, SchemaOptions(strict=False))
    assert info.value.keyword == "contains" and info.value.pointer.endswith("/contains")
    assert info.value.budget.startswith("MAX_CONTAINS_PRODUCT_STATES=")


def test_six_dependent_schemas_are_a_union_of_64_branches_and_seven_are_refused():
    """Each dependency an implication (its key absent, or present with its schema): 2**6
    branches, exact against jsonschema on every set of up to five keys in every order; a
    seventh is refused, naming the keyword (128 branches)."""
    chain = {"a": {"anyOf": [{"required": ["c"]}, {"required": ["b"]}]}, "b": {"not": {"required": ["c"]}},
             "c": {"not": {"required": ["d"]}}, "d": {"not": {"required": ["e"]}},
             "e": {"not": {"required": ["a"]}}, "f": {"required": ["b"]}}
    schema = {"type": "object", "patternProperties": {"^[a-f]$": True}, "additionalProperties": False,
              "dependentSchemas": chain, "minProperties": 2}
    validator = jsonschema.Draft202012Validator(schema)
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False))
    for n in range(6):
        for keys in itertools.combinations("abcdef", n):
            value = dict.fromkeys(keys, 1)
            accepted = any(dfa.matches(json.dumps(dict(order))) for order in itertools.permutations(value.items()))
            assert accepted == validator.is_valid(value), value
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa({**schema, "dependentSchemas": {**chain, "g": {"required": ["a"]}}}, SchemaOptions())
    assert info.value.keyword == "dependentSchemas"


def test_dependent_schemas_keep_a_bare_object_open_in_strict_mode():
    """The absent dependency keys are written as ``properties: {key: false}``: that must not
    close an object no ``properties`` declare (strict mode closes only declared objects)."""
    schema = {"dependentSchemas": {"bar": {"properties": {"foo": {"type": "integer"}, "bar": {"type": "integer"}}}}}
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=True))
    assert dfa.matches('{"foo": "quux"}') and dfa.matches('{"foo": 1, "bar": 2}')
    assert not dfa.matches('{"foo": "quux", "bar": 2}')
    assert not dfa.matches('{"foo": 1, "bar": 2, "baz": 3}'), "closed: the applicable schema declares properties"
