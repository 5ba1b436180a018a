"""The transformers adapter: ``generate()`` under ``ToolCallLogitsProcessor``.

The model is a real ``LlamaForCausalLM`` with random weights over the Kimi-shaped tokenizer's
151,899 ids (hidden 64, 2 layers): it knows nothing of the format, so whatever it produces is the
enforcer's doing. The test tools have finite argument languages (enums, bounded integers,
booleans) so that every constrained call ends within ``max_new_tokens``. Where a test needs the
model to *want* something (open the section, pick a forbidden id), a small ``_Boost`` processor
placed before the enforcer adds a large logit to those ids.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import LlamaConfig, LlamaForCausalLM, LogitsProcessor, LogitsProcessorList  # noqa: E402

from enforcer.declarations import encode_chat, render_chat  # noqa: E402
from enforcer.errors import TokenizerError  # noqa: E402
from enforcer.formats import kimi_k2 as k2  # noqa: E402
from enforcer.formats import kimi_k3 as k3  # noqa: E402
from enforcer.integrations.transformers import ToolCallLogitsProcessor  # noqa: E402
from enforcer.parser import parse_tool_calls  # noqa: E402
from enforcer.vocabulary import Vocabulary  # noqa: E402

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "enum": ["Paris", "Tokyo", "北京"]},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "alarm.set-v2",
            "description": "Set an alarm.",
            "parameters": {
                "type": "object",
                "properties": {
                    "hour": {"type": "integer", "minimum": 0, "maximum": 23},
                    "loud": {"type": "boolean"},
                },
                "required": ["hour", "loud"],
                "additionalProperties": False,
            },
        },
    },
]
PROMPTS = ["What is the weather in Paris?", "Wake me up at seven, loudly please, and tell me the weather in Tokyo."]
MAX_NEW = 96


class _Boost(LogitsProcessor):
    """Adds ``amount`` (one value, or one per id) to the logits of ``ids`` (steers the random
    model; runs before the enforcer)."""

    def __init__(self, ids: list[int], amount: Any = 100.0) -> None:
        self.ids = ids
        self.amount = amount

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        scores = scores.clone()
        scores[:, self.ids] += self.amount
        return scores


def tiny_llama(tokenizer: Any, seed: int) -> Any:
    """A randomly initialised 2-layer Llama over ``tokenizer``'s ids (real weights cannot be
    downloaded here)."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def model(kimi_tokenizer: Any) -> Any:
    return tiny_llama(kimi_tokenizer, 0)


def _marker(vocab: Vocabulary, name: str) -> int:
    return vocab.token_id(name)


def _encode(tokenizer: Any, prompts: list[str], tools: list[dict[str, Any]] = TOOLS) -> dict[str, Any]:
    texts = [render_chat([{"role": "user", "content": p}], tools) for p in prompts]
    return tokenizer(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)


def _generate(model: Any, tokenizer: Any, proc: ToolCallLogitsProcessor, prompts: list[str],
              boost: list[int] | None = None, **kwargs: Any) -> list[list[int]]:
    enc = _encode(tokenizer, prompts)
    processors = ([_Boost(boost)] if boost else []) + [proc]
    kwargs.setdefault("eos_token_id", proc.stop_token_ids)
    kwargs.setdefault("max_new_tokens", MAX_NEW)
    with torch.inference_mode():
        out = model.generate(
            **enc,
            logits_processor=LogitsProcessorList(processors),
            pad_token_id=tokenizer.pad_token_id,
            **kwargs,
        )
    return out[:, enc["input_ids"].shape[1]:].tolist()


def _until_stop(ids: list[int], stop: int) -> list[int]:
    return ids[: ids.index(stop) + 1] if stop in ids else ids


def _check_turn(ids: list[int], vocab: Vocabulary, tools: list[dict[str, Any]] = TOOLS) -> dict[str, Any]:
    """The turn ended, an opened section closed, and every call passes the vendor-verifier rule."""
    stop = _marker(vocab, k2.IM_END)
    assert stop in ids, f"the turn did not end within {len(ids)} tokens: {ids}"
    turn = _until_stop(ids, stop)
    begin, end = _marker(vocab, k2.SECTION_BEGIN), _marker(vocab, k2.SECTION_END)
    assert turn.count(begin) == turn.count(end) <= 1
    if begin in turn:
        assert turn.index(end) == len(turn) - 2, "only <|im_end|> may follow the section"
    parsed = parse_tool_calls(turn, vocab)
    declared = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    for call in parsed["tool_calls"] or []:
        name = call["function"]["name"]
        assert name in declared
        jsonschema.validate(json.loads(call["function"]["arguments"]), declared[name])
    assert bool(parsed["tool_calls"]) == (begin in turn)
    return parsed


def _check_matcher_ended(proc: ToolCallLogitsProcessor, row: int, vocab: Vocabulary) -> None:
    """No error; the matcher is finished, or (generate() never hands the processor the token that
    ends the last row) finishes on the stop token."""
    matcher = proc.matchers[row]
    assert proc.errors[row] is None
    if not matcher.is_finished:
        assert matcher.accept_token(_marker(vocab, k2.IM_END)) and matcher.is_finished


@pytest.mark.parametrize("parallel", [False, True])
def test_greedy_required_batch_with_left_padding(model: Any, kimi_tokenizer: Any, kimi_vocab: Vocabulary,
                                                 parallel: bool) -> None:
    proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice="required",
                                   parallel_tool_calls=parallel, vocabulary=kimi_vocab)
    # Parallel calls: steer towards closing the section so that greedy decoding cannot loop on calls.
    boost = [_marker(kimi_vocab, k2.SECTION_END)] if parallel else None
    rows = _generate(model, kimi_tokenizer, proc, PROMPTS, boost=boost, do_sample=False)
    enc = _encode(kimi_tokenizer, PROMPTS)
    assert enc["attention_mask"][0, 0] == 0, "the shorter prompt must be left-padded"
    assert proc.prompt_ids == [enc["input_ids"][r][enc["attention_mask"][r].bool()].tolist() for r in range(2)]
    for row, ids in enumerate(rows):
        parsed = _check_turn(ids, kimi_vocab)
        assert parsed["tool_calls"], "required: the turn must hold a call"
        _check_matcher_ended(proc, row, kimi_vocab)
        ids_seen = [c["id"] for c in parsed["tool_calls"]]
        assert ids_seen == [f"functions.{c['function']['name']}:{i}" for i, c in enumerate(parsed["tool_calls"])]
        if not parallel:
            assert len(parsed["tool_calls"]) == 1


def test_sampling_parallel_calls(model: Any, kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice="required", vocabulary=kimi_vocab)
    calls = 0
    for seed in range(3):
        torch.manual_seed(seed)
        proc.reset()
        # required still allows <think>...</think> first; steer past it (a random model never ends it).
        rows = _generate(model, kimi_tokenizer, proc, PROMPTS, boost=[_marker(kimi_vocab, k2.SECTION_BEGIN)],
                         do_sample=True, temperature=1.0, top_k=0, max_new_tokens=4 * MAX_NEW)
        for ids in rows:
            calls += len(_check_turn(ids, kimi_vocab)["tool_calls"])
    assert calls >= 6


def test_auto_opens_when_the_model_wants_to(model: Any, kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice="auto", parallel_tool_calls=False,
                                   vocabulary=kimi_vocab)
    begin = _marker(kimi_vocab, k2.SECTION_BEGIN)
    rows = _generate(model, kimi_tokenizer, proc, PROMPTS, boost=[begin], do_sample=False)
    for ids in rows:
        assert ids[0] == begin
        assert _check_turn(ids, kimi_vocab)["tool_calls"]


def test_auto_free_text_never_leaks_tool_tokens(model: Any, kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    # The model wants the bare call markers (the known trap); only the section token may open calls.
    proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice="auto", vocabulary=kimi_vocab)
    stray = [_marker(kimi_vocab, name) for name in (k2.CALL_BEGIN, k2.ARGUMENT_BEGIN, k2.CALL_END, k2.SECTION_END)]
    rows = _generate(model, kimi_tokenizer, proc, PROMPTS[:1], boost=stray, do_sample=False, max_new_tokens=12)
    assert not set(rows[0]) & set(stray)


def test_none_bans_the_section_even_when_wanted(model: Any, kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice="none", vocabulary=kimi_vocab)
    tool_ids = [_marker(kimi_vocab, name) for name in k2.TOOL_TOKENS]
    rows = _generate(model, kimi_tokenizer, proc, PROMPTS, boost=tool_ids, do_sample=False, max_new_tokens=16)
    for ids in rows:
        assert not set(ids) & set(tool_ids)
        assert parse_tool_calls(ids, kimi_vocab)["tool_calls"] in (None, [])


def test_named_tool_choice(model: Any, kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    choice = {"type": "function", "function": {"name": "alarm.set-v2"}}
    proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice=choice, vocabulary=kimi_vocab)
    torch.manual_seed(1)
    rows = _generate(model, kimi_tokenizer, proc, PROMPTS, do_sample=True, top_k=0,
                     boost=[_marker(kimi_vocab, k2.SECTION_BEGIN), _marker(kimi_vocab, k2.SECTION_END)])
    for ids in rows:
        calls = _check_turn(ids, kimi_vocab)["tool_calls"]
        assert calls and {c["function"]["name"] for c in calls} == {"alarm.set-v2"}


def test_beam_search_is_refused(model: Any, kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice="required", vocabulary=kimi_vocab)
    with pytest.raises(ValueError, match="beam search"):
        _generate(model, kimi_tokenizer, proc, PROMPTS[:1], num_beams=2, do_sample=False)


def test_finished_row_is_held_on_the_stop_token(model: Any, kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    # generate() is not told about <|im_end|>: it keeps asking, the processor keeps forcing the stop token.
    proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice="required", parallel_tool_calls=False,
                                   vocabulary=kimi_vocab)
    stop = _marker(kimi_vocab, k2.IM_END)
    rows = _generate(model, kimi_tokenizer, proc, PROMPTS, do_sample=False, eos_token_id=kimi_tokenizer.eos_token_id)
    for row, ids in enumerate(rows):
        assert len(ids) == MAX_NEW and stop in ids
        first = ids.index(stop)
        assert first < MAX_NEW - 1 and ids[first:] == [stop] * (MAX_NEW - first)
        _check_turn(ids, kimi_vocab)
        assert proc.matchers[row].is_finished and proc.errors[row] is None  # it saw the stop token: held since


def _step(proc: ToolCallLogitsProcessor, ids: list[list[int]], width: int) -> Any:
    return proc(torch.tensor(ids), torch.zeros(len(ids), width))


def test_mask_matches_the_matcher_at_every_step(kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    # Teacher-force a K2 turn through __call__; compare the finite columns with an independent matcher.
    proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice="auto", vocabulary=kimi_vocab)
    prompt = _encode(kimi_tokenizer, PROMPTS[:1])["input_ids"][0].tolist()
    turn = (f"{k2.SECTION_BEGIN}{k2.CALL_BEGIN}functions.get_weather:0{k2.ARGUMENT_BEGIN}"
            f'{{"city": "北京", "unit": "celsius"}}{k2.CALL_END}{k2.CALL_BEGIN}functions.alarm.set-v2:1'
            f'{k2.ARGUMENT_BEGIN}{{"hour": 7, "loud": true}}{k2.CALL_END}{k2.SECTION_END}{k2.IM_END}')
    target = kimi_tokenizer(turn, add_special_tokens=False)["input_ids"]
    reference = proc.compiled.matcher(prompt_ids=prompt)
    width = kimi_vocab.vocab_size
    ids = prompt
    for token in target:
        out = _step(proc, [ids], width)
        allowed = torch.isfinite(out[0]).nonzero().flatten().tolist()
        assert allowed == sorted(reference.allowed_token_ids())
        assert token in allowed
        assert reference.accept_token(token)
        ids = ids + [token]
    _step(proc, [ids], width)
    assert proc.matchers[0].is_finished and reference.is_finished
    assert len(proc.stats.total) == len(target) + 1


def test_scores_off_the_host_path_are_masked_alike(kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    """float64 scores take the row-by-row path (sparse ids or a cached bias, as on an accelerator):
    the same finite columns, the same kept scores as the compiled float32 pass, and the biases
    of repeated dense masks come from the cache."""
    width = kimi_vocab.vocab_size + 40  # padded embeddings: ids past the vocabulary are -inf
    prompt = _encode(kimi_tokenizer, PROMPTS[:1])["input_ids"][0].tolist()
    turn = f'{k2.SECTION_BEGIN}{k2.CALL_BEGIN}functions.get_weather:0{k2.ARGUMENT_BEGIN}{{"city": "Rome x", "unit": "celsius"}}'
    target = kimi_tokenizer(turn, add_special_tokens=False)["input_ids"]
    host = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice="auto", vocabulary=kimi_vocab)
    rows = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice="auto", vocabulary=kimi_vocab)
    generator = torch.Generator().manual_seed(0)
    for _ in range(2):  # the second turn finds its dense masks' biases cached
        host.reset()
        rows.reset()
        ids = prompt
        for token in target:
            scores = torch.randn(1, width, generator=generator)
            fast = host(torch.tensor([ids]), scores)
            slow = rows(torch.tensor([ids]), scores.double())
            assert torch.equal(torch.isfinite(fast), torch.isfinite(slow))
            assert torch.equal(fast[torch.isfinite(fast)].double(), slow[torch.isfinite(slow)])
            assert not torch.isfinite(fast[0, kimi_vocab.vocab_size:]).any()
            ids = ids + [token]
    assert rows.stats.sparse_rows > 0 and rows.stats.bias_hits > 0
    assert host.stats.sparse_rows == host.stats.bias_hits == host.stats.bias_misses == 0


def test_rejected_token_is_recorded_and_the_row_forced_to_stop(kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice="required", vocabulary=kimi_vocab)
    prompt = _encode(kimi_tokenizer, PROMPTS[:1])["input_ids"][0].tolist()
    width = kimi_vocab.vocab_size
    _step(proc, [prompt], width)
    wrong = kimi_tokenizer("hello", add_special_tokens=False)["input_ids"][0]  # text, where only the section may open
    out = _step(proc, [prompt + [wrong]], width)
    assert proc.errors[0]
    assert torch.isfinite(out[0]).nonzero().flatten().tolist() == proc.stop_token_ids


def test_wider_logits_never_allow_ids_past_the_tokenizer(kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice="auto", vocabulary=kimi_vocab)
    prompt = _encode(kimi_tokenizer, PROMPTS[:1])["input_ids"][0].tolist()
    width = kimi_vocab.vocab_size + 37
    scores = torch.zeros(1, width)
    scores[0, kimi_vocab.vocab_size:] = 1000.0
    out = proc(torch.tensor([prompt]), scores)
    assert out.shape == (1, width)
    assert torch.isneginf(out[0, kimi_vocab.vocab_size:]).all()
    assert int(out[0].argmax()) < kimi_vocab.vocab_size


def test_narrower_logits_are_refused(kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, vocabulary=kimi_vocab)
    with pytest.raises(ValueError, match="resize the embeddings"):
        proc(torch.tensor([[1, 2, 3]]), torch.zeros(1, kimi_vocab.vocab_size - 1))


def test_reuse_needs_reset(kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, vocabulary=kimi_vocab)
    prompt = _encode(kimi_tokenizer, PROMPTS[:1])["input_ids"][0].tolist()
    width = kimi_vocab.vocab_size
    _step(proc, [prompt], width)
    with pytest.raises(ValueError, match="reset"):
        _step(proc, [prompt], width)
    proc.reset()
    out = _step(proc, [prompt], width)
    assert torch.isfinite(out).any() and len(proc.matchers) == 1


def test_leading_pad_ids_are_not_part_of_the_prompt(kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    # A history with two calls: the next counter is 2 whether or not the row is left-padded.
    history = [
        {"role": "user", "content": "Weather in Paris and Tokyo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "b", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Tokyo"}'}},
        ]},
        {"role": "tool", "tool_call_id": "a", "content": "12 C"},
        {"role": "tool", "tool_call_id": "b", "content": "18 C"},
        {"role": "user", "content": "And Beijing?"},
    ]
    prompt = kimi_tokenizer(render_chat(history, TOOLS), add_special_tokens=False)["input_ids"]
    head = f"{k2.SECTION_BEGIN}{k2.CALL_BEGIN}functions.get_weather:"
    forced = kimi_tokenizer(head, add_special_tokens=False)["input_ids"]
    two, zero = (kimi_tokenizer(d, add_special_tokens=False)["input_ids"][0] for d in ("2", "0"))
    width = kimi_vocab.vocab_size
    for padding in (0, 5):
        proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice="required", vocabulary=kimi_vocab)
        ids = [kimi_tokenizer.pad_token_id] * padding + prompt
        for token in forced:
            _step(proc, [ids], width)
            ids = ids + [token]
        allowed = torch.isfinite(_step(proc, [ids], width)[0]).nonzero().flatten().tolist()
        assert proc.prompt_ids == [prompt]
        assert two in allowed and zero not in allowed


def test_latency_stats_are_recorded(kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, vocabulary=kimi_vocab)
    prompt = _encode(kimi_tokenizer, PROMPTS[:1])["input_ids"][0].tolist()
    _step(proc, [prompt], kimi_vocab.vocab_size)
    summary = proc.stats.summary()
    assert summary["steps"] == 1 and summary["p50_us"] > 0
    assert np.isclose(summary["mean_us"], proc.stats.total[0] * 1e6)


def test_tensor_path_matches_the_numpy_path(kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    # float32 CPU scores take the numpy add; other dtypes (and devices) the torch add.
    prompt = _encode(kimi_tokenizer, PROMPTS[:1])["input_ids"][0].tolist()
    turn = kimi_tokenizer(f'{k2.SECTION_BEGIN}{k2.CALL_BEGIN}functions.get_weather:0{k2.ARGUMENT_BEGIN}{{"city"',
                          add_special_tokens=False)["input_ids"]
    finite = {}
    for dtype in (torch.float32, torch.bfloat16):
        proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice="required", vocabulary=kimi_vocab)
        ids, steps = prompt, []
        for token in turn:
            scores = torch.randn(1, kimi_vocab.vocab_size + 5, generator=torch.Generator().manual_seed(len(ids)))
            scores = scores.repeat(2, 1)
            out = proc(torch.tensor([ids, ids]), scores.to(dtype))
            assert out.dtype == dtype and torch.equal(out[0], out[1])
            kept = torch.isfinite(out[0])
            assert torch.equal(out[0][kept], scores.to(dtype)[0][kept])
            steps.append(kept.nonzero().flatten().tolist())
            ids = ids + [token]
        finite[dtype] = steps
    assert finite[torch.float32] == finite[torch.bfloat16]
    assert all(finite[torch.float32])


# Scores on an accelerator: these run where CUDA is (the project's device checks), and are
# skipped elsewhere. The CPU tests above drive the same path with other dtypes.
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _two_row_turns(tokenizer: Any) -> tuple[list[int], list[list[int]]]:
    """A prompt, and two turns of one length: a K2 call (forced markers, a header, JSON
    arguments: sparse and dense masks) and plain text (the free-text mask)."""
    prompt = _encode(tokenizer, PROMPTS[:1])["input_ids"][0].tolist()
    turn = f'{k2.SECTION_BEGIN}{k2.CALL_BEGIN}functions.get_weather:0{k2.ARGUMENT_BEGIN}{{"city": "Tokyo"}}'
    call = tokenizer(turn, add_special_tokens=False)["input_ids"]
    text = tokenizer(" ".join(["It is sunny in Paris today, and warm."] * 8), add_special_tokens=False)["input_ids"]
    return prompt, [call, text[:len(call)]]


def _masked_like_the_host_path(tokenizer: Any, vocab: Vocabulary, dtype: torch.dtype, width: int,
                               masked: Any) -> ToolCallLogitsProcessor:
    """Teacher-force :func:`_two_row_turns` through a host float32 processor and through
    ``masked(processor, ids, scores)`` (another path); at every step the same finite columns,
    the kept scores unchanged. Returns the other path's processor."""
    prompt, turns = _two_row_turns(tokenizer)
    host = ToolCallLogitsProcessor(tokenizer, TOOLS, tool_choice="auto", vocabulary=vocab)
    other = ToolCallLogitsProcessor(tokenizer, TOOLS, tool_choice="auto", vocabulary=vocab)
    generator = torch.Generator().manual_seed(0)
    rows = [prompt, prompt]
    for step in range(len(turns[0]) + 1):
        scores = torch.randn(2, width, generator=generator).to(dtype)
        expected = host(torch.tensor(rows), scores.float())
        out = masked(other, rows, scores)
        assert out.dtype == dtype and out.shape == scores.shape
        out = out.cpu()
        kept = torch.isfinite(expected)
        assert torch.equal(torch.isfinite(out), kept)
        assert torch.equal(out[kept], scores[kept])
        assert kept.any(dim=1).all() and not kept[:, vocab.vocab_size:].any()
        if step < len(turns[0]):
            rows = [row + [turn[step]] for row, turn in zip(rows, turns)]
    assert host.errors == other.errors == [None, None]
    return other


@pytest.mark.parametrize("width_past_ids", [0, 40])
def test_accelerator_path_arithmetic_on_host_tensors(kimi_tokenizer: Any, kimi_vocab: Vocabulary,
                                                     width_past_ids: int) -> None:
    """The accelerator path (bitmask unpacked by torch ops, one ``torch.where``) run on host
    tensors, so that it is checked where no accelerator is: logits as wide as the ids and
    padded past the bitmask's last word."""
    def masked(proc: ToolCallLogitsProcessor, rows: list[list[int]], scores: torch.Tensor) -> torch.Tensor:
        if proc._seen is None:  # the first step: what a processor starting on an accelerator sets up
            proc._start(torch.tensor(rows), scores)
            proc._start_on_device(scores)
            proc._seen = torch.tensor(rows)
        else:
            proc._advance(torch.tensor(rows))
            proc._seen = torch.tensor(rows)
        proc._fill()
        return proc._masked_on_device(scores)

    _masked_like_the_host_path(kimi_tokenizer, kimi_vocab, torch.bfloat16, kimi_vocab.vocab_size + width_past_ids,
                               masked)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_cuda_scores_are_masked_like_host_scores(kimi_tokenizer: Any, kimi_vocab: Vocabulary,
                                                 dtype: torch.dtype) -> None:
    """Two rows (a call, free text) over padded logits on the GPU: the same finite columns as
    the host float32 path, the kept scores unchanged, the result on the GPU."""
    def masked(proc: ToolCallLogitsProcessor, rows: list[list[int]], scores: torch.Tensor) -> torch.Tensor:
        out = proc(torch.tensor(rows, device="cuda"), scores.cuda())
        assert out.device.type == "cuda"
        return out

    proc = _masked_like_the_host_path(kimi_tokenizer, kimi_vocab, dtype, kimi_vocab.vocab_size + 40, masked)
    assert proc._bitmask.flags.c_contiguous and proc.stats.sparse_rows == proc.stats.bias_misses == 0


@needs_cuda
def test_generate_on_cuda(kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    """generate() with the model on the GPU, greedy, two left-padded rows, a call required."""
    model = tiny_llama(kimi_tokenizer, 0).to("cuda")
    proc = ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, tool_choice="required", parallel_tool_calls=False,
                                   vocabulary=kimi_vocab)
    enc = {name: tensor.cuda() for name, tensor in _encode(kimi_tokenizer, PROMPTS).items()}
    with torch.inference_mode():
        out = model.generate(**enc, logits_processor=LogitsProcessorList([proc]), do_sample=False,
                             eos_token_id=proc.stop_token_ids, pad_token_id=kimi_tokenizer.pad_token_id,
                             max_new_tokens=MAX_NEW)
    for row, ids in enumerate(out[:, enc["input_ids"].shape[1]:].tolist()):
        assert len(_check_turn(ids, kimi_vocab)["tool_calls"]) == 1
        _check_matcher_ended(proc, row, kimi_vocab)


# --------------------------------------------------------------------------------------------
# Kimi K3 (XTML): the same processor with format="kimi_k3" on the K3-shaped tokenizer. Prompts
# come from encode_chat (control tokens by id); the generation prompt opens the think block
# (thinking=True) or the response block. A random model never closes a block on its own, so
# the tests boost <|close|> (and <|open|> where they want calls or more arguments).


@pytest.fixture(scope="module")
def k3_tokenizer() -> Any:
    from enforcer.testing.tokenizers import kimi_k3_tokenizer

    return kimi_k3_tokenizer("fast")


@pytest.fixture(scope="module")
def k3_vocab(k3_tokenizer: Any) -> Vocabulary:
    return Vocabulary.from_tokenizer(k3_tokenizer)


@pytest.fixture(scope="module")
def k3_model(k3_tokenizer: Any) -> Any:
    return tiny_llama(k3_tokenizer, 3)


def _k3_prompts(vocab: Vocabulary, prompts: list[str], thinking: bool = True,
                tools: list[dict[str, Any]] = TOOLS) -> list[list[int]]:
    return [encode_chat([{"role": "user", "content": p}], vocab, tools=tools, thinking=thinking) for p in prompts]


def _k3_generate(model: Any, pad: int, proc: ToolCallLogitsProcessor, prompts: list[list[int]],
                 boost: dict[int, float] | None = None, **kwargs: Any) -> list[list[int]]:
    """Left-pads the prompt ids by hand and generates; returns each row's new ids."""
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    processors: list[Any] = [_Boost(list(boost), torch.tensor(list(boost.values())))] if boost else []
    kwargs.setdefault("eos_token_id", proc.stop_token_ids)
    kwargs.setdefault("max_new_tokens", MAX_NEW)
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, logits_processor=LogitsProcessorList(processors + [proc]),
                             pad_token_id=pad, **kwargs)
    return out[:, width:].tolist()


def _k3_tags(ids: list[int], vocab: Vocabulary) -> list[tuple[str, str]]:
    """Each ``<|open|>TEXT<|sep|>`` / ``<|close|>TEXT<|sep|>`` of ``ids`` as ("open"|"close", TEXT)."""
    opener = {vocab.token_id(k3.OPEN): "open", vocab.token_id(k3.CLOSE): "close"}
    sep = vocab.token_id(k3.SEP)
    tags, start = [], None
    for i, t in enumerate(ids):
        if t in opener:
            start = i
        elif t == sep and start is not None:
            tags.append((opener[ids[start]], vocab.decode_bytes(ids[start + 1:i]).decode()))
            start = None
    return tags


def _check_k3_turn(ids: list[int], vocab: Vocabulary, in_reasoning: bool,
                   tools: list[dict[str, Any]] = TOOLS) -> dict[str, Any]:
    """The turn ended with ``<|close|>message<|sep|><|end_of_msg|>``, blocks are balanced and in
    the template's order, and every call passes the vendor-verifier rule with a K3 id."""
    stop = vocab.token_id(k3.END_OF_MSG)
    assert stop in ids, f"the turn did not end within {len(ids)} tokens"
    turn = _until_stop(ids, stop)
    tags = _k3_tags(turn, vocab)
    assert tags[-1] == ("close", "message")
    blocks = [t for t in tags if t[1] in ("think", "response", "tools")]
    # the prompt opened the think block (in_reasoning) or the response block
    expected = ([("close", "think"), ("open", "response")] if in_reasoning else []) + [("close", "response")]
    assert blocks[:len(expected)] == expected
    assert blocks[len(expected):] in ([], [("open", "tools"), ("close", "tools")])
    parsed = parse_tool_calls(turn, vocab, format="kimi_k3", in_reasoning=in_reasoning)
    declared = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    calls = parsed["tool_calls"] or []
    for n, call in enumerate(calls, start=1):
        name = call["function"]["name"]
        assert name in declared
        jsonschema.validate(json.loads(call["function"]["arguments"]), declared[name])
        assert call["id"] == f"functions.{name}:{n}"
    assert bool(calls) == (("open", "tools") in blocks)
    return parsed


def _check_k3_matcher_ended(proc: ToolCallLogitsProcessor, row: int, vocab: Vocabulary) -> None:
    matcher = proc.matchers[row]
    assert proc.errors[row] is None
    if not matcher.is_finished:
        assert matcher.accept_token(vocab.token_id(k3.END_OF_MSG)) and matcher.is_finished


@pytest.mark.parametrize("parallel", [False, True])
def test_k3_greedy_required_batch_with_left_padding(k3_model: Any, k3_tokenizer: Any, k3_vocab: Vocabulary,
                                                    parallel: bool) -> None:
    proc = ToolCallLogitsProcessor(k3_tokenizer, TOOLS, tool_choice="required", parallel_tool_calls=parallel,
                                   format="kimi_k3", vocabulary=k3_vocab)
    assert proc.stop_token_ids == [k3_vocab.token_id(k3.END_OF_MSG)]
    prompts = _k3_prompts(k3_vocab, PROMPTS)
    assert len(prompts[0]) < len(prompts[1]), "the first prompt must be left-padded"
    rows = _k3_generate(k3_model, k3_tokenizer.pad_token_id, proc, prompts,
                        boost={k3_vocab.token_id(k3.CLOSE): 100.0}, do_sample=False)
    assert proc.prompt_ids == prompts
    for row, ids in enumerate(rows):
        parsed = _check_k3_turn(ids, k3_vocab, in_reasoning=True)
        assert parsed["tool_calls"], "required: the turn must hold a call"
        assert len(parsed["tool_calls"]) == 1  # <|close|> is pushed: the section closes after one call
        _check_k3_matcher_ended(proc, row, k3_vocab)


def test_k3_sampling_parallel_calls_without_thinking(k3_model: Any, k3_tokenizer: Any, k3_vocab: Vocabulary) -> None:
    # <|open|> and <|close|> pushed alike: after each call the sampler picks another call or the end.
    proc = ToolCallLogitsProcessor(k3_tokenizer, TOOLS, tool_choice="required", format="kimi_k3", vocabulary=k3_vocab)
    boost = {k3_vocab.token_id(k3.OPEN): 100.0, k3_vocab.token_id(k3.CLOSE): 100.0}
    prompts = _k3_prompts(k3_vocab, PROMPTS, thinking=False)
    counts = []
    for seed in range(3):
        torch.manual_seed(seed)
        proc.reset()
        rows = _k3_generate(k3_model, k3_tokenizer.pad_token_id, proc, prompts, boost=boost, do_sample=True,
                            temperature=1.0, top_k=0, max_new_tokens=4 * MAX_NEW)
        counts += [len(_check_k3_turn(ids, k3_vocab, in_reasoning=False)["tool_calls"]) for ids in rows]
    assert min(counts) >= 1 and max(counts) >= 2, counts


def test_k3_auto_calls_only_when_the_model_wants_to(k3_model: Any, k3_tokenizer: Any, k3_vocab: Vocabulary) -> None:
    proc = ToolCallLogitsProcessor(k3_tokenizer, TOOLS, tool_choice="auto", parallel_tool_calls=False,
                                   format="kimi_k3", vocabulary=k3_vocab)
    open_id, close_id = k3_vocab.token_id(k3.OPEN), k3_vocab.token_id(k3.CLOSE)
    prompts = _k3_prompts(k3_vocab, PROMPTS)
    wants = _k3_generate(k3_model, k3_tokenizer.pad_token_id, proc, prompts, boost={open_id: 200.0, close_id: 100.0},
                         do_sample=False)
    for ids in wants:
        assert len(_check_k3_turn(ids, k3_vocab, in_reasoning=True)["tool_calls"]) == 1
    proc.reset()
    ends = _k3_generate(k3_model, k3_tokenizer.pad_token_id, proc, prompts, boost={close_id: 100.0}, do_sample=False)
    for ids in ends:
        assert _check_k3_turn(ids, k3_vocab, in_reasoning=True)["tool_calls"] == []


def test_k3_none_never_opens_tools_even_when_wanted(k3_model: Any, k3_tokenizer: Any, k3_vocab: Vocabulary) -> None:
    proc = ToolCallLogitsProcessor(k3_tokenizer, TOOLS, tool_choice="none", format="kimi_k3", vocabulary=k3_vocab)
    boost = {k3_vocab.token_id(k3.OPEN): 200.0, k3_vocab.token_id(k3.CLOSE): 100.0}
    rows = _k3_generate(k3_model, k3_tokenizer.pad_token_id, proc, _k3_prompts(k3_vocab, PROMPTS), boost=boost,
                        do_sample=False)
    for row, ids in enumerate(rows):
        assert _check_k3_turn(ids, k3_vocab, in_reasoning=True)["tool_calls"] == []
        _check_k3_matcher_ended(proc, row, k3_vocab)


def test_k3_named_tool_choice_and_json_arguments(k3_model: Any, k3_tokenizer: Any, k3_vocab: Vocabulary) -> None:
    choice = {"type": "function", "function": {"name": "alarm.set-v2"}}
    boost = {k3_vocab.token_id(k3.CLOSE): 100.0}
    for fmt in ("kimi_k3", "kimi_k3_json"):
        proc = ToolCallLogitsProcessor(k3_tokenizer, TOOLS, tool_choice=choice, format=fmt, vocabulary=k3_vocab)
        torch.manual_seed(1)
        rows = _k3_generate(k3_model, k3_tokenizer.pad_token_id, proc, _k3_prompts(k3_vocab, PROMPTS), boost=boost,
                            do_sample=True, top_k=0)
        for ids in rows:
            calls = _check_k3_turn(ids, k3_vocab, in_reasoning=True)["tool_calls"]
            assert [c["function"]["name"] for c in calls] == ["alarm.set-v2"]
            json_blocks = [t for t in _k3_tags(ids, k3_vocab) if t[1].startswith(k3.JSON_TAG)]
            assert bool(json_blocks) == (fmt == "kimi_k3_json")


class _K3Turn:
    """K3 ids built by hand: control tokens by id, tag text piece by piece, text as text."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self.ids: list[int] = []

    def tag(self, control: str, word: str, attributes: list[tuple[str, str]] = ()) -> "_K3Turn":
        self.ids.append(self.vocab.token_id(control))
        for piece in k3.tag_pieces(word, attributes):
            self.ids += self.vocab.encode_text(piece)
        self.ids.append(self.vocab.token_id(k3.SEP))
        return self

    def text(self, value: str) -> "_K3Turn":
        self.ids += self.vocab.encode_text(value)
        return self

    def argument(self, key: str, json_type: str, value: str) -> "_K3Turn":
        return self.tag(k3.OPEN, k3.ARGUMENT, [("key", key), ("type", json_type)]).text(value).tag(k3.CLOSE, k3.ARGUMENT)


def test_k3_mask_matches_the_matcher_at_every_step(k3_tokenizer: Any, k3_vocab: Vocabulary) -> None:
    # Teacher-force a two-call K3 turn (the prompt opened the think block) through __call__.
    proc = ToolCallLogitsProcessor(k3_tokenizer, TOOLS, tool_choice="auto", format="kimi_k3", vocabulary=k3_vocab)
    prompt = _k3_prompts(k3_vocab, PROMPTS[:1])[0]
    t = _K3Turn(k3_vocab).text("plan").tag(k3.CLOSE, k3.THINK).tag(k3.OPEN, k3.RESPONSE).text("Sure.")
    t.tag(k3.CLOSE, k3.RESPONSE).tag(k3.OPEN, k3.TOOLS)
    t.tag(k3.OPEN, k3.CALL, [("tool", "get_weather"), ("index", "1")])
    t.argument("city", "string", "北京").argument("unit", "string", "celsius").tag(k3.CLOSE, k3.CALL)
    t.tag(k3.OPEN, k3.CALL, [("tool", "alarm.set-v2"), ("index", "2")])
    t.argument("hour", "number", "7").argument("loud", "boolean", "true").tag(k3.CLOSE, k3.CALL)
    t.tag(k3.CLOSE, k3.TOOLS).tag(k3.CLOSE, k3.MESSAGE)
    target = t.ids + [k3_vocab.token_id(k3.END_OF_MSG)]
    reference = proc.compiled.matcher(prompt_ids=prompt)
    width = k3_vocab.vocab_size
    ids = prompt
    for step, token in enumerate(target):
        out = _step(proc, [ids], width)
        allowed = torch.isfinite(out[0]).nonzero().flatten().tolist()
        assert allowed == sorted(reference.allowed_token_ids()), f"step {step}"
        if step == 0:  # inside the think body the prompt opened: text or <|close|>, never <|open|>
            assert k3_vocab.token_id(k3.CLOSE) in allowed and k3_vocab.token_id(k3.OPEN) not in allowed
        assert token in allowed
        assert reference.accept_token(token)
        ids = ids + [token]
    _step(proc, [ids], width)
    assert proc.matchers[0].is_finished and reference.is_finished
    parsed = parse_tool_calls(target, k3_vocab, format="kimi_k3", in_reasoning=True)
    assert parsed["reasoning_content"] == "plan" and parsed["content"] == "Sure."
    assert parsed["tool_calls"] == proc.matchers[0].calls
    assert [c["function"]["arguments"] for c in parsed["tool_calls"]] == [
        '{"city": "北京", "unit": "celsius"}', '{"hour": 7, "loud": true}']


def test_k3_prompt_without_thinking_starts_in_the_response(k3_tokenizer: Any, k3_vocab: Vocabulary) -> None:
    proc = ToolCallLogitsProcessor(k3_tokenizer, TOOLS, tool_choice="required", format="kimi_k3", vocabulary=k3_vocab)
    prompt = _k3_prompts(k3_vocab, PROMPTS[:1], thinking=False)[0]
    close = k3_vocab.token_id(k3.CLOSE)
    allowed = torch.isfinite(_step(proc, [prompt], k3_vocab.vocab_size)[0]).nonzero().flatten().tolist()
    assert close in allowed and k3_vocab.token_id(k3.OPEN) not in allowed
    # the response block is open: <|close|> must name "response", not "think"
    after = _step(proc, [prompt + [close]], k3_vocab.vocab_size)
    response = k3_vocab.encode_text(k3.RESPONSE)[0]
    assert torch.isfinite(after[0]).nonzero().flatten().tolist() == [response]


def test_a_format_the_tokenizer_lacks_is_refused(k3_tokenizer: Any, k3_vocab: Vocabulary, kimi_tokenizer: Any,
                                                 kimi_vocab: Vocabulary) -> None:
    with pytest.raises(TokenizerError, match="kimi_k2"):
        ToolCallLogitsProcessor(k3_tokenizer, TOOLS, vocabulary=k3_vocab)
    with pytest.raises(TokenizerError, match=r"<\|end_of_msg\|>"):
        ToolCallLogitsProcessor(kimi_tokenizer, TOOLS, format="kimi_k3", vocabulary=kimi_vocab)


def test_a_tool_past_its_automaton_budget_ends_the_row_with_the_error(kimi_tokenizer: Any,
                                                                      kimi_vocab: Vocabulary) -> None:
    # A small decode-time budget (max_states) reached inside the arguments: the processor never
    # raises, records the matcher's error for the row and holds it to the stop token.
    tools = [{"type": "function", "function": {"name": "note", "parameters": {
        "type": "object", "properties": {"text": {"type": "string", "maxLength": 400}}, "required": ["text"]}}}]
    proc = ToolCallLogitsProcessor(kimi_tokenizer, tools, tool_choice="required", vocabulary=kimi_vocab,
                                   max_states=1000)
    prompt = _encode(kimi_tokenizer, PROMPTS[:1], tools)["input_ids"][0].tolist()
    turn = (f"{k2.SECTION_BEGIN}{k2.CALL_BEGIN}functions.note:0{k2.ARGUMENT_BEGIN}"
            + json.dumps({"text": "lorem ipsum dolor sit amet " * 10}))
    width = kimi_vocab.vocab_size
    ids = prompt
    for token in kimi_tokenizer(turn, add_special_tokens=False)["input_ids"]:
        out = _step(proc, [ids], width)
        if proc.errors[0] is not None:
            break
        assert token in torch.isfinite(out[0]).nonzero().flatten().tolist()
        ids = ids + [token]
    else:
        pytest.fail("the budget was never reached")
    assert "max_states" in proc.errors[0]
    assert torch.isfinite(out[0]).nonzero().flatten().tolist() == proc.stop_token_ids
