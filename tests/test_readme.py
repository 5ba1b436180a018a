"""Every Python block of README.md and integrations/*/README.md runs as written, and every install
line of those READMEs is one that .ci/run runs.

Blocks run in a fresh namespace, in order per file. A block of ``integrations/transformers``
loads SmolLM2 (marked ``slow``); one of ``integrations/vllm`` starts a vLLM engine (marked
``vllm``): its one ``MODEL = ...`` line is pointed at the tiny random K2 model of
``tests/test_vllm_engine.py`` and ``LLM`` is that file's ``in_process_llm`` (its CPU engine
settings, engine core in process; no real K2 weights here).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
READMES = [REPO / "README.md", *sorted((REPO / "integrations").glob("*/README.md"))]
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
MARKS = {"transformers": pytest.mark.slow, "vllm": pytest.mark.vllm}


def blocks(path: Path, language: str) -> list[str]:
    return [body for lang, body in _BLOCK.findall(path.read_text(encoding="utf-8")) if lang == language]


def _cases() -> list[Any]:
    cases = []
    for path in READMES:
        name = path.relative_to(REPO).as_posix()
        marks = [MARKS[path.parent.name]] if path.parent.name in MARKS else []
        for i, _ in enumerate(blocks(path, "python")):
            cases.append(pytest.param(path, i, id=f"{name}#{i}", marks=marks))
    return cases


def test_the_readmes_have_python_blocks() -> None:
    counts = {p.relative_to(REPO).as_posix(): len(blocks(p, "python")) for p in READMES}
    assert counts["README.md"] >= 2 and counts["integrations/transformers/README.md"] >= 1, counts
    assert counts["integrations/vllm/README.md"] >= 1, counts


def _prepare_vllm(code: str, tmp_path: Path) -> str:
    """Point the block's model at the tiny random K2 model, and its engine at CPU settings."""
    import vllm

    import test_vllm_engine as engine_tests
    from enforcer.testing.tokenizers import kimi_k2_tokenizer

    tokenizer = kimi_k2_tokenizer("fast")
    tokenizer.chat_template = engine_tests.TEMPLATE.read_text(encoding="utf-8")
    model = engine_tests.save_tiny_model(tmp_path / "tiny", tokenizer, "<|im_end|>", 0)
    line = re.search(r"^MODEL = .*$", code, re.MULTILINE)
    assert line is not None, "the vLLM block names its model on one MODEL = ... line"
    vllm.LLM = engine_tests.in_process_llm  # CPU settings, in process; restored by the test's monkeypatch
    return code.replace(line.group(), f"MODEL = {model!r}")


@pytest.mark.parametrize(("path", "index"), _cases())
def test_python_block_runs(path: Path, index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = blocks(path, "python")[index]
    if path.parent.name == "vllm":
        import vllm

        monkeypatch.setattr(vllm, "LLM", vllm.LLM)
        code = _prepare_vllm(code, tmp_path)
    monkeypatch.chdir(REPO)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"{path.name} block {index}", "exec"), {"__name__": "__readme__"})
    if path.name == "README.md" and path.parent == REPO and index == 0:
        assert "functions.get_weather:0" in out.getvalue()  # the Use example printed its validated call


def _install_lines(text: str) -> list[str]:
    """``pip ...`` commands of a text (``&&`` chains split, comments dropped, ``-q`` ignored)."""
    found = []
    for line in text.splitlines():
        for part in line.split("#")[0].split("&&"):
            words = part.split()
            if "pip" in words and words.index("pip") + 1 < len(words) and \
                    words[words.index("pip") + 1] in ("install", "uninstall"):
                found.append(" ".join(w for w in words[words.index("pip"):] if w not in ("-q", "||", "true")))
    return found


def test_readme_install_lines_are_the_ones_ci_runs() -> None:
    ci = set(_install_lines((REPO / ".ci" / "run").read_text(encoding="utf-8")))
    for path in READMES:
        for body in blocks(path, "bash"):
            for line in _install_lines(body):
                assert line in ci, f"{path.relative_to(REPO)}: {line!r} is not run by .ci/run"
                assert "toolcall-enforcer" not in line, "install from the checkout, not a package index"
                pulls_torch = any(extra in line for extra in ("[demo]", "[test]", "[transformers]", "[bench]"))
                if line.startswith("pip install") and (pulls_torch or "torch" in line.split()):
                    assert "torch==" in line, f"{line!r} would pull an unpinned (CUDA) torch"
