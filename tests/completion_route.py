"""The cheapest way to finish a value: the route the random-logit fuzzes take to close a value
past its budget.

A free-form value nests as deep as a text goes (its levels are built as walks reach them), so a
breadth-first search over every byte meets every value that could be opened within the length of
the completion: exponential in the depth the walk stands at. Here an opening bracket costs
``OPEN_COST`` bytes: the search meets only what lies within reach of the closing brackets, and
opens a container only where the schema demands one.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable, Iterable

OPEN_COST = 64
"""What an opening bracket weighs against one byte of any other kind."""
_OPENING = frozenset(b"[{")


def completion_route(dfa: Any, start: int, alphabet: Iterable[int],
                     arrived: Callable[[int], bool]) -> list[tuple[int, int]] | None:
    """``(state, byte)`` steps from ``start`` over bytes of ``alphabet`` to the first state,
    one byte or more away, for which ``arrived`` holds, the cheapest (see the module
    docstring); None when none is reachable. Cost: the states met, each row built on demand."""
    costs = [(OPEN_COST if b in _OPENING else 1, b) for b in sorted(set(alphabet))]
    parent: dict[int, tuple[int, int] | None] = {start: None}
    best = {start: 0}
    heap = [(0, start)]
    while heap:
        cost, state = heapq.heappop(heap)
        if cost > best[state]:
            continue
        if state != start and arrived(state):
            route = []
            while parent[state] is not None:
                state, byte = parent[state]
                route.append((state, byte))
            return route[::-1]
        row = dfa.row(state)
        for step, byte in costs:
            target = row[byte]
            if target >= 0 and cost + step < best.get(target, cost + step + 1):
                best[target] = cost + step
                parent[target] = (state, byte)
                heapq.heappush(heap, (cost + step, target))
    return None
