"""Token masks: every shortcut (free strings, bounded strings, embedded automata, shared masks)
gives masks bit-identical to the plain walk over every candidate token (``reference_mask``).

States are reached by teacher-forcing valid instances and by random walks that pick allowed
tokens, so escapes, multi-byte characters, quotes and length limits are all visited.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from enforcer import Vocabulary, compile_json_schema
from benchmarks.conformance import load_jsonschemabench, load_maskbench, make_encoder, spread_sample
from enforcer import automaton, masks
from enforcer.automaton import LazyDFA, alt, codepoints, compile_node, literal, repeat, seq
from enforcer.masks import MaskTable, pack_ids, reference_mask, token_index
from enforcer.matcher import clear_cache
from enforcer.arguments import split_arguments
from enforcer.json_schema import SchemaOptions


def test_compiled_walk_is_built() -> None:
    """The package's build compiles the walk (``pip install -e .`` or ``python setup.py
    build_ext --inplace``); without it every mask would take the numpy reference walk. The
    guard of the build: it fails, on purpose, in a source tree without the built extension
    (where the tests marked ``kernels`` are skipped)."""
    assert masks.walk_tokens is not None


def test_compiled_walk_matches_reference_on_every_state(kimi_vocab) -> None:
    """The prefix-sharing walk against the numpy walk from every state of a fully built DFA
    with many byte classes (digits, letters, escapes, UTF-8)."""
    index = token_index(kimi_vocab)
    dfa = compile_node(seq(literal('"'), repeat(alt(codepoints([(0x20, 0x7E), (0xA0, 0x2FFF)]),
                                                   literal("\\n")), 0, 6), literal('" ,')))
    for state in range(dfa.num_states):
        candidates = index.candidates(dfa, state)
        assert np.array_equal(masks.walk_mask(index, dfa, state, candidates),
                              pack_ids(index.ids[masks.walk_positions(index, dfa, state, candidates)], index.words))


@pytest.mark.kernels
def test_trie_walk_matches_reference_on_every_state(kimi_vocab) -> None:
    """The token-trie walk (what a state without a shared shortcut uses) against the plain
    walk from every state of a fully built DFA with many byte classes."""
    index = token_index(kimi_vocab)
    assert index.trie is not None
    dfa = compile_node(seq(literal('"'), repeat(alt(codepoints([(0x20, 0x7E), (0xA0, 0x2FFF)]),
                                                   literal("\\n")), 0, 6), literal('" ,')))
    for state in range(dfa.num_states):
        assert np.array_equal(masks.trie_mask(index, dfa, state), reference_mask(index, dfa, state)), state


@pytest.mark.kernels
@pytest.mark.parametrize("rows_per_walk", [0, 1, 1024])
def test_trie_walk_builds_a_lazy_automaton(kimi_vocab, monkeypatch, rows_per_walk) -> None:
    """On a lazy DFA the trie walk builds the rows it reaches (up to ``rows_per_walk`` per
    compiled call), stops at the others and resumes once they are built: the masks of the first
    states of a fresh automaton (keys, an enum, a pattern) equal the plain walk's, which sees the
    rows the trie walk built. 0 rows per walk: every new row goes through the resumed walk."""
    monkeypatch.setattr(automaton, "ROWS_PER_WALK", rows_per_walk)
    index = token_index(kimi_vocab)
    node = seq(literal('{"'), alt(literal("alpha"), literal("alphabet"), literal("beta")), literal('": "'),
               repeat(codepoints([(0x41, 0x5A)]), 2, 5), literal('"}'))
    for state in range(12):
        lazy = LazyDFA(node)
        path = '{"alphabet": "AB"}'.encode()[:state]
        s = lazy.walk(0, path)
        before = int(lazy._built.sum())
        got = masks.trie_mask(index, lazy, s)
        if state == 2:
            assert int(lazy._built.sum()) > before + 1  # the walk needed rows the start did not have
        assert np.array_equal(got, reference_mask(index, lazy, s)), path


@pytest.mark.kernels
@pytest.mark.parametrize("seed", range(4))
def test_trie_walk_allows_loop_subtrees_whole(kimi_vocab, seed) -> None:
    """A subtree whose bytes all lead a state back to itself is allowed without walking it:
    against the plain walk from the first states of loops over random ASCII classes (entered
    after another first character, with tails out of the loop) and of what has no loop (bounded
    repeats: a state per position; labels of two classes; a sequence of twelve classes),
    eagerly and lazily built. A class missing one byte of a token's subtree must cut that
    token, a bound the tokens longer than what is left."""
    rng = random.Random(seed)
    index = token_index(kimi_vocab)
    for _ in range(6):
        chars = sorted(rng.sample(range(0x21, 0x7F), rng.randint(1, 60)))
        loop = repeat(codepoints([(c, c) for c in chars]), 0, None)
        first = codepoints([(c, c) for c in rng.sample(range(0x21, 0x7F), 10)])
        bounded = repeat(codepoints([(c, c) for c in chars]), 0, rng.randint(1, 40))
        label = seq(codepoints([(c, c) for c in chars]), repeat(codepoints([(c, c) for c in chars[: len(chars) // 2 + 1]]),
                                                                0, rng.randint(2, 30)), literal(" "))
        steps = seq(*(codepoints([(c, c) for c in sorted(rng.sample(range(0x21, 0x7F), 70))]) for _ in range(12)))
        for node in (loop, seq(first, loop, literal('"')), seq(loop, alt(literal("\u00e9"), literal(", ")), loop),
                     bounded, seq(label, label, bounded), steps):
            for dfa in (compile_node(node), LazyDFA(node)):
                for state in range(min(dfa.num_states, 24)):
                    assert np.array_equal(masks.trie_mask(index, dfa, state), reference_mask(index, dfa, state)), chars


@pytest.mark.kernels
@pytest.mark.parametrize("seed", range(3))
def test_trie_walk_allows_bounded_runs_whole(kimi_vocab, seed) -> None:
    """A subtree whose ASCII strings all live from a state that does not loop (a bounded repeat:
    a state per position) is allowed without walking it once every level of the run lives on
    all its bytes: against the plain walk from states of hostname labels (a class per position,
    the last one narrower), of bounded repeats that end exactly where tokens still go on, of two
    classes alternating, and of a run whose targets are too many to track. An off-by-one at the
    bound or a class one byte short changes these masks."""
    from enforcer.regex import format_node
    rng = random.Random(seed)
    index = token_index(kimi_vocab)
    hostname = format_node("hostname", "")
    letters = codepoints([(0x61, 0x7A)])
    for _ in range(4):
        chars = sorted(rng.sample(range(0x61, 0x7B), rng.randint(8, 26)))
        cls = codepoints([(c, c) for c in chars])
        narrow = codepoints([(c, c) for c in chars[: len(chars) // 2]])
        bound = rng.randint(2, 14)
        nodes = (seq(repeat(cls, 0, bound), narrow, literal('"')),
                 seq(repeat(seq(cls, letters), 0, bound), literal(",")),
                 seq(alt(*(seq(literal(chr(c)), repeat(cls, 0, bound)) for c in chars[:6])), literal(" ")))
        for node in nodes:
            for dfa in (compile_node(node), LazyDFA(node)):
                for state in range(min(dfa.num_states, 20)):
                    assert np.array_equal(masks.trie_mask(index, dfa, state), reference_mask(index, dfa, state)), chars
    dfa = compile_node(seq(hostname, literal('"')))
    for text in (b"", b"example", b"a" * 50, b"mail.exa", b"x-" * 20, b"a" * 62):
        state = dfa.walk(0, text)
        assert np.array_equal(masks.trie_mask(index, dfa, state), reference_mask(index, dfa, state)), text


@pytest.mark.kernels
def test_trie_of_prefixes_and_equal_tokens() -> None:
    """A token that prefixes others, and two ids with the same bytes, share trie nodes: the
    walk allows both ids of a duplicated spelling and each prefix on its own."""
    tokens = [b"a", b"ab", b"abc", b"ab", b"b", b"ba", b"\xe2\x82", b"\xe2\x82\xac", b"c"]
    vocab = Vocabulary.from_token_bytes(tokens)
    index = token_index(vocab)
    assert index.trie is not None and index.trie.byte.size == 1 + len({t[:k] for t in tokens for k in range(1, len(t) + 1)})
    for pattern in (literal("ab"), alt(literal("abc"), literal("b")), repeat(codepoints([(0x61, 0x62)]), 0, 3),
                    codepoints([(0x20AC, 0x20AC)]), seq(literal("a"), repeat(codepoints([(0x61, 0x63)]), 0, 9))):
        dfa = compile_node(pattern)
        for state in range(dfa.num_states):
            assert np.array_equal(masks.trie_mask(index, dfa, state), reference_mask(index, dfa, state))
    allowed = np.flatnonzero(np.unpackbits(masks.trie_mask(index, compile_node(literal("ab")), 0).view(np.uint8),
                                           bitorder="little"))
    assert allowed.tolist() == [0, 1, 3]


def assert_table_matches_reference(table: MaskTable) -> int:
    """Every mask the table computed, packed or kept as its few ids, equals the plain walk, and
    the compiled string-body test and class-body tests agree with their Python reference there;
    returns how many were checked."""
    raw = masks._RAW_STRING_DFA.transitions
    few = {state: pack_ids(ids, table.index.words) for state, ids in table._few.items() if ids is not None}
    assert all(list(ids) == sorted(set(ids)) and len(ids) <= masks.MAX_FEW_IDS
               for ids in table._few.values() if ids is not None)
    for state, mask in list(table._masks.items()) + list(few.items()):
        assert table._is_string_body(state) == (table.dfa.row(state)[0x61] >= 0 and table._embedded_depth_reference(
            state, raw, masks._STRING_BODY_FLAGS) == table.index.max_length), f"state {state}"
        body = table._class_body(state)
        if body is not None:
            assert table._embedded_depth_reference(state, masks.class_loop(body.inside), body.columns) == body.depth, \
                f"state {state}: class body"
        expected = reference_mask(table.index, table.dfa, state)
        if not np.array_equal(mask, expected):
            diff = np.flatnonzero(np.unpackbits((mask ^ expected).view(np.uint8), bitorder="little"))
            raise AssertionError(f"state {state}: mask differs from the reference on ids {diff[:10].tolist()}")
    return len(table._masks) + len(few)


def random_walk(matcher, vocab, rng: random.Random, steps: int) -> None:
    """Accept random allowed tokens (biased towards short ones) until stuck or finished."""
    bitmask = np.zeros((1, (vocab.vocab_size + 31) // 32), dtype=np.int32)
    for _ in range(steps):
        if matcher.is_finished:
            return
        matcher.fill_bitmask(bitmask)
        allowed = np.flatnonzero(np.unpackbits(bitmask[0].view(np.uint8), bitorder="little"))
        if allowed.size == 0:
            return
        picks = [int(allowed[rng.randrange(allowed.size)]) for _ in range(4)]
        token = min(picks, key=lambda t: len(vocab.byte_tokens[t] or b"") if t < len(vocab.byte_tokens) else 0)
        assert matcher.accept_token(token)


def teacher_forced_masks(compiled, vocab, streams: list[list[int]]) -> list[list[np.ndarray]]:
    """The bitmask a new matcher of ``compiled`` fills before each token of each stream (each
    token accepted), per stream; every stream ends where a value is complete."""
    per_stream = []
    for ids in streams:
        matcher = compiled.matcher()
        bitmask = np.zeros((1, (vocab.vocab_size + 31) // 32), dtype=np.int32)
        rows = []
        for token in ids:
            matcher.fill_bitmask(bitmask)
            rows.append(bitmask[0].copy())
            assert matcher.accept_token(token)
        assert matcher.is_accepting()
        per_stream.append(rows)
    return per_stream


BOUNDED = [
    {"type": "string", "maxLength": 1},
    {"type": "string", "minLength": 2, "maxLength": 7},
    {"type": "string", "maxLength": 80},
    {"type": "object", "properties": {"title": {"type": "string", "maxLength": 120},
                                      "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}}},
     "required": ["title", "tags"]},
    {"type": "string", "format": "email"},
    {"type": "string", "pattern": "^[a-z ]{3,40}$"},
    {"type": "string", "format": "date-time"},
    {"anyOf": [{"type": "string", "maxLength": 4}, {"type": "string", "pattern": "^x+$"}]},
    {"type": "string", "maxLength": 10, "pattern": "^[A-Z].*$"},
]


@pytest.mark.parametrize("schema", BOUNDED, ids=[json.dumps(s)[:50] for s in BOUNDED])
def test_random_walks_match_reference(kimi_vocab, schema) -> None:
    clear_cache()
    compiled = compile_json_schema(schema, kimi_vocab)
    rng = random.Random(7)
    for _ in range(12):
        random_walk(compiled.matcher(), kimi_vocab, rng, 60)
    assert assert_table_matches_reference(compiled.masks) >= 3


def test_instances_match_reference(kimi_tokenizer, kimi_vocab) -> None:
    clear_cache()
    encode = make_encoder(kimi_tokenizer)
    schema = BOUNDED[3]
    compiled = compile_json_schema(schema, kimi_vocab)
    bitmask = np.zeros((1, (kimi_vocab.vocab_size + 31) // 32), dtype=np.int32)
    for title in ["x" * 120, "Ünïcødé ✓ " * 12, 'quote " and \\ back', "日本語のタイトル" * 15, "tab\there"]:
        text = json.dumps({"title": title[:120], "tags": ["a" * 12, "é"]}, ensure_ascii=False)
        matcher = compiled.matcher()
        for token in encode(text):
            matcher.fill_bitmask(bitmask)
            assert matcher.accept_token(token)
        assert matcher.is_accepting()
    assert assert_table_matches_reference(compiled.masks) > 50


def test_bounded_strings_share_per_length_masks(kimi_vocab) -> None:
    """Between two characters of a maxLength string the safe tokens come from the per-vocabulary
    table of masks by remaining length: each row holds exactly the raw-body tokens of at most
    that many characters, and a bounded string's mask is built on it."""
    index = token_index(kimi_vocab)
    chars = index.body_chars()
    for remaining in (0, 1, 2, 5, 50, 10**6):
        expected = pack_ids(index.ids[(chars >= 0) & (chars <= remaining)], index.words)
        assert np.array_equal(index.bounded_body_mask(remaining), expected), remaining
    clear_cache()
    compiled = compile_json_schema({"type": "string", "maxLength": 50}, kimi_vocab)
    matcher = compiled.matcher()
    bitmask = np.zeros((1, index.words), dtype=np.int32)
    matcher.fill_bitmask(bitmask)  # before the quote
    assert matcher.accept_token(kimi_vocab.encode_text('"')[0])
    matcher.fill_bitmask(bitmask)
    body = bitmask[0] & index.bounded_body_mask(50)
    assert np.array_equal(body, index.bounded_body_mask(50))  # every safe token of up to 50 characters
    assert assert_table_matches_reference(compiled.masks) == 2


def test_long_bounded_string_is_a_counted_repeat(kimi_vocab) -> None:
    """A long maxLength is a counted repeat without its table: every position inside the string
    stands at one state of the embedded repeat (the shared-work path: safe tokens by remaining
    length between characters, through a window of the repeat inside a character), and the
    masks equal the plain walk at the start, inside a character, and within a token's length of
    the bound, where the window is entered past its first unit."""
    from enforcer.automaton import CountedDFA

    clear_cache()
    compiled = compile_json_schema({"type": "object", "properties": {"url": {"type": "string", "maxLength": 5000}},
                                    "required": ["url"]}, kimi_vocab)
    table = compiled.masks
    index = table.index
    start = compiled.dfa.walk(0, b'{"url": "')
    states = [start]
    for prefix in (b"", b"x" * 4990, b"x" * (4999 - index.max_length // 2), b"x" * 4999):
        for tail in (b"", "é".encode()[:1], "日".encode()[:2]):
            states.append(compiled.dfa.walk(start, prefix + tail))
    assert all(s >= 0 for s in states)
    for s in states:
        block, inner, _ = compiled.dfa.embedding(s)
        assert isinstance(block.dfa, CountedDFA)
        table.mask(s)
    full = compiled.dfa.walk(states[-3], b"x")  # 5000 characters written: only the quote follows
    assert compiled.dfa.walk(full, b"x") < 0 and compiled.dfa.walk(full, "é".encode()[:1]) < 0
    assert compiled.dfa.accepting_list[compiled.dfa.walk(full, b'"}')]
    assert assert_table_matches_reference(table) == len(set(states))


def test_a_string_shared_by_union_branches_shares_its_automaton_masks(kimi_vocab) -> None:
    """The branches of a ``oneOf`` that share a property hold copies of its automaton: inside
    the string a DFA state stands in each copy at the same state, and that is still one
    embedded automaton (its safe tokens' masks shared, not walked per position: Github_medium
    o55361 spent 2-3 ms on each character of a 36-character id). Masks equal the plain walk."""
    clear_cache()
    shared = {"id": {"type": "string", "maxLength": 36}}
    schema = {"type": "object", "required": ["id", "kind"], "properties": shared, "oneOf": [
        {"properties": {"kind": {"const": "primary"}, "masters": {"type": "null"}}},
        {"properties": {"kind": {"const": "secondary"}, "masters": {"type": "array", "minItems": 1}},
         "required": ["masters"]}]}
    compiled = compile_json_schema(schema, kimi_vocab)
    start = compiled.dfa.walk(0, b'{"id": "')
    states = [compiled.dfa.walk(start, b"1234-" * k) for k in range(7)]
    assert all(s >= 0 for s in states)
    for s in states:
        inside, _ = compiled.dfa._det._block_members_reference(s) if compiled.dfa._det.kernel is None else \
            compiled.dfa._det.kernel.block_members(s)
        assert len(inside) == 2  # one copy per branch
        assert compiled.dfa.embedding(s) is not None
        compiled.masks.mask(s)
    assert assert_table_matches_reference(compiled.masks) >= len(set(states))


@pytest.mark.kernels
def test_a_pattern_body_over_ascii_bytes_shares_its_safe_tokens(kimi_vocab) -> None:
    """Inside a string whose pattern loops over a set of ASCII bytes (WashingtonPost's
    ``^([a-z]|[ ])*$``), the tokens made only of those bytes are one mask per vocabulary and
    set, not a walk over the ~60,000 such tokens per state; only tokens holding a quote,
    backslash or control byte are walked. Masks equal the plain walk."""
    clear_cache()
    body = {"type": "string", "pattern": "^([a-z]|[ ])*$"}
    compiled = compile_json_schema({"type": "object", "properties": {"a": body, "b": body}}, kimi_vocab)
    states = [compiled.dfa.walk(0, b'{"a": "ab'), compiled.dfa.walk(0, b'{"b": "x y'), compiled.dfa.walk(0, b'{"a": "')]
    for s in states:
        body = compiled.masks._class_body(s)
        assert body is not None and not body.leaving
        inside = body.inside
        assert np.flatnonzero(inside).tolist() == [0x20, *range(0x61, 0x7B)]
        compiled.masks.mask(s)
    index = token_index(kimi_vocab)
    assert index.shared.get(("class body", np.packbits(inside).tobytes())) is not None
    allowed = set(compiled.masks.allowed(states[0]).tolist())
    hello, upper, closing = (kimi_vocab.encode_text(t) for t in (" hello", "Hello", 'c"'))
    assert len(hello) == 1 and hello[0] in allowed and upper[0] not in allowed
    assert all(t in allowed for t in closing[:1])
    assert assert_table_matches_reference(compiled.masks) >= len(set(states))
    assert compiled.masks._class_body(compiled.dfa.walk(0, b'{"')) is None  # a key: not a body


@pytest.mark.kernels
def test_a_pattern_body_over_every_character_but_a_few_shares_its_safe_tokens(kimi_vocab) -> None:
    """Inside a string whose pattern loops over every character but a few ASCII ones (a file
    name's ``^[^/]+$``, a ``[^<>]`` text), the tokens it reads whole (raw-body tokens, non-ASCII
    characters included, whose ASCII bytes are all in the set) are one mask per vocabulary and
    set, not a walk over the whole vocabulary per state. Masks equal the plain walk."""
    clear_cache()
    schema = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^[^/]+$"},
                                               "text": {"type": "string", "pattern": "^[^<>]*$"}}}
    compiled = compile_json_schema(schema, kimi_vocab)
    in_name = compiled.dfa.walk(0, b'{"name": "rep')
    in_text = compiled.dfa.walk(0, '{"text": "Grüße'.encode())
    for state, excluded in ((in_name, b"/"), (in_text, b"<>")):
        body = compiled.masks._class_body(state)
        assert body is not None and not body.leaving
        inside = body.inside
        assert inside[0xC2:0xF5].all() and not inside[0x80:0xC2].any()
        assert not inside[list(excluded)].any() and inside[0x61]
        compiled.masks.mask(state)
        assert token_index(kimi_vocab).shared.get(("class body", np.packbits(inside).tobytes())) is not None
    allowed = set(compiled.masks.allowed(in_text).tolist())
    umlaut, tag, slash = (kimi_vocab.encode_text(t) for t in ("über", "<b", "/usr"))
    assert len(umlaut) == 1 and umlaut[0] in allowed and tag[0] not in allowed
    assert slash[0] not in set(compiled.masks.allowed(in_name).tolist())
    assert assert_table_matches_reference(compiled.masks) >= 2


@pytest.mark.kernels
def test_a_class_body_that_a_few_bytes_leave_walks_only_the_tokens_holding_them(kimi_vocab) -> None:
    """Inside ``^/dev/[^/]+(/[^/]+)*$`` after a name's first character, ``/`` leaves the loop
    (it starts the next name): the tokens without it are the shared class mask of ``[^/]``, and
    only the tokens holding a ``/`` (about 1,400: those starting with it below the trie's
    ``/`` node, a few hundred others one by one) or an unsafe byte are walked, not the whole
    vocabulary; right after a ``/``, where ``/`` is dead and the next character enters the
    loop, too. Masks equal the plain walk."""
    clear_cache()
    schema = {"type": "object", "properties": {"storage": {"type": "string", "pattern": "^/dev/[^/]+(/[^/]+)*$"}}}
    compiled = compile_json_schema(schema, kimi_vocab)
    in_name = compiled.dfa.walk(0, b'{"storage": "/dev/sd')
    body = compiled.masks._class_body(in_name)
    assert body is not None and body.leaving == (ord("/"),) and not body.inside[ord("/")]
    index = token_index(kimi_vocab)
    alone = index.positions_leaving(body.inside, body.leaving)  # the rest: below the trie's ``/`` node
    holding = index.ascii_bytes().starts[ord("/") + 1] - index.ascii_bytes().starts[ord("/")]
    assert 0 < alone.size < holding // 3
    assert all(b"/" in index.blobs[p] and (index.blobs[p] == b"/" or index.blobs[p][0] != ord("/"))
               for p in alone.tolist())
    compiled.masks.mask(in_name)
    allowed = set(compiled.masks.allowed(in_name).tolist())
    name, deeper, twice = (kimi_vocab.encode_text(t) for t in ("a1", "/by-id", "//"))
    assert name[0] in allowed and deeper[0] in allowed and twice[0] not in allowed
    for text in (b'{"storage": "/dev/sda1/', b'{"storage": "/dev/'):
        compiled.masks.mask(compiled.dfa.walk(0, text))
    assert assert_table_matches_reference(compiled.masks) >= 3
    # a key of ``^(/[^/]+)+$`` right after a ``/``: its next character enters the loop that
    # ``/`` leaves, so the shortcut holds there too
    keys = compile_json_schema({"type": "object", "patternProperties": {"^(/[^/]+)+$": {"type": "integer"}},
                                "additionalProperties": False}, kimi_vocab)
    after_slash = keys.dfa.walk(0, b'{"/')
    body = keys.masks._class_body(after_slash)
    assert body is not None and body.leaving == (ord("/"),)
    keys.masks.mask(after_slash)
    keys.masks.mask(keys.dfa.walk(0, b'{"/home'))
    assert assert_table_matches_reference(keys.masks) >= 2


@pytest.mark.kernels
def test_a_raw_character_unit_is_recognised_as_the_python_walk_does() -> None:
    """The compiled check that a counted repeat's unit reads one raw string character (live
    bytes and ends, pair by pair) agrees with the Python walk, on the JSON string characters
    that ``maxLength`` repeats and on units that differ by a byte or by where they end."""
    from enforcer.json_schema import _string_char_dfa
    from enforcer.regex import json_string_char

    units = {"json character": _string_char_dfa(False), "raw character": _string_char_dfa(True),
             "any code point": compile_node(json_string_char([(0, 0x10FFFF)])),
             "letters": compile_node(json_string_char([(0x61, 0x7A)])),
             "no tilde": compile_node(json_string_char([(0x20, 0x7D), (0x7F, 0x10FFFF)])),
             "or two letters": compile_node(alt(masks._RAW_BODY_CHAR, literal("ab"))),
             "or a letter twice": compile_node(alt(masks._RAW_BODY_CHAR, seq(literal("a"), literal("a")))),
             "or a lone lead byte": compile_node(alt(masks._RAW_BODY_CHAR, literal(b"\xc3")))}  # an end alone differs
    verdicts = {}
    for name, unit in units.items():
        masks._RAW_UNITS.clear()
        verdicts[name] = masks._is_raw_char_unit(unit)
        assert verdicts[name] == masks._is_raw_char_unit_reference(unit), name
    assert verdicts == {"json character": True, "raw character": True, "any code point": True, "letters": False,
                        "no tilde": False, "or two letters": False, "or a letter twice": False,
                        "or a lone lead byte": False}


@pytest.mark.kernels
def test_class_masks_and_leaving_tokens_match_the_tokens_bytes(kimi_vocab) -> None:
    """The per-byte token index gives, for a set of characters, exactly the string-body tokens
    holding no safe ASCII byte outside it (ASCII tokens only unless the set holds every
    character past ASCII), and, for bytes leaving it, exactly the safe tokens whose first byte
    outside the set is one of them, but for those of more than one byte starting with one:
    checked against the tokens' bytes, token by token."""
    index = token_index(kimi_vocab)
    body = set(index._raw_body_positions().tolist())
    rng = np.random.default_rng(7)
    for wide in (False, True):
        inside = masks._SAFE_BYTES & (np.arange(256) < 0x80) & (rng.random(256) < 0.7)
        inside[0xC2:0xF5] = wide
        leaving = tuple(int(b) for b in rng.choice(np.flatnonzero(masks._SAFE_BYTES[:0x80] & ~inside[:0x80]), 2,
                                                     replace=False))
        expected_ids, expected_leaving = [], []
        for position, blob in enumerate(index.blobs):
            if position in body and all(inside[c] if c < 0x80 else wide for c in blob):
                expected_ids.append(int(index.ids[position]))
            stop = next((c for c in blob if not (inside[c] or (wide and c >= 0x80))), None)
            if index.safe[position] and stop in leaving and (len(blob) == 1 or blob[0] not in leaving):
                expected_leaving.append(position)
        assert np.array_equal(index.class_body_mask(inside), pack_ids(expected_ids, index.words)), wide
        assert index.positions_leaving(inside, leaving).tolist() == expected_leaving, (wide, leaving)


@pytest.mark.kernels
def test_a_bounded_run_of_one_class_shares_its_safe_tokens_up_to_its_depth(kimi_vocab) -> None:
    """A bounded run of one character class (a ``^[a-z0-9-]{1,63}$`` pattern, a hostname label
    of ``format: email``) reads like the class's loop for as many bytes as it has left: the
    tokens of the class up to that length are its shared class mask cut to that length, the
    few longer ones are walked, and so are those holding a byte that leaves the run (``.`` and
    ``-`` in a label). With fewer bytes left than the vocabulary's long-token bound the state
    is walked as it stands. Masks equal the plain walk."""
    clear_cache()
    index = token_index(kimi_vocab)
    assert index.safe_positions_longer(index.long_bound).size <= masks._MAX_LONG_TOKENS
    assert np.count_nonzero(index.safe[index.lengths > index.long_bound - 1]) > masks._MAX_LONG_TOKENS
    schema = {"type": "object", "properties": {"tag": {"type": "string", "pattern": "^[a-z0-9-]{1,63}$"},
                                               "to": {"type": "string", "format": "email"}}}
    compiled = compile_json_schema(schema, kimi_vocab)
    in_tag = compiled.dfa.walk(0, b'{"tag": "ab')
    body = compiled.masks._class_body(in_tag)
    assert body is not None and body.depth == 61 and not body.leaving
    assert np.flatnonzero(body.inside).tolist() == [0x2D, *range(0x30, 0x3A), *range(0x61, 0x7B)]
    near_the_end = compiled.dfa.walk(0, b'{"tag": "' + b"a" * 60)
    assert compiled.masks._class_body(near_the_end) is None
    for state in (in_tag, near_the_end):
        compiled.masks.mask(state)
    assert assert_table_matches_reference(compiled.masks) >= 2
    in_label = compiled.dfa.walk(0, b'{"to": "maria.rossi@example')
    block, inner, _ = compiled.dfa.embedding(in_label)
    label = masks.find_class_body(index, block.dfa, inner)
    assert label is not None and index.long_bound <= label.depth < index.max_length
    assert label.leaving == (ord("-"), ord("."))
    assert np.array_equal(masks.safe_part(index, block.dfa, inner),
                          reference_mask(index, block.dfa, inner) & index.safe_words())
    for text in (b'{"to": "maria.rossi@example', b'{"to": "maria.rossi@example.com', b'{"to": "a@b-'):
        state = compiled.dfa.walk(0, text)
        assert np.array_equal(compiled.masks.mask(state), reference_mask(index, compiled.dfa, state)), text


def test_the_raw_body_reads_ascii_only_at_a_character_boundary() -> None:
    """:func:`masks.class_loop` cuts a set's ASCII bytes from the raw string body's start state
    alone: that must be the only state with ASCII edges (the others read continuation bytes)."""
    raw = masks._RAW_STRING_DFA.transitions
    assert raw[0, 0x61] == 0 and not (raw[1:, :0x80] >= 0).any()


def test_raw_argument_values_match_reference(kimi_k3_vocab) -> None:
    """Kimi K3 argument values are raw text (control bytes and quotes allowed): the embedded
    and string-body shortcuts must not drop the tokens a JSON string would refuse; a free
    value's states read any text, whose mask is one per vocabulary."""
    clear_cache()
    params = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 30},
                                               "body": {"type": "string", "pattern": "^[a-z\"\\n]+$"},
                                               "free": {"type": "string"}},
              "required": ["text", "body", "free"]}
    split = split_arguments(params, kimi_k3_vocab, SchemaOptions())
    rng = random.Random(3)
    checked = 0
    for key in split.keys:
        (value,) = key.values
        for _ in range(10):
            random_walk(value.matcher(), kimi_k3_vocab, rng, 40)
        checked += assert_table_matches_reference(value.masks)
        if key.name == "free":  # a line break, a quote: plain text in a raw value, the shared text mask
            assert value.masks._is_text_body(0) and not value.masks._is_string_body(0)
            assert np.array_equal(value.masks.mask(0), token_index(kimi_k3_vocab).text_body_mask())
            allowed = set(value.masks.allowed(0).tolist())
            assert all(kimi_k3_vocab.encode_text(t)[0] in allowed for t in ("\n", '"', "a\n"))
    assert checked > 10


def _teacher_forced(cases, tokenizer, vocab):
    """Each case's schema compiled cold (those that do not compile are the conformance suite's
    business), then its valid instances teacher-forced (each token's mask filled, then the
    token accepted): yields the compiled objects."""
    encode = make_encoder(tokenizer)
    bitmask = np.zeros((1, (vocab.vocab_size + 31) // 32), dtype=np.int32)
    for case in cases:
        clear_cache()
        try:
            compiled = compile_json_schema(case.schema, vocab)
        except Exception:
            continue
        for instance in case.instances:
            if not instance.valid:
                continue
            matcher = compiled.matcher()
            for token in encode(json.dumps(instance.data)):
                matcher.fill_bitmask(bitmask)
                if not matcher.accept_token(token):
                    break
        yield compiled


@pytest.mark.corpus
def test_maskbench_masks_match_reference(corpus_dir: Path, kimi_tokenizer, kimi_vocab) -> None:
    """Every mask computed while teacher-forcing the valid instances of a MaskBench sample."""
    checked = 0
    for compiled in _teacher_forced(spread_sample(load_maskbench(corpus_dir), 150), kimi_tokenizer, kimi_vocab):
        checked += assert_table_matches_reference(compiled.masks)
    assert checked > 1000


@pytest.mark.corpus
def test_negated_class_bodies_match_reference_on_the_corpora(corpus_dir: Path, kimi_tokenizer, kimi_vocab) -> None:
    """Every mask computed while teacher-forcing the valid instances of every MaskBench and
    JSONSchemaBench schema that writes a negated class (``[^/]``, ``[^:\\s]``): the class-body
    shortcut over every character past ASCII, and with bytes leaving the loop, against the
    plain walk."""
    cases = [case for case in load_maskbench(corpus_dir) + load_jsonschemabench(corpus_dir)
             if "[^" in json.dumps(case.schema)]
    checked = leaving = 0
    for compiled in _teacher_forced(cases, kimi_tokenizer, kimi_vocab):
        for state in list(compiled.masks._masks) + list(compiled.masks._few):
            body = compiled.masks._class_body(state)
            leaving += body is not None and bool(body.leaving)
        checked += assert_table_matches_reference(compiled.masks)
    assert checked > 5000 and leaving > 100


@pytest.mark.corpus
def test_bounded_class_bodies_match_reference_on_the_corpora(corpus_dir: Path, kimi_tokenizer, kimi_vocab) -> None:
    """Every mask computed while teacher-forcing the valid instances of 100 MaskBench and
    JSONSchemaBench schemas with a bounded repeat in a pattern (``[a-z0-9-]{1,63}``) or a
    hostname-bearing ``format`` (``email``, ``hostname``, ``uri``): the class-body shortcut cut
    to a bounded run's depth, in the schema's own automaton and in the shared parts of a
    format's, against the plain walk."""
    marks = ("]{", '"format": "email"', '"format": "hostname"', '"format": "uri"')
    cases = spread_sample([case for case in load_maskbench(corpus_dir) + load_jsonschemabench(corpus_dir)
                           if any(mark in json.dumps(case.schema) for mark in marks)], 100)
    checked = bounded = 0
    for compiled in _teacher_forced(cases, kimi_tokenizer, kimi_vocab):
        table = compiled.masks
        for state in list(table._masks) + list(table._few):
            body = None
            embedding = table.dfa.embedding(state) if isinstance(table.dfa, LazyDFA) else None
            if embedding is None:
                body = table._class_body(state)
            elif isinstance(embedding[0].dfa, automaton.DFA):  # a counted block's own windows: not counted here
                body = masks.find_class_body(table.index, embedding[0].dfa, embedding[1])
            bounded += body is not None and body.depth < table.index.max_length
        checked += assert_table_matches_reference(table)
    assert checked > 5000 and bounded > 200


def test_pack_ids_sparse_few_and_dense_agree_with_packbits(monkeypatch) -> None:
    """pack_ids (a loop for a few ids, per-word sums when sparse, a bool array when dense)
    sets exactly the bits of the ids, the high bit of a word included."""
    rng = np.random.default_rng(2)
    vocab_size = 151_899
    words = (vocab_size + 31) // 32
    for n in (0, 1, 2, 7, 8, 9, 40, 3_000, 100_000):
        ids = np.sort(rng.choice(vocab_size, n, replace=False))
        if n:
            ids[0] = 31 if n > 1 else vocab_size - 1
            ids = np.unique(ids)
        bits = np.zeros(words * 32, dtype=bool)
        bits[ids] = True
        expected = np.packbits(bits, bitorder="little").view("<i4")
        assert np.array_equal(pack_ids(ids, words), expected), n
        if n <= 8:  # the few-id loop, compiled and in Python, over every form of collection it is given
            for form in (ids.tolist(), tuple(ids.tolist()), dict.fromkeys(ids.tolist())):
                assert np.array_equal(pack_ids(form, words), expected), (n, type(form))
                with monkeypatch.context() as patched:
                    patched.setattr(masks, "pack_few_ids", None)
                    assert np.array_equal(pack_ids(form, words), expected), (n, type(form), "python")


def test_compiled_few_id_packing_refuses_an_id_outside_the_mask() -> None:
    kernels = pytest.importorskip("enforcer._kernels")
    for bad in (-1, 64):
        with pytest.raises(ValueError, match=f"id {bad} is not below 64"):
            kernels.pack_few_ids([3, bad], 2)


def test_token_tries_mask_exactly_their_children(kimi_vocab) -> None:
    """A trie node's mask holds exactly the ids of its children, whatever order they were added
    in, read-only. Up to ``_FEW_IDS`` ids it is packed afresh (cheaper than a shared entry's
    lookup: the first sight of a tag word); larger sets are shared per vocabulary and id set."""
    from enforcer.masks import _FEW_IDS
    from enforcer.text_rules import TokenTrie

    def ids_of(mask: np.ndarray) -> list[int]:
        return np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")).tolist()

    index = token_index(kimi_vocab)
    first = TokenTrie([((7, 40_000), "a"), ((7, 151_000), "b"), ((9,), "c")], index)
    second = TokenTrie([((9, 5), "x"), ((7, 151_000), "y")], index)
    root = first.mask(0)
    assert not root.flags.writeable
    assert ids_of(root) == ids_of(second.mask(0)) == ids_of(index.ids_mask([9, 7])) == [7, 9]
    assert ids_of(first.mask(first.step(0, 7))) == [40_000, 151_000]
    assert ids_of(second.mask(second.step(0, 7))) == [151_000]
    many = [(3 * k + 1,) for k in range(_FEW_IDS + 1)]
    wide, again = TokenTrie([(ids, ids) for ids in many], index), TokenTrie([(ids, ids) for ids in reversed(many)], index)
    assert wide.mask(0) is again.mask(0)
    assert ids_of(wide.mask(0)) == [ids[0] for ids in many]
    assert not wide.mask(0).flags.writeable


def test_a_large_embedded_table_keeps_its_safe_parts_itself(kimi_vocab, monkeypatch) -> None:
    """Safe parts are shared by content (a digest of the table) only for tables up to
    CONTENT_KEYED_MAX_BYTES: a larger table is not digested (24 ms for an 18,942-state table of
    256 columns) but keeps its own, as long as it lives; masks equal the plain walk either way.
    The limit is lowered here to 64 KiB: the 7,203 states below are held over 29 byte classes
    (836 KB), under the real limit."""
    from enforcer import masks
    from enforcer.automaton import DFA

    monkeypatch.setattr(masks, "CONTENT_KEYED_MAX_BYTES", 64 * 1024)
    CONTENT_KEYED_MAX_BYTES = masks.CONTENT_KEYED_MAX_BYTES
    clear_cache()
    tag = {"type": "string", "not": {"pattern": "a[ab]{10}$"}}  # built whole: over 7,000 states
    compiled = compile_json_schema({"type": "object", "properties": {"tag": tag, "n": {"type": "integer"}},
                                    "required": ["tag", "n"], "additionalProperties": False}, kimi_vocab)
    state = compiled.dfa.walk(0, b'{"tag": "ab')
    block, inner, _ = compiled.dfa.embedding(state)
    assert isinstance(block.dfa, DFA) and block.dfa.table.nbytes > CONTENT_KEYED_MAX_BYTES
    compiled.masks.mask(state)
    assert block.dfa._content_key is None  # never digested
    assert inner in compiled.masks.index.large_safe_parts[block.dfa]
    assert assert_table_matches_reference(compiled.masks) >= 1


def test_format_masks_outlive_clear_cache(kimi_vocab, monkeypatch) -> None:
    """A ``format`` automaton is a constant of the library: its states' safe parts are kept per
    vocabulary across clear_cache() (a new schema embedding it walks nothing again), while an
    embedded pattern's are dropped; masks equal the plain walk either way."""
    from enforcer.regex import is_format_table

    schema = {"type": "object", "properties": {"to": {"type": "string", "format": "email"},
                                               "code": {"type": "string", "not": {"pattern": "a[ab]{3}$"}}},
              "required": ["to", "code"], "additionalProperties": False}
    walks: list[int] = []
    walk = masks._safe_walk
    monkeypatch.setattr(masks, "_safe_walk", lambda index, dfa, state: walks.append(state) or walk(index, dfa, state))

    def fill(prefix: bytes) -> tuple[object, np.ndarray]:
        compiled = compile_json_schema(schema, kimi_vocab, strict=False)
        state = compiled.dfa.walk(0, prefix)
        block, inner, _ = compiled.dfa.embedding(state)
        mask = compiled.masks.mask(state)
        assert np.array_equal(mask, reference_mask(compiled.masks.index, compiled.dfa, state))
        return block.dfa, mask

    clear_cache()
    token_index(kimi_vocab).format_parts.clear()  # kept across clear_cache(): other tests may have filled it
    email, first = fill(b'{"to": "ann@exa')
    assert is_format_table(email) and len(walks) == 1
    clear_cache()
    again, second = fill(b'{"to": "ann@exa')
    assert again is email and np.array_equal(first, second) and len(walks) == 1  # kept: no walk
    pattern, _ = fill(b'{"to": "a@b.c", "code": "ab')
    assert not is_format_table(pattern) and len(walks) == 2
    clear_cache()
    fill(b'{"to": "a@b.c", "code": "ab')
    assert len(walks) == 3  # dropped with the shared masks: walked again


DECODE_WITHOUT_NUMPY_MA = '''
import sys
import numpy as np
from enforcer import Vocabulary, compile_json_schema
from enforcer.testing.tokenizers import kimi_k2_tokenizer
tokenizer = kimi_k2_tokenizer()
vocab = Vocabulary.from_tokenizer(tokenizer)
assert "numpy.ma" not in sys.modules, "loaded before the decode: the check cannot tell"
schema = {"type": "object", "properties": {"x": {"type": "array"}, "y": {"type": "array"}}}
text = '{"x": [0.4, 0.7, 0.9], "y": [0.2, {"a": [true, null]}, "s"]}'
matcher = compile_json_schema(schema, vocab).matcher()
bitmask = np.zeros((1, (vocab.vocab_size + 31) // 32), np.int32)
for token in tokenizer.encode(text, add_special_tokens=False):
    matcher.fill_bitmask(bitmask)
    assert matcher.accept_token(token)
print("numpy.ma loaded:", "numpy.ma" in sys.modules)
'''


def test_a_decode_never_imports_numpy_ma() -> None:
    """numpy 2's plain ``np.unique`` imports ``numpy.ma`` on its first call in a process (~10
    ms): a free-form array's first masks called it (building the rows a walk stopped at), and
    that import landed inside a decode step (7 ms in a first-sight run). A fresh process, as
    only its first call pays."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", DECODE_WITHOUT_NUMPY_MA], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "numpy.ma loaded: False" in done.stdout, done.stdout
