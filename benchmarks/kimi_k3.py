"""Kimi K3 (XTML) assistant turn: per-token mask + advance latency and compile times, plus probes.

``python -m benchmarks.kimi_k3 [--quick]``

Tokenizer: ``kimi_k3_tokenizer("fast")`` (K2's ranks, K3's control tokens ``<|end_of_msg|>``
``<|open|>`` ``<|close|>`` ``<|sep|>`` as special ids; 151,899 ids). Tools: the K2 suite's S1
``get_weather`` and S2 ``create_shipment``. The prompt ends with ``<|open|>response<|sep|>``
(thinking off), so generation starts inside the response body; the transcript (control tokens
inserted by id, every text piece encoded as text, tag text piece by piece as the format does)::

    Sure, ...<|close|>response<|sep|><|open|>tools<|sep|>
    <|open|>call tool="get_weather" index="1"<|sep|>
      <|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>...<|close|>call<|sep|>
    <|open|>call tool="create_shipment" index="2"<|sep|>...  (recipient, packages as JSON literals)
    <|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>

Libraries: ours (``compile_tools(tools, vocab, format="kimi_k3")``, matcher over the prompt),
xgrammar's built-in ``kimi_k3`` structural tag (markers as text, as shipped; and rebound to ids),
llguidance with a Lark grammar (control tokens as ``<[id]>``). xgrammar's tag ends with
``<|close|>message<|sep|>``; ``<|end_of_msg|>`` is its stop token, accepted as the last token.
outlines-core and lm-format-enforcer cannot express K3 (no control-token delimiters).

The semantics probes (untimed) feed each library a turn with one mistake (or a valid turn) and
report the first token its mask excludes, against the position where the mistake starts.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Sequence

from enforcer.formats import kimi_k3 as k3

from . import (
    DEFAULT_REPETITIONS,
    add_timing_arguments,
    check_same_vocabulary,
    Environment,
    finish_suite,
    machine_info,
    measure_side_by_side,
    new_bitmask,
    pin_threads,
    print_probes,
    probe_verdict,
    profile_path,
    render_table,
)
from .kimi_k2 import GET_WEATHER, SHIPMENT_ARGS, TOOLS, WEATHER_ARGS

DEFAULT_PEERS = ("xgrammar", "xgrammar-tok", "llguidance")
NOT_APPLICABLE = {
    "outlines-core": "not applicable: a regex over text cannot name the control-token ids that delimit K3 tags",
    "lm-format-enforcer": "not applicable: no special tokens in its token tree, so no K3 tag can be written",
}
RESPONSE_TEXT = "Sure: the weather in Paris first, then the shipment to Berlin."
END_NOTE = ("xgrammar's kimi_k3 tag ends with <|close|>message<|sep|>; <|end_of_msg|> is its matcher's stop "
            "token (stop_token_ids), accepted as the last token and then the matcher is terminated; llguidance: "
            "<|end_of_msg|> is the EOS after the grammar's end; ours: <|end_of_msg|> is part of the format")


def make_k3_environment(peer_names: Sequence[str]) -> Environment:
    """The K3-shaped fast tokenizer, our Vocabulary and the K3-capable adapters over one K3 Setup.

    Cost: a few seconds (tokenizer, then each peer's tokenizer tables)."""
    from enforcer import Vocabulary
    from enforcer.testing.tokenizers import kimi_k3_tokenizer

    from .peers import Setup, build_adapters

    start = time.perf_counter()
    tokenizer = kimi_k3_tokenizer("fast")
    tokenizer_seconds = time.perf_counter() - start
    start = time.perf_counter()
    vocabulary = Vocabulary.from_tokenizer(tokenizer)
    seconds = {"tokenizer (kimi_k3_tokenizer)": tokenizer_seconds, "enforcer": time.perf_counter() - start}
    setup = Setup.for_kimi_k3(tokenizer, vocabulary)
    built = build_adapters(setup, vocabulary, [p for p in peer_names if p not in NOT_APPLICABLE])
    for adapter in built.adapters[1:]:
        seconds[adapter.name] = adapter.build_seconds
    added = tuple(str(t) for t in tokenizer.added_tokens_decoder.values())
    return Environment(tokenizer, vocabulary, setup, built.adapters, built.failed, seconds, added)


class Transcript:
    """Builds K3 id sequences: control tokens by id, text via ``Vocabulary.encode_text`` (text
    that spells a control token stays text), tag text in :func:`kimi_k3.tag_pieces` pieces."""

    def __init__(self, env: Environment) -> None:
        self.vocabulary = env.vocabulary
        ids = env.setup.marker_ids
        self.open_id, self.close_id, self.sep_id, self.end_id = (ids[n] for n in (k3.OPEN, k3.CLOSE, k3.SEP,
                                                                                  k3.END_OF_MSG))

    def text(self, s: str) -> list[int]:
        return self.vocabulary.encode_text(s) if s else []

    def pieces(self, word: str, attributes: Sequence[tuple[str, str]] = ()) -> list[int]:
        return [t for p in k3.tag_pieces(word, attributes) for t in self.vocabulary.encode_text(p)]

    def open(self, word: str, attributes: Sequence[tuple[str, str]] = ()) -> list[int]:
        return [self.open_id, *self.pieces(word, attributes), self.sep_id]

    def close(self, word: str) -> list[int]:
        return [self.close_id, *self.pieces(word), self.sep_id]

    def argument(self, key: str, json_type: str, value: str) -> list[int]:
        """One argument tag; ``value`` is written as it stands (raw string or JSON literal)."""
        return self.open(k3.ARGUMENT, [("key", key), ("type", json_type)]) + self.text(value) + self.close(k3.ARGUMENT)

    def call(self, name: str, index: int | str, arguments: Sequence[tuple[str, str, str]]) -> list[int]:
        body = [t for key, json_type, value in arguments for t in self.argument(key, json_type, value)]
        return self.open(k3.CALL, [("tool", name), ("index", str(index))]) + body + self.close(k3.CALL)

    def turn(self, calls: Sequence[list[int]]) -> list[int]:
        """Response text, its close tag, the tools section (if any calls), the message end."""
        out = self.text(RESPONSE_TEXT) + self.close(k3.RESPONSE)
        if calls:
            out += self.open(k3.TOOLS) + [t for c in calls for t in c] + self.close(k3.TOOLS)
        return out + self.close(k3.MESSAGE) + [self.end_id]

    def two_calls(self, weather: Sequence[tuple[str, str, str]] | None = None, first_index: int | str = 1) -> list[int]:
        weather = split_arguments(WEATHER_ARGS) if weather is None else weather
        return self.turn([self.call("get_weather", first_index, weather),
                          self.call("create_shipment", 2, split_arguments(SHIPMENT_ARGS))])


def split_arguments(arguments: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(key, type attribute, value text): strings raw, everything else its JSON literal."""
    return [(key, k3.value_type(value), value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
            for key, value in arguments.items()]


SPELLED = "<|close|>argument<|sep|><|close|>call<|sep|>"


def probes(tr: Transcript) -> list[tuple[str, list[int], int | None]]:
    """(probe, ids, position where the mistake starts; None = valid throughout).

    Each mistaken turn is the valid turn with one part replaced; the expected rejection is the
    first token where it differs from the valid turn, so it is known by construction.
    """
    valid = tr.two_calls()
    city, unit = split_arguments(WEATHER_ARGS)
    out: list[tuple[str, list[int], int | None]] = [("valid turn", valid, None)]
    out.append(("control tokens spelled as text in a string value (valid)",
                tr.two_calls([("city", "string", SPELLED), unit]), None))
    mistakes = {
        'wrong type attribute (city type="number")': tr.two_calls([("city", "number", "1"), unit]),
        "missing required key (call closed after city)": tr.two_calls([city]),
        'unknown key ("units")': tr.two_calls([city, ("units", *unit[1:])]),
        'index not counting from 1 (index="0")': tr.two_calls(first_index=0),
        'string enum value outside the enum ("kelvin")': tr.two_calls([city, ("unit", "string", "kelvin")]),
        "text after <|end_of_msg|>": valid + tr.text(" More."),
    }
    for name, ids in mistakes.items():
        out.append((name, ids, next(i for i, (a, b) in enumerate(zip(valid + [-1], ids)) if a != b)))
    return out


def first_rejection(matcher: Any, ids: Sequence[int], bitmask: Any) -> tuple[int | None, str | None]:
    """(position of the first token the mask excludes or ``accept_token`` refuses, how). A
    library that raises instead (xgrammar filling a mask after its stop token) refuses there."""
    words = bitmask.numpy()[0]
    for position, token in enumerate(ids):
        bitmask.zero_()
        try:
            matcher.fill_bitmask(bitmask, 0)
        except Exception as exc:  # the library's way of refusing to go on
            return position, f"raised: {type(exc).__name__}: {str(exc)[-120:]}"
        if not (int(words[token >> 5]) >> (token & 31)) & 1:
            return position, "not in mask"
        if not matcher.accept_token(token):
            return position, "accept_token refused"
    return None, None


def run_probes(env: Environment, adapters: Sequence[Any]) -> dict[str, Any]:
    """Each probe through each library's K3 matcher; the first excluded token against the expected one."""
    tr = Transcript(env)
    cases = probes(tr)
    bitmask = new_bitmask(env.setup.vocab_size)
    spelled = next(i for i, (a, b) in enumerate(zip(cases[0][1], cases[1][1])) if a != b)
    table: dict[str, dict[str, Any]] = {}
    for adapter in adapters:
        compiled = adapter.compile_k3(TOOLS)
        table[adapter.name] = {}
        for name, ids, expected in cases:
            got, how = first_rejection(adapter.matcher(compiled), ids, bitmask)
            text = probe_verdict(got, expected, how)
            if name == cases[1][0] and got is not None:
                text += f" (spelled text from {spelled})"
            table[adapter.name][name] = {"expected": expected, "rejected_at": got, "how": how,
                                         "token": None if got is None else ids[got], "verdict": text}
    return {"probes": [c[0] for c in cases], "results": table,
            "spelled_value": {"text": SPELLED, "starts_at": spelled, "ids": tr.text(SPELLED)}}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="short run")
    add_timing_arguments(parser, "default 5; quick 2", DEFAULT_PEERS)


def run(args: argparse.Namespace, env: Environment | None = None) -> dict[str, Any]:
    """Run the K3 suite, print its tables, return (and save) the results. ``env`` must be a K3
    environment (:func:`make_k3_environment`); by default one is built here."""
    pin_threads()
    quick = bool(getattr(args, "quick", False))
    repetitions = getattr(args, "repetitions", None) or DEFAULT_REPETITIONS
    passes = getattr(args, "passes", None) or (2 if quick else 5)
    peers = list(getattr(args, "peers", DEFAULT_PEERS))
    if env is None:
        env = make_k3_environment(peers)
        print("K3 set-up seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in env.setup_seconds.items()))
    skipped: dict[str, str] = {name: reason for name, reason in env.failed.items() if name not in NOT_APPLICABLE}
    adapters = []
    for adapter in env.adapters:
        if adapter.name != "enforcer" and adapter.name not in peers:
            continue
        try:
            adapter.compile_k3([GET_WEATHER])  # warm-up, and the check that it can express K3
        except Exception as exc:
            skipped[adapter.name] = f"{type(exc).__name__}: {exc}"
            continue
        adapters.append(adapter)
    tr = Transcript(env)
    ids = tr.two_calls()
    warm = tr.turn([tr.call("get_weather", 1, split_arguments(WEATHER_ARGS))])
    measure_side_by_side(adapters, lambda a: a.compile_k3, [GET_WEATHER], warm, env.setup.vocab_size,  # warm-up pass
                         repetitions=1, later_passes=1)
    budget = 8.0 if quick else 60.0
    summaries = [m.summary() for m in measure_side_by_side(
        adapters, lambda a: a.compile_k3, TOOLS, ids, env.setup.vocab_size, repetitions=repetitions,
        later_passes=passes, budget_s=budget)]
    results: dict[str, Any] = {
        "suite": "kimi_k3",
        "tokenizer": f"kimi_k3_tokenizer('fast') ({env.setup.vocab_size} ids; control ids "
                     + ", ".join(f"{k} {v}" for k, v in env.setup.marker_ids.items()) + ")",
        "machine": machine_info(),
        "settings": {"repetitions": repetitions, "later_passes": passes, "quick": quick, "budget_s": budget,
                     "vocab_size": env.setup.vocab_size, "threads": 1, "tokens": len(ids),
                     "prompt_ids": list(env.setup.k3_prompt_ids),
                     "workload": "response text, <|close|>response<|sep|>, tools section with get_weather (index 1) "
                                 "and create_shipment (index 2), split arguments, <|close|>message<|sep|><|end_of_msg|>"},
        "end_of_message": END_NOTE,
        "options": {a.name: a.k3_options for a in adapters},
        "setup_seconds": env.setup_seconds,
        "left_out": skipped,
        "not_applicable": dict(NOT_APPLICABLE),
        "same_vocabulary": check_same_vocabulary(env),
        "summaries": summaries,
    }
    print(render_table(f"\nKimi K3 turn (response + S1 get_weather + S2 create_shipment), {len(ids)} tokens, "
                       f"{repetitions} repetitions x (1 + {passes}) passes", summaries))
    probe = run_probes(env, adapters)
    results["probes"] = probe
    print_probes("K3", probe, [a.name for a in adapters])
    print("\nnot applicable to K3: " + "; ".join(f"{k} ({v})" for k, v in NOT_APPLICABLE.items()))
    if skipped:
        print("left out of the K3 suite: " + "; ".join(f"{k} ({v})" for k, v in skipped.items()))
    ours = env.adapters[0]
    return finish_suite(args, "kimi_k3", results,
                        lambda: profile_path(ours, ours.compile_k3, TOOLS, ids, env.setup.vocab_size),
                        [("Kimi K3 turn", summaries)])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kimi_k3", description=__doc__.split("\n")[0])
    add_arguments(parser)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
