"""Recursion as knots and large repeated sub-values as shares (enforcer.knots): a lazily built
automaton follows ``$ref`` recursion as deep as a text goes and holds a definition met again
as one placeholder per use; automata built whole cut recursion at the knot; a compile whose
knots cannot be decoded exactly falls back to recursion cut on each path."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from enforcer import SchemaTooComplexError
from enforcer.automaton import MAX_WHOLE_NFA_STATES, MAX_LEVEL_BLOCK_STATES, compile_node, literal, repeat
from enforcer.json_schema import SchemaCompiler, SchemaOptions
from enforcer.knots import levels_reached
from enforcer.matcher import compile_schema_dfa
from test_json_schema import _same_levels_built

TREE = {"type": "object", "required": ["tag"], "properties": {
    "tag": {"type": "string", "maxLength": 20, "pattern": "^[a-z0-9]+$"},
    "kids": {"type": "array", "items": {"$ref": "#"}}}}


def _tree(levels: int, leaf: Any = "leaf") -> dict[str, Any]:
    value: dict[str, Any] = {"tag": leaf}
    for i in range(levels):
        value = {"tag": f"n{i}", "kids": [value, {"tag": "x"}]}
    return value


def test_recursion_goes_as_deep_as_the_text() -> None:
    dfa = compile_schema_dfa(TREE, SchemaOptions(max_recursion=2))
    for levels in (0, 3, 40):
        assert dfa.matches(json.dumps(_tree(levels)))
    assert not dfa.matches(json.dumps(_tree(40, leaf=5)))  # an invalid leaf 41 levels down
    assert not dfa.matches(json.dumps(_tree(40, leaf="A")))
    assert not dfa.matches(json.dumps(_tree(40))[:-1])


def test_mutual_recursion_through_definitions() -> None:
    schema = {"$defs": {
        "expr": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/call"}]},
        "call": {"type": "object", "required": ["op", "args"], "additionalProperties": False, "properties": {
            "op": {"enum": ["add", "mul"]}, "args": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/expr"}}}}},
        "$ref": "#/$defs/expr"}
    value: Any = 1
    for i in range(30):
        value = {"op": "add" if i % 2 else "mul", "args": [value, i]}
    dfa = compile_schema_dfa(schema, SchemaOptions())
    assert dfa.matches(json.dumps(value)) and dfa.matches(json.dumps(value, separators=(",", ":")))
    assert not dfa.matches(json.dumps(value).replace('"mul"', '"div"', 1))
    assert not dfa.matches(json.dumps(value).replace('"args": [1,', '"args": [1.5,'))


def test_automata_built_whole_cut_recursion_at_the_knot() -> None:
    """Intersections and differences build knots as nothing: recursion stops where widths
    stop changing (eight levels of values with the default indentation), a subset of the
    values, never more."""
    whole = compile_schema_dfa(TREE, SchemaOptions(), lazy=False)
    found = [whole.matches(json.dumps(_tree(levels))) for levels in range(8)]
    assert found[:4] == [True] * 4 and not found[-1]
    assert found == sorted(found, reverse=True)


def test_a_definition_met_again_is_held_as_one_share_per_use() -> None:
    big = {"type": "object", "additionalProperties": False, "properties": {
        f"field{i}": {"type": "string", "maxLength": i + 20} for i in range(12)}}
    schema = {"$defs": {"big": big}, "type": "object", "additionalProperties": False,
              "properties": {f"p{i}": {"$ref": "#/$defs/big"} for i in range(40)}}
    node = SchemaCompiler(schema, SchemaOptions()).compile()
    alone = SchemaCompiler(big, SchemaOptions()).compile()
    assert alone.nfa_states > 2_000 and node.nfa_states < 4 * alone.nfa_states  # not 40 copies
    assert node.whole_states > 30 * alone.nfa_states
    dfa = compile_schema_dfa(schema, SchemaOptions())
    value = {f"p{i}": {f"field{j}": "a" * (j + 20) for j in range(0, 12, 1 + i % 3)} for i in range(0, 40, 3)}
    jsonschema.validate(value, schema)
    assert dfa.matches(json.dumps(value))
    assert not dfa.matches(json.dumps(value).replace('"' + "a" * 20, '"' + "a" * 21, 1))


def test_a_recursion_without_finite_value_is_cut_instead() -> None:
    """A knot whose language is empty would let a text open a value it can never close: the
    compile falls back to recursion cut on each path, where the branch is empty."""
    endless = {"type": "object", "required": ["a"], "properties": {"a": {"$ref": "#/$defs/endless"}}}
    schema = {"$defs": {"endless": endless}, "anyOf": [{"type": "integer"}, {"$ref": "#/$defs/endless"}]}
    compiler = SchemaCompiler(schema, SchemaOptions())
    compiler.compile()
    assert not compiler._knots  # fell back
    dfa = compile_schema_dfa(schema, SchemaOptions())
    assert dfa.matches("12") and dfa.row(0)[ord("{")] < 0


def test_a_level_with_a_block_too_large_to_copy_is_cut_instead() -> None:
    long_text = MAX_LEVEL_BLOCK_STATES // 20 + 1  # a counted string body: 20 states per character
    schema = {"type": "object", "properties": {"note": {"type": "string", "maxLength": long_text},
                                               "next": {"$ref": "#"}}}
    compiler = SchemaCompiler(schema, SchemaOptions(max_recursion=2))
    compiler.compile()
    assert not compiler._knots
    dfa = compile_schema_dfa(schema, SchemaOptions(max_recursion=2))
    assert dfa.matches('{"next": {"next": {"note": "x"}}}')
    assert not dfa.matches('{"next": {"next": {"next": {}}}}')


def test_documents_with_dynamic_references_keep_the_cut() -> None:
    schema = {"$dynamicAnchor": "node", "type": "object",
              "properties": {"kids": {"type": "array", "items": {"$dynamicRef": "#node"}}}}
    compiler = SchemaCompiler(schema, SchemaOptions(max_recursion=2))
    compiler.compile()
    assert not compiler._knots


def test_levels_keep_their_blocks_alike_in_the_kernel_and_in_python() -> None:
    """A knot's level holds an embedded automaton (the tag: a counted string with a
    pattern); each expansion keeps it a block, so a state inside the tag many levels down
    still stands in that automaton (its masks shared with every other copy). Both subset
    constructions add the levels and their blocks alike."""
    node = SchemaCompiler(TREE, SchemaOptions()).compile()
    texts = [json.dumps(_tree(12)), json.dumps(_tree(6), indent=2), json.dumps({"tag": "a", "kids": []})]
    det = _same_levels_built(node, texts)
    assert det.added_nfa_states > 0
    tags = [(det.nesting(i), det.embedding(i)[0].dfa) for i in range(det.num_states) if det.embedding(i) is not None]
    shallowest = min(nesting for nesting, _ in tags)
    inside_deep_tags = {dfa for nesting, dfa in tags if nesting >= shallowest + 3}
    top_tag = {dfa for nesting, dfa in tags if nesting == shallowest}
    assert len(inside_deep_tags) == 1 and inside_deep_tags == top_tag  # the very automaton, not a copy


def test_a_knot_is_reached_and_its_level_set() -> None:
    node = SchemaCompiler(TREE, SchemaOptions()).compile()
    assert any(level.recursive and level.node is not None for level in levels_reached(node))


def test_an_automaton_built_whole_past_its_budget_is_refused_before_it_is_built() -> None:
    huge = repeat(literal("abc"), MAX_WHOLE_NFA_STATES // 2, MAX_WHOLE_NFA_STATES // 2)
    with pytest.raises(SchemaTooComplexError, match="MAX_WHOLE_NFA_STATES"):
        compile_node(huge)


def test_in_a_recursive_document_a_large_sub_value_is_a_share_at_its_first_use() -> None:
    """A knot's level is copied at each expansion: where a ``$ref`` can lead back to itself,
    large sub-values are placeholders even where they are met once, so levels stay small;
    elsewhere a sub-value met once stays in place."""
    big = {"type": "object", "properties": {f"f{i}": {"type": "string", "maxLength": 20} for i in range(10)}}
    plain = SchemaCompiler({"type": "object", "properties": {"a": big}}, SchemaOptions()).compile()
    recursive_schema = {"type": "object", "properties": {"a": big, "next": {"$ref": "#"}}}
    recursive = SchemaCompiler(recursive_schema, SchemaOptions()).compile()
    assert plain.nfa_states > 4_000 and recursive.nfa_states < plain.nfa_states // 4
    dfa = compile_schema_dfa(recursive_schema, SchemaOptions())
    value: dict[str, Any] = {"a": {"f3": "x" * 20}}
    for _ in range(25):
        value = {"a": {"f0": "y", "f9": ""}, "next": value}
    assert dfa.matches(json.dumps(value)) and not dfa.matches(json.dumps(value).replace("x" * 20, "x" * 21))


@pytest.mark.parametrize("bounds, shared", [({}, False), ({"minItems": 1}, False), ({"maxItems": 3}, True),
                                            ({"minItems": 2}, True)])
def test_a_large_array_item_is_a_share_only_where_it_is_copied(bounds: dict[str, int], shared: bool) -> None:
    """An unbounded list loops through one copy of its item (``separated``): a large item stays
    inline there (a share would only add level expansions while decoding); counted copies
    (``maxItems``, ``minItems`` 2 or more) each hold a share."""
    item = {"type": "object", "properties": {f"p{i}": {"type": "string", "enum": [f"v{i}-{j}" for j in range(8)]}
                                             for i in range(30)}}
    schema = {"type": "array", "items": item, **bounds}
    node = SchemaCompiler(schema, SchemaOptions()).compile()
    assert SchemaCompiler(item, SchemaOptions()).compile().nfa_states >= 500  # large enough to share
    assert bool(list(levels_reached(node))) == shared
    dfa = compile_schema_dfa(schema, SchemaOptions())
    one = json.dumps({"p0": "v0-1", "p29": "v29-7"})
    assert dfa.matches(f"[{one}, {one}]") and not dfa.matches(f"[{one},]")


def test_a_knotted_build_past_the_sub_value_budget_is_refused_without_a_second_build(monkeypatch) -> None:
    """Past ``MAX_SUB_VALUES`` with knots, a build with recursion cut (a sub-value per path, more
    expansions) would pass it too: refused at once, not built again (JSON Schema Store's
    web-types took 3.7 s to refuse, 1.9 s since)."""
    monkeypatch.setattr("enforcer.json_schema.MAX_SUB_VALUES", 10)  # past the knot (19 in all)
    compiler = SchemaCompiler(TREE, SchemaOptions())
    with pytest.raises(SchemaTooComplexError) as info:
        compiler.compile()
    assert info.value.budget == "MAX_SUB_VALUES=10"
    assert compiler._knots, "the build was not tried again without knots"


def _patterns_through_definitions(count: int) -> dict[str, Any]:
    """Objects of one key whose value, by the key's digits, is one of ``count`` definitions,
    each all of the pattern map and ``maxProperties``: the recursion runs through schemas the
    compiler makes (the conjunctions of the patterns a key matches), never through a schema
    of the document, and a key with two digits is under two definitions at once."""
    digits = [str(d) for d in range(count)]
    pattern_map = {"patternProperties": {d: {"$ref": f"#/$defs/d{d}"} for d in digits}}
    definitions = {f"d{d}": {"allOf": [{"$ref": "#/$defs/pp"}, {"maxProperties": 1}]} for d in digits}
    return {"$defs": {"pp": pattern_map, **definitions}, "type": "object",
            "allOf": [{"$ref": "#/$defs/pp"}, {"maxProperties": 1}]}


def test_a_recursion_through_made_schemas_meets_itself() -> None:
    """A schema the compiler makes again with the same content is the same sub-value, so a
    recursion through made schemas becomes a knot: three definitions build about a hundred
    sub-values (before, one per made schema and level: 25,000 and refused after 6 s), and the
    value nests as deep as the text."""
    schema = _patterns_through_definitions(3)
    compiler = SchemaCompiler(schema, SchemaOptions())
    compiler.compile()
    assert compiler._sub_values_built < 500
    dfa = compile_schema_dfa(schema, SchemaOptions())
    value: dict[str, Any] = {}
    for i in range(30):  # a key of two digits every fifth level (the validator follows both)
        value = {f"k{i % 3}{(i + 1) % 3}" if i % 5 == 0 else f"k{i % 3}": value}
    assert jsonschema.Draft202012Validator(schema).is_valid(value)
    assert dfa.matches(json.dumps(value))
    two_keys = json.dumps(value).replace('{}', '{"a0": {}, "b1": {}}', 1)
    assert not jsonschema.Draft202012Validator(schema).is_valid(json.loads(two_keys))
    assert not dfa.matches(two_keys)


def test_the_block_size_memo_keeps_its_nodes() -> None:
    """``largest_block``'s memo is keyed by node identity: each entry keeps its node, so that a
    node dropped by the compile (an abandoned attempt's) cannot hand its identity, and its size,
    to a node made later. The sizes are right: the largest embedded automaton of each part."""
    import gc

    from enforcer.automaton import Embedded, alt, seq
    from enforcer.knots import largest_block

    small, large = Embedded(compile_node(literal("ab"))), Embedded(compile_node(repeat(literal("xyz"), 0, 5)))
    memo: dict = {}
    assert largest_block(seq(literal("q"), alt(small, seq(large, literal("z")))), memo) == large.dfa.num_states
    assert largest_block(seq(small, literal("r")), memo) == small.dfa.num_states
    gc.collect()
    assert memo and all(id(node) == key for key, (node, _) in memo.items())
