"""Compile scaling: Kimi K2 tool sets of 1 to 128 tools, cold and cached compile, first mask, memory.

``python -m benchmarks.compile_scaling [--quick]``

Tool sets are made by cycling a pool of tools and renaming each copy (``<name>_<i>``, so every
name is distinct): the tools of ``schemas/*.json``, then (when the corpus is present) the BFCL
schemas of ``../shared/corpus/maskbench`` (each file's single property is one function's
parameters; as many as the largest set, so in the full mode no parameter schema repeats). A BFCL
tool enters the pool only if every measured library compiles it alone.

Per (library, size): *cold* = compile after the library's cache is cleared; *cached* = the same
tool set compiled again (a cache hit for libraries that cache); *first mask* = a fresh matcher
and one ``fill_bitmask`` over the cold-compiled object (lazy libraries pay their work here).
*Memory* = growth of the process's resident set (RSS, from ``/proc/self/statm``) across the
first cold compile while the compiled object is held: it sees native allocations (xgrammar,
llguidance) but is coarse (allocator reuse can hide growth, so small sets may read 0). For ours
the full mode also reports Python-traced bytes (``tracemalloc``, current after compile).
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import re
import statistics
import time
from pathlib import Path
from typing import Any, Sequence

from . import (
    Environment,
    machine_info,
    make_environment,
    new_bitmask,
    pin_threads,
    render_simple,
    save_results,
)

DEFAULT_PEERS = ("xgrammar", "llguidance")
SCHEMAS_DIR = Path(__file__).resolve().parent.parent / "schemas"
DEFAULT_CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "maskbench"
FULL_SIZES = (1, 2, 16, 64, 128)
QUICK_SIZES = (1, 2, 16)


def project_tools() -> list[dict[str, Any]]:
    """The tools of ``schemas/*.json`` (each file a list of OpenAI-style tools), sorted by file."""
    tools: list[dict[str, Any]] = []
    for path in sorted(SCHEMAS_DIR.glob("*.json")):
        tools.extend(json.loads(path.read_text(encoding="utf-8")))
    return tools


def bfcl_tools(corpus: Path, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` tools from the BFCL MaskBench files (sorted names): the schema's single
    property is one function, its value the parameters."""
    tools: list[dict[str, Any]] = []
    for path in sorted(corpus.glob("BFCL_*.json")):
        schema = json.loads(path.read_text(encoding="utf-8")).get("schema")
        props = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(props, dict) or len(props) != 1:
            continue
        (name, params), = props.items()
        if not isinstance(params, dict) or params.get("type") != "object":
            continue
        tools.append({"type": "function",
                      "function": {"name": name, "description": f"from {path.stem}", "parameters": params}})
        if len(tools) == limit:
            break
    return tools


def renamed(tool: dict[str, Any], index: int) -> dict[str, Any]:
    """A copy of ``tool`` named ``<name as [A-Za-z0-9_]>_<index>``."""
    out = copy.deepcopy(tool)
    base = re.sub(r"[^A-Za-z0-9_]", "_", out["function"]["name"])
    out["function"]["name"] = f"{base}_{index}"
    return out


def tool_set(pool: Sequence[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """``size`` tools, cycling ``pool``, every one renamed so the names are distinct."""
    return [renamed(pool[i % len(pool)], i) for i in range(size)]


def rss_bytes() -> int:
    """Resident set size of this process (Linux ``/proc/self/statm``; 0 elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def usable_pool(adapters: Sequence[Any], corpus: Path | None, bfcl_limit: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The project's tools plus the BFCL tools every adapter compiles alone; returns (pool, dropped)."""
    pool = project_tools()
    dropped: dict[str, str] = {}
    if corpus is None or not corpus.is_dir():
        return pool, dropped
    for tool in bfcl_tools(corpus, bfcl_limit):
        candidate = renamed(tool, 0)
        for adapter in adapters:
            try:
                adapter.compile_k2([candidate])
            except Exception as exc:  # a library's verdict on this tool: leave the tool out
                dropped[tool["function"]["name"]] = f"{adapter.name}: {type(exc).__name__}: {str(exc)[:120]}"
                break
        else:
            pool.append(tool)
    return pool, dropped


def measure_size(adapter: Any, tools: list[dict[str, Any]], vocab_size: int, repetitions: int,
                 budget_s: float, traced: bool) -> dict[str, Any]:
    """Cold, cached, first-mask and memory figures of one library on one tool set."""
    out: dict[str, Any] = {"library": adapter.name, "tools": len(tools)}
    cold: list[float] = []
    cached: list[float] = []
    first_mask: list[float] = []
    bitmask = new_bitmask(vocab_size)
    began = time.perf_counter()
    try:
        for rep in range(repetitions):
            if rep and time.perf_counter() - began > budget_s:
                break
            adapter.clear_cache()
            gc.collect()
            before = rss_bytes()
            t0 = time.perf_counter()
            compiled = adapter.compile_k2(tools)
            cold.append(time.perf_counter() - t0)
            if rep == 0:
                out["rss_delta_mb"] = max(0, rss_bytes() - before) / 2**20
            t0 = time.perf_counter()
            adapter.matcher(compiled).fill_bitmask(bitmask, 0)
            first_mask.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            adapter.compile_k2(tools)
            cached.append(time.perf_counter() - t0)
            del compiled
        if traced and adapter.name == "enforcer":
            import tracemalloc

            adapter.clear_cache()
            gc.collect()
            tracemalloc.start()
            compiled = adapter.compile_k2(tools)
            out["traced_mb"] = tracemalloc.get_traced_memory()[0] / 2**20
            tracemalloc.stop()
            del compiled
    except Exception as exc:  # the library's own verdict: recorded, not fatal
        out["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    out["repetitions"] = len(cold)
    if cold:
        out["cold_ms"] = 1e3 * statistics.median(cold)
        out["first_mask_ms"] = 1e3 * statistics.median(first_mask)
        out["cold_plus_first_mask_ms"] = out["cold_ms"] + out["first_mask_ms"]
        out["cached_ms"] = 1e3 * statistics.median(cached)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES}, project tools only")
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help=f"tool counts (default {FULL_SIZES})")
    parser.add_argument("--corpus", type=Path, default=None, help="MaskBench directory for BFCL tools")
    parser.add_argument("--repetitions", type=int, default=None, help="cold compiles per size (default 3)")
    parser.add_argument("--peers", nargs="*", default=list(DEFAULT_PEERS), help="peer libraries to include")
    parser.add_argument("--no-save", action="store_true", help="do not write results/*.json")


def run(args: argparse.Namespace, env: Environment | None = None) -> dict[str, Any]:
    """Run the compile-scaling suite, print its table, return (and save) the results."""
    pin_threads()
    quick = bool(getattr(args, "quick", False))
    sizes = getattr(args, "sizes", None) or (QUICK_SIZES if quick else FULL_SIZES)
    repetitions = getattr(args, "repetitions", None) or 3
    peers = [p for p in getattr(args, "peers", DEFAULT_PEERS) if p in DEFAULT_PEERS]
    if env is None:
        env = make_environment(peers)
    adapters = [a for a in env.adapters if a.name == "enforcer" or a.name in peers]
    corpus = getattr(args, "corpus", None) or (DEFAULT_CORPUS if DEFAULT_CORPUS.is_dir() else None)
    pool, dropped = usable_pool(adapters, None if quick else corpus, max(sizes))
    budget = 5.0 if quick else 60.0
    rows: list[dict[str, Any]] = []
    for size in sizes:
        tools = tool_set(pool, size)
        for adapter in adapters:
            rows.append(measure_size(adapter, tools, env.setup.vocab_size, repetitions, budget, traced=not quick))
        adapters[0].clear_cache()
    results: dict[str, Any] = {
        "suite": "compile_scaling",
        "machine": machine_info(),
        "settings": {"sizes": list(sizes), "repetitions": repetitions, "quick": quick, "threads": 1,
                     "pool": [t["function"]["name"] for t in pool], "memory": "RSS delta over the first cold "
                     "compile (coarse); traced_mb: tracemalloc current after compile (ours, full mode)"},
        "pool_dropped": dropped,
        "rows": rows,
    }
    print(render_table(rows, [a.name for a in adapters], sizes))
    if not getattr(args, "no_save", False):
        print(f"\nsaved {save_results('compile_scaling', results)}")
    return results


def render_table(rows: Sequence[dict[str, Any]], names: Sequence[str], sizes: Sequence[int]) -> str:
    """One line per (size, library) plus ours / best peer on cold, cold + first mask and cached."""
    def f(v: Any) -> str:
        return "-" if v is None else f"{v:,.1f}"

    lines = []
    for size in sizes:
        here = [r for r in rows if r["tools"] == size]
        for r in here:
            lines.append([size, r["library"], f(r.get("cold_ms")), f(r.get("first_mask_ms")),
                          f(r.get("cold_plus_first_mask_ms")), f(r.get("cached_ms")), f(r.get("rss_delta_mb")),
                          f(r.get("traced_mb")), r.get("repetitions", 0), (r.get("error") or "ok")[:50]])
        ours = next((r for r in here if r["library"] == names[0] and "error" not in r), None)
        ratios = []
        for key in ("cold_ms", "first_mask_ms", "cold_plus_first_mask_ms", "cached_ms"):
            peer = [r[key] for r in here if r["library"] != names[0] and key in r and "error" not in r]
            ratios.append(f"{ours[key] / min(peer):.2f}x" if ours and peer and min(peer) > 0 else "-")
        lines.append([size, "ours / best peer", *ratios, "", "", "", ""])
    return render_simple("\nCompile scaling, Kimi K2 tool sets (ms; memory MB)",
                         ["tools", "library", "cold", "first mask", "cold+1st mask", "cached", "RSS Δ MB",
                          "traced MB", "reps", "status"], lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compile_scaling", description=__doc__.split("\n")[0])
    add_arguments(parser)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
