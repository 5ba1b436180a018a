# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Compiled hot loops of the token masks (built by the package's setup.py; GIL released).

``walk_tokens`` walks tokens (positions into a :class:`~enforcer.masks.TokenIndex`, sorted by
their bytes) through a DFA table, sharing the walk of a common prefix with the previous token:
a token that extends a prefix which already died costs one comparison. Rows that a lazy DFA has
not built yet stop the walk of the tokens that reach them; those come back as *pending* (state,
step) for the caller to build and resume. Cost: about one table lookup per trie edge.
"""

from libc.stdint cimport INT32_MAX, UINT32_MAX, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc, qsort, realloc
from libc.string cimport memcmp, memcpy, memset
from libc.math cimport INFINITY
from cython.view cimport array as cython_array
from cpython.buffer cimport PyBUF_C_CONTIGUOUS, PyBuffer_Release, PyObject_GetBuffer
from cpython.ref cimport PyObject

import numpy as np


cdef extern from *:
    int __builtin_ctzll(unsigned long long) nogil
    int __builtin_ctz(unsigned int) nogil
    void __builtin_prefetch(const void*) nogil

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #if defined(__SSE2__)
    #include <emmintrin.h>
    /* p[0:n] = v, but p[at[k]] = kept[k] for the m ascending columns at[k]: the 16-byte aligned
       chunks by non-temporal stores (a chunk holding kept columns built in a register first,
       so no line is written by both kinds of store), the unaligned head and tail plainly. */
    #define ENFORCER_STREAM(T, SET1)                                                        \
        static void enforcer_stream_##T(T* p, Py_ssize_t n, T v, const int32_t* at,         \
                                        const T* kept, Py_ssize_t m) {                      \
            const Py_ssize_t per = 16 / (Py_ssize_t)sizeof(T);                              \
            Py_ssize_t i = 0, k = 0, j, full, stop;                                         \
            T chunk[16 / sizeof(T)] __attribute__((aligned(16)));                           \
            __m128i x = SET1;                                                               \
            for (; i < n && ((uintptr_t)(p + i) & 15); i++)                                 \
                p[i] = k < m && at[k] == i ? kept[k++] : v;                                 \
            full = i + (n - i) / per * per;                                                 \
            while (i < full) {                                                              \
                stop = k < m && at[k] < full ? i + (at[k] - i) / per * per : full;          \
                for (; i < stop; i += per)                                                  \
                    _mm_stream_si128((__m128i*)(p + i), x);                                 \
                if (i == full)                                                              \
                    break;                                                                  \
                for (j = 0; j < per; j++)                                                   \
                    chunk[j] = k < m && at[k] == i + j ? kept[k++] : v;                     \
                _mm_stream_si128((__m128i*)(p + i), _mm_load_si128((const __m128i*)chunk)); \
                i += per;                                                                   \
            }                                                                               \
            for (; i < n; i++)                                                              \
                p[i] = k < m && at[k] == i ? kept[k++] : v;                                 \
        }
    ENFORCER_STREAM(int16_t, _mm_set1_epi16(v))
    ENFORCER_STREAM(int32_t, _mm_set1_epi32(v))
    ENFORCER_STREAM(int64_t, _mm_set1_epi64x(v))
    static void enforcer_stream_copy(int32_t* dst, const int32_t* src, Py_ssize_t n) {
        while (n > 0 && ((uintptr_t)dst & 15)) { *dst++ = *src++; n--; }
        for (; n >= 4; n -= 4, dst += 4, src += 4)
            _mm_stream_si128((__m128i*)dst, _mm_loadu_si128((const __m128i*)src));
        while (n > 0) { *dst++ = *src++; n--; }
    }
    static void enforcer_stream_fence(void) { _mm_sfence(); }
    /* The word after the run of words equal to mask[w] that starts at w, eight words compared
       at a time (64 free-text rows of 4,747 words, all ones but two: 51 instead of 110-133 us). */
    static Py_ssize_t enforcer_run_end(const int32_t* mask, Py_ssize_t w, Py_ssize_t words) {
        const int32_t value = mask[w++];
        const __m128i x = _mm_set1_epi32(value);
        for (; w + 8 <= words; w += 8) {
            __m128i a = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i*)(mask + w)), x);
            __m128i b = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i*)(mask + w + 4)), x);
            if (_mm_movemask_epi8(_mm_and_si128(a, b)) != 0xFFFF)
                break;
        }
        while (w < words && mask[w] == value) w++;
        return w;
    }
    #else
    #define ENFORCER_STREAM(T)                                                              \
        static void enforcer_stream_##T(T* p, Py_ssize_t n, T v, const int32_t* at,         \
                                        const T* kept, Py_ssize_t m) {                      \
            for (Py_ssize_t i = 0; i < n; i++) p[i] = v;                                    \
            for (Py_ssize_t k = 0; k < m; k++) p[at[k]] = kept[k];                          \
        }
    ENFORCER_STREAM(int16_t)
    ENFORCER_STREAM(int32_t)
    ENFORCER_STREAM(int64_t)
    static void enforcer_stream_copy(int32_t* dst, const int32_t* src, Py_ssize_t n) {
        memcpy(dst, src, (size_t)n * sizeof(int32_t));
    }
    static void enforcer_stream_fence(void) { }
    static Py_ssize_t enforcer_run_end(const int32_t* mask, Py_ssize_t w, Py_ssize_t words) {
        const int32_t value = mask[w++];
        while (w < words && mask[w] == value) w++;
        return w;
    }
    #endif
    """
    void enforcer_stream_int16_t(int16_t* p, Py_ssize_t n, int16_t v, const int32_t* at, const int16_t* kept,
                                 Py_ssize_t m) nogil
    void enforcer_stream_int32_t(int32_t* p, Py_ssize_t n, int32_t v, const int32_t* at, const int32_t* kept,
                                 Py_ssize_t m) nogil
    void enforcer_stream_int64_t(int64_t* p, Py_ssize_t n, int64_t v, const int32_t* at, const int64_t* kept,
                                 Py_ssize_t m) nogil
    void enforcer_stream_copy(int32_t* dst, const int32_t* src, Py_ssize_t n) nogil
    void enforcer_stream_fence() nogil
    Py_ssize_t enforcer_run_end(const int32_t* mask, Py_ssize_t w, Py_ssize_t words) nogil

cdef enum:
    MAX_TOKEN_BYTES = 4096
    DEFERRED = -1  # the period of a placeholder block (see SubsetConstruction)
    BLOCK_STATE = 2  # a template state inside an embedded block (see SubsetConstruction._expansion)
DEFERRED_PERIOD = DEFERRED
"""The period :class:`SubsetConstruction` reads as a placeholder block."""
BLOCK_STATE_FLAG = BLOCK_STATE
"""A level template's flag for a state inside an embedded block."""
TOKEN_BYTES_LIMIT = MAX_TOKEN_BYTES
"""Longest token the walk takes (callers use another walk for longer ones)."""


def walk_tokens(const int32_t[:, ::1] table, const uint8_t[::1] built, const uint8_t[::1] flat,
                const int64_t[::1] offsets, const int64_t[::1] lengths, const int64_t[::1] ids,
                const int64_t[::1] positions, const int32_t[::1] states, const int32_t[::1] steps,
                uint32_t[::1] mask, int64_t[::1] pending_positions, int32_t[::1] pending_states,
                int32_t[::1] pending_steps):
    """Walk every ``positions[k]`` from ``states[k]`` at byte ``steps[k]``: set the bit of the id
    of each token that stays alive in ``mask``; tokens that reach an unbuilt state are written
    to the ``pending_*`` arrays. Returns (found, pending) counts."""
    cdef Py_ssize_t n = positions.shape[0]
    cdef Py_ssize_t num_states = table.shape[0]
    cdef Py_ssize_t k, found = 0, pending = 0
    cdef int64_t pos, start, length, prev_start = 0, prev_length = 0, tid
    cdef int32_t state, first_state = -2, first_step = -1, step
    cdef int64_t depth, known = 0, dead_at = -1, lcp, limit
    cdef int32_t path[MAX_TOKEN_BYTES + 1]
    with nogil:
        for k in range(n):
            pos = positions[k]
            start = offsets[pos]
            length = lengths[pos]
            step = steps[k]
            if states[k] != first_state or step != first_step:
                # no prefix to share with the previous token
                first_state = states[k]
                first_step = step
                known = 0
                dead_at = -1
                prev_length = 0
                lcp = 0
            else:
                limit = prev_length if prev_length < length else length
                lcp = step
                while lcp < limit and flat[start + lcp] == flat[prev_start + lcp]:
                    lcp += 1
                lcp -= step
            # known: bytes of the previous token walked (path[d] = state after d bytes past step)
            if dead_at >= 0 and lcp > dead_at:
                # dies at the same byte as the previous token (path and dead_at stay valid)
                prev_start = start
                prev_length = length
                continue
            if lcp < known:
                known = lcp
            dead_at = -1
            path[0] = first_state
            depth = known
            state = path[depth]
            while step + depth < length:
                if state < 0 or state >= num_states or not built[state]:
                    break
                state = table[state, flat[start + step + depth]]
                if state < 0:
                    dead_at = depth
                    break
                depth += 1
                path[depth] = state
            prev_start = start
            prev_length = length
            known = depth
            if dead_at >= 0:
                continue
            if step + depth < length:  # stopped at an unbuilt state
                pending_positions[pending] = pos
                pending_states[pending] = state
                pending_steps[pending] = <int32_t>(step + depth)
                pending += 1
                continue
            tid = ids[pos]
            mask[tid >> 5] |= (<uint32_t>1) << (tid & 31)
            found += 1
    return found, pending


cdef inline Py_ssize_t _slot(const int64_t[::1] keys, int64_t key, Py_ssize_t mask) noexcept nogil:
    """Open-addressing slot of ``key``: where it is, or the empty slot (-1) where it would go."""
    cdef Py_ssize_t h = <Py_ssize_t>((<uint64_t>key * <uint64_t>0x9E3779B97F4A7C15) >> 20) & mask
    while keys[h] != -1 and keys[h] != key:
        h = (h + 1) & mask
    return h


def dfa_product(const int32_t[:, ::1] a, const int32_t[:, ::1] b, const uint8_t[::1] column_a,
                const uint8_t[::1] column_b, bint keep_other_dead, Py_ssize_t max_states):
    """Pairs of states of DFA tables ``a`` and ``b`` reached by the same strings, breadth first
    from (0, 0) (from (0, -1) when ``b`` has no state): intersection follows the columns both
    tables accept, difference (``keep_other_dead``) every column ``a`` accepts, ``b`` possibly
    dead (-1). The product reads ``w`` joint columns: its column ``j`` is column
    ``column_a[j]`` of ``a`` and ``column_b[j]`` of ``b`` (the byte classes of both, numbered by
    their first byte: pairs are then found in the same order as byte by byte). Returns (table
    int32[pairs, w], first states, second states), one row per pair in the order found, or
    None past ``max_states`` pairs. Cost: one hash probe per live column whose pair differs
    from the previous live column's. The table grows in one buffer (``realloc``) that becomes
    the returned array, not a copy; each row is written when its pair is found, so memory
    follows the pairs, not the capacity."""
    cdef Py_ssize_t nb1 = b.shape[0] + 1, w = column_a.shape[0]
    cdef Py_ssize_t capacity = 1024, rows = 64, n = 1, i = 0, h, k, j
    cdef int32_t sa, sb, ta, tb, target, last_target = -1
    cdef int64_t key, last_key = -1
    if column_b.shape[0] != w or w == 0 or w > 256:
        raise ValueError("one column of each table per joint column, 1 to 256 of them")
    for j in range(w):
        if column_a[j] >= a.shape[1] or (b.shape[0] and column_b[j] >= b.shape[1]):
            raise ValueError("a joint column names a column outside its table")
    keys_arr = np.full(capacity, -1, dtype=np.int64)
    values_arr = np.empty(capacity, dtype=np.int32)
    first_arr = np.empty(rows, dtype=np.int32)
    second_arr = np.empty(rows, dtype=np.int32)
    cdef int64_t[::1] keys = keys_arr
    cdef int32_t[::1] values = values_arr
    cdef int32_t[::1] first = first_arr
    cdef int32_t[::1] second = second_arr
    cdef int64_t[::1] old_keys
    cdef int32_t[::1] old_values
    cdef int32_t* grown
    cdef int32_t* table = <int32_t*>malloc(rows * w * sizeof(int32_t))
    if table == NULL:
        raise MemoryError()
    memset(table, 0xFF, w * sizeof(int32_t))  # a row is all -1 (dead) from its state's creation on
    first[0] = 0
    second[0] = 0 if b.shape[0] else -1
    key = second[0] + 1
    h = _slot(keys, key, capacity - 1)
    keys[h] = key
    values[h] = 0
    try:
        while i < n:
            sa = first[i]
            sb = second[i]
            for j in range(w):
                ta = a[sa, column_a[j]]
                if ta < 0:
                    continue
                tb = b[sb, column_b[j]] if sb >= 0 else -1
                if tb < 0 and not keep_other_dead:
                    continue
                key = <int64_t>ta * nb1 + tb + 1
                if key == last_key:
                    table[i * w + j] = last_target
                    continue
                h = _slot(keys, key, capacity - 1)
                if keys[h] == key:
                    target = values[h]
                else:
                    if n >= max_states:
                        free(table)
                        return None
                    target = <int32_t>n
                    keys[h] = key
                    values[h] = target
                    if n == rows:
                        grown = <int32_t*>realloc(table, 2 * rows * w * sizeof(int32_t))
                        if grown == NULL:
                            raise MemoryError()
                        table = grown  # the new rows are set as their states are made: untouched until then
                        rows *= 2
                        first_arr = np.concatenate([first_arr, np.empty(rows - n, dtype=np.int32)])
                        second_arr = np.concatenate([second_arr, np.empty(rows - n, dtype=np.int32)])
                        first, second = first_arr, second_arr
                    memset(table + n * w, 0xFF, w * sizeof(int32_t))
                    first[n] = ta
                    second[n] = tb
                    n += 1
                    if 2 * n > capacity:  # rehash into twice the slots
                        old_keys, old_values = keys, values
                        capacity *= 2
                        keys_arr = np.full(capacity, -1, dtype=np.int64)
                        values_arr = np.empty(capacity, dtype=np.int32)
                        keys, values = keys_arr, values_arr
                        for k in range(old_keys.shape[0]):
                            if old_keys[k] != -1:
                                h = _slot(keys, old_keys[k], capacity - 1)
                                keys[h] = old_keys[k]
                                values[h] = old_values[k]
                table[i * w + j] = target
                last_key = key
                last_target = target
            i += 1
    except BaseException:
        free(table)
        raise
    return _int32_table(table, n * w, w), first_arr[:n], second_arr[:n]


def column_classes(const int32_t[:, ::1] table, const uint8_t[::1] classes):
    """The compact form of ``table`` (int32[n, w]) read through ``classes`` (uint8[256]: byte
    ``b``'s column): ``(each byte's class uint8[256], numbered by first byte; the distinct
    columns int32[n, k], in that order)``, the second ``table``'s own array when it is that form
    already. Columns are hashed in one pass over the rows, grouped by hash and checked exactly
    in a second (a 64-bit collision of unequal columns, never observed, leaves them apart: a
    finer partition, as correct). Cost: two or three passes over the table."""
    cdef Py_ssize_t n = table.shape[0], w = table.shape[1], s, c, k, b, num = 0
    cdef uint64_t[256] hashes
    cdef int32_t[256] first_of  # per column, the first column with its hash (itself when unequal)
    cdef int32_t[256] class_of  # per first column, its class (-1: none yet)
    cdef int32_t[256] kept  # per class, its column
    cdef int32_t[512] slots
    if w > 256 or w < 1 or classes.shape[0] != 256:
        raise ValueError("1 to 256 columns and a column per byte")
    for b in range(256):
        if classes[b] >= w:
            raise ValueError("a byte's column is outside the table")
    out_classes_arr = np.empty(256, dtype=np.uint8)
    cdef uint8_t[::1] out_classes = out_classes_arr
    with nogil:
        for c in range(w):
            hashes[c] = 0xCBF29CE484222325ULL
            class_of[c] = -1
        for s in range(n):
            for c in range(w):
                hashes[c] = (hashes[c] ^ <uint64_t>(table[s, c] + 2)) * 0x100000001B3ULL
        for k in range(512):
            slots[k] = -1
        for c in range(w):  # the first column of each hash, through an open-addressing table
            k = <Py_ssize_t>((hashes[c] ^ (hashes[c] >> 32)) & 511)
            while slots[k] >= 0 and hashes[slots[k]] != hashes[c]:
                k = (k + 1) & 511
            if slots[k] < 0:
                slots[k] = <int32_t>c
            first_of[c] = slots[k]
        for s in range(n):  # exactly: a column equal in hash but not in entries is its own
            for c in range(w):
                if first_of[c] != c and table[s, c] != table[s, first_of[c]]:
                    first_of[c] = <int32_t>c
        for b in range(256):
            c = first_of[classes[b]]
            if class_of[c] < 0:
                class_of[c] = <int32_t>num
                kept[num] = <int32_t>c
                num += 1
            out_classes[b] = <uint8_t>class_of[c]
    k = 0
    while k < num and kept[k] == k:
        k += 1
    if k == num == w:
        return out_classes_arr, table.base if table.base is not None else np.asarray(table)
    out_arr = np.empty((n, num), dtype=np.int32)
    cdef int32_t[:, ::1] out = out_arr
    with nogil:
        for s in range(n):
            for k in range(num):
                out[s, k] = table[s, kept[k]]
    return out_classes_arr, out_arr


# --------------------------------------------------------------------------------------------
# Subset construction


cdef int _compare_int32(const void* a, const void* b) noexcept nogil:
    cdef int32_t x = (<const int32_t*>a)[0]
    cdef int32_t y = (<const int32_t*>b)[0]
    return (x > y) - (x < y)


cdef inline uint64_t _hash_subset(const int32_t* items, Py_ssize_t n) noexcept nogil:
    cdef uint64_t h = (<uint64_t>0xCBF29CE4 << 32 | <uint64_t>0x84222325) ^ <uint64_t>n
    cdef Py_ssize_t k
    for k in range(n):
        h = (h ^ <uint32_t>items[k]) * <uint64_t>0x100000001B3
    h ^= h >> 33
    h *= (<uint64_t>0xFF51AFD7 << 32 | <uint64_t>0xED558CCD)
    h ^= h >> 33
    return h


cdef void* _doubled(void* buffer, Py_ssize_t* capacity, Py_ssize_t needed, Py_ssize_t item_size,
                    Py_ssize_t minimum) noexcept nogil:
    """``buffer`` reallocated to hold at least ``needed`` items of ``item_size`` bytes (capacity
    doubles from ``minimum``); NULL when memory runs out (``buffer`` is then left as it was)."""
    cdef Py_ssize_t size = capacity[0]
    if needed <= size and buffer != NULL:
        return buffer
    if size < minimum:
        size = minimum
    while size < needed:
        size *= 2
    cdef void* out = realloc(buffer, size * item_size)
    if out != NULL:
        capacity[0] = size
    return out


cdef void* _grow(void* buffer, Py_ssize_t* capacity, Py_ssize_t needed, Py_ssize_t item_size) except NULL:
    """:func:`_doubled` from 16 items, raising ``MemoryError`` when memory runs out."""
    cdef void* out = _doubled(buffer, capacity, needed, item_size, 16)
    if out == NULL:
        raise MemoryError()
    return out


cdef int32_t* _grow_nogil(int32_t* buffer, Py_ssize_t* capacity, Py_ssize_t needed) noexcept nogil:
    """:func:`_doubled` for int32 items from 64, without the GIL; NULL when memory runs out
    (``buffer`` is then freed)."""
    cdef void* out = _doubled(buffer, capacity, needed, sizeof(int32_t), 64)
    if out == NULL:
        free(buffer)
    return <int32_t*>out


cdef object _int32_table(int32_t* items, Py_ssize_t count, Py_ssize_t width):
    """``count`` int32 ``items`` (a malloc'd buffer, handed over: freed with the array) as an
    int32[count // width, width] array, without a copy."""
    if count == 0:
        free(items)
        return np.empty((0, width), dtype=np.int32)
    cdef int32_t* exact = <int32_t*>realloc(items, count * sizeof(int32_t))  # shrink to size
    if exact == NULL:
        exact = items
    cdef cython_array out = cython_array(shape=(count // width, width), itemsize=sizeof(int32_t), format="i",
                                         mode="c", allocate_buffer=False)
    out.data = <char*>exact
    out.callback_free_data = free
    return np.asarray(out)


cdef enum:
    PAGE_SHIFT = 12  # NFA states per page of the subset construction's scratch: 4,096
    PAGE_STATES = 4096
    PAGE_MASK = 4095


cdef struct _StatePage:
    # per NFA state of one page: where its closure starts in closure_buf (+1; 0: not computed),
    # its length, and the marks of the subset and the closure being gathered
    int64_t closure_at[PAGE_STATES]
    int32_t closure_len[PAGE_STATES]
    int32_t stamp[PAGE_STATES]
    int32_t visit[PAGE_STATES]


cdef class SubsetConstruction:
    """Subset construction over a Thompson NFA held in CSR arrays (per-state byte-range edges
    and epsilon edges of states ``0..r-1``) plus embedded DFA blocks (states ``base..base+size``,
    bases ascending, whose edges are the rows of a DFA table, or of a counted repeat's unit
    shifted to the unit's copy, and whose accepting states have an epsilon edge to ``end``).
    Blocks lie among states ``0..r-1`` (their slices empty, their flags set) or, every one of
    them, after ``r`` one after another, with nothing kept per state. DFA
    states are created the first time a :meth:`row` reaches them, numbered in the order found
    with bytes in increasing order; subset 0 is the closure of ``start``. The same states, in
    the same order, as :class:`enforcer.automaton._Determiniser`'s Python construction.
    A *placeholder* (a one-state block of period ``DEFERRED``, or a state an expansion added)
    stands for a level built on demand: the first closure that reaches it appends the level's
    states (a :class:`~enforcer.automaton.LevelTemplate`, shifted past the last state) with
    their slices, and continues into them; a subset never holds a placeholder itself.
    Cost per row: the member states' edges, one closure union per distinct byte range, one
    sort and one hash probe per target subset. Lifetime: that of its automaton."""

    cdef const int32_t[::1] edge_start
    cdef const uint8_t[::1] edge_lo
    cdef const uint8_t[::1] edge_hi
    cdef const int32_t[::1] edge_dst
    cdef const int32_t[::1] eps_start
    cdef const int32_t[::1] eps_dst
    cdef Py_ssize_t n_nfa
    cdef Py_ssize_t n_regular  # states outside blocks: those of the CSR arrays
    cdef int32_t end
    cdef const uint8_t[::1] important
    cdef object keep
    cdef Py_ssize_t n_blocks
    cdef int32_t* block_base
    cdef int32_t* block_end
    cdef int32_t* block_period
    cdef int32_t* block_size
    cdef const int32_t** block_table
    cdef const uint8_t** block_acc
    cdef const uint8_t** block_live  # per state, whether it can still end (NULL: every state)
    cdef const uint8_t** block_classes  # a compact table's column per byte (NULL: a row is 256 entries)
    cdef int16_t** block_runs  # with classes: the byte ranges of one class, [count, (first byte, class) * count]
    cdef int32_t* block_width  # entries per row of the block's table
    cdef int32_t* block_last  # the first state of a periodic block's last copy, which reads nothing
    cdef int32_t trimmed_row[256]  # a flagged block's row without the targets that cannot end
    cdef int32_t* block_level  # a placeholder block's level record (-1: a DFA block)
    cdef Py_ssize_t blocks_cap
    cdef list expanded  # (first state, template) per expansion whose level holds blocks
    # levels built on demand: one record per placeholder met (its node, continuation and the
    # first state of its expansion, -1 until expanded)
    cdef object template  # node -> LevelTemplate
    cdef list level_node
    cdef int32_t* level_continuation
    cdef int32_t* level_start
    cdef int32_t* level_depth  # 1 for a placeholder of the given NFA, one more per level inside
    cdef Py_ssize_t n_levels, levels_cap
    # states added by expansions, n_initial onwards, with slices of their own
    cdef Py_ssize_t n_initial
    cdef _StatePage** pages  # per page of NFA states, its scratch (NULL until a closure reaches one)
    cdef Py_ssize_t page_slots, pages_made
    cdef int64_t* x_edge_start  # per added state and one more
    cdef int64_t* x_eps_start
    cdef uint8_t* x_keep  # whether a subset keeps it: 1 it reads a byte, BLOCK_STATE a block's state
    cdef int32_t* x_level  # its level record when a placeholder (-1: none)
    cdef int32_t* x_depth  # the depth of the level that added it
    cdef Py_ssize_t x_cap
    cdef uint8_t* x_edge_lo
    cdef uint8_t* x_edge_hi
    cdef int32_t* x_edge_dst
    cdef Py_ssize_t x_edges, x_edges_cap
    cdef int32_t* x_eps_dst
    cdef Py_ssize_t x_eps, x_eps_cap
    # closures, computed on first use (where each starts: its state's page)
    cdef int32_t* closure_buf
    cdef Py_ssize_t closure_used, closure_cap
    # subsets
    cdef int32_t* set_buf
    cdef Py_ssize_t set_used, set_cap
    cdef int64_t* set_at
    cdef int32_t* set_len
    cdef uint8_t* set_acc
    cdef uint64_t* set_hash
    cdef Py_ssize_t n_sets, sets_cap
    cdef int32_t* slots
    cdef Py_ssize_t slot_cap
    # scratch
    cdef int32_t current_stamp  # marks the states of the subset being gathered
    cdef int32_t current_visit  # marks the states of the closure being computed
    cdef int32_t* gather
    cdef Py_ssize_t gather_cap
    cdef int32_t* stack
    cdef Py_ssize_t stack_cap
    cdef int32_t* e_lo
    cdef int32_t* e_hi
    cdef int32_t* e_dst
    cdef Py_ssize_t e_cap
    cdef int32_t* piece_items
    cdef Py_ssize_t piece_cap

    def __cinit__(self):
        self.block_base = NULL
        self.block_end = NULL
        self.block_period = NULL
        self.block_size = NULL
        self.block_table = NULL
        self.block_acc = NULL
        self.block_live = NULL
        self.block_classes = NULL
        self.block_runs = NULL
        self.block_width = NULL
        self.block_last = NULL
        self.block_level = NULL
        self.level_continuation = NULL
        self.level_start = NULL
        self.level_depth = NULL
        self.x_depth = NULL
        self.x_edge_start = NULL
        self.x_eps_start = NULL
        self.x_keep = NULL
        self.x_level = NULL
        self.x_edge_lo = NULL
        self.x_edge_hi = NULL
        self.x_edge_dst = NULL
        self.x_eps_dst = NULL
        self.pages = NULL
        self.closure_buf = NULL
        self.set_buf = NULL
        self.set_at = NULL
        self.set_len = NULL
        self.set_acc = NULL
        self.set_hash = NULL
        self.slots = NULL
        self.gather = NULL
        self.stack = NULL
        self.e_lo = NULL
        self.e_hi = NULL
        self.e_dst = NULL
        self.piece_items = NULL

    def __dealloc__(self):
        cdef Py_ssize_t p
        free(self.block_base); free(self.block_end)
        free(self.block_period); free(self.block_size); free(<void*>self.block_table); free(<void*>self.block_acc)
        if self.block_runs != NULL:
            for p in range(self.n_blocks):
                free(self.block_runs[p])
        free(<void*>self.block_live); free(<void*>self.block_classes); free(self.block_runs); free(self.block_width)
        free(self.block_last); free(self.block_level)
        free(self.level_continuation); free(self.level_start); free(self.level_depth); free(self.x_depth)
        free(self.x_edge_start); free(self.x_eps_start); free(self.x_keep); free(self.x_level)
        free(self.x_edge_lo); free(self.x_edge_hi); free(self.x_edge_dst); free(self.x_eps_dst)
        if self.pages != NULL:
            for p in range(self.page_slots):
                free(self.pages[p])
        free(self.pages); free(self.closure_buf)
        free(self.set_buf); free(self.set_at); free(self.set_len); free(self.set_acc); free(self.set_hash)
        free(self.slots); free(self.gather); free(self.stack)
        free(self.e_lo); free(self.e_hi); free(self.e_dst); free(self.piece_items)

    def __init__(self, Py_ssize_t num_nfa_states, int32_t start, int32_t end,
                 const int32_t[::1] edge_start, const uint8_t[::1] edge_lo, const uint8_t[::1] edge_hi,
                 const int32_t[::1] edge_dst, const int32_t[::1] eps_start, const int32_t[::1] eps_dst,
                 const uint8_t[::1] important, list blocks, list levels=None, object template=None):
        """``important``: the states a subset keeps among those with slices, ``0..r-1`` where
        ``r = len(edge_start) - 1`` (uint8[r]; the others pass epsilon edges on only; block
        states after ``r`` are all kept). ``blocks``: (base, rows int32[m, w], classes, accepting
        uint8[size], period, live, end) per embedded automaton, ``classes`` the column of each
        byte (uint8[256]; empty when ``w`` is 256 and byte ``b`` is column ``b``): with period 0
        the rows are the table (``m = size``); with period ``q`` they are ``q`` slot rows repeated per copy (a
        counted repeat's unit, a counted product's slots: targets ``j`` within the copy, ``q + j``
        in the next), state ``k * q + j`` reading row ``j`` shifted by ``k * q``, the last copy
        (``k * q >= size - 1``) reading nothing, and with ``live`` (uint8[size], or empty) a
        target state whose flag is 0 dropped; with period ``DEFERRED`` (no rows, size 1) a
        placeholder, whose node is ``levels[k]`` (None for the others) and whose level
        ``template(node)`` gives (a :class:`~enforcer.automaton.LevelTemplate`)."""
        cdef Py_ssize_t n = num_nfa_states, k
        cdef const int32_t[:, ::1] table
        cdef const uint8_t[::1] acc
        cdef const uint8_t[::1] live
        self.n_nfa = n
        self.n_regular = edge_start.shape[0] - 1
        if self.n_regular < 0 or eps_start.shape[0] != edge_start.shape[0] or important.shape[0] < self.n_regular:
            raise ValueError("the CSR arrays and flags do not cover the same states")
        self.end = end
        self.edge_start, self.edge_lo, self.edge_hi, self.edge_dst = edge_start, edge_lo, edge_hi, edge_dst
        self.eps_start, self.eps_dst = eps_start, eps_dst
        self.important = important
        self.keep = blocks
        self.n_blocks = self.blocks_cap = 0
        self.expanded = []
        self.page_slots = self.pages_made = self.gather_cap = self.stack_cap = 0
        self.n_initial = n
        self.template = template
        self.level_node = []
        self.n_levels = self.levels_cap = self.x_cap = self.x_edges = self.x_edges_cap = 0
        self.x_eps = self.x_eps_cap = 0
        self.current_stamp = 0
        self.current_visit = 0
        for k in range(len(blocks)):
            base, table, classes, acc, period, live, block_end = blocks[k]
            node = levels[k] if levels is not None else None
            if period == DEFERRED:
                if node is None or template is None or table.shape[0] or acc.shape[0] != 1 or acc[0] or live.shape[0]:
                    raise ValueError("a placeholder block is one state with no rows, a node and a template")
            elif node is not None:
                raise ValueError("a block with rows has no node")
            if k and base < self.block_base[k - 1] + self.block_size[k - 1] or base + acc.shape[0] > n:
                raise ValueError("blocks must be ascending, apart, and inside the NFA")
            if self.n_regular < n and base != (self.n_regular if k == 0 else
                                               self.block_base[k - 1] + self.block_size[k - 1]):
                raise ValueError("blocks after the sliced states must follow them one after another")
            self._add_block(base, table, classes, acc, period, live, block_end,
                            self._new_level(node, block_end, 1) if period == DEFERRED else -1)
        if self.n_regular < n and (not self.n_blocks or self.block_base[self.n_blocks - 1]
                                   + self.block_size[self.n_blocks - 1] != n):
            raise ValueError("the blocks after the sliced states do not end at the last NFA state")
        self.slot_cap = 1024
        self.slots = <int32_t*>malloc(self.slot_cap * sizeof(int32_t))
        if self.slots == NULL:
            raise MemoryError()
        for k in range(self.slot_cap):
            self.slots[k] = -1
        self.closure_used = self.closure_cap = self.set_used = self.set_cap = 0
        self.n_sets = self.sets_cap = self.e_cap = self.piece_cap = 0
        cdef const int32_t* first
        cdef Py_ssize_t count = self._closure(start, &first)
        self.gather = <int32_t*>_grow(self.gather, &self.gather_cap, count, sizeof(int32_t))
        for k in range(count):
            self.gather[k] = first[k]
        self._intern(count, -1)

    cdef int _add_block(self, int32_t base, const int32_t[:, ::1] table, const uint8_t[::1] classes,
                        const uint8_t[::1] acc, int32_t period, const uint8_t[::1] live, int32_t block_end,
                        int32_t level) except -1:
        """Append a block past the others (``base`` above theirs) whose rows the caller keeps
        alive (:attr:`keep`, a template); ``level``: its level record when a placeholder."""
        cdef Py_ssize_t k = self.n_blocks, cap, b
        cdef int16_t* runs
        if period != DEFERRED and (period < 0 or table.shape[0] != (period if period else acc.shape[0])
                                   or acc.shape[0] < 1 or live.shape[0] not in (0, acc.shape[0])):
            raise ValueError("a block's rows do not match its size and period")
        if classes.shape[0]:
            if classes.shape[0] != 256 or period != 0:
                raise ValueError("a block with classes is a table (period 0) with one class per byte")
            for b in range(256):
                if classes[b] >= table.shape[1]:
                    raise ValueError("a block's byte classes must name columns of its table")
        elif table.shape[0] and table.shape[1] != 256:
            raise ValueError("a block's rows without classes have 256 entries")
        if k + 1 > self.blocks_cap:
            cap = self.blocks_cap
            self.block_base = <int32_t*>_grow(self.block_base, &cap, k + 1, sizeof(int32_t))
            cap = self.blocks_cap
            self.block_end = <int32_t*>_grow(self.block_end, &cap, k + 1, sizeof(int32_t))
            cap = self.blocks_cap
            self.block_period = <int32_t*>_grow(self.block_period, &cap, k + 1, sizeof(int32_t))
            cap = self.blocks_cap
            self.block_size = <int32_t*>_grow(self.block_size, &cap, k + 1, sizeof(int32_t))
            cap = self.blocks_cap
            self.block_table = <const int32_t**>_grow(<void*>self.block_table, &cap, k + 1, sizeof(int32_t*))
            cap = self.blocks_cap
            self.block_acc = <const uint8_t**>_grow(<void*>self.block_acc, &cap, k + 1, sizeof(uint8_t*))
            cap = self.blocks_cap
            self.block_live = <const uint8_t**>_grow(<void*>self.block_live, &cap, k + 1, sizeof(uint8_t*))
            cap = self.blocks_cap
            self.block_classes = <const uint8_t**>_grow(<void*>self.block_classes, &cap, k + 1, sizeof(uint8_t*))
            cap = self.blocks_cap
            self.block_runs = <int16_t**>_grow(<void*>self.block_runs, &cap, k + 1, sizeof(int16_t*))
            cap = self.blocks_cap
            self.block_width = <int32_t*>_grow(self.block_width, &cap, k + 1, sizeof(int32_t))
            cap = self.blocks_cap
            self.block_last = <int32_t*>_grow(self.block_last, &cap, k + 1, sizeof(int32_t))
            cap = self.blocks_cap
            self.block_level = <int32_t*>_grow(self.block_level, &cap, k + 1, sizeof(int32_t))
            self.blocks_cap = cap
        self.block_level[k] = level
        self.block_live[k] = &live[0] if live.shape[0] else NULL
        self.block_classes[k] = &classes[0] if classes.shape[0] else NULL
        self.block_runs[k] = NULL
        if classes.shape[0]:
            self.block_runs[k] = <int16_t*>malloc((1 + 2 * 256) * sizeof(int16_t))
            if self.block_runs[k] == NULL:
                raise MemoryError()
            runs = self.block_runs[k]
            runs[0] = 0
            for b in range(256):
                if b == 0 or classes[b] != classes[b - 1]:
                    runs[1 + 2 * runs[0]] = <int16_t>b
                    runs[2 + 2 * runs[0]] = classes[b]
                    runs[0] += 1
        self.block_width[k] = <int32_t>table.shape[1]
        self.block_last[k] = <int32_t>((acc.shape[0] - 1) // period * period) if period > 0 else 0
        self.block_base[k] = base
        self.block_end[k] = block_end
        self.block_period[k] = period
        self.block_size[k] = <int32_t>acc.shape[0]
        self.block_table[k] = &table[0, 0] if table.shape[0] else NULL
        self.block_acc[k] = &acc[0] if acc.shape[0] else NULL
        self.n_blocks = k + 1
        return 0

    cdef inline int32_t _block_index(self, int32_t s) noexcept nogil:
        """The block holding state ``s`` (-1: a state outside blocks). A binary search over
        the bases: nothing is kept per block state."""
        cdef Py_ssize_t lo = 0, hi = self.n_blocks, mid
        while lo < hi:  # blocks with a base <= s
            mid = (lo + hi) >> 1
            if self.block_base[mid] <= s:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0 or s >= self.block_base[lo - 1] + self.block_size[lo - 1]:
            return -1
        return <int32_t>(lo - 1)

    cdef inline const int32_t* _block_row(self, int32_t blk, int32_t local, int32_t* shift,
                                          const uint8_t** classes) noexcept nogil:
        """The row of state ``local`` of block ``blk``, its targets to be shifted by ``shift``
        (NULL: a periodic block's last copy, which reads nothing), read through ``classes``
        (byte ``b``'s entry is ``row[classes[b]]``; NULL: ``row[b]``). A flagged block's row is
        written to ``trimmed_row`` (valid until the next call)."""
        cdef int32_t period = self.block_period[blk]
        cdef const int32_t* row
        cdef const uint8_t* live
        cdef int32_t t, b
        classes[0] = NULL
        if period == DEFERRED:
            return NULL
        if period == 0:
            shift[0] = 0
            classes[0] = self.block_classes[blk]
            return self.block_table[blk] + <Py_ssize_t>local * self.block_width[blk]
        if local >= self.block_last[blk]:
            return NULL
        shift[0] = local - local % period
        row = self.block_table[blk] + <Py_ssize_t>(local % period) * 256
        live = self.block_live[blk]
        if live == NULL:
            return row
        for b in range(256):
            t = row[b]
            if t >= 0 and not live[shift[0] + t]:
                t = -1
            self.trimmed_row[b] = t
        return self.trimmed_row

    cdef inline _StatePage* _page(self, int32_t s) except NULL:
        """The scratch page of NFA state ``s``, made (zeroed) the first time one of its states
        is reached: a walk that never enters a large block (a maxLength 8192 string's counted
        repeat, 164,000 states) costs none of its pages. A page's address never changes."""
        cdef Py_ssize_t p = s >> PAGE_SHIFT, old = self.page_slots, k
        cdef _StatePage* page
        if p >= old:
            self.pages = <_StatePage**>_grow(<void*>self.pages, &self.page_slots, p + 1, sizeof(_StatePage*))
            for k in range(old, self.page_slots):
                self.pages[k] = NULL
        page = self.pages[p]
        if page == NULL:
            page = self.pages[p] = <_StatePage*>calloc(1, sizeof(_StatePage))
            if page == NULL:
                raise MemoryError()
            self.pages_made += 1
        return page

    cdef inline Py_ssize_t _pushed(self, int32_t t, Py_ssize_t top) except -1:
        """``top`` after ``t`` is pushed on the closure's stack, unless this closure visited it
        already."""
        cdef _StatePage* page = self._page(t)
        if page.visit[t & PAGE_MASK] != self.current_visit:
            page.visit[t & PAGE_MASK] = self.current_visit
            if top == self.stack_cap:
                self.stack = <int32_t*>_grow(self.stack, &self.stack_cap, top + 1, sizeof(int32_t))
            self.stack[top] = t
            top += 1
        return top

    cdef Py_ssize_t _closure(self, int32_t state, const int32_t** out) except -1:
        """The important states of the epsilon closure of ``state`` (cached); ``out`` points
        at them. Expands the placeholders it meets (see :meth:`_expansion`)."""
        cdef _StatePage* page = self._page(state)
        cdef int64_t at = page.closure_at[state & PAGE_MASK] - 1
        cdef Py_ssize_t top, count = 0, k, j
        cdef int32_t s, blk, local, level
        cdef int64_t a = 0, b = 0
        cdef const int32_t* given_eps = &self.eps_dst[0] if self.eps_dst.shape[0] else NULL
        cdef const int32_t* dst = NULL
        cdef bint keep
        if at < 0:
            if self.current_visit == INT32_MAX:
                for k in range(self.page_slots):
                    if self.pages[k] != NULL:
                        memset(self.pages[k].visit, 0, sizeof(self.pages[k].visit))
                self.current_visit = 0
            self.current_visit += 1
            top = self._pushed(state, 0)
            at = self.closure_used
            while top:
                top -= 1
                s = self.stack[top]
                level = -1
                blk = -1
                if s >= self.n_initial and self.x_keep[s - self.n_initial] != BLOCK_STATE:
                    j = s - self.n_initial
                    keep = self.x_keep[j]
                    level = self.x_level[j]
                    a, b = self.x_eps_start[j], self.x_eps_start[j + 1]
                    dst = self.x_eps_dst
                else:
                    blk = self._block_index(s)
                    if blk >= 0:
                        level = self.block_level[blk]
                        keep = level < 0
                    else:
                        keep = self.important[s]
                        a, b = self.eps_start[s], self.eps_start[s + 1]
                        dst = given_eps
                if keep:
                    self.closure_buf = <int32_t*>_grow(self.closure_buf, &self.closure_cap, at + count + 1,
                                                       sizeof(int32_t))
                    self.closure_buf[at + count] = s
                    count += 1
                if level >= 0:  # a placeholder: on into its level, appended now if new
                    top = self._pushed(self._expansion(level), top)
                    if blk >= 0:
                        continue
                elif blk >= 0:
                    local = s - self.block_base[blk]
                    if self.block_acc[blk][local]:
                        top = self._pushed(self.block_end[blk], top)
                    continue
                while a < b:
                    top = self._pushed(dst[a], top)
                    a += 1
            self.closure_used = at + count
            page.closure_at[state & PAGE_MASK] = at + 1
            page.closure_len[state & PAGE_MASK] = <int32_t>count
        out[0] = self.closure_buf + page.closure_at[state & PAGE_MASK] - 1
        return page.closure_len[state & PAGE_MASK]

    cdef int32_t _new_level(self, object node, int32_t continuation, int32_t depth) except -1:
        """A record for a placeholder of ``node`` leading to ``continuation``, ``depth`` levels
        down, not expanded."""
        cdef Py_ssize_t k
        if self.n_levels + 1 > self.levels_cap:
            k = self.levels_cap
            self.level_continuation = <int32_t*>_grow(self.level_continuation, &k, self.n_levels + 1,
                                                      sizeof(int32_t))
            k = self.levels_cap
            self.level_start = <int32_t*>_grow(self.level_start, &k, self.n_levels + 1, sizeof(int32_t))
            k = self.levels_cap
            self.level_depth = <int32_t*>_grow(self.level_depth, &k, self.n_levels + 1, sizeof(int32_t))
            self.levels_cap = k
        self.level_node.append(node)
        self.level_continuation[self.n_levels] = continuation
        self.level_start[self.n_levels] = -1
        self.level_depth[self.n_levels] = depth
        self.n_levels += 1
        return <int32_t>(self.n_levels - 1)

    cdef int32_t _expansion(self, int32_t level) except -1:
        """The first state of placeholder record ``level``'s expansion: on first call its
        level's template is appended, states shifted past the last one, its end given an
        epsilon edge to the record's continuation, its own placeholders new records (in
        template order: the Python construction appends alike) and its embedded automata new
        blocks (their states flagged ``BLOCK_STATE``, their slices empty). Cost: linear in the
        level's states."""
        cdef int32_t first = self.level_start[level]
        if first >= 0:
            return first
        template = self.template(self.level_node[level])
        cdef Py_ssize_t m = template.num_states, base = self.n_nfa, j, e, k, x0 = base - self.n_initial
        cdef int32_t start = template.start, end = template.end, continuation = self.level_continuation[level]
        cdef const int32_t[::1] t_edge_start = template.edge_start
        cdef const uint8_t[::1] t_lo = template.edge_lo
        cdef const uint8_t[::1] t_hi = template.edge_hi
        cdef const int32_t[::1] t_dst = template.edge_dst
        cdef const int32_t[::1] t_eps_start = template.eps_start
        cdef const int32_t[::1] t_eps_dst = template.eps_dst
        cdef const uint8_t[::1] t_keep = template.important
        if base + m >= INT32_MAX:
            raise MemoryError("an automaton of more than 2**31 NFA states")
        k = self.x_cap
        self.x_edge_start = <int64_t*>_grow(self.x_edge_start, &k, x0 + m + 1, sizeof(int64_t))
        k = self.x_cap
        self.x_eps_start = <int64_t*>_grow(self.x_eps_start, &k, x0 + m + 1, sizeof(int64_t))
        k = self.x_cap
        self.x_keep = <uint8_t*>_grow(self.x_keep, &k, x0 + m + 1, sizeof(uint8_t))
        k = self.x_cap
        self.x_level = <int32_t*>_grow(self.x_level, &k, x0 + m + 1, sizeof(int32_t))
        k = self.x_cap
        self.x_depth = <int32_t*>_grow(self.x_depth, &k, x0 + m + 1, sizeof(int32_t))
        self.x_cap = k
        e = t_edge_start[m]
        k = self.x_edges_cap
        self.x_edge_lo = <uint8_t*>_grow(self.x_edge_lo, &k, self.x_edges + e, sizeof(uint8_t))
        k = self.x_edges_cap
        self.x_edge_hi = <uint8_t*>_grow(self.x_edge_hi, &k, self.x_edges + e, sizeof(uint8_t))
        k = self.x_edges_cap
        self.x_edge_dst = <int32_t*>_grow(self.x_edge_dst, &k, self.x_edges + e, sizeof(int32_t))
        self.x_edges_cap = k
        self.x_eps_dst = <int32_t*>_grow(self.x_eps_dst, &self.x_eps_cap, self.x_eps + t_eps_start[m] + 1,
                                         sizeof(int32_t))
        if x0 == 0:
            self.x_edge_start[0] = 0
            self.x_eps_start[0] = 0
        for j in range(m):
            for e in range(t_edge_start[j], t_edge_start[j + 1]):
                self.x_edge_lo[self.x_edges] = t_lo[e]
                self.x_edge_hi[self.x_edges] = t_hi[e]
                self.x_edge_dst[self.x_edges] = <int32_t>(t_dst[e] + base)
                self.x_edges += 1
            for e in range(t_eps_start[j], t_eps_start[j + 1]):
                self.x_eps_dst[self.x_eps] = <int32_t>(t_eps_dst[e] + base)
                self.x_eps += 1
            if j == end:
                self.x_eps_dst[self.x_eps] = continuation
                self.x_eps += 1
            self.x_edge_start[x0 + j + 1] = self.x_edges
            self.x_eps_start[x0 + j + 1] = self.x_eps
            self.x_keep[x0 + j] = t_keep[j]
            self.x_level[x0 + j] = -1
            self.x_depth[x0 + j] = self.level_depth[level]
        self.n_nfa = base + m
        for placeholder in template.placeholders:
            self.x_level[x0 + placeholder.state] = self._new_level(
                placeholder.node, <int32_t>(base + placeholder.continuation), self.level_depth[level] + 1)
        if template.kernel_blocks:  # its embedded automata stay blocks (rows held by the template)
            for t_base, table, classes, acc, period, live, t_end in template.kernel_blocks:
                self._add_block(<int32_t>(base + t_base), table, classes, acc, period, live, <int32_t>(base + t_end),
                                -1)
            self.expanded.append((base, template))
        self.level_start[level] = <int32_t>(base + start)
        return <int32_t>(base + start)

    def expansions(self, Py_ssize_t first):
        """``(first state, template)`` of each expansion whose level holds embedded automata,
        from the ``first``-th on (a list, in the order made)."""
        return self.expanded[first:]

    def closure_of(self, int32_t state):
        """The important states of the epsilon closure of NFA state ``state`` (a list; expands
        the placeholders it meets)."""
        if state < 0 or state >= self.n_nfa:
            raise IndexError(state)
        cdef const int32_t* items
        cdef Py_ssize_t count = self._closure(state, &items)
        return [items[k] for k in range(count)]

    def edges_of(self, int32_t state):
        """The byte edges ``(lo, hi, target)`` of a state outside blocks (a list)."""
        cdef int64_t a, b
        if state < 0 or state >= self.n_nfa or self._block_index(state) >= 0:
            raise IndexError(state)
        if state >= self.n_initial:
            a, b = self.x_edge_start[state - self.n_initial], self.x_edge_start[state - self.n_initial + 1]
            return [(self.x_edge_lo[k], self.x_edge_hi[k], self.x_edge_dst[k]) for k in range(a, b)]
        a, b = self.edge_start[state], self.edge_start[state + 1]
        return [(self.edge_lo[k], self.edge_hi[k], self.edge_dst[k]) for k in range(a, b)]

    @property
    def num_nfa_states(self):
        """NFA states: those given and those expansions added."""
        return self.n_nfa

    def nesting(self, Py_ssize_t i):
        """How many levels down the deepest member of DFA state ``i`` lies (0: none added)."""
        if i < 0 or i >= self.n_sets:
            raise IndexError(i)
        cdef const int32_t* members = self.set_buf + self.set_at[i]
        cdef Py_ssize_t k
        cdef int32_t deepest = 0, s
        for k in range(self.set_len[i]):
            s = members[k]
            if s >= self.n_initial and self.x_depth[s - self.n_initial] > deepest:
                deepest = self.x_depth[s - self.n_initial]
        return deepest

    cdef inline bint _reads(self, int32_t s) noexcept nogil:
        """Whether state ``s``, outside blocks, has byte edges."""
        if s >= self.n_initial:
            return self.x_edge_start[s - self.n_initial + 1] > self.x_edge_start[s - self.n_initial]
        return self.edge_start[s + 1] > self.edge_start[s]

    cdef int32_t _intern(self, Py_ssize_t count, Py_ssize_t max_states) except -2:
        """The DFA state of the subset ``gather[:count]`` (sorted here), created when new;
        -1 when creating it would pass ``max_states`` (negative: no limit)."""
        cdef Py_ssize_t k, mask, h, i
        cdef int32_t* items = self.gather
        qsort(items, count, sizeof(int32_t), _compare_int32)
        cdef uint64_t digest = _hash_subset(items, count)
        mask = self.slot_cap - 1
        h = <Py_ssize_t>(digest & <uint64_t>mask)
        while self.slots[h] != -1:
            i = self.slots[h]
            if self.set_hash[i] == digest and self.set_len[i] == count and \
                    memcmp(self.set_buf + self.set_at[i], items, count * sizeof(int32_t)) == 0:
                return <int32_t>i
            h = (h + 1) & mask
        if max_states >= 0 and self.n_sets + 1 > max_states:
            return -1
        i = self.n_sets
        if i + 1 > self.sets_cap:
            k = self.sets_cap
            self.set_at = <int64_t*>_grow(self.set_at, &k, i + 1, sizeof(int64_t))
            k = self.sets_cap
            self.set_len = <int32_t*>_grow(self.set_len, &k, i + 1, sizeof(int32_t))
            k = self.sets_cap
            self.set_acc = <uint8_t*>_grow(self.set_acc, &k, i + 1, sizeof(uint8_t))
            k = self.sets_cap
            self.set_hash = <uint64_t*>_grow(self.set_hash, &k, i + 1, sizeof(uint64_t))
            self.sets_cap = k
        self.set_buf = <int32_t*>_grow(self.set_buf, &self.set_cap, self.set_used + count, sizeof(int32_t))
        memcpy(self.set_buf + self.set_used, items, count * sizeof(int32_t))
        self.set_at[i] = self.set_used
        self.set_len[i] = <int32_t>count
        self.set_hash[i] = digest
        self.set_acc[i] = 0
        for k in range(count):
            if items[k] == self.end:
                self.set_acc[i] = 1
                break
        self.set_used += count
        self.slots[h] = <int32_t>i
        self.n_sets = i + 1
        if 2 * self.n_sets > self.slot_cap:
            self._rehash()
        return <int32_t>i

    cdef int _rehash(self) except -1:
        cdef Py_ssize_t cap = self.slot_cap * 2, k, h
        cdef int32_t* slots = <int32_t*>malloc(cap * sizeof(int32_t))
        if slots == NULL:
            raise MemoryError()
        for k in range(cap):
            slots[k] = -1
        for k in range(self.n_sets):
            h = <Py_ssize_t>(self.set_hash[k] & <uint64_t>(cap - 1))
            while slots[h] != -1:
                h = (h + 1) & (cap - 1)
            slots[h] = <int32_t>k
        free(self.slots)
        self.slots = slots
        self.slot_cap = cap
        return 0

    cdef int _add_edge(self, Py_ssize_t* n, int32_t lo, int32_t hi, int32_t dst) except -1:
        cdef Py_ssize_t k
        if n[0] + 1 > self.e_cap:
            k = self.e_cap
            self.e_lo = <int32_t*>_grow(self.e_lo, &k, n[0] + 1, sizeof(int32_t))
            k = self.e_cap
            self.e_hi = <int32_t*>_grow(self.e_hi, &k, n[0] + 1, sizeof(int32_t))
            k = self.e_cap
            self.e_dst = <int32_t*>_grow(self.e_dst, &k, n[0] + 1, sizeof(int32_t))
            self.e_cap = k
        self.e_lo[n[0]] = lo
        self.e_hi[n[0]] = hi
        self.e_dst[n[0]] = dst
        n[0] += 1
        return 0

    @property
    def num_states(self):
        return self.n_sets

    @property
    def nbytes(self):
        """Bytes held: the scratch pages made (and their index), the closures, the subsets and
        their index, the states expansions added."""
        return (self.pages_made * sizeof(_StatePage) + self.page_slots * 8 + (self.gather_cap + self.stack_cap) * 4
                + self.x_cap * 25 + self.x_edges_cap * 6 + self.x_eps_cap * 4 + self.blocks_cap * 48
                + self.levels_cap * 12 + self.closure_cap * 4 + self.set_cap * 4 + self.sets_cap * 25
                + self.slot_cap * 4 + self.e_cap * 12 + self.piece_cap * 4)

    def members(self, Py_ssize_t i):
        """The NFA states of DFA state ``i``, ascending (a list)."""
        if i < 0 or i >= self.n_sets:
            raise IndexError(i)
        return [self.set_buf[self.set_at[i] + k] for k in range(self.set_len[i])]

    def block_members(self, Py_ssize_t i):
        """``(inside, others)``: the members of DFA state ``i`` that lie in embedded blocks and
        read a byte (their DFA row has a live entry) and the members outside blocks that have
        byte edges (two lists; ``([], None)`` when no block member reads). Cost: one pass over
        the members, no Python object per member until a block member is found."""
        if i < 0 or i >= self.n_sets:
            raise IndexError(i)
        cdef const int32_t* members = self.set_buf + self.set_at[i]
        cdef Py_ssize_t m = self.set_len[i], k, b
        cdef int32_t s, blk, shift
        cdef const int32_t* trow
        cdef const uint8_t* classes
        inside = []
        for k in range(m):
            s = members[k]
            blk = self._block_index(s)
            if blk < 0:
                continue
            trow = self._block_row(blk, s - self.block_base[blk], &shift, &classes)
            if trow == NULL:
                continue
            for b in range(256 if classes == NULL else self.block_width[blk]):
                if trow[b] >= 0:
                    inside.append(s)
                    break
        if not inside:
            return inside, None
        others = [members[k] for k in range(m)
                  if self._block_index(members[k]) < 0 and self._reads(members[k])]
        return inside, others

    def accepting(self, Py_ssize_t first):
        """Whether each DFA state from ``first`` on accepts (a list of bools)."""
        return [bool(self.set_acc[k]) for k in range(first, self.n_sets)]

    def row(self, Py_ssize_t i, int32_t[::1] out, Py_ssize_t max_states):
        """Write the transitions of DFA state ``i`` to ``out`` (256 entries, -1 dead), creating
        the states they lead to. Returns the number of states, or -1 when a new state would
        pass ``max_states`` (negative: no limit)."""
        if i < 0 or i >= self.n_sets:
            raise IndexError(i)
        if out.shape[0] < 256:
            raise ValueError("a row has 256 entries")
        return self._row(i, &out[0], max_states)

    def table(self, Py_ssize_t max_states):
        """Every row, breadth first from state 0 (creating the states as found; for a fresh
        construction, whose rows :meth:`row` has not built), over the byte ranges no row
        splits: ``(int32[states, k], each byte's column uint8[256])``, or None when a new state
        would pass ``max_states`` (negative: no limit). One call instead of one per row: the
        format automata (7,659 states for uri-reference) build in 79 ms instead of 123. Each
        row is built 256 entries wide in a scratch row and kept narrow; a row that splits a
        range widens the rows before it in place (at most 255 times): a refusal at 200,000
        states holds 200,000 narrow rows, not 200 MB. The buffer becomes the returned array."""
        cdef Py_ssize_t i = 0, cap = 64, b, k, c, w = 1, wider
        cdef int32_t* buf = <int32_t*>malloc(cap * sizeof(int32_t))
        cdef int32_t* grown
        cdef int32_t[256] wide  # the row being built
        cdef uint8_t[256] starts  # 1 where a range starts: some row's entry differs from the byte before's
        cdef int32_t[256] lead  # per column, its first byte
        cdef int32_t[256] was  # while widening: per new column, its column before
        cdef uint8_t split
        if buf == NULL:
            raise MemoryError()
        memset(starts, 0, sizeof(starts))
        starts[0] = 1
        lead[0] = 0
        try:
            while i < self.n_sets:
                if self._row(i, wide, max_states) < 0:
                    free(buf)
                    return None
                split = 0
                for b in range(1, 256):  # branch-free: the compiler vectorises it
                    split |= (wide[b] != wide[b - 1]) & (starts[b] ^ 1)
                if split:  # new ranges: each new column copies the old column holding its first byte
                    wider = 0
                    c = -1
                    for b in range(256):
                        c += starts[b]
                        if starts[b] or wide[b] != wide[b - 1]:
                            was[wider] = <int32_t>c
                            lead[wider] = <int32_t>b
                            wider += 1
                    for b in range(1, 256):
                        starts[b] |= wide[b] != wide[b - 1]
                    grown = <int32_t*>realloc(buf, cap * wider * sizeof(int32_t))
                    if grown == NULL:
                        raise MemoryError()
                    buf = grown
                    for k in range(i - 1, -1, -1):  # backwards: each row lands at or after its old place
                        for c in range(wider - 1, -1, -1):
                            buf[k * wider + c] = buf[k * w + was[c]]
                    w = wider
                if i == cap:
                    grown = <int32_t*>realloc(buf, 2 * cap * w * sizeof(int32_t))
                    if grown == NULL:
                        raise MemoryError()
                    buf = grown
                    cap *= 2
                for c in range(w):
                    buf[i * w + c] = wide[lead[c]]
                i += 1
        except BaseException:
            free(buf)
            raise
        classes_arr = np.empty(256, dtype=np.uint8)
        cdef uint8_t[::1] classes = classes_arr
        c = -1
        for b in range(256):
            c += starts[b]
            classes[b] = <uint8_t>c
        grown = <int32_t*>realloc(buf, i * w * sizeof(int32_t))
        if grown != NULL:
            buf = grown
        return _int32_table(buf, i * w, w), classes_arr  # the buffer itself: no copy

    cdef Py_ssize_t _row(self, Py_ssize_t i, int32_t* out, Py_ssize_t max_states) except -2:
        """:meth:`row` into ``out`` (256 entries; ``i`` an existing state)."""
        cdef Py_ssize_t n_edges = 0, m, k, p, n_pieces, count, total, c
        cdef int32_t s, blk, local, t, lo, hi, target, stamp_now, shift
        cdef _StatePage* page
        cdef int64_t a, b
        cdef const int32_t* members
        cdef const int32_t* trow
        cdef const uint8_t* classes
        cdef const int16_t* runs
        cdef Py_ssize_t r
        cdef const int32_t* closure
        cdef int32_t cut[258]
        cdef int32_t piece_of[257]
        cdef int64_t piece_start[258]
        cdef int64_t fill[257]
        cdef uint8_t is_cut[257]
        for k in range(256):
            out[k] = -1
        members = self.set_buf + self.set_at[i]
        m = self.set_len[i]
        # the members' edges, in member order (a block state's from its DFA row)
        for k in range(m):
            s = members[k]
            if s >= self.n_initial and self.x_keep[s - self.n_initial] != BLOCK_STATE:  # added by an expansion
                a = self.x_edge_start[s - self.n_initial]
                b = self.x_edge_start[s - self.n_initial + 1]
                while a < b:
                    self._add_edge(&n_edges, self.x_edge_lo[a], self.x_edge_hi[a], self.x_edge_dst[a])
                    a += 1
                continue
            blk = self._block_index(s)
            if blk >= 0:
                local = s - self.block_base[blk]
                trow = self._block_row(blk, local, &shift, &classes)
                if trow == NULL:
                    continue
                if classes != NULL:  # the block's byte ranges of one class, merged where targets agree
                    runs = self.block_runs[blk]
                    r = 0
                    while r < runs[0]:
                        t = trow[runs[2 + 2 * r]]
                        lo = runs[1 + 2 * r]
                        r += 1
                        while r < runs[0] and trow[runs[2 + 2 * r]] == t:
                            r += 1
                        if t >= 0:
                            self._add_edge(&n_edges, lo, runs[1 + 2 * r] - 1 if r < runs[0] else 255,
                                           self.block_base[blk] + shift + t)
                    continue
                lo = 0
                while lo < 256:
                    t = trow[lo]
                    hi = lo
                    while hi + 1 < 256 and trow[hi + 1] == t:
                        hi += 1
                    if t >= 0:
                        self._add_edge(&n_edges, lo, hi, self.block_base[blk] + shift + t)
                    lo = hi + 1
            else:
                a = self.edge_start[s]
                b = self.edge_start[s + 1]
                while a < b:
                    self._add_edge(&n_edges, self.edge_lo[a], self.edge_hi[a], self.edge_dst[a])
                    a += 1
        if n_edges == 0:
            return self.n_sets
        # the byte axis split at every range boundary
        memset(is_cut, 0, sizeof(is_cut))
        for k in range(n_edges):
            is_cut[self.e_lo[k]] = 1
            is_cut[self.e_hi[k] + 1] = 1
        n_pieces = 0
        p = -1
        for k in range(257):
            if is_cut[k]:
                cut[n_pieces] = <int32_t>k
                n_pieces += 1
                p += 1
            piece_of[k] = <int32_t>p
        n_pieces -= 1  # pieces lie between consecutive cuts
        # edges per piece (counting sort), in edge order
        for p in range(n_pieces + 1):
            piece_start[p] = 0
        for k in range(n_edges):
            for p in range(piece_of[self.e_lo[k]], piece_of[self.e_hi[k] + 1]):
                piece_start[p + 1] += 1
        for p in range(n_pieces):
            piece_start[p + 1] += piece_start[p]
        total = piece_start[n_pieces]
        self.piece_items = <int32_t*>_grow(self.piece_items, &self.piece_cap, total, sizeof(int32_t))
        for p in range(n_pieces):
            fill[p] = piece_start[p]
        for k in range(n_edges):
            for p in range(piece_of[self.e_lo[k]], piece_of[self.e_hi[k] + 1]):
                self.piece_items[fill[p]] = self.e_dst[k]
                fill[p] += 1
        for p in range(n_pieces):
            if piece_start[p] == piece_start[p + 1]:
                continue
            if self.current_stamp == INT32_MAX:
                for k in range(self.page_slots):
                    if self.pages[k] != NULL:
                        memset(self.pages[k].stamp, 0, sizeof(self.pages[k].stamp))
                self.current_stamp = 0
            self.current_stamp += 1
            stamp_now = self.current_stamp
            count = 0
            for a in range(piece_start[p], piece_start[p + 1]):
                c = self._closure(self.piece_items[a], &closure)
                for k in range(c):
                    t = closure[k]
                    page = self._page(t)
                    if page.stamp[t & PAGE_MASK] != stamp_now:
                        page.stamp[t & PAGE_MASK] = stamp_now
                        if count == self.gather_cap:
                            self.gather = <int32_t*>_grow(self.gather, &self.gather_cap, count + 1, sizeof(int32_t))
                        self.gather[count] = t
                        count += 1
            target = self._intern(count, max_states)
            if target < 0:
                return -1
            for k in range(cut[p], cut[p + 1]):
                out[k] = target
        return self.n_sets


def class_body_bytes(const int32_t[::1] row, Py_ssize_t minimum):
    """Whether ``row`` may stand in a body that loops over one set of characters: at least
    ``minimum`` safe ASCII bytes live (no quote, backslash or control byte), and past ASCII
    either no byte live, or every UTF-8 lead byte (0xC2-0xF4) and nothing else (a set holding
    every character past ASCII, such as ``[^/]``). The gate of the class-body shortcut, checked
    on every new state (a fraction of a microsecond)."""
    cdef Py_ssize_t b, count = 0, leads = 0
    if row.shape[0] != 256:
        raise ValueError("a row has 256 entries")
    for b in range(0x80, 256):
        if row[b] >= 0:
            if b < 0xC2 or b > 0xF4:
                return False
            leads += 1
    if leads != 0 and leads != 0xF4 - 0xC2 + 1:
        return False
    for b in range(0x20, 0x80):
        if row[b] >= 0 and b != 0x22 and b != 0x5C:
            count += 1
    return count >= minimum


def embeds_within(const int32_t[:, ::1] inner, const int32_t[:, ::1] table, const uint8_t[::1] built, int32_t state,
                  const uint8_t[::1] columns, Py_ssize_t max_depth, Py_ssize_t max_pairs,
                  SubsetConstruction builder=None, int32_t[:, ::1] rows=None, uint8_t[::1] built_flags=None):
    """For how many bytes automaton ``inner`` embeds in ``table`` at ``state``: the largest
    ``n <= max_depth`` such that every pair (inner state, table state) first reached from
    (0, ``state``) over fewer than ``n`` bytes with ``columns[b]`` set agrees on which of those
    bytes are dead (breadth first, so each pair is compared once, at its least depth), the walk
    stopping short of ``max_depth`` at the level that would hold more than ``max_pairs`` pairs.
    With a ``builder`` (a lazy automaton's subset construction; ``rows`` and ``built_flags``
    the writable ``table`` and ``built``, under the automaton's lock) unbuilt rows are built on
    the spot. Returns (``n``, rows built), ``n`` being ``-(s + 2)`` when row ``s`` is past the
    table or cannot be built here (build it and ask again). Cost: one row comparison per pair."""
    cdef Py_ssize_t num_states = table.shape[0], cap = 64, mask, h, n_seen = 1, level_start = 0, level_end = 1
    cdef Py_ssize_t k, k2, depth = 0, rows_built = 0
    cdef int32_t u, d, ub, db
    cdef int64_t key
    cdef int b
    cdef bint building = builder is not None
    cdef int32_t* writable = NULL
    cdef uint8_t* flags = NULL
    if building:
        if rows is None or built_flags is None or &rows[0, 0] != &table[0, 0] or &built_flags[0] != &built[0]:
            raise ValueError("building needs the walked table and built flags as writable arrays")
        writable = &rows[0, 0]
        flags = &built_flags[0]
    # the pairs seen (open addressing, doubled as it fills: most checks see a few dozen pairs)
    cdef int64_t* keys = <int64_t*>malloc(cap * sizeof(int64_t))
    cdef int32_t* pairs = <int32_t*>malloc(2 * cap * sizeof(int32_t))
    cdef int64_t* grown_keys
    cdef int32_t* grown_pairs
    cdef int64_t stride = table.shape[0] + 1
    if keys == NULL or pairs == NULL:
        free(keys); free(pairs)
        raise MemoryError()
    try:
        memset(keys, 0xFF, cap * sizeof(int64_t))  # every key -1
        mask = cap - 1
        pairs[0] = 0
        pairs[1] = state
        key = <int64_t>state
        keys[<Py_ssize_t>((<uint64_t>key * <uint64_t>0x9E3779B97F4A7C15) >> 20) & mask] = key
        while level_start < level_end and depth < max_depth:
            for k in range(level_start, level_end):
                u = pairs[2 * k]
                d = pairs[2 * k + 1]
                if d >= num_states:
                    return -(d + 2), rows_built
                if not built[d]:
                    if not building:
                        return -(d + 2), rows_built
                    builder._row(d, writable + <Py_ssize_t>d * 256, -1)
                    flags[d] = 1
                    rows_built += 1
                for b in range(256):
                    if not columns[b]:
                        continue
                    ub = inner[u, b]
                    db = table[d, b]
                    if (ub < 0) != (db < 0):
                        return depth, rows_built
                    if ub < 0:
                        continue
                    if 2 * (n_seen + 1) > cap:  # double the table and the pair list first
                        grown_pairs = <int32_t*>realloc(pairs, 4 * cap * sizeof(int32_t))
                        if grown_pairs == NULL:
                            raise MemoryError()
                        pairs = grown_pairs
                        grown_keys = <int64_t*>malloc(2 * cap * sizeof(int64_t))
                        if grown_keys == NULL:
                            raise MemoryError()
                        free(keys)
                        keys = grown_keys
                        cap *= 2
                        mask = cap - 1
                        memset(keys, 0xFF, cap * sizeof(int64_t))
                        for k2 in range(n_seen):
                            key = <int64_t>pairs[2 * k2] * stride + pairs[2 * k2 + 1]
                            h = <Py_ssize_t>((<uint64_t>key * <uint64_t>0x9E3779B97F4A7C15) >> 20) & mask
                            while keys[h] != -1:
                                h = (h + 1) & mask
                            keys[h] = key
                    key = <int64_t>ub * stride + db
                    h = <Py_ssize_t>((<uint64_t>key * <uint64_t>0x9E3779B97F4A7C15) >> 20) & mask
                    while keys[h] != -1 and keys[h] != key:
                        h = (h + 1) & mask
                    if keys[h] == key:
                        continue
                    if n_seen >= max_pairs:
                        return depth, rows_built
                    keys[h] = key
                    pairs[2 * n_seen] = ub
                    pairs[2 * n_seen + 1] = db
                    n_seen += 1
            level_start = level_end
            level_end = n_seen
            depth += 1
    finally:
        free(keys)
        free(pairs)
    return max_depth, rows_built


def loop_and_leaving(const int32_t[::1] row, int32_t state):
    """The state most live safe ASCII bytes of ``row`` (no quote, backslash or control byte)
    lead to, the least of them on a tie (``state`` when none is live), and the other live safe
    ASCII bytes, ascending, as a tuple: a class body's loop and the bytes that leave it (a
    microsecond)."""
    cdef int32_t targets[128]
    cdef int live[128]
    cdef int n = 0, i, k, count, best_count = 0, b
    cdef int32_t loop = state
    if row.shape[0] != 256:
        raise ValueError("a row has 256 entries")
    for b in range(0x20, 0x80):
        if row[b] >= 0 and b != 0x22 and b != 0x5C:
            live[n] = b
            targets[n] = row[b]
            n += 1
    for i in range(n):
        count = 0
        for k in range(n):
            count += targets[k] == targets[i]
        if count > best_count or (count == best_count and targets[i] < loop):
            best_count = count
            loop = targets[i]
    return loop, tuple([live[i] for i in range(n) if targets[i] != loop])

cdef inline int32_t _laid(int32_t s, const int64_t* bases, const int64_t* before, Py_ssize_t n_blocks,
                          int64_t r) noexcept nogil:
    """State ``s`` renumbered blocks last (see :func:`blocks_last`)."""
    cdef Py_ssize_t lo = 0, hi = n_blocks, mid
    while lo < hi:  # blocks with a base <= s
        mid = (lo + hi) >> 1
        if bases[mid] <= s:
            lo = mid + 1
        else:
            hi = mid
    if lo > 0 and bases[lo - 1] == s:
        return <int32_t>(r + before[lo - 1])  # a block entered at its base
    return <int32_t>(s - before[lo])


def blocks_last(int32_t[:, ::1] edges, int32_t[:, ::1] eps, const int64_t[::1] bases,
                const int64_t[::1] before, int64_t r):
    """Renumber, in place, the ends of ``edges`` (int32[E, 4]) and ``eps`` (int32[M, 2]) so
    that the states outside the blocks (bases ascending, ``before[k]`` the block states below
    block ``k``) come first and each block's base becomes ``r + before[k]``: the compiled
    :func:`enforcer.automaton._blocks_last`. Cost: a binary search over the bases per edge end."""
    cdef Py_ssize_t k, nb = bases.shape[0]
    if before.shape[0] != nb + 1 or nb == 0:
        raise ValueError("before holds one entry more than bases, and there is a block")
    cdef const int64_t* b = &bases[0]
    cdef const int64_t* f = &before[0]
    with nogil:
        for k in range(edges.shape[0]):
            edges[k, 0] = _laid(edges[k, 0], b, f, nb, r)
            edges[k, 3] = _laid(edges[k, 3], b, f, nb, r)
        for k in range(eps.shape[0]):
            eps[k, 0] = _laid(eps[k, 0], b, f, nb, r)
            eps[k, 1] = _laid(eps[k, 1], b, f, nb, r)


cdef inline void _close_over_predecessors(uint8_t* flags, Py_ssize_t n, const int64_t* start,
                                          const int32_t* preds, int32_t* stack) noexcept nogil:
    """Flag every state of ``0..n-1`` that reaches a flagged one over the edges whose
    predecessor lists are ``preds[start[t]:start[t + 1]]`` (``stack``: room for ``n``)."""
    cdef Py_ssize_t top = 0, j
    cdef int64_t a
    cdef int32_t t, s
    for j in range(n):
        if flags[j]:
            stack[top] = <int32_t>j
            top += 1
    while top:
        top -= 1
        t = stack[top]
        for a in range(start[t], start[t + 1]):
            s = preds[a]
            if not flags[s]:
                flags[s] = 1
                stack[top] = s
                top += 1


def reaching(Py_ssize_t n, const int32_t[::1] sources, const int32_t[::1] targets, int32_t end):
    """Which of ``n`` states reach ``end`` over the edges ``sources[k] -> targets[k]`` (a uint8
    array): predecessor lists by counting sort, then one depth-first pass
    (:func:`_close_over_predecessors`). Cost linear in the states and edges."""
    cdef Py_ssize_t m = sources.shape[0], k
    cdef int32_t t
    start_arr = np.zeros(n + 1, dtype=np.int64)
    preds_arr = np.empty(max(m, 1), dtype=np.int32)
    alive_arr = np.zeros(n, dtype=np.uint8)
    stack_arr = np.empty(max(n, 1), dtype=np.int32)
    cdef int64_t[::1] start = start_arr
    cdef int32_t[::1] preds = preds_arr
    cdef uint8_t[::1] alive = alive_arr
    cdef int32_t[::1] stack = stack_arr
    with nogil:
        for k in range(m):
            start[targets[k] + 1] += 1
        for k in range(n):
            start[k + 1] += start[k]
        for k in range(m):  # fills each target's slice from its end back (order does not matter)
            t = targets[k]
            start[t + 1] -= 1
            preds[start[t + 1]] = sources[k]
        # start[t + 1] now begins t's slice: shifted down, t's slice is start[t]..start[t + 1]
        for k in range(n):
            start[k] = start[k + 1]
        start[n] = m
        alive[end] = 1
        _close_over_predecessors(&alive[0], n, &start[0], &preds[0], &stack[0])
    return alive_arr


def nfa_csr(Py_ssize_t n, const int32_t[:, ::1] edges, const int32_t[:, ::1] eps, const uint8_t[::1] alive):
    """The edges of an ``n``-state NFA grouped by source (CSR), each group in the order the
    edges were added: ``edges`` int32[E, 4] (source, lo, hi, target), ``eps`` int32[M, 2]
    (source, target); an edge whose target is not ``alive`` (uint8[k], or None: keep all; a
    target past ``k``, an embedded block's base, is kept) is dropped. Returns (edge starts
    int32[n + 1], lo, hi uint8[E'], target int32[E'], epsilon starts int32[n + 1], epsilon
    targets int32[M'], and per state whether it reads a byte: uint8[n], 1 where its group of
    byte edges is not empty). Cost: two counting passes, linear."""
    cdef Py_ssize_t m = edges.shape[0], q = eps.shape[0], k, kept = 0, kept_eps = 0
    cdef bint trim = alive is not None
    cdef Py_ssize_t flags = alive.shape[0] if trim else 0
    cdef int32_t src
    cdef int32_t at
    if m >= INT32_MAX or q >= INT32_MAX:
        raise ValueError("an NFA with 2**31 edges or more")
    edge_start_arr = np.zeros(n + 1, dtype=np.int32)
    eps_start_arr = np.zeros(n + 1, dtype=np.int32)
    cdef int32_t[::1] edge_start = edge_start_arr
    cdef int32_t[::1] eps_start = eps_start_arr
    with nogil:
        for k in range(m):
            if not trim or edges[k, 3] >= flags or alive[edges[k, 3]]:
                edge_start[edges[k, 0] + 1] += 1
                kept += 1
        for k in range(q):
            if not trim or eps[k, 1] >= flags or alive[eps[k, 1]]:
                eps_start[eps[k, 0] + 1] += 1
                kept_eps += 1
        for k in range(n):
            edge_start[k + 1] += edge_start[k]
            eps_start[k + 1] += eps_start[k]
    lo_arr = np.empty(kept, dtype=np.uint8)
    hi_arr = np.empty(kept, dtype=np.uint8)
    dst_arr = np.empty(kept, dtype=np.int32)
    eps_dst_arr = np.empty(kept_eps, dtype=np.int32)
    fill_arr = np.empty(max(n, 1), dtype=np.int32)
    cdef uint8_t[::1] lo = lo_arr
    cdef uint8_t[::1] hi = hi_arr
    cdef int32_t[::1] dst = dst_arr
    cdef int32_t[::1] eps_dst = eps_dst_arr
    cdef int32_t[::1] fill = fill_arr
    with nogil:
        for k in range(n):
            fill[k] = edge_start[k]
        for k in range(m):  # front to back: each group keeps the order of addition
            if not trim or edges[k, 3] >= flags or alive[edges[k, 3]]:
                src = edges[k, 0]
                at = fill[src]
                lo[at] = <uint8_t>edges[k, 1]
                hi[at] = <uint8_t>edges[k, 2]
                dst[at] = edges[k, 3]
                fill[src] = at + 1
        for k in range(n):
            fill[k] = eps_start[k]
        for k in range(q):
            if not trim or eps[k, 1] >= flags or alive[eps[k, 1]]:
                src = eps[k, 0]
                at = fill[src]
                eps_dst[at] = eps[k, 1]
                fill[src] = at + 1
    reads_arr = np.empty(n, dtype=np.uint8)
    cdef uint8_t[::1] reads = reads_arr
    with nogil:
        for k in range(n):
            reads[k] = edge_start[k + 1] > edge_start[k]
    return edge_start_arr, lo_arr, hi_arr, dst_arr, eps_start_arr, eps_dst_arr, reads_arr


# --------------------------------------------------------------------------------------------
# Thompson construction


cdef object _single_bytes_owner = None  # the nodes the table below was made from (kept alive)
cdef uintptr_t _single_keys[1024]  # open addressing by address: 0 is an empty slot
cdef int16_t _single_values[1024]


def index_single_bytes(tuple nodes):
    """Index ``nodes`` (one shared byte-set node per byte value, ``nodes[b]`` matching byte
    ``b`` alone; kept alive here) by address: every :class:`ThompsonNFA` then reads such a node's
    byte from this table rather than through its ranges (a key's literal bytes). Once per
    process, by :mod:`enforcer.automaton` at import."""
    global _single_bytes_owner
    cdef Py_ssize_t b, slot
    cdef uintptr_t address
    if nodes is _single_bytes_owner:
        return
    if len(nodes) > 512:
        raise ValueError("at most 512 single-byte nodes")
    memset(_single_keys, 0, sizeof(_single_keys))
    for b in range(len(nodes)):
        address = <uintptr_t><PyObject*>nodes[b]
        slot = (address >> 4) & 1023
        while _single_keys[slot] != 0:
            slot = (slot + 1) & 1023
        _single_keys[slot] = address
        _single_values[slot] = <int16_t>b
    _single_bytes_owner = nodes


cdef inline int _single_byte(object node) noexcept:
    """The byte of a shared single-byte node (-1: another node)."""
    cdef uintptr_t address = <uintptr_t><PyObject*>node
    cdef Py_ssize_t slot = (address >> 4) & 1023
    while _single_keys[slot] != 0:
        if _single_keys[slot] == address:
            return _single_values[slot]
        slot = (slot + 1) & 1023
    return -1


cdef class ThompsonNFA:
    """Thompson construction of an expression tree (:class:`enforcer.automaton.Node`) into flat
    arrays: the compiled version of :class:`enforcer.automaton._NFA`, which it must match state
    for state and edge for edge (its differential test). ``kinds`` holds the node classes and
    singletons it dispatches on (ByteSet, Concat, Union, Repeat, Graph, Embedded, EPSILON,
    NOTHING, Block, Deferred); a Graph node's ``trim`` says whether it can leave dead states. A
    sub-expression of at least ``fragment_min`` NFA states met again is copied, renumbered,
    instead of walked again. ``deferred``: a Deferred node is a one-state placeholder block
    (else its ``bounded`` is built). Cost: a few attribute reads per node plus a copy per reuse."""

    cdef int32_t* edges  # (source, lo, hi, target) per byte edge
    cdef Py_ssize_t n_edges, edges_cap  # in ints
    cdef int32_t* eps  # (source, target) per epsilon edge
    cdef Py_ssize_t n_eps, eps_cap
    cdef public Py_ssize_t num_states
    cdef public bint may_dead_end
    cdef public list blocks
    cdef dict fragments
    cdef object ByteSet, Concat, Union, Repeat, Graph, Embedded, EPSILON, NOTHING, Block, Deferred
    cdef Py_ssize_t fragment_min
    cdef bint deferred

    def __cinit__(self):
        self.edges = NULL
        self.eps = NULL

    def __dealloc__(self):
        free(self.edges)
        free(self.eps)

    def __init__(self, tuple kinds, Py_ssize_t fragment_min, bint deferred=False):
        (self.ByteSet, self.Concat, self.Union, self.Repeat, self.Graph, self.Embedded, self.EPSILON,
         self.NOTHING, self.Block, self.Deferred) = kinds
        self.fragment_min = fragment_min
        self.deferred = deferred
        self.num_states = 0
        self.n_edges = self.edges_cap = self.n_eps = self.eps_cap = 0
        self.may_dead_end = False
        self.blocks = []
        self.fragments = {}

    def new(self):
        self.num_states += 1
        return self.num_states - 1

    def build(self, node, int32_t start, int32_t end):
        """Add ``node`` between NFA states ``start`` and ``end``."""
        self._build_shared(node, start, end)

    def pieces(self, node, int64_t cap):
        """The pieces this construction builds for ``node`` (each byte set, epsilon and
        nothing one, a graph its states, an embedded automaton its states; a shared sub-node
        counted at each use, a bounded repeat per copy), at most ``cap``: what
        :func:`enforcer.automaton.thompson_pieces` measures, without building anything.
        Linear in the distinct sub-nodes."""
        return self._pieces(node, {}, cap)

    cdef int64_t _pieces(self, object node, dict memo, int64_t cap) except -1:
        cdef int64_t total = 0, copies
        key = id(node)
        hit = memo.get(key)
        if hit is not None:
            return hit
        kind = type(node)
        if kind is self.Concat:
            for part in node.parts:
                total = min(total + self._pieces(part, memo, cap), cap)
        elif kind is self.Union:
            for part in node.alternatives:
                total = min(total + self._pieces(part, memo, cap), cap)
        elif kind is self.Repeat:
            copies = node.maximum if node.maximum is not None else node.minimum + 1
            total = self._pieces(node.node, memo, cap)
            if copies > 1:
                total = cap if total > cap // copies else min(total * copies, cap)
        elif kind is self.Graph:
            total = min(<int64_t>node.num_states, cap)
            for part in node.bodies:
                total = min(total + self._pieces(part, memo, cap), cap)
        elif kind is self.Embedded:
            total = min(<int64_t>node.dfa.num_states, cap)
        else:
            total = 1
        memo[key] = total
        return total

    def take_arrays(self):
        """The byte edges int32[n, 4] (source, lo, hi, target) and the epsilon edges int32[m, 2]
        (source, target), handed over without a copy: call once, when the NFA is built (the
        builder holds no edges afterwards)."""
        edges = _int32_table(self.edges, self.n_edges, 4)
        self.edges, self.n_edges, self.edges_cap = NULL, 0, 0
        eps = _int32_table(self.eps, self.n_eps, 2)
        self.eps, self.n_eps, self.eps_cap = NULL, 0, 0
        return edges, eps

    cdef inline int _edge(self, int32_t src, int32_t lo, int32_t hi, int32_t dst) except -1:
        if self.n_edges + 4 > self.edges_cap:
            self.edges = <int32_t*>_grow(self.edges, &self.edges_cap, self.n_edges + 4, sizeof(int32_t))
        self.edges[self.n_edges] = src
        self.edges[self.n_edges + 1] = lo
        self.edges[self.n_edges + 2] = hi
        self.edges[self.n_edges + 3] = dst
        self.n_edges += 4
        return 0

    cdef inline int _eps(self, int32_t src, int32_t dst) except -1:
        if self.n_eps + 2 > self.eps_cap:
            self.eps = <int32_t*>_grow(self.eps, &self.eps_cap, self.n_eps + 2, sizeof(int32_t))
        self.eps[self.n_eps] = src
        self.eps[self.n_eps + 1] = dst
        self.n_eps += 2
        return 0

    cdef inline int32_t _new(self):
        self.num_states += 1
        return <int32_t>(self.num_states - 1)

    cdef int _byte_set(self, object node, int32_t start, int32_t end) except -1:
        cdef int byte = _single_byte(node)
        if byte >= 0:
            return self._edge(start, byte, byte, end)
        for lo, hi in node.ranges:
            self._edge(start, lo, hi, end)
        return 0

    cdef int _build_shared(self, object node, int32_t start, int32_t end) except -1:
        cdef Py_ssize_t first_state, first_edge, first_eps, first_block
        if node.nfa_states < self.fragment_min:
            return self._build(node, start, end)
        key = id(node)
        fragment = self.fragments.get(key)
        if fragment is not None:
            return self._copy(fragment, start, end)
        first_state, first_edge, first_eps, first_block = self.num_states, self.n_edges, self.n_eps, len(self.blocks)
        self._build(node, start, end)
        self.fragments[key] = (first_state, first_edge, first_eps, first_block, self.num_states, self.n_edges,
                               self.n_eps, len(self.blocks), start, end, node)
        return 0

    cdef int _copy(self, tuple fragment, int32_t start, int32_t end) except -1:
        cdef Py_ssize_t first_state = fragment[0], first_edge = fragment[1], first_eps = fragment[2]
        cdef Py_ssize_t first_block = fragment[3], last_state = fragment[4], last_edge = fragment[5]
        cdef Py_ssize_t last_eps = fragment[6], last_block = fragment[7], k, j
        cdef int32_t f_start = fragment[8], f_end = fragment[9], x
        cdef int32_t offset = <int32_t>(self.num_states - first_state)
        cdef Py_ssize_t count = last_edge - first_edge
        if count:
            self.edges = <int32_t*>_grow(self.edges, &self.edges_cap, self.n_edges + count, sizeof(int32_t))
            for k in range(first_edge, last_edge, 4):
                j = self.n_edges + (k - first_edge)
                for x in range(4):
                    self.edges[j + x] = self.edges[k + x]
                self.edges[j] = _renumber(self.edges[k], f_start, f_end, start, end, offset)
                self.edges[j + 3] = _renumber(self.edges[k + 3], f_start, f_end, start, end, offset)
            self.n_edges += count
        count = last_eps - first_eps
        if count:
            self.eps = <int32_t*>_grow(self.eps, &self.eps_cap, self.n_eps + count, sizeof(int32_t))
            for k in range(first_eps, last_eps):
                self.eps[self.n_eps + (k - first_eps)] = _renumber(self.eps[k], f_start, f_end, start, end, offset)
            self.n_eps += count
        for block in self.blocks[first_block:last_block]:
            new_end = end if block.end == f_end else start if block.end == f_start else block.end + offset
            self.blocks.append(self.Block(block.base + offset, block.dfa, new_end))
        self.num_states += last_state - first_state
        return 0

    cdef int _build(self, object node, int32_t start, int32_t end) except -1:
        cdef int32_t cur, nxt, loop, back
        cdef Py_ssize_t i, last, base, k
        kind = type(node)
        if kind is self.ByteSet:
            return self._byte_set(node, start, end)
        if kind is self.Concat:
            parts = node.parts
            cur = start
            last = len(parts) - 1
            for i in range(last + 1):
                part = parts[i]
                nxt = end if i == last else self._new()
                if type(part) is self.ByteSet:
                    self._byte_set(part, cur, nxt)
                else:
                    self._build_shared(part, cur, nxt)
                cur = nxt
            return 0
        if node is self.EPSILON:
            return self._eps(start, end)
        if node is self.NOTHING:
            self.may_dead_end = True
            return 0
        if kind is self.Union:
            for a in node.alternatives:
                self._build_shared(a, start, end)
            return 0
        if kind is self.Repeat:
            inner = node.node
            cur = start
            for k in range(node.minimum):
                nxt = self._new()
                self._build_shared(inner, cur, nxt)
                cur = nxt
            if node.maximum is None:
                loop = self._new()
                self._eps(cur, loop)
                back = self._new()
                self._build_shared(inner, loop, back)
                self._eps(back, loop)
                self._eps(loop, end)
            else:
                self._eps(cur, end)
                for k in range(node.maximum - node.minimum):
                    nxt = self._new()
                    self._build_shared(inner, cur, nxt)
                    self._eps(nxt, end)
                    cur = nxt
            return 0
        if kind is self.Graph:
            if not node.trim:
                self.may_dead_end = True
            base = self.num_states
            self.num_states += node.num_states
            self._eps(start, <int32_t>(base + node.start))
            for a in node.accepting:
                self._eps(<int32_t>(base + a), end)
            for src, sub, dst in node.edges:
                self._build_shared(sub, <int32_t>(base + src), <int32_t>(base + dst))
            return 0
        if kind is self.Embedded:
            dfa = node.dfa
            if dfa.is_empty:  # no state to enter: no block (its base would name the next state)
                self.may_dead_end = True
                return 0
            base = self.num_states
            self.num_states += dfa.num_states
            self.blocks.append(self.Block(base, dfa, end))
            self._eps(start, <int32_t>base)
            return 0
        if kind is self.Deferred:
            if not self.deferred:
                return self._build_shared(node.bounded, start, end)
            base = self._new()
            self.blocks.append(self.Block(base, node, end))
            self._eps(start, <int32_t>base)
            return 0
        raise TypeError(f"not a Node: {node!r}")


cdef inline int32_t _renumber(int32_t x, int32_t f_start, int32_t f_end, int32_t start, int32_t end,
                              int32_t offset) noexcept nogil:
    if x == f_start:
        return start
    if x == f_end:
        return end
    return x + offset


cdef inline uint64_t _signature_hash(const int32_t[:, ::1] trans, const int32_t* columns, Py_ssize_t ncols,
                                     const int32_t* classes, Py_ssize_t s) noexcept nogil:
    cdef uint64_t h = <uint64_t>(classes[s] + 1) * 0x9E3779B97F4A7C15ULL
    cdef int32_t t
    cdef Py_ssize_t c
    for c in range(ncols):
        t = trans[s, columns[c]]
        h = (h ^ <uint64_t>((classes[t] if t >= 0 else -1) + 2)) * 0x100000001B3ULL
    return h ^ (h >> 29)


cdef inline bint _same_signature(const int32_t[:, ::1] trans, const int32_t* columns, Py_ssize_t ncols,
                                 const int32_t* classes, Py_ssize_t r, Py_ssize_t s) noexcept nogil:
    cdef int32_t a, b
    cdef Py_ssize_t c
    if classes[r] != classes[s]:
        return False
    for c in range(ncols):
        a = trans[r, columns[c]]
        b = trans[s, columns[c]]
        if (classes[a] if a >= 0 else -1) != (classes[b] if b >= 0 else -1):
            return False
    return True


def moore_classes(const int32_t[:, ::1] trans, const uint8_t[::1] accepting):
    """The coarsest partition of the states of ``trans`` (int32[n, w], -1 dead; ``w`` at most 256 columns) that keeps
    accepting (``accepting`` uint8[n]) and other states apart and is stable under every byte,
    as class ids numbered in order of first appearance (int32[n]). Moore's refinement over the
    distinct columns only; each round assigns every state, in order, the class of the first
    state with the same (class, successor classes), found through a hash table and checked
    exactly. The oracle of its differential test: :func:`enforcer.automaton._minimise`'s numpy
    refinement. Cost per round: states times distinct columns."""
    cdef Py_ssize_t n = trans.shape[0], w = trans.shape[1], ncols = 0, s, c, k, slot, size = 1, previous, count
    cdef int32_t columns[256]
    cdef uint64_t column_hash[256]
    cdef uint64_t h
    cdef bint same
    if accepting.shape[0] != n:
        raise ValueError("one accepting flag per state")
    if w > 256:
        raise ValueError("at most 256 columns")
    classes_arr = np.zeros(n, dtype=np.int32)
    if n == 0:
        return classes_arr
    following_arr = np.empty(n, dtype=np.int32)
    while size < 2 * n:
        size <<= 1
    table_arr = np.empty(size, dtype=np.int32)
    cdef int32_t[::1] classes = classes_arr
    cdef int32_t[::1] following = following_arr
    cdef int32_t[::1] table = table_arr
    with nogil:
        # bytes whose columns are equal are one column
        for c in range(w):
            h = 0xCBF29CE484222325ULL
            for s in range(n):
                h = (h ^ <uint64_t>(trans[s, c] + 2)) * 0x100000001B3ULL
            same = False
            for k in range(ncols):
                if column_hash[k] == h:
                    same = True
                    for s in range(n):
                        if trans[s, columns[k]] != trans[s, c]:
                            same = False
                            break
                    if same:
                        break
            if not same:
                columns[ncols] = <int32_t>c
                column_hash[ncols] = h
                ncols += 1
        # accepting or not, numbered by first appearance
        previous = 1
        for s in range(n):
            classes[s] = 0 if (accepting[s] != 0) == (accepting[0] != 0) else 1
            if classes[s] == 1:
                previous = 2
        while True:
            for slot in range(size):
                table[slot] = -1
            count = 0
            for s in range(n):
                slot = <Py_ssize_t>(_signature_hash(trans, columns, ncols, &classes[0], s) & <uint64_t>(size - 1))
                while True:
                    k = table[slot]
                    if k < 0:
                        table[slot] = <int32_t>s
                        following[s] = <int32_t>count
                        count += 1
                        break
                    if _same_signature(trans, columns, ncols, &classes[0], k, s):
                        following[s] = following[k]
                        break
                    slot = (slot + 1) & (size - 1)
            for s in range(n):
                classes[s] = following[s]
            if count == previous:
                break
            previous = count
    return classes_arr


cdef uint64_t _layer_hash(const uint8_t* layer, Py_ssize_t n) noexcept nogil:
    cdef uint64_t h = 14695981039346656037ULL
    cdef Py_ssize_t j
    for j in range(n):
        h = (h ^ layer[j]) * 1099511628211ULL
    return h


cdef void _distinct_edges(const int32_t[:, ::1] table, const uint8_t[:, ::1] completes, int64_t[::1] stamp,
                          int64_t[::1] within_at, int64_t[::1] across_at, int32_t* within,
                          int32_t* across) noexcept nogil:
    """Each distinct ``(source, target)`` edge of ``table`` once per kind (across a unit's end
    where ``completes``, else within one): with ``within`` NULL counted at ``*_at[target + 1]``,
    else its source written at ``*_at[target]``, which advances (``stamp``: 2 per state)."""
    cdef Py_ssize_t n = table.shape[0], w = table.shape[1], s, b
    cdef int32_t t
    cdef int offset = 1 if within == NULL else 0
    stamp[:] = -1
    for s in range(n):
        for b in range(w):
            t = table[s, b]
            if t < 0:
                continue
            if completes[s, b]:
                if stamp[n + t] != s:
                    stamp[n + t] = s
                    if across != NULL:
                        across[across_at[t]] = <int32_t>s
                    across_at[t + offset] += 1
            elif stamp[t] != s:
                stamp[t] = s
                if within != NULL:
                    within[within_at[t]] = <int32_t>s
                within_at[t + offset] += 1


def counted_live(const int32_t[:, ::1] table, const uint8_t[:, ::1] completes, const uint8_t[::1] ends,
                 Py_ssize_t minimum, Py_ssize_t maximum, Py_ssize_t max_layers):
    """Which states ``(k, j)`` of a counted product live: slot ``j`` after ``k`` units ends after
    some count ``c`` more with ``minimum <= k + c <= maximum``. ``table``: the slots' pair table,
    ``completes[j, b]``: byte ``b`` from ``j`` ends a unit, ``ends``: slots where the pattern
    may stop between units. Layer ``c`` (the slots that end after exactly ``c`` more units) is
    layer ``c - 1``'s predecessors across a unit's end, closed under predecessors within a
    unit; layers are computed until one repeats an earlier one (then they cycle), at most
    ``max_layers`` (None past it). Returns bool[maximum + 1, n]: the same flags as
    :func:`enforcer.automaton._ending_layers` and the prefix counts after it. Cost: the distinct
    edges once per layer, then two passes over the flags."""
    cdef Py_ssize_t n = table.shape[0], j, c, k, rows, num = 0, earlier = -1, period = 0, low
    if ends.shape[0] != n or completes.shape[0] != n or n == 0:
        raise ValueError("one ending flag and one completes row per slot")
    stamp_arr = np.empty(2 * n, dtype=np.int64)  # set by each edge pass
    within_start_arr = np.zeros(n + 1, dtype=np.int64)
    across_start_arr = np.zeros(n + 1, dtype=np.int64)
    cdef int64_t[::1] stamp = stamp_arr
    cdef int64_t[::1] within_start = within_start_arr
    cdef int64_t[::1] across_start = across_start_arr
    with nogil:
        _distinct_edges(table, completes, stamp, within_start, across_start, NULL, NULL)
        for j in range(n):
            within_start[j + 1] += within_start[j]
            across_start[j + 1] += across_start[j]
    within_arr = np.empty(max(within_start[n], 1), dtype=np.int32)
    across_arr = np.empty(max(across_start[n], 1), dtype=np.int32)
    within_fill_arr = within_start_arr[:n + 1].copy()
    across_fill_arr = across_start_arr[:n + 1].copy()
    cdef int32_t[::1] within = within_arr
    cdef int32_t[::1] across = across_arr
    cdef int64_t[::1] within_fill = within_fill_arr
    cdef int64_t[::1] across_fill = across_fill_arr
    rows = (maximum if maximum < max_layers else max_layers) + 1
    layers_arr = np.zeros((rows, n), dtype=np.uint8)
    hashes_arr = np.zeros(rows, dtype=np.uint64)
    stack_arr = np.empty(n, dtype=np.int32)
    cdef uint8_t[:, ::1] layers = layers_arr
    cdef uint64_t[::1] hashes = hashes_arr
    cdef int32_t[::1] stack = stack_arr
    cdef int64_t a
    cdef uint64_t h
    with nogil:
        _distinct_edges(table, completes, stamp, within_fill, across_fill, &within[0], &across[0])
        for j in range(n):
            layers[0, j] = ends[j]
        _close_over_predecessors(&layers[0, 0], n, &within_start[0], &within[0], &stack[0])
        hashes[0] = _layer_hash(&layers[0, 0], n)
        num = 1
        while num <= maximum:
            if num > max_layers:
                break
            for j in range(n):
                if layers[num - 1, j]:
                    for a in range(across_start[j], across_start[j + 1]):
                        layers[num, across[a]] = 1
            _close_over_predecessors(&layers[num, 0], n, &within_start[0], &within[0], &stack[0])
            h = _layer_hash(&layers[num, 0], n)
            for k in range(num):
                if hashes[k] == h and memcmp(&layers[k, 0], &layers[num, 0], n) == 0:
                    earlier = k
                    break
            if earlier >= 0:  # from here the layers cycle through earlier..num-1
                period = num - earlier
                break
            hashes[num] = h
            num += 1
    if earlier < 0 and num <= maximum:
        return None  # no repeat within max_layers
    # reached[c] counts, per slot, the layers 0..c-1 holding it; state (k, j) lives when some
    # layer in max(0, minimum - k)..maximum - k holds j
    reached_arr = np.zeros((maximum + 2, n), dtype=np.int32)
    live_arr = np.empty((maximum + 1, n), dtype=np.bool_)
    cdef int32_t[:, ::1] reached = reached_arr
    cdef uint8_t[:, ::1] live = live_arr.view(np.uint8)
    with nogil:
        for c in range(maximum + 1):
            k = c if c < num else earlier + (c - earlier) % period
            for j in range(n):
                reached[c + 1, j] = reached[c, j] + layers[k, j]
        for k in range(maximum + 1):
            low = minimum - k if minimum > k else 0
            for j in range(n):
                live[k, j] = reached[maximum - k + 1, j] - reached[low, j] > 0
    return live_arr


def live_order(const int32_t[:, ::1] table, const uint8_t[::1] accepting):
    """The states of DFA ``table`` that can reach an accepting state and be reached from state
    0 through such states, in breadth-first visiting order from 0 (each state's distinct
    targets in increasing order): an int32 array, or None when state 0 cannot reach
    acceptance. Cost linear in the table."""
    cdef Py_ssize_t n = table.shape[0], w = table.shape[1], s, k, top, m = 0, count, head, found
    cdef int32_t t
    if n == 0:
        return None
    fstart_arr = np.zeros(n + 1, dtype=np.int64)
    stamp_arr = np.full(n, -1, dtype=np.int64)
    cdef int64_t[::1] fstart = fstart_arr
    cdef int64_t[::1] stamp = stamp_arr
    # distinct targets per state (forward lists, ascending)
    for s in range(n):
        for k in range(w):
            t = table[s, k]
            if t >= 0 and stamp[t] != s:
                stamp[t] = s
                m += 1
        fstart[s + 1] = m
    fwd_arr = np.empty(max(m, 1), dtype=np.int32)
    cdef int32_t[::1] fwd = fwd_arr
    stamp_arr.fill(-1)
    for s in range(n):
        count = fstart[s]
        for k in range(w):
            t = table[s, k]
            if t >= 0 and stamp[t] != s:
                stamp[t] = s
                fwd[count] = t
                count += 1
        if count - fstart[s] > 1:
            qsort(&fwd[fstart[s]], count - fstart[s], sizeof(int32_t), _compare_int32)
    # reverse lists (counting sort) and the states that reach acceptance
    rstart_arr = np.zeros(n + 2, dtype=np.int64)
    rev_arr = np.empty(max(m, 1), dtype=np.int32)
    live_arr = np.zeros(n, dtype=np.uint8)
    stack_arr = np.empty(n, dtype=np.int32)
    cdef int64_t[::1] rstart = rstart_arr
    cdef int32_t[::1] rev = rev_arr
    cdef uint8_t[::1] live = live_arr
    cdef int32_t[::1] stack = stack_arr
    cdef int64_t a, b
    for k in range(m):
        rstart[fwd[k] + 2] += 1
    for s in range(n):
        rstart[s + 2] += rstart[s + 1]
    for s in range(n):
        for a in range(fstart[s], fstart[s + 1]):
            t = fwd[a]
            rev[rstart[t + 1]] = <int32_t>s
            rstart[t + 1] += 1
    # rstart[t] .. rstart[t + 1] is now t's predecessor slice
    for s in range(n):
        live[s] = accepting[s] != 0
    _close_over_predecessors(&live[0], n, &rstart[0], &rev[0], &stack[0])
    if not live[0]:
        return None
    # breadth first from 0 through live states
    order_arr = np.empty(n, dtype=np.int32)
    cdef int32_t[::1] order = order_arr
    stamp_arr.fill(-1)
    order[0] = 0
    stamp[0] = 0
    found = 1
    head = 0
    while head < found:
        s = order[head]
        head += 1
        for a in range(fstart[s], fstart[s + 1]):
            t = fwd[a]
            if live[t] and stamp[t] < 0:
                stamp[t] = 0
                order[found] = t
                found += 1
    return order_arr[:found]


def finalised_table(const int32_t[:, ::1] trans, const uint8_t[::1] accepting, Py_ssize_t minimise_limit):
    """:func:`enforcer.automaton._finalise` in one call: the states of ``trans`` that are live
    (:func:`live_order`), renumbered in that order, then, for at most ``minimise_limit`` of
    them, merged into Moore's classes (:func:`moore_classes`, numbered by first appearance,
    each class the row of its first state). Returns ``(table int32[m, w], accepting
    bool[m])``, or None when the start cannot reach acceptance. The same table, state for
    state, as the numpy path; a small automaton pays one call instead of a dozen numpy
    calls (a tenth of the cost at 10 states). A large table whose states all live in that
    order already (a subset construction's, untrimmed) is returned itself, not copied: its
    copy, fresh memory, took as long as the construction (~250 ms at 113,000 states).
    Cost linear in the table per refinement round."""
    cdef Py_ssize_t n = trans.shape[0], w = trans.shape[1], m, k, b, c, num
    cdef int32_t t
    if accepting.shape[0] != n:
        raise ValueError("one accepting flag per state")
    order_arr = live_order(trans, accepting)
    if order_arr is None:
        return None
    cdef const int32_t[::1] order = order_arr
    m = order.shape[0]
    if m == n and m > minimise_limit:
        k = 0
        while k < m and order[k] == k:
            k += 1
        if k == m:  # every state kept, in place (a subset construction's own order): the table as is
            return trans.base, np.asarray(accepting, dtype=np.bool_)
    remap_arr = np.full(n, -1, dtype=np.int32)
    kept_arr = np.empty((m, w), dtype=np.int32)
    kept_acc_arr = np.empty(m, dtype=np.bool_)
    cdef int32_t[::1] remap = remap_arr
    cdef int32_t[:, ::1] kept = kept_arr
    cdef uint8_t[::1] kept_acc = kept_acc_arr.view(np.uint8)
    with nogil:
        for k in range(m):
            remap[order[k]] = <int32_t>k
        for k in range(m):
            kept_acc[k] = accepting[order[k]] != 0
            for b in range(w):
                t = trans[order[k], b]
                kept[k, b] = remap[t] if t >= 0 else -1
    if m > minimise_limit:
        return kept_arr, kept_acc_arr
    classes_arr = moore_classes(kept_arr, kept_acc_arr.view(np.uint8))
    cdef const int32_t[::1] classes = classes_arr
    num = 0
    for k in range(m):
        if classes[k] + 1 > num:
            num = classes[k] + 1
    if num == m:
        return kept_arr, kept_acc_arr
    table_arr = np.empty((num, w), dtype=np.int32)
    acc_arr = np.empty(num, dtype=np.bool_)
    cdef int32_t[:, ::1] table = table_arr
    cdef uint8_t[::1] acc = acc_arr.view(np.uint8)
    with nogil:
        c = 0
        for k in range(m):  # classes appear in order: the first state of each is its row
            if classes[k] == c:
                acc[c] = kept_acc[k]
                for b in range(w):
                    t = kept[k, b]
                    table[c, b] = classes[t] if t >= 0 else -1
                c += 1
    return table_arr, acc_arr

# --------------------------------------------------------------------------------------------
# Few-id masks


_zeros = np.zeros
_INT32 = np.dtype(np.int32)


cdef int _set_id_bits(int32_t* cells, Py_ssize_t words, object ids, Py_ssize_t* bad) except -1:
    """Set in ``cells`` (``words`` packed words) the bit of each of ``ids``; 0 and the first id
    outside ``[0, 32 * words)`` in ``bad`` when one is (the bits before it set), else 1."""
    cdef Py_ssize_t i
    for item in ids:
        i = item
        if i < 0 or i >= words * 32:
            bad[0] = i
            return 0
        cells[i >> 5] |= <int32_t>(<uint32_t>1 << (i & 31))
    return 1


def pack_few_ids(object ids, Py_ssize_t words):
    """A new packed int32 mask of ``words`` words with the bits of ``ids`` set (an iterable of
    ints, each in ``[0, words * 32)``; ``ValueError`` otherwise): a tag's next tokens, a
    place's delimiters. About 0.5 us for a few ids and 150k-id masks, against 1.4 for the same
    loop in Python: first visits of such states are a K3 turn's median token."""
    out = _zeros(words, dtype=_INT32)
    cdef int32_t[::1] cells = out
    cdef Py_ssize_t bad = 0
    if not _set_id_bits(&cells[0] if words > 0 else NULL, words, ids, &bad):
        raise ValueError(f"pack_few_ids: id {bad} is not below {words * 32}")
    return out



def take_few_ids(uint32_t[::1] words, Py_ssize_t most):
    """The ids whose bits are set in the packed ``words``, ascending, when there are at most
    ``most`` (at most 256; a tuple, and those words are cleared, so a scratch mask is zero
    again), else None (``words`` untouched): a walk's scratch mask turned into the few ids a key
    or a delimiter allows. One read of the words, 64 at a time (their OR, vectorised): about
    0.5 us for 150k ids."""
    cdef Py_ssize_t n = words.shape[0], start = 0, w, end, count = 0, k
    cdef uint32_t block, x
    cdef uint32_t* cells
    cdef int64_t found[256]
    if most < 0 or most > 256:
        raise ValueError(f"take_few_ids: most must be in [0, 256], got {most}")
    if n == 0:
        return ()
    cells = &words[0]
    while start < n:
        end = start + 64 if start + 64 < n else n
        block = 0
        for w in range(start, end):
            block |= cells[w]
        if block:
            for w in range(start, end):
                x = cells[w]
                while x:
                    if count == most:
                        return None
                    found[count] = w * 32 + __builtin_ctz(x)
                    count += 1
                    x &= x - 1
        start = end
    for k in range(count):
        cells[found[k] >> 5] = 0
    return tuple([found[k] for k in range(count)])


cdef class RowWriter:
    """Writes rows of one packed int32 bitmask (rows contiguous inside) from the ids they
    allow: its buffer is acquired once, where a typed view per call would cost about 0.3 us.
    Lifetime: that of the bitmask's checked record (it keeps the buffer exported)."""

    cdef int32_t[:, ::1] rows  # holds the buffer; the writes go through the pointer
    cdef int32_t* cells
    cdef Py_ssize_t height, width

    def __init__(self, int32_t[:, ::1] rows):
        self.rows = rows
        self.height, self.width = rows.shape[0], rows.shape[1]
        self.cells = &rows[0, 0] if self.height and self.width else NULL

    def write_ids(self, Py_ssize_t row, object ids):
        """Row ``row`` set to exactly the bits of ``ids`` (an iterable of ints, each in
        ``[0, 32 * width)``; ``ValueError`` naming the first that is not, with the row then
        cleared, or a row out of range): a clear and a bit per id, about 0.3 us for 150k ids."""
        cdef Py_ssize_t width = self.width, bad = 0
        cdef int32_t* cells
        if row < 0 or row >= self.height or width == 0:
            raise ValueError(f"write_ids: row {row} is not in [0, {self.height}) (of {width} words)")
        cells = self.cells + row * width
        memset(cells, 0, width * sizeof(int32_t))
        if not _set_id_bits(cells, width, ids, &bad):
            memset(cells, 0, width * sizeof(int32_t))
            raise ValueError(f"write_ids: id {bad} is not below {width * 32}")

    def write_words(self, Py_ssize_t row, object words):
        """Row ``row`` set to ``words`` (a C-contiguous buffer of exactly ``width`` 4-byte
        words, a packed mask; ``ValueError`` for another size or a row out of range, nothing
        written): one copy through the buffer protocol, about 0.5 us for 150k ids where a numpy
        row assignment costs 0.9."""
        cdef Py_buffer view
        cdef Py_ssize_t width = self.width
        if row < 0 or row >= self.height or width == 0:
            raise ValueError(f"write_words: row {row} is not in [0, {self.height}) (of {width} words)")
        PyObject_GetBuffer(words, &view, PyBUF_C_CONTIGUOUS)
        try:
            if view.len != width * <Py_ssize_t>sizeof(int32_t) or view.itemsize != sizeof(int32_t):
                raise ValueError(f"write_words: {view.len} bytes of {view.itemsize}-byte items, "
                                 f"not {width} words")
            memcpy(self.cells + row * width, view.buf, width * sizeof(int32_t))
        finally:
            PyBuffer_Release(&view)


cdef class TableReader:
    """Reads a token's bytes through one automaton table (int32 rows of 256 entries, rows
    contiguous) and its flags of built rows (uint8 per row; None: every row is built): one call
    per token, where a loop in Python reads a row object per byte (and keeps one per state for
    the collector to walk). Its buffers are acquired once (a typed view per call would cost
    about 0.3 us). Lifetime: that of the table (a lazy automaton makes a new reader when its
    table grows; one made before keeps reading the rows built in the table it holds)."""

    cdef const int32_t[:, ::1] table  # holds the buffers; reads go through the pointers
    cdef const uint8_t[::1] built
    cdef const int32_t* cells
    cdef const uint8_t* flags
    cdef Py_ssize_t num_rows

    def __init__(self, const int32_t[:, ::1] table, const uint8_t[::1] built=None):
        if table.shape[1] != 256 or (built is not None and built.shape[0] < table.shape[0]):
            raise ValueError("TableReader: a table of 256 columns, and a flag per row")
        self.table = table
        self.num_rows = table.shape[0]
        self.cells = &table[0, 0] if self.num_rows else NULL
        self.built = built
        self.flags = &built[0] if built is not None and built.shape[0] else NULL

    def read(self, int32_t state, bytes data not None, Py_ssize_t at=0):
        """The state after ``data[at:]`` from ``state`` (-1: it dies there), or, when it meets a
        row that this table has not built (or a state past it), ``-2 - (s | i << 32)``: state
        ``s`` before byte ``i``, for the caller to build and read on from."""
        cdef const unsigned char* text = <const unsigned char*>data
        cdef Py_ssize_t n = len(data), i
        if state < 0:
            return -1
        for i in range(at, n):
            if state >= self.num_rows or (self.flags != NULL and not self.flags[state]):
                return -2 - (<int64_t>state | (<int64_t>i << 32))
            state = self.cells[<Py_ssize_t>state * 256 + text[i]]
            if state < 0:
                return -1
        return state


# --------------------------------------------------------------------------------------------
# Minimal acyclic automata of finite sets of sequences


cdef struct _AcyclicState:
    uint64_t hash  # once registered
    int32_t head  # first and last child edge (-1: none)
    int32_t tail
    uint8_t final


cdef struct _AcyclicEdge:
    int32_t symbol
    int32_t child
    int32_t next  # the parent's next edge (-1: its last)


cdef struct _AcyclicStep:  # a step of the last sequence's path not registered yet
    int32_t edge
    int32_t child


cdef struct _Acyclic:
    _AcyclicState* states
    Py_ssize_t n_states, states_cap
    _AcyclicEdge* edges
    Py_ssize_t n_edges, edges_cap
    _AcyclicStep* path
    Py_ssize_t path_len, path_cap
    int32_t* slots  # the register: registered states by hash, open addressing (-1: empty)
    Py_ssize_t slot_cap, registered


cdef int32_t _acyclic_state(_Acyclic* a) except -1:
    if a.n_states == a.states_cap:
        a.states = <_AcyclicState*>_grow(a.states, &a.states_cap, a.n_states + 1, sizeof(_AcyclicState))
    a.states[a.n_states].final = 0
    a.states[a.n_states].head = a.states[a.n_states].tail = -1
    a.n_states += 1
    return <int32_t>(a.n_states - 1)


cdef int32_t _acyclic_edge(_Acyclic* a, int32_t parent, int32_t symbol, int32_t child) except -1:
    """A child edge appended to ``parent``'s (after its others)."""
    cdef int32_t e = <int32_t>a.n_edges
    if a.n_edges == a.edges_cap:
        a.edges = <_AcyclicEdge*>_grow(a.edges, &a.edges_cap, a.n_edges + 1, sizeof(_AcyclicEdge))
    a.edges[e].symbol = symbol
    a.edges[e].child = child
    a.edges[e].next = -1
    if a.states[parent].tail >= 0:
        a.edges[a.states[parent].tail].next = e
    else:
        a.states[parent].head = e
    a.states[parent].tail = e
    a.n_edges += 1
    return e


cdef uint64_t _acyclic_hash(const _Acyclic* a, int32_t s) noexcept nogil:
    cdef uint64_t h = (<uint64_t>0xCBF29CE4 << 32 | <uint64_t>0x84222325) ^ a.states[s].final
    cdef int32_t e = a.states[s].head
    while e >= 0:
        h = (h ^ <uint32_t>a.edges[e].symbol) * <uint64_t>0x100000001B3
        h = (h ^ <uint32_t>a.edges[e].child) * <uint64_t>0x100000001B3
        e = a.edges[e].next
    h ^= h >> 33
    h *= (<uint64_t>0xFF51AFD7 << 32 | <uint64_t>0xED558CCD)
    h ^= h >> 33
    return h


cdef bint _acyclic_same(const _Acyclic* a, int32_t s, int32_t t) noexcept nogil:
    """Whether states ``s`` and ``t`` are equal: same finality, same edges in the same order."""
    if a.states[s].final != a.states[t].final:
        return False
    cdef int32_t e = a.states[s].head, f = a.states[t].head
    while e >= 0 and f >= 0:
        if a.edges[e].symbol != a.edges[f].symbol or a.edges[e].child != a.edges[f].child:
            return False
        e = a.edges[e].next
        f = a.edges[f].next
    return e < 0 and f < 0


cdef int _acyclic_register_down_to(_Acyclic* a, Py_ssize_t length) except -1:
    """The path's states below ``length`` steps, deepest first: each replaced in its parent's
    edge by an equal state registered before, or registered."""
    cdef int32_t child, s
    cdef uint64_t h
    cdef Py_ssize_t idx, k, old_cap
    cdef int32_t* old
    while a.path_len > length:
        a.path_len -= 1
        child = a.path[a.path_len].child
        h = _acyclic_hash(a, child)
        idx = <Py_ssize_t>(h & <uint64_t>(a.slot_cap - 1))
        while True:
            s = a.slots[idx]
            if s < 0:
                break
            if a.states[s].hash == h and _acyclic_same(a, s, child):
                break
            idx = (idx + 1) & (a.slot_cap - 1)
        if s >= 0:
            a.edges[a.path[a.path_len].edge].child = s
            continue
        a.slots[idx] = child
        a.states[child].hash = h
        a.registered += 1
        if 2 * a.registered > a.slot_cap:  # rehash into twice the slots
            old, old_cap = a.slots, a.slot_cap
            a.slot_cap *= 2
            a.slots = <int32_t*>malloc(a.slot_cap * sizeof(int32_t))
            if a.slots == NULL:
                a.slots, a.slot_cap = old, old_cap
                raise MemoryError()
            memset(a.slots, 0xFF, a.slot_cap * sizeof(int32_t))
            for k in range(old_cap):
                s = old[k]
                if s >= 0:
                    idx = <Py_ssize_t>(a.states[s].hash & <uint64_t>(a.slot_cap - 1))
                    while a.slots[idx] >= 0:
                        idx = (idx + 1) & (a.slot_cap - 1)
                    a.slots[idx] = s
            free(old)
    return 0


def minimal_acyclic(list sequences):
    """The minimal acyclic automaton of ``sequences``: distinct int32 arrays of symbols, in
    lexicographic order (by any order of the symbols). Daciuk et al.'s incremental
    construction: each sequence adds its path past its common prefix with the one before, whose
    path below that prefix is then registered bottom up, each state replaced by an equal one
    registered before (same finality, same edges in the same order) where there is one.
    Numbered breadth first from the start (state 0), a state's edges in the order added.
    Returns ``(num_states, final uint8[num_states], edges int32[E, 3])``, edges as (from,
    symbol, to) state by state: state for state the automaton of
    :func:`enforcer.json_schema._acyclic_reference`. Cost: a few operations per symbol and a
    hash probe per state registered."""
    cdef _Acyclic a
    memset(&a, 0, sizeof(_Acyclic))
    cdef const int32_t[::1] seq
    cdef const int32_t* prev = NULL
    cdef object prev_obj = None
    cdef Py_ssize_t prev_len = 0, length, shared, k, n, i, count
    cdef int32_t state, new, e, c
    cdef int32_t* number = NULL
    cdef int32_t* order = NULL
    cdef uint8_t[::1] fin
    cdef int32_t[:, ::1] rows
    try:
        a.slot_cap = 64
        a.slots = <int32_t*>malloc(a.slot_cap * sizeof(int32_t))
        if a.slots == NULL:
            raise MemoryError()
        memset(a.slots, 0xFF, a.slot_cap * sizeof(int32_t))
        _acyclic_state(&a)
        for obj in sequences:
            seq = obj
            length = seq.shape[0]
            shared = 0
            while shared < length and shared < prev_len and seq[shared] == prev[shared]:
                shared += 1
            _acyclic_register_down_to(&a, shared)
            state = a.path[a.path_len - 1].child if a.path_len else 0
            for k in range(shared, length):
                new = _acyclic_state(&a)
                e = _acyclic_edge(&a, state, seq[k], new)
                if a.path_len == a.path_cap:
                    a.path = <_AcyclicStep*>_grow(a.path, &a.path_cap, a.path_len + 1, sizeof(_AcyclicStep))
                a.path[a.path_len].edge = e
                a.path[a.path_len].child = new
                a.path_len += 1
                state = new
            a.states[state].final = 1
            prev_obj = obj  # keeps ``prev`` alive
            prev = &seq[0] if length else NULL
            prev_len = length
        _acyclic_register_down_to(&a, 0)
        number = <int32_t*>malloc(a.n_states * sizeof(int32_t))
        order = <int32_t*>malloc(a.n_states * sizeof(int32_t))
        if number == NULL or order == NULL:
            raise MemoryError()
        memset(number, 0xFF, a.n_states * sizeof(int32_t))
        number[0] = 0
        order[0] = 0
        n = 1
        count = 0
        i = 0
        while i < n:  # breadth first: the states reachable (replaced ones are not)
            e = a.states[order[i]].head
            while e >= 0:
                c = a.edges[e].child
                if number[c] < 0:
                    number[c] = <int32_t>n
                    order[n] = c
                    n += 1
                count += 1
                e = a.edges[e].next
            i += 1
        final_arr = np.empty(n, dtype=np.uint8)
        edges_arr = np.empty((count, 3), dtype=np.int32)
        fin = final_arr
        rows = edges_arr
        k = 0
        for i in range(n):
            fin[i] = a.states[order[i]].final
            e = a.states[order[i]].head
            while e >= 0:
                rows[k, 0] = <int32_t>i
                rows[k, 1] = a.edges[e].symbol
                rows[k, 2] = number[a.edges[e].child]
                k += 1
                e = a.edges[e].next
        return n, final_arr, edges_arr
    finally:
        free(a.states); free(a.edges); free(a.path); free(a.slots)
        free(number); free(order)


def text_trie(list texts):
    """The byte trie of ``texts`` (bytes objects), state 0 the root, a state numbered when its
    first text reaches it: ``(int32[n, 256] transitions with a column per byte, -1 dead; the
    same compact, int32[n, k] with uint8[256] each byte's column, in the one form of
    :func:`column_classes`: a column per byte that some edge reads, one dead column for the
    rest, numbered by first byte; bool[n] accepting; int32[n] the text each state ends, -1
    none, -2 a text given twice)``, no state at all without texts.
    :class:`enforcer.automaton.TextTrie` in one call, where numpy took eight and the column
    merge a pass over the table (a call header's trie, built while a decode runs, spent about
    90 us in them on cold caches). Cost: one step per byte of the texts."""
    cdef Py_ssize_t total = 1, n = 1, i = 0, k, s, b, num = 0
    cdef const uint8_t[::1] data
    cdef int32_t node, nxt
    cdef int32_t* trie = NULL
    cdef int32_t* ending = NULL
    cdef uint8_t[256] read
    cdef int32_t[256] kept  # per class, its byte (-1: the dead column)
    cdef Py_ssize_t dead_class = -1
    cdef int32_t[:, ::1] spread, table
    cdef uint8_t[::1] classes, accepting
    cdef int32_t[::1] ends
    for obj in texts:
        total += len(<bytes?>obj)
    if not texts:
        total = n = 0
    memset(read, 0, 256)
    try:
        trie = <int32_t*>malloc(total * 256 * sizeof(int32_t) + 1)
        ending = <int32_t*>malloc(total * sizeof(int32_t) + 1)
        if trie == NULL or ending == NULL:
            raise MemoryError()
        memset(trie, 0xFF, total * 256 * sizeof(int32_t))
        memset(ending, 0xFF, total * sizeof(int32_t))
        for obj in texts:
            data = <bytes>obj
            node = 0
            for k in range(data.shape[0]):
                nxt = trie[node * 256 + data[k]]
                if nxt < 0:
                    nxt = trie[node * 256 + data[k]] = <int32_t>n
                    read[data[k]] = 1
                    n += 1
                node = nxt
            ending[node] = -2 if ending[node] != -1 else <int32_t>i
            i += 1
        classes_arr = np.empty(256, dtype=np.uint8)
        classes = classes_arr
        for b in range(256):
            if read[b]:
                kept[num] = <int32_t>b
                classes[b] = <uint8_t>num
                num += 1
            else:
                if dead_class < 0:
                    dead_class = num
                    kept[num] = -1
                    num += 1
                classes[b] = <uint8_t>dead_class
        spread_arr = np.empty((n, 256), dtype=np.int32)
        table_arr = np.empty((n, num), dtype=np.int32)
        ends_arr = np.empty(n, dtype=np.int32)
        accepting_arr = np.empty(n, dtype=np.uint8)
        spread = spread_arr
        table = table_arr
        ends = ends_arr
        accepting = accepting_arr
        if n:
            memcpy(&spread[0, 0], trie, n * 256 * sizeof(int32_t))
        for s in range(n):
            for k in range(num):
                table[s, k] = trie[s * 256 + kept[k]] if kept[k] >= 0 else -1
            ends[s] = ending[s]
            accepting[s] = ending[s] != -1
    finally:
        free(trie)
        free(ending)
    return spread_arr, table_arr, classes_arr, accepting_arr.view(np.bool_), ends_arr


# --------------------------------------------------------------------------------------------
# Token trie


def ascii_byte_index(const uint8_t[::1] flat, const int64_t[::1] offsets, const int64_t[::1] lengths,
                     const int64_t[::1] ids, const uint8_t[::1] chosen, Py_ssize_t words):
    """For each ASCII byte, the tokens at positions ``p`` of a token index with ``chosen[p]``
    set that hold it: as packed id masks (uint32[128, ``words``], row ``b`` for byte ``b``) and
    as ascending positions (int32: those of byte ``b`` are ``positions[starts[b]:starts[b + 1]]``).
    Returns (masks, starts int64[129], positions). Cost: one pass over the tokens' bytes (a few
    ms for 150k ids)."""
    cdef Py_ssize_t n = offsets.shape[0], p, i, b, half, total = 0
    cdef int64_t tid, start, stop
    cdef uint64_t bits
    if lengths.shape[0] != n or ids.shape[0] != n or chosen.shape[0] != n:
        raise ValueError("offsets, lengths, ids and chosen have one entry per token")
    masks_arr = np.zeros((128, words), dtype=np.uint32)
    starts_arr = np.zeros(129, dtype=np.int64)
    held_arr = np.zeros((n, 2), dtype=np.uint64)
    cdef uint32_t[:, ::1] masks = masks_arr
    cdef int64_t[::1] starts = starts_arr
    cdef uint64_t[:, ::1] held = held_arr
    with nogil:
        for p in range(n):
            if not chosen[p]:
                continue
            tid = ids[p]
            if tid < 0 or (tid >> 5) >= words:
                with gil:
                    raise ValueError(f"token id {tid} is outside {words} mask words")
            start = offsets[p]
            stop = start + lengths[p]
            for i in range(start, stop):
                b = flat[i]
                if b < 128:
                    held[p, b >> 6] |= (<uint64_t>1) << (b & 63)
            for half in range(2):
                bits = held[p, half]
                while bits:
                    b = half * 64 + __builtin_ctzll(bits)
                    bits &= bits - 1
                    starts[b + 1] += 1
                    masks[b, tid >> 5] |= (<uint32_t>1) << (tid & 31)
        for b in range(128):
            starts[b + 1] += starts[b]
        total = starts[128]
    positions_arr = np.empty(total, dtype=np.int32)
    cdef int32_t[::1] positions = positions_arr
    fill_arr = starts_arr[:128].copy()
    cdef int64_t[::1] fill = fill_arr
    with nogil:
        for p in range(n):
            for half in range(2):
                bits = held[p, half]
                while bits:
                    b = half * 64 + __builtin_ctzll(bits)
                    bits &= bits - 1
                    positions[fill[b]] = <int32_t>p
                    fill[b] += 1
    return masks_arr, starts_arr, positions_arr


def first_stop_in(const uint8_t[::1] flat, const int64_t[::1] offsets, const int64_t[::1] lengths,
                  const int32_t[::1] positions, const uint8_t[::1] stops):
    """The ``positions`` (of a token index; order kept) whose token's first byte ``b`` with
    ``stops[b]`` non-zero has ``stops[b] == 2`` (a class body's leaving byte, before any byte
    that kills the token), but for the tokens of more than one byte that start with such a
    byte. Cost: the bytes up to each token's first stop."""
    cdef Py_ssize_t n = positions.shape[0], k, kept = 0
    cdef int64_t pos, i, stop
    cdef uint8_t verdict
    if stops.shape[0] != 256:
        raise ValueError("stops has 256 entries")
    out_arr = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] out = out_arr
    with nogil:
        for k in range(n):
            pos = positions[k]
            i = offsets[pos]
            stop = i + lengths[pos]
            verdict = stops[flat[i]]
            if verdict == 2 and stop - i > 1:
                continue
            i += 1
            while i < stop and verdict == 0:
                verdict = stops[flat[i]]
                i += 1
            if verdict == 2:
                out[kept] = pos
                kept += 1
    return out_arr[:kept]


def build_trie(const uint8_t[::1] flat, const int64_t[::1] offsets, const int64_t[::1] lengths):
    """The trie of tokens sorted by their bytes (positions ``0..n-1`` of a token index), in
    preorder: node 0 is the root (the empty prefix), a node's first child follows it and its
    subtree ends at ``end[node]``. Returns (byte read into each node uint8, subtree end int32,
    first and past-last position of the tokens spelled by each node int32: a range, so tokens
    with equal bytes share their node). Cost: one pass over the bytes."""
    cdef Py_ssize_t n = offsets.shape[0], p, d, total = 1, node
    cdef int64_t prev_start = 0, prev_length = 0, start, length, lcp, limit, depth = 0, max_length = 0
    for p in range(n):
        if lengths[p] > max_length:
            max_length = lengths[p]
    lcp_arr = np.zeros(n, dtype=np.int64)
    cdef int64_t[::1] lcps = lcp_arr
    for p in range(n):
        start = offsets[p]
        length = lengths[p]
        limit = prev_length if prev_length < length else length
        lcp = 0
        while lcp < limit and flat[start + lcp] == flat[prev_start + lcp]:
            lcp += 1
        lcps[p] = lcp
        total += length - lcp
        prev_start = start
        prev_length = length
    byte_arr = np.zeros(total, dtype=np.uint8)
    end_arr = np.zeros(total, dtype=np.int32)
    first_arr = np.zeros(total, dtype=np.int32)
    last_arr = np.zeros(total, dtype=np.int32)
    open_arr = np.zeros(max_length + 1, dtype=np.int64)
    cdef uint8_t[::1] node_byte = byte_arr
    cdef int32_t[::1] node_end = end_arr
    cdef int32_t[::1] node_first = first_arr
    cdef int32_t[::1] node_last = last_arr
    cdef int64_t[::1] open_at = open_arr  # open_at[d]: the node of depth d on the current path
    node = 1
    for p in range(n):
        start = offsets[p]
        length = lengths[p]
        lcp = lcps[p]
        while depth > lcp:  # close the previous path below the shared prefix
            node_end[open_at[depth]] = <int32_t>node
            depth -= 1
        for d in range(lcp, length):
            node_byte[node] = flat[start + d]
            node_first[node] = <int32_t>p
            node_last[node] = <int32_t>p
            depth += 1
            open_at[depth] = node
            node += 1
        node_last[open_at[depth]] = <int32_t>(p + 1)  # the token ends at the path's last node
    while depth > 0:
        node_end[open_at[depth]] = <int32_t>node
        depth -= 1
    node_end[0] = <int32_t>node
    return byte_arr, end_arr, first_arr, last_arr


def subtree_bytes(const uint8_t[::1] node_byte, const int32_t[::1] node_end):
    """Per node of a preorder trie (:func:`build_trie`), the bytes read anywhere below it, as
    two 64-bit words of ASCII bits (bit ``b`` of word ``b >> 6``); any byte 0x00 or >= 0x80 sets
    bit 0 instead, which no loop class holds (see :meth:`TrieWalk.walk`). uint64[n, 2]; cost:
    one pass, children before parents."""
    cdef Py_ssize_t n = node_byte.shape[0], c, k
    cdef uint8_t b
    out_arr = np.zeros((n, 2), dtype=np.uint64)
    cdef uint64_t[:, ::1] out = out_arr
    with nogil:
        for c in range(n - 1, -1, -1):
            k = c + 1
            while k < node_end[c]:
                b = node_byte[k]
                if b == 0 or b >= 0x80:
                    out[c, 0] |= 1
                else:
                    out[c, b >> 6] |= (<uint64_t>1) << (b & 63)
                out[c, 0] |= out[k, 0]
                out[c, 1] |= out[k, 1]
                k = node_end[k]
    return out_arr


cdef enum:
    _RUN_MIN_NODES = 32  # smaller subtrees are walked: the run check would cost about as much
    _RUN_MAX_STATES = 8  # states one level of a run check tracks before it gives up
    _RUN_CLASSES = 4     # live targets over ASCII a state may have for the run check to use it
    _RUN_SLOTS = 256     # the direct-mapped cache of states' byte classes, per walk


cdef struct _ByteClasses:
    # a state's ASCII bytes (0x01-0x7f) grouped by the state they lead to (see _runs_live)
    int32_t state      # the state described (-1: an empty slot)
    int32_t n          # classes; -1: more than _RUN_CLASSES targets (the run check gives up)
    int32_t target[_RUN_CLASSES]
    uint64_t lo[_RUN_CLASSES]
    uint64_t hi[_RUN_CLASSES]
    uint64_t live_lo   # every byte with a live target
    uint64_t live_hi


cdef const _ByteClasses* _classes_of(_ByteClasses* cache, const int32_t[:, ::1] table, int32_t state) noexcept nogil:
    """The byte classes of ``state`` (its row built), from the cache or computed (127 lookups)."""
    cdef _ByteClasses* entry = &cache[state & (_RUN_SLOTS - 1)]
    cdef int b, j
    cdef int32_t u
    cdef uint64_t bit
    if entry.state == state:
        return entry
    entry.state = state
    entry.n = 0
    entry.live_lo = 0
    entry.live_hi = 0
    for b in range(1, 128):
        u = table[state, b]
        if u < 0:
            continue
        bit = (<uint64_t>1) << (b & 63)
        if b < 64:
            entry.live_lo |= bit
        else:
            entry.live_hi |= bit
        if entry.n < 0:
            continue
        j = 0
        while j < entry.n and entry.target[j] != u:
            j += 1
        if j == entry.n:
            if j == _RUN_CLASSES:
                entry.n = -1
                continue
            entry.target[j] = u
            entry.lo[j] = 0
            entry.hi[j] = 0
            entry.n += 1
        if b < 64:
            entry.lo[j] |= bit
        else:
            entry.hi[j] |= bit
    return entry


cdef bint _runs_live(_ByteClasses* cache, const int32_t[:, ::1] table, const uint8_t[::1] built,
                     Py_ssize_t num_states, int32_t state, uint64_t lo, uint64_t hi,
                     Py_ssize_t length) noexcept nogil:
    """Whether every string of 1 to ``length`` bytes drawn from the ASCII byte set (``lo``,
    ``hi``: bit ``b`` of word ``b >> 6``) stays alive from ``state`` (built): level by level,
    each state such strings reach lives on every byte of the set, and the states of the next
    level are the targets of its classes that the set meets (at most ``_RUN_MAX_STATES``, rows
    built); a level whose states all stood in the one before closes a cycle (every longer string
    lives too). A bounded repeat (a ``maxLength`` body, a hostname label: a state per position,
    none looping) is found whole this way. False when undecided: an unbuilt row, a state with
    more than ``_RUN_CLASSES`` targets, too many states. Cost: a few operations per state and
    level, each state's classes computed once per walk."""
    cdef int32_t sets[2][_RUN_MAX_STATES]
    cdef int n = 1, m, i, j, k, cur = 0
    cdef int32_t u
    cdef const _ByteClasses* classes
    cdef Py_ssize_t level
    cdef bint seen, closed
    sets[0][0] = state
    for level in range(length):
        m = 0
        for i in range(n):
            classes = _classes_of(cache, table, sets[cur][i])
            if (lo & ~classes.live_lo) or (hi & ~classes.live_hi):
                return False
            if level + 1 == length:
                continue  # the last byte: alive is all that counts
            if classes.n < 0:
                return False
            for j in range(classes.n):
                if not ((classes.lo[j] & lo) or (classes.hi[j] & hi)):
                    continue
                u = classes.target[j]
                if u >= num_states or not built[u]:
                    return False
                seen = False
                for k in range(m):
                    if sets[1 - cur][k] == u:
                        seen = True
                        break
                if not seen:
                    if m == _RUN_MAX_STATES:
                        return False
                    sets[1 - cur][m] = u
                    m += 1
        if level + 1 == length:
            return True
        closed = True  # the next level's states all stood in this one: a cycle over the set
        for k in range(m):
            seen = False
            for i in range(n):
                if sets[cur][i] == sets[1 - cur][k]:
                    seen = True
                    break
            if not seen:
                closed = False
                break
        if closed:
            return True
        cur = 1 - cur
        n = m
    return True


cdef struct _TrieNode:
    int32_t end      # where the node's subtree ends (preorder)
    int32_t first    # the range of the tokens the node spells, in ``ids``
    int32_t last
    uint16_t height  # the most bytes a token reads below the node
    uint64_t below_lo  # subtree_bytes: the ASCII bytes read below it (bit 0: any other byte)
    uint64_t below_hi


cdef class TrieWalk:
    """The arrays of one token trie (:func:`build_trie`) and the token ids of its positions,
    held once (per vocabulary) so that each walk passes only its automaton; the walk reads
    each node it enters as one 32-byte record (its fields side by side), and a node's children
    as two side-by-side arrays (their bytes, their nodes): a child whose byte is dead costs a
    byte read and a table lookup, not a record far away in the preorder (about 9 bytes more
    per node). Lifetime: that of the token index."""

    cdef _TrieNode* nodes
    cdef Py_ssize_t n_nodes
    cdef const int64_t[::1] ids
    cdef Py_ssize_t max_depth
    cdef int32_t* kid_start  # per node and one more: where its children start in kid_byte / kid_node
    cdef uint8_t* kid_byte  # the children's bytes, node by node, in byte order
    cdef int32_t* kid_node  # the children's nodes, alongside

    def __cinit__(self):
        self.nodes = NULL
        self.kid_start = NULL
        self.kid_byte = NULL
        self.kid_node = NULL

    def __init__(self, const uint8_t[::1] node_byte, const int32_t[::1] node_end, const int32_t[::1] node_first,
                 const int32_t[::1] node_last, const int64_t[::1] ids, Py_ssize_t max_depth):
        cdef const uint64_t[:, ::1] below = subtree_bytes(node_byte, node_end)
        cdef Py_ssize_t n = node_byte.shape[0], c, k, total
        self.nodes = <_TrieNode*>malloc(max(n, 1) * sizeof(_TrieNode))
        if self.nodes == NULL:
            raise MemoryError()
        for c in range(n - 1, -1, -1):  # children before parents: a node's height from theirs
            self.nodes[c].end = node_end[c]
            self.nodes[c].first = node_first[c]
            self.nodes[c].last = node_last[c]
            self.nodes[c].below_lo = below[c, 0]
            self.nodes[c].below_hi = below[c, 1]
            self.nodes[c].height = 0
            k = c + 1
            while k < node_end[c]:
                if self.nodes[k].height + 1 > self.nodes[c].height:
                    self.nodes[c].height = self.nodes[k].height + 1
                k = node_end[k]
        self.n_nodes = n
        self.ids = ids
        self.max_depth = max_depth
        self.kid_start = <int32_t*>malloc((n + 1) * sizeof(int32_t))
        self.kid_byte = <uint8_t*>malloc(max(n, 1) * sizeof(uint8_t))
        self.kid_node = <int32_t*>malloc(max(n, 1) * sizeof(int32_t))
        if self.kid_start == NULL or self.kid_byte == NULL or self.kid_node == NULL:
            raise MemoryError()
        total = 0
        for c in range(n):  # every node but the root is the child of one node
            self.kid_start[c] = <int32_t>total
            k = c + 1
            while k < node_end[c]:
                self.kid_byte[total] = node_byte[k]
                self.kid_node[total] = <int32_t>k
                total += 1
                k = node_end[k]
        self.kid_start[n] = <int32_t>total

    def __dealloc__(self):
        free(self.nodes)
        free(self.kid_start)
        free(self.kid_byte)
        free(self.kid_node)

    def walk(self, const int32_t[:, ::1] table, const uint8_t[::1] built, int32_t state, uint32_t[::1] mask,
             SubsetConstruction builder=None, Py_ssize_t max_rows=0, const int32_t[::1] start_nodes=None,
             const int32_t[::1] start_states=None):
        """Walk the trie through a DFA table, depth first, from the root at ``state`` (or from
        each ``(start_nodes[k], start_states[k])``: the node's bytes read, the DFA at that built
        state). Every token whose node the walk reaches alive gets its id's bit set in ``mask``;
        a dead byte prunes the whole subtree at once. With a ``builder`` (the subset construction
        of the lazy automaton whose own writable table and built flags ``table`` and ``built``
        are; the caller holds its lock and accounts for the rows), up to ``max_rows`` rows the
        walk reaches unbuilt are built on the spot. Other subtrees whose state is not built come
        back as pending. A subtree whose bytes all lead a built state back to itself (a loop
        over those bytes: string bodies, character classes) is allowed whole without walking it
        (:func:`subtree_bytes`), and so is a large one whose strings all live through a bounded
        run of states (:func:`_runs_live`: ``maxLength`` bodies, hostname labels). Returns (pending nodes, pending states, rows built), the pending arrays
        None when there are none. Cost: one table lookup per child of a live node, GIL released
        except while building a row."""
        cdef const _TrieNode* nodes = self.nodes
        cdef const _TrieNode* child
        cdef const int64_t[::1] ids = self.ids
        cdef Py_ssize_t n_nodes = self.n_nodes, n_positions = ids.shape[0], q_stop
        cdef int32_t loop_state[64]  # a direct-mapped cache of the states' loop classes
        cdef uint64_t loop_lo[64]
        cdef uint64_t loop_hi[64]
        cdef int32_t slot, b
        cdef uint64_t lo, hi
        cdef bint whole
        cdef Py_ssize_t num_states = table.shape[0], k, top, pending = 0, f, rows_built = 0
        cdef Py_ssize_t n_starts = 1 if start_nodes is None else start_nodes.shape[0]
        cdef int32_t c, t, q, q_end, node, kid
        cdef int64_t tid
        cdef int32_t* frame_state = <int32_t*>malloc((self.max_depth + 2) * sizeof(int32_t))
        cdef int32_t* frame_next = <int32_t*>malloc((self.max_depth + 2) * sizeof(int32_t))
        cdef int32_t* frame_stop = <int32_t*>malloc((self.max_depth + 2) * sizeof(int32_t))
        cdef int32_t* pend_nodes = NULL
        cdef int32_t* pend_states = NULL
        cdef int32_t* writable = NULL
        cdef uint8_t* flags = NULL
        cdef _ByteClasses* run_cache = NULL
        cdef Py_ssize_t pend_cap = 0, pend_cap2 = 0
        cdef bint failed = False, building = builder is not None
        cdef const int32_t* kid_start = self.kid_start
        cdef const uint8_t* kid_byte = self.kid_byte
        cdef const int32_t* kid_node = self.kid_node
        if start_nodes is not None and (start_states is None or start_states.shape[0] != n_starts):
            raise ValueError("start_nodes and start_states go together")
        if building:  # the lazy automaton's own arrays, allocated writable
            writable = <int32_t*>&table[0, 0]
            flags = <uint8_t*>&built[0]
        if frame_state == NULL or frame_next == NULL or frame_stop == NULL:
            free(frame_state); free(frame_next); free(frame_stop)
            raise MemoryError()
        for k in range(64):
            loop_state[k] = -1
        try:
            with nogil:
                for k in range(n_starts):
                    if start_nodes is None:
                        node = 0
                        frame_state[0] = state
                    else:
                        node = start_nodes[k]
                        frame_state[0] = start_states[k]
                    # a frame runs through its node's children (kid_start ranges); a dead
                    # byte costs one lookup, and only a live child's record is read
                    frame_next[0] = kid_start[node]
                    frame_stop[0] = kid_start[node + 1]
                    top = 1
                    while top:
                        f = top - 1
                        kid = frame_next[f]
                        if kid >= frame_stop[f]:
                            top -= 1
                            continue
                        frame_next[f] = kid + 1
                        t = table[frame_state[f], kid_byte[kid]]
                        if t < 0:
                            continue
                        c = kid_node[kid]
                        child = &nodes[c]
                        q_end = child.last
                        q = child.first
                        while q < q_end:
                            tid = ids[q]
                            mask[tid >> 5] |= (<uint32_t>1) << (tid & 31)
                            q += 1
                        if child.end == c + 1:  # a leaf
                            continue
                        if t < num_states and not built[t] and building and rows_built < max_rows:
                            with gil:
                                builder._row(t, writable + <Py_ssize_t>t * 256, -1)
                            flags[t] = 1
                            rows_built += 1
                        if t < num_states and built[t]:
                            # allowed whole when every byte below leads t back to t (bit 0: a
                            # byte no loop class holds). A state that the lowest byte below
                            # does not loop on is rejected at once (bounded repeats: a state
                            # per position, none looping); the class of one that does is
                            # computed once and cached
                            lo = child.below_lo
                            hi = child.below_hi
                            whole = False
                            if not (lo & 1):
                                b = __builtin_ctzll(lo) if lo else 64 + __builtin_ctzll(hi)
                                if table[t, b] == t:
                                    slot = t & 63
                                    if loop_state[slot] != t:  # the bytes 0x01-0x7f that lead t back to t
                                        loop_state[slot] = t
                                        loop_lo[slot] = 0
                                        loop_hi[slot] = 0
                                        for b in range(1, 128):
                                            if table[t, b] == t:
                                                if b < 64:
                                                    loop_lo[slot] |= (<uint64_t>1) << b
                                                else:
                                                    loop_hi[slot] |= (<uint64_t>1) << (b - 64)
                                    whole = (lo & ~loop_lo[slot]) == 0 and (hi & ~loop_hi[slot]) == 0
                            if not whole and not (lo & 1) and child.end - c >= _RUN_MIN_NODES:
                                # no loop, but maybe a bounded run over the bytes below
                                if run_cache == NULL:
                                    run_cache = <_ByteClasses*>malloc(_RUN_SLOTS * sizeof(_ByteClasses))
                                    if run_cache == NULL:
                                        failed = True
                                        break
                                    for slot in range(_RUN_SLOTS):
                                        run_cache[slot].state = -1
                                whole = _runs_live(run_cache, table, built, num_states, t, lo, hi, child.height)
                            if whole:
                                # every token below stays at t: all allowed, no walk
                                q_stop = nodes[child.end].first if child.end < n_nodes else n_positions
                                q = child.last
                                while q < q_stop:
                                    tid = ids[q]
                                    mask[tid >> 5] |= (<uint32_t>1) << (tid & 31)
                                    q += 1
                                continue
                            frame_state[top] = t
                            frame_next[top] = kid_start[c]
                            frame_stop[top] = kid_start[c + 1]
                            top += 1
                            continue
                        if pending == pend_cap:
                            pend_cap2 = pend_cap
                            pend_nodes = _grow_nogil(pend_nodes, &pend_cap, pending + 1)
                            pend_states = _grow_nogil(pend_states, &pend_cap2, pending + 1)
                            if pend_nodes == NULL or pend_states == NULL:
                                failed = True
                                break
                        pend_nodes[pending] = c
                        pend_states[pending] = t
                        pending += 1
                    if failed:
                        break
        finally:
            free(frame_state); free(frame_next); free(frame_stop); free(run_cache)
        if failed:
            free(pend_nodes); free(pend_states)
            raise MemoryError()
        if not pending:
            free(pend_nodes); free(pend_states)
            return None, None, rows_built
        nodes_arr = np.empty(pending, dtype=np.int32)
        states_arr = np.empty(pending, dtype=np.int32)
        cdef int32_t[::1] out_nodes = nodes_arr
        cdef int32_t[::1] out_states = states_arr
        for k in range(pending):
            out_nodes[k] = pend_nodes[k]
            out_states[k] = pend_states[k]
        free(pend_nodes); free(pend_states)
        return nodes_arr, states_arr, rows_built


ctypedef fused score_bits:
    int16_t
    int32_t
    int64_t


cdef enum:
    STREAM_MIN_WORDS = 8  # words in a run from which a streaming call writes it with non-temporal stores


cdef inline void _fill(score_bits* row, Py_ssize_t start, Py_ssize_t end, score_bits value,
                       bint stream) noexcept nogil:
    """``row[start:end] = value``: plain stores, or with ``stream`` from ``STREAM_MIN_WORDS``
    words of 32 columns up non-temporal ones (SSE2; plain elsewhere), which skip reading each
    cache line before writing it: twice the speed of plain stores over logits larger than the
    caches, ten times slower over one row that sits in them (callers choose, and end a
    streaming call with ``enforcer_stream_fence``)."""
    cdef Py_ssize_t i
    if not stream or end - start < STREAM_MIN_WORDS * 32:
        for i in range(start, end):
            row[i] = value
    else:
        _stream(row + start, end - start, value, NULL, NULL, 0)


cdef inline void _stream(score_bits* p, Py_ssize_t n, score_bits value, const int32_t* at, const score_bits* kept,
                         Py_ssize_t m) noexcept nogil:
    """``p[:n] = value`` but ``p[at[k]] = kept[k]`` (``m`` ascending columns), by non-temporal
    stores (``enforcer_stream_*``)."""
    if score_bits is int16_t:
        enforcer_stream_int16_t(p, n, value, at, kept, m)
    elif score_bits is int32_t:
        enforcer_stream_int32_t(p, n, value, at, kept, m)
    else:
        enforcer_stream_int64_t(p, n, value, at, kept, m)


def masked_scores(const float[:, ::1] source, float[:, ::1] target, const int32_t[:, ::1] bitmask,
                  bint stream=False):
    """``target[r, i] = source[r, i]`` where bit ``i`` of ``bitmask[r]`` is set, ``-inf``
    elsewhere (columns past the mask's words too). A run of words of ones is one copy, a run of
    zero words one fill, others go bit by bit; with ``stream`` (``target`` is written only) runs
    of ``STREAM_MIN_WORDS`` words or more go by non-temporal stores (:func:`_fill`). One pass
    over the rows, GIL released."""
    cdef Py_ssize_t rows = source.shape[0], width = source.shape[1], words = bitmask.shape[1]
    cdef Py_ssize_t read = words if words * 32 < width else (width + 31) // 32  # the words inside the width
    cdef Py_ssize_t r, w, i, base, end
    cdef uint32_t bits
    cdef int32_t minus_inf_bits
    cdef float minus_inf = -INFINITY
    cdef const int32_t* mask
    cdef const float* src
    cdef float* dst
    if target.shape[0] != rows or target.shape[1] != width or bitmask.shape[0] < rows:
        raise ValueError("masked_scores: source and target must have one shape, bitmask a row per row")
    memcpy(&minus_inf_bits, &minus_inf, sizeof(float))
    if rows == 0 or width == 0:
        return
    with nogil:
        for r in range(rows):
            src = &source[r, 0]
            dst = &target[r, 0]
            mask = &bitmask[r, 0] if words else NULL
            w = 0
            while w < read:
                base = w * 32
                bits = <uint32_t> mask[w]
                if bits == 0 or bits == UINT32_MAX:
                    w = enforcer_run_end(mask, w, read)
                    end = w * 32 if w * 32 <= width else width
                    if bits == 0:
                        _fill(<int32_t*> dst, base, end, minus_inf_bits, stream)
                    elif stream and end - base >= STREAM_MIN_WORDS * 32:
                        enforcer_stream_copy(<int32_t*> dst + base, <const int32_t*> src + base, end - base)
                    else:
                        memcpy(dst + base, src + base, (end - base) * sizeof(float))
                else:
                    end = base + 32 if base + 32 <= width else width
                    for i in range(base, end):
                        dst[i] = src[i] if (bits >> (i - base)) & 1 else minus_inf
                    w += 1
            if words * 32 < width:
                _fill(<int32_t*> dst, words * 32, width, minus_inf_bits, stream)
        if stream:
            enforcer_stream_fence()


cdef enum:
    KEEP_MAX = 256  # allowed columns a streaming row keeps through one whole-row fill
STREAM_KEEP_LIMIT = KEEP_MAX
"""Most allowed columns a streaming row keeps through one whole-row fill (more: run by run)."""


cdef inline bint _stream_sparse_row(score_bits* row, Py_ssize_t width, const int32_t* mask, Py_ssize_t words,
                                    score_bits minus_inf) noexcept nogil:
    """With ``stream``, a row that allows at most ``KEEP_MAX`` columns: their scores read
    (prefetched during the scan of the words, read after it), then the whole row written by one
    run of non-temporal stores, the 16-byte chunks that hold kept columns built with their
    scores. Filled run by run, each allowed column broke the stream with plain stores into the
    lines beside streamed ones (64 rows of 151,899 float32 allowing 50 scattered ids each: 3.3 ms
    against 2.0 for none; now 2.1). False, with nothing written, for a row that allows more.
    ``words``: the mask's words inside the width."""
    cdef Py_ssize_t w, i, k, n = 0
    cdef uint32_t bits
    cdef int32_t columns[KEEP_MAX]
    cdef score_bits saved[KEEP_MAX]
    for w in range(words):
        bits = <uint32_t> mask[w]
        while bits:
            i = w * 32 + __builtin_ctz(bits)
            if i >= width:
                break
            if n == KEEP_MAX:
                return False
            columns[n] = <int32_t> i
            __builtin_prefetch(row + i)
            n += 1
            bits &= bits - 1
    for k in range(n):  # read once the scan is done: its misses overlap instead of stalling it
        saved[k] = row[columns[k]]
    _stream(row, width, minus_inf, columns, saved, n)
    return True


cdef inline void _mask_row(score_bits* row, Py_ssize_t width, const int32_t* mask, Py_ssize_t words,
                           score_bits minus_inf, bint stream) noexcept nogil:
    """``row[i] = minus_inf`` (``width`` columns) where bit ``i`` of ``mask`` (``words`` words)
    is clear, columns past the words too. Words of ones are skipped, a run of zero words is one
    fill (:func:`_fill`), other words go bit by bit; with ``stream`` a row that allows few
    columns is one fill (:func:`_stream_sparse_row`)."""
    cdef Py_ssize_t w = 0, i, base, end
    cdef uint32_t bits, clear
    if stream and _stream_sparse_row(row, width, mask, words if words * 32 < width else (width + 31) // 32,
                                     minus_inf):
        return
    if words * 32 < width:
        _fill(row, words * 32, width, minus_inf, stream)
    else:
        words = (width + 31) // 32
    while w < words:
        base = w * 32
        bits = <uint32_t> mask[w]
        if bits == UINT32_MAX:
            w = enforcer_run_end(mask, w, words)
        elif bits == 0:
            w = enforcer_run_end(mask, w, words)
            _fill(row, base, w * 32 if w * 32 <= width else width, minus_inf, stream)
        else:
            end = base + 32 if base + 32 <= width else width
            clear = ~bits
            while clear:
                i = base + __builtin_ctzll(clear)
                if i >= end:
                    break
                row[i] = minus_inf
                clear &= clear - 1
            w += 1


cdef void _mask_rows(score_bits[:, ::1] logits, const int64_t[::1] rows, const int32_t** starts, Py_ssize_t words,
                     score_bits minus_inf, bint stream) noexcept nogil:
    """:func:`_mask_row` on ``logits[rows[k]]`` with mask ``starts[k]`` (``starts`` NULL: no
    mask, every column banned); a streaming call ends with one fence."""
    cdef Py_ssize_t k, width = logits.shape[1]
    for k in range(rows.shape[0]):
        _mask_row(&logits[rows[k], 0], width, starts[k] if starts != NULL else NULL, words, minus_inf, stream)
    if stream:
        enforcer_stream_fence()


cdef int _check_rows(const int64_t[::1] rows, Py_ssize_t height, str caller) except -1:
    cdef Py_ssize_t k
    for k in range(rows.shape[0]):
        if not 0 <= rows[k] < height:
            raise ValueError(f"{caller}: row {rows[k]} is not a row of logits with {height}")
    return 0


def mask_rows_in_place(score_bits[:, ::1] logits, const int64_t[::1] rows, const int32_t[:, ::1] bitmask,
                       score_bits minus_inf, bint stream=False):
    """``logits[rows[k], i] = minus_inf`` where bit ``i`` of ``bitmask[k]`` is clear (columns past
    the mask's words too); allowed columns are not touched. ``logits`` is the scores' bits (int16
    for float16 and bfloat16, int32 for float32, int64 for float64) and ``minus_inf`` the bits of
    ``-inf`` in that format. Words of ones are skipped, a run of zero words is one fill, others
    go bit by bit: free text (a few banned ids) costs a scan of the words, a structural row one
    write of the row (by non-temporal stores with ``stream``: :func:`_fill`). GIL released."""
    cdef Py_ssize_t n = rows.shape[0], words = bitmask.shape[1], k
    cdef const int32_t** starts = NULL
    if bitmask.shape[0] < n:
        raise ValueError("mask_rows_in_place: the bitmask needs a row per logits row named")
    _check_rows(rows, logits.shape[0], "mask_rows_in_place")
    if n == 0:
        return
    if words:
        starts = <const int32_t**> malloc(n * sizeof(int32_t*))
        if starts == NULL:
            raise MemoryError()
        for k in range(n):
            starts[k] = &bitmask[k, 0]
    with nogil:
        _mask_rows(logits, rows, starts, words, minus_inf, stream)
    free(starts)


def allows_any(const int32_t[::1] words, Py_ssize_t width):
    """Whether packed ``words`` set a bit below ``width`` (bits past the words count as clear):
    a scan by blocks of 64 words (each one OR, vectorised) up to the first nonzero block, so a
    mask that allows something early costs a block, an empty one a pass over its words."""
    cdef Py_ssize_t full = width >> 5, rest = width & 31, n = words.shape[0], w = 0, k, end
    cdef uint32_t seen
    if width <= 0:
        return False
    end = full if full < n else n
    while w < end:
        seen = 0
        for k in range(w, w + 64 if w + 64 < end else end):
            seen |= <uint32_t> words[k]
        if seen:
            return True
        w += 64
    return rest != 0 and full < n and (<uint32_t> words[full] & ((<uint32_t> 1 << rest) - 1)) != 0


def mask_rows_from_words(score_bits[:, ::1] logits, const int64_t[::1] rows, list masks, score_bits minus_inf,
                         bint stream=False):
    """:func:`mask_rows_in_place` with row ``k``'s mask the int32 array ``masks[k]`` (C-contiguous,
    one length for all), read where it lies: no packed copy of the batch (rows that share a mask,
    free text, read one array). GIL released for the writes."""
    cdef Py_ssize_t n = rows.shape[0], words = -1, k
    cdef const int32_t[::1] view
    cdef const int32_t** starts
    if len(masks) != n:
        raise ValueError(f"mask_rows_from_words: {len(masks)} masks for {n} rows")
    _check_rows(rows, logits.shape[0], "mask_rows_from_words")
    if n == 0:
        return
    starts = <const int32_t**> malloc(n * sizeof(int32_t*))
    if starts == NULL:
        raise MemoryError()
    try:
        for k in range(n):
            view = masks[k]  # the list keeps each array, so its buffer, alive through the writes
            if words < 0:
                words = view.shape[0]
            elif view.shape[0] != words:
                raise ValueError(f"mask_rows_from_words: masks of {words} and {view.shape[0]} words")
            starts[k] = &view[0] if words else NULL
        with nogil:
            _mask_rows(logits, rows, starts if words else NULL, words, minus_inf, stream)
    finally:
        free(starts)


# --------------------------------------------------------------------------------------------
# Schema documents


def plain_document(object value, int max_depth):
    """Whether the JSON document ``value`` passes
    :func:`enforcer.schema_check.check_document`: no object or array at depth ``max_depth`` or
    deeper, string keys only, no string holding a lone surrogate, scalars of the JSON types.
    True only where that walk passes; False where it may not (it then runs, to name the
    problem), and for subclasses of the built-in types (left to it). Recursive, at most
    ``max_depth`` deep. Cost: one C step per value, an ``isascii`` per string."""
    return _plain_value(value, 0, max_depth)


cdef inline bint _plain_text(str text) except -1:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


cdef bint _plain_value(object value, int depth, int max_depth) except -1:
    cdef type kind = type(value)
    if kind is str:
        return _plain_text(<str>value)
    if kind is dict:
        if depth >= max_depth:
            return False
        for key, item in (<dict>value).items():
            if type(key) is not str or not _plain_text(<str>key) or not _plain_value(item, depth + 1, max_depth):
                return False
        return True
    if kind is list or kind is tuple:
        if depth >= max_depth:
            return False
        for item in value:
            if not _plain_value(item, depth + 1, max_depth):
                return False
        return True
    return value is None or kind is bool or kind is int or kind is float


def keys_present(object value, frozenset keys, Py_ssize_t wanted):
    """The compiled :func:`enforcer.schema_resources.keys_present`: those of ``keys`` that some
    object anywhere in ``value`` has, the walk stopping once ``wanted`` of them were found (an
    object's matching keys all counted first). Same traversal as the reference (a stack of
    values; objects' values and lists' items pushed in order), so the same result; None where
    it meets a subclass of dict (the reference reads it through its own methods). Cost: one C
    step per value and a set lookup per object key."""
    cdef set found = set()
    cdef list stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is dict:
            for key in <dict>v:
                if key in keys:
                    found.add(key)
            if len(found) >= wanted and found:
                break
            stack.extend((<dict>v).values())
        elif isinstance(v, dict):
            return None
        elif isinstance(v, list):
            stack.extend(<list>v)
    return frozenset(found)


MAX_META_CHECK_DEPTH = 4000
"""Most checks :class:`MetaCheck` nests, over all threads (documents are checked at most 128
levels deep first: a few checks a level): the C stack stays bounded."""
cdef int _meta_check_depth = 0


cdef class MetaCheck:
    """The compiled :class:`enforcer.meta_schema._CheckReference`: one meta-schema object's
    check (the Python types a value may have, the checks of each object key, the other
    constraints), whose :meth:`ok` walks a document in C where the reference walks it in
    Python; :mod:`enforcer.meta_schema` builds its checks on it when the extension is built."""

    cdef public object types
    cdef public bint float_integers
    cdef public dict by_key
    cdef public list rest

    def __init__(self):
        self.types = None
        self.float_integers = False
        self.by_key = {}
        self.rest = []

    def ok(self, value):
        """True only when ``value`` satisfies this check; RecursionError past
        ``MAX_META_CHECK_DEPTH`` nested checks (as the reference's walk meets Python's limit)."""
        return self._ok(value)

    cdef bint _ok(self, object value) except -1:
        global _meta_check_depth
        if _meta_check_depth >= MAX_META_CHECK_DEPTH:
            raise RecursionError("the document nests too deeply for the meta-schema check")
        _meta_check_depth += 1
        try:
            return self._ok_here(value)
        finally:
            _meta_check_depth -= 1

    cdef bint _ok_here(self, object value) except -1:
        cdef object kind = type(value)
        if self.types is not None and kind not in <frozenset>self.types:
            if not (self.float_integers and kind is float and value.is_integer()):
                return False
        if self.by_key and kind is dict:
            for key, item in (<dict>value).items():
                checks = self.by_key.get(key)
                if checks is not None:
                    for check in <list>checks:
                        if not (<MetaCheck>check)._ok(item):
                            return False
        for constraint in self.rest:
            if not constraint(value):
                return False
        return True
