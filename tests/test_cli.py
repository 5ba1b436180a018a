"""The ``enforcer`` command: ``check`` per tool (compiled, with time and size, or the exact refusal),
and the error table of every user mistake (one line, status 2, no traceback)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from enforcer.cli import main
from enforcer.demo import load_tools


def test_check_tools_file_reports_each_tool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tools = [
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "lookup", "parameters": {
            "type": "object", "properties": {"q": {"if": {"const": [1, 2]}, "then": {"minimum": 2}}}}}},
    ]
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"tools": tools}))
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    ok_line = next(line for line in out.splitlines() if "get_weather" in line)
    assert ok_line.split()[0] == "ok" and "ms" in ok_line and "states" in ok_line
    fail_line = next(line for line in out.splitlines() if "lookup" in line)
    assert fail_line.split()[0] == "FAIL"
    assert "'if'" in fail_line and "/tools/1/function/parameters/properties/q" in fail_line
    assert "1/2 compiled" in out


def test_check_plain_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps({"type": "array", "items": {"type": "integer", "minimum": 0}}))
    assert main(["check", str(path)]) == 0
    assert "1/1 compiled" in capsys.readouterr().out


def test_bare_list_tools_file_points_into_the_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bare-list file has no ``tools`` key: pointers start at the list index."""
    tools = [
        {"type": "function", "function": {"name": "ok_tool", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "lookup", "parameters": {
            "type": "object", "properties": {"q": {"if": {"const": [1, 2]}, "then": {"minimum": 2}}}}}},
    ]
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools))
    assert main(["check", str(path)]) == 1
    fail_line = next(line for line in capsys.readouterr().out.splitlines() if "lookup" in line)
    assert " /1/function/parameters/properties/q" in fail_line and "/tools/" not in fail_line


REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli")
    (folder / "tools.json").write_text(json.dumps(load_tools("weather")))
    (folder / "broken.json").write_text('[{"type": "function",\n  "function": {"name": }}]')
    (folder / "tools_not_a_list.json").write_text('{"tools": 5}')
    (folder / "empty_tokenizer").mkdir()
    (folder / "subfolder.json").mkdir()
    return folder


# The CLI error table: arguments -> (exit status, the one line on stderr). Every user mistake is
# one line naming the problem, status 2, no traceback; demo checks its arguments before loading
# anything (its model is never loaded here).
ERRORS = [
    (["check", "missing.json"], r"enforcer check: error: missing\.json: no such file$"),
    (["check", "broken.json"],
     r"enforcer check: error: broken\.json: not valid JSON: Expecting value at line 2 column 24$"),
    (["check", "subfolder.json"], r"enforcer check: error: subfolder\.json: is a folder, not a JSON file$"),
    (["check", "tools_not_a_list.json"], r'enforcer check: error: "tools" must be a list of OpenAI tools, got int$'),
    (["check", "tools.json", "--tokenizer", "no/such/tokenizer"],
     r"enforcer check: error: --tokenizer no/such/tokenizer: no such file or folder \(give a local tokenizer folder\)$"),
    (["check", "tools.json", "--tokenizer", "empty_tokenizer"],
     r"enforcer check: error: --tokenizer empty_tokenizer: cannot load a tokenizer from it \(.+\)$"),
    (["check", "tools.json", "--format", "kimi_k9"],
     r"enforcer check: error: argument --format: invalid choice: 'kimi_k9' \(choose from .*'?kimi_k2'?, '?kimi_k3'?, "
     r"'?kimi_k3_json'?.*\) \(see enforcer check --help\)$"),
    (["check", "tools.json", "--frobnicate"], r"enforcer: error: unrecognized arguments: --frobnicate \(see enforcer --help\)$"),
    ([], r"enforcer: error: the following arguments are required: command \(see enforcer --help\)$"),
    (["demo", "--tool-choice", "get_forecast"],
     r"enforcer demo: error: --tool-choice: tool_choice names 'get_forecast', which is not a declared tool$"),
    (["demo", "--max-new-tokens", "0"], r"enforcer demo: error: --max-new-tokens must be at least 1, got 0$"),
    (["demo", "--threads", "0"], r"enforcer demo: error: --threads must be at least 1, got 0$"),
    (["demo", "--tools", "missing.json"], r"enforcer demo: error: --tools: tools file 'missing\.json' not found "
                                          r"\(bundled sets: weather, travel, small_nested, cjk\)$"),
    (["demo", "--tools", "broken.json"], r"enforcer demo: error: --tools: broken\.json is not valid JSON: .+$"),
    (["demo", "--max-new-tokens", "many"],
     r"enforcer demo: error: argument --max-new-tokens: invalid int value: 'many' \(see enforcer demo --help\)$"),
    (["bench", "--out", str(REPO / "enforcer" / "data")],
     r"enforcer bench: error: --out .+/enforcer/data: inside the installed package; pick a folder of your own$"),
]
if (REPO / ".git").exists():
    ERRORS.append((["bench", "--out", str(REPO / "schemas")],
                   r"enforcer bench: error: --out .+/schemas: holds \d+ file\(s\) tracked by git \(e\.g\. .+\); "
                   r"pick another folder$"))


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "enforcer.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize(("args", "message"), ERRORS, ids=[" ".join(a) or "(nothing)" for a, _ in ERRORS])
def test_cli_error_table(args: list[str], message: str, files: Path) -> None:
    done = _run(args, files)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and re.match(message, lines[0]), done.stderr
    if args[:1] == ["demo"]:
        assert "[demo]" not in done.stdout  # nothing was loaded before the error


def test_debug_shows_the_traceback(files: Path) -> None:
    done = _run(["check", "missing.json", "--debug"], files)
    assert done.returncode == 2
    assert "Traceback" in done.stderr and done.stderr.strip().splitlines()[-1].endswith("missing.json: no such file")


def test_synopsis_lists_every_option() -> None:
    from enforcer.cli import build_parser

    parser = build_parser()
    for name, sub in parser._subparsers._group_actions[0].choices.items():  # type: ignore[union-attr]
        usage = sub.format_usage()
        for action in sub._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    assert flag in usage or name == "demo" and flag in sub.format_help(), (name, flag)


def test_bench_writes_to_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``enforcer bench`` points every suite's saving at ``--out`` (default: a folder in the
    current directory). The suites themselves take minutes: a stand-in main saves one result
    through the benchmarks' own ``save_results``, as each suite does."""
    import benchmarks
    import benchmarks.__main__ as bench_main

    tracked = sorted(benchmarks.RESULTS_DIR.glob("*"))
    seen: list[list[str]] = []

    def fake_main(argv: list[str]) -> None:
        seen.append(argv)
        benchmarks.save_results("probe", {"argv": argv})

    monkeypatch.setattr(bench_main, "main", fake_main)
    monkeypatch.setattr(benchmarks, "RESULTS_DIR", benchmarks.RESULTS_DIR)  # restored afterwards
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--quick"]) == 0
    assert seen == [["--quick"]]
    assert (tmp_path / "enforcer-bench-results" / "probe-latest.json").is_file()
    out = tmp_path / "elsewhere"
    assert main(["bench", "--out", str(out), "--quick"]) == 0
    assert (out / "probe-latest.json").is_file()
    assert sorted(Path(benchmarks.__file__).parent.joinpath("results").glob("*")) == tracked  # untouched
