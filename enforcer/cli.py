"""The ``enforcer`` command: ``check`` (compile tools or a schema and report), ``demo`` (a real
model's enforced tool call), ``bench`` (the benchmarks, from a source checkout)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence


def load_tokenizer(path: str | None, format: str = "kimi_k2") -> Any:
    """A Hugging Face tokenizer from ``path``, or the bundled Kimi-shaped test tokenizer (K3's
    control tokens for the K3 formats)."""
    if path is None:
        from .testing.tokenizers import kimi_k2_tokenizer, kimi_k3_tokenizer

        return kimi_k3_tokenizer() if format.startswith("kimi_k3") else kimi_k2_tokenizer()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, trust_remote_code=True)


def _entries(document: Any) -> tuple[str, list[tuple[str, Any]]]:
    """("tools" | "schema", [(label, schema)]) for an OpenAI tools file or a JSON schema."""
    tools = document.get("tools") if isinstance(document, dict) and "tools" in document else document
    if isinstance(tools, list):
        return "tools", [(str((t.get("function", t) or {}).get("name", f"tools[{i}]")), t) for i, t in enumerate(tools)]
    return "schema", [("schema", document)]


def check(args: argparse.Namespace) -> int:
    from . import Vocabulary, compile_json_schema, compile_tools
    from .errors import EnforcerError

    document = json.loads(Path(args.file).read_text(encoding="utf-8"))
    kind, entries = _entries(document)
    print(f"loading tokenizer ({args.tokenizer or 'Kimi-shaped test tokenizer'}) ...", flush=True)
    vocabulary = Vocabulary.from_tokenizer(load_tokenizer(args.tokenizer, args.format))
    print(f"vocabulary: {vocabulary.vocab_size} ids, fingerprint {vocabulary.fingerprint[:12]}")
    options = {"strict": not args.spec}
    failures = 0
    for index, (label, item) in enumerate(entries):
        start = time.perf_counter()
        try:
            if kind == "tools":
                compiled = compile_tools([item], vocabulary, format=args.format, **options)
                states = sum(s.dfa.nfa_states for s in compiled.schemas if s is not None) + \
                    sum(v.dfa.nfa_states for a in compiled.arguments if a is not None
                        for k in (*a.keys, *([a.extra] if a.extra else [])) for v in k.values)
            else:
                compiled = compile_json_schema(item, vocabulary, **options)
                states = compiled.dfa.nfa_states
        except EnforcerError as exc:
            failures += 1
            # each tool is compiled alone (one refusal must not hide the others): point into the file
            print(f"  FAIL  {label}: {str(exc).replace('/tools/0/', f'/tools/{index}/')}")
            continue
        elapsed = (time.perf_counter() - start) * 1e3
        print(f"  ok    {label}: compiled in {elapsed:.1f} ms, {states} automaton (NFA) states")
    total = len(entries)
    print(f"{total - failures}/{total} compiled")
    return 1 if failures else 0


def bench(args: argparse.Namespace, rest: Sequence[str]) -> int:
    checkout = Path.cwd()
    if (checkout / "benchmarks" / "__main__.py").is_file() and str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))  # the console script's path does not include the checkout
    try:
        from benchmarks.__main__ import main as bench_main  # type: ignore[import-not-found]
    except ImportError:
        print("the benchmarks live in the source checkout: run `enforcer bench` (or `python -m benchmarks`) "
              "from its root", file=sys.stderr)
        return 2
    return int(bench_main(list(rest)) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="enforcer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_check = sub.add_parser("check", help="compile an OpenAI tools file or a JSON schema and report")
    p_check.add_argument("file", help="JSON file: a tools list, {\"tools\": [...]}, or a JSON schema")
    p_check.add_argument("--tokenizer", help="Hugging Face tokenizer path (default: Kimi-shaped test tokenizer)")
    p_check.add_argument("--format", default="kimi_k2",
                         help="tool-call format: kimi_k2 (default), kimi_k3, kimi_k3_json")
    p_check.add_argument("--spec", action="store_true",
                         help="extra object keys as the JSON Schema spec allows (default: strict)")
    p_demo = sub.add_parser("demo", help="generate an enforced tool call with a small real model")
    from . import demo

    demo.add_arguments(p_demo)
    sub.add_parser("bench", help="run the benchmarks (source checkout only)", add_help=False)
    args, rest = parser.parse_known_args(argv)
    if args.command == "check":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return check(args)
    if args.command == "demo":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return int(demo.main(args) or 0)
    return bench(args, rest)


if __name__ == "__main__":
    raise SystemExit(main())
