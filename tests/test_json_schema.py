"""JSON Schema -> automaton: each keyword checked against jsonschema as the oracle.

Soundness: every serialisation the automaton accepts is valid. Completeness: every valid
instance, written with keys in declared order, compactly, with json.dumps defaults and with
indent=2, is accepted.
"""

import itertools
import json
import re
from decimal import Decimal
from typing import Any

import jsonschema
import numpy as np
import pytest

from enforcer import InvalidSchemaError, SchemaTooComplexError, UnsupportedSchemaError
from enforcer import json_schema
from enforcer.json_schema import DEFAULT_MAX_NFA_STATES, SchemaOptions, merge
from enforcer.matcher import compile_schema_dfa

POOL = [None, True, False, 0, -1, 1, 2, 3, 7, 10, 14, 15, 100, -0.5, 0.5, 1.5, 2.0, 3.25, 1e-7, "", "a", "abc",
        "Paris", "北京", "😀", "a\"b\\c\n", "2024-01-31", "2024-13-01", "12:30:00Z", "x@y.org", "not an email",
        "123e4567-e89b-12d3-a456-426614174000", "192.168.0.1", "256.1.1.1", "celsius", "kelvin",
        [], [1], [1, 2], ["a", "b"], [1, "a"], [[1]], [{"a": 1}], {}, {"a": 1}, {"a": "x"}, {"a": 1, "b": 2},
        {"b": 2}, {"a": 1, "c": 3}, {"a": {"b": []}}, {"name": "x", "age": 3}, {"age": 3}]


BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def serialisations(value, schema):
    texts = {json.dumps(value), json.dumps(value, ensure_ascii=False), json.dumps(value, separators=(",", ":")),
             json.dumps(value, indent=2, ensure_ascii=False)}
    if isinstance(schema, dict) and any(k in schema for k in BOUNDS):
        # documented restriction: bounded numbers are generated without exponent notation
        texts = {t for t in texts if "e" not in t}
    return texts


def check(schema, extra=(), **options):
    dfa = compile_schema_dfa(schema, SchemaOptions(**{"free_form_depth": 3, **options}))  # the pool nests 3 deep
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    for value in [*POOL, *extra]:
        valid = validator.is_valid(value)
        for text in serialisations(value, schema):
            accepted = dfa.matches(text)
            assert not (accepted and not valid), f"accepted invalid {text!r}"
            if valid and (not isinstance(value, dict) or options.get("strict") is False or
                          not isinstance(schema, dict) or "properties" not in schema or
                          set(value) <= set(schema["properties"])):
                assert accepted, f"rejected valid {text!r}"
    return dfa


@pytest.mark.parametrize("schema", [
    {"type": "null"}, {"type": "boolean"}, {"type": "integer"}, {"type": "number"}, {"type": "string"},
    {"type": ["string", "null"]}, {"type": "array"}, {"type": "object"}, {}, True,
    {"enum": ["celsius", "fahrenheit", 1, None, [1], {"a": 1}]}, {"const": "Paris"}, {"const": 2},
    {"type": "integer", "minimum": 1, "maximum": 14}, {"type": "number", "exclusiveMinimum": 0, "maximum": 2},
    {"type": "integer", "multipleOf": 7}, {"type": "number", "multipleOf": 0.25},
    {"type": "string", "minLength": 2, "maxLength": 3}, {"type": "string", "pattern": "^[a-z]+$"},
    {"type": "string", "pattern": "a"}, {"type": "string", "format": "date"},
    {"type": "string", "format": "email"}, {"type": "string", "format": "uuid"}, {"type": "string", "format": "ipv4"},
    {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2},
    {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a"]},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
     "dependentRequired": {"a": ["b"]}},
    {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 5}]},
    {"oneOf": [{"type": "string"}, {"type": "array"}]},
    {"allOf": [{"type": "integer"}, {"minimum": 2}, {"maximum": 10}]},
    {"not": {"type": "string"}}, {"type": "string", "not": {"enum": ["a", "abc"]}},
    {"not": {"enum": ["a", None, True]}}, {"type": ["string", "integer"], "not": {"const": "a"}},
    {"type": "integer", "not": {"enum": ["a"]}},
    {"$defs": {"pos": {"type": "integer", "minimum": 1}}, "type": "array", "items": {"$ref": "#/$defs/pos"}},
    {"type": ["integer", "null"], "nullable": True},
])
def test_keyword_against_oracle(schema):
    check(schema)


@pytest.mark.parametrize("schema", [
    {"not": {"const": True}}, {"not": {"enum": ["a", None]}}, {"type": ["array", "string"], "not": {"const": "a"}},
    {"type": "object", "properties": {"u": {}, "m": {}}, "if": {"properties": {"u": {"const": True}}},
     "then": {"required": ["m"]}},
])
def test_a_negated_constant_builds_whole_only_the_values_of_its_type(schema, monkeypatch):
    """Beside ``not: {const}`` (an ``if`` on a constant fails that way), the values of other
    types never equal it: they stay as compiled, and only the constant's type is built whole
    and subtracted from (a value of any type but ``true``: 1,565 states here; Github_medium
    o39168 compiled in 17.9 ms, now 7.1). Where recursion is knotted it is built whole as
    before. Exact against the oracle."""
    built: list[int] = []
    original = json_schema.compile_node

    def spying(node, *limit):
        dfa = original(node, *limit)
        built.append(dfa.num_states)
        return dfa

    monkeypatch.setattr(json_schema, "compile_node", spying)
    check(schema, extra=[{"u": True, "m": 1}, {"u": True}, {"u": False}, {"u": [True]}, {"u": "true"}], strict=False)
    assert built and max(built) < 40  # a string, a boolean or a null automaton: no object, no array
    built.clear()
    recursive = {"$defs": {"node": {**schema, "properties": {**schema.get("properties", {}),
                                                             "child": {"$ref": "#/$defs/node"}}}},
                 "$ref": "#/$defs/node"}
    compile_schema_dfa(recursive, SchemaOptions(strict=False))
    assert max(built) >= 40  # where recursion is knotted, built whole as before


OBJECTS = [{"z": 1}, {"z": "s"}, {"a": 1, "z": 2}, {"a": 1, "b": "x"}, {"a": 1, "c": 2}, {"c": 1}, {"ab": 1},
           {"ab": "x", "xb": "y"}, {"b": 1}, {"a": 1, "b": 2, "c": 3}, {"a\"": 1}, {"é": 2}, {"a": "x", "c": 3},
           {"aa": 1, "ba": "s", "c": None}]


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("schema", [
    {"type": "object", "required": ["z"]},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "z"]},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["z"], "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {"a": {}}, "dependentRequired": {"a": ["c"]}, "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {"a": {}}, "dependentRequired": {"c": ["a"]}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "dependencies": {"a": ["b"]}},
    {"type": "object", "patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": False},
    {"type": "object", "patternProperties": {"^a": {"type": "integer"}, "b$": {"type": "string"}}},
    {"type": "object", "properties": {"ab": {"type": "integer"}}, "patternProperties": {"b$": {"minimum": 1}}},
    {"type": "object", "patternProperties": {"\"": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
    {"type": "object", "propertyNames": {"maxLength": 1}},
    {"type": "object", "propertyNames": {"pattern": "^[a-c]+$"}, "additionalProperties": {"type": "integer"}},
    {"type": "object", "minProperties": 1, "maxProperties": 2},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}, "minProperties": 2,
     "required": ["a"], "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "maxProperties": 1, "required": ["a"]},
])
def test_object_keywords_against_oracle(schema, strict):
    """Keys named only by required/dependentRequired, patternProperties, propertyNames and
    property counts: exact in both modes (strict: named keys allowed, other undeclared keys
    only where a pattern or additionalProperties allows them)."""
    dfa = compile_schema_dfa(schema, SchemaOptions(free_form_depth=3, strict=strict))
    validator = jsonschema.validators.validator_for(schema)(schema)
    named = set(schema.get("properties", {})) | set(schema.get("required", [])) | {
        n for k in ("dependentRequired", "dependencies") for a, d in schema.get(k, {}).items() for n in (a, *d)}
    free = not strict or "additionalProperties" in schema or "properties" not in schema
    for value in [*POOL, *OBJECTS]:
        valid = validator.is_valid(value)
        for text in serialisations(value, schema):
            accepted = dfa.matches(text)
            assert not (accepted and not valid), f"accepted invalid {text!r}"
            if valid and isinstance(value, dict) and not free:
                pattern_keys = {k for k in value for p in schema.get("patternProperties", {}) if re.search(p, k)}
                if not set(value) <= named | pattern_keys:
                    continue  # strict: undeclared keys are not written
            if valid and isinstance(value, dict):
                order = [k for k in schema.get("properties", {}) if k in value]
                mentioned = [*schema.get("required", []), *(n for k in ("dependentRequired", "dependencies")
                                                             for a, d in schema.get(k, {}).items() for n in (a, *d))]
                order += [k for k in dict.fromkeys(mentioned) if k in value and k not in order]
                if list(value) != order + [k for k in value if k not in order]:
                    continue  # keys not in the schema's order
                if any(not k.isascii() for k in value if k not in named) and text.isascii():
                    continue  # undeclared keys are written in canonical form (raw UTF-8, not \u escapes)
            if valid:
                assert accepted, f"rejected valid {text!r}"


def test_property_names_of_an_argument_value_are_quoted_keys():
    """An argument value (K2/K3 argument formats) is compiled with raw top-level strings; its
    keys stay quoted JSON, so ``propertyNames`` is compiled as a nested value (compiled at
    depth 0 it was raw text, and no key matched it)."""
    from enforcer.arguments import split_arguments
    from enforcer.vocabulary import Vocabulary

    vocabulary = Vocabulary.from_token_bytes([bytes([b]) for b in range(256)], {})
    params = {"type": "object", "properties": {"tags": {"type": "object", "propertyNames": {"pattern": "^x"}}}}
    (key,) = split_arguments(params, vocabulary, SchemaOptions()).keys
    (value,) = key.values
    assert value.dfa.matches('{"xy": 1}') and value.dfa.matches("{}")
    assert not value.dfa.matches('{"y": 1}') and not value.dfa.matches("{xy: 1}")


@pytest.mark.parametrize("schema", [
    {"type": "object", "minProperties": 1},
    {"type": "object", "properties": {"a": {}}, "required": ["a"], "minProperties": 2,
     "additionalProperties": {"type": "integer"}},
    {"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "minProperties": 1, "maxProperties": 3},
])
def test_a_repeated_undeclared_key_counts_once_toward_min_properties(schema):
    """JSON keeps one value per key: '{"x":0,"x":0}' has one property. Where minProperties is
    counted (one undeclared key on top of the required ones reaches it), no repetition of an
    undeclared key can make up for a missing property (maxProperties counts every writing, so a
    repeated key may be refused there: never needed, since the value can be written once)."""
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False))
    validator = jsonschema.validators.validator_for(schema)(schema)
    head = '"a":0,' if "a" in schema.get("properties", {}) else ""
    for repeats in range(1, 5):
        text = "{" + head + ",".join(['"x1":0'] * repeats) + "}"
        assert not dfa.matches(text) or validator.is_valid(json.loads(text)), text
        if repeats == 1:
            assert dfa.matches(text) == validator.is_valid(json.loads(text)), text
    text = "{" + head + '"x1":0,"x2":0}'
    assert dfa.matches(text) == validator.is_valid(json.loads(text)), text


@pytest.mark.parametrize("every_key", [{"type": "integer"}, {"minimum": 2}, False, {"type": "string"}])
def test_additional_properties_beside_no_properties_meets_the_other_parts_pattern_keys(every_key):
    """``allOf`` of an object with ``patternProperties`` and one whose ``additionalProperties``
    stands beside no properties (JsonSchemaStore's jreleaser writes each map this way): the
    latter holds for every key, so each pattern's schema meets it and the parts merge into one
    object schema (no automaton intersection), exact against jsonschema."""
    parts = [{"type": "object", "patternProperties": {"^a": {"type": "integer"}},
              "additionalProperties": {"type": "integer"}},
             {"additionalProperties": every_key, "type": ["object", "null"]}]
    assert merge(*parts) is not None and merge(*reversed(parts)) is not None
    check({"allOf": parts}, extra=[{"a": 1}, {"ab": 3}, {"b": 1}, {"b": 5, "a": 2}, {"a": "x"}, {"a": 2.5}],
          strict=False)
    with_properties = [parts[0], {"properties": {"ab": {}}, "additionalProperties": every_key}]
    assert merge(*with_properties) is None  # its additionalProperties skips 'ab', which '^a' matches


def test_min_properties_that_needs_two_undeclared_keys_is_refused():
    """Two undeclared keys might be one key written twice: an automaton cannot count them."""
    corpus_case = {"type": "object", "minProperties": 4, "allOf": [
        {"patternProperties": {"^.{1,3}$": False}, "additionalProperties": True},
        {"patternProperties": {"a": True}, "additionalProperties": False}]}
    for schema in ({"type": "object", "minProperties": 2},
                   {"type": "object", "properties": {"a": {}}, "minProperties": 2},
                   corpus_case):
        with pytest.raises(UnsupportedSchemaError) as info:
            compile_schema_dfa(schema, SchemaOptions(strict=False))
        assert info.value.keyword == "minProperties" and "differ" in str(info.value)


def test_spec_mode_allows_extra_properties_after_declared():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    strict = compile_schema_dfa(schema, SchemaOptions())
    spec = check(schema, strict=False)
    assert not strict.matches('{"a": 1, "c": 3}')
    assert spec.matches('{"a": 1, "c": 3}') and spec.matches('{"c": 3}')
    assert not spec.matches('{"a": 1, "a": 2}'), "a declared name cannot come back as an extra key"


def test_bare_object_is_free_form_even_in_strict_mode():
    dfa = compile_schema_dfa({"type": "object"}, SchemaOptions())
    assert dfa.matches('{"x": [1, {"y": null}], "z": "w"}')


def test_free_form_depth_is_bounded():
    dfa = compile_schema_dfa({}, SchemaOptions(free_form_depth=2))
    assert dfa.matches("[[1]]") and not dfa.matches("[[[1]]]")


def _nested(levels):
    """A JSON value with ``levels`` containers nested, objects and arrays alternating."""
    value = "leaf"
    for k in range(levels):
        value = {"k": value} if k % 2 else [value]
    return value


def test_free_form_values_nest_eight_deep_when_asked():
    # Kubernetes' RawExtension ("data": {"type": "object"}) held a Deployment nested 8 deep
    # (jsonschemabench kb_139): free_form_depth=8 takes it, in every whitespace style
    schema = {"type": "object", "properties": {"data": {"type": "object"}}}
    dfa = compile_schema_dfa(schema, SchemaOptions(free_form_depth=8))
    deployment = {"spec": {"template": {"spec": {"containers": [{"ports": [{"containerPort": 80}]}]}}}}
    for value in ({"data": deployment}, {"data": {"k": _nested(8)}}):  # the object, then 8 free levels
        for text in (json.dumps(value), json.dumps(value, separators=(",", ":")), json.dumps(value, indent=2)):
            assert dfa.matches(text), text
    assert not dfa.matches(json.dumps({"data": {"k": _nested(9)}}))  # still bounded


def test_free_form_values_cost_one_nfa_state_per_use_at_any_depth():
    """A free-form value is one placeholder state whatever ``free_form_depth`` allows; its
    levels are added as a walk reaches them (about 190 NFA states each), and only those; an
    automaton built whole cuts it at ``WHOLE_FREE_FORM_DEPTH``."""
    from enforcer.automaton import nfa_size
    from enforcer.json_schema import WHOLE_FREE_FORM_DEPTH, SchemaCompiler
    schema = {"type": "object", "properties": {"a": {}}}
    sizes = {nfa_size(SchemaCompiler(schema, SchemaOptions(free_form_depth=d)).compile()) for d in (2, 8, 32, 10**9)}
    assert len(sizes) == 1 and sizes.pop() < 200
    unbounded = compile_schema_dfa(schema, SchemaOptions(free_form_depth=10**9))  # nothing per allowed level
    assert unbounded.matches(json.dumps({"a": _nested(100)}))
    dfa = compile_schema_dfa(schema, SchemaOptions(free_form_depth=40))
    assert dfa.matches(json.dumps({"a": 1}))
    scalar = dfa._det.added_nfa_states
    assert 0 < scalar < 2 * 250  # the outermost level of the value's placeholders only
    assert dfa.matches(json.dumps({"a": _nested(12)}))
    twelve = dfa._det.added_nfa_states
    assert 12 * 150 < twelve - scalar < 2 * 12 * 2 * 250  # the levels on the text's path (and their siblings)
    assert dfa.matches(json.dumps({"a": _nested(40)})) and not dfa.matches(json.dumps({"a": _nested(41)}))
    assert dfa._det.added_nfa_states > twelve
    whole = compile_schema_dfa(schema, SchemaOptions(free_form_depth=40), lazy=False)
    deepest = WHOLE_FREE_FORM_DEPTH
    assert whole.matches(json.dumps({"a": _nested(deepest)})) and not whole.matches(json.dumps({"a": _nested(deepest + 1)}))


def test_precompute_builds_free_form_values_four_levels_deep():
    """``precompute`` stops where free-form values nest past ``PRECOMPUTED_LEVELS``: it ends
    (the automaton has no end of states any more), and a deeper text is built when it comes."""
    from enforcer import Vocabulary, compile_json_schema
    from enforcer.masks import PRECOMPUTED_LEVELS
    tokens = [bytes([b]) for b in range(256)] + [b"[[", b'{"', b'"}', b"]]", b'": ', b"null", None]
    vocab = Vocabulary(tokens, [("<end>", len(tokens) - 1)])
    compiled = compile_json_schema({"type": "object", "properties": {"a": {}}}, vocab, strict=False).precompute()
    dfa = compiled.masks.dfa
    built = dfa.num_states
    assert PRECOMPUTED_LEVELS == 4 and 100 < built < 20_000
    # masks 4 levels deep; their token walks (``[[`` opens two) create states two levels further
    assert PRECOMPUTED_LEVELS < max(dfa.nesting(s) for s in range(built)) <= PRECOMPUTED_LEVELS + 2
    matcher = compiled.matcher()
    bitmask = np.zeros((1, (len(tokens) + 31) // 32), dtype=np.int32)
    for byte in json.dumps({"a": _nested(9)}).encode():  # one token per byte
        matcher.fill_bitmask(bitmask)
        assert (bitmask[0, byte >> 5] >> (byte & 31)) & 1 and matcher.accept_token(byte)
    assert matcher.is_accepting and dfa.num_states > built


def test_free_form_levels_are_numbered_alike_by_the_kernel_and_in_python():
    """The compiled subset construction adds a level's states where the Python one does: same
    DFA states, same members, same rows, on texts that open levels in different orders; with
    the placeholders among the other states and (mostly placeholders) numbered after them."""
    from enforcer.automaton import alt
    from enforcer.json_schema import SchemaCompiler
    schema = {"type": "object", "properties": {"a": {}, "b": {"type": "array"}}}
    node = SchemaCompiler(schema, SchemaOptions(strict=False, free_form_depth=12)).compile()
    texts = [json.dumps(v, indent=i) for i, v in enumerate(
        [{"a": _nested(9)}, {"b": [[{"x": [1]}], {"y": {"z": []}}]}, {"a": [{}, [[[]]]], "c": {"d": [_nested(5)]}}])]
    assert _same_levels_built(node, texts).num_regular == node.nfa_states + 2  # placeholders among the others
    free = [SchemaCompiler(True, SchemaOptions(free_form_depth=d)).compile() for d in (10, 11, 12)]
    texts = [json.dumps(_nested(9)), json.dumps([[{"x": [1]}], {"y": {"z": []}}], indent=2), '{"d":[[[{}]]]}']
    assert _same_levels_built(alt(*free), texts).num_regular == 2  # placeholders numbered last
    # a row whose edges are not in byte order ("b" before "a"), each into a placeholder: the
    # levels are added in byte order (the kernel's), not edge order
    from enforcer.automaton import literal, seq
    crossed = alt(seq(literal("b"), free[0]), seq(literal("a"), free[1]))
    _same_levels_built(crossed, ["a" + texts[0], "b" + texts[1], "a1", "b[]"])


def _same_levels_built(node: Any, texts: list[str]) -> Any:
    """Both constructions' rows over ``texts`` and the embedded automaton each state stands
    in; returns the Python one."""
    from enforcer.automaton import _Determiniser
    built = []
    for compiled in (True, False):
        det = _Determiniser(node, trim=True, compiled=compiled, lazy=True)
        rows: dict[int, list[int]] = {}
        for text in texts:
            state = 0
            for byte in text.encode():
                if state not in rows:
                    out = np.empty(256, dtype=np.int32)
                    det.row_into(state, out, None)
                    rows[state] = out.tolist()
                state = rows[state][byte]
                assert state >= 0, text
            assert det.accepting[state], text
        embedded = [det.embedding(i) for i in range(det.num_states)]  # after the rows: may add levels alike
        built.append((rows, [list(det.members(i)) for i in range(det.num_states)], det.added_nfa_states,
                      [det.nesting(i) for i in range(det.num_states)],
                      [e and (e[0].base, e[0].end, id(e[0].dfa), e[1], e[2].tobytes()) for e in embedded]))
    assert built[0] == built[1] and built[0][2] > 0
    return det


def test_recursion_is_cut_earlier_when_over_budget():
    # three recursive properties: 1,752 NFA states with recursion cut after 3 expansions, 447
    # after 2, 96 after 1; over budget the value compiles with recursion cut earlier, down to 2
    schema = {"type": "object", "properties": {"a": {"$ref": "#"}, "b": {"$ref": "#"}, "c": {"$ref": "#"}}}
    nested = lambda levels: {} if levels == 0 else {"b": nested(levels - 1)}  # noqa: E731
    dfa = compile_schema_dfa(schema, SchemaOptions(max_nfa_states=1_000))
    assert dfa.matches(json.dumps(nested(2))) and not dfa.matches(json.dumps(nested(3)))
    assert compile_schema_dfa(schema, SchemaOptions()).matches(json.dumps(nested(3)))
    with pytest.raises(SchemaTooComplexError):  # one expansion would fit, but is not tried
        compile_schema_dfa(schema, SchemaOptions(max_nfa_states=400))


def test_whitespace_styles_bounded():
    dfa = compile_schema_dfa({"type": "object", "properties": {"a": {"type": "array"}}}, SchemaOptions())
    assert dfa.matches('{"a": [1, 2]}') and dfa.matches('{"a":[1,2]}')
    assert dfa.matches('{\n  "a": [\n    1,\n    2\n  ]\n}')
    assert not dfa.matches('{  "a": []}') and not dfa.matches('{"a": []}\n') and not dfa.matches(' {"a": []}')


@pytest.mark.parametrize("schema,keyword,pointer", [
    ({"type": "object", "properties": {"a": {"if": {"enum": [{"x": 1}]}, "then": {"minimum": 2}}}}, "if",
     "/properties/a"),  # an object constant has no exact negation
    ({"type": "object", "minProperties": 100, "additionalProperties": True}, "minProperties", ""),
    ({"patternProperties": {c: {} for c in "abcde"}}, "patternProperties", ""),
    ({"type": "array", "items": {"type": "array", "contains": {"type": "array", "uniqueItems": True},
                                  "maxContains": 1}}, "maxContains", "/items"),  # uniqueItems: not negated
    ({"oneOf": [{"type": "integer"}, {"minimum": 3}]}, "oneOf", ""),  # 'not integer' beside a bound
    ({"oneOf": [{"type": "integer"}, {"multipleOf": 0.5}]}, "oneOf", ""),  # 'not integer' beside a multipleOf
    ({"type": "string", "pattern": "(?=a)b"}, "pattern", ""),
    ({"$ref": "https://example.com/schema"}, "$ref", ""),
])
def test_unsupported_keyword_names_keyword_and_pointer(schema, keyword, pointer):
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions())
    assert info.value.keyword == keyword and info.value.pointer == pointer
    assert keyword in str(info.value)


def test_a_keyword_never_enforced_is_refused_before_any_automaton_is_built(monkeypatch):
    """A uniqueItems the compile is sure to meet is refused first: the intersection written
    before it in the schema (an allOf of two patterns) is not built (it took seconds on
    JsonSchemaStore's minecraft-biome before the refusal)."""
    built = []
    real = json_schema.compile_node
    monkeypatch.setattr(json_schema, "compile_node", lambda *a, **k: built.append(a) or real(*a, **k))
    schema = {"type": "object", "properties": {
        "first": {"allOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "b$"}]},
        "later": {"type": "object", "properties": {"xs": {"$ref": "#/$defs/unique"}}}},
        "$defs": {"unique": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions())
    assert (info.value.keyword, info.value.pointer) == ("uniqueItems", "/properties/later/properties/xs")
    assert built == []


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "object", "items": {"uniqueItems": True}}}},  # never an array
    {"allOf": [{"type": "object", "patternProperties": {"^x": {}}},
               {"uniqueItems": True, "additionalProperties": {"type": "integer"}}]},  # restricted to objects
    {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}], "items": {"uniqueItems": True}}}},
    {"type": "object", "properties": {"a": {"enum": [1, 2], "items": {"uniqueItems": True}}}},
    {"type": ["object", "string"], "uniqueItems": True, "unevaluatedItems": False},  # no array is admitted
])
def test_a_keyword_never_enforced_where_the_compile_never_meets_it_is_no_refusal(schema):
    assert not compile_schema_dfa(schema, SchemaOptions()).is_empty


def test_a_keyword_never_enforced_is_refused_where_its_type_is_admitted():
    for schema in ({"uniqueItems": True}, {"type": ["object", "array"], "uniqueItems": True}):
        with pytest.raises(UnsupportedSchemaError):
            compile_schema_dfa(schema, SchemaOptions())


def test_invalid_and_unsatisfiable_schemas():
    with pytest.raises(InvalidSchemaError):
        compile_schema_dfa({"type": "integer", "minimum": 5, "maximum": 1}, SchemaOptions())
    with pytest.raises(InvalidSchemaError):
        compile_schema_dfa({"type": "wat"}, SchemaOptions())
    with pytest.raises(SchemaTooComplexError):
        compile_schema_dfa({"type": "string", "maxLength": DEFAULT_MAX_NFA_STATES}, SchemaOptions())


def test_bounded_numbers_have_no_exponent_form():
    dfa = compile_schema_dfa({"type": "number", "minimum": 0.5}, SchemaOptions())
    assert dfa.matches("0.5000001") and not dfa.matches("5e-1")
    assert compile_schema_dfa({"type": "number"}, SchemaOptions()).matches("1e-07")


def test_unknown_formats_are_annotations_unless_asked():
    dfa = compile_schema_dfa({"type": "string", "format": "byte"}, SchemaOptions())
    assert dfa.matches('"not base64!"')
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa({"type": "string", "format": "byte"}, SchemaOptions(unknown_formats="error"))
    assert info.value.keyword == "format"
    with pytest.raises(ValueError):
        SchemaOptions(unknown_formats="maybe")


def test_annotations_and_unknown_keys_are_ignored():
    check({"type": "integer", "title": "t", "description": "d", "examples": [1], "x-custom": {"if": 1}})


def test_large_string_enum_is_one_trie():
    """100,000 values: a trie, linear to build (the 5k-value enum once took 1.7 s, 100k did not
    finish in 60 s); membership exact for every escape form, prefixes and extensions refused."""
    values = [f"value_{i}" for i in range(100_000)] + ["", "a\"b", "é\n"]
    dfa = compile_schema_dfa({"enum": values}, SchemaOptions())
    for v in ("value_0", "value_99999", "value_4242", "", "a\"b", "é\n"):
        assert dfa.matches(json.dumps(v)) and dfa.matches(json.dumps(v, ensure_ascii=False))
    assert dfa.matches('"value_\\u0031"'), "value_1 with an escaped digit"
    for v in ("value_", "value_100000", "value_99999x", "valu", "a", "é"):
        assert not dfa.matches(json.dumps(v))


def test_enum_members_are_checked_against_the_rest_of_the_schema():
    check({"type": "string", "maxLength": 3, "enum": ["abc", "abcd", 1, None, "a"]})
    check({"enum": ["a", "ab", "abc", "b", "ba", 2, [1]]})


@pytest.mark.parametrize("declared", ["string", "boolean", "null", "object", "array", ["string", "null"],
                                      ["boolean", "array"], "integer", "number", ["integer", "string"]])
def test_enum_beside_a_type_keeps_the_members_of_that_type(declared):
    """An enum beside ``type`` alone (string, boolean, null, object, array: checked by each
    member's Python type; number and integer: by jsonschema, 1.0 an integer, true not one)."""
    members = ["a", "", "null", 1, 0, 1.0, 2.5, True, False, None, {"a": 1}, [1], []]
    check({"type": declared, "enum": members}, extra=members)


def test_one_enum_met_beside_other_keywords_and_at_other_depths_keeps_each_verdict():
    """The compiler builds an enum once per members, rest of the schema and depth: the same
    members filtered by different siblings, and object members written at other indentations,
    each keep their own language."""
    members = ["a", "abcd", 1, {"a": 1}, [1]]
    deep = {"properties": {"m": {"properties": {"k": {"properties": {"t": {"enum": members}}}}}}}
    check({"properties": {"s": {"type": "string", "maxLength": 3, "enum": members},
                          "t": {"enum": members}, "o": {"type": "object", "enum": members}, "n": deep}},
          extra=[{"s": "abcd"}, {"t": "abcd"}, {"o": "a"}, {"o": {"a": 1}}, {"s": 1}, {"t": [1]},
                 {"n": {"m": {"k": {"t": {"a": 1}}}}}, {"n": {"m": {"k": {"t": "b"}}}}], strict=False)


DRAFT4 = "http://json-schema.org/draft-04/schema#"
DRAFT7 = "http://json-schema.org/draft-07/schema#"


def test_draft_04_integers_have_no_fraction_and_exclusive_bounds_are_booleans():
    d4 = compile_schema_dfa({"$schema": DRAFT4, "type": "integer", "minimum": 0, "exclusiveMinimum": True},
                            SchemaOptions())
    assert d4.matches("1") and not d4.matches("0") and not d4.matches("1.0") and not d4.matches("12345.0")
    assert not compile_schema_dfa({"$schema": DRAFT4, "type": "integer"}, SchemaOptions()).matches("3.0")
    assert compile_schema_dfa({"type": "integer"}, SchemaOptions()).matches("3.0"), "2020-12: 3.0 is an integer"
    number = compile_schema_dfa({"$schema": DRAFT4, "type": "number", "maximum": 2, "exclusiveMaximum": False},
                                SchemaOptions())
    assert number.matches("2") and number.matches("1.5") and not number.matches("2.5")
    for schema in ({"$schema": DRAFT4, "type": "number", "minimum": 1, "exclusiveMinimum": True},
                   {"$schema": DRAFT4, "type": "integer", "maximum": 3, "exclusiveMaximum": True}):
        check(schema, extra=[3.0, 1.0, 12345.0])


def test_a_subschema_in_another_dialect_is_read_in_that_dialect():
    """jsonschema validates a subschema that names its own ``$schema`` in that dialect, and
    every schema it references without one of its own (MaskBench's testwp9 has draft-04
    subschemas in a 2020-12 schema: there ``-0.0`` is no integer). The region is compiled in
    its dialect; what cannot be is refused, naming ``$schema`` and the pointer."""
    region = {"$schema": DRAFT4, "type": "object", "properties": {"x": {"$ref": "#/$defs/n"}}}
    schema = {"$defs": {"n": {"type": "integer"}}, "type": "object",
              "properties": {"old": region, "new": {"$ref": "#/$defs/n"}, "h": {"$schema": DRAFT4, "type": "integer"},
                             "r": {"$schema": DRAFT4, "$ref": "#/$defs/n"}}}
    dfa = compile_schema_dfa(schema, SchemaOptions())
    validator = jsonschema.Draft202012Validator(schema)
    for text in ('{"old": {"x": 1.0}}', '{"old": {"x": 3}}', '{"new": 1.0}', '{"h": -0.0}', '{"h": 12}', '{"h": 2.0}',
                 '{"r": 2.0}', '{"r": 2}'):
        assert dfa.matches(text) == validator.is_valid(json.loads(text)), text
    assert not dfa.matches('{"h": -0.0}') and dfa.matches('{"new": 1.0}')
    later = {"$schema": DRAFT4, "properties": {"a": {"$schema": "https://json-schema.org/draft/2020-12/schema",
                                                       "prefixItems": [{"type": "integer"}]}}}
    with pytest.raises(UnsupportedSchemaError, match=r"'\$schema' at /properties/a: .*later than"):
        compile_schema_dfa(later, SchemaOptions())
    inner = {"properties": {"a": {"$schema": DRAFT4, "properties": {"b": {"$schema": DRAFT7, "type": "integer"}}}}}
    with pytest.raises(UnsupportedSchemaError, match=r"'\$schema' at /properties/a/properties/b: .*one change"):
        compile_schema_dfa(inner, SchemaOptions())
    with pytest.raises(UnsupportedSchemaError, match="unknown meta-schema"):
        compile_schema_dfa({"properties": {"a": {"$schema": "https://example.com/mine", "type": "integer"}}},
                           SchemaOptions())
    unreached = {"$defs": {"old": {"$schema": "https://example.com/mine"}}, "type": "string"}
    assert compile_schema_dfa(unreached, SchemaOptions()).matches('"x"')


def test_draft_07_ignores_keywords_beside_ref():
    schema = {"definitions": {"s": {"type": "string"}}, "type": "object",
              "properties": {"a": {"$ref": "#/definitions/s", "maxLength": 1}}}
    assert compile_schema_dfa({"$schema": DRAFT7, **schema}, SchemaOptions()).matches('{"a": "abc"}')
    assert not compile_schema_dfa(schema, SchemaOptions()).matches('{"a": "abc"}'), "2020-12 applies both"


def test_one_of_objects_apart_in_strict_mode():
    """Closed objects (strict) that each lack a key the other requires: the written values
    match exactly one branch; in spec mode extra keys could match both, so each branch is
    compiled with the other's negation."""
    schema = {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                        {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]}]}
    dfa = compile_schema_dfa(schema, SchemaOptions())
    assert dfa.matches('{"a": 1}') and dfa.matches('{"b": "x"}') and not dfa.matches('{"a": 1, "b": "x"}')
    check(schema, extra=[{"a": 1, "b": "x"}, {"a": 1, "b": 5}, {"b": "x", "a": "y"}, {"b": "x"}], strict=False)
    closed = {"oneOf": [{**b, "additionalProperties": False} for b in schema["oneOf"]]}
    check(closed, extra=[{"a": 1, "b": "x"}, {"b": "x"}], strict=False)


ONE_OF_EXTRA = [{"a": 1, "b": 2}, {"a": "x", "b": 2}, {"a": 1, "b": "y"}, {"kind": "x"}, {"kind": "y", "y": 1},
                {"kind": "x", "y": 1}, {"y": 1}, {"name": "e1", "code": 3}, {"name": "e2"}, {"name": "e2", "code": 1},
                "ab", "abcd", 4.5]


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
     "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},  # exactly one of two keys
    {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]},  # non-objects match both: refused
    {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "string", "minLength": 2}]},
    {"oneOf": [{"type": "object", "properties": {"kind": {"const": "x"}}}, {"type": "object", "required": ["y"]},
               {"type": "string"}]},
    {"oneOf": [{"type": ["string", "null"]}, {"type": ["null", "number"]}, {"enum": ["ab", None, True]}]},
    # apart on objects (the name constants differ), every other type matching every branch
    {"oneOf": [{"required": ["name", "code"], "properties": {"name": {"enum": ["e1"]}, "code": {"type": "integer"}}},
               {"required": ["name"], "properties": {"name": {"enum": ["e2"]}}}]},
    {"allOf": [{"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}, {"type": "object", "maxProperties": 2}]},
])
def test_one_of_with_overlapping_branches_is_each_branch_without_the_others(schema):
    """``oneOf [A_i]`` as the union of ``A_i`` with the negations of the branches it may share
    values with: exact against jsonschema in spec mode, nothing invalid in strict mode (which
    closes each branch's objects over its own keys)."""
    check(schema, extra=ONE_OF_EXTRA, strict=False)
    dfa = compile_schema_dfa(schema, SchemaOptions(free_form_depth=3))
    validator = jsonschema.Draft202012Validator(schema)
    for value in [*POOL, *ONE_OF_EXTRA]:
        for text in serialisations(value, schema):
            assert not dfa.matches(text) or validator.is_valid(value), f"accepted invalid {text!r}"



def _required_pairs(n: int) -> list[dict]:
    """``n`` branches each requiring two keys of its own: failing one takes two ways (either key
    absent), so a branch beside ``k`` others has ``2**k`` combinations of ways."""
    return [{"required": [f"a{i}", f"b{i}"]} for i in range(n)]


def test_one_of_is_refused_once_a_branch_passes_the_combinations_bound():
    """Five overlapping branches compile (16 combinations each); six are refused, naming the
    branch and the count, as soon as the bound is passed: the pairs after that point are never
    examined (a later branch, not negated exactly, would otherwise be met and named first; JSON
    Schema Store's cityjson, 32 branches: 3.9 s before its refusal, 0.1 s since)."""
    compile_schema_dfa({"type": "object", "oneOf": _required_pairs(5)}, SchemaOptions(strict=False))
    not_negated = {"propertyNames": {"maxLength": 3}}
    with pytest.raises(UnsupportedSchemaError, match="branch 1 is not negated exactly"):
        compile_schema_dfa({"type": "object", "oneOf": [*_required_pairs(1), not_negated]}, SchemaOptions(strict=False))
    with pytest.raises(UnsupportedSchemaError, match=r"branch 0 may share values with 5 other branches or more, "
                                                     r"and failing them all takes 32 combinations"):
        compile_schema_dfa({"type": "object", "oneOf": [*_required_pairs(6), not_negated]}, SchemaOptions(strict=False))

@pytest.mark.parametrize("schema", [
    {"allOf": [{"enum": ["foo", 1, 2.5, None]}, {"not": {"not": {"not": {"type": "integer"}}}}]},  # Synthesized
    {"enum": [[1, 2], [1, 1], "x", []], "uniqueItems": True},
    {"enum": ["a", "b", "c"], "oneOf": [{"enum": ["a", "b"]}, {"enum": ["b", "c"]}]},
    {"const": {"a": [1, 1]}, "not": {"properties": {"a": {"uniqueItems": True}}}},
    {"anyOf": [{"enum": ["b"], "const": "a"}, {"const": "c"}]},
    {"anyOf": [{"allOf": [{"const": "a"}, {"const": "b"}, {"const": "a"}]}, {"const": "c"}]},
    {"anyOf": [{"allOf": [{"const": True}, {"const": 1}]}, {"enum": [1, "c"]}]},
])
def test_constants_are_their_members_the_rest_admits_whatever_its_keywords(schema):
    """An enum/const beside keywords compiled nowhere else (a nested not, uniqueItems, an
    overlapping oneOf, an enum beside a const, constants merged in turn, ``true`` beside ``1``)
    is the set of its members jsonschema finds valid: exact."""
    check(schema, extra=["foo", 2.5, [1, 2], [1, 1], "a", "b", "c", {"a": [1, 1]}], strict=False)
    check(schema, extra=["foo", 2.5, [1, 2], [1, 1], "a", "b", "c", {"a": [1, 1]}])


def test_one_of_whose_overlaps_take_too_many_negations_is_refused():
    branches = [{"type": "object", "properties": {"k": {"const": f"v{i}"}, "n": {"type": "string", "maxLength": 3},
                                                  "m": {"type": "integer", "minimum": 0}}} for i in range(4)]
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa({"oneOf": branches}, SchemaOptions())
    assert info.value.keyword == "oneOf" and "combinations" in str(info.value)
    # without m, each branch's ways of failing the others are few enough (ways of failing that
    # no value of the branch has, and types, are left out): compiled, exactly
    fewer = [{"type": "object", "properties": {"k": {"const": f"v{i}"}, "n": {"type": "string", "maxLength": 3}}}
             for i in range(4)]
    check({"oneOf": fewer}, extra=[{"k": "v1"}, {"n": "ab"}, {"k": "v2", "n": "abcd"}, {"k": "x", "n": "a"}],
          strict=False)


@pytest.mark.parametrize("fmt", ["regex", "idn-email", "idn-hostname"])
def test_formats_not_enforced_are_refused_never_ignored(fmt):
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa({"type": "string", "format": fmt}, SchemaOptions())
    assert info.value.keyword == "format" and fmt in str(info.value)
    assert compile_schema_dfa({"type": "string", "format": fmt}, SchemaOptions(assert_formats=False)).matches('"("')


@pytest.mark.parametrize("schema", [
    {"type": "string", "format": "json-pointer"}, {"type": "string", "format": "uri-reference"},
])
def test_new_formats_against_oracle(schema):
    check(schema, extra=["/a~0b", "/a~2", "#x", "a b", "../c?d#e", "http://x/y"])


@pytest.mark.parametrize("schema", [
    {"$defs": {"a": {"$anchor": "foo", "type": "integer"}}, "type": "array", "items": {"$ref": "#foo"}},
    {"$id": "http://x/s.json", "$defs": {"a": {"type": "integer"}}, "type": "array",
     "items": {"$ref": "http://x/s.json#/$defs/a"}},
    {"$schema": DRAFT7, "definitions": {"a": {"$id": "#bar", "type": "integer"}}, "type": "array",
     "items": {"$ref": "#bar"}},
])
def test_anchor_and_root_id_references(schema):
    dfa = check(schema, extra=[[1, 2], ["a"], [1.5]])
    assert dfa.matches("[1, 2]") and not dfa.matches('["a"]')


def test_anchor_under_a_nested_base_uri_is_refused():
    schema = {"$defs": {"a": {"$id": "http://other/a.json", "$defs": {"b": {"$anchor": "foo"}}}},
              "$ref": "#foo"}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions())
    assert info.value.keyword == "$ref"


def test_max_properties_with_extra_keys_is_counted_or_refused():
    dfa = compile_schema_dfa({"type": "object", "maxProperties": 2, "additionalProperties": True}, SchemaOptions())
    assert dfa.matches('{"a": 1, "b": 2}') and not dfa.matches('{"a": 1, "b": 2, "c": 3}')
    # vercel.json's build.env: up to 100 string variables, counted exactly
    env = {"type": "object", "maxProperties": 100, "additionalProperties": {"type": "string"}}
    hundred = compile_schema_dfa(env, SchemaOptions())
    assert hundred.matches(json.dumps({f"K{i}": "v" for i in range(100)}))
    assert not hundred.matches(json.dumps({f"K{i}": "v" for i in range(101)}))
    free = compile_schema_dfa({"type": "object", "maxProperties": 100, "additionalProperties": True}, SchemaOptions())
    assert free.matches(json.dumps({f"k{i}": [i] for i in range(100)}))
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa({"type": "object", "maxProperties": 1_001, "additionalProperties": True}, SchemaOptions())
    assert info.value.keyword == "maxProperties" and "1000" in str(info.value)
    wide = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(150)}}  # ~4,350 states
    shared = compile_schema_dfa({"type": "object", "maxProperties": 999, "additionalProperties": wide}, SchemaOptions())
    assert shared.nfa_states < 100_000  # one share per count, not 999 copies of 4,350 states
    assert shared.matches(json.dumps({f"k{i}": {"p1": i} for i in range(999)}))
    assert not shared.matches(json.dumps({f"k{i}": {"p1": i} for i in range(1000)}))
    long_text = {"type": "string", "maxLength": 3000}  # a block too large to copy per expansion: no share
    with pytest.raises(SchemaTooComplexError) as too_big:  # 999 copies: past max_nfa_states before it is built
        compile_schema_dfa({"type": "object", "maxProperties": 999, "additionalProperties": long_text}, SchemaOptions())
    assert too_big.value.keyword == "maxProperties" and "max_nfa_states" in str(too_big.value)
    few = compile_schema_dfa({"type": "object", "properties": {"a": {}}, "maxProperties": 100}, SchemaOptions())
    assert few.matches('{"a": 1}'), "only one key may appear: the bound is never reached"


IF_POOL = [{"kind": "a", "x": 1}, {"kind": "a", "x": "s"}, {"kind": "b", "x": 1}, {"kind": "b", "x": "s"},
           {"x": 1}, {"x": "s"}, {"kind": "c"}, {"kind": "a"}, {}, 1, "s", {"kind": None, "x": 1}]


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("condition", [
    {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
    {"properties": {"kind": {"const": "a"}}},
    {"properties": {"kind": {"enum": ["a", None]}}, "required": ["kind"], "type": "object"},
    {"required": ["kind"]},
    {"properties": {"kind": False}},
])
def test_if_then_else_on_object_keys_against_oracle(condition, strict):
    schema = {"type": ["object", "integer"], "properties": {"kind": {"enum": ["a", "b", "c", None]}, "x": {}},
              "if": condition, "then": {"properties": {"x": {"type": "integer"}}},
              "else": {"properties": {"x": {"type": "string"}}}}
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=strict))
    validator = jsonschema.Draft202012Validator(schema)
    for value in IF_POOL:
        for text in serialisations(value, schema):
            assert dfa.matches(text) == validator.is_valid(value), (text, validator.is_valid(value))


@pytest.mark.parametrize("condition", [
    {"exclusiveMaximum": 0}, {"minimum": 2, "maximum": 10}, {"exclusiveMinimum": 1.5}, {"maxLength": 3},
    {"minLength": 2}, {"type": "string"}, {"type": "number"}, {"type": ["null", "array"]}, {"const": "a"},
    {"enum": ["a", None, True]}, {"type": "object", "required": ["a"]},
])
def test_if_then_else_on_scalar_conditions_against_oracle(condition):
    schema = {"if": condition, "then": {"minimum": -10, "minLength": 1, "maxItems": 1},
              "else": {"multipleOf": 2, "maxLength": 3, "required": ["b"]}}
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False, free_form_depth=3))
    validator = jsonschema.Draft202012Validator(schema)
    for value in [*POOL, -20, -5, 4, 12, 1.5, 1.75, "abcd", "", [1, 2], {"b": 1}]:
        valid = validator.is_valid(value)
        if isinstance(value, dict) and "b" in value and list(value)[0] != "b":
            continue  # keys named by required are written first
        for text in serialisations(value, {}):
            if isinstance(value, (int, float)) and "e" in text:
                continue  # documented: bounded numbers are written without exponent
            assert dfa.matches(text) == valid, (text, valid)


def test_string_length_bounds_that_cross_admit_no_string():
    dfa = compile_schema_dfa({"anyOf": [{"type": "string", "minLength": 4, "maxLength": 3}, {"type": "integer"}]},
                             SchemaOptions())
    assert dfa.matches("1") and not dfa.matches('"abcd"') and not dfa.matches('"abc"')


def test_if_without_then_or_else_constrains_nothing():
    dfa = compile_schema_dfa({"allOf": [{"if": {"pattern": "^x"}}, {"then": {"const": 1}}, {"type": "string"}]},
                             SchemaOptions())
    assert dfa.matches('"x"') and dfa.matches('"y"') and not dfa.matches("1")


def test_if_with_a_condition_whose_complement_is_not_built_is_refused():
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa({"if": {"enum": [[1, 2]]}, "then": {"multipleOf": 2}}, SchemaOptions())
    assert info.value.keyword == "if"
    # a multipleOf condition is negated since session 16: the numbers that are no multiple
    dfa = compile_schema_dfa({"if": {"multipleOf": 3}, "then": {"multipleOf": 2}}, SchemaOptions())
    assert dfa.matches("6") and dfa.matches("4") and dfa.matches("6.0") and not dfa.matches("9")


# ---- compile-time budget and the structures it keeps small ----------------------------------


NUMBER_TEXTS = ["0", "-0", "0.0", "-0.00", "1", "1.0", "1.00", "-1", "2.5", "2.50", "2.05", "25", "-2.5",
                "0.001", "0.0010", "0.01", "1" + "0" * 308, "1" + "0" * 308 + ".0", "1e308", "10", "00", ".5",
                "3", "100000000000000000000", "100000000000000000000.000", "7.25", "-7.250"]


@pytest.mark.parametrize("values", [[0, 1, 2.5, 1e308, 10 ** 20, 0.001], [-1, -2.5, 7.25, -7.25], [0.0], [10 ** 400]])
def test_numeric_enum_is_exact_under_json_equality(values):
    dfa = compile_schema_dfa({"enum": values}, SchemaOptions(), lazy=False)
    texts = NUMBER_TEXTS + [str(10 ** 400), str(10 ** 400) + ".00", "-" + str(10 ** 400)]
    for text in texts:
        try:  # equality of the numbers the texts spell (1e308 in a schema is 10^308 exactly)
            parsed = json.loads(text, parse_float=Decimal, parse_int=Decimal)
        except json.JSONDecodeError:  # "00", ".5": not JSON numbers
            expected = False
        else:
            expected = any(parsed == Decimal(repr(v)) for v in values) and "e" not in text  # no exponent form
        assert dfa.matches(text) == expected, (values, text)


def test_fine_multiple_of_is_small_and_exact():
    dfa = compile_schema_dfa({"type": "number", "multipleOf": 1e-300}, SchemaOptions(), lazy=False)
    assert dfa.num_states < 400  # one state per fraction digit (was ~46,000: trailing zeros in every state)
    step = compile_schema_dfa({"type": "number", "multipleOf": 0.05}, SchemaOptions(), lazy=False)
    for text, ok in (("0.05", True), ("0.10", True), ("0.1000", True), ("1", True), ("0.07", False),
                     ("0.051", False), ("-0.15", True), ("0.0500", True), ("0.005", False)):
        assert step.matches(text) == ok, text


def test_optional_members_are_built_once():
    """A member is entered from before and after the first written key through one state, so
    an object's NFA holds each property value once (it held two copies)."""
    from enforcer.automaton import nfa_size
    from enforcer.json_schema import SchemaCompiler
    # distinct sub-schemas (one met again would be one share per use)
    node = SchemaCompiler({"type": "object", "properties": {f"p{i}": {"type": "string", "maxLength": 2048}
                                                            for i in range(40)}}, SchemaOptions()).compile()
    assert 40 * 40_961 <= nfa_size(node) < 41 * 40_961
    dfa = check({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}},
                extra=[{"b": "x"}, {"a": 1}, {"a": 1, "b": "x"}, {}])
    for text, ok in (('{"b": "x"}', True), ('{"a": 1, "b": "x"}', True), ('{"b": "x", "a": 1}', False),
                     ("{}", True), ('{, "b": "x"}', False), ('{"a": 1,}', False), ('{"a": 1 "b": "x"}', False)):
        assert dfa.matches(text) == ok, text


def test_budget_refuses_before_building_and_names_the_keyword():
    with pytest.raises(SchemaTooComplexError) as info:
        compile_schema_dfa({"type": "array", "items": {"type": "string", "maxLength": 2048}, "maxItems": 1024},
                           SchemaOptions())
    assert (info.value.keyword, info.value.budget) == ("maxItems", f"max_nfa_states={DEFAULT_MAX_NFA_STATES}")
    # beside a pattern, a long maxLength is a counted product (was refused past 2048) ...
    dfa = compile_schema_dfa({"properties": {"s": {"type": "string", "maxLength": 5000, "pattern": "^a"}}},
                             SchemaOptions())
    for n, ok in ((5000, True), (5001, False)):
        assert dfa.matches('{"s": "a' + "\u00e9" * (n - 1) + '"}') == ok, n
    assert not dfa.matches('{"s": "b"}')
    # ... up to its own budget (copies times pairs), then refused naming the keyword
    with pytest.raises(SchemaTooComplexError) as info:
        compile_schema_dfa({"properties": {"s": {"type": "string", "maxLength": 500000, "pattern": "^a"}}},
                           SchemaOptions())
    assert (info.value.pointer, info.value.keyword) == ("/properties/s", "maxLength")
    # a long maxLength alone is a lazily built repeat (was refused past 2048): exact at the bound
    dfa = compile_schema_dfa({"properties": {"s": {"type": "string", "maxLength": 32767, "minLength": 2}}},
                             SchemaOptions())
    for n, ok in ((1, False), (2, True), (32767, True), (32768, False)):
        assert dfa.matches('{"s": "' + "\u00e9" * n + '"}') == ok, n
    assert dfa.matches('{"s": "' + "é" * 32767 + '"}') and not dfa.matches('{"s": "' + "é" * 32768 + '"}')
    # large maxItems of small items compile now (the budget, not a fixed 256, is the limit)
    dfa = compile_schema_dfa({"type": "array", "items": {"type": "boolean"}, "maxItems": 1000}, SchemaOptions())
    assert dfa.matches("[" + ", ".join(["true"] * 1000) + "]")
    assert not dfa.matches("[" + ", ".join(["true"] * 1001) + "]")


def test_all_of_distributes_over_a_union_in_validator_key_order():
    """``allOf: [{oneOf: [...]}, {properties}]`` (jsonschemabench Github o64859): the branch's
    keys come before the later part's, as a validator lists them; exactly one branch still."""
    schema = {"allOf": [{"oneOf": [{"properties": {"state": {"const": "stopped"}}, "required": ["state"]},
                                   {"properties": {"state": {"const": "running"}, "total": {"type": "number"}},
                                    "required": ["state"]}], "type": "object"},
                        {"properties": {"builder": {"type": "object"}, "id": {"type": "number"}},
                         "required": ["builder", "id"], "type": "object"}]}
    for strict in (True, False):
        dfa = compile_schema_dfa(schema, SchemaOptions(strict=strict))
        assert dfa.matches('{"state": "running", "total": 100, "builder": {}, "id": 1}')
        assert dfa.matches('{"state": "stopped", "builder": {"name": "b"}, "id": 1}')
        assert not dfa.matches('{"state": "paused", "builder": {}, "id": 1}')
        assert not dfa.matches('{"state": "running", "total": 100}')
    assert compile_schema_dfa(schema, SchemaOptions(strict=False)).matches(
        '{"state": "running", "total": 100, "builder": {}, "id": 1, "x": 0}')
    overlapping = {"allOf": [{"oneOf": [{"type": "integer"}, {"minimum": 2}]}, {"maximum": 5}]}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(overlapping, SchemaOptions())
    assert info.value.keyword == "oneOf" and info.value.pointer == "/allOf/0"


@pytest.mark.parametrize("condition", [{"prefixItems": [{"const": "a"}]}, {"prefixItems": [True, {"enum": ["b", None]}]}])
def test_if_then_else_on_array_item_constants_against_oracle(condition):
    schema = {"if": condition, "then": {"maxItems": 1}, "else": {"minItems": 2}}
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False, free_form_depth=3))
    validator = jsonschema.Draft202012Validator(schema)
    for value in [*POOL, ["a"], ["a", "b"], ["x", "b"], ["x", None], ["x", "y"], ["a", "y", 1], [None]]:
        for text in serialisations(value, {}):
            assert dfa.matches(text) == validator.is_valid(value), (text, validator.is_valid(value))


@pytest.mark.parametrize("schema", [
    {"oneOf": [{}, False]}, {"oneOf": [{"type": "number"}, {}]},
    {"type": ["string", "integer"], "oneOf": [{"type": "string"}, True]},
])
def test_one_of_with_a_branch_every_value_matches(schema):
    check(schema, strict=False)


@pytest.mark.parametrize("branches", [[True, True], [{}, True, False]])
def test_one_of_with_two_branches_every_value_matches_admits_nothing(branches):
    with pytest.raises(InvalidSchemaError, match="no JSON value"):
        compile_schema_dfa({"oneOf": branches}, SchemaOptions())


@pytest.mark.parametrize("negated", [
    {"type": "object", "properties": {"a": {"type": "string"}}},
    {"properties": {"a": {"type": "integer", "minimum": 2}}, "required": ["a"]},
    {"type": "array", "prefixItems": [{"const": "a"}]},
])
def test_not_of_a_condition_negated_exactly(negated):
    check({"not": negated}, extra=[{"a": 3}, {"a": 1.5}, ["a", 1], ["b"]], strict=False)
    check({"if": negated, "then": {"type": "object", "required": ["b"]}}, extra=[{"a": 3, "b": 1}, {"a": "x"}],
          strict=False)


KEYED = [{}, {"0": 1}, {"a": 1, "0": 2}, {"a.b": 1}, {"axb": 1}, {"c": 1, "d": 2}, {"xy": 1}, {"yx": 1},
         {"00": 1}, {"a\nb": 1}, {"x": 1, "a.b": 2, "0": 3}, 1, "a", [], None]


@pytest.mark.parametrize("schema", [
    {"not": {"propertyNames": {"not": {"const": "0"}}}},
    {"type": "object", "not": {"propertyNames": {"not": {"enum": ["a.b", "a\nb", "c"]}}}},
    {"type": "object", "not": {"propertyNames": {"not": {"anyOf": [{"pattern": "^x"}, {"const": "0"}]}}}},
    {"type": "object", "allOf": [{"not": {"propertyNames": {"not": {"pattern": "^x"}}}},
                                 {"not": {"propertyNames": {"not": {"const": "a.b"}}}}]},
    {"not": {"propertyNames": False}},
    {"type": "object", "not": {"propertyNames": {"not": {"pattern": "x"}}}, "maxProperties": 1},
])
def test_not_of_property_names_is_a_key_that_must_appear(schema):
    """``not: {propertyNames: {not: names}}``: some key is one of the names (or matches one of
    the patterns), written among the object's keys; ``not: {propertyNames: false}``: some key."""
    check(schema, extra=KEYED, strict=False)
    check(schema, extra=KEYED)


DIGIT_KEYED = [{k: 1 for k in keys} for n in range(4) for keys in itertools.combinations("012345", n)]


@pytest.mark.parametrize("schema", [
    {"type": "object", "maxProperties": 2, "not": {"anyOf": [
        {"propertyNames": {"not": {"enum": ["1", "3"]}}}, {"propertyNames": {"not": {"enum": ["2", "3"]}}},
        {"propertyNames": {"not": {"enum": ["2", "4"]}}}]}},
    {"type": "object", "patternProperties": {"3": {"type": "integer"}}, "allOf": [
        {"not": {"propertyNames": {"not": {"enum": ["1", "3"]}}}},
        {"not": {"propertyNames": {"not": {"pattern": "^[24]$"}}}},
        {"not": {"propertyNames": {"enum": ["0", "1", "2", "3", "4"]}}}]},
])
def test_several_keys_that_must_appear_are_witnessed_together(schema):
    """Several such ``not``s of one object: each a key it must hold, one key the witness of
    several, counted in one graph (not objects intersected whole: within a small eager budget)."""
    validator = jsonschema.Draft202012Validator(schema)
    for strict in (False, True):
        dfa = compile_schema_dfa(schema, SchemaOptions(strict=strict, max_eager_states=5_000))
        for value in DIGIT_KEYED:
            accepted = [dfa.matches(json.dumps(dict(order))) for order in itertools.permutations(value.items())]
            assert any(accepted) == validator.is_valid(value), value


@pytest.mark.parametrize("schema", [
    # allOf parts merged into one object: one part's additionalProperties governs the other's
    # properties (the merge wrote an allOf into the first part's own properties dict)
    {"$defs": {"int": {"type": "integer"}},
     "allOf": [{"properties": {"foo": {"$ref": "#/$defs/int"}}}, {"additionalProperties": {"$ref": "#/$defs/int"}}]},
    {"allOf": [{"properties": {"a": {"type": "integer"}}, "additionalProperties": {"minimum": 1}},
               {"properties": {"b": {"type": "integer"}}, "additionalProperties": {"maximum": 9}}]},
    {"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]}, {"properties": {"a": {"minimum": 2}}}],
     "unevaluatedProperties": False},
])
def test_compiling_leaves_the_schema_unchanged(schema):
    """The compiler never writes into the caller's schema: compiling the same object again
    gives the same automaton (it once raised a false $ref cycle the second time)."""
    import copy

    from enforcer import clear_cache, compile_json_schema
    from enforcer.vocabulary import Vocabulary

    vocabulary = Vocabulary.from_token_bytes([bytes([b]) for b in range(256)], {})
    original = copy.deepcopy(schema)
    first = check(schema)
    assert schema == original
    clear_cache()
    compile_json_schema(schema, vocabulary)
    compile_json_schema(schema, vocabulary, strict=False)
    assert schema == original
    assert check(schema).matches('{"a": 3}') == first.matches('{"a": 3}')


def test_a_condition_that_requires_a_forbidden_key():
    """``required`` naming a key that ``properties`` forbids: objects always fail the condition
    (it raised TypeError while negating it)."""
    check({"not": {"required": ["a"], "properties": {"a": False}}}, strict=False)
    check({"if": {"required": ["a"], "properties": {"a": False}}, "then": {"type": "string"}}, strict=False)
    with pytest.raises(InvalidSchemaError, match="no JSON value"):
        compile_schema_dfa({"if": {"required": ["a"], "properties": {"a": False}}, "then": {"type": "object"},
                            "else": {"type": "string"}}, SchemaOptions())


def _subset_construction_keys_except(names):
    """The reference of ``json_schema._keys_except``: the declared names' canonical writings
    determinised from an expression and taken from the any-key automaton by the product."""
    from enforcer.automaton import alt, byte_chars, compile_node, literal, seq

    escapes = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}

    def char(c):
        forms = [literal(escapes[c])] if c in escapes else []
        if ord(c) < 0x20:
            hexes = f"{ord(c):04x}"
            forms.append(seq(literal("\\u00"), byte_chars(hexes[2].encode()),
                             byte_chars(bytes({ord(hexes[3]), ord(hexes[3].upper())}))))
        elif c not in escapes:
            forms.append(literal(c))
        return alt(*forms)

    written = compile_node(alt(*(seq(literal('"'), *(char(c) for c in name), literal('"')) for name in names)))
    return json_schema._any_key_dfa().difference(written)


def _same_automaton(a, b):
    """True when ``a`` and ``b`` are the same automaton up to state numbering (so, both being
    trimmed, of the same language, and as small as each other)."""
    if a.num_states != b.num_states:
        return False
    if a.num_states == 0:
        return True  # both empty
    pairs = {0: 0}
    todo = [0]
    while todo:
        x = todo.pop()
        if a.accepting[x] != b.accepting[pairs[x]]:
            return False
        for ta, tb in zip(a.transitions[x].tolist(), b.transitions[pairs[x]].tolist()):
            if (ta < 0) != (tb < 0):
                return False
            if ta >= 0 and ta not in pairs:
                pairs[ta] = tb
                todo.append(ta)
            elif ta >= 0 and pairs[ta] != tb:
                return False
    return len(set(pairs.values())) == len(pairs) == a.num_states


_KEY_ALPHABET = "ab\"\\\n\t\x01\x1f\x7f é€😀"


@pytest.mark.parametrize("seed", range(40))
def test_declared_keys_complement_is_the_subset_construction_automaton(seed):
    """The directly built "none of these names" automaton is the minimal automaton the
    subset construction and the product give (shared prefixes and suffixes, escapes, control
    characters with their three writings, multi-byte characters, the empty name)."""
    import random

    rng = random.Random(seed)
    letters = _KEY_ALPHABET[:rng.randint(2, len(_KEY_ALPHABET))]
    names = tuple(dict.fromkeys("".join(rng.choice(letters) for _ in range(rng.randint(0, 7)))
                                for _ in range(rng.randint(1, 12))))
    built = json_schema._extra_key_dfa.__wrapped__(names, SchemaOptions().max_states)
    assert _same_automaton(built, _subset_construction_keys_except(names))
    for name in names:
        assert not built.matches(json.dumps(name, ensure_ascii=False))
    assert built.matches(json.dumps("".join(names) + "z", ensure_ascii=False))


def test_declared_keys_complement_is_refused_past_max_states():
    names = tuple(f"key{i}" for i in range(50))
    states = json_schema._extra_key_dfa.__wrapped__(names, SchemaOptions().max_states).num_states
    assert json_schema._extra_key_dfa.__wrapped__(names, states).num_states == states
    with pytest.raises(SchemaTooComplexError):
        json_schema._extra_key_dfa.__wrapped__(names, states - 1)


# ---- negations: patterns, formats and sub-schemas ---------------------------------------------


NEGATION_EXTRA = ["ab", "ba", "DEADBEEF", "deadbeef", "DEADBEE", "2024-02-29", "2023-02-29", "a.b", "x@y.org",
                  "host-name", "-bad", ["a", "b"], ["2024-01-31"], ["x", 1], [1, 2.5], {"a": "ab"}, {"a": "ba"},
                  {"a": 1, "b": "x"}, {"b": "ab"}, {"a": "ab", "c": 1}, {"c": 1}, {"a": ["ab"]}, {"a": ["ba", "ab"]},
                  {"a": {"b": "x"}}, {"a": {"b": 1}}, {"x1": 1}, {"a": "ab", "x1": 1}, {"x1": "s"},
                  {"a": 1, "x1": "s", "c": "t"}, {"b": "st", "x1": 2}, {"xb": "s"}, {"c": "s"}]


def check_both_modes(schema, extra=NEGATION_EXTRA, exponents=True, pool=POOL):
    """Exactly jsonschema's verdict in spec mode; in strict mode (which closes the objects of
    schemas that declare properties, the failures' too) nothing invalid. ``exponents=False``:
    numbers are not written with exponents (bounded numbers never are)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    spec, strict = (compile_schema_dfa(schema, SchemaOptions(strict=mode, free_form_depth=3)) for mode in (False, True))
    for value in [*pool, *extra]:
        valid = validator.is_valid(value)
        for text in serialisations(value, {}):
            if exponents or not isinstance(value, float) or "e" not in text:
                assert spec.matches(text) == valid, (text, valid)
                assert not strict.matches(text) or valid, f"accepted invalid {text!r}"


@pytest.mark.parametrize("negated", [
    {"pattern": "^a"}, {"pattern": "b"}, {"type": "string", "pattern": "^[0-9A-F]{8}$"}, {"format": "date"},
    {"format": "email"}, {"type": "string", "format": "hostname", "minLength": 3}, {"pattern": "^a", "format": "ipv4"},
])
def test_not_of_patterns_and_formats_against_oracle(negated):
    """A string fails a pattern (an asserted format) exactly when its content is outside the
    pattern's (format's) language: the complement, every writing of it."""
    check_both_modes({"not": negated})
    check_both_modes({"type": ["string", "integer"], "maxLength": 4, "not": negated})
    check_both_modes({"if": negated, "then": {"maxLength": 2}, "else": {"minLength": 3}})


def test_a_negated_pattern_or_format_excludes_every_writing_of_a_matching_string():
    dfa = compile_schema_dfa({"not": {"pattern": "^a"}}, SchemaOptions())
    assert dfa.matches('"ba"') and dfa.matches('"\\u0062a"') and not dfa.matches("1")
    assert not dfa.matches('"ab"') and not dfa.matches('"\\u0061b"') and dfa.matches('"\\u0041b"')
    dates = compile_schema_dfa({"type": "string", "not": {"format": "date"}}, SchemaOptions())
    assert dates.matches('"2023-02-29"') and dates.matches('"2024-01-3\\u0032"')
    assert not dates.matches('"2024-01-31"') and not dates.matches('"2024-01-3\\u0031"')
    with pytest.raises(InvalidSchemaError, match="no JSON value"):  # an annotation: every value meets it
        compile_schema_dfa({"not": {"format": "date"}}, SchemaOptions(assert_formats=False))


@pytest.mark.parametrize("schema", [
    {"oneOf": [{"pattern": "^[0-9A-F]{8}$"}, {"enum": ["DEADBEEF", "deadbeef", None]}]},
    {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "b$"}, {"type": "integer"}]},
    {"oneOf": [{"type": "string", "format": "hostname"}, {"type": "string", "maxLength": 3}]},
    {"oneOf": [{"format": "date"}, {"type": "string", "pattern": "^2024"}]},
    # apart by their patterns alone: no negation needed
    {"type": "object", "oneOf": [{"properties": {"a": {"type": "string", "pattern": "^ab$"}}, "required": ["a"]},
                                 {"properties": {"a": {"type": "string", "pattern": "^ba$"}}, "required": ["a"]}]},
])
def test_one_of_with_overlapping_pattern_and_format_branches_against_oracle(schema):
    check_both_modes(schema)


@pytest.mark.parametrize("negated", [
    {"$ref": "#/$defs/ab"},
    {"properties": {"a": {"$ref": "#/$defs/ab"}}},
    {"allOf": [{"type": "object"}, {"properties": {"a": {"type": "string"}}}, {"required": ["a"]}]},
    {"anyOf": [{"type": "string", "pattern": "^a"}, {"type": "array", "maxItems": 1}]},
    {"oneOf": [{"type": "string"}, {"maxLength": 2}]},
    {"not": {"type": "string", "pattern": "b"}},
    {"type": "array", "items": {"type": "string", "pattern": "a"}},
    {"properties": {"a": {"type": "array", "items": {"$ref": "#/$defs/ab"}, "minItems": 1}}},
    {"type": "object", "properties": {"a": {}}, "additionalProperties": False},
    {"properties": {"a": {"type": "string"}}, "patternProperties": {"^x": {}}, "additionalProperties": False},
    {"additionalProperties": False},
    {"properties": {"a": {"properties": {"b": {"type": "string"}}, "additionalProperties": False}}},
    {"propertyNames": {"anyOf": [{"enum": ["a", "b"]}, {"pattern": "1$"}]}},
    {"patternProperties": {"^x": {"type": "integer"}}},
    {"contains": {"const": "ab"}}, {"contains": {"type": "string"}, "minContains": 2, "maxContains": 2},
    {"dependentRequired": {"a": ["b", "c"]}},
    {"properties": {"a": {}}, "additionalProperties": {"type": "string"}},
    {"type": "object", "patternProperties": {"^x": {"type": "string"}, "b": {"maxLength": 1}},
     "additionalProperties": {"type": "integer"}},
    {"x-vendor": {"type": "string"}, "properties": {"a": {"name": "ignored", "type": "string"}}},
])
def test_not_and_if_of_sub_schemas_against_oracle(negated):
    """Failures of references, parts, branches, items and closed objects, negated through
    sub-schemas (keys no validator reads are ignored)."""
    defs = {"ab": {"type": "string", "pattern": "^ab$"}}
    check_both_modes({"$defs": defs, "not": negated})
    check_both_modes({"$defs": defs, "if": negated, "then": {"type": ["array", "object"]}, "else": {"maxLength": 2}})
    check_both_modes({"$defs": defs, "oneOf": [negated, {"type": ["object", "array"], "maxItems": 1,
                                                         "required": ["a"]}]})


@pytest.mark.parametrize("negated", [
    {"type": "integer"}, {"multipleOf": 2}, {"multipleOf": 0.25}, {"type": "integer", "multipleOf": 3},
    {"multipleOf": 1.5, "maximum": 7},
    {"enum": [1, 2.5, "a", None]}, {"const": 0}, {"enum": [-3, 10, 7]}, {"enum": [3.25]},
])
def test_not_of_numeric_constants_and_conditions_against_oracle(negated):
    """Numbers outside a numeric ``enum``/``const`` are the exclusive intervals between its
    values, numbers failing ``multipleOf`` the writings of numbers minus those of its multiples
    (both written as bounded numbers are: without exponents)."""
    extra = [*NEGATION_EXTRA, 1.0, 2.5, 2.25, -0.0, -3, 9.5, 10.0, 11, 3.25, 3.5, 4.5, 6, 6.0, 7.5, 9, 12, 20, -4,
             {"a": "x", "b": 1}, {"a": "y"}]
    check_both_modes({"not": negated}, extra=extra, exponents=False)
    check_both_modes({"oneOf": [negated, {"type": ["number", "string"], "maxLength": 1}]}, extra=extra,
                     exponents=False)
    for dialect in ("http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#"):
        if not {"if", "const"} & set(negated) or "07" in dialect:  # neither keyword in draft-04
            check_both_modes({"$schema": dialect, "not": negated}, extra=extra, exponents=False)


@pytest.mark.parametrize("schema", [
    {"$schema": "http://json-schema.org/draft-04/schema#",
     "oneOf": [{"maximum": 3}, {"minimum": 2, "exclusiveMinimum": True}]},
    {"$schema": "http://json-schema.org/draft-04/schema#",
     "not": {"minimum": 2, "maximum": 3, "exclusiveMaximum": True}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "not": {"items": [{"type": "string"}, {"const": "b"}]}},
    {"$schema": "http://json-schema.org/draft-07/schema#",
     "oneOf": [{"items": {"pattern": "a"}}, {"type": "array", "maxItems": 1}]},
])
def test_negations_in_earlier_drafts_against_oracle(schema):
    check_both_modes(schema, extra=[*NEGATION_EXTRA, 2, 2.5, 3, 4, ["a", "b"], ["a", "c"], ["b", "b", 1]],
                     exponents=False)


@pytest.mark.parametrize("schema", [
    {"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}, "v": {"type": "string"}}}},
     "not": {"$ref": "#/$defs/n"}},
    {"$defs": {"n": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]}},
     "oneOf": [{"$ref": "#/$defs/n"}, {"type": "array", "maxItems": 1}]},
])
def test_a_negated_reference_cycle_is_refused(schema):
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema_dfa(schema, SchemaOptions())
    assert info.value.keyword in ("not", "oneOf") and "negated exactly" in str(info.value)


@pytest.mark.parametrize("negated", [
    {"dependentSchemas": {"a": {"properties": {"b": {"type": "string"}}}}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": {"a": {"required": ["b"]}, "c": ["b"]}},
])
def test_not_of_dependent_schemas_against_oracle(negated):
    """An object fails a dependent schema when it holds the key and fails the schema (its keys
    written in the order the compiler writes dependent keys: the schema's properties first)."""
    schema = {"not": {k: v for k, v in negated.items() if k != "$schema"}, **{k: v for k, v in negated.items()
                                                                              if k == "$schema"}}
    in_order = [v for v in [*POOL, *NEGATION_EXTRA] if not (isinstance(v, dict) and list(v)[:2] == ["a", "b"])]
    check_both_modes(schema, extra=[{"b": 2, "a": 1}, {"b": "x", "a": 1}, {"b": 1, "c": 1}, {"c": 1}, {"a": 1, "c": 1}],
                     pool=in_order)


@pytest.mark.parametrize("condition", [{"type": ["integer", "string"], "maxLength": 2}, {"type": "integer"},
                                       {"type": ["number", "null"]}])
def test_a_type_fails_as_the_other_types_and_fractional_numbers(condition):
    """Values fail ``type`` as the other types (``integer``: numbers with a fraction too,
    written without exponent), which merge with other failures instead of intersecting."""
    check_both_modes({"if": condition, "then": {"minimum": 1}, "else": {"type": ["array", "number"]}},
                     extra=[*NEGATION_EXTRA, 0.5, 2.5, 3, -2, 0], exponents=False)
    check_both_modes({"oneOf": [condition, {"type": ["number", "array"], "maxItems": 1}]},
                     extra=[*NEGATION_EXTRA, 0.5, 2.5, 3, -2, 0], exponents=False)


_TAGGED = {
    "section": {"type": "object", "required": ["type"],
                "properties": {"type": {"enum": ["section"]}, "n": {"type": "number", "multipleOf": 3}}},
    "reference": {"type": "object", "required": ["type"],
                  "properties": {"type": {"enum": ["reference"]}, "n": {"type": "number", "multipleOf": 2}}},
}


@pytest.mark.parametrize("schema", [
    # jsonschemabench WashingtonPost wp_94: the second branch's tag sits in an allOf part's $ref
    {"$defs": _TAGGED, "oneOf": [{"$ref": "#/$defs/section"},
                                 {"allOf": [{"$ref": "#/$defs/reference"}, {"properties": {"id": {"type": "string"}}}]}]},
    # every branch of an anyOf apart from the other oneOf branch
    {"$defs": _TAGGED, "oneOf": [
        {"anyOf": [{"$ref": "#/$defs/section"}, {"$ref": "#/$defs/reference"}]},
        {"type": "object", "required": ["type"],
         "properties": {"type": {"const": "other"}, "n": {"type": "number", "multipleOf": 5}}}]},
    # a $ref beside other keywords (2020-12): its target is one more conjunct
    {"$defs": _TAGGED, "oneOf": [{"$ref": "#/$defs/section", "properties": {"id": {"type": "string"}}},
                                 {"$ref": "#/$defs/reference", "minProperties": 1}]},
])
def test_one_of_branches_apart_through_applicators_need_no_negation(schema):
    """Branches whose required tag constants differ inside ``allOf`` parts, ``anyOf`` branches or
    a ``$ref``'s target share no value, so no branch is negated (``multipleOf`` has no exact
    negation: before, the ``oneOf`` was refused). Exact against jsonschema."""
    extra = [{"type": "section", "n": 6}, {"type": "section", "n": 4}, {"type": "reference", "n": 4},
             {"type": "reference", "n": 3, "id": "x"}, {"type": "other", "n": 10}, {"type": "other", "n": 3},
             {"type": "section", "id": 5}, {"type": "x"}, {"n": 6}]
    check(schema, extra=extra, strict=False)
    dfa = compile_schema_dfa(schema, SchemaOptions())
    assert dfa.matches('{"type": "section", "n": 6}') and not dfa.matches('{"type": "section", "n": 4}')


def test_required_key_is_not_forbidden_where_pattern_properties_admit_it():
    """``additionalProperties: false`` beside ``patternProperties`` admits a key the patterns
    match: two branches where one requires ``x-a`` and the other admits it through a pattern may
    overlap, so the oneOf compiles both negations (here exact) rather than a false disjointness."""
    schema = {"oneOf": [{"type": "object", "required": ["x-a"]},
                        {"type": "object", "additionalProperties": False, "patternProperties": {"^x-": {}}}]}
    check(schema, extra=[{"x-a": 1}, {"x-b": 1}, {"y": 1}, {}], strict=False)


def _tagged_conditions(count, required_in_context=True, with_else=False):
    """``count`` conditionals over one tag constant each (JSON Schema Store's cloudify,
    v2ray, yippee-ki write theirs so): tag ``k{i}`` requires ``v{i}`` to be an integer."""
    parts = []
    for i in range(count):
        part = {"if": {"properties": {"kind": {"const": f"k{i}"}}},
                "then": {"properties": {f"v{i}": {"type": "integer"}}, "required": [f"v{i}"]}}
        if with_else:
            part["else"] = {"not": {"required": [f"w{i}"]}}
        parts.append(part)
    schema = {"type": "object", "properties": {"kind": {"type": "string"}}, "allOf": parts}
    if required_in_context:
        schema["required"] = ["kind"]
    return schema


@pytest.mark.parametrize("schema", [
    _tagged_conditions(3),
    _tagged_conditions(3, with_else=True),
    _tagged_conditions(3, required_in_context=False),  # an object without the tag meets every if
    # one condition written twice: its thens both hold
    {**_tagged_conditions(2), "allOf": [*_tagged_conditions(2)["allOf"],
                                        {"if": {"properties": {"kind": {"const": "k0"}}},
                                         "then": {"properties": {"v0": {"minimum": 5}}}}]},
    # conditions apart through their own required keys (v2ray's form), beside a $ref'd part
    {"$defs": {"base": {"type": "object", "required": ["kind"]}},
     "allOf": [{"$ref": "#/$defs/base"},
               {"if": {"type": "object", "required": ["kind"], "properties": {"kind": {"enum": ["a"]}}},
                "then": {"required": ["x"]}},
               {"if": {"type": "object", "required": ["kind"], "properties": {"kind": {"enum": ["b"]}}},
                "then": {"required": ["y"]}, "else": {"properties": {"y": False}}}]},
])
def test_exclusive_conditions_are_one_branch_each_and_none(schema):
    """``allOf`` of conditionals whose ``if``s no value can meet two of: a union of one
    conjunction per condition and one for none; exact against jsonschema."""
    extra = [{"kind": "k0", "v0": 1}, {"kind": "k0", "v0": "x"}, {"kind": "k0"}, {"kind": "k1", "v1": 2},
             {"kind": "k1", "v1": 3, "v0": "x"}, {"kind": "k2", "v2": 7, "w0": 1}, {"kind": "k9"},
             {"kind": "k9", "w1": 1}, {"kind": "k0", "v0": 6}, {"v0": 1, "v1": 2, "v2": 3}, {},
             {"kind": "a", "x": 1}, {"kind": "a"}, {"kind": "b", "y": 1}, {"kind": "c", "y": 1}, {"kind": "c"}]
    check(schema, extra=extra, strict=False)


def test_many_exclusive_conditions_compile_without_automaton_products(monkeypatch):
    """Forty tagged conditionals: distributing them would make 2^40 conjunctions, so before
    they were intersected as whole automata (JSON Schema Store's yippee-ki spent 480 s so).
    Now no intersection is built (the tag outside every condition is one small difference) and
    the union is exact on every tag."""
    from enforcer.automaton import DFA

    def no_product(*args, **kwargs):
        raise AssertionError("a whole-automaton intersection was built")

    monkeypatch.setattr(DFA, "intersect", no_product)
    schema = _tagged_conditions(40, with_else=False)
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False))
    validator = jsonschema.Draft202012Validator(schema)
    for value in [{"kind": "k17", "v17": 3}, {"kind": "k17", "v17": "3"}, {"kind": "k39"}, {"kind": "zz"},
                  {"kind": "k3", "v3": 1, "v4": "x"}, {"v1": 1}]:
        assert dfa.matches(json.dumps(value)) == validator.is_valid(value), value


def test_automata_built_whole_are_budgeted_over_one_compile():
    """``max_eager_states`` sums the states of every automaton one compile builds whole (here
    two ``allOf`` pattern intersections): each alone fits the budget, both do not, and the
    refusal names the sub-schema, the keyword and the budget. The sum starts again at every
    compile."""
    a = {"type": "string", "allOf": [{"pattern": "^x[a-z]{0,8}$"}, {"pattern": "^[a-y]{0,6}z?$"}]}
    b = {"type": "string", "allOf": [{"pattern": "^q[0-9]{0,8}$"}, {"pattern": "^[0-8q]{0,6}$"}]}
    options = SchemaOptions(max_eager_states=200)
    for _ in range(2):
        for one in (a, b):
            assert compile_schema_dfa({"type": "object", "properties": {"x": one}}, options).matches('{"x": "x"}') \
                == (one is a)
    with pytest.raises(SchemaTooComplexError) as info:
        compile_schema_dfa({"type": "object", "properties": {"a": a, "b": b}}, options)
    assert (info.value.pointer, info.value.keyword, info.value.budget) == ("/properties/b", "allOf",
                                                                          "max_eager_states=200")
    assert compile_schema_dfa({"type": "object", "properties": {"a": a, "b": b}}, SchemaOptions()).matches(
        '{"a": "xa", "b": "q1"}')


def test_many_open_objects_compile_small_and_exact():
    """Thirty open objects' undeclared members (spec mode), whose free-form values once made
    124,000 NFA states at depth 4, are a placeholder each: the value fits a tenth of the default
    budget at depth 32 and accepts exactly what a validator does."""
    from enforcer.automaton import nfa_size
    from enforcer.json_schema import SchemaCompiler
    schema = {"type": "object", "properties": {f"p{i}": {"type": "object", "properties": {"k": {"type": "integer"}}}
                                               for i in range(30)}}
    node = SchemaCompiler(schema, SchemaOptions(strict=False)).compile()
    assert nfa_size(node) < SchemaOptions().max_nfa_states // 10
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False))
    validator = jsonschema.Draft202012Validator(schema)
    values = [{"p0": {"k": 1, "x": [1, {"y": None}]}}, {"p3": {"k": "1"}}, {"p1": {"x": _nested(4)}},
              {"p1": {"x": _nested(13)}}, {"p2": {}, "q": "s"}, {"p29": {"k": 2, "z": {"a": [True, "\u00e9"]}}},
              {"p4": {"k": 1.5}}, {"p5": [1]}]
    for value in values:
        for text in (json.dumps(value), json.dumps(value, indent=2), json.dumps(value, separators=(",", ":"))):
            assert dfa.matches(text) == validator.is_valid(value), text
    for text in ('{"p0": {"x": [1,]}}', '{"p0": {"x": {"a" 1}}}', '{"p0": {"x": [1}}', '{"q": {"r": [}]}'):
        assert not dfa.matches(text), text


def test_disjoint_patterns_take_one_key_language_each():
    """Six patterns no key matches two of make seven key languages (one per pattern and one for
    none), not 64: each key's value still meets exactly the patterns it matches."""
    schema = {"type": "object", "additionalProperties": {"type": "null"},
              "patternProperties": {f"^{c}": {"type": "integer" if i % 2 else "string"} for i, c in enumerate("abcdef")}}
    dfa = compile_schema_dfa(schema, SchemaOptions())
    validator = jsonschema.Draft202012Validator(schema)
    for value in ({"a1": "x", "b1": 2, "z": None}, {"a1": 1}, {"b": "x"}, {"f": 3, "e": "y"}, {"z": 1}):
        assert dfa.matches(json.dumps(value)) == validator.is_valid(value), value


def test_multiple_of_takes_only_numbers_divisible_as_written():
    """A number with a fraction part past 15 digits parses to a double whose divisibility may
    differ from the number's (28838806836010355360.00 is a multiple of 5, its double is not):
    multipleOf and its negation take such numbers nowhere, integers without a fraction part at
    any length (parsers keep them exact). Checked against jsonschema on the parsed values."""
    import random

    positive = compile_schema_dfa({"type": "number", "multipleOf": 5}, SchemaOptions())
    negative = compile_schema_dfa({"not": {"multipleOf": 3}}, SchemaOptions())
    assert positive.matches("28838806836010355360") and not positive.matches("28838806836010355360.00")
    assert positive.matches("12345678901230.0") and not positive.matches("123456789012345.0")
    assert negative.matches("28838806836010355362") and not negative.matches("28838806836010355362.00")
    rng = random.Random(16)
    for schema, dfa in (({"multipleOf": 5}, positive), ({"not": {"multipleOf": 3}}, negative)):
        validator = jsonschema.Draft202012Validator(schema)
        for _ in range(400):
            digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 24))).lstrip("0") or "0"
            point = rng.randint(0, len(digits))
            text = digits if point == len(digits) else f"{digits[:point] or '0'}.{digits[point:]}"
            if dfa.matches(text):
                assert validator.is_valid(json.loads(text)), text


@pytest.mark.parametrize("options,named", [
    ({"free_form_depth": -1}, "free_form_depth"), ({"max_recursion": 0}, "max_recursion"),
    ({"max_states": 2.5}, "max_states"), ({"indent_width": True}, "indent_width"), ({"strict": "no"}, "strict"),
])
def test_option_values_out_of_range_are_refused_naming_the_option(options, named):
    """A negative ``free_form_depth`` meant scalars only, silently; every option is checked."""
    with pytest.raises(ValueError, match=named):
        SchemaOptions(**options)


@pytest.mark.parametrize("pattern, bounds", [
    ("^[a-z]{1,6}$", {"maxLength": 4}), ("^[a-z]{2,6}$", {"minLength": 3, "maxLength": 8}),
    ("^[a-z_]{3,}$", {"maxLength": 5}), ("^[^a]{0,3}$", {"minLength": 1, "maxLength": 9}),
    ("^(ab){1,3}$", {"maxLength": 4}), ("^[a-z]{1,3}x$", {"maxLength": 3}),
])
def test_a_counted_class_pattern_beside_length_bounds_is_the_class_counted_within_both(pattern, bounds):
    """A pattern that is one character class counted, beside minLength/maxLength, is that class
    counted from the larger minimum to the smaller maximum (no product); a counted pair of
    characters or a class followed by more is not, and takes the product. Either way every
    writing of every string is accepted exactly when jsonschema validates it."""
    schema = {"type": "string", "pattern": pattern, **bounds}
    words = ["", "a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "abab", "ababab", "ab1", "b", "bb", "bbb",
             "bbbb", "x", "abx", "aax", "é", "éé", "ééé", "😀😀", "a\nb", "a\"b", "Ab", "abc_", "ba", "bcd", "bbbbbbbb"]
    check(schema, extra=words)
    compiler = json_schema.SchemaCompiler(schema, SchemaOptions())
    body = compiler._string_body(schema, "", raw=False)
    counted_class = pattern.startswith("^[") and pattern.endswith("}$")
    assert (isinstance(body, json_schema.Embedded) and type(body.dfa) is json_schema.CountedDFA) == counted_class


def test_a_counted_class_pattern_whose_bounds_miss_the_lengths_admits_no_string():
    schema = {"type": "string", "pattern": "^[a-z]{5,6}$", "maxLength": 4}
    assert json_schema.SchemaCompiler(schema, SchemaOptions())._string_body(schema, "", raw=False) is json_schema.NOTHING
    with pytest.raises(InvalidSchemaError):
        compile_schema_dfa(schema, SchemaOptions())
