"""First sight: what a schema costs the first time it is seen (the MaskBench method).

``python -m benchmarks.first_sight [--quick] [--maskbench N] [--jsonschemabench N] [--peers ...]``

Schemas: the BFCL, MCPspec and JME files of ``../shared/corpus/maskbench`` and a fixed seeded
sample of ``../shared/corpus/jsonschemabench`` (500 by default). Per library, in its own process
(so one library's caches, threads and collector never touch another's), the processes taking
turns schema by schema (so a change in the machine's load reaches all of them alike): per
schema, clear the library's caches, compile cold (20 s limit), then teacher-force every valid
instance (keys in declared order, ``json.dumps`` default separators) with a new matcher each, timing
``fill_bitmask`` + ``accept_token`` per token; then one more pass over the first instance (the
*later* pass: everything this schema needs is built). Time to first mask = cold compile + new
matcher + first ``fill_bitmask``. The collector's longest pause inside the timed passes is read
with ``gc.callbacks``, the startup heap frozen after the warm-up (as vLLM's engine core does).
Latencies are pooled over the schemas every library compiled and accepted, and again per corpus
subset (BFCL, Github_hard, Kubernetes, ...); results in
``results/first_sight-*.json`` and a latency-distribution plot.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from . import (
    RESULTS_DIR,
    summary_value,
    encode_text,
    latency_stats,
    machine_info,
    make_environment,
    new_bitmask,
    pin_threads,
    quantile,
    render_simple,
    rotated,
    run_stream,
    save_results,
)
from .json_schema import declared_order

DEFAULT_PEERS = ("xgrammar", "llguidance")
CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
MASKBENCH_SUBSETS = ("BFCL", "MCPspec", "JME")
COMPILE_LIMIT_S = 20


def schema_sample(corpus: Path, maskbench: int | None, jsonschemabench: int, instances: int | None,
                  seed: int = 0) -> list[dict[str, Any]]:
    """The schemas of the run: MaskBench (BFCL, MCPspec, JME; ``maskbench`` of them at an even
    stride, None: all) then a seeded sample of ``jsonschemabench`` JSONSchemaBench files; each
    with up to ``instances`` valid instances (None: all), keys in declared order."""
    mb = sorted(p for p in (corpus / "maskbench").glob("*.json") if p.name.startswith(MASKBENCH_SUBSETS))
    if maskbench is not None and maskbench < len(mb):
        mb = [mb[int(i * len(mb) / maskbench)] for i in range(maskbench)]
    jsb = sorted((corpus / "jsonschemabench").glob("*.json"))
    random.Random(seed).shuffle(jsb)
    out = []
    for source, paths, wanted in (("maskbench", mb, len(mb)), ("jsonschemabench", jsb, jsonschemabench)):
        taken = 0
        for path in paths:
            if taken == wanted:
                break
            doc = json.loads(path.read_text(encoding="utf-8"))
            schema = doc.get("schema")
            valid = [t["data"] for t in doc.get("tests", []) if t.get("valid")]
            if not isinstance(schema, dict) or not valid:
                continue
            try:
                texts = [json.dumps(declared_order(v, schema, schema), ensure_ascii=False) for v in valid[:instances]]
            except (RecursionError, TypeError, ValueError):
                continue
            out.append({"name": f"{source}/{path.stem}", "schema": schema, "instances": texts})
            taken += 1
    return out


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


class PauseWatch:
    """The collector's pauses while ``active`` (gc.callbacks); ``longest_ms`` over the run."""

    def __init__(self) -> None:
        self.active = False
        self.longest_ms = 0.0
        self.total_ms = 0.0
        self.count = 0
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        elif self.active:
            pause = (time.perf_counter() - self._start) * 1e3
            self.longest_ms = max(self.longest_ms, pause)
            self.total_ms += pause
            self.count += 1


class Worker:
    """One library measured schema by schema, in its own process (:func:`serve`): the
    environment, the warm-up, the frozen startup heap and the collector watch live as long as
    the process."""

    def __init__(self, library: str) -> None:
        pin_threads()
        self.env = make_environment([] if library == "enforcer" else [library])
        self.adapter = next((a for a in self.env.adapters if a.name == library), None)
        if self.adapter is None:
            return
        # warm up the library (imports, lazy tables, JITs) on a schema outside the sample
        warm = self.adapter.compile({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
        self.bitmask = new_bitmask(self.env.setup.vocab_size)
        run_stream(self.adapter.matcher(warm), encode_text(self.env, '{"a": "b"}'), self.bitmask)
        # the startup heap (imports, the vocabulary, the warm-up) frozen, as vLLM's engine core
        # does after its init (``vllm.utils.gc_utils.freeze_gc_heap``): the collector's pauses
        # measured below are those of what the run allocates, not of the ~200,000-340,000
        # objects that torch and each library's imports leave (for ours, jsonschema's optional
        # rfc3987-syntax Lark grammar alone is ~125,000)
        gc.collect()
        gc.freeze()
        self.watch = PauseWatch()
        signal.signal(signal.SIGALRM, _alarm)

    def measure(self, case: dict[str, Any]) -> dict[str, Any]:
        """Clear the caches, compile ``case``'s schema cold, teacher-force its instances, then
        the later pass: the row of the results."""
        adapter, clock = self.adapter, time.perf_counter
        assert adapter is not None
        row: dict[str, Any] = {"name": case["name"]}
        streams = [encode_text(self.env, text) for text in case["instances"]]
        try:
            adapter.clear_cache()
            gc.collect()
            signal.alarm(COMPILE_LIMIT_S)
            try:
                t0 = clock()
                compiled = adapter.compile(case["schema"])
                compile_s = clock() - t0
            finally:  # an alarm due while the compile's own error is raised lands here: a timeout
                signal.alarm(0)
        except _Timeout:
            return {**row, "status": "timeout"}
        except Exception as exc:  # noqa: BLE001 - the library's verdict on the schema
            return {**row, "status": "compile_error", "error": f"{type(exc).__name__}: {str(exc)[:160]}"}
        row.update(status="ok", compile_s=compile_s, tokens_ns=[], later_ns=[])
        self.watch.active = True
        try:
            for k, ids in enumerate(streams + streams[:1]):
                t0 = clock()
                matcher = adapter.matcher(compiled)
                new_matcher_s = clock() - t0
                run = run_stream(matcher, ids, self.bitmask)
                if run.rejected_at is not None:
                    row.update(status="refused", at=run.rejected_at)
                    break
                totals = [f + a for f, a in zip(run.fill_ns, run.accept_ns)]
                if k == len(streams):
                    row["later_ns"] = totals
                else:
                    row["tokens_ns"].extend(totals)
                if k == 0 and run.fill_ns:
                    row["first_mask_s"] = compile_s + new_matcher_s + run.fill_ns[0] / 1e9
        except Exception as exc:  # noqa: BLE001 - a matcher that raises refuses the stream
            row.update(status="refused", error=f"{type(exc).__name__}: {str(exc)[:160]}")
        self.watch.active = False
        return row


def serve(library: str, sample_path: Path) -> None:
    """A worker process: one JSON line on stdout when ready (or why the library is not built),
    then one result row per schema index read from stdin, and the collector's figures at
    ``end``. Anything else the process prints goes to stderr."""
    channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sample = json.loads(sample_path.read_text(encoding="utf-8"))
    worker = Worker(library)
    if worker.adapter is None:
        channel.write(json.dumps({"failed": worker.env.failed.get(library, "not built")}) + "\n")
        return
    channel.write(json.dumps({"options": worker.adapter.options}) + "\n")
    for line in sys.stdin:
        if line.strip() == "end":
            break
        channel.write(json.dumps(worker.measure(sample[int(line)])) + "\n")
    watch = worker.watch
    channel.write(json.dumps({"longest_pause_ms": watch.longest_ms, "total_ms": watch.total_ms,
                              "collections": watch.count}) + "\n")


def run_interleaved(libraries: Sequence[str], sample: Sequence[dict[str, Any]],
                    sample_path: Path) -> list[dict[str, Any]]:
    """Every library's worker started at once; schema ``i`` measured by each in turn, the order
    rotated by one per schema, so a change in the machine's load over the run reaches every
    library alike. The results of the libraries that were built, in ``libraries``' order."""
    workers = {library: subprocess.Popen(
        [sys.executable, "-m", "benchmarks.first_sight", "--serve", library, str(sample_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1, encoding="utf-8",
        cwd=Path(__file__).resolve().parents[1], env={**os.environ, "PYTHONHASHSEED": "0"}) for library in libraries}

    def answer(library: str, what: str) -> dict[str, Any]:
        line = workers[library].stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"first sight: the {library} worker ended (exit {workers[library].wait()}) {what}")
        return json.loads(line)

    results: dict[str, dict[str, Any]] = {}
    try:
        for library in libraries:
            ready = answer(library, "while starting")
            if "failed" in ready:
                print(f"  {library}: not built ({ready['failed']})")
                workers.pop(library).wait()
            else:
                results[library] = {"library": library, "options": ready["options"], "rows": []}
        order = list(results)
        for i, case in enumerate(sample if order else ()):
            for library in rotated(order, i):
                workers[library].stdin.write(f"{i}\n")  # type: ignore[union-attr]
                results[library]["rows"].append(answer(library, f"on {case['name']}"))
        for library in order:
            workers[library].stdin.write("end\n")  # type: ignore[union-attr]
            results[library]["gc"] = answer(library, "before its collector figures")
            workers[library].stdin.close()  # type: ignore[union-attr]
            workers[library].wait()
    finally:  # a worker that ended early leaves the others waiting on their input: stop them
        for worker in workers.values():
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    return [results[library] for library in order]


def pool(results: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Per-library summaries over the schemas every library compiled and accepted."""
    ok_sets = [{r["name"] for r in res["rows"] if r["status"] == "ok"} for res in results]
    common = set.intersection(*ok_sets) if ok_sets else set()
    summaries = []
    for res in results:
        s = summarise(res, common)
        statuses: dict[str, int] = {}
        for r in res["rows"]:
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        s["statuses"] = statuses
        summaries.append(s)
    return summaries, sorted(common)


def summarise(res: dict[str, Any], names: set[str]) -> dict[str, Any]:
    """One library's figures over the schemas ``names`` (compile, time to first mask, pass-1 and
    later per-token latencies, pooled)."""
    rows = [r for r in res["rows"] if r["name"] in names]
    tokens = [x for r in rows for x in r["tokens_ns"]]
    later = [x for r in rows for x in r["later_ns"]]
    ttfm = sorted(r["first_mask_s"] for r in rows if "first_mask_s" in r)
    compiles = sorted(r["compile_s"] for r in rows)
    s: dict[str, Any] = {"library": res["library"], "ok": bool(rows), "schemas": len(rows), "gc": res.get("gc")}
    if rows:
        s.update(cold_compile_p50_ms=1e3 * statistics.median(compiles),
                 cold_compile_mean_ms=1e3 * statistics.fmean(compiles),
                 first_mask_p50_ms=1e3 * statistics.median(ttfm), first_mask_p90_ms=1e3 * quantile(ttfm, 0.9),
                 pass1=latency_stats(tokens), later=latency_stats(later))
    return s


def subset_of(name: str) -> str:
    """The corpus subset of a sample name: ``jsonschemabench/Github_hard---o123`` is in
    Github_hard, ``maskbench/BFCL_simple_102`` in BFCL."""
    source, _, stem = name.partition("/")
    if source == "maskbench":
        return next((subset for subset in MASKBENCH_SUBSETS if stem.startswith(subset)), stem)
    return stem.split("---", 1)[0]


def per_subset(results: Sequence[dict[str, Any]], common: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """:func:`summarise` of every library over each subset's common schemas."""
    subsets: dict[str, set[str]] = {}
    for name in common:
        subsets.setdefault(subset_of(name), set()).add(name)
    return {subset: [summarise(res, names) for res in results] for subset, names in sorted(subsets.items())}


SUBSET_COLUMNS = (
    ("1st mask p50", ("first_mask_p50_ms",)),
    ("pass1 mean", ("pass1", "mean_us")),
    ("pass1 p50", ("pass1", "p50_us")),
    ("pass1 p99", ("pass1", "p99_us")),
    ("pass1 p99.9", ("pass1", "p999_us")),
)


def render_subsets(subsets: dict[str, list[dict[str, Any]]]) -> str:
    """Per subset: our figures (ms, µs) and ours / best peer for each column."""
    rows = []
    for subset, summaries in subsets.items():
        ours = next((s for s in summaries if s["library"] == "enforcer" and s.get("ok")), None)
        if ours is None:
            continue
        peers = [s for s in summaries if s["library"] != "enforcer" and s.get("ok")]
        cells = []
        for _, path in SUBSET_COLUMNS:
            a = summary_value(ours, path)
            values = [v for s in peers if (v := summary_value(s, path))]
            ratio = f" ({a / min(values):.2f}x)" if a is not None and values else ""
            cells.append(f"{a:.1f}{ratio}" if a is not None else "-")
        rows.append([subset, str(ours["schemas"]), *cells])
    return render_simple("first sight per subset: ours (ours / best peer), 1st mask in ms, per token in µs",
                         ["subset", "schemas", *(c for c, _ in SUBSET_COLUMNS)], rows)


COLUMNS = (
    ("compile p50 ms", ("cold_compile_p50_ms",)),
    ("1st mask p50 ms", ("first_mask_p50_ms",)),
    ("1st mask p90 ms", ("first_mask_p90_ms",)),
    ("pass1 mean µs", ("pass1", "mean_us")),
    ("pass1 p50", ("pass1", "p50_us")),
    ("pass1 p99", ("pass1", "p99_us")),
    ("pass1 p99.9", ("pass1", "p999_us")),
    ("later mean µs", ("later", "mean_us")),
    ("later p99", ("later", "p99_us")),
    ("gc pause max ms", ("gc", "longest_pause_ms")),
)


def render(summaries: Sequence[dict[str, Any]]) -> str:
    """One row per library, then ours / each peer and ours / best peer per column."""
    ours = next((s for s in summaries if s["library"] == "enforcer"), None)
    rows = [[s["library"], *(f"{v:.1f}" if (v := summary_value(s, p)) is not None else "-" for _, p in COLUMNS),
             ", ".join(f"{k} {v}" for k, v in s["statuses"].items())] for s in summaries]
    peers = [s for s in summaries if s["library"] != "enforcer" and s.get("ok")]
    if ours and ours.get("ok") and peers:
        for peer in peers:
            rows.append([f"ours / {peer['library']}", *(
                f"{a / b:.2f}x" if (a := summary_value(ours, p)) is not None and (b := summary_value(peer, p)) else "-"
                for _, p in COLUMNS), ""])
        best = []
        for _, p in COLUMNS:
            values = [v for s in peers if (v := summary_value(s, p))]
            a = summary_value(ours, p)
            best.append(f"{a / min(values):.2f}x" if a is not None and values else "-")
        rows.append(["ours / best peer", *best, ""])
    return render_simple("first sight (pooled over the schemas every library compiled and accepted)",
                         ["library", *(c for c, _ in COLUMNS), "schemas"], rows)


def plot(path: Path, results: Sequence[dict[str, Any]], common: set[str]) -> Path:
    """Per-token latency distributions (first pass and later pass), log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, key, title in ((axes[0], "tokens_ns", "first pass"), (axes[1], "later_ns", "later pass")):
        for res in results:
            values = sorted(x / 1e3 for r in res["rows"] if r["name"] in common for x in r.get(key, []))
            if values:
                ax.plot(values, [i / len(values) for i in range(len(values))], label=res["library"])
        ax.set_xscale("log")
        ax.set_xlabel("µs per token (fill_bitmask + accept_token)")
        ax.set_ylabel("fraction of tokens")
        ax.set_title(f"first sight: {title}", fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--first-sight-corpus", type=Path, default=CORPUS, help=f"corpus folder (default {CORPUS})")
    parser.add_argument("--maskbench", type=int, default=None,
                        help="MaskBench schemas (BFCL, MCPspec, JME) at an even stride (default all; quick 40)")
    parser.add_argument("--jsonschemabench", type=int, default=None,
                        help="JSONSchemaBench schemas, seeded sample (default 500; quick 40)")
    parser.add_argument("--instances", type=int, default=None,
                        help="valid instances per schema (default all; quick 2)")


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    """Build the sample, run one worker process per library, print the table, save JSON + plot."""
    corpus = args.first_sight_corpus
    if not (corpus / "maskbench").is_dir() or not (corpus / "jsonschemabench").is_dir():
        print(f"\nfirst sight: skipped (no maskbench/ and jsonschemabench/ under {corpus})")
        return None
    quick = args.quick
    sample = schema_sample(corpus, args.maskbench if args.maskbench is not None else (40 if quick else None),
                           args.jsonschemabench if args.jsonschemabench is not None else (40 if quick else 500),
                           args.instances if args.instances is not None else (2 if quick else None))
    peers = [p for p in args.peers if p in ("xgrammar", "llguidance", "outlines-core", "lm-format-enforcer")]
    libraries = ["enforcer", *[p for p in DEFAULT_PEERS if p in peers], *[p for p in peers if p not in DEFAULT_PEERS]]
    print(f"\nfirst sight: {len(sample)} schemas, {sum(len(c['instances']) for c in sample)} instances, "
          f"libraries {libraries} (one process each, taking turns schema by schema)")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        sample_path = Path(tmp) / "sample.json"
        sample_path.write_text(json.dumps(sample), encoding="utf-8")
        results = run_interleaved(libraries, sample, sample_path)
    print(f"  {time.perf_counter() - start:.0f} s")
    summaries, common = pool(results)
    subsets = per_subset(results, common)
    print(render(summaries))
    print(render_subsets(subsets))
    payload = {"suite": "first_sight", "machine": machine_info(), "schemas": len(sample),
               "instances": sum(len(c["instances"]) for c in sample), "common_schemas": common,
               "summaries": summaries, "per_subset": subsets, "compile_limit_s": COMPILE_LIMIT_S,
               "per_library": [{"library": r["library"], "options": r.get("options"), "gc": r.get("gc"),
                                "rows": [{k: v for k, v in row.items() if k not in ("tokens_ns", "later_ns")}
                                         for row in r["rows"]]} for r in results]}
    if not getattr(args, "no_save", False):
        try:
            print(f"plot {plot(RESULTS_DIR / 'first_sight-latest.png', results, set(common))}")
        except ImportError:
            print("no plot: matplotlib is not installed (pip install -e .[bench])")
        print(f"saved {save_results('first_sight', payload)}")
    return payload


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--serve"]:
        serve(argv[1], Path(argv[2]))
        return
    parser = argparse.ArgumentParser(prog="python -m benchmarks.first_sight", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="40 + 40 schemas, 2 instances each (a few minutes)")
    parser.add_argument("--peers", nargs="*", default=list(DEFAULT_PEERS), help="peer libraries to include")
    parser.add_argument("--no-save", action="store_true", help="do not write results/*.json")
    add_arguments(parser)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
