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


def test_max_contains_of_objects_is_refused():
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa({"items": {"type": "object"}, "contains": {"required": ["a"]}, "maxContains": 2},
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


def test_nested_contains_is_refused_within_its_product_budget():
    """contains inside contains multiplies the product's states at every level (3 levels took
    7 s and 700 MB, 5 levels passed 1 GB): refused at the budget, naming keyword and pointer."""
    from enforcer.errors import SchemaTooComplexError

    schema = {"type": "integer"}
    for _ in range(5):
        schema = {"type": "array", "contains": schema}
    with pytest.raises(SchemaTooComplexError) as info:
        compile_schema_dfa(schema, SchemaOptions(strict=False))
    assert info.value.keyword == "contains" and info.value.pointer.endswith("/contains")
    assert info.value.budget.startswith("MAX_CONTAINS_PRODUCT_STATES=")


def test_dependent_schemas_keep_a_bare_object_open_in_strict_mode():
    """The absent dependency keys are written as ``properties: {key: false}``: that must not
    close an object no ``properties`` declare (strict mode closes only declared objects)."""
    schema = {"dependentSchemas": {"bar": {"properties": {"foo": {"type": "integer"}, "bar": {"type": "integer"}}}}}
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=True))
    assert dfa.matches('{"foo": "quux"}') and dfa.matches('{"foo": 1, "bar": 2}')
    assert not dfa.matches('{"foo": "quux", "bar": 2}')
    assert not dfa.matches('{"foo": 1, "bar": 2, "baz": 3}'), "closed: the applicable schema declares properties"
