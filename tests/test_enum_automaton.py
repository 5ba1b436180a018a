"""Enums and constants as minimal acyclic automata (issue 14: linear, shared prefixes and
suffixes written once), exact under JSON equality for strings, numbers, arrays and objects."""

import itertools
import json
import random

import pytest

from enforcer import json_schema
from enforcer.automaton import Graph, LazyDFA
from enforcer.json_schema import SchemaCompiler, SchemaOptions, _minimal_acyclic, _string_trie
from enforcer.automaton import literal


def _graph_of(node):
    """The Graph inside a quoted string trie (quote, graph, quote)."""
    if isinstance(node, Graph):
        return node
    graphs = [p for p in node.parts if isinstance(p, Graph)]
    assert len(graphs) == 1
    return graphs[0]


def test_structured_values_share_suffixes():
    """``value-0`` .. ``value-99999``: a prefix trie has over 100,000 states; the minimal acyclic
    automaton has one state per (position, digits still to come), a few dozen."""
    graph = _graph_of(_string_trie([f"value-{i}" for i in range(100_000)], raw=False))
    assert graph.num_states < 60
    raw = _string_trie([str(i) for i in range(100_000)], raw=True)
    assert raw.num_states < 20


def test_minimal_acyclic_is_exact_on_random_sets():
    """Membership exactly the set (prefixes, extensions and neighbours refused), for random sets
    over a small alphabet where prefixes and suffixes collide often."""
    rng = random.Random(7)
    for _ in range(40):
        words = {"".join(rng.choice("ab") for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 30))}
        dfa = LazyDFA(_minimal_acyclic(sorted(words), lambda c: literal(c)))
        for n in range(8):
            for letters in itertools.product("ab", repeat=n):
                word = "".join(letters)
                assert dfa.matches(word.encode()) == (word in words), (sorted(words), word)


def test_compiled_minimal_acyclic_is_the_reference_state_for_state(monkeypatch):
    """The compiled construction (strings as code points, other symbols as ids) against the
    Python one it replaces: the same states, finals and edges in the same order, on random
    sets of strings (the empty one, characters outside the BMP, shared suffixes) and of symbol
    tuples; and the graph built from it carries the plain constructor's derived fields."""
    from array import array

    from enforcer.json_schema import _acyclic_reference, minimal_acyclic

    if minimal_acyclic is None:
        pytest.skip("the compiled kernels are not built")
    rng = random.Random(11)
    for _ in range(2_000):
        alphabet = rng.choice(["ab", "abc", "xy\u00e9\U0001F600", "0123456789"])
        words = sorted({"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
                        for _ in range(rng.randint(1, 40))})
        states, final, table = minimal_acyclic([array("i", w.encode("utf-32-le")) for w in words])
        got = (states, final.nonzero()[0].tolist(), [(a, chr(b), c) for a, b, c in table.tolist()])
        assert got == _acyclic_reference(words), words
        tuples = sorted({tuple(rng.choice(["x", "\x04key", "\x00true"]) for _ in range(rng.randint(0, 5)))
                         for _ in range(rng.randint(1, 20))})
        ids = {}
        states, final, table = minimal_acyclic([array("i", [ids.setdefault(x, len(ids)) for x in t]) for t in tuples])
        names = list(ids)
        got = (states, final.nonzero()[0].tolist(), [(a, names[b], c) for a, b, c in table.tolist()])
        assert got == _acyclic_reference(tuples), tuples
        graph = _minimal_acyclic(words, literal)
        plain = Graph(graph.num_states, graph.start, graph.accepting, graph.edges)
        assert (graph.nfa_states, graph.empty, graph.block_states, graph.whole_states, graph.trim) == \
            (plain.nfa_states, plain.empty, plain.block_states, plain.whole_states, plain.trim)
        with monkeypatch.context() as patched:  # the path without the compiled kernels: the same graph
            patched.setattr(json_schema, "minimal_acyclic", None)
            python_graph = _minimal_acyclic(words, literal)
        assert (python_graph.num_states, python_graph.accepting, list(python_graph.edges)) == \
            (graph.num_states, graph.accepting, list(graph.edges))


def _dfa(schema, **options):
    return LazyDFA(SchemaCompiler(schema, SchemaOptions(**options)).compile())


def test_object_and_array_constants_are_exact():
    values = [{"k": i, "v": [i, str(i)]} for i in range(300)] + [[], {}, [[]], {"k": None}, [0, -1.5, "x"]]
    dfa = _dfa({"enum": values})
    for v in values:
        for text in (json.dumps(v), json.dumps(v, separators=(",", ":")), json.dumps(v, indent=2)):
            assert dfa.matches(text.encode()), text
    assert dfa.matches(b'{"k": 7.0, "v": [7, "7"]}'), "7.0 == 7 in JSON"
    assert dfa.matches(b'{"k": null}')
    assert dfa.matches(b'[-0, -1.50, "\\u0078"]'), "-0 == 0, trailing zeros and escapes: the same value"
    for bad in ('{"k": 7, "v": [7, "8"]}', '{"k": 300, "v": [300, "300"]}', '{"v": [1, "1"], "k": 1}', "[[], []]",
                '{"k": 1, "v": [1, "1"], "x": 0}', '[0, -1.5]', '{"k": false}'):
        assert not dfa.matches(bad.encode()), bad


def test_long_constant_is_refused_before_it_is_built():
    import pytest
    from enforcer import SchemaTooComplexError
    with pytest.raises(SchemaTooComplexError) as info:
        SchemaCompiler({"properties": {"a": {"const": "x" * 1_000_000}}}, SchemaOptions()).compile()
    assert info.value.keyword == "const" and info.value.pointer == "/properties/a"
