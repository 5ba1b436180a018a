"""Memory of compiled objects and the byte cap of the process-wide caches."""

from __future__ import annotations

import gc
import json
import tracemalloc

import numpy as np
import pytest

import enforcer
from enforcer import compile_json_schema, compile_tools


def _decode(compiled, vocab, text: str) -> None:
    matcher = compiled.matcher()
    bitmask = np.zeros((1, (vocab.vocab_size + 31) // 32), dtype=np.int32)
    for token in vocab.encode_text(text):
        matcher.fill_bitmask(bitmask)
        assert matcher.accept_token(token)


def _schema(i: int) -> dict:
    return {"type": "object", "properties": {f"field_{i}": {"type": "string", "maxLength": 20 + i},
                                             "count": {"type": "integer", "minimum": i}},
            "required": [f"field_{i}", "count"]}


def test_memory_size_counts_masks(kimi_vocab) -> None:
    enforcer.clear_cache()
    compiled = compile_json_schema(_schema(0), kimi_vocab)
    before = compiled.memory_size_bytes()
    _decode(compiled, kimi_vocab, json.dumps({"field_0": "some text here", "count": 3}))
    words = (kimi_vocab.vocab_size + 31) // 32
    packed = len(compiled.masks._masks)
    listed = [ids for ids in compiled.masks._few.values() if ids is not None]  # masks kept as their few ids
    assert packed + len(listed) >= 10  # at least ten new masks
    assert compiled.memory_size_bytes() >= before + packed * words * 4 + sum(8 * len(ids) for ids in listed)
    tools = compile_tools([{"type": "function", "function": {"name": "f", "parameters": _schema(1)}}], kimi_vocab)
    assert tools.memory_size_bytes() > 0


def test_stream_of_distinct_schemas_levels_off(kimi_vocab) -> None:
    """With a 6 MB cap, 40 distinct schemas (each decoded once, ~1-2 MB of masks) keep the
    caches under the cap, and the traced memory stops growing once the cap is reached."""
    enforcer.clear_cache()
    limit = 6 << 20
    enforcer.set_cache_limit(limit)
    try:
        gc.collect()
        tracemalloc.start()
        traced = []
        for i in range(40):
            compiled = compile_json_schema(_schema(i), kimi_vocab)
            _decode(compiled, kimi_vocab, json.dumps({f"field_{i}": "x" * 10, "count": i + 1}))
            del compiled
            assert enforcer.cache_size_bytes() <= limit + (3 << 20)  # the newest object may overflow alone
            gc.collect()
            traced.append(tracemalloc.get_traced_memory()[0])
        tracemalloc.stop()
        assert max(traced[20:]) - max(traced[:20]) < 4 << 20, traced
    finally:
        enforcer.set_cache_limit(enforcer.lru.DEFAULT_CACHE_LIMIT_BYTES)
        enforcer.clear_cache()


def test_clear_cache_frees_memory(kimi_vocab) -> None:
    enforcer.clear_cache()
    for i in range(5):
        _decode(compile_json_schema(_schema(100 + i), kimi_vocab), kimi_vocab,
                json.dumps({f"field_{100 + i}": "abc", "count": 200}))
    assert enforcer.cache_size_bytes() > 0
    enforcer.clear_cache()
    assert enforcer.cache_size_bytes() == 0


def test_set_cache_limit_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        enforcer.set_cache_limit(-1)
    with pytest.raises(ValueError, match="non-negative"):
        enforcer.set_cache_limit("1GB")


class _Sized:
    """A cached value whose size the test sets (grows like a compiled object's masks)."""

    def __init__(self, size: int) -> None:
        self.size = size


def _counting_pool(limit: int) -> tuple[enforcer.lru.BytePool, enforcer.lru.LRU, list[int]]:
    calls = [0]

    def sizeof(value: _Sized) -> int:
        calls[0] += 1
        return value.size

    pool = enforcer.lru.BytePool(limit)
    return pool, enforcer.lru.LRU(10_000, pool, sizeof), calls


def test_a_store_measures_a_few_entries_amortised_not_every_cached_one() -> None:
    """800 stores into one pool far below its limit: each new entry is measured once and all of
    them again every max(RECOUNT_MIN_STORES, entries / RECOUNT_SHARE) stores, about
    RECOUNT_SHARE measures per store amortised (one per cached entry on every store was 320,000)."""
    pool, cache, calls = _counting_pool(1 << 40)
    for i in range(800):
        cache.put(i, _Sized(10))
    assert calls[0] <= 800 * (1 + 2 * enforcer.lru.RECOUNT_SHARE), calls[0]
    assert pool.recorded == 8_000
    assert pool.size_bytes() == 8_000


def test_the_pool_sees_an_entry_grow_after_it_was_stored_within_a_share_of_stores() -> None:
    """An entry that grows past the limit after it was stored (masks filled lazily) is counted
    within max(RECOUNT_MIN_STORES, entries / RECOUNT_SHARE) stores while the recorded total is
    below half the limit, and the least recently used entries go then."""
    lru = enforcer.lru
    pool, cache, _ = _counting_pool(10_000)
    grown = _Sized(10)
    cache.put("grown", grown)
    for i in range(160):
        cache.put(i, _Sized(10))
    grown.size = 20_000  # over the limit alone
    for i in range(160, 160 + max(lru.RECOUNT_MIN_STORES, 161 // lru.RECOUNT_SHARE) + 1):
        cache.put(i, _Sized(10))
    assert cache.get("grown") is None  # the oldest, evicted once its growth was counted
    assert pool.recorded <= 10_000 and pool.size_bytes() == pool.recorded


def test_past_half_its_limit_the_pool_counts_on_every_store() -> None:
    pool, cache, _ = _counting_pool(10_000)
    grown = _Sized(6_000)  # over half the limit: every store measures again
    cache.put("grown", grown)
    cache.put(0, _Sized(10))
    grown.size = 20_000
    cache.put(1, _Sized(10))
    assert cache.get("grown") is None


def test_dropped_and_cleared_entries_leave_the_total() -> None:
    pool = enforcer.lru.BytePool(1 << 40)
    small = enforcer.lru.LRU(3, pool, lambda value: value.size)
    other = enforcer.lru.LRU(10, pool, lambda value: value.size)
    for i in range(5):  # two dropped by the entry cap
        small.put(i, _Sized(100 + i))
    other.put("x", _Sized(7))
    assert pool.recorded == 102 + 103 + 104 + 7 == pool.size_bytes()
    small.clear()
    assert pool.recorded == 7 == pool.size_bytes()


def test_a_compile_and_its_decode_leave_no_cycles_for_the_collector(kimi_vocab) -> None:
    """What a compile builds and then drops is freed as it goes: no reference cycle is left for
    the collector (an eager sub-automaton's determiniser was tied to its compiled construction
    by a bound method, and a nested recursive function to its own cell, so each compile left
    blocks, levels and expression nodes behind, 1,200-1,600 objects for a Github schema, for a
    collection inside the next decode to walk)."""
    schema = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]+$", "maxLength": 12},
            "mail": {"type": "string", "format": "email"},
            "kind": {"enum": [{"a": 1}, [1, 2], "x"]},
            "child": {"$ref": "#"},
        },
        "required": ["code"],
    }
    text = '{"code": "AB-12", "mail": "a@b.io", "kind": [1, 2], "child": {"code": "CD-3"}}'
    enforcer.clear_cache()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        _decode(compile_json_schema(schema, kimi_vocab), kimi_vocab, text)
        gc.collect()
        left = sorted({type(o).__name__ for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []
