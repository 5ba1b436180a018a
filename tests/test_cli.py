"""``enforcer check``: per tool, compiled (with time and size) or the exact refusal."""

import json
from pathlib import Path

import pytest

from enforcer.cli import main


def test_check_tools_file_reports_each_tool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tools = [
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "lookup", "parameters": {
            "type": "object", "properties": {"q": {"if": {"type": "string"}}}}}},
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
