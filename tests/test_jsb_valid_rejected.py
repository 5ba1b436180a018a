"""Valid values that the strict compiler used to reject, each reduced from a jsonschemabench
schema (issue 12): one test per root cause, each failing on the code before its fix."""

import json

from enforcer.json_schema import SchemaOptions
from enforcer.matcher import compile_schema_dfa


def accepts(schema, value, **options) -> bool:
    return compile_schema_dfa(schema, SchemaOptions(**options)).matches(json.dumps(value))


def test_keys_a_validator_ignores_do_not_stop_a_merge():
    """Two ``allOf`` parts whose only conflict is a key no validator reads (jsonschemabench's
    ``_id``, Github_hard o81160) merge into one object: every part's properties are declared."""
    schema = {"allOf": [
        {"_id": "#/definitions/service", "type": "object", "properties": {"build": {"type": "string"}}},
        {"_id": "#/definitions/constraints", "properties": {"image": {"type": "string"}}, "required": ["build"]}]}
    assert accepts(schema, {"build": "a", "image": "b"})
    assert not accepts(schema, {"image": "b"})
    assert not accepts(schema, {"build": "a", "other": 1})
    assert not accepts(schema, {"build": 1})


def test_intersected_parts_share_their_keys_and_order():
    """``allOf`` parts that cannot merge (two ``not``s, two ``if``s) are intersected; each part
    alone closed the strict object over its own keys and wrote them in its own order, so only
    objects whose keys every part declares survived (Github_hard o58639: two schema-valued
    ``dependencies`` with ``not: {required}``; JsonSchemaStore schema-app: several ``if``)."""
    negations = {"type": "object", "properties": {"a": {"type": "integer"}, "c": {"type": "array"}},
                 "allOf": [{"not": {"required": ["p"]}}, {"not": {"required": ["q"]}}]}
    assert accepts(negations, {"a": 1, "c": []})
    assert accepts(negations, {})
    assert not accepts(negations, {"a": 1, "p": 1})
    assert not accepts(negations, {"a": "x"})
    assert not accepts(negations, {"z": 1})  # still closed in strict mode
    assert accepts(negations, {"a": 1, "z": 1}, strict=False)
    conditions = {"allOf": [
        {"properties": {"a": {}}, "if": {"required": ["a"]}, "then": {"required": ["x"]}},
        {"properties": {"b": {}}, "if": {"required": ["b"]}, "then": {"required": ["y"]}}]}
    assert accepts(conditions, {"a": 1, "b": 2, "x": 3, "y": 4})
    assert accepts(conditions, {"b": 2, "y": 4})
    assert not accepts(conditions, {"a": 1, "b": 2, "y": 4})  # a without x
    assert not accepts(conditions, {"a": 1, "x": 3, "z": 0})


def test_intersected_parts_keep_their_additional_properties():
    """A part's ``additionalProperties`` still governs keys only another part declares."""
    schema = {"allOf": [
        {"properties": {"a": {}}, "additionalProperties": False, "not": {"required": ["p"]}},
        {"properties": {"b": {}}, "not": {"required": ["q"]}}]}
    assert accepts(schema, {"a": 1})
    assert not accepts(schema, {"a": 1, "b": 2})  # b is extra to the first part
    schema["allOf"][0]["additionalProperties"] = {"type": "integer"}
    assert accepts(schema, {"a": 1, "b": 2})
    assert not accepts(schema, {"a": 1, "b": "x"})
    assert accepts(schema, {"a": 1, "z": 2})  # open: a part has additionalProperties
    assert not accepts(schema, {"a": 1, "z": "x"})


def test_keywords_later_than_the_dialect_are_ignored():
    """A draft-04 schema's ``if``/``then`` and ``const`` are unknown keys, ignored by its
    validators (Github_medium o3385: a draft-04 ``then`` whose pattern the valid shortcut
    "Ctrl + Shift + P" fails); a property named ``if`` stays a property."""
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
              "properties": {"type": {"type": "string"}, "key": {"type": "string"}, "if": {"type": "integer"},
                             "version": {"const": 2}},
              "if": {"properties": {"type": {"enum": ["action"]}}},
              "then": {"properties": {"key": {"pattern": "^[\\\\S]+$"}}}}
    assert accepts(draft4, {"type": "action", "key": "Ctrl + Shift"})
    assert accepts(draft4, {"version": 3})
    assert not accepts(draft4, {"if": "x"})
    assert not accepts(draft4, {"key": 1})
    draft7 = {**draft4, "$schema": "http://json-schema.org/draft-07/schema#"}
    assert not accepts(draft7, {"type": "action", "key": "Ctrl + Shift"})
    assert not accepts(draft7, {"version": 3})


def test_nested_all_of_keeps_the_order_keys_are_read_in():
    """An ``allOf`` part that is itself an ``allOf`` declares its keys where it stands, not
    after the later parts (Github_medium o67449: ``allOf: [{allOf: [A, B]}, C, D]``)."""
    schema = {"type": "object", "allOf": [
        {"allOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"b": {"type": "string"}}}]},
        {"properties": {"c": {"type": "string"}}}]}
    assert accepts(schema, {"a": "x", "b": "y", "c": "z"})
    assert not accepts(schema, {"a": 1, "b": "y", "c": "z"})
    assert not accepts(schema, {"a": "x", "b": "y", "c": "z", "d": 1})


def test_a_negated_condition_does_not_close_a_bare_object():
    """``not: {required: [a, b]}`` is met by objects lacking a key, written as ``properties:
    {a: false}``; that must not close a bare object in strict mode (Github_trivial o91408)."""
    schema = {"type": "object", "not": {"required": ["body", "bodyValue"]}}
    assert accepts(schema, {"id": 1, "body": {"type": "x"}})
    assert accepts(schema, {})
    assert not accepts(schema, {"body": 1, "bodyValue": 2})
    declared = {**schema, "properties": {"id": {"type": "integer"}, "body": {}, "bodyValue": {}}}
    assert accepts(declared, {"id": 1, "body": 2})
    assert not accepts(declared, {"id": 1, "other": 2})  # still closed where properties are declared


def test_numbers_under_zero_bounds_take_exponents():
    """``minimum: 0`` is decided by the sign, so ``1e-06`` (what ``json.dumps`` writes for
    0.000001) is accepted exactly (Github_hard o57716's ``evalue``); an exclusive zero is not
    (``1e-400`` parses to the double 0.0, which ``exclusiveMinimum: 0`` rejects: found by
    tests/test_fuzz_tools.py), nor are other bounds (documented)."""
    at_least = compile_schema_dfa({"type": "number", "minimum": 0}, SchemaOptions())
    assert at_least.matches("1e-06") and at_least.matches("-0.0e3") and at_least.matches("2.5E+2")
    assert at_least.matches("1e-400")  # the double 0.0 meets minimum 0 too
    assert not at_least.matches("-1e-06") and not at_least.matches("-0.1e1")
    above = compile_schema_dfa({"type": "number", "exclusiveMinimum": 0}, SchemaOptions())
    assert above.matches("0.01") and not above.matches("1e-400") and not above.matches("1e2")
    at_most = compile_schema_dfa({"type": "number", "maximum": 0}, SchemaOptions())
    assert at_most.matches("-3e2") and at_most.matches("0e1") and not at_most.matches("1e-9")
    assert not compile_schema_dfa({"type": "number", "minimum": 0, "maximum": 1}, SchemaOptions()).matches("1e-06")
    assert not compile_schema_dfa({"type": "integer", "minimum": 0}, SchemaOptions()).matches("1e2")


def test_two_unions_in_all_of_are_distributed_not_intersected():
    """``allOf: [anyOf, anyOf]`` of required keys (Github_medium o27148) is a union of 2 x 6
    conjunctions, built lazily; intersecting the two automata whole was refused as too large
    (here under a small ``max_states``, the budget eager products count against)."""
    names = ["a", "b", "c", "d", "e", "f"]
    schema = {"type": "object", "additionalProperties": False,
              "properties": {n: {"type": "string"} for n in ["x", "y", *names]},
              "allOf": [{"anyOf": [{"required": ["x"]}, {"required": ["y"]}]},
                        {"anyOf": [{"required": [n]} for n in names]}]}
    assert accepts(schema, {"x": "1", "c": "2"}, max_states=500)
    assert accepts(schema, {"x": "1", "y": "1", "a": "2", "f": "3"}, max_states=500)
    assert not accepts(schema, {"x": "1"}, max_states=500)
    assert not accepts(schema, {"c": "1"}, max_states=500)


def test_absent_keys_merge_instead_of_intersecting():
    """``not: {required: [k]}`` parts (Github_hard o58639's mutually exclusive ``dependencies``)
    merge as ``properties: {k: false}``; two of them were intersected whole, eagerly (20 s
    there; here refused under a small ``max_states``)."""
    schema = {"type": "object", "properties": {n: {"type": "string"} for n in "abpq"},
              "dependencies": {"a": {"not": {"required": ["p"]}}, "b": {"not": {"required": ["q"]}}}}
    assert accepts(schema, {"a": "1", "b": "2"}, max_states=300)
    assert accepts(schema, {"p": "1", "q": "2"}, max_states=300)
    assert not accepts(schema, {"a": "1", "b": "2", "q": "3"}, max_states=300)
    assert not accepts(schema, {"a": "1", "z": "2"}, max_states=300)
    bare = {"type": "object", "allOf": [{"not": {"required": ["p"]}}, {"not": {"required": ["q"]}}]}
    assert accepts(bare, {"z": 1}, max_states=300)  # no part declares keys: open in strict mode
    assert not accepts(bare, {"q": 1}, max_states=300)
    assert not accepts(bare, [], max_states=300)


def test_several_conditions_are_distributed_not_intersected():
    """``allOf`` of ``if``/``then`` parts on one discriminating key (JsonSchemaStore
    minecraft-loot-table, meta) is distributed as the union of their branches (most of them
    contradictory, hence empty), built lazily; intersected whole, eagerly, it was refused as
    too large (here under a small ``max_states``)."""
    kinds = ["constant", "uniform", "binomial"]
    schema = {"type": "object", "required": ["type"],
              "properties": {"type": {"enum": kinds}},
              "allOf": [{"if": {"properties": {"type": {"const": kind}}},
                         "then": {"properties": {f"{kind}_value": {"type": "number"}}}} for kind in kinds]}
    assert accepts(schema, {"type": "uniform", "uniform_value": 2}, max_states=300)
    assert accepts(schema, {"type": "constant"}, max_states=300)
    assert not accepts(schema, {"type": "uniform", "uniform_value": "x"}, max_states=300)
    assert not accepts(schema, {"type": "uniform", "constant_value": 2}, max_states=300)  # declared under another type only
    assert accepts(schema, {"type": "uniform", "constant_value": 2}, strict=False, max_states=300)
    assert not accepts(schema, {"type": "other"}, max_states=300)
