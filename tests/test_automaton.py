"""Byte-level expressions and DFAs: construction, trimming, minimisation, products."""

import itertools
import random

import numpy as np
import pytest

from enforcer.errors import SchemaTooComplexError

from enforcer.automaton import (ANY_CODEPOINT, EPSILON, NOTHING, Embedded, Graph, LazyDFA, _Determiniser, alt, byte_chars,
                                codepoints, compile_node, literal, optional, plus, repeat, separated, seq, sorted_distinct,
                                star)


def test_literal_concat_star():
    dfa = compile_node(seq(literal("ab"), star(byte_chars(b"xy")), literal("c")))
    assert dfa.matches("abc") and dfa.matches("abxyyxc")
    assert not dfa.matches("ab") and not dfa.matches("abzc") and not dfa.matches("abcc")


def test_every_live_state_can_accept():
    # the branch "ax" can never finish: it must not survive as a dead end
    dfa = compile_node(alt(seq(literal("ab"), NOTHING), literal("ac")))
    assert dfa.walk(0, b"ab") == -1
    assert dfa.matches("ac")


@pytest.mark.parametrize("text", ["", "héllo", "中文", "😀", "\x7f", "\U0010ffff", "\ud7ff"])
def test_utf8_accepts_valid(text):
    assert compile_node(star(ANY_CODEPOINT)).matches(text.encode("utf-8"))


@pytest.mark.parametrize("data", [b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\xff",
                                  b"\xe0\x80\x80", b"\x80"])
def test_utf8_rejects_invalid(data):
    assert not compile_node(star(ANY_CODEPOINT)).matches(data)


def test_codepoint_ranges_exact():
    rng = random.Random(0)
    ranges = [(0x41, 0x5A), (0x4E00, 0x4E10), (0x1F600, 0x1F64F), (0x7FF, 0x801)]
    dfa = compile_node(codepoints(ranges))
    for _ in range(3000):
        cp = rng.choice([rng.randint(0, 0x10FFFF), rng.randint(0x4DF0, 0x4E20), rng.randint(0x7F0, 0x810),
                         rng.randint(0x1F5F0, 0x1F660)])
        if 0xD800 <= cp <= 0xDFFF:
            continue
        inside = any(lo <= cp <= hi for lo, hi in ranges)
        assert dfa.matches(chr(cp).encode("utf-8")) == inside, hex(cp)


def test_repeat_bounds_and_separated():
    dfa = compile_node(repeat(literal("a"), 2, 4))
    assert [dfa.matches("a" * n) for n in range(6)] == [False, False, True, True, True, False]
    sep = compile_node(separated(literal("x"), literal(","), 1, 3))
    assert sep.matches("x") and sep.matches("x,x,x") and not sep.matches("x,x,x,x") and not sep.matches("")


@pytest.mark.parametrize("minimum", [0, 1, 2, 3])
def test_separated_without_maximum_is_exact(minimum):
    """Every string of up to 6 symbols over the item, the separator and a stray byte."""
    dfa = compile_node(separated(alt(literal("x"), literal("yy")), literal(","), minimum))
    items = {"", "x", "yy"}
    for n in range(7):
        for chars in itertools.product("xy,z", repeat=n):
            text = "".join(chars)
            parts = text.split(",")
            expected = all(p in items - {""} for p in parts) and len(parts) >= max(minimum, 1) if text else minimum == 0
            assert dfa.matches(text) == expected, text


def test_later_items_of_a_list_stand_in_the_first_items_states():
    """An unbounded list is one copy of its item that the separator leads back to: the second
    item reaches the very DFA states of the first (so their rows and masks are built once)."""
    item = seq(literal('{"a":'), alt(literal("1"), literal("22")), literal("}"))
    lazy = LazyDFA(seq(literal("["), separated(item, literal(","), 1), literal("]")))
    first, second = lazy.walk(0, b'[{"a":'), lazy.walk(0, b'[{"a":1},{"a":')
    assert first >= 0 and first == second
    assert lazy.matches(b'[{"a":1},{"a":22}]') and not lazy.matches(b'[{"a":1},]')


def test_graph_node():
    g = Graph(2, 0, frozenset({1}), ((0, literal("ab"), 1), (1, literal("c"), 1), (0, EPSILON, 1)))
    dfa = compile_node(g)
    assert dfa.matches("") and dfa.matches("abcc") and dfa.matches("cc") and not dfa.matches("a")


def test_a_graph_holds_its_edges_as_columns_the_collector_lets_go():
    """A graph built from (source, node, target) triples reads them back in order, and holds
    them as three columns: after a collection the two of ints are no longer tracked, so a
    collection walks one tuple per graph (its nodes), not one per edge (an object's members
    left thousands of edge triples for every collection in a decode to walk)."""
    import gc
    members = [seq(literal(f'"k{i}"'), literal(":"), literal("1")) for i in range(20)]
    edges = tuple(edge for i, m in enumerate(members) for edge in ((i, m, i + 1), (i, EPSILON, i + 1)))
    graph = Graph(21, 0, frozenset({20}), edges)
    assert tuple(graph.edges) == edges and graph.bodies == tuple(m for _, m, _ in edges)
    gc.collect()
    assert not gc.is_tracked(graph.sources) and not gc.is_tracked(graph.targets)
    assert Graph(1, 0, frozenset({0}), ()).trim and not tuple(Graph(1, 0, frozenset({0}), ()).edges)


def test_graph_trimmed_drops_dead_states_only():
    # states 2 and 3 reach no accepting state (3 only through NOTHING): trimmed keeps the
    # language, renumbers the live states, and is trim; a dead start is NOTHING
    g = Graph(5, 0, frozenset({4}), ((0, literal("a"), 1), (1, literal("b"), 4), (0, literal("c"), 2),
                                     (1, EPSILON, 3), (3, NOTHING, 4), (4, literal("d"), 4)))
    assert not g.trim
    t = g.trimmed()
    assert t.trim and t.num_states == 3 and len(t.bodies) == 3
    for text in ("ab", "abd", "abdd", "c", "a", "acb", ""):
        assert compile_node(t).matches(text) == compile_node(g).matches(text), text
    assert Graph(2, 0, frozenset({1}), ((1, literal("x"), 1),)).trimmed() is NOTHING
    assert t.trimmed() is t


def test_object_with_optional_members_builds_a_trim_nfa() -> None:
    # an object whose members are all optional leaves a member-graph state with nothing after
    # it (the empty object is another branch): trimmed, its NFA needs no liveness pass
    from enforcer.automaton import new_nfa
    from enforcer.json_schema import SchemaCompiler, SchemaOptions

    for schema in ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}},
                   {"type": "string", "pattern": "^(a|b)+c?$"},
                   {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}):
        node = SchemaCompiler(schema, SchemaOptions()).compile()
        nfa = new_nfa()
        nfa.build(node, nfa.new(), nfa.new())
        assert not nfa.may_dead_end, schema


def test_minimisation_merges_equivalent_states():
    dfa = compile_node(alt(literal("abc"), literal("xbc")))
    assert dfa.num_states == 4


def test_intersect_and_difference():
    a = compile_node(star(byte_chars(b"ab")))
    b = compile_node(repeat(byte_chars(b"abc"), 0, 2))
    both = a.intersect(b)
    assert both.matches("ab") and not both.matches("aba") and not both.matches("c")
    diff = a.difference(compile_node(literal("ab")))
    assert not diff.matches("ab") and diff.matches("aba") and diff.matches("")
    assert a.is_disjoint(compile_node(literal("c")))


def test_empty_language():
    assert compile_node(NOTHING).is_empty
    assert compile_node(seq(literal("a"), NOTHING)).is_empty
    assert not compile_node(optional(plus(literal("a")))).is_empty


def _random_node(rng: random.Random, depth: int = 0):
    """A small random expression over a few bytes and one multi-byte range (UTF-8 states)."""
    kind = rng.randrange(6 if depth < 3 else 2)
    if kind == 0:
        return literal(bytes(rng.choice(b"abc\"\\") for _ in range(rng.randint(1, 4))))
    if kind == 1:
        return codepoints([(0x20, 0x7E)] if rng.random() < 0.5 else [(0x61, 0x63), (0x400, 0x4FF)])
    if kind == 2:
        return alt(*(_random_node(rng, depth + 1) for _ in range(rng.randint(2, 3))))
    if kind == 3:
        return seq(*(_random_node(rng, depth + 1) for _ in range(rng.randint(2, 3))))
    if kind == 4:
        return repeat(_random_node(rng, depth + 1), 0, None)
    return repeat(_random_node(rng, depth + 1), rng.randint(0, 1), rng.randint(1, 3))


def test_seq_sums_the_derived_fields_of_the_flat_concatenation() -> None:
    """seq sums NFA states, block states, whole states and emptiness from its arguments (a
    Concat argument's from its own fields): the same as a Concat built over the same flattened
    parts, with embedded automata (block states), empty parts and nested Concats among them."""
    from enforcer.automaton import Concat

    rng = random.Random(11)
    embedded = Embedded(compile_node(literal("xy")))
    pool = [lambda: _random_node(rng), lambda: embedded, lambda: EPSILON, lambda: byte_chars(b""),
            lambda: seq(_random_node(rng), embedded)]
    checked = 0
    for _ in range(2000):
        node = seq(*(rng.choice(pool)() for _ in range(rng.randint(0, 4))))
        for _ in range(rng.randint(0, 2)):
            node = seq(rng.choice(pool)(), node, rng.choice(pool)())
        if isinstance(node, Concat):
            plain = Concat(node.parts)
            assert not any(isinstance(p, Concat) for p in node.parts)
            assert (node.nfa_states, node.block_states, node.whole_states, node.empty) == \
                (plain.nfa_states, plain.block_states, plain.whole_states, plain.empty)
            checked += 1
    assert checked > 500


def test_compiled_product_is_the_reference_product_state_for_state() -> None:
    # dfa_product (Cython) against the Python walk it replaces: same tables, same accepting
    # states, same refusal past max_states, for intersections and differences
    from enforcer.automaton import dfa_product

    if dfa_product is None:
        pytest.skip("the compiled kernels are not built")
    rng = random.Random(7)
    for _ in range(300):
        a, b = compile_node(_random_node(rng)), compile_node(_random_node(rng))
        if a.is_empty or b.is_empty:
            continue
        for keep_other_dead in (False, True):
            fast = a._product(b, keep_other_dead, 100_000)
            slow = a._product_reference(b, keep_other_dead, 100_000)
            assert np.array_equal(fast.transitions, slow.transitions)
            assert np.array_equal(fast.accepting, slow.accepting)
    big = compile_node(repeat(codepoints([(0x20, 0x10FFFF)]), 0, 40))
    words = compile_node(alt(*(literal("".join(rng.choice("abcdéfg") for _ in range(rng.randint(1, 12))))
                               for _ in range(400))))
    for other in (big, words):  # thousands of pairs: the kernel's table and hash both grow
        for keep_other_dead in (False, True):
            fast = big._product(other, keep_other_dead, 100_000)
            slow = big._product_reference(other, keep_other_dead, 100_000)
            assert fast.num_states > 64 or other is big
            assert np.array_equal(fast.transitions, slow.transitions)
            assert np.array_equal(fast.accepting, slow.accepting)
            # over joint classes, or spread and compacted: one compact form
            assert np.array_equal(fast.classes, slow.classes) and np.array_equal(fast.table, slow.table)
    for product in (big._product, big._product_reference):
        with pytest.raises(SchemaTooComplexError):
            product(big, False, 50)


def test_a_table_is_held_over_its_byte_classes_in_one_form() -> None:
    # random tables whose columns repeat: the compiled column classes against numpy's, each
    # byte's column numbered by first byte, the spread form the table given; and a table given
    # over a finer partition (16 runs of 16 bytes, columns repeating among them) ends in the same
    # compact form as the same table given byte by byte, whatever order its columns come in
    from enforcer.automaton import DFA, _column_classes_reference, column_classes

    rng = np.random.default_rng(11)
    runs = (np.arange(256) // 16).astype(np.uint8)
    for n in (0, 1, 3, 40, 300):
        for distinct in (1, 2, 7, 60, 256):
            columns = np.where(rng.random((n, distinct)) < 0.4, rng.integers(0, max(n, 1), (n, distinct)), -1)
            table = np.ascontiguousarray(columns[:, rng.integers(0, distinct, 256)], dtype=np.int32)
            dfa = DFA(table, np.zeros(n, dtype=bool))
            assert np.array_equal(dfa.transitions, table)
            k = dfa.table.shape[1]
            assert k == (len({table[:, b].tobytes() for b in range(256)}) if n else 1)
            assert dfa.table.nbytes == 4 * n * k
            _, first_byte = np.unique(dfa.classes, return_index=True)
            assert np.array_equal(first_byte, np.sort(first_byte)) and dfa.classes.max() == k - 1
            if column_classes is not None:
                every = np.arange(256, dtype=np.uint8)
                fast, slow = column_classes(table, every), _column_classes_reference(table, every)
                assert np.array_equal(fast[0], slow[0]) and np.array_equal(fast[1], slow[1])
            per_run = np.ascontiguousarray(columns[:, rng.integers(0, distinct, 16)], dtype=np.int32)
            finer = DFA(per_run, np.zeros(n, dtype=bool), runs)
            whole = DFA(np.ascontiguousarray(per_run[:, runs]), np.zeros(n, dtype=bool))
            assert np.array_equal(finer.table, whole.table) and np.array_equal(finer.classes, whole.classes)
            assert finer.content_key == whole.content_key
            order = rng.permutation(16)  # the same columns in another order, the classes renumbered to match
            shuffled = DFA(np.ascontiguousarray(per_run[:, order]), np.zeros(n, dtype=bool),
                           np.argsort(order).astype(np.uint8)[runs])
            assert np.array_equal(shuffled.table, whole.table) and np.array_equal(shuffled.classes, whole.classes)


def test_a_utf8_repeat_holds_a_few_columns_a_state_until_a_walk_spreads_it() -> None:
    # 40 code points of UTF-8: a dozen byte classes, so the table is about 50 bytes a state
    # instead of 1 KiB; the 256-entry form is made for the walks, once
    dfa = compile_node(repeat(codepoints([(0x20, 0x10FFFF)]), 0, 40))
    assert dfa.num_states > 100 and dfa.table.shape[1] <= 16
    assert dfa.memory_size_bytes() < dfa.num_states * 1024 / 16
    assert dfa.matches("é" * 40) and not dfa.matches("é" * 41)
    assert dfa.transitions is dfa.transitions and dfa.memory_size_bytes() > dfa.num_states * 1024


def _embedding_key(embedding) -> tuple | None:
    return None if embedding is None else (embedding[0].base, embedding[1], embedding[2].tobytes())


def _same_subsets(node, trim: bool, limit: int = 1_500) -> int:
    """Build ``node``'s subset construction with the kernel and in Python, row by row: same
    rows, same members, same accepting states, same embedded-block verdicts, same numbering.
    Returns the rows compared."""
    from enforcer.automaton import _Determiniser

    fast, slow = _Determiniser(node, trim, compiled=True), _Determiniser(node, trim, compiled=False)
    assert fast._kernel is not None and slow._kernel is None
    a, b = np.empty(256, dtype=np.int32), np.empty(256, dtype=np.int32)
    i = 0
    while i < fast.num_states and i < limit:
        fast.row_into(i, a, None)
        slow.row_into(i, b, None)
        assert np.array_equal(a, b), f"row {i}"
        assert fast.num_states == slow.num_states and list(fast.members(i)) == list(slow.members(i))
        assert _embedding_key(fast.embedding(i)) == _embedding_key(slow.embedding(i)), f"embedding of {i}"
        i += 1
    assert fast.accepting == slow.accepting
    return i


def test_compiled_subset_construction_is_the_reference_state_for_state() -> None:
    # SubsetConstruction (Cython) against the Python rows it replaces, on random expressions,
    # expressions with embedded DFAs (blocks), JSON values of the project's schemas, trimmed
    # or not, and the refusal past max_states
    import json
    from pathlib import Path

    from enforcer.automaton import SubsetConstruction, Embedded, _Determiniser, subset_table
    from enforcer.json_schema import SchemaOptions
    from enforcer.matcher import schema_node

    if SubsetConstruction is None:
        pytest.skip("the compiled kernels are not built")
    rng = random.Random(11)
    for _ in range(300):
        _same_subsets(_random_node(rng), trim=rng.random() < 0.5)
    counted = compile_node(repeat(codepoints([(0x20, 0x10FFFF)]), 0, 40))
    for _ in range(50):
        node = alt(seq(_random_node(rng), Embedded(counted), _random_node(rng)), seq(Embedded(counted), NOTHING))
        _same_subsets(node, trim=True)
    rows = 0
    for path in sorted((Path(__file__).resolve().parents[1] / "schemas").glob("*.json")):
        for tool in json.loads(path.read_text(encoding="utf-8")):
            node = schema_node(tool["function"]["parameters"], SchemaOptions())
            rows += _same_subsets(node, trim=True) + _same_subsets(node, trim=False)
    assert rows > 1_000
    # a counted block of 10,000 characters, numbered after the other states, walked 1,500 rows deep
    deep = schema_node({"type": "object", "properties": {"s": {"type": "string", "maxLength": 10_000}}},
                       SchemaOptions())
    assert _same_subsets(deep, trim=True) == 1_500
    for compiled in (True, False):
        with pytest.raises(SchemaTooComplexError):
            subset_table(_Determiniser(repeat(codepoints([(0x20, 0x10FFFF)]), 0, 40), False, compiled), 50)


def test_compiled_subset_table_is_the_reference() -> None:
    """The whole eager table in one compiled call (what every eager automaton and format
    automaton is built from) against the Python construction row by row: same table, same
    accepting states, on random expressions and a UTF-8 repeat of 30; the same refusal past
    ``max_states`` (an off-by-one in the count or a missed row changes these)."""
    from enforcer.automaton import SubsetConstruction, _Determiniser, subset_table

    if SubsetConstruction is None:
        pytest.skip("the compiled kernels are not built")
    rng = random.Random(5)
    nodes = [_random_node(rng) for _ in range(200)] + [repeat(alt(literal("ab"), codepoints([(0x20, 0x10FFFF)])), 0, 30)]
    # rows after the first split its ranges (a-z, then m and q, then every letter): the rows
    # already kept narrow are widened in place
    nodes.append(seq(codepoints([(0x61, 0x7A)]), alt(literal("m"), literal("q")),
                     alt(*(literal(chr(c) * 2) for c in range(0x61, 0x7B)))))
    for node in nodes:
        fast, slow = _Determiniser(node, False, compiled=True), _Determiniser(node, False, compiled=False)
        assert np.array_equal(subset_table(fast, None).spread(), subset_table(slow, None).spread())
        assert fast.accepting == slow.accepting
    for limit in (1, 2, 40, 41):
        node = repeat(codepoints([(0x61, 0x7A)]), 0, 40)  # 41 states
        outcomes = []
        for compiled in (True, False):
            try:
                outcomes.append(subset_table(_Determiniser(node, False, compiled), limit).table.shape[0])
            except SchemaTooComplexError:
                outcomes.append(None)
        assert outcomes[0] == outcomes[1] == (41 if limit >= 41 else None)


def test_compiled_reaching_is_the_reference() -> None:
    # the trim's reverse reachability (Cython) against the numpy breadth-first pass, on random
    # graphs from sparse to dense, with self-loops, parallel edges and unreachable parts
    from enforcer.automaton import _reaching_reference, reaching

    if reaching is None:
        pytest.skip("the compiled kernels are not built")
    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 40, 300, 5_000):
        for density in (0.5, 1.0, 3.0):
            m = int(n * density)
            sources = rng.integers(0, n, size=m).astype(np.int32)
            targets = rng.integers(0, n, size=m).astype(np.int32)
            end = int(rng.integers(0, n))
            fast = reaching(n, sources, targets, end).view(bool)
            assert np.array_equal(fast, _reaching_reference(n, sources, targets, end))
            assert fast[end]


def test_compiled_nfa_csr_is_the_reference() -> None:
    # the NFA's edges grouped by source (Cython counting sort) against numpy's stable sort, with
    # and without the trim's dropped targets, on random edge lists (empty groups, repeats)
    from enforcer.automaton import _nfa_csr_reference, nfa_csr

    if nfa_csr is None:
        pytest.skip("the compiled kernels are not built")
    rng = np.random.default_rng(11)
    for n in (1, 3, 50, 2_000):
        for m, q in ((0, 0), (n, n // 2), (4 * n, 3 * n)):
            edges = np.stack([rng.integers(0, n, m), rng.integers(0, 256, m), rng.integers(0, 256, m),
                              rng.integers(0, n, m)], axis=1).astype(np.int32)
            eps = np.stack([rng.integers(0, n, q), rng.integers(0, n, q)], axis=1).astype(np.int32)
            # flags for every state, none, or only the first states (targets past them are kept:
            # the bases of blocks numbered last)
            for alive in (None, (rng.random(n) < 0.7).astype(np.uint8), (rng.random(n // 2) < 0.7).astype(np.uint8)):
                fast = nfa_csr(n, edges, eps, alive)
                slow = _nfa_csr_reference(n, edges, eps, alive)
                assert len(fast) == len(slow) == 7
                for got, want in zip(fast, slow):
                    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_compiled_blocks_last_is_the_reference() -> None:
    # the renumbering that puts embedded blocks after the other states (Cython, a count or a
    # binary search over the bases) against numpy's searchsorted, with few and many blocks
    from enforcer.automaton import Block, _blocks_last, blocks_last

    if blocks_last is None:
        pytest.skip("the compiled kernels are not built")
    rng = np.random.default_rng(5)
    for n_blocks in (1, 5, 40):
        sizes = rng.integers(1, 30, n_blocks)
        gaps = rng.integers(1, 20, n_blocks + 1)
        bases, at = [], int(gaps[0])
        for size, gap in zip(sizes, gaps[1:]):
            bases.append(at)
            at += int(size) + int(gap)
        n = at
        outside = np.setdiff1d(np.arange(n), np.concatenate([np.arange(b, b + s) for b, s in zip(bases, sizes)]))
        dfa = type("Sized", (), {})
        blocks = []
        for base, size in zip(bases, sizes):
            sized = dfa()
            sized.num_states = int(size)
            blocks.append(Block(base, sized, int(rng.choice(outside))))
        edges = np.stack([rng.choice(outside, 300), rng.integers(0, 256, 300), rng.integers(0, 256, 300),
                          rng.choice(outside, 300)], axis=1).astype(np.int32)
        eps = np.stack([rng.choice(outside, 200), rng.choice(np.concatenate([outside, bases]), 200)],
                       axis=1).astype(np.int32)
        states = [int(s) for s in rng.choice(outside, 5)]
        fast = _blocks_last(n, edges.copy(), eps.copy(), blocks, states, compiled=True)
        slow = _blocks_last(n, edges.copy(), eps.copy(), blocks, states, compiled=False)
        assert np.array_equal(fast.edges, slow.edges) and np.array_equal(fast.eps, slow.eps)
        assert fast.blocks == slow.blocks and fast.states == slow.states and fast.num_regular == slow.num_regular
        assert fast.num_regular == len(outside) and fast.edges[:, [0, 3]].max() < fast.num_regular
        laid = {b.base: b.base + b.dfa.num_states for b in fast.blocks}
        assert fast.blocks[0].base == fast.num_regular and max(laid.values()) == n
        assert all(t < fast.num_regular or t in laid for t in fast.eps[:, 1])


def test_compiled_thompson_construction_is_the_reference() -> None:
    # ThompsonNFA (Cython) against _NFA: same states, byte edges, epsilon edges and blocks, in
    # the same order, on random expressions, shared sub-expressions (copied fragments), graphs,
    # embedded DFAs and the JSON values of the project's schemas
    import json
    from pathlib import Path

    from enforcer.automaton import Embedded, ThompsonNFA, new_nfa
    from enforcer.json_schema import SchemaOptions
    from enforcer.matcher import schema_node

    if ThompsonNFA is None:
        pytest.skip("the compiled kernels are not built")
    rng = random.Random(5)
    counted = compile_node(repeat(codepoints([(0x20, 0x10FFFF)]), 0, 8))
    nodes = [_random_node(rng) for _ in range(200)]
    for _ in range(50):
        shared = alt(*(_random_node(rng) for _ in range(6)), Embedded(counted))
        nodes.append(seq(shared, repeat(seq(literal(","), shared), 0, 3), alt(shared, NOTHING)))
    nodes.append(Graph(3, 0, frozenset({2}), ((0, literal("ab"), 1), (1, Embedded(counted), 2), (0, NOTHING, 2))))
    for path in sorted((Path(__file__).resolve().parents[1] / "schemas").glob("*.json")):
        nodes.extend(schema_node(tool["function"]["parameters"], SchemaOptions())
                     for tool in json.loads(path.read_text(encoding="utf-8")))
    for node in nodes:
        built = []
        for compiled in (True, False):
            nfa = new_nfa(compiled)
            start, end = nfa.new(), nfa.new()
            nfa.build(node, start, end)
            built.append(nfa)
        fast, slow = built
        assert type(fast) is ThompsonNFA and type(slow) is not ThompsonNFA
        assert fast.num_states == slow.num_states == node.nfa_states + 2
        for fast_array, slow_array in zip(fast.take_arrays(), slow.take_arrays()):
            assert np.array_equal(fast_array, slow_array)
        assert fast.may_dead_end == slow.may_dead_end
        assert [(b.base, b.dfa, b.end) for b in fast.blocks] == [(b.base, b.dfa, b.end) for b in slow.blocks]


def test_compiled_live_order_is_the_reference() -> None:
    # the trim-and-number pass of every finished DFA (Cython) against the Python pass: same
    # states in the same visiting order, None when the start cannot reach acceptance
    from enforcer.automaton import _live_order_reference, live_order

    if live_order is None:
        pytest.skip("the compiled kernels are not built")
    rng = np.random.default_rng(9)
    for n in (1, 2, 7, 60, 800):
        for live_share in (0.02, 0.3, 0.9):
            for _ in range(4):
                table = np.where(rng.random((n, 256)) < 0.03, rng.integers(0, n, size=(n, 256)), -1).astype(np.int32)
                accepting = rng.random(n) < live_share
                fast = live_order(table, accepting.astype(np.uint8))
                slow = _live_order_reference(table, accepting)
                assert (fast is None) == (slow is None)
                if slow is not None:
                    assert fast.tolist() == slow




def test_compiled_finalise_is_the_numpy_passes() -> None:
    # trim, renumber and minimise in one compiled call against the numpy passes it replaces: the
    # same table state for state (random tables with dead and unreachable states, one or two
    # acceptance classes, below and above the minimisation limit) and the empty automaton when
    # the start cannot reach acceptance
    from enforcer.automaton import MINIMISE_LIMIT, _finalise, _live_order, finalised_table

    if finalised_table is None:
        pytest.skip("the compiled kernels are not built")
    rng = np.random.default_rng(13)
    checked = merged = 0
    for n in (1, 2, 9, 60, MINIMISE_LIMIT + 40):
        for live_share in (0.2, 0.6, 1.0):
            for accepting_share in (0.0, 0.1, 0.6):
                # a small automaton blown up into copies of its states, each edge to any copy
                # of its target: states merge back (plus dead and unreachable states)
                small = max(1, n // 4)
                alphabet = rng.integers(0, 256, size=4)
                base = np.full((small, 256), -1, dtype=np.int64)
                base[:, alphabet] = np.where(rng.random((small, 4)) < live_share,
                                             rng.integers(0, small, size=(small, 4)), -1)
                original = rng.integers(0, small, size=n)  # the state each copy copies
                original[0] = 0
                copies = [np.flatnonzero(original == k) for k in range(small)]
                table = np.full((n, 256), -1, dtype=np.int32)
                for state in range(n):
                    for byte in alphabet:
                        target = base[original[state], byte]
                        if target >= 0 and len(copies[target]):
                            table[state, byte] = rng.choice(copies[target])
                accepting = (rng.random(small) < accepting_share)[original]
                for minimise in (True, False):
                    fast = _finalise(table, accepting, minimise)
                    slow = _finalise(table, accepting, minimise, compiled=False)
                    assert np.array_equal(fast.transitions, slow.transitions)
                    assert np.array_equal(fast.accepting, slow.accepting)
                    assert fast.accepting.dtype == slow.accepting.dtype == bool
                    checked += not slow.is_empty
                    merged += minimise and 0 < slow.num_states < len(_live_order(table, accepting))
    assert checked > 20 and merged > 5


def test_compiled_finalise_keeps_a_large_table_already_in_order() -> None:
    # a subset construction's untrimmed table over the minimisation limit, every state live and
    # numbered in breadth-first order: the compiled call hands the table itself back (no copy),
    # equal to the numpy passes' renumbered copy; the automaton holds it compact (a or b, the rest)
    from enforcer.automaton import MINIMISE_LIMIT, _Determiniser, _finalise, finalised_table, subset_table

    if finalised_table is None:
        pytest.skip("the compiled kernels are not built")
    node = repeat(byte_chars(b"ab"), MINIMISE_LIMIT + 50, MINIMISE_LIMIT + 50)
    det = _Determiniser(node, trim=False)
    table = subset_table(det, None).spread()
    accepting = np.array(det.accepting, dtype=bool)
    assert finalised_table(table, accepting.view(np.uint8), MINIMISE_LIMIT)[0] is table
    fast = _finalise(table, accepting)
    slow = _finalise(table, accepting, compiled=False)
    assert fast.num_states == MINIMISE_LIMIT + 51 and fast.table.shape == (MINIMISE_LIMIT + 51, 2)
    assert np.array_equal(fast.transitions, table)
    assert np.array_equal(fast.transitions, slow.transitions) and np.array_equal(fast.accepting, slow.accepting)
    unreached = np.vstack([table, table[-1:]])  # a state nothing reaches: not every state is kept, so a copy
    kept, _ = finalised_table(unreached, np.append(accepting, False).view(np.uint8), MINIMISE_LIMIT)
    assert kept is not unreached and np.array_equal(kept, table)


def _by_first_appearance(classes: np.ndarray) -> list[int]:
    """A partition's classes renumbered in order of first appearance (equal partitions, equal lists)."""
    seen: dict[int, int] = {}
    return [seen.setdefault(int(c), len(seen)) for c in classes]


def test_compiled_minimisation_is_the_reference_partition() -> None:
    # Moore's refinement (Cython) against the numpy refinement: the same partition of the states
    # of random tables (many equal columns, few, dead entries, one or two acceptance classes)
    # and of real automata; minimal automata are left as they are
    from enforcer.automaton import _minimise, _moore_classes_reference, moore_classes

    if moore_classes is None:
        pytest.skip("the compiled kernels are not built")
    rng = np.random.default_rng(11)
    tables = []
    for n in (1, 2, 5, 40, 300):
        for live_share in (0.05, 0.5, 1.0):
            for symbols in (2, 17, 256):
                alphabet = rng.integers(0, 256, size=symbols)  # bytes outside it behave alike
                table = np.full((n, 256), -1, dtype=np.int32)
                table[:, alphabet] = np.where(rng.random((n, symbols)) < live_share,
                                              rng.integers(0, max(1, n // 3), size=(n, symbols)), -1)
                tables.append((table, rng.random(n) < 0.3))
    nodes_rng = random.Random(5)
    for _ in range(60):
        dfa = compile_node(_random_node(nodes_rng))
        if not dfa.is_empty:
            tables.append((dfa.transitions, dfa.accepting))
    for table, accepting in tables:
        fast = moore_classes(np.ascontiguousarray(table, dtype=np.int32), accepting.astype(np.uint8))
        slow = _moore_classes_reference(table, accepting)
        assert _by_first_appearance(fast) == _by_first_appearance(slow)
        assert fast.tolist() == _by_first_appearance(fast)  # numbered by first appearance already
    minimal = compile_node(alt(literal("ab"), literal("cb")))
    again = _minimise(minimal.transitions, minimal.accepting)
    assert np.array_equal(again.transitions, minimal.transitions)


@pytest.mark.parametrize("compiled", [True, False], ids=["kernel", "reference"])
def test_an_empty_embedded_automaton_adds_no_state(compiled: bool) -> None:
    """An embedded automaton that accepts nothing has no state to enter, so it is no block: as
    a block its base named the next NFA state (or none, at the end of the expression), and the
    trim read a false edge from there, or past the end (IndexError). Both NFA builders and
    subset constructions (kernel and Python reference) agree with the eager DFA."""
    empty = Embedded(compile_node(NOTHING))
    node = alt(literal("b"), seq(literal("c"), empty, literal("d")), seq(literal("a"), empty))
    eager = compile_node(node)
    subsets = _Determiniser(node, trim=True, compiled=compiled)
    rows: dict[int, list[int]] = {}

    def step(state: int, byte: int) -> int:
        if state not in rows:
            out = np.empty(256, dtype=np.int32)
            subsets.row_into(state, out, None)
            rows[state] = out.tolist()
        return rows[state][byte]

    for text in (b"b", b"a", b"c", b"cd", b"ad"):
        assert eager.matches(text) == (text == b"b")
        state = 0
        for byte in text:
            state = step(state, byte) if state >= 0 else -1
        assert (state >= 0 and bool(subsets.accepting[state])) == (text == b"b"), text
        if text in (b"a", b"c"):
            assert state < 0, f"{text!r} leads only into the empty automaton: dead at once"


def test_counted_repeat_is_the_bounded_repeat() -> None:
    # the directly built counting table against the subset construction of unit{min,max}: the
    # same language (both differences empty); the table-less CountedDFA has the table's rows,
    # accepting states and read bytes, and "remaining" counts the units still allowed
    from enforcer.automaton import CountedDFA, counted_repeat
    from enforcer.json_schema import RAW_CHAR_ANY, _string_char_dfa
    from enforcer.regex import JSON_STRING_CHAR_ANY

    for raw, node in ((False, JSON_STRING_CHAR_ANY), (True, RAW_CHAR_ANY)):
        unit = _string_char_dfa(raw)
        for minimum, maximum in ((0, 0), (0, 1), (1, 1), (0, 3), (2, 5), (4, 4), (3, 2)):
            counted = counted_repeat(unit, minimum, maximum)
            generic = compile_node(repeat(node, minimum, maximum))
            assert counted.difference(generic).is_empty and generic.difference(counted).is_empty, (minimum, maximum)
            if minimum > maximum:
                assert counted.is_empty
                with pytest.raises(ValueError):
                    CountedDFA(unit, minimum, maximum)
                continue
            lazy = CountedDFA(unit, minimum, maximum)
            assert lazy.num_states == counted.num_states
            assert np.array_equal(np.array([lazy.array_row(s) for s in range(lazy.num_states)]), counted.transitions)
            assert np.array_equal(lazy.accepting, counted.accepting)
            assert np.array_equal(lazy.read_bytes, (counted.transitions >= 0).any(axis=0)), (minimum, maximum)
            assert compile_node(Embedded(lazy)).content_key == counted.content_key
            state = 0
            for k in range(maximum + 1):
                assert lazy.remaining(state) == maximum - k
                assert all(lazy.remaining(state + inner) == -1 for inner in range(1, lazy.period) if k < maximum)
                assert bool(counted.accepting[state]) == (k >= minimum)
                if k < maximum:
                    state = counted.walk(state, "é".encode())
            assert counted.walk(state, b"a") < 0


def test_counted_repeats_of_one_unit_share_its_step_table() -> None:
    # the unit's check, trim and step table are made once per unit automaton (every maxLength
    # of every compile counts the same encoded character), not once per bound; a unit that is
    # not prefix-free is refused every time it is given
    from enforcer.automaton import CountedDFA
    from enforcer.json_schema import _string_char_dfa

    unit = _string_char_dfa(False)
    short, long = CountedDFA(unit, 0, 5), CountedDFA(unit, 2, 9)
    assert short.step is long.step and short.unit is long.unit
    assert not short.step.flags.writeable
    not_prefix_free = compile_node(alt(literal("a"), literal("ab")))
    for _ in range(2):
        with pytest.raises(ValueError, match="prefix-free"):
            CountedDFA(not_prefix_free, 0, 3)


@pytest.mark.kernels
def test_counted_repeat_embedded_builds_the_tables_rows() -> None:
    # a lazy automaton around a table-less counted repeat builds the same states, numbered
    # alike, as around its table: the compiled subset construction (unit rows shifted per
    # copy, nothing read after the last unit) against the table, and the Python construction
    # (the fallback) against both
    from enforcer.automaton import CountedDFA, counted_repeat, subset_table
    from enforcer.json_schema import _string_char_dfa

    unit = _string_char_dfa(False)
    for minimum, maximum in ((0, 0), (0, 3), (2, 7), (5, 5)):
        nodes = [seq(literal('"'), Embedded(dfa), literal('"'), optional(literal("x")))
                 for dfa in (counted_repeat(unit, minimum, maximum), CountedDFA(unit, minimum, maximum))]
        tables = []
        for node, compiled in ((nodes[0], True), (nodes[1], True), (nodes[1], False)):
            det = _Determiniser(node, trim=True, compiled=compiled)
            assert (det.kernel is not None) == compiled
            tables.append((subset_table(det, None).spread(), np.array(det.accepting, dtype=bool)))
        for table, accepting in tables[1:]:
            assert np.array_equal(table, tables[0][0]), (minimum, maximum)
            assert np.array_equal(accepting, tables[0][1]), (minimum, maximum)
        dfa = compile_node(nodes[1])
        for k in range(maximum + 2):
            text = '"' + "é" * k + '"'
            assert dfa.matches(text) == (minimum <= k <= maximum), (minimum, maximum, k)
            assert dfa.matches(text + "x") == (minimum <= k <= maximum)


def _random_tree_with_empty_parts(rng: random.Random, depth: int):
    """A random expression over a few bytes, with empty parts mixed in (NOTHING, an empty byte
    set, graphs whose accepting states no non-empty path reaches)."""
    from enforcer.automaton import ByteSet, Concat, Repeat, Union

    kind = rng.randrange(8 if depth else 3)
    if kind == 0:
        return rng.choice([NOTHING, EPSILON, ByteSet(())])
    if kind in (1, 2):
        return literal(rng.choice(["a", "b", "ab"]))
    if kind == 3:  # raw constructors: the helpers simplify NOTHING away
        return Concat(tuple(_random_tree_with_empty_parts(rng, depth - 1) for _ in range(rng.randint(1, 3))))
    if kind == 4:
        return Union(tuple(_random_tree_with_empty_parts(rng, depth - 1) for _ in range(rng.randint(0, 3))))
    if kind == 5:
        lo = rng.randint(0, 2)
        return Repeat(_random_tree_with_empty_parts(rng, depth - 1), lo, rng.choice([None, lo, lo + 2]))
    if kind == 6:
        return Embedded(compile_node(_random_tree_with_empty_parts(rng, depth - 1)))
    n = rng.randint(1, 4)
    edges = tuple((rng.randrange(n), _random_tree_with_empty_parts(rng, depth - 1), rng.randrange(n)) for _ in range(rng.randint(0, 5)))
    return Graph(n, 0, frozenset(rng.sample(range(n), rng.randint(0, n))), edges)


def test_node_emptiness_known_at_construction_matches_the_automaton():
    """``Node.empty`` (computed from the children as nodes are built) says exactly whether the
    compiled automaton accepts nothing, on random trees that mix empty parts into every kind of
    node."""
    rng = random.Random(7)
    empties = 0
    for _ in range(600):
        node = _random_tree_with_empty_parts(rng, 3)
        assert node.empty == compile_node(node).is_empty, node
        empties += node.empty
    assert 50 < empties < 550  # both verdicts are exercised


def test_rows_built_in_one_walk_survive_the_table_growing() -> None:
    """A trie walk builds rows of states it creates on the way, past the table's capacity: the
    table grows after the walk, and every row the walk built is carried over (the lazy
    automaton then reads exactly as the eager one)."""
    from itertools import product

    from enforcer.masks import TokenIndex, trie_mask
    from enforcer.vocabulary import Vocabulary

    words = [bytes(p) for p in product(b"ab", repeat=12)]
    index = TokenIndex(Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + words, {}))
    if index.trie is None:
        pytest.skip("the compiled kernels are not built")
    node = seq(star(byte_chars(b"ab")), literal("a"), repeat(byte_chars(b"ab"), 9, 9))  # 1,024 DFA states
    lazy, eager = LazyDFA(node), compile_node(node)
    capacity = lazy.transitions.shape[0]
    assert trie_mask(index, lazy, 0).any()
    assert lazy.num_states > capacity  # created (and most rows built) within one walk
    rng = random.Random(3)
    for _ in range(300):
        text = bytes(rng.choice(b"ab") for _ in range(rng.randrange(1, 40)))
        assert lazy.matches(text) == eager.matches(text), text


def test_lazy_rows_stay_right_when_the_table_grows() -> None:
    """A lazy automaton hands out its rows as views into its table; building more states
    copies the table into a larger one, and every row handed out before still reads what the
    table it views holds (a built row never changes). Reading tokens (``read``), a reader made
    before a growth meets the rows built since as unbuilt and the automaton reads on in the new
    table: the same states as a walk of the rows."""
    from enforcer.automaton import FIRST_TABLE_ROWS

    # the 11th letter from the end is an "a": 36 NFA states, 2,048 DFA states (the last 11 letters)
    lazy = LazyDFA(seq(star(byte_chars(b"ab")), literal("a"), repeat(byte_chars(b"ab"), 10, 10)))
    first = lazy.transitions.shape[0]
    assert first == FIRST_TABLE_ROWS[0]  # the NFA is smaller than the least first capacity
    rng = random.Random(5)
    text = bytes(rng.choice(b"ab") for _ in range(1500))
    views = [lazy.row(0)]
    state = 0
    for byte in text:
        state = lazy.row(state)[byte]
        views.append(lazy.row(state))
    assert lazy.transitions.shape[0] >= 4 * first  # grown twice
    for k, view in enumerate(views):
        assert list(view) == lazy.array_row(lazy.walk(0, text[:k])).tolist()
    by_tokens = LazyDFA(seq(star(byte_chars(b"ab")), literal("a"), repeat(byte_chars(b"ab"), 10, 10)))
    state, k = 0, 0
    while k < len(text):
        size = rng.randrange(1, 9)
        state = by_tokens.read(state, text[k:k + size])
        k += size
        assert list(by_tokens.row(state)) == list(views[min(k, len(text))])
    assert by_tokens.transitions.shape[0] >= 4 * first


def test_compiled_table_reader_is_the_reference() -> None:
    """The compiled reader of a table (one call per token) and its Python reference give the
    same answer on every read: the state after the bytes, -1 where they die, and where a row is
    not built (or past the table) that state and the index of its byte."""
    from enforcer.automaton import TableReader, _TableReaderReference

    if TableReader is None:
        pytest.skip("the compiled kernels are not built")
    rng = random.Random(11)
    for _ in range(200):
        rows = rng.randrange(1, 12)
        table = np.array([[rng.randrange(-1, rows + 2) if rng.random() < 0.7 else -1 for _ in range(256)]
                          for _ in range(rows)], dtype=np.int32)
        built = None if rng.random() < 0.3 else np.array([rng.random() < 0.8 for _ in range(rows)], dtype=np.uint8)
        fast, slow = TableReader(table, built), _TableReaderReference(table, built)
        for _ in range(50):
            data = bytes(rng.randrange(256) if rng.random() < 0.2 else rng.choice(b"abc") for _ in range(rng.randrange(0, 9)))
            state, at = rng.randrange(-1, rows + 2), rng.randrange(0, len(data) + 1)
            assert fast.read(state, data, at) == slow.read(state, data, at), (table.tolist(), data, state, at)


def test_block_states_are_numbered_after_the_others_and_keep_nothing_per_state() -> None:
    """The subset construction numbers an NFA's embedded-block states after all the others
    (:func:`enforcer.automaton._blocks_last`): the per-state slices cover the others only,
    so two 20,000-character strings (800,000 block states) add nothing per state, and the
    automaton, a tagged union's exits included, reads the same texts."""
    from enforcer.automaton import TaggedUnion, _Determiniser
    from enforcer.json_schema import SchemaOptions
    from enforcer.matcher import compile_schema_dfa, schema_node

    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 20000}, "b": {"type": "integer"},
                                               "c": {"type": "string", "maxLength": 20000}}}
    node = schema_node(schema, SchemaOptions())
    assert node.block_states > 800_000
    for compiled in (True, False):
        det = _Determiniser(node, trim=True, compiled=compiled)
        assert det.num_nfa_states == node.nfa_states + 2
        assert det.num_regular == node.nfa_states - node.block_states + 2
        assert det._edge_start.shape[0] == det._eps_start.shape[0] == det._important.shape[0] + 1 == det.num_regular + 1
        ends = [det.num_regular] + [b.base + b.dfa.num_states for b in det.blocks]
        assert [b.base for b in det.blocks] == ends[:-1] and ends[-1] == det.num_nfa_states
    dfa = compile_schema_dfa(schema, SchemaOptions())
    assert dfa.matches('{"a": "' + "x" * 20000 + '", "b": 1}') and not dfa.matches('{"a": "' + "x" * 20001 + '"}')
    assert dfa.matches('{"b": 2, "c": "' + "é" * 20000 + '"}')
    counted = Embedded(compile_node(repeat(codepoints([(0x61, 0x7A)]), 0, 300)))
    union = TaggedUnion([seq(literal("x"), counted, literal("!")), literal("y"), seq(counted, literal("?"))])
    for text, branch in (("xabc!", 0), ("y", 1), ("abc?", 2), ("?", 2)):
        state = 0
        for byte in text.encode():
            state = union.row(state)[byte]
            assert state >= 0, text
        assert union.branch(state) == branch, text


def test_text_trie_names_the_text_each_end_completes():
    """Texts that prefix one another, share a prefix, or are given twice: each accepting state
    names the text it ends (a text given twice names neither), every state can still reach an
    end (trimmed), and the language is exactly the texts."""
    from enforcer.automaton import TextTrie
    texts = [b"ab", b"a", b"abc", b"b", b"xyz", b"b"]
    trie = TextTrie(texts)
    assert trie.num_states == len({t[:i] for t in texts for i in range(len(t) + 1)})
    for i, text in enumerate(texts):
        end = trie.walk(0, text)
        assert trie.accepting_list[end]
        assert trie.branch(end) == (None if texts.count(text) > 1 else i)
    assert trie.branch(0) is None and trie.branch(trie.walk(0, b"xy")) is None
    for probe in [b"", b"x", b"abcd", b"c", b"ba", b"xyz!"]:
        assert not trie.matches(probe)
    live = compile_node(alt(*(literal(t) for t in texts)))
    assert trie.difference(live).is_empty and live.difference(trie).is_empty
    assert TextTrie([]).is_empty and not TextTrie([]).matches(b"")


def test_compiled_text_trie_is_the_reference():
    """The compiled trie of literal texts against the Python construction: the same spread
    table, the same compact form (the reference merges its table's columns, so the trie may
    skip the merge), the same accepting states and ends, on random text sets over a few bytes
    (prefixes, repeats, empty texts, no texts) and on every byte once."""
    from enforcer.automaton import _text_trie_reference, text_trie

    if text_trie is None:
        pytest.skip("the compiled kernels are not built")
    rng = np.random.default_rng(11)
    alphabet = np.array([0, 0x3A, 0x61, 0x62, 0xFF], dtype=np.uint8)
    sets = [[], [b""], [b"", b""], [bytes([b]) for b in range(256)]]
    sets += [[rng.choice(alphabet, size=int(rng.integers(0, 7))).tobytes() for _ in range(int(rng.integers(1, 6)))]
             for _ in range(2_000)]
    for texts in sets:
        fast, slow = text_trie(list(texts)), _text_trie_reference(list(texts))
        for a, b in zip(fast, slow):
            assert a.dtype == b.dtype and np.array_equal(a, b), texts


def test_dfa_rows_are_built_as_walks_read_them():
    """A DFA's list rows (the byte walks' form) are made per state on first read, not for the
    whole table at the first walk; all_rows() makes the rest."""
    dfa = compile_node(seq(literal("abc"), star(literal("d"))))
    assert dfa.rows.count(None) == dfa.num_states
    assert dfa.matches("ab") is False
    assert dfa.num_states - dfa.rows.count(None) == 2  # the rows "a" and "b" were read from
    assert list(dfa.row(0)) == dfa.transitions[0].tolist()
    rows = dfa.all_rows()
    assert None not in rows and all(list(r) == t.tolist() for r, t in zip(rows, dfa.transitions))


def test_rows_read_by_threads_while_the_table_grows() -> None:
    """Threads reading rows of one lazy automaton while others build rows and grow its table
    (matchers of one compiled object used from several threads) see the rows a single-threaded,
    fully built automaton has: a row view is made without the lock from one consistent read
    of the table and its built flags."""
    import sys
    import threading

    from enforcer.json_schema import SchemaOptions
    from enforcer.matcher import schema_node

    node = alt(schema_node({"type": "object", "properties": {f"key{i}": {"type": "string", "maxLength": 12}
                                                             for i in range(40)}}, SchemaOptions()),
               repeat(byte_chars(b"ab"), 0, 600))
    whole = compile_node(node)
    lazy = LazyDFA(node)
    rng = random.Random(5)
    texts = [b'{"key%d":"%s"}' % (rng.randrange(40), bytes(rng.choice(b"xyz\\\"") for _ in range(rng.randrange(14))))
             for _ in range(150)] + [bytes(rng.choice(b"ab") for _ in range(rng.randrange(600))) for _ in range(40)]
    failures: list[str] = []

    def trace(dfa: object, text: bytes) -> list[tuple[bool, bool]]:
        state, out = 0, []
        for b in text:
            state = dfa.row(state)[b]
            if state >= 0:
                dfa.row(state)  # a state's flags are read after its row (that walk's build is over)
            out.append((state >= 0, state >= 0 and bool(dfa.accepting_list[state])))
            if state < 0:
                break
        return out

    def reader(chunk: list[bytes]) -> None:
        for text in chunk:
            try:
                if trace(lazy, text) != trace(whole, text):
                    failures.append(repr(text))
            except Exception as exc:  # a reader's error fails the test (a thread's would only warn)
                failures.append(f"{text!r}: {type(exc).__name__}: {exc}")

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=reader, args=(texts[k::4],)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not failures, failures[:3]
    assert lazy.num_states > 256  # the table grew past its first capacity while read


@pytest.mark.kernels
def test_scratch_arrays_of_a_large_nfa_grow_as_levels_are_added(kimi_vocab) -> None:
    """The per-NFA-state scratch arrays of the compiled construction, grown with the states
    that free-form levels add while a text is read: a value nested ten levels deep, read where
    a 70,000-character bound makes 1.4 million NFA states, is accepted exactly, and a wrong
    closing bracket is refused."""
    import json

    from enforcer import compile_json_schema

    schema = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 70000}, "any": {}},
              "required": ["s"], "additionalProperties": False}
    compiled = compile_json_schema(schema, kimi_vocab)
    good = json.dumps({"s": "x", "any": [[[[[[[[[[{"a": [1, {"b": [[["c"]]]}]}]]]]]]]]]]})
    matcher = compiled.matcher()
    assert all(matcher.accept_token(t) for t in kimi_vocab.encode_text(good)) and matcher.is_accepting()
    det = compiled.dfa._det
    assert det.num_nfa_states * 4 > 1 << 20 and det.kernel.num_nfa_states > det.num_nfa_states  # levels added
    bad = kimi_vocab.encode_text(good[:good.index("]]]}")] + "}")
    matcher = compiled.matcher()
    assert not all(matcher.accept_token(t) for t in bad)


def test_sorted_distinct_is_numpy_unique() -> None:
    """The sort-based distinct values used in place of ``np.unique`` (numpy 2 hashes, and its
    first call imports ``numpy.ma``): the same values, ascending, empty and repeated input too."""
    rng = np.random.default_rng(7)
    for size in (0, 1, 2, 17, 1000):
        values = rng.integers(-5, 40, size=size)
        assert np.array_equal(sorted_distinct(values), np.unique(values))
    assert sorted_distinct(np.array([3, 3, 3])).tolist() == [3]


@pytest.mark.kernels
def test_compiled_thompson_pieces_is_the_reference() -> None:
    """The compiled count of the Thompson construction's pieces against the Python one: equal
    on patterns (searched, anchored, nested repeats, classes), on expressions sharing
    sub-nodes, graphs and embedded automata, and both stop at the cap (a pattern past it is
    refused naming its limit, its size never computed past it)."""
    from enforcer.automaton import _pieces_reference, thompson_pieces
    from enforcer.regex import MAX_EXPANDED_NODES, pattern_node

    patterns = ["/api/v1/users/\\d+/exports", "^[A-Fa-f\\d]{24}$", "^(https?:\\/\\/)?([\\da-z\\.-]+)\\.([a-z\\.]{2,6})$",
                "^(a|b){3,7}c*$", "x(y(z{2}){3}){4}", "[^/]+", "^$", "\\p{L}+"]
    shared = seq(literal("ab"), star(byte_chars(b"xy")))
    graph = Graph(3, 0, frozenset({2}), ((0, shared, 1), (1, EPSILON, 2), (0, literal("q"), 2)))
    nodes = [pattern_node(p, "") for p in patterns] + [
        alt(shared, seq(shared, repeat(shared, 2, 5))), graph, repeat(graph, 0, 3),
        seq(Embedded(compile_node(literal("abc"))), optional(shared)), NOTHING, EPSILON]
    for node in nodes:
        for cap in (10**9, 50, 1):
            assert thompson_pieces(node, cap) == _pieces_reference(node, {}, cap), (node, cap)
    deep = repeat(repeat(repeat(literal("a"), 100, 100), 100, 100), 200, 200)  # 2,000,000 pieces
    assert thompson_pieces(deep, 10**6 + 1) == _pieces_reference(deep, {}, 10**6 + 1) == 10**6 + 1
    with pytest.raises(SchemaTooComplexError, match=f"more than {MAX_EXPANDED_NODES:,} automaton pieces"):
        pattern_node("(\\p{L}{100}){100}", "")
