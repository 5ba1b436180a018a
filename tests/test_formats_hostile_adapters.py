"""Issue 14, adapter side: a K2 generation over each hostile tool set of ``tests/test_hostile.py``
through the transformers processor and the vLLM logits processor; nothing escapes either
decode loop and the outcome is the documented one.

What is real: the tool sets (``test_hostile.TOOLS``), the Kimi-K2-shaped tokenizer and
vocabulary, the compiler with its default budgets, both processor classes and their decode
loops. What is not: the model (random logits, greedy on the masked scores) and, for vLLM, the
engine (the processor is built from a stand-in ``VllmConfig`` that holds only the tokenizer and
the logits width, and driven with hand-made ``BatchUpdate``s and live output lists, as vLLM's V1
runner drives it; ``validate_params`` is called as the server calls it before admission).

Documented outcomes:
- transformers: the constructor raises the compiler's own error (an ``EnforcerError``) for a
  declaration it refuses; otherwise every step returns scores whose finite ids are exactly the
  row's matcher's allowed ids, or (a row refused a token or left with none allowed: ``errors``
  names why) only the stop token.
- vLLM: ``validate_params`` answers a declaration it refuses with ``ValueError`` (HTTP 400); a
  declaration it admits but that cannot be compiled for the engine leaves that request
  unconstrained (its logits untouched); a compiled one is masked exactly like an independent
  matcher fed the same tokens, or held to the stop token; the other request of the batch is
  masked exactly throughout and ends with its call.

The cheap tool sets run by default, every one with ``--run-slow`` (a 100,000-value enum and
1,000 tools compile in tens of seconds on a loaded machine).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")

from enforcer.errors import EnforcerError  # noqa: E402
from enforcer.tools import compile_tools  # noqa: E402

_HOSTILE = Path(__file__).resolve().parent / "test_hostile.py"
_spec = importlib.util.spec_from_file_location("_hostile_cases", _HOSTILE)
hostile = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = hostile  # its dataclasses look their module up
_spec.loader.exec_module(hostile)  # the case tables only; its runner is not used here

TOOL_SETS: dict[str, Callable[[], Any]] = hostile.TOOLS
SLOW = {"tools-1000", "parameters-enum-100000", "parameters-props-40-maxLength-2048",
        "parameters-maxItems-256-strings", "name-10000-chars"}
STEPS = 48
PLAIN = [{"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"], "additionalProperties": False}}}]

try:
    import vllm  # noqa: F401

    HAVE_VLLM = True
except ImportError:
    HAVE_VLLM = False


def _cases() -> list[Any]:
    return [pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name for name in TOOL_SETS]


def _finite(row: Any) -> list[int]:
    return torch.isfinite(row).nonzero().flatten().tolist()


def _prompt(tokenizer: Any) -> list[int]:
    return tokenizer.encode("Call a tool, please.", add_special_tokens=False)


# ---- transformers ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", _cases())
def test_transformers_processor_over_hostile_tool_set(name: str, kimi_tokenizer: Any, kimi_vocab: Any) -> None:
    from enforcer.integrations.transformers import ToolCallLogitsProcessor

    tools = TOOL_SETS[name]()
    try:
        proc = ToolCallLogitsProcessor(kimi_tokenizer, tools, tool_choice="required", vocabulary=kimi_vocab)
    except EnforcerError:
        return  # refused before any token, with the library's own error: the documented outcome
    stop = proc.stop_token_ids
    generator = torch.Generator().manual_seed(7)
    prompt = _prompt(kimi_tokenizer)
    ids = torch.tensor([prompt, prompt])
    shadows = [proc.compiled.matcher(prompt_ids=prompt) for _ in range(2)]
    held = [False, False]
    for _ in range(STEPS):
        scores = torch.randn((2, kimi_vocab.vocab_size), generator=generator)
        out = proc(ids, scores)  # anything raised here fails the test: nothing may escape the loop
        for row in range(2):
            finite = _finite(out[row])
            if held[row] or proc.errors[row] is not None:
                assert finite == stop, (row, proc.errors[row])
                held[row] = True
            else:
                assert finite == shadows[row].allowed_token_ids()
        tokens = torch.argmax(out, dim=-1)
        for row in range(2):
            if not held[row]:
                assert shadows[row].accept_token(int(tokens[row]))
                held[row] = shadows[row].is_finished
        ids = torch.cat([ids, tokens[:, None]], dim=1)
        if all(held):
            break


# ---- vLLM -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory, kimi_tokenizer: Any) -> str:
    folder = tmp_path_factory.mktemp("kimi_tokenizer_hostile")
    kimi_tokenizer.save_pretrained(folder)
    return str(folder)


def _vllm_processor(tokenizer_dir: str, width: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    from enforcer.integrations.vllm import ToolCallLogitsProcessor

    monkeypatch.delenv("ENFORCER_VLLM_DISABLE", raising=False)
    model_config = SimpleNamespace(tokenizer=tokenizer_dir, tokenizer_revision=None, tokenizer_mode="auto",
                                   runner_type="generate", trust_remote_code=False, skip_tokenizer_init=False,
                                   hf_config=None, get_vocab_size=lambda: width)
    proc = ToolCallLogitsProcessor(SimpleNamespace(model_config=model_config), torch.device("cpu"), False)
    assert proc.core is not None
    return proc


@pytest.mark.skipif(not HAVE_VLLM, reason="vllm is not installed")
@pytest.mark.parametrize("name", _cases())
def test_vllm_processor_over_hostile_tool_set(name: str, tokenizer_dir: str, kimi_tokenizer: Any,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate

    proc = _vllm_processor(tokenizer_dir, len(kimi_tokenizer), monkeypatch)
    vocab = proc.core.vocabulary
    stop = [vocab.token_id("<|im_end|>")]
    tools = TOOL_SETS[name]()
    hostile_params = SamplingParams(extra_args={"enforcer": json.dumps(
        {"tools": tools, "tool_choice": "required"}, ensure_ascii=False, default=str)})
    plain_params = SamplingParams(extra_args={"enforcer": {"tools": PLAIN, "tool_choice": "required"}})
    try:
        type(proc).validate_params(hostile_params)
        admitted = True
    except ValueError:
        admitted = False  # HTTP 400 with the reason, before the request reaches a batch
    prompt = _prompt(kimi_tokenizer)
    outputs: list[list[int]] = [[], []]
    added = [(1, plain_params, prompt, outputs[1])]
    if admitted:
        added.insert(0, (0, hostile_params, prompt, outputs[0]))
    proc.update_state(BatchUpdate(batch_size=2, removed=[], added=added, moved=[]))
    constrained = 0 in proc.core.rows
    shadows: list[Any] = [None, compile_tools(PLAIN, vocab, tool_choice="required").matcher(prompt_ids=prompt)]
    if constrained:
        shadows[0] = compile_tools(tools, vocab, tool_choice="required").matcher(prompt_ids=prompt)
    held = [False, False]
    generator = torch.Generator().manual_seed(11)
    for _ in range(STEPS):
        logits = torch.randn((2, vocab.vocab_size), generator=generator)
        before = logits.clone()
        out = proc.apply(logits)  # anything raised here fails the test: nothing may escape the loop
        if not constrained:
            assert torch.equal(out[0], before[0])  # unconstrained, as documented
        for row in (0, 1) if constrained else (1,):
            finite = _finite(out[row])
            if held[row]:  # the stop token ended it: the engine finishes the request
                continue
            allowed = shadows[row].allowed_token_ids()
            assert finite == (allowed or stop), (name, row)
        finished = [row for row in (0, 1) if held[row] and row in proc.core.rows]
        proc.update_state(BatchUpdate(batch_size=2, removed=finished, added=[], moved=[]) if finished else None)
        for row in (0, 1):
            if held[row]:
                continue
            token = int(torch.argmax(out[row]))
            outputs[row].append(token)  # the engine appends the sampled token to the live list
            if shadows[row] is not None:
                assert shadows[row].accept_token(token) or token in stop
                held[row] = shadows[row].is_finished or token in stop
        if held[1] and (held[0] or not constrained):
            break
    assert held[1] and shadows[1].calls and shadows[1].calls[0]["function"]["name"] == "lookup", \
        "the plain request of the batch must end with its call"
