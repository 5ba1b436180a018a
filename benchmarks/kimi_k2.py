"""Kimi K2 tool-call section: per-token mask + advance latency and compile times, plus probes.

``python -m benchmarks.kimi_k2 [--quick]``

Tools: S1 ``get_weather{city, unit}`` and S2 ``create_shipment`` (nested object and an array of
objects). The transcript is a two-call section, markers inserted as ids::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{...}
    <|tool_call_end|><|tool_call_begin|>functions.create_shipment:1<|tool_call_argument_begin|>{...}
    <|tool_call_end|><|tool_calls_section_end|><|im_end|>

Libraries: ours (``compile_tools(tools, vocab, tool_choice="auto")``), xgrammar's built-in
``kimi`` structural tag (markers as text, as shipped; and rebound to token ids), llguidance with
a Lark grammar (markers as ``<[id]>``, ``%json`` arguments). outlines-core and
lm-format-enforcer cannot express a special-token trigger and are left out.

The semantics probes (untimed) feed each library a transcript with one mistake and report the
position of the first token its mask excludes, against the position where the mistake starts.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Sequence

from enforcer.formats import kimi_k2 as k2

from . import (
    DEFAULT_REPETITIONS,
    add_timing_arguments,
    check_same_vocabulary,
    encode_text,
    Environment,
    finish_suite,
    first_rejection,
    machine_info,
    make_environment,
    measure_side_by_side,
    new_bitmask,
    pin_threads,
    print_probes,
    probe_verdict,
    profile_path,
    render_table,
)

DEFAULT_PEERS = ("xgrammar", "xgrammar-tok", "llguidance")

GET_WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}

CREATE_SHIPMENT: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "create_shipment",
        "description": "Book a shipment for one recipient and one or more packages.",
        "parameters": {
            "type": "object",
            "properties": {
                "recipient": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "phone": {"type": "string"},
                        "address": {
                            "type": "object",
                            "properties": {
                                "street": {"type": "string"},
                                "city": {"type": "string"},
                                "postal_code": {"type": "string"},
                                "country": {"type": "string", "enum": ["DE", "FR", "IT", "ES", "NL"]},
                            },
                            "required": ["street", "city", "postal_code", "country"],
                            "additionalProperties": False,
                        },
                    },
                    "required": ["name", "address"],
                    "additionalProperties": False,
                },
                "packages": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "weight_kg": {"type": "number", "minimum": 0},
                            "dimensions_cm": {"type": "array", "items": {"type": "integer"},
                                              "minItems": 3, "maxItems": 3},
                            "fragile": {"type": "boolean"},
                        },
                        "required": ["weight_kg", "dimensions_cm", "fragile"],
                        "additionalProperties": False,
                    },
                },
                "service": {"type": "string", "enum": ["standard", "express", "overnight"]},
            },
            "required": ["recipient", "packages", "service"],
            "additionalProperties": False,
        },
    },
}

TOOLS = [GET_WEATHER, CREATE_SHIPMENT]

WEATHER_ARGS = {"city": "Paris", "unit": "celsius"}
SHIPMENT_ARGS = {
    "recipient": {
        "name": "Jonas Weber",
        "phone": "+49 30 1234567",
        "address": {"street": "Karl-Marx-Allee 90", "city": "Berlin", "postal_code": "10243", "country": "DE"},
    },
    "packages": [
        {"weight_kg": 2.5, "dimensions_cm": [40, 30, 20], "fragile": False},
        {"weight_kg": 0.8, "dimensions_cm": [25, 15, 10], "fragile": True},
    ],
    "service": "express",
}


class Transcript:
    """Builds id sequences: text segments tokenized as text, markers inserted as ids."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.ids = env.setup.marker_ids

    def text(self, s: str) -> list[int]:
        return encode_text(self.env, s)

    def marker(self, name: str) -> list[int]:
        return [self.ids[name]]

    def call(self, name: str, index: int, args: Any) -> list[int]:
        return (self.marker(k2.CALL_BEGIN) + self.text(k2.call_id(name, index)) + self.marker(k2.ARGUMENT_BEGIN)
                + self.text(json.dumps(args, ensure_ascii=False)) + self.marker(k2.CALL_END))

    def section(self, calls: Sequence[list[int]]) -> list[int]:
        body = [t for c in calls for t in c]
        return self.marker(k2.SECTION_BEGIN) + body + self.marker(k2.SECTION_END) + self.marker(k2.IM_END)

    def two_calls(self) -> list[int]:
        return self.section([self.call("get_weather", 0, WEATHER_ARGS), self.call("create_shipment", 1, SHIPMENT_ARGS)])

    def calls(self, count: int) -> list[int]:
        """A section of ``count`` calls alternating get_weather and create_shipment (indices 0..)."""
        pairs = [("get_weather", WEATHER_ARGS), ("create_shipment", SHIPMENT_ARGS)]
        return self.section([self.call(pairs[i % 2][0], i, pairs[i % 2][1]) for i in range(count)])


def probes(tr: Transcript) -> list[tuple[str, list[int], int | None]]:
    """(probe, ids, position where the mistake starts; None = valid throughout).

    Each mistaken transcript is ``good prefix + bad rest``; the expected rejection is the first
    token of the bad rest, so it is known by construction.
    """
    sb, cb, ab, ce = (tr.marker(n) for n in (k2.SECTION_BEGIN, k2.CALL_BEGIN, k2.ARGUMENT_BEGIN, k2.CALL_END))
    weather = tr.call("get_weather", 0, WEATHER_ARGS)
    tail = tr.marker(k2.SECTION_END) + tr.marker(k2.IM_END)
    out: list[tuple[str, list[int], int | None]] = [("valid two-call section", tr.two_calls(), None)]

    good = tr.text("Checking. " + k2.SECTION_BEGIN)
    bad = weather + tail
    out.append(("trigger spelled as text", good + bad, len(good)))

    good = sb + cb + tr.text(k2.call_id("get_weather", 0)) + ab + tr.text('{"city": "Par')
    bad = ce + tr.text('is", "unit": "celsius"}') + ce + tail
    out.append(("marker id inside a JSON string", good + bad, len(good)))

    good = sb + weather + cb + tr.text(k2.CALL_ID_PREFIX + "create_shipment" + k2.CALL_ID_SEPARATOR)
    bad = tr.text("0") + ab + tr.text(json.dumps(SHIPMENT_ARGS)) + ce + tail
    out.append(("wrong counter (0 again)", good + bad, len(good)))

    good = sb + cb + tr.text(k2.CALL_ID_PREFIX)
    bad = tr.text("lookup_stock:0") + ab + tr.text('{"symbol": "ACME"}') + ce + tail
    out.append(("undeclared name", good + bad, len(good)))

    good = tr.text("Sure.")
    bad = weather + tr.marker(k2.IM_END)
    out.append(("bare call without section", good + bad, len(good)))
    return out


def run_probes(env: Environment, adapters: Sequence[Any]) -> dict[str, Any]:
    """Each probe through each library's K2 matcher; the first excluded token against the expected one."""
    tr = Transcript(env)
    cases = probes(tr)
    bitmask = new_bitmask(env.setup.vocab_size)
    table: dict[str, dict[str, Any]] = {}
    for adapter in adapters:
        compiled = adapter.compile_k2(TOOLS)
        table[adapter.name] = {}
        for name, ids, expected in cases:
            got = first_rejection(adapter.matcher(compiled), ids, bitmask)
            table[adapter.name][name] = {"expected": expected, "rejected_at": got, "verdict": probe_verdict(got, expected)}
    return {"probes": [c[0] for c in cases], "results": table}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="short run")
    add_timing_arguments(parser, "default 5; quick 2", DEFAULT_PEERS)
    parser.add_argument("--tools", type=int, nargs="*", default=None,
                        help=f"tool counts of the matrix (default {MATRIX_TOOLS} in the full mode; none in --quick)")
    parser.add_argument("--calls", type=int, nargs="*", default=None,
                        help=f"parallel calls per section in the matrix (default {MATRIX_CALLS})")


MATRIX_TOOLS = (16, 64, 128)
MATRIX_CALLS = (1, 4)


def run_matrix(env: Environment, adapters: Sequence[Any], sizes: Sequence[int], counts: Sequence[int],
               repetitions: int, passes: int, budget_s: float) -> list[dict[str, Any]]:
    """S1 + S2 plus filler tools up to each size (``benchmarks.compile_scaling``'s pool, renamed),
    teacher-forced sections of each call count; one table per (size, count)."""
    from .compile_scaling import DEFAULT_CORPUS, tool_set, usable_pool

    corpus = DEFAULT_CORPUS if DEFAULT_CORPUS.is_dir() else None
    pool, _ = usable_pool(adapters, corpus, max(sizes))
    tr = Transcript(env)
    cells = []
    for size in sizes:
        tools = TOOLS + tool_set(pool, max(0, size - len(TOOLS)))
        for count in counts:
            ids = tr.calls(count)
            summaries = [m.summary() for m in measure_side_by_side(
                adapters, lambda a: a.compile_k2, tools, ids, env.setup.vocab_size, repetitions=repetitions,
                later_passes=passes, budget_s=budget_s)]
            print(render_table(f"\nKimi K2, {size} tools, {count} call(s), {len(ids)} tokens", summaries))
            cells.append({"tools": size, "calls": count, "tokens": len(ids), "summaries": summaries})
    return cells


def run(args: argparse.Namespace, env: Environment | None = None) -> dict[str, Any]:
    """Run the K2 suite, print its tables, return (and save) the results."""
    pin_threads()
    repetitions = args.repetitions or DEFAULT_REPETITIONS
    passes = args.passes or (2 if args.quick else 5)
    if env is None:
        env = make_environment(args.peers)
    adapters = []
    skipped: dict[str, str] = dict(env.failed)
    for adapter in env.adapters:
        if adapter.name != "enforcer" and adapter.name not in args.peers:
            continue
        try:
            adapter.compile_k2([GET_WEATHER])  # warm-up, and the check that it can express K2
        except Exception as exc:  # e.g. Unsupported: no special-token trigger
            skipped[adapter.name] = f"{type(exc).__name__}: {exc}"
            continue
        adapters.append(adapter)
    tr = Transcript(env)
    ids = tr.two_calls()
    measure_side_by_side(adapters, lambda a: a.compile_k2, [GET_WEATHER],  # warm-up pass
                         tr.section([tr.call("get_weather", 0, WEATHER_ARGS)]), env.setup.vocab_size, repetitions=1,
                         later_passes=1)
    summaries = [m.summary() for m in measure_side_by_side(
        adapters, lambda a: a.compile_k2, TOOLS, ids, env.setup.vocab_size, repetitions=repetitions, later_passes=passes,
        budget_s=10.0 if args.quick else 60.0)]
    results: dict[str, Any] = {
        "suite": "kimi_k2",
        "machine": machine_info(),
        "settings": {"repetitions": repetitions, "later_passes": passes, "quick": args.quick,
                     "vocab_size": env.setup.vocab_size, "threads": 1, "tokens": len(ids)},
        "options": {a.name: a.options for a in adapters},
        "setup_seconds": env.setup_seconds,
        "left_out": skipped,
        "same_vocabulary": check_same_vocabulary(env),
        "summaries": summaries,
    }
    print(render_table(f"\nKimi K2 two-call section (S1 get_weather + S2 create_shipment), {len(ids)} tokens, "
                       f"{repetitions} repetitions x (1 + {passes}) passes", summaries))
    quick = bool(getattr(args, "quick", False))
    sizes = getattr(args, "tools", None) or (() if quick else MATRIX_TOOLS)
    counts = getattr(args, "calls", None) or MATRIX_CALLS
    if sizes:
        results["matrix"] = run_matrix(env, adapters, sizes, counts, repetitions, passes, 10.0 if quick else 60.0)
    probe = run_probes(env, adapters)
    results["probes"] = probe
    print_probes("K2", probe, [a.name for a in adapters])
    if skipped:
        print("\nleft out of the K2 suite: " + "; ".join(f"{k} ({v})" for k, v in skipped.items()))
    ours = env.adapters[0]
    return finish_suite(args, "kimi_k2", results,
                        lambda: profile_path(ours, ours.compile_k2, TOOLS, ids, env.setup.vocab_size),
                        [("Kimi K2 two-call section", summaries)])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kimi_k2", description=__doc__.split("\n")[0])
    add_arguments(parser)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
