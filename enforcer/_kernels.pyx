# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Compiled hot loops of the token masks (built by the package's setup.py; GIL released).

``walk_tokens`` walks tokens (positions into a :class:`~enforcer.masks.TokenIndex`, sorted by
their bytes) through a DFA table, sharing the walk of a common prefix with the previous token:
a token that extends a prefix which already died costs one comparison. Rows that a lazy DFA has
not built yet stop the walk of the tokens that reach them; those come back as *pending* (state,
step) for the caller to build and resume. Cost: about one table lookup per trie edge.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

cdef enum:
    MAX_TOKEN_BYTES = 4096
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


def dfa_product(const int32_t[:, ::1] a, const int32_t[:, ::1] b, bint keep_other_dead, Py_ssize_t max_states):
    """Pairs of states of DFA tables ``a`` and ``b`` reached by the same strings, breadth first
    from (0, 0) (from (0, -1) when ``b`` has no state), bytes in increasing order: intersection
    follows bytes both tables accept, difference (``keep_other_dead``) every byte ``a`` accepts,
    ``b`` possibly dead (-1). Returns (table, first states, second states), one row per pair in
    the order found, or None past ``max_states`` pairs. Cost: one hash probe per live byte."""
    import numpy as np

    cdef Py_ssize_t nb1 = b.shape[0] + 1
    cdef Py_ssize_t capacity = 1024, rows = 64, n = 1, i = 0, h, k
    cdef int byte
    cdef int32_t sa, sb, ta, tb, target
    cdef int64_t key
    keys_arr = np.full(capacity, -1, dtype=np.int64)
    values_arr = np.empty(capacity, dtype=np.int32)
    table_arr = np.full((rows, 256), -1, dtype=np.int32)
    first_arr = np.empty(rows, dtype=np.int32)
    second_arr = np.empty(rows, dtype=np.int32)
    cdef int64_t[::1] keys = keys_arr
    cdef int32_t[::1] values = values_arr
    cdef int32_t[:, ::1] table = table_arr
    cdef int32_t[::1] first = first_arr
    cdef int32_t[::1] second = second_arr
    cdef int64_t[::1] old_keys
    cdef int32_t[::1] old_values
    first[0] = 0
    second[0] = 0 if b.shape[0] else -1
    key = second[0] + 1
    h = _slot(keys, key, capacity - 1)
    keys[h] = key
    values[h] = 0
    while i < n:
        sa = first[i]
        sb = second[i]
        for byte in range(256):
            ta = a[sa, byte]
            if ta < 0:
                continue
            tb = b[sb, byte] if sb >= 0 else -1
            if tb < 0 and not keep_other_dead:
                continue
            key = <int64_t>ta * nb1 + tb + 1
            h = _slot(keys, key, capacity - 1)
            if keys[h] == key:
                target = values[h]
            else:
                if n >= max_states:
                    return None
                target = <int32_t>n
                keys[h] = key
                values[h] = target
                if n == rows:
                    rows *= 2
                    table_arr = np.concatenate([table_arr, np.full((rows - n, 256), -1, dtype=np.int32)])
                    first_arr = np.concatenate([first_arr, np.empty(rows - n, dtype=np.int32)])
                    second_arr = np.concatenate([second_arr, np.empty(rows - n, dtype=np.int32)])
                    table, first, second = table_arr, first_arr, second_arr
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
            table[i, byte] = target
        i += 1
    return table_arr[:n], first_arr[:n], second_arr[:n]
