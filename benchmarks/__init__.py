"""Benchmarks: mask latency and compile time, ours and the peers', in one process.

``python -m benchmarks`` runs both suites (``--quick`` for a short run):

* :mod:`benchmarks.json_schema`: plain JSON mode, a nested order object and a MaskBench sample;
* :mod:`benchmarks.kimi_k2`: the Kimi K2 tool-call section, plus untimed semantics probes.

This module holds what the suites share: the tokenizer set-up, the timing loop, statistics,
tables and the results file. Nothing here is imported by ``enforcer``.
"""

from __future__ import annotations

import datetime as _dt
import gc
import json
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DEFAULT_REPETITIONS = 6
"""Repetitions per (library, workload) of the per-token suites: with three libraries taking
turns (:func:`measure_side_by_side`), each comes first in two rounds. With three repetitions a
median can rest on one slow compile: three runs of the same code measured our order schema's
cold compile at 2.4, 2.6 and 3.5 ms (llguidance's at 2.6-2.7)."""


# --------------------------------------------------------------------------------------------
# Environment


def pin_threads() -> None:
    """One compute thread everywhere (torch, BLAS): every library is measured single-threaded."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    import torch

    torch.set_num_threads(1)


def machine_info() -> dict[str, Any]:
    """Cores, load average, CPU model, Python, library versions and the date of the run."""
    from .peers import library_versions

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": library_versions(),
    }


@dataclass
class Environment:
    """The shared tokenizer, our Vocabulary, the peers' Setup and the adapters."""

    tokenizer: Any
    vocabulary: Any
    setup: Any
    adapters: list[Any]
    failed: dict[str, str]
    setup_seconds: dict[str, float]
    added_tokens: tuple[str, ...] = ()
    """Spellings of the special and added tokens (text containing one needs :func:`encode_text`)."""
    text_tokenizer: Any = None


def make_environment(peer_names: Sequence[str]) -> Environment:
    """Build the Kimi-shaped fast tokenizer (151,899 ids), our Vocabulary and every adapter.

    Cost: a few seconds per library (each builds its own tokenizer tables once).
    """
    from enforcer import Vocabulary
    from enforcer.testing.tokenizers import kimi_k2_tokenizer

    from .peers import Setup, build_adapters

    start = time.perf_counter()
    tokenizer = kimi_k2_tokenizer("fast")
    tokenizer_seconds = time.perf_counter() - start
    start = time.perf_counter()
    vocabulary = Vocabulary.from_tokenizer(tokenizer)
    vocabulary_seconds = time.perf_counter() - start
    setup = Setup.from_tokenizer(tokenizer, vocabulary)
    built = build_adapters(setup, vocabulary, peer_names)
    seconds = {"tokenizer (kimi_k2_tokenizer)": tokenizer_seconds, "enforcer": vocabulary_seconds}
    for adapter in built.adapters[1:]:
        seconds[adapter.name] = adapter.build_seconds
    added = tuple(str(t) for t in tokenizer.added_tokens_decoder.values())
    return Environment(tokenizer, vocabulary, setup, built.adapters, built.failed, seconds, added)


def make_json_environment(tokenizer: Any, peer_names: Sequence[str]) -> Environment:
    """An environment for the JSON workloads only, over any tokenizer (no K2 markers needed):
    stop id = the tokenizer's EOS, logits width = its id count. Cost: as :func:`make_environment`
    minus the Kimi tokenizer."""
    from enforcer import Vocabulary

    from .peers import Setup, build_adapters

    start = time.perf_counter()
    vocabulary = Vocabulary.from_tokenizer(tokenizer)
    seconds = {"enforcer": time.perf_counter() - start}
    setup = Setup(tokenizer=tokenizer, vocab_size=vocabulary.vocab_size, stop_id=int(tokenizer.eos_token_id),
                  token_bytes=vocabulary.byte_tokens, marker_ids={})
    built = build_adapters(setup, vocabulary, peer_names)
    for adapter in built.adapters[1:]:
        seconds[adapter.name] = adapter.build_seconds
    added = tuple(str(t) for t in tokenizer.added_tokens_decoder.values())
    return Environment(tokenizer, vocabulary, setup, built.adapters, built.failed, seconds, added)


def encode_text(env: Environment, text: str) -> list[int]:
    """Token ids of ``text`` as *text*: a marker spelled in it stays ordinary text tokens.

    The fast tokenizer always turns the added (non-special) marker spellings into their ids,
    so text that contains one is encoded by the slow tiktoken twin (same ranks, same ids; built
    on first need, about a second).
    """
    if not any(name in text for name in env.added_tokens):
        return env.tokenizer.encode(text, add_special_tokens=False)
    if env.text_tokenizer is None:
        from enforcer.testing.tokenizers import kimi_k2_tokenizer

        env.text_tokenizer = kimi_k2_tokenizer("tiktoken")
    return env.text_tokenizer.encode(text, allow_special_tokens=False)


def check_same_vocabulary(env: Environment) -> dict[str, str]:
    """Compare each peer's view of the vocabulary with ours, id by id; returns peer -> verdict.

    xgrammar's decoded vocabulary and llguidance's token bytes must equal our exact bytes for
    every text id, and every peer must use our logits width. Cost: one pass over the ids.
    """
    ours = env.vocabulary.byte_tokens
    verdicts: dict[str, str] = {}
    for adapter in env.adapters[1:]:
        if adapter.name.startswith("xgrammar"):
            if adapter.info.vocab_size != env.vocabulary.vocab_size:
                verdicts[adapter.name] = f"width {adapter.info.vocab_size} != {env.vocabulary.vocab_size}"
                continue
            theirs = adapter.info.decoded_vocab
            bad = [i for i, b in enumerate(ours) if b is not None and theirs[i] != b]
        elif adapter.name == "llguidance":
            if adapter.tokenizer.vocab_size != env.vocabulary.vocab_size:
                verdicts[adapter.name] = f"width {adapter.tokenizer.vocab_size} != {env.vocabulary.vocab_size}"
                continue
            bad = [i for i, b in enumerate(ours) if b is not None and adapter.tokenizer.decode_bytes([i]) != b]
            bad += [i for i, b in enumerate(ours) if b is None and not adapter.tokenizer.is_special_token(i)]
        else:
            verdicts[adapter.name] = "built from our bytes" if adapter.name == "outlines-core" else "decoded text"
            continue
        if not bad:
            verdicts[adapter.name] = "same width, ids and bytes"
        else:
            shown = ", ".join(f"{i} {ours[i]!r}" for i in bad[:5])
            verdicts[adapter.name] = f"same width; {len(bad)} ids differ: {shown}"
    return verdicts


# --------------------------------------------------------------------------------------------
# Timing


def new_bitmask(vocab_size: int) -> Any:
    """A packed int32 torch bitmask of shape (1, ceil(V/32)), as the engines allocate it."""
    import torch

    return torch.zeros((1, (vocab_size + 31) // 32), dtype=torch.int32)


@dataclass
class StreamRun:
    """Per-token nanoseconds of one teacher-forced pass, and where it stopped if it did."""

    fill_ns: list[int]
    accept_ns: list[int]
    rejected_at: int | None
    reason: str | None


def run_stream(matcher: Any, ids: Sequence[int], bitmask: Any) -> StreamRun:
    """Teacher-force ``ids``: per token, time ``fill_bitmask`` and ``accept_token``.

    Outside the timed region the row is zeroed and the token's bit is checked, so a library
    that does not write the row, or does not allow the forced token, is caught.
    """
    words = bitmask.numpy()[0]
    clock = time.perf_counter_ns
    fill_ns: list[int] = []
    accept_ns: list[int] = []
    for position, token in enumerate(ids):
        bitmask.zero_()
        t0 = clock()
        matcher.fill_bitmask(bitmask, 0)
        t1 = clock()
        if not (int(words[token >> 5]) >> (token & 31)) & 1:
            return StreamRun(fill_ns, accept_ns, position, "not in mask")
        t2 = clock()
        accepted = matcher.accept_token(token)
        t3 = clock()
        if not accepted:
            return StreamRun(fill_ns, accept_ns, position, "accept_token refused")
        fill_ns.append(t1 - t0)
        accept_ns.append(t3 - t2)
    return StreamRun(fill_ns, accept_ns, None, None)


def add_timing_arguments(parser: Any, passes_default: str, peers: Sequence[str]) -> None:
    """The flags every per-token suite takes."""
    parser.add_argument("--repetitions", type=int, default=None,
                        help=f"repetitions, each with a cold compile (default {DEFAULT_REPETITIONS}; >= 3)")
    parser.add_argument("--passes", type=int, default=None, help=f"later passes per repetition ({passes_default})")
    parser.add_argument("--peers", nargs="*", default=list(peers), help="peer libraries to include")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of our per-token path")
    parser.add_argument("--no-save", action="store_true", help="do not write results/*.json")
    parser.add_argument("--plot", action="store_true",
                        help="write results/<suite>-latest.png even with --no-save (saved runs plot when "
                             "matplotlib is installed)")


def probe_verdict(got: int | None, expected: int | None, how: str | None = None) -> str:
    """A probe's line: the first token a library excluded (``got``) against the first wrong
    token (``expected``; None for a valid stream)."""
    note = " (raised)" if how and how.startswith("raised") else ""
    if got == expected:
        return "ok (accepted)" if expected is None else f"ok: rejected at {got}{note}"
    if got is None:
        return f"WRONG: accepted all (mistake at {expected})"
    if expected is None:
        return f"WRONG: refused valid token {got}{note}"
    return f"WRONG: rejected at {got}, mistake at {expected}{note}"


def print_probes(title: str, probe: dict[str, Any], names: Sequence[str]) -> None:
    """The probe table: one row per probe, one column per library."""
    print(render_simple(f"\n{title} semantics probes (untimed): first token the mask excludes vs where the "
                        "mistake starts", ["probe", *names],
                        [[p, *(probe["results"][n][p]["verdict"] for n in names)] for p in probe["probes"]]))


def first_rejection(matcher: Any, ids: Sequence[int], bitmask: Any) -> int | None:
    """Position of the first token that the mask excludes or ``accept_token`` refuses (untimed)."""
    return run_stream(matcher, ids, bitmask).rejected_at


@dataclass
class Measurement:
    """Everything measured for one (library, workload)."""

    library: str
    tokens: int
    cold_compile_s: list[float] = field(default_factory=list)
    cached_compile_s: list[float] = field(default_factory=list)
    new_matcher_s: list[float] = field(default_factory=list)
    pass1_ns: list[int] = field(default_factory=list)
    later_ns: list[int] = field(default_factory=list)
    fill_ns: list[int] = field(default_factory=list)
    accept_ns: list[int] = field(default_factory=list)
    first_request_s: list[float] = field(default_factory=list)
    first_mask_s: list[float] = field(default_factory=list)
    """Cold compile + new matcher + the first ``fill_bitmask``: time to first mask."""
    repetitions: int = 0
    later_passes: int = 0
    error: str | None = None
    rejected_at: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.rejected_at is None

    def summary(self) -> dict[str, Any]:
        """Means, medians and p99s in the units of the tables (ms for compiles, µs per token)."""
        out: dict[str, Any] = {"library": self.library, "tokens": self.tokens, "ok": self.ok}
        if self.error:
            out["error"] = self.error
        if self.rejected_at is not None:
            out["rejected_at"] = self.rejected_at
        out["repetitions"], out["later_passes"] = self.repetitions, self.later_passes
        if self.cold_compile_s:
            out["cold_compile_ms"] = 1e3 * statistics.median(self.cold_compile_s)
            out["new_matcher_us"] = 1e6 * statistics.median(self.new_matcher_s)
        if self.cached_compile_s:
            out["cached_compile_ms"] = 1e3 * statistics.median(self.cached_compile_s)
        if self.first_request_s:
            out["first_request_ms"] = 1e3 * statistics.median(self.first_request_s)
        if self.first_mask_s:
            out["first_mask_ms"] = 1e3 * statistics.median(self.first_mask_s)
        for key, values in (("pass1", self.pass1_ns), ("later", self.later_ns),
                            ("fill", self.fill_ns), ("accept", self.accept_ns)):
            if values:
                out[key] = latency_stats(values)
        return out


def quantile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank quantile of an already sorted, non-empty sequence."""
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def latency_stats(values_ns: Sequence[int]) -> dict[str, float]:
    """mean, p50, p90, p99, p99.9 in microseconds (p99.9 of fewer than 1,000 values is the max)."""
    ordered = sorted(values_ns)
    return {
        "mean_us": statistics.fmean(ordered) / 1e3,
        "p50_us": statistics.median(ordered) / 1e3,
        "p90_us": quantile(ordered, 0.90) / 1e3,
        "p99_us": quantile(ordered, 0.99) / 1e3,
        "p999_us": quantile(ordered, 0.999) / 1e3,
        "n": len(ordered),
    }


def rotated(items: Sequence[Any], turn: int) -> list[Any]:
    """``items`` starting at position ``turn`` (modulo their count) and wrapping around: the
    order of round ``turn`` when libraries take turns, so each comes first equally often."""
    k = turn % len(items) if items else 0
    return [*items[k:], *items[:k]]


def measure_side_by_side(
    adapters: Sequence[Any],
    compile_of: Callable[[Any], Callable[[Any], Any]],
    spec: Any,
    ids: Sequence[int],
    vocab_size: int,
    *,
    repetitions: int,
    later_passes: int,
    budget_s: float = float("inf"),
) -> list[Measurement]:
    """Measure several libraries on one workload, taking turns repetition by repetition.

    Round ``r`` runs one repetition of every library, the order rotated by ``r`` so that each
    comes first equally often; a drift in the machine's load then reaches every library alike
    (run one after the other, the K2 suite's ratios moved by up to 2x between two runs).

    Per repetition (``compile_of(adapter)`` compiles ``spec``): clear the library's caches;
    time a cold compile; time a fresh matcher over it and teacher-force ``ids`` (pass 1); time
    a second compile (the cache hit; only for libraries that cache compiled grammars); then
    ``later_passes`` passes, each a new matcher over the first compiled object. Once a library
    has spent ``budget_s`` in its own repetitions (slow compilers, slow matchers), it starts no
    further repetition and runs no further later pass past the first; its summary says how
    many ran. A compile error or a refused token ends that library's measurement and is
    recorded.

    One full collection starts each round, so that no library pays for what another left
    young (llguidance's warm-up left ~5,000 young objects, whose gen-1 collection, 1-2 ms,
    landed in our order schema's cold compile). Not before each library: a collection leaves
    the CPU caches cold (1.6-1.8x slower compiles for ours and llguidance's alike), and the
    rotation gives every library that place equally often.
    """
    results = [Measurement(adapter.name, len(ids)) for adapter in adapters]
    spent_s = [0.0] * len(adapters)
    bitmask = new_bitmask(vocab_size)
    clock = time.perf_counter
    for rep in range(repetitions):
        gc.collect()
        for index in rotated(range(len(adapters)), rep):
            result = results[index]
            if not result.ok or (rep and spent_s[index] > budget_s):
                continue
            began = clock()
            _repetition(adapters[index], compile_of(adapters[index]), spec, ids, bitmask, result,
                        later_passes, budget_s - spent_s[index])
            spent_s[index] += clock() - began
    return results


def _repetition(adapter: Any, compile_fn: Callable[[Any], Any], spec: Any, ids: Sequence[int], bitmask: Any,
                result: Measurement, later_passes: int, budget_s: float) -> None:
    """One repetition of :func:`measure_side_by_side` for one library, recorded into ``result``;
    later passes past the first stop once the repetition has run ``budget_s``."""
    clock = time.perf_counter
    began = clock()
    try:
        adapter.clear_cache()
        t0 = clock()
        compiled = compile_fn(spec)
        t1 = clock()
    except Exception as exc:  # the library's own verdict on the schema: record it
        result.error = f"{type(exc).__name__}: {str(exc)[:200]}"
        return
    compile_s = t1 - t0
    result.cold_compile_s.append(compile_s)
    result.repetitions += 1
    for pass_no in range(1 + later_passes):
        if pass_no >= 2 and clock() - began > budget_s:
            break
        t0 = clock()
        matcher = adapter.matcher(compiled)
        result.new_matcher_s.append(clock() - t0)
        run = run_stream(matcher, ids, bitmask)
        if run.rejected_at is not None:
            result.rejected_at = run.rejected_at
            return
        totals = [f + a for f, a in zip(run.fill_ns, run.accept_ns)]
        (result.pass1_ns if pass_no == 0 else result.later_ns).extend(totals)
        result.fill_ns.extend(run.fill_ns)
        result.accept_ns.extend(run.accept_ns)
        if pass_no == 0:
            result.first_request_s.append(compile_s + result.new_matcher_s[-1] + sum(totals) / 1e9)
            if run.fill_ns:
                result.first_mask_s.append(compile_s + result.new_matcher_s[-1] + run.fill_ns[0] / 1e9)
            if adapter.caches_compiles:
                t0 = clock()
                compile_fn(spec)
                result.cached_compile_s.append(clock() - t0)
        else:
            result.later_passes += 1


def profile_path(adapter: Any, compile_fn: Callable[[Any], Any], spec: Any, ids: Sequence[int],
                 vocab_size: int, *, warm_passes: int = 20, top: int = 15) -> dict[str, str]:
    """cProfile of one library's per-token path: a cold pass (caches cleared, compile, one pass)
    and ``warm_passes`` passes over the compiled object once its lazy work is done."""
    import cProfile
    import io
    import pstats

    def report(profiler: cProfile.Profile) -> str:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
        return out.getvalue()

    bitmask = new_bitmask(vocab_size)
    adapter.clear_cache()
    cold = cProfile.Profile()
    cold.enable()
    compiled = compile_fn(spec)
    run_stream(adapter.matcher(compiled), ids, bitmask)
    cold.disable()
    warm = cProfile.Profile()
    warm.enable()
    for _ in range(warm_passes):
        run_stream(adapter.matcher(compiled), ids, bitmask)
    warm.disable()
    return {"cold": report(cold), "warm": report(warm)}


# --------------------------------------------------------------------------------------------
# Tables and results


def fmt(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.0f}"
    return f"{value:.{digits}f}"


TABLE_COLUMNS = (
    ("cold compile ms", ("cold_compile_ms",)),
    ("cached compile ms", ("cached_compile_ms",)),
    ("1st request ms", ("first_request_ms",)),
    ("pass1 mean µs", ("pass1", "mean_us")),
    ("pass1 p50", ("pass1", "p50_us")),
    ("pass1 p99", ("pass1", "p99_us")),
    ("later mean µs", ("later", "mean_us")),
    ("later p50", ("later", "p50_us")),
    ("later p99", ("later", "p99_us")),
    ("later p99.9", ("later", "p999_us")),
)


def summary_value(summary: dict[str, Any], path: tuple[str, ...]) -> float | None:
    """The number at ``path`` in a saved summary (None where a library has no such figure)."""
    value: Any = summary
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def render_table(title: str, summaries: Sequence[dict[str, Any]], ours: str = "enforcer") -> str:
    """A fixed-width table, one row per library, then 'ours / best peer' per column."""
    headers = ["library", *(name for name, _ in TABLE_COLUMNS), "status"]
    rows = []
    for s in summaries:
        status = "ok" if s.get("ok") else (s.get("error") or f"rejected token {s.get('rejected_at')}")
        rows.append([s["library"], *(fmt(summary_value(s, path)) for _, path in TABLE_COLUMNS), status[:60]])
    ratio_row = ["ours / best peer"]
    best_row = ["best peer"]
    mine = next((s for s in summaries if s["library"] == ours), None)
    for _, path in TABLE_COLUMNS:
        peers = [(v, s["library"]) for s in summaries if s["library"] != ours and s.get("ok")
                 and (v := summary_value(s, path)) is not None]
        mine_value = summary_value(mine, path) if mine and mine.get("ok") else None
        if peers and mine_value is not None:
            value, name = min(peers)
            ratio_row.append(f"{mine_value / value:.2f}x" if value > 0 else "-")
            best_row.append(name)
        else:
            ratio_row.append("-")
            best_row.append("-")
    rows += [ratio_row + [""], best_row + [""]]
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    line = lambda r: "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    out = [title, line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows[:-2]]
    out.append(line(["-" * w for w in widths]))
    out += [line(r) for r in rows[-2:]]
    return "\n".join(out)


def render_simple(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain fixed-width table."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in [list(headers), *cells]) for i in range(len(headers))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths))  # noqa: E731
    return "\n".join([title, line(list(headers)), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def save_results(name: str, payload: dict[str, Any]) -> Path:
    """Write ``results/<name>-<UTC timestamp>.json`` and ``results/<name>-latest.json``."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    text = json.dumps(payload, indent=1, ensure_ascii=False, default=str)
    path = RESULTS_DIR / f"{name}-{stamp}.json"
    path.write_text(text, encoding="utf-8")
    (RESULTS_DIR / f"{name}-latest.json").write_text(text, encoding="utf-8")
    return path


def plot_summaries(path: Path, panels: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> Path:
    """Bar charts (log scale), one panel per workload: pass-1 mean, later mean and later p99 per
    library. Needs matplotlib (the ``bench`` extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = (("pass1", "mean_us", "pass 1 mean"), ("later", "mean_us", "later mean"), ("later", "p99_us", "later p99"))
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    for ax, (title, summaries) in zip(axes[0], panels):
        ok = [s for s in summaries if s.get("ok")]
        width = 0.8 / len(metrics)
        for k, (group, key, label) in enumerate(metrics):
            values = [summary_value(s, (group, key)) or 0.0 for s in ok]
            ax.bar([i + k * width for i in range(len(ok))], values, width, label=label)
        ax.set_xticks([i + width for i in range(len(ok))], [s["library"] for s in ok], rotation=20, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("µs per token (fill_bitmask + accept_token)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def finish_suite(args: Any, name: str, results: dict[str, Any], profile: Callable[[], dict[str, Any]],
                 panels: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> dict[str, Any]:
    """The common tail of a suite: optional profile of ours, then the plot and the JSON (unless
    ``--no-save``; ``--plot`` insists on the plot)."""
    if args.profile:
        results["profile_ours"] = prof = profile()
        print("\ncProfile of enforcer, cold pass (caches cleared, compile, one pass):\n" + prof["cold"])
        print("cProfile of enforcer, 20 warm passes:\n" + prof["warm"])
    if args.plot or not args.no_save:  # the plot goes next to the saved JSON
        try:
            print(f"\nplot {plot_summaries(RESULTS_DIR / f'{name}-latest.png', panels)}")
        except ImportError:
            if args.plot:
                raise
            print("\nno plot: matplotlib is not installed (pip install -e .[bench])")
    if not args.no_save:
        print(f"\nsaved {save_results(name, results)}")
    return results
