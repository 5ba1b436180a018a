"""Budgets of one compiled object (issue 14): an NFA too large is refused at compile time; a
lazy automaton that passes its budget while decoding empties the masks of the states it has not
reached and the matcher says why through ``error`` (nothing raises); the mask cache stops
keeping masks past its byte budget without changing any mask. Small budgets keep each test to
a few seconds."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from enforcer import SchemaTooComplexError, UnsupportedSchemaError, compile_json_schema
from enforcer import knots
from enforcer.automaton import (DFA, _NFA, Node, StructureKeys, byte_set, compile_node, eager_budget, eager_states_spent,
                               intersect_nodes, literal, nfa_size, repeat, seq)
from enforcer.json_schema import FALLBACK_SUB_VALUES, MAX_SUB_VALUES, SchemaCompiler, SchemaOptions
from enforcer.matcher import clear_cache, compile_schema_dfa
from enforcer.tools import compile_tools
from enforcer.vocabulary import Vocabulary

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


def nested_any_of(depth: int) -> dict[str, Any]:
    """The issue's blow-up: each level doubles the NFA (a shared sub-schema used twice)."""
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(depth):
        schema = {"anyOf": [{"type": "integer"}, {"type": "array", "items": schema, "maxItems": 2}]}
    return schema


def nested_distinct(depth: int) -> dict[str, Any]:
    """:func:`nested_any_of` with its two items written out as distinct sub-schemas: nothing
    is met again, so nothing is held as a share, and the NFA doubles per level."""
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(depth):
        schema = {"anyOf": [{"type": "integer"}, {"type": "array", "prefixItems": [schema, copy.deepcopy(schema)],
                                                  "items": False}]}
    return schema


def _schemas() -> list[Any]:
    found = [nested_any_of(6), {"type": "string", "maxLength": 40, "pattern": "^[a-z]+$"},
             {"type": "object", "properties": {"a": {"enum": ["x", "y"]}, "b": {"type": "number"}}}]
    for path in sorted(SCHEMAS.glob("*.json")):
        doc = json.loads(path.read_text())
        for tool in doc if isinstance(doc, list) else [doc]:
            found.append(tool.get("function", tool).get("parameters", tool))
    return found


@pytest.mark.parametrize("schema", _schemas())
def test_nfa_size_counts_exactly_the_states_the_nfa_builds(schema: Any) -> None:
    """Lazily built (placeholders) and whole (each placeholder's ``bounded`` in place)."""
    node = SchemaCompiler(schema, SchemaOptions()).compile()
    for deferred, expected in ((True, nfa_size(node)), (False, node.whole_states)):
        nfa = _NFA(deferred)
        start, end = nfa.new(), nfa.new()
        nfa.build(node, start, end)
        assert expected + 2 == nfa.num_states


def test_an_nfa_over_the_budget_is_refused_at_compile_time(kimi_vocab: Vocabulary) -> None:
    schema = nested_distinct(12)  # 687,093 NFA states: about 66 MiB at the build's peak
    with pytest.raises(SchemaTooComplexError, match="max_automaton_bytes"):
        compile_json_schema(schema, kimi_vocab, max_automaton_bytes=16 << 20)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": schema}, "required": ["x"]}}}]
    with pytest.raises(SchemaTooComplexError, match="max_automaton_bytes"):
        compile_tools(tools, kimi_vocab, max_automaton_bytes=16 << 20)
    # the default budget (512 MiB) takes it, and its first mask is a normal one
    matcher = compile_json_schema(schema, kimi_vocab).matcher()
    assert matcher.allowed_token_ids() and matcher.error is None


def _agrees(matcher: Any, vocab_size: int, rng: np.random.Generator) -> None:
    """``allowed_token_ids`` and ``accept_token`` agree on every allowed id (up to 64) and on 64
    random ids."""
    allowed = matcher.allowed_token_ids()
    probe = set(allowed[:64]) | set(rng.integers(0, vocab_size, 64).tolist())
    for token in sorted(probe):
        accepted = matcher.accept_token(token)
        assert accepted == (token in allowed), token
        if accepted:
            matcher.rollback(1)


def test_a_lazy_automaton_past_its_state_budget_sets_error_and_never_raises(kimi_vocab: Vocabulary) -> None:
    clear_cache()
    schema = {"type": "object", "properties": {"note": {"type": "string", "maxLength": 400}}, "required": ["note"]}
    text = json.dumps({"note": "the quick brown fox jumps over the lazy dog " * 6})
    tokens = kimi_vocab.encode_text(text)
    small = compile_json_schema(schema, kimi_vocab, max_states=1000).matcher()
    full = compile_json_schema(schema, kimi_vocab).matcher()
    words = (kimi_vocab.vocab_size + 31) // 32
    bitmask = np.zeros((1, words), dtype=np.int32)
    reference = np.zeros((1, words), dtype=np.int32)
    rng = np.random.default_rng(0)
    cut_at = None
    for step, token in enumerate(tokens):
        small.fill_bitmask(bitmask)  # never raises, before or after the budget
        full.fill_bitmask(reference)
        _agrees(small, kimi_vocab.vocab_size, rng)
        if not bitmask.any():
            cut_at = step
            break
        assert np.array_equal(bitmask, reference), f"step {step}: the budget changed a mask it let through"
        assert small.error is None
        assert small.accept_token(token) and full.accept_token(token)
    assert cut_at is not None and 10 < cut_at < len(tokens) - 5, cut_at
    assert "max_states" in small.error and "budget" in small.error
    assert small.allowed_token_ids() == [] and not small.accept_token(tokens[cut_at])
    small.rollback(1)  # rollback works as ever; the state before was not cut
    assert small.allowed_token_ids()


def test_the_mask_cache_stops_keeping_masks_past_its_byte_budget(kimi_vocab: Vocabulary) -> None:
    clear_cache()
    schema = json.loads((SCHEMAS / "small_nested.json").read_text())[1]["function"]["parameters"]
    budget = 3 * ((kimi_vocab.vocab_size + 31) // 32) * 4  # three packed masks
    bounded = compile_json_schema(schema, kimi_vocab, max_mask_bytes=budget)
    unbounded = compile_json_schema(schema, kimi_vocab)
    a, b = bounded.matcher(), unbounded.matcher()
    for _ in range(60):  # walk the first allowed token of each state (a valid prefix)
        mask = a.mask_words()
        assert np.array_equal(mask, b.mask_words())
        assert bounded.masks.memory_size_bytes() <= budget
        allowed = a.allowed_token_ids()
        if not allowed or a.is_accepting():
            break
        assert a.accept_token(allowed[0]) and b.accept_token(allowed[0])
    assert unbounded.masks.memory_size_bytes() > budget  # the walk needed more than the budget keeps


def test_a_k2_section_past_the_budget_ends_with_the_error(kimi_vocab: Vocabulary) -> None:
    clear_cache()
    tools = [{"type": "function", "function": {"name": "note", "parameters": {
        "type": "object", "properties": {"text": {"type": "string", "maxLength": 400}}, "required": ["text"]}}}]
    compiled = compile_tools(tools, kimi_vocab, tool_choice="required", max_states=1000)
    matcher = compiled.matcher()
    special = kimi_vocab.token_id
    ids = [special("<|tool_calls_section_begin|>"), special("<|tool_call_begin|>")]
    ids += kimi_vocab.encode_text("functions.note:0") + [special("<|tool_call_argument_begin|>")]
    ids += kimi_vocab.encode_text(json.dumps({"text": "lorem ipsum dolor sit amet " * 10}))
    bitmask = np.zeros((1, (kimi_vocab.vocab_size + 31) // 32), dtype=np.int32)
    rng = np.random.default_rng(1)
    for token in ids:
        matcher.fill_bitmask(bitmask)
        _agrees(matcher, kimi_vocab.vocab_size, rng)
        if not bitmask.any():
            break
        assert matcher.error is None and matcher.accept_token(token)
    else:
        pytest.fail("the budget of 1,000 states was never reached")
    assert "max_states" in matcher.error


def test_an_eager_product_past_max_states_names_the_sub_schema_keyword_and_budget() -> None:
    """A pattern times a counted maxLength is built whole at compile time: past ``max_states``
    the refusal names where and which limit (it said "(root)" and no budget before)."""
    schema = {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^[a-z]*x[a-z]{12}$", "maxLength": 60}}}
    with pytest.raises(SchemaTooComplexError) as caught:
        SchemaCompiler(schema, SchemaOptions(max_states=500)).compile()
    assert (caught.value.pointer, caught.value.keyword, caught.value.budget) == \
        ("/properties/code", "pattern", "max_states=500")
    conjunction = {"allOf": [{"type": "string", "pattern": "^[a-z]*x[a-z]{12}$"},
                             {"type": "string", "pattern": "^[a-z]*y[a-z]{12}$"}]}
    with pytest.raises(SchemaTooComplexError) as caught:
        SchemaCompiler({"type": "array", "items": conjunction}, SchemaOptions(max_states=500)).compile()
    assert (caught.value.pointer, caught.value.keyword, caught.value.budget) == ("/items", "allOf", "max_states=500")


@pytest.fixture
def products(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The (states, states) of every ``DFA.intersect`` made while the test runs."""
    made: list[tuple[int, int]] = []
    original = DFA.intersect

    def counting(self: DFA, other: DFA, max_states: int = 200_000) -> DFA:
        made.append((self.num_states, other.num_states))
        return original(self, other, max_states)

    monkeypatch.setattr(DFA, "intersect", counting)
    return made


def test_one_pattern_and_length_product_is_built_once_per_compile(products: list) -> None:
    """The same pattern and bounds in several places share one eager product (each of 166,000
    states took 0.8 s in Github_hard o62065)."""
    code = {"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$", "maxLength": 20}  # not one class counted
    schema = {"type": "object", "properties": {"a": code, "b": {"type": "array", "items": dict(code)},
                                               "c": {**code, "maxLength": 21}}}
    SchemaCompiler(schema, SchemaOptions()).compile()
    assert len(products) == 2  # maxLength 20 once (a and b's items), 21 once


def test_a_string_failing_a_negated_pattern_is_built_once_per_compile_and_per_pattern(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A string beside ``not: {pattern}`` met again (another depth, another ``$ref`` path: an
    ``if`` on a pattern has its difference as ``else``, 459 times in Github_hard o3895) reuses
    the difference; another negated pattern beside the same string keywords gets its own."""
    built: list[str] = []
    original = SchemaCompiler._failing_content

    def counting(self: SchemaCompiler, negated: dict, pointer: str, raw: bool) -> Any:
        built.append(negated["pattern"])
        return original(self, negated, pointer, raw)

    monkeypatch.setattr(SchemaCompiler, "_failing_content", counting)
    name = {"type": "string", "not": {"pattern": "^tmp"}}
    schema = {"$defs": {"name": name}, "type": "object", "properties": {
        "a": {"$ref": "#/$defs/name"}, "b": {"type": "array", "items": {"$ref": "#/$defs/name"}},
        "c": {"type": "string", "not": {"pattern": "^old"}}}}
    dfa = compile_schema_dfa(schema, SchemaOptions())
    assert sorted(built) == ["^old", "^tmp"]
    assert dfa.matches('{"a": "old", "b": ["old", "x"], "c": "tmp"}')
    assert not dfa.matches('{"a": "tmp1"}') and not dfa.matches('{"b": ["tmp"]}')
    assert not dfa.matches('{"c": "old1"}')


def test_unmerged_scalar_parts_are_intersected_once_per_compile(products: list) -> None:
    """``allOf`` parts that cannot merge (two patterns) are intersected whole: once per compile
    for the same parts at the same depth, whatever ``$ref`` path reaches them; other parts get
    their own intersection."""
    both = {"allOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "z$"}]}
    other = {"allOf": [{"type": "string", "pattern": "^b"}, {"type": "string", "pattern": "z$"}]}
    schema = {"$defs": {"both": both, "via": {"$ref": "#/$defs/both"}}, "type": "object", "properties": {
        "x": {"$ref": "#/$defs/both"}, "y": {"$ref": "#/$defs/via"}, "z": other}}
    dfa = compile_schema_dfa(schema, SchemaOptions())
    assert len(products) == 2
    assert dfa.matches('{"x": "abz", "y": "az", "z": "bz"}')
    assert not dfa.matches('{"x": "bz"}') and not dfa.matches('{"y": "ab"}') and not dfa.matches('{"z": "az"}')


def test_exclusive_conditions_of_one_allof_are_worked_out_once_per_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``allOf`` of tagged conditionals met again (another depth, another ``$ref`` path:
    JSON Schema Store's yippee-ki asked 171 times for 22 of them) has its exclusive conditions
    worked out once; another ``allOf`` gets its own, and each still constrains its values."""
    asked: list[int] = []
    original = SchemaCompiler._exclusive_conditions

    def counting(self: SchemaCompiler, rest: dict, parts: list, pointer: str) -> Any:
        asked.append(len(parts))
        return original(self, rest, parts, pointer)

    monkeypatch.setattr(SchemaCompiler, "_exclusive_conditions", counting)

    def tagged(tags: list[str]) -> dict:
        return {"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"], "allOf": [
            {"if": {"properties": {"kind": {"const": tag}}},
             "then": {"properties": {"n": {"type": "integer"}}, "required": ["n"]}} for tag in tags]}

    schema = {"$defs": {"step": tagged(["a", "b"])}, "type": "object", "properties": {
        "first": {"$ref": "#/$defs/step"}, "rest": {"type": "array", "items": {"$ref": "#/$defs/step"}},
        "other": tagged(["c", "d", "e"])}}
    dfa = compile_schema_dfa(schema, SchemaOptions(strict=False))
    assert sorted(asked) == [2, 3]
    assert dfa.matches('{"first": {"kind": "a", "n": 1}, "rest": [{"kind": "z"}], "other": {"kind": "c", "n": 2}}')
    assert not dfa.matches('{"rest": [{"kind": "b"}]}') and not dfa.matches('{"other": {"kind": "e", "n": "x"}}')


def test_a_value_compiled_again_with_recursion_cut_earlier_keeps_the_nodes_no_cut_changes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Recursion cut on each path (``knots=False``, as with ``$dynamicRef``; see test_knots).
    Over ``max_nfa_states`` with recursion expanded three times, the value is compiled again
    with two: sub-values whose ``$ref``s were all expanded fewer times are not built again
    (Kubernetes kb_1161 built 46,000 of them twice), and the result is the node a compile with
    ``max_recursion=2`` builds."""
    big = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(6)}}
    tree = {"type": "object", "properties": {"tag": {"type": "string"},
                                             "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}}}}
    schema = {"$defs": {"big": big, "tree": tree}, "type": "object",
              "properties": {"meta": {"$ref": "#/$defs/big"}, "tree": {"$ref": "#/$defs/tree"}}}
    built: list[int] = []
    original = SchemaCompiler._value

    def counting(self: SchemaCompiler, sub: Any, pointer: str, depth: int, refs: Any) -> Any:
        built.append(id(sub))
        return original(self, sub, pointer, depth, refs)

    monkeypatch.setattr(SchemaCompiler, "_value", counting)
    options = SchemaOptions(max_nfa_states=1_000)  # three expansions: 1,057 NFA states; two: 783
    compiler = SchemaCompiler(schema, options, knots=False)
    node = compiler.compile()
    assert compiler.max_recursion == 2
    leaf, recursive_leaf = id(big["properties"]["p0"]), id(tree["properties"]["tag"])
    assert built.count(leaf) == 1
    assert built.count(recursive_leaf) == 3  # one per expansion of the first attempt, none again
    monkeypatch.setattr(SchemaCompiler, "_value", original)
    direct = SchemaCompiler(schema, SchemaOptions(max_nfa_states=1_000, max_recursion=2), knots=False).compile()
    assert nfa_size(node) == nfa_size(direct) == 783
    assert compile_node(node).content_key == compile_node(direct).content_key


def _attempts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int | None]]:
    """The recursion cut of each attempt at the outermost value, and the eager states spent
    when it began."""
    seen: list[tuple[int, int | None]] = []
    original = SchemaCompiler._sub_value

    def counting(self: SchemaCompiler, sub: Any, pointer: str, depth: int, refs: Any) -> Any:
        if self._nesting == 0:
            seen.append((self.max_recursion, eager_states_spent()))
        return original(self, sub, pointer, depth, refs)

    monkeypatch.setattr(SchemaCompiler, "_sub_value", counting)
    return seen


_TREE = {"type": "object", "properties": {"tag": {"type": "string"}, "f": {},
                                          "kids": {"type": "array", "items": {"$ref": "#"}}}}
"""NFA states by recursion cut: 598 at 2, 945 at 3, 1,340 at 4."""


def test_a_value_over_budget_at_the_earliest_cut_is_refused_after_two_attempts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Over budget with recursion expanded four times: the fallbacks would try three, then two
    expansions; the second attempt is the earliest cut, over budget too, so the value is
    refused there, as the last fallback would have refused it."""
    seen = _attempts(monkeypatch)
    with pytest.raises(SchemaTooComplexError, match="max_nfa_states"):
        SchemaCompiler(_TREE, SchemaOptions(max_recursion=4, max_nfa_states=500), knots=False).compile()
    assert [cut for cut, _ in seen] == [4, 2]


def test_a_value_that_fits_at_the_earliest_cut_takes_the_latest_cut_that_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The earliest cut fits: the fallbacks go on from the first attempt, and the value is the
    one the first cut that fits builds (three expansions, not two)."""
    seen = _attempts(monkeypatch)
    probed = SchemaCompiler(_TREE, SchemaOptions(max_recursion=4, max_nfa_states=1_200), knots=False).compile()
    assert [cut for cut, _ in seen] == [4, 2, 3]
    direct = SchemaCompiler(_TREE, SchemaOptions(max_recursion=3), knots=False).compile()
    assert nfa_size(probed) == nfa_size(direct) == 945
    assert compile_node(probed).content_key == compile_node(direct).content_key


def test_a_value_over_budget_without_recursion_is_refused_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``$ref`` expanded twice: cutting recursion earlier cannot shrink the value, so there
    is no second attempt."""
    seen = _attempts(monkeypatch)
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string", "maxLength": 5} for i in range(40)}}
    with pytest.raises(SchemaTooComplexError, match="max_nfa_states"):
        SchemaCompiler(schema, SchemaOptions(max_nfa_states=500)).compile()
    assert [cut for cut, _ in seen] == [3]


def test_each_fallback_attempt_has_the_whole_eager_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """An attempt abandoned over ``max_nfa_states`` does not spend the eager budget of the
    next: each attempt begins with what the compile had spent before the first (the
    intersection below costs 2,957 states in every tree node an attempt builds again)."""
    seen = _attempts(monkeypatch)
    both = {"allOf": [{"type": "string", "pattern": "^[a-z]{1,30}$"}, {"type": "string", "pattern": "^.{0,20}x"}]}
    numbers = {f"n{i}": {"type": "number"} for i in range(8)}  # a budget size of 1,832 at two expansions, 2,702 at three
    tree = {"type": "object", "properties": {"p": both, **numbers, "kids": {"type": "array", "items": {"$ref": "#"}}}}
    node = SchemaCompiler(tree, SchemaOptions(max_nfa_states=2_200, max_eager_states=40_000), knots=False).compile()
    assert [cut for cut, _ in seen] == [3, 2]
    assert seen[0][1] is not None and seen[1][1] == seen[0][1]
    direct = SchemaCompiler(tree, SchemaOptions(max_recursion=2), knots=False).compile()
    assert compile_node(node).content_key == compile_node(direct).content_key


def _wide_object(names: list[str], **extra: Any) -> dict[str, Any]:
    """An object of string properties with 60 possible values each, then ``late``, whose
    pattern (a backreference) is refused when that member is built."""
    choice = {"enum": [f"value-{i:03d}-{'x' * 20}" for i in range(60)]}
    late = {"type": "string", "pattern": "(a)\\1"}
    return {"type": "object", "properties": {**{n: choice for n in names}, "late": late}, **extra}


def _member_nodes_of_budget(names: list[str], budget: int) -> None:
    SchemaCompiler(_wide_object(names), SchemaOptions(max_nfa_states=budget)).compile()


def test_an_object_whose_members_pass_the_budget_is_refused_before_the_rest_is_built() -> None:
    """Each member's automaton is part of its object's: once the members built so far pass
    ``max_nfa_states`` the object is refused there, naming it, its count a lower bound, and the
    later members are never built (the unsupported one at the end would otherwise be met
    first: Kubernetes kb_1161 built 98,000 sub-values, 5.7 s, before this, 1.2 s after)."""
    one_member = nfa_size(SchemaCompiler(_wide_object(["a"])["properties"]["a"], SchemaOptions()).compile())
    budget = int(2.5 * one_member)
    with pytest.raises(SchemaTooComplexError, match=r"^schema too complex at \(root\): its automaton needs at least"):
        _member_nodes_of_budget(["a", "b", "c"], budget)
    with pytest.raises(UnsupportedSchemaError, match="backreference"):  # under budget: the late member is met
        _member_nodes_of_budget(["a", "b"], budget)


@pytest.mark.parametrize("extra", [{"minProperties": 1}, {"maxProperties": 3},
                                   {"dependentRequired": {"a": ["b"], "c": ["b"]}}])
def test_members_a_count_or_dependency_may_cut_are_not_summed(extra: dict[str, Any]) -> None:
    """Where a property count or a dependency may leave a member out of the object's automaton
    (trimmed as a dead end), the members are not summed: the object is built whole and only its
    own size decides (here the unsupported member is met first)."""
    one_member = nfa_size(SchemaCompiler(_wide_object(["a"])["properties"]["a"], SchemaOptions()).compile())
    with pytest.raises(UnsupportedSchemaError, match="backreference"):
        SchemaCompiler(_wide_object(["a", "b", "c"], **extra), SchemaOptions(max_nfa_states=int(2.5 * one_member))).compile()


def _word(maximum: int) -> Node:
    """A fresh expression object each call: ``"`` then 1..maximum letters then ``"``."""
    return seq(literal('"'), repeat(byte_set([(ord("a"), ord("z"))]), 1, maximum), literal('"'))


def test_an_expression_built_again_in_one_compile_is_the_automaton_built_before() -> None:
    """Inside one eager budget, an expression built again (a fresh but equal node, or a share
    of it) is the automaton built the first time, and spends no states; another expression is
    built and spends its own. This fails where every build starts over (Prometheus' config
    built one 141,206-state automaton eight times)."""
    with eager_budget(10_000) as budget:
        first = compile_node(_word(20))
        spent = budget.used
        assert spent > 0
        assert compile_node(_word(20)) is first
        assert compile_node(knots.share(_word(20))) is first  # built whole, a share is its node
        assert budget.used == spent
        other = compile_node(_word(21))
        assert other is not first and budget.used > spent
        both = intersect_nodes(_word(20), _word(21))
        spent = budget.used
        assert intersect_nodes(_word(20), _word(21)) is both and budget.used == spent
    with eager_budget(10_000):  # another compile builds again
        assert compile_node(_word(20)) is not first
    assert compile_node(_word(20)) is not compile_node(_word(20))  # outside a compile: nothing kept


def test_a_product_built_again_in_one_compile_spends_nothing() -> None:
    """The same two automata multiplied again (same operation) are the product built before."""
    with eager_budget(10_000) as budget:
        a, b = compile_node(_word(20)), compile_node(_word(30))
        spent = budget.used
        product = a.intersect(b)
        assert budget.used > spent
        spent = budget.used
        assert a.intersect(b) is product and a.difference(b) is not product
        assert budget.used > spent  # the difference is another product
        spent = budget.used
        assert a.difference(b) is a.difference(b) and budget.used == spent


@pytest.mark.parametrize("left, right", [
    (lambda: repeat(literal("a"), 0, 3), lambda: repeat(literal("a"), 0, 4)),
    (lambda: repeat(literal("a"), 1, None), lambda: repeat(literal("a"), 0, None)),
    (lambda: seq(literal("a"), literal("b")), lambda: seq(literal("b"), literal("a"))),
    (lambda: literal("ab"), lambda: literal("ac")),
])
def test_structure_keys_tell_different_expressions_apart(left: Any, right: Any) -> None:
    keys = StructureKeys()
    assert keys.key(left()) == keys.key(left())
    assert keys.key(left()) != keys.key(right())
    assert keys.key(knots.share(left())) == keys.key(left())


def test_a_whole_build_stops_where_the_eager_budget_runs_out() -> None:
    """A subset construction or a product that the eager budget cannot afford stops there and
    names ``max_eager_states``, even when it would also pass ``max_states`` (it used to be built
    up to ``max_states`` first); nothing is spent on it. Within the budget, the same builds
    succeed and spend their states."""
    wide = repeat(byte_set([(97, 122)]), 0, 400)  # 401 states: more than either budget below allows
    with eager_budget(100) as budget:
        with pytest.raises(SchemaTooComplexError) as caught:
            compile_node(wide, 300)
        assert caught.value.budget == "max_eager_states=100" and budget.used == 0
    first = compile_node(seq(repeat(byte_set([(97, 122)]), 0, 60), literal("x")))
    second = compile_node(seq(literal("a"), repeat(byte_set([(97, 122)]), 0, 60), literal("x")))
    with eager_budget(20) as budget:
        with pytest.raises(SchemaTooComplexError) as caught:
            first.intersect(second, 40)
        assert caught.value.budget == "max_eager_states=20" and budget.used == 0
    with eager_budget(10_000) as budget:
        assert compile_node(wide, 500).num_states == 401 and budget.used >= 401
        assert not first.intersect(second).is_empty


def test_a_knotted_attempt_that_spent_the_eager_budget_leaves_its_fallback_half(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """When the attempt with knots is refused on ``max_eager_states``, the fallback with
    recursion cut begins with half the budget left, not the whole of it: a refusal builds at
    most 1.5 budgets of automata whole (the intersection here costs 2,957 states: over a
    budget of 2,000 in both attempts). Its sub-values are counted on from the first attempt's
    (``MAX_SUB_VALUES`` bounds the compile, not each attempt), up to half of what that attempt
    left (here below ``FALLBACK_SUB_VALUES`` more, set high), and ``FALLBACK_SUB_VALUES`` more at
    most (its default, lower here)."""
    for cap in (10**9, FALLBACK_SUB_VALUES):
        monkeypatch.setattr("enforcer.json_schema.FALLBACK_SUB_VALUES", cap)
        built, limit = _fallback_after_eager_refusal(monkeypatch)
        assert limit == min(built + cap, MAX_SUB_VALUES - (MAX_SUB_VALUES - built) // 2)
        assert limit == (MAX_SUB_VALUES - (MAX_SUB_VALUES - built) // 2 if cap > MAX_SUB_VALUES else built + cap)


def _fallback_after_eager_refusal(monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(sub-values built, sub-value limit) at the start of the fallback of a knotted attempt
    refused on ``max_eager_states``."""
    seen: list[tuple[bool, int | None, int, int]] = []
    original = SchemaCompiler._attempts

    def recording(self: SchemaCompiler, *args: Any) -> Any:
        seen.append((self._knots, eager_states_spent(), self._sub_values_built, self._sub_values_limit))
        return original(self, *args)

    monkeypatch.setattr(SchemaCompiler, "_attempts", recording)
    both = {"allOf": [{"type": "string", "pattern": "^[a-z]{1,30}$"}, {"type": "string", "pattern": "^.{0,20}x"}]}
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}, "p": both}}
    with pytest.raises(SchemaTooComplexError, match="max_eager_states=2000"):
        SchemaCompiler(tree, SchemaOptions(max_eager_states=2_000)).compile()
    assert [(knotted, spent) for knotted, spent, _, _ in seen] == [(True, 0), (False, 1_000)]
    (_, _, first_built, first_limit), (_, _, built, limit) = seen
    assert first_built == 0 and first_limit == MAX_SUB_VALUES and built > 0
    return built, limit


def test_the_fallback_after_any_knotted_refusal_builds_a_bounded_share_of_sub_values(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A knotted attempt whose knots cannot be used (definitions that require one another, as
    in jsonschemabench's Github o74424) leaves its fallback ``FALLBACK_SUB_VALUES`` more
    sub-values, not the rest of ``MAX_SUB_VALUES``: with the default the fallback compiles (it
    needs a few), with 3 it is refused, and the refusal says it was the fallback's share."""
    def node(*refs: str) -> dict[str, Any]:
        return {"type": "object", "properties": {f"p{i}": {"$ref": f"#/$defs/{r}"} for i, r in enumerate(refs)},
                "required": [f"p{i}" for i in range(len(refs))], "additionalProperties": False}

    schema = {"$defs": {"a": node("a", "a", "b", "c"), "b": {**node("c"), "properties": {
        "n": {"type": "number"}, "p0": {"$ref": "#/$defs/c"}}}, "c": node("b", "a")},
        "properties": {"a": {"$ref": "#/$defs/a"}, "b": {"$ref": "#/$defs/b"}, "c": {"$ref": "#/$defs/c"}}}
    limits: list[tuple[bool, int, int]] = []
    original = SchemaCompiler._attempts

    def recording(self: SchemaCompiler, *args: Any) -> Any:
        limits.append((self._knots, self._sub_values_built, self._sub_values_limit))
        return original(self, *args)

    monkeypatch.setattr(SchemaCompiler, "_attempts", recording)
    SchemaCompiler(schema, SchemaOptions()).compile()
    assert [knotted for knotted, _, _ in limits] == [True, False], limits
    (_, _, first_limit), (_, built, limit) = limits
    assert first_limit == MAX_SUB_VALUES and limit == built + FALLBACK_SUB_VALUES
    monkeypatch.setattr("enforcer.json_schema.FALLBACK_SUB_VALUES", 3)
    with pytest.raises(SchemaTooComplexError) as info:
        SchemaCompiler(schema, SchemaOptions()).compile()
    assert "the fallback after a knotted attempt" in str(info.value)
    assert info.value.budget == f"MAX_SUB_VALUES={MAX_SUB_VALUES}"
