"""``uniqueItems`` on arrays of strings, enforced by the matcher's item memory beside the
automaton: every mask bit checked against ``accept_token``, every verdict against jsonschema,
random walks that must never reach a state with no token left, and the refusals where the place
of an array does not say by itself whether its items must differ."""

import itertools
import json
import random

import jsonschema
import numpy as np
import pytest

from enforcer import UnsupportedSchemaError, compile_json_schema, compile_tools
from enforcer.formats import kimi_k2
from enforcer.json_schema import SchemaOptions
from enforcer.matcher import compile_schema_dfa
from enforcer.testing.tokenizers import encode_as_text

TAGS = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
        "required": ["tags"]}


def bit(words, token):
    return bool((int(words.view("uint32")[token >> 5]) >> (token & 31)) & 1)


def feed(matcher, ids):
    """Teacher-force ``ids``; each mask bit must agree with ``accept_token``. Returns how many
    were accepted."""
    for done, token in enumerate(ids):
        allowed = bit(matcher.mask_words(), token)
        accepted = matcher.accept_token(token)
        assert allowed == accepted, (done, token)
        if not accepted:
            return done
    return len(ids)


def writings(value):
    return {json.dumps(value), json.dumps(value, separators=(",", ":")), json.dumps(value, ensure_ascii=True),
            json.dumps(value, indent=2)}


@pytest.mark.parametrize("schema", [
    TAGS,
    {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True, "maxItems": 3},
    {"type": "array", "items": {"enum": ["a", "b", "é"]}, "uniqueItems": True},
    {"type": "array", "items": {"type": "string", "maxLength": 1}, "uniqueItems": True},
    # strings by every branch of a union, one of them behind a reference
    {"type": "array", "items": {"anyOf": [{"enum": ["ab", "b"]}, {"$ref": "#/$defs/short"}]}, "uniqueItems": True,
     "$defs": {"short": {"type": "string", "maxLength": 1}}},
])
def test_verdicts_match_jsonschema(schema, kimi_tokenizer, kimi_vocab):
    compiled = compile_json_schema(schema, kimi_vocab)
    validator = jsonschema.Draft202012Validator(schema)
    pool = ["a", "b", "é", "", "ab", "A"]
    arrays = [list(p) for n in range(4) for p in itertools.product(pool, repeat=n)][:400]
    for array in arrays:
        value = {"tags": array} if schema is TAGS else array
        for text in writings(value):
            ids = encode_as_text(kimi_tokenizer, text)
            matcher = compiled.matcher()
            whole = feed(matcher, ids) == len(ids) and matcher.is_accepting()
            assert whole == validator.is_valid(value), text


def test_one_string_in_two_spellings_is_one_item(kimi_tokenizer, kimi_vocab):
    compiled = compile_json_schema(TAGS, kimi_vocab)
    for text in ('{"tags": ["xA", "x\\u0041"]}', '{"tags": ["a/b", "a\\/b"]}', '{"tags": ["\\n", "\\u000a"]}'):
        ids = encode_as_text(kimi_tokenizer, text)
        assert feed(compiled.matcher(), ids) < len(ids), text
    ids = encode_as_text(kimi_tokenizer, '{"tags": ["xA", "x\\u0042"]}')
    assert feed(compiled.matcher(), ids) == len(ids)


def test_items_that_run_out_close_the_array(kimi_tokenizer, kimi_vocab):
    """Once every string the items allow is written, no comma is allowed: a matcher never
    reaches a state from which nothing can finish."""
    compiled = compile_json_schema({"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True}, kimi_vocab)
    matcher = compiled.matcher()
    assert feed(matcher, encode_as_text(kimi_tokenizer, '["a","b"')) == len(encode_as_text(kimi_tokenizer, '["a","b"'))
    allowed = [kimi_vocab.token_bytes(t) for t in matcher.allowed_token_ids()]
    assert allowed and not any(b"," in t for t in allowed) and any(b"]" in t for t in allowed)


def test_random_walks_never_dead_end(kimi_vocab):
    schemas = [
        {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True, "minItems": 2},
        {"type": "array", "items": {"type": "string", "pattern": "^[ab]{1,2}$"}, "uniqueItems": True},
        {"type": "array", "items": {"type": "string", "maxLength": 1}, "uniqueItems": True, "maxItems": 8},
        TAGS,
    ]
    rng = random.Random(7)
    for schema in schemas:
        compiled = compile_json_schema(schema, kimi_vocab)
        validator = jsonschema.Draft202012Validator(schema)
        for _ in range(12):
            matcher, text = compiled.matcher(), b""
            for _ in range(60):
                if matcher.is_accepting() and rng.random() < 0.15:
                    break
                allowed = matcher.allowed_token_ids()
                if not allowed and matcher.is_accepting():
                    break  # the value is whole
                assert allowed, (schema, text)  # never a state with nothing left
                # favour short tokens and the array's own punctuation, so arrays fill up
                choices = [t for t in allowed if len(kimi_vocab.token_bytes(t)) <= 2] or allowed
                token = rng.choice(choices)
                assert matcher.accept_token(token)
                text += kimi_vocab.token_bytes(token)
            if matcher.is_accepting():
                assert validator.is_valid(json.loads(text)), text


def test_rollback_forgets_items(kimi_tokenizer, kimi_vocab):
    compiled = compile_json_schema(TAGS, kimi_vocab)
    matcher = compiled.matcher()
    head = encode_as_text(kimi_tokenizer, '{"tags": ["a"')
    assert feed(matcher, head) == len(head)
    tail = encode_as_text(kimi_tokenizer, ', "a"]}')
    assert feed(matcher, tail) < len(tail)
    matcher.rollback(matcher.num_tokens - len(head))
    again = encode_as_text(kimi_tokenizer, ', "b"]}')
    assert feed(matcher, again) == len(again) and matcher.is_accepting()
    matcher.rollback(matcher.num_tokens)
    whole = encode_as_text(kimi_tokenizer, '{"tags": ["b", "a"]}')
    assert feed(matcher, whole) == len(whole) and matcher.is_accepting()


def test_pattern_properties_apply_by_key(kimi_tokenizer, kimi_vocab):
    schema = {"type": "object",
              "patternProperties": {"^u": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
              "additionalProperties": {"type": "array", "items": {"type": "string"}}}
    compiled = compile_json_schema(schema, kimi_vocab)
    for text, valid in (('{"up": ["a", "a"]}', False), ('{"down": ["a", "a"]}', True), ('{"up": ["a", "b"]}', True)):
        ids = encode_as_text(kimi_tokenizer, text)
        matcher = compiled.matcher()
        assert (feed(matcher, ids) == len(ids) and matcher.is_accepting()) == valid, text


@pytest.mark.parametrize("schema, reason", [
    ({"anyOf": [{"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                {"type": "array", "items": {"type": "string"}, "maxItems": 3}]}, "may describe the same array"),
    ({"type": "array", "items": {"type": "object"}, "uniqueItems": True}, "other than strings"),
    ({"uniqueItems": True}, "other than strings"),
    ({"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "integer"}]}, "uniqueItems": True},
     "other than strings"),
    ({"type": "array", "items": {"anyOf": [{"type": "string"}, {"pattern": "^a"}]}, "uniqueItems": True},
     "other than strings"),  # the second branch admits every value that is not a string too
    ({"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True, "minItems": 3}, "minItems 3"),
    ({"properties": {"x": {"anyOf": [{}, {"type": "array", "items": {"type": "string"}, "uniqueItems": True}]}}},
     "only loosely"),
    ({"$defs": {"n": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/n"}},
                                                        "tags": {"type": "array", "items": {"type": "string"},
                                                                 "uniqueItems": True}}}},
      "$ref": "#/$defs/n"}, "recursive"),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True, "contains": {"const": "a"}}, "contains"),
])
def test_refusals_name_why(schema, reason, kimi_vocab):
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema(schema, kimi_vocab, strict=False)
    assert info.value.keyword == "uniqueItems" and reason in str(info.value), str(info.value)


def test_only_matchers_with_item_memory_take_it(kimi_vocab):
    """The bare automaton refuses it (it cannot remember items); a ``uniqueItems`` another
    type rules out is nothing to enforce; inside ``not`` it is refused."""
    schema = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    with pytest.raises(UnsupportedSchemaError):
        compile_schema_dfa(schema, SchemaOptions())
    compile_schema_dfa({"type": "string", "uniqueItems": True}, SchemaOptions())
    with pytest.raises(UnsupportedSchemaError):
        compile_json_schema({"not": schema}, kimi_vocab)


def test_tool_arguments_remember_items(kimi_tokenizer, kimi_vocab):
    """Kimi K2 calls: each call's JSON arguments have their own item memory (a pydantic
    ``set[str]`` field), kept across rollback, fresh in the next call."""
    tool = {"type": "function", "function": {"name": "tag", "parameters": TAGS}}
    tools = compile_tools([tool], kimi_vocab)

    def call(counter, arguments):
        ids = [kimi_vocab.token_id(kimi_k2.CALL_BEGIN)] + encode_as_text(kimi_tokenizer, f"functions.tag:{counter}")
        ids += [kimi_vocab.token_id(kimi_k2.ARGUMENT_BEGIN)] + encode_as_text(kimi_tokenizer, arguments)
        return ids + [kimi_vocab.token_id(kimi_k2.CALL_END)]

    section = [kimi_vocab.token_id(kimi_k2.SECTION_BEGIN)]
    good = section + call(0, '{"tags": ["a", "b"]}') + call(1, '{"tags": ["a"]}')
    matcher = tools.matcher()
    assert feed(matcher, good) == len(good)
    assert [json.loads(c["function"]["arguments"]) for c in matcher.calls] == [{"tags": ["a", "b"]}, {"tags": ["a"]}]
    bad = section + call(0, '{"tags": ["a", "a"]}')
    matcher = tools.matcher()
    refused = feed(matcher, bad)
    assert refused < len(bad) - 1 and kimi_vocab.token_bytes(bad[refused]).startswith(b'"')  # the closing quote
    matcher.rollback(1)
    rest = encode_as_text(kimi_tokenizer, 'b"]}') + [kimi_vocab.token_id(kimi_k2.CALL_END)]
    assert feed(matcher, rest) == len(rest)


def test_escaped_prefixes_are_compared_as_strings(kimi_tokenizer, kimi_vocab):
    """Bounded items written with escapes: the duplicate is refused wherever its last
    character comes, and a fresh one is not, whichever spelling came first."""
    schema = {"type": "array", "items": {"type": "string", "maxLength": 4}, "uniqueItems": True}
    compiled = compile_json_schema(schema, kimi_vocab)
    for text, valid in (('["a\\nb", "a\\u000ab"]', False), ('["a\\u000ab", "a\\nb"]', False),
                        ('["a\\nb", "a\\nc"]', True), ('["\\u00e9t\\u00e9", "\\u00e9t\\u00e9"]', False),
                        ('["\\ud83d\\ude00", "\\ud83d\\ude01"]', True), ('["\\ud83d\\ude00", "\\ud83d\\ude00"]', False)):
        ids = encode_as_text(kimi_tokenizer, text)
        matcher = compiled.matcher()
        assert (feed(matcher, ids) == len(ids) and matcher.is_accepting()) == valid, text


def test_fast_refusals_equal_scanning_every_token(kimi_tokenizer, kimi_vocab):
    """The lookups of ``forbidden_tokens`` against their oracle: ``scan`` run on every allowed
    token, at states of random walks over items that never run out and items that may."""
    from enforcer.item_memory import forbidden_tokens, scan

    schemas = [TAGS,
               {"type": "array", "items": {"type": "string", "maxLength": 2}, "uniqueItems": True},
               {"type": "array", "items": {"enum": ["a", "ab", 'b"', "é\\n"]}, "uniqueItems": True}]
    rng = random.Random(3)
    tokens = kimi_vocab.byte_tokens

    def check(compiled, matcher):
        state = matcher._scans[-1]
        base = compiled.masks.mask(matcher._states[-1])
        every = np.flatnonzero(np.unpackbits(base.view(np.uint8), bitorder="little")).tolist()
        oracle = sorted(t for t in every if scan(compiled.unique_plan, state, tokens[t]) is None)
        assert sorted(set(forbidden_tokens(compiled.unique_plan, state, base, kimi_vocab))) == oracle, state

    # items used up inside the last one: a token that closes it and opens another is refused
    enum = compile_json_schema({"type": "array", "items": {"enum": ["German", "International"]}, "uniqueItems": True},
                               kimi_vocab)
    matcher = enum.matcher()
    assert matcher.accept_tokens(encode_as_text(kimi_tokenizer, '["German","International'))
    check(enum, matcher)
    assert not any(b'",' in tokens[t] for t in matcher.allowed_token_ids())
    for schema in schemas:
        compiled = compile_json_schema(schema, kimi_vocab)
        plan = compiled.unique_plan
        matcher = compiled.matcher()
        checked = 0
        for _ in range(60):
            state = matcher._scans[-1]
            base = compiled.masks.mask(matcher._states[-1])
            if state.containers and state.containers[-1].items is not None and rng.random() < 0.4:
                every = np.flatnonzero(np.unpackbits(base.view(np.uint8), bitorder="little")).tolist()
                oracle = sorted(t for t in every if scan(plan, state, tokens[t]) is None)
                assert sorted(set(forbidden_tokens(plan, state, base, kimi_vocab))) == oracle, state
                checked += 1
            allowed = matcher.allowed_token_ids()
            if not allowed:
                break
            short = [t for t in allowed if len(tokens[t]) <= 3] or allowed
            assert matcher.accept_token(rng.choice(short))
        assert checked


def test_per_vocabulary_tables_hold_no_python_container_per_token(kimi_vocab):
    """The lookups of what tokens write into a string are kept per vocabulary for the
    process's life: as containers per group (150,000 lists of ids for the 151,899-id test vocabulary)
    they made every full collection walk that many more objects, and building them triggered
    one of ~110 ms inside a decode. Now they are a dict of ints and arrays."""
    import gc

    from enforcer.item_memory import _QUOTE_TOKENS, _UNQUOTED, quote_tokens, unquoted_tokens
    _QUOTE_TOKENS.clear()
    _UNQUOTED.clear()
    gc.collect()
    before = len(gc.get_objects())
    unquoted = unquoted_tokens(kimi_vocab)
    quotes = quote_tokens(kimi_vocab)
    gc.collect()
    assert len(gc.get_objects()) - before < 2_000
    for table in (unquoted, quotes.inside.single, quotes.between.trailing):  # nothing the collector walks item by item
        assert all(len(gc.get_referents(part)) < 1_000 for part in gc.get_referents(table) if gc.is_tracked(part))
    assert len(unquoted) > 50_000 and len(quotes.inside.single) > 100  # the tables are whole
    assert kimi_vocab.byte_tokens[int(unquoted.get(b"hello")[0])] == b"hello"
