"""Unit tests of the vLLM adapter without an engine: settings, validation, the V1 and V2 faces
of the processor on hand-made batches, mask application, the tool parser and the chat template.

Needs ``vllm`` importable (skipped otherwise), except the chat-template test, which needs only
``transformers``. The batches are built by hand in the shapes vLLM passes (``BatchUpdate``
tuples, live output lists, V2 request-state buffers): no engine can run here without a model,
and the real-engine tests are in ``test_vllm_engine.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from enforcer.declarations import render_chat
from enforcer.demo import load_tools, vendor_verdict
from enforcer.tools import compile_tools

try:
    import vllm  # noqa: F401

    HAVE_VLLM = True
except ImportError:
    HAVE_VLLM = False

needs_vllm = pytest.mark.skipif(not HAVE_VLLM, reason="vllm is not installed")
REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "integrations" / "vllm" / "kimi_k2_tools.jinja"
WEATHER = load_tools("weather")
NINF = float("-inf")


# --------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory, kimi_tokenizer: Any) -> str:
    """The Kimi-shaped tokenizer saved as a model folder's tokenizer (read back the vLLM way)."""
    folder = tmp_path_factory.mktemp("kimi_tokenizer")
    kimi_tokenizer.save_pretrained(folder)
    return str(folder)


def fake_vllm_config(tokenizer_dir: str, width: int) -> Any:
    """What the processor reads of a ``VllmConfig``: the tokenizer and the logits width. A
    stand-in, because a real ``VllmConfig`` needs a model and a device."""
    model_config = SimpleNamespace(tokenizer=tokenizer_dir, tokenizer_revision=None, tokenizer_mode="auto",
                                   runner_type="generate", trust_remote_code=False, skip_tokenizer_init=False,
                                   hf_config=None, get_vocab_size=lambda: width)
    return SimpleNamespace(model_config=model_config)


def make_processor(tokenizer_dir: str, width: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    from enforcer.integrations.vllm import ToolCallLogitsProcessor

    monkeypatch.delenv("ENFORCER_VLLM_DISABLE", raising=False)
    proc = ToolCallLogitsProcessor(fake_vllm_config(tokenizer_dir, width), torch.device("cpu"), False)
    assert proc.core is not None
    return proc


@pytest.fixture()
def processor(tokenizer_dir: str, kimi_tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    return make_processor(tokenizer_dir, len(kimi_tokenizer), monkeypatch)


def params(settings: Any = None, **kwargs: Any) -> Any:
    from vllm import SamplingParams

    extra = {"enforcer": settings} if settings is not None else None
    return SamplingParams(extra_args=extra, **kwargs)


def prompt_ids(tokenizer: Any, tools: Any = None, messages: Any = None) -> list[int]:
    messages = messages or [{"role": "user", "content": "What is the weather in Paris?"}]
    return tokenizer.encode(render_chat(messages, tools), add_special_tokens=False)


def batch_update(added: Any = (), removed: Any = (), moved: Any = (), size: int = 0) -> Any:
    from vllm.v1.sample.logits_processor import BatchUpdate

    return BatchUpdate(batch_size=size, removed=list(removed), added=list(added), moved=list(moved))


def finite_ids(row: torch.Tensor) -> list[int]:
    return torch.isfinite(row).nonzero().flatten().tolist()


def shadow(vocab: Any, tools: Any, prompt: list[int], tokens: list[int] = (), **options: Any) -> Any:
    """An independent matcher with the same settings, fed the same tokens: the expected mask."""
    matcher = compile_tools(tools, vocab, **options).matcher(prompt_ids=prompt)
    assert matcher.accept_tokens(list(tokens))
    return matcher


# --------------------------------------------------------------------------------------------
# Settings and validation


@needs_vllm
def test_read_settings_accepts_mapping_and_json_text() -> None:
    from enforcer.integrations.vllm import RequestSettings, read_settings

    assert read_settings(None) is None
    assert read_settings({"other": 1}) is None
    text = json.dumps({"tools": WEATHER, "tool_choice": "required", "parallel_tool_calls": False,
                       "first_call_index": 3})
    settings = read_settings({"enforcer": text})
    assert settings == RequestSettings(tools=WEATHER, tool_choice="required", parallel_tool_calls=False,
                                       first_call_index=3, enabled=True)
    assert read_settings({"enforcer": {"enabled": False}}).enabled is False


@needs_vllm
@pytest.mark.parametrize("raw, fragment", [
    ("{not json", "not valid JSON"),
    ([1, 2], "must be an object"),
    ({"tool": []}, "unknown field(s) ['tool']"),
    ({"tools": {"a": 1}}, "tools must be a list"),
    ({"parallel_tool_calls": "yes"}, "parallel_tool_calls must be true or false"),
    ({"first_call_index": -1}, "first_call_index must be an integer >= 0"),
    ({"first_call_index": True}, "first_call_index must be an integer >= 0"),
    ({"tool_choice": 3}, "tool_choice must be a string or an object"),
])
def test_read_settings_names_the_bad_field(raw: Any, fragment: str) -> None:
    from enforcer.integrations.vllm import read_settings

    with pytest.raises(ValueError) as info:
        read_settings({"enforcer": raw})
    assert fragment in str(info.value)


@needs_vllm
@pytest.mark.parametrize("settings, fragment", [
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "array", "items": {"type": "object"}, "uniqueItems": True}}}}}]},
     "keyword 'uniqueItems'"),
    ({"tools": WEATHER + WEATHER[:1]}, "duplicate function name 'get_weather'"),
    ({"tools": WEATHER, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "'nope'"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}]},
     "must be a JSON object"),
    ({"tool_choice": "sometimes"}, "sometimes"),
])
def test_validate_params_rejects_bad_declarations_with_the_reason(settings: Any, fragment: str) -> None:
    from enforcer.integrations.vllm import ToolCallLogitsProcessor

    with pytest.raises(ValueError) as info:
        ToolCallLogitsProcessor.validate_params(params(settings))
    assert fragment in str(info.value)


@needs_vllm
def test_validate_params_accepts_good_settings_and_requests_without_any(monkeypatch: pytest.MonkeyPatch) -> None:
    from enforcer.integrations.vllm import ToolCallLogitsProcessor

    monkeypatch.delenv("ENFORCER_VLLM_DISABLE", raising=False)
    ToolCallLogitsProcessor.validate_params(params())
    ToolCallLogitsProcessor.validate_params(params({"tools": load_tools("travel"), "tool_choice": "required"}))
    ToolCallLogitsProcessor.validate_params(params(json.dumps({"tool_choice": "none"})))
    monkeypatch.setenv("ENFORCER_VLLM_DISABLE", "1")  # the kill switch also stops validation
    ToolCallLogitsProcessor.validate_params(params({"tools": "bad"}))


# --------------------------------------------------------------------------------------------
# V1: update_state + apply


@needs_vllm
def test_v1_rows_follow_added_removed_and_moved_requests(processor: Any, kimi_tokenizer: Any) -> None:
    from vllm.v1.sample.logits_processor import MoveDirectionality

    vocab = processor.core.vocabulary
    prompt = prompt_ids(kimi_tokenizer)
    section = vocab.token_id("<|tool_calls_section_begin|>")
    outs: list[list[int]] = [[], [], []]
    processor.update_state(batch_update(added=[
        (0, params({"tools": WEATHER, "tool_choice": "required"}), prompt, outs[0]),
        (1, params(), prompt, outs[1]),  # no settings, no declaration: untouched
        (2, params({"tools": WEATHER, "tool_choice": "none"}), prompt, outs[2]),
    ], size=3))
    logits = torch.randn(3, vocab.vocab_size)
    before = logits.clone()
    out = processor.apply(logits)
    required = shadow(vocab, WEATHER, prompt, tool_choice="required")
    assert finite_ids(out[0]) == required.allowed_token_ids()
    assert torch.equal(out[1], before[1])
    assert section not in finite_ids(out[2]) and len(finite_ids(out[2])) > 150_000

    # swap 0 <-> 2, then move 2 -> 1 (the request at 1 leaves), then remove 0
    processor.update_state(batch_update(moved=[(0, 2, MoveDirectionality.SWAP)], size=3))
    out = processor.apply(torch.randn(3, vocab.vocab_size))
    assert finite_ids(out[2]) == required.allowed_token_ids()
    assert section not in finite_ids(out[0])
    processor.update_state(batch_update(removed=[1], moved=[(2, 1, MoveDirectionality.UNIDIRECTIONAL)], size=2))
    out = processor.apply(torch.randn(2, vocab.vocab_size))
    assert finite_ids(out[1]) == required.allowed_token_ids()
    processor.update_state(batch_update(removed=[0], size=1))
    assert sorted(processor.core.rows) == [1]


@needs_vllm
def test_v1_follows_the_live_output_list_token_by_token(processor: Any, kimi_tokenizer: Any) -> None:
    vocab = processor.core.vocabulary
    prompt = prompt_ids(kimi_tokenizer)
    out: list[int] = []
    processor.update_state(batch_update(added=[(0, params({"tools": WEATHER, "tool_choice": "required"}), prompt,
                                                 out)], size=1))
    call = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
            '{"city": "Paris", "unit": "celsius"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>')
    ids = kimi_tokenizer.encode(call, add_special_tokens=False)
    for step, token in enumerate(ids):
        row = processor.apply(torch.randn(1, vocab.vocab_size))[0]
        expected = shadow(vocab, WEATHER, prompt, ids[:step], tool_choice="required")
        assert finite_ids(row) == expected.allowed_token_ids(), f"step {step}"
        assert token in finite_ids(row)
        out.append(token)  # the engine appends the sampled token to the live list
    processor.apply(torch.randn(1, vocab.vocab_size))
    assert processor.core.rows[0].matcher.calls[0]["function"]["arguments"] == '{"city": "Paris", "unit": "celsius"}'


@needs_vllm
def test_v1_refused_token_holds_the_row_to_the_stop_token(processor: Any, kimi_tokenizer: Any) -> None:
    vocab = processor.core.vocabulary
    out: list[int] = []
    processor.update_state(batch_update(added=[(0, params({"tools": WEATHER, "tool_choice": "required"}),
                                                 prompt_ids(kimi_tokenizer), out)], size=1))
    processor.apply(torch.randn(1, vocab.vocab_size))
    out.append(kimi_tokenizer.encode("hello", add_special_tokens=False)[0])  # not allowed under "required"
    row = processor.apply(torch.randn(1, vocab.vocab_size))[0]
    assert finite_ids(row) == [vocab.token_id("<|im_end|>")]


@needs_vllm
def test_v1_placeholder_tokens_release_the_row_without_raising(processor: Any, kimi_tokenizer: Any) -> None:
    vocab = processor.core.vocabulary
    out: list[int] = []
    processor.update_state(batch_update(added=[(0, params({"tools": WEATHER, "tool_choice": "required"}),
                                                 prompt_ids(kimi_tokenizer), out)], size=1))
    out.append(-1)  # what async scheduling leaves when output ids are not requested
    logits = torch.randn(1, vocab.vocab_size)
    before = logits.clone()
    assert torch.equal(processor.apply(logits), before)


@needs_vllm
def test_v1_tools_read_from_the_prompt_and_the_counter_from_its_history(processor: Any, kimi_tokenizer: Any,
                                                                        weather_history: list) -> None:
    vocab = processor.core.vocabulary
    history = weather_history
    prompt = prompt_ids(kimi_tokenizer, WEATHER, history)
    bare = prompt_ids(kimi_tokenizer, None)
    out: list[int] = []
    processor.update_state(batch_update(added=[
        (0, params(), prompt, out),
        (1, params(), bare, []),
        (2, params({"enabled": False}), prompt, []),
        (3, params(), None, []),  # prompt embeddings: no ids to read
    ], size=4))
    assert sorted(processor.core.rows) == [0]
    header = kimi_tokenizer.encode("<|tool_calls_section_begin|><|tool_call_begin|>", add_special_tokens=False)
    out.extend(header)
    row = processor.apply(torch.randn(4, vocab.vocab_size))[0]
    allowed = finite_ids(row)
    expected = shadow(vocab, WEATHER, prompt, header)
    assert allowed == expected.allowed_token_ids()
    # the header must be functions.NAME:2 (two calls in the history): walk it greedily
    text = kimi_tokenizer.encode("functions.get_time:2", add_special_tokens=False)
    assert expected.accept_tokens(text)
    wrong = shadow(vocab, WEATHER, prompt, header)
    assert not wrong.accept_tokens(kimi_tokenizer.encode("functions.get_time:0", add_special_tokens=False))


@needs_vllm
def test_apply_never_raises_and_leaves_logits_it_cannot_mask(processor: Any, kimi_tokenizer: Any) -> None:
    vocab = processor.core.vocabulary
    processor.update_state(batch_update(added=[(0, params({"tools": WEATHER}), prompt_ids(kimi_tokenizer), [])],
                                        size=1))
    wide = torch.randn(1, vocab.vocab_size + 64)  # wider than the vocabulary: refused, not raised
    before = wide.clone()
    assert torch.equal(processor.apply(wide), before)


@needs_vllm
def test_sparse_and_dense_application_agree_with_a_plain_mask(processor: Any, kimi_tokenizer: Any) -> None:
    """The CPU path (sparse id lists, rows grouped by mask) and the accelerator path (bit unpack
    and masked fill, forced here on CPU tensors) give the same logits as a naive per-id mask."""
    core = processor.core
    vocab = core.vocabulary
    prompt = prompt_ids(kimi_tokenizer)
    steps = kimi_tokenizer.encode('<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0'
                                  '<|tool_call_argument_begin|>{"city": "Pa', add_special_tokens=False)
    outs = [steps[:k] for k in (0, 1, 3, len(steps) - 3, len(steps), len(steps))]  # shared and distinct masks
    processor.update_state(batch_update(added=[(i, params({"tools": WEATHER, "tool_choice": "auto"}), prompt, o)
                                               for i, o in enumerate(outs)], size=len(outs)))
    logits = torch.randn(len(outs), vocab.vocab_size)
    sparse = processor.apply(logits.clone())
    expected = logits.clone()
    for i, o in enumerate(outs):
        keep = torch.zeros(vocab.vocab_size, dtype=torch.bool)
        keep[shadow(vocab, WEATHER, prompt, o).allowed_token_ids()] = True
        expected[i][~keep] = NINF
    assert torch.equal(sparse, expected)
    from vllm.v1.sample.logits_processor import MoveDirectionality

    core.dense = True  # the accelerator path, on CPU tensors, with a released row first in the batch
    n = len(outs)
    processor.update_state(batch_update(added=[(n, params({"tools": WEATHER}), prompt, [-1])],
                                        moved=[(0, n, MoveDirectionality.SWAP)], size=n + 1))
    wider = torch.cat([logits, torch.randn(1, vocab.vocab_size)])
    dense = processor.apply(wider.clone())
    assert torch.equal(dense[0], wider[0])  # the released row is untouched
    assert torch.equal(dense[1:n], expected[1:n])
    first = wider[n].clone()
    first[~torch.isfinite(expected[0])] = NINF
    assert torch.equal(dense[n], first)


@needs_vllm
def test_second_instance_and_kill_switch_stay_inert(tokenizer_dir: str, kimi_tokenizer: Any,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from enforcer.integrations.vllm import ToolCallLogitsProcessor

    monkeypatch.delenv("ENFORCER_VLLM_DISABLE", raising=False)
    config = fake_vllm_config(tokenizer_dir, len(kimi_tokenizer))
    first = ToolCallLogitsProcessor(config, torch.device("cpu"), False)
    second = ToolCallLogitsProcessor(config, torch.device("cpu"), False)
    assert first.core is not None and second.core is None
    monkeypatch.setenv("ENFORCER_VLLM_DISABLE", "1")
    off = ToolCallLogitsProcessor(fake_vllm_config(tokenizer_dir, len(kimi_tokenizer)), torch.device("cpu"), False)
    assert off.core is None
    off.update_state(batch_update(added=[(0, params({"tools": WEATHER, "tool_choice": "required"}), [1, 2], [])],
                                  size=1))
    logits = torch.randn(1, len(kimi_tokenizer))
    assert torch.equal(off.apply(logits.clone()), logits)
    assert not first.is_argmax_invariant()


@needs_vllm
def test_a_tokenizer_without_k2_markers_leaves_the_processor_inert(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Installing the package must not break engines of other models."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from enforcer.integrations.vllm import ToolCallLogitsProcessor

    monkeypatch.delenv("ENFORCER_VLLM_DISABLE", raising=False)
    raw = Tokenizer(models.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]").save_pretrained(tmp_path)
    proc = ToolCallLogitsProcessor(fake_vllm_config(str(tmp_path), 3), torch.device("cpu"), False)
    assert proc.core is None


# --------------------------------------------------------------------------------------------
# Model Runner V2 face


class _Staged:
    """Stands in for V2's device buffers (``.gpu`` tensors, ``.np`` host arrays)."""

    def __init__(self, rows: int, width: int) -> None:
        self.gpu = torch.zeros(rows, width, dtype=torch.int32)


@needs_vllm
def test_v2_add_request_staged_prompt_and_fed_tokens(tokenizer_dir: str, kimi_tokenizer: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from enforcer.integrations.vllm import ToolCallLogitsProcessor

    monkeypatch.delenv("ENFORCER_VLLM_DISABLE", raising=False)
    width = len(kimi_tokenizer)
    slots, max_len = 4, 512
    states = SimpleNamespace(all_token_ids=_Staged(slots, max_len), prompt_len=SimpleNamespace(np=np.zeros(slots, np.int32)),
                             prefill_len=SimpleNamespace(np=np.zeros(slots, np.int32)),
                             total_len=_Staged(slots, 1), device=torch.device("cpu"), max_num_reqs=slots,
                             vocab_size=width)
    proc = ToolCallLogitsProcessor(fake_vllm_config(tokenizer_dir, width), states)
    vocab = proc.core.vocabulary
    prompt = prompt_ids(kimi_tokenizer)
    for slot in (1, 3):
        states.all_token_ids.gpu[slot, : len(prompt)] = torch.tensor(prompt)
        states.prompt_len.np[slot] = states.prefill_len.np[slot] = len(prompt)
    assert proc.add_request(1, params({"tools": WEATHER, "tool_choice": "required"}))
    assert not proc.add_request(3, params({"enabled": False}))
    proc.apply_staged_writes()
    ids = kimi_tokenizer.encode('<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0',
                                add_special_tokens=False)
    fed = prompt[-1]
    for step in range(len(ids) + 1):
        # batch order: slot 3 (declined) first, then slot 1; rows are not slots
        ctx = SimpleNamespace(idx_mapping_np=np.array([3, 1]), input_ids=torch.tensor([7, fed]),
                              pos=torch.tensor([len(prompt) - 1, len(prompt) - 1 + step]))
        logits = torch.randn(2, width)
        before = logits.clone()
        out = proc.apply(logits, ctx)
        assert torch.equal(out[0], before[0])
        assert finite_ids(out[1]) == shadow(vocab, WEATHER, prompt, ids[:step], tool_choice="required").allowed_token_ids()
        if step < len(ids):
            fed = ids[step]


# --------------------------------------------------------------------------------------------
# Model Runner V2 with speculative decoding


class _SpecRequest:
    """One request of the simulated MRV2 engine below: its slot, prompt, the tokens it will
    commit (``script``) and what it has committed."""

    def __init__(self, slot: int, prompt: list[int], script: list[int], settings: Any, tools: Any) -> None:
        self.slot, self.prompt, self.script, self.settings, self.tools = slot, prompt, script, settings, tools
        self.committed: list[int] = []
        self.prefilled = 0  # prompt tokens computed so far

    @property
    def done(self) -> bool:
        return len(self.committed) == len(self.script)


class _SpecEngine:
    """The MRV2 side of a speculative step, built the way vLLM 0.32 builds it.

    vLLM's own records are used: ``LogitsContext`` and ``LogitsProcRequestState``
    (``vllm/v1/worker/gpu/sample/logits_processor/interface.py``) and the chunking of
    ``RejectionSampler._verify_in_chunks`` (``_iter_request_chunks``). What needs Triton kernels
    or pinned memory (``RequestState``'s buffers, ``expand_idx_mapping``,
    ``combine_sampled_and_draft_tokens``, ``gather_draft_sampled``, ``post_update``) cannot run
    on this CPU-only build, so their effect is reproduced here from their source: a request
    owns ``1 + drafts`` consecutive rows; row 0 is fed its newest committed token (in prefill,
    a prompt token) at position ``total_len - 1``, row ``j`` draft ``j - 1`` at the next
    positions; draft rows of a request whose row 0 is still in its prompt are fed -1
    (placeholders); a step commits the accepted drafts plus one sampled token into
    ``all_token_ids`` / ``total_len``."""

    def __init__(self, processor: Any, states: Any, requests: list[_SpecRequest], width: int, seed: int) -> None:
        self.processor, self.states, self.requests, self.width = processor, states, requests, width
        self.rng = np.random.default_rng(seed)
        self.rows_checked = self.drafts_accepted = self.refused_drafts = self.placeholders = 0

    def step(self, check: Any, max_drafts: int = 4, skip_apply: bool = False) -> None:
        """One engine step: schedule some requests (random order, random draft counts), apply
        the processor in random chunks, check every row with ``check``, commit 0..k+1 tokens."""
        from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsContext
        from vllm.v1.worker.gpu.spec_decode.rejection_sampler import _iter_request_chunks

        rng = self.rng
        live = [r for r in self.requests if not r.done]
        batch = [r for r in live if rng.random() < 0.8] or live[:1]
        rng.shuffle(batch)
        self.processor.apply_staged_writes()
        slots, rows_of, fed, pos, local = [], [], [], [], []
        plans = []
        for request in batch:
            prompt_len = len(request.prompt)
            if request.prefilled < prompt_len:  # a prefill chunk: the last one may carry placeholder drafts
                chunk = prompt_len - request.prefilled if rng.random() < 0.6 else max(1, (prompt_len - request.prefilled) // 2)
                request.prefilled += chunk
                p0 = request.prefilled - 1
                token0 = request.prompt[p0]
                drafts = [-1] * int(rng.integers(0, max_drafts + 1)) if request.prefilled == prompt_len else []
            else:
                p0 = prompt_len + len(request.committed) - 1
                token0 = request.committed[-1]
                ahead = request.script[len(request.committed):]
                drafts = list(ahead[: int(rng.integers(0, max_drafts + 1))])
                for j in range(len(drafts)):  # the proposer is wrong now and then
                    if rng.random() < 0.25:
                        drafts[j] = int(rng.integers(0, self.width))
            first = len(fed)
            slots.append(request.slot)
            for j, token in enumerate([token0, *drafts]):
                rows_of.append(request.slot)
                fed.append(token)
                pos.append(p0 + j)
                local.append(j)
            plans.append((request, p0, drafts, first))
        cu = np.cumsum([0] + [1 + len(d) for _, _, d, _ in plans])
        logits = torch.randn(len(fed), self.width)
        before = logits.clone()
        if not skip_apply:
            for start, end in _iter_request_chunks(cu, int(rng.integers(1, len(fed) + 1))):
                lo, hi = int(cu[start]), int(cu[end])
                ctx = LogitsContext(
                    expanded_idx_mapping=torch.tensor(rows_of[lo:hi], dtype=torch.int64),
                    idx_mapping=torch.tensor(slots[start:end], dtype=torch.int64),
                    idx_mapping_np=np.array(slots[start:end], dtype=np.int64),
                    expanded_local_pos=torch.tensor(local[lo:hi], dtype=torch.int32),
                    input_ids=torch.tensor(fed[lo:hi], dtype=torch.int64),
                    pos=torch.tensor(pos[lo:hi], dtype=torch.int64),
                    seq_lens_upper_bound_np=np.array([p + 1 for p in pos[lo:hi]], dtype=np.int32))
                out = self.processor.apply(logits[lo:hi], ctx)
                assert out.data_ptr() == logits[lo:hi].data_ptr()  # masked in place
        for request, p0, drafts, first in plans:
            allowed_rows = check(request, drafts, logits[first: first + 1 + len(drafts)],
                                 before[first: first + 1 + len(drafts)], skip_apply)
            self.rows_checked += 1 + len(drafts)
            if p0 + 1 < len(request.prompt):
                continue  # not the last prefill chunk: nothing is sampled
            # rejection sampling: accept a prefix of the drafts that equals the script, then one
            # sampled token (the script's next), which the masks must allow
            ahead = request.script[len(request.committed):]
            accepted = 0
            while accepted < len(drafts) and drafts[accepted] == ahead[accepted] and rng.random() < 0.8:
                accepted += 1
            new = list(drafts[:accepted]) + [ahead[accepted]] if accepted < len(ahead) else list(drafts[:accepted])
            for j, token in enumerate(new):
                assert allowed_rows[j] is None or token in allowed_rows[j], (request.slot, j, token)
            self.drafts_accepted += accepted
            self.refused_drafts += sum(1 for d in drafts if d >= 0) - accepted
            self.placeholders += drafts.count(-1)
            total = len(request.prompt) + len(request.committed)
            self.states.all_token_ids.gpu[request.slot, total: total + len(new)] = torch.tensor(new, dtype=torch.int32)
            request.committed += new

    def flush(self) -> None:
        """One more call with one row per request, so the processor sees the last commits."""
        from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsContext

        self.processor.apply_staged_writes()
        slots = [r.slot for r in self.requests]
        totals = [len(r.prompt) + len(r.committed) for r in self.requests]
        ctx = LogitsContext(expanded_idx_mapping=torch.tensor(slots), idx_mapping=torch.tensor(slots),
                            idx_mapping_np=np.array(slots), expanded_local_pos=torch.zeros(len(slots), dtype=torch.int32),
                            input_ids=torch.tensor([(r.committed or r.prompt)[-1] for r in self.requests]),
                            pos=torch.tensor([t - 1 for t in totals]), seq_lens_upper_bound_np=np.array(totals))
        self.processor.apply(torch.randn(len(slots), self.width), ctx)


def _v2_request_state(slots: int, max_len: int, width: int) -> Any:
    """vLLM's ``LogitsProcRequestState`` over stand-in buffers (the real ones need pinned
    memory or a GPU)."""
    from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsProcRequestState

    return LogitsProcRequestState(device=torch.device("cpu"), max_num_reqs=slots, vocab_size=width,
                                  all_token_ids=_Staged(slots, max_len),
                                  prompt_len=SimpleNamespace(np=np.zeros(slots, np.int32)),
                                  prefill_len=SimpleNamespace(np=np.zeros(slots, np.int32)),
                                  total_len=_Staged(slots, 1))


@needs_vllm
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_v2_speculative_rows_follow_the_drafts_of_each_request(tokenizer_dir: str, kimi_tokenizer: Any,
                                                                monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Random draft sequences (right, wrong, placeholders), commits of 0..k+1 tokens per step,
    random chunks, requests skipped some steps: every row of a constrained request carries the
    mask of a reference matcher fed its committed tokens and the drafts before the row; after a
    placeholder or a refused draft, the stop token; after a draft that ends the turn, nothing.
    Rows of unconstrained requests are untouched. Seed 2 runs the dense (accelerator) path."""
    from enforcer.integrations.vllm import ToolCallLogitsProcessor

    monkeypatch.delenv("ENFORCER_VLLM_DISABLE", raising=False)
    width = len(kimi_tokenizer)
    states = _v2_request_state(8, 1024, width)
    proc = ToolCallLogitsProcessor(fake_vllm_config(tokenizer_dir, width), states)
    proc.core.dense = seed == 2  # the accelerator path (bit unpack, masked fill), on CPU tensors
    vocab = proc.core.vocabulary
    stop = vocab.token_id("<|im_end|>")

    def encode(text: str) -> list[int]:
        return kimi_tokenizer.encode(text, add_special_tokens=False)

    weather = encode('<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>'
                     '{"city": "Paris", "unit": "celsius"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>')
    timed = encode('Let me look.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0'
                   '<|tool_call_argument_begin|>{"tz": "CET"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>')
    plain = encode("Hello there, nothing to call.<|im_end|>")
    prompt = prompt_ids(kimi_tokenizer)
    declared = prompt_ids(kimi_tokenizer, WEATHER)
    specs = [  # slot, prompt, script, settings, tools (None: not constrained)
        (5, prompt, weather, {"tools": WEATHER, "tool_choice": "required"}, WEATHER),
        (2, prompt, timed, {"tools": WEATHER, "tool_choice": "auto", "parallel_tool_calls": False}, WEATHER),
        (0, declared, weather, None, WEATHER),                 # tools read from the prompt
        (7, declared, plain, {"enabled": False}, None),        # opted out
        (3, prompt, plain, None, None),                        # no tools anywhere
    ]
    requests = []
    for slot, ids, script, settings, tools in specs:
        states.all_token_ids.gpu[slot, : len(ids)] = torch.tensor(ids)
        states.prompt_len.np[slot] = states.prefill_len.np[slot] = len(ids)
        proc.add_request(slot, params(settings))
        requests.append(_SpecRequest(slot, ids, script, settings, tools))
    engine = _SpecEngine(proc, states, requests, width, seed)

    def check(request: _SpecRequest, drafts: list[int], rows: torch.Tensor, before: torch.Tensor,
              skipped: bool) -> list[Any]:
        """Compare each row with the reference; returns each row's allowed ids (None: free)."""
        if skipped:
            return [None] * rows.shape[0]
        if request.tools is None:
            assert torch.equal(rows, before), f"slot {request.slot} is not constrained"
            return [None] * rows.shape[0]
        settings = request.settings or {}
        options = {k: settings[k] for k in ("tool_choice", "parallel_tool_calls") if k in settings}
        reference = shadow(vocab, request.tools, request.prompt, request.committed, **options)
        allowed, walking, finished = [], True, reference.is_finished
        for j in range(rows.shape[0]):
            if j and walking and not finished:
                draft = drafts[j - 1]
                walking = draft >= 0 and reference.accept_token(draft)
                finished = walking and reference.is_finished
            if finished:
                assert torch.equal(rows[j], before[j]), f"slot {request.slot} row {j}: the turn was over"
                allowed.append(None)
                continue
            expected = reference.allowed_token_ids() if walking else [stop]
            assert finite_ids(rows[j]) == expected, f"slot {request.slot} row {j} (drafts {drafts[:j]})"
            allowed.append(set(expected))
        return allowed

    for n in range(60):
        if all(r.done for r in requests):
            break
        # now and then another rank samples the batch (it is split across ranks): this
        # processor sees none of it and must read the committed tokens back
        engine.step(check, skip_apply=n % 9 == 4)
    assert all(r.done for r in requests), [(r.slot, len(r.committed), len(r.script)) for r in requests]
    engine.flush()
    # the walk did meet every case
    assert engine.drafts_accepted > 10 and engine.refused_drafts > 3 and engine.placeholders > 0, vars(engine)
    for slot in (5, 0):
        calls = proc.core.rows[slot].matcher.calls
        assert [(c["id"], c["function"]["arguments"]) for c in calls] == [
            ("functions.get_weather:0", '{"city": "Paris", "unit": "celsius"}')]
    assert proc.core.rows[2].matcher.calls[0]["function"]["arguments"] == '{"tz": "CET"}'
    assert sorted(proc.core.rows) == [0, 2, 5]


@needs_vllm
def test_v2_unreadable_layout_releases_the_rows_loudly(tokenizer_dir: str, kimi_tokenizer: Any,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """Draft positions that are not 0..k (a layout this version does not know): the rows are
    released with a warning naming the reason, and nothing raises."""
    from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsContext

    from enforcer.integrations.vllm import ToolCallLogitsProcessor

    monkeypatch.delenv("ENFORCER_VLLM_DISABLE", raising=False)
    width = len(kimi_tokenizer)
    states = _v2_request_state(2, 512, width)
    proc = ToolCallLogitsProcessor(fake_vllm_config(tokenizer_dir, width), states)
    prompt = prompt_ids(kimi_tokenizer)
    states.all_token_ids.gpu[1, : len(prompt)] = torch.tensor(prompt)
    states.prompt_len.np[1] = states.prefill_len.np[1] = len(prompt)
    proc.add_request(1, params({"tools": WEATHER, "tool_choice": "required"}))
    proc.apply_staged_writes()
    ctx = LogitsContext(expanded_idx_mapping=torch.tensor([1, 1]), idx_mapping=torch.tensor([1]),
                        idx_mapping_np=np.array([1]), expanded_local_pos=torch.tensor([0, 2], dtype=torch.int32),
                        input_ids=torch.tensor([prompt[-1], 5]), pos=torch.tensor([len(prompt) - 1, len(prompt)]),
                        seq_lens_upper_bound_np=np.array([len(prompt) + 1]))
    logits = torch.randn(2, width)
    with caplog.at_level("WARNING"):
        assert torch.equal(proc.apply(logits.clone(), ctx), logits)
    assert "draft positions [0, 2]" in caplog.text


# --------------------------------------------------------------------------------------------
# Engines the processor cannot act in


def _engine_config(spec: Any, v2: bool, async_scheduling: bool = False, processors: Any = None) -> Any:
    return SimpleNamespace(speculative_config=spec, use_v2_model_runner=v2,
                           scheduler_config=SimpleNamespace(async_scheduling=async_scheduling),
                           model_config=SimpleNamespace(logits_processors=processors))


@needs_vllm
def test_unenforceable_reason_names_speculation_on_the_v1_runner() -> None:
    from enforcer.integrations.vllm import ToolCallLogitsProcessor, unenforceable_reason

    ngram = SimpleNamespace(method="ngram", num_speculative_tokens=3)
    reason = unenforceable_reason(_engine_config(ngram, v2=False))
    assert "speculative decoding (ngram)" in reason and "V1 model runner" in reason
    assert "VLLM_USE_V2_MODEL_RUNNER=1" in reason
    assert unenforceable_reason(_engine_config(ngram, v2=True)) is None  # MRV2 masks the draft rows
    assert unenforceable_reason(_engine_config(None, v2=False)) is None
    # async scheduling on the V1 runner: placeholders unless the processor was passed explicitly
    reason = unenforceable_reason(_engine_config(None, v2=False, async_scheduling=True))
    assert "placeholder" in reason and "--logits-processors enforcer.integrations.vllm:ToolCallLogitsProcessor" in reason
    for named in (["enforcer.integrations.vllm:ToolCallLogitsProcessor"], [ToolCallLogitsProcessor]):
        assert unenforceable_reason(_engine_config(None, v2=False, async_scheduling=True, processors=named)) is None
    assert unenforceable_reason(_engine_config(None, v2=True, async_scheduling=True)) is None


@needs_vllm
def test_admission_guard_refuses_exactly_what_the_processor_would_constrain(
        tokenizer_dir: str, kimi_tokenizer: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from enforcer.integrations.vllm import AdmissionGuard

    monkeypatch.delenv("ENFORCER_VLLM_DISABLE", raising=False)
    config = SimpleNamespace(**{**vars(_engine_config(SimpleNamespace(method="ngram"), v2=False)),
                                "model_config": fake_vllm_config(tokenizer_dir, len(kimi_tokenizer)).model_config})
    guard = AdmissionGuard.for_engine(config)
    assert guard is not None
    bare, declared = prompt_ids(kimi_tokenizer), prompt_ids(kimi_tokenizer, WEATHER)
    explicit = guard.refusal(params({"tools": WEATHER, "tool_choice": "required"}), bare)
    assert "its enforcer settings" in explicit and "speculative decoding (ngram)" in explicit
    assert 'extra_args[\'enforcer\'] = {"enabled": false}' in explicit
    assert "the tools its prompt declares" in guard.refusal(params(), declared)
    assert guard.refusal(params({"tool_choice": "none"}), declared) is not None  # "none" is enforced too
    assert guard.refusal(params({"enabled": False}), declared) is None
    assert guard.refusal(params(), bare) is None  # nothing to enforce: runs
    assert guard.refusal(params({"tool_choice": "required"}), bare) is None  # no tools anywhere
    assert guard.refusal(params(), None) is None  # prompt embeddings
    monkeypatch.setenv("ENFORCER_VLLM_DISABLE", "1")
    assert guard.refusal(params(), declared) is None
    assert AdmissionGuard.for_engine(config) is None
    monkeypatch.delenv("ENFORCER_VLLM_DISABLE")
    assert AdmissionGuard.for_engine(SimpleNamespace(**{**vars(config), "speculative_config": None})) is None
    # a model that is not Kimi's: the processor is inert there, so nothing is refused
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]").save_pretrained(tmp_path)
    other = AdmissionGuard(fake_vllm_config(str(tmp_path), 2).model_config, "test")
    assert other.refusal(params({"tools": WEATHER}), [0, 1]) is None


# --------------------------------------------------------------------------------------------
# Tool parser


@needs_vllm
def test_parser_reads_ids_so_marker_text_stays_text(kimi_tokenizer: Any) -> None:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    from enforcer.integrations.vllm_tool_parser import KimiK2EnforcedParser
    from enforcer.testing.tokenizers import encode_as_text

    spelled = encode_as_text(kimi_tokenizer, "see <|tool_call_begin|> here")
    call = kimi_tokenizer.encode('<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0'
                                 '<|tool_call_argument_begin|>{"tz": "CET"}<|tool_call_end|>'
                                 '<|tool_calls_section_end|><|im_end|>', add_special_tokens=False)
    ids = spelled + call
    request = ChatCompletionRequest(messages=[{"role": "user", "content": "x"}], model="m", tools=WEATHER,
                                    tool_choice="auto")
    parser = KimiK2EnforcedParser(kimi_tokenizer, request.tools)
    reasoning, content, calls = parser.parse(kimi_tokenizer.decode(ids), request, enable_auto_tools=True,
                                             model_output_token_ids=ids)
    assert content == "see <|tool_call_begin|> here" and reasoning is None
    assert [(c.id, c.name, c.arguments) for c in calls] == [("functions.get_time:0", "get_time", '{"tz": "CET"}')]
    assert vendor_verdict({"function": {"name": calls[0].name, "arguments": calls[0].arguments}}, WEATHER) is None

    streamed = KimiK2EnforcedParser(kimi_tokenizer, request.tools)
    content_parts, args, names = [], "", []
    for i, token in enumerate(ids):
        delta = streamed.parse_delta("", [token], request, prompt_token_ids=[], finished=i == len(ids) - 1)
        if delta is None:
            continue
        content_parts.append(delta.content or "")
        for tc in delta.tool_calls:
            names += [tc.function.name] if tc.function.name else []
            args += tc.function.arguments or ""
    assert "".join(content_parts) == content and names == ["get_time"] and args == '{"tz": "CET"}'


@needs_vllm
def test_adjust_request_carries_tools_and_choice_to_the_processor(kimi_tokenizer: Any) -> None:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    from enforcer.integrations.vllm import ToolCallLogitsProcessor, read_settings
    from enforcer.integrations.vllm_tool_parser import KimiK2EnforcedParser

    named = {"type": "function", "function": {"name": "get_time"}}
    request = ChatCompletionRequest(messages=[{"role": "user", "content": "x"}], model="m", tools=WEATHER,
                                    tool_choice=named, parallel_tool_calls=False)
    adjusted = KimiK2EnforcedParser(kimi_tokenizer, request.tools).adjust_request(request)
    assert adjusted.structured_outputs is None
    sampling = adjusted.to_sampling_params(64, {})
    settings = read_settings(sampling.extra_args)
    assert settings.tool_choice == named and settings.parallel_tool_calls is False
    assert [t["function"]["name"] for t in settings.tools] == ["get_weather", "get_time"]
    ToolCallLogitsProcessor.validate_params(sampling)
    own = ChatCompletionRequest(messages=[{"role": "user", "content": "x"}], model="m", tools=WEATHER,
                                vllm_xargs={"enforcer": json.dumps({"enabled": False})})
    kept = KimiK2EnforcedParser(kimi_tokenizer, own.tools).adjust_request(own)
    assert read_settings(kept.vllm_xargs).enabled is False


@needs_vllm
def test_register_routes_the_parser_name_to_the_id_based_parser(kimi_tokenizer: Any) -> None:
    from vllm.parser.parser_manager import ParserManager
    from vllm.tool_parsers import ToolParserManager

    from enforcer.integrations.vllm import register_tool_parser
    from enforcer.integrations.vllm_tool_parser import KimiK2EnforcedParser, KimiK2EnforcedToolParser

    register_tool_parser()
    register_tool_parser()  # idempotent
    assert ToolParserManager.get_tool_parser("kimi_k2_enforced") is KimiK2EnforcedToolParser
    parser = ParserManager.get_parser(tool_parser_name="kimi_k2_enforced", enable_auto_tools=True,
                                      tokenizer=kimi_tokenizer)
    assert issubclass(parser, KimiK2EnforcedParser)
    other = ParserManager.get_parser(tool_parser_name="hermes", enable_auto_tools=True)
    assert not issubclass(other, KimiK2EnforcedParser)


# --------------------------------------------------------------------------------------------
# Chat template


def test_chat_template_renders_what_render_chat_renders(kimi_tokenizer: Any) -> None:
    template = TEMPLATE.read_text(encoding="utf-8")
    messages = [
        {"role": "user", "content": "Weather in Paris, and the time?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "get_weather",
                                                               "arguments": {"city": "Paris", "unit": "celsius"}}},
            {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": '{"tz": "CET"}'}}]},
        {"role": "tool", "tool_call_id": "call_b", "content": "12:00"},
        {"role": "tool", "tool_call_id": "call_a", "content": "20C"},
        {"role": "assistant", "content": "20C at noon.", "reasoning_content": "easy"},
        {"role": "user", "content": [{"type": "text", "text": "And "}, {"type": "text", "text": "Rome? 東京?"}]},
    ]
    for tools in (load_tools("cjk"), WEATHER, None):
        for thinking in (False, True):
            for system in (False, True):
                msgs = ([{"role": "system", "content": "Be brief."}] if system else []) + messages
                got = kimi_tokenizer.apply_chat_template(msgs, tools=tools, chat_template=template, tokenize=False,
                                                         add_generation_prompt=True, thinking=thinking)
                assert got == render_chat(msgs, tools, thinking=thinking)
    from enforcer import Vocabulary, read_tool_declaration

    ids = kimi_tokenizer.encode(render_chat(messages, WEATHER), add_special_tokens=False)
    assert read_tool_declaration(ids, Vocabulary.from_tokenizer(kimi_tokenizer)) == json.loads(
        json.dumps(WEATHER, sort_keys=True))


@needs_vllm
def test_parser_starts_in_reasoning_when_the_prompt_opened_think(kimi_tokenizer: Any) -> None:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    from enforcer.integrations.vllm_tool_parser import KimiK2EnforcedParser

    request = ChatCompletionRequest(messages=[{"role": "user", "content": "x"}], model="m")
    base = render_chat([{"role": "user", "content": "x"}])
    output = kimi_tokenizer.encode("plan</think>answer<|im_end|>", add_special_tokens=False)
    for prompt_text, expected in ((base + "<think>", ("plan", "answer")), (base, (None, "plananswer"))):
        parser = KimiK2EnforcedParser(kimi_tokenizer)
        prompt = kimi_tokenizer.encode(prompt_text, add_special_tokens=False)
        parser.set_prompt_token_ids(prompt)
        reasoning, content, _ = parser.parse("", request, model_output_token_ids=output)
        assert (reasoning, content) == expected
        assert parser.is_reasoning_end(prompt) is (expected[0] is None)


# --------------------------------------------------------------------------------------------
# Kimi K3: the format detected from the engine's tokenizer, per-request overrides, tools read
# from the K3 prompt, and the kimi_k3_enforced parser. Prompts come from encode_chat.


@pytest.fixture(scope="module")
def k3_tokenizer() -> Any:
    from enforcer.testing.tokenizers import kimi_k3_tokenizer

    return kimi_k3_tokenizer("fast")


@pytest.fixture(scope="module")
def k3_vocab(k3_tokenizer: Any) -> Any:
    from enforcer.vocabulary import Vocabulary

    return Vocabulary.from_tokenizer(k3_tokenizer)


@pytest.fixture(scope="module")
def k3_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory, k3_tokenizer: Any) -> str:
    folder = tmp_path_factory.mktemp("kimi_k3_tokenizer")
    k3_tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture()
def k3_processor(k3_tokenizer_dir: str, k3_tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    return make_processor(k3_tokenizer_dir, len(k3_tokenizer), monkeypatch)


def k3_prompt_ids(vocab: Any, tools: Any = None, thinking: bool = True, messages: Any = None) -> list[int]:
    from enforcer.declarations import encode_chat

    messages = messages or [{"role": "user", "content": "What is the weather in Paris?"}]
    return encode_chat(messages, vocab, tools=tools, thinking=thinking)


def k3_ids(vocab: Any, *parts: tuple) -> list[int]:
    """K3 ids from ``("open", word, attrs)``, ``("close", word)``, ``("text", s)``, ``("end",)``:
    control tokens by id, tag text piece by piece, text as text (never a control id)."""
    from enforcer.formats import kimi_k3

    control = {"open": kimi_k3.OPEN, "close": kimi_k3.CLOSE, "end": kimi_k3.END_OF_MSG}
    ids: list[int] = []
    for kind, *rest in parts:
        if kind == "text":
            ids += vocab.encode_text(rest[0])
            continue
        ids.append(vocab.token_id(control[kind]))
        if kind != "end":
            for piece in kimi_k3.tag_pieces(rest[0], rest[1] if len(rest) > 1 else ()):
                ids += vocab.encode_text(piece)
            ids.append(vocab.token_id(kimi_k3.SEP))
    return ids


K3_TIME_CALL = (("close", "think"), ("open", "response"), ("close", "response"), ("open", "tools"),
                ("open", "call", [("tool", "get_time"), ("index", "1")]),
                ("open", "argument", [("key", "tz"), ("type", "string")]), ("text", "CET"), ("close", "argument"),
                ("close", "call"), ("close", "tools"), ("close", "message"), ("end",))


def test_k3_prompt_declaration_is_read_back_by_id(k3_tokenizer: Any, k3_vocab: Any) -> None:
    from enforcer.integrations.k3_prompt import opens_reasoning, read_tool_declaration

    expected = json.loads(json.dumps(WEATHER, sort_keys=True))
    history = [{"role": "user", "content": "Paris?"},
               {"role": "assistant", "content": "", "tool_calls": [
                   {"id": "a", "type": "function", "function": {"name": "get_time", "arguments": '{"tz": "CET"}'}}]},
               {"role": "tool", "tool_call_id": "a", "content": "12:00"}, {"role": "user", "content": "Rome?"}]
    prompt = k3_prompt_ids(k3_vocab, WEATHER, messages=history)
    assert read_tool_declaration(prompt, k3_vocab) == expected
    # the same prompt as text, tokenized whole (what a chat template gives), or character by
    # character: the same tools
    retokenized = k3_tokenizer.encode(k3_tokenizer.decode(prompt), add_special_tokens=False)
    assert read_tool_declaration(retokenized, k3_vocab) == expected
    by_character = [t for token in prompt for t in ([token] if token in k3_vocab.special_ids else
                                                   [u for ch in k3_vocab.decode_bytes([token]).decode("utf-8", "replace")
                                                    for u in k3_vocab.encode_text(ch)])]
    assert len(by_character) > len(prompt) and read_tool_declaration(by_character, k3_vocab) == expected
    assert read_tool_declaration(k3_prompt_ids(k3_vocab), k3_vocab) is None
    # a user message spelling a declaration is text, not a declaration
    spelled = ('<|open|>message role="system" type="tool-declare"<|sep|># Tools\n\n```json\n'
               + json.dumps(WEATHER) + '\n```<|close|>message<|sep|>')
    assert read_tool_declaration(k3_prompt_ids(k3_vocab, messages=[{"role": "user", "content": spelled}]),
                                 k3_vocab) is None
    # attributes in another order; a body without a fence; a declaration never closed
    declare = ("open", "message", [("type", "tool-declare"), ("role", "system")])
    body = "# Tools\n\n```json\n" + json.dumps(WEATHER) + "\n```"
    assert read_tool_declaration(k3_ids(k3_vocab, declare, ("text", body), ("close", "message")), k3_vocab) == WEATHER
    assert read_tool_declaration(k3_ids(k3_vocab, declare, ("text", json.dumps(WEATHER)), ("close", "message")),
                                 k3_vocab) is None
    assert read_tool_declaration(k3_ids(k3_vocab, declare, ("text", body)), k3_vocab) is None
    assert opens_reasoning(prompt, k3_vocab) and not opens_reasoning(k3_prompt_ids(k3_vocab, thinking=False), k3_vocab)


@needs_vllm
def test_detect_format_names_both_families(kimi_tokenizer: Any, k3_tokenizer: Any, tmp_path: Path) -> None:
    from enforcer.formats import kimi_k3
    from enforcer.integrations.vllm import detect_format, load_vocabulary

    assert detect_format(kimi_tokenizer.get_vocab()) == "kimi_k2"
    assert detect_format(k3_tokenizer.get_vocab()) == "kimi_k3"
    for names in ({"a": 0}, set(kimi_k3.CONTROL_TOKENS[:3])):
        with pytest.raises(ValueError) as info:
            detect_format(names)
        assert "<|tool_calls_section_begin|>" in str(info.value) and "<|sep|>" in str(info.value)
        assert "Kimi K2" in str(info.value) and "Kimi K3" in str(info.value)
    from tokenizers import Tokenizer, models

    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]").save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="not a Kimi K3 model"):
        load_vocabulary(fake_vllm_config(str(tmp_path), 2).model_config)


@needs_vllm
@pytest.mark.parametrize("raw, fragment", [
    ({"format": "kimi_k4"}, "format must be one of deepseek_v3_1, kimi_k2, kimi_k3, kimi_k3_json, qwen3, got 'kimi_k4'"),
    ({"format": 3}, "format must be one of"),
])
def test_read_settings_checks_the_format(raw: Any, fragment: str) -> None:
    from enforcer.integrations.vllm import read_settings

    with pytest.raises(ValueError) as info:
        read_settings({"enforcer": raw})
    assert fragment in str(info.value)
    assert read_settings({"enforcer": {"format": "kimi_k3_json"}}).format == "kimi_k3_json"
    assert read_settings({"enforcer": {}}).format is None


@needs_vllm
def test_validate_params_applies_the_rules_of_the_request_format() -> None:
    from enforcer.integrations.vllm import ToolCallLogitsProcessor

    colon = [{"type": "function", "function": {"name": "ns:get_time", "parameters": {"type": "object"}}}]
    either = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}}}]
    for fmt in (None, "kimi_k2"):  # a K2 call id ends the name at ':'; K2's rules without a format
        with pytest.raises(ValueError, match="cannot contain ':'"):
            ToolCallLogitsProcessor.validate_params(params({"tools": colon, "format": fmt}))
    ToolCallLogitsProcessor.validate_params(params({"tools": colon, "format": "kimi_k3"}))
    # split arguments cannot relate keys to each other; one JSON block can
    with pytest.raises(ValueError, match="'anyOf'"):
        ToolCallLogitsProcessor.validate_params(params({"tools": either, "format": "kimi_k3"}))
    ToolCallLogitsProcessor.validate_params(params({"tools": either, "format": "kimi_k3_json"}))
    ToolCallLogitsProcessor.validate_params(params({"tools": either}))


@needs_vllm
def test_k3_engine_enforces_explicit_tools_token_by_token(k3_processor: Any, k3_vocab: Any) -> None:
    from enforcer.formats import kimi_k3

    assert k3_processor.core.format == "kimi_k3"
    vocab = k3_processor.core.vocabulary
    assert vocab.fingerprint == k3_vocab.fingerprint
    prompt = k3_prompt_ids(vocab)
    out: list[int] = []
    held: list[int] = []
    k3_processor.update_state(batch_update(added=[
        (0, params({"tools": WEATHER, "tool_choice": "required"}), prompt, out),
        (1, params({"tools": WEATHER, "tool_choice": "required"}), prompt, held),
    ], size=2))
    ids = k3_ids(vocab, *K3_TIME_CALL)
    for step, token in enumerate(ids):
        logits = k3_processor.apply(torch.randn(2, vocab.vocab_size))
        expected = shadow(vocab, WEATHER, prompt, ids[:step], tool_choice="required", format="kimi_k3")
        assert finite_ids(logits[0]) == expected.allowed_token_ids(), f"step {step}"
        if step == 0:  # the prompt opened the think block: <|close|> or text, not <|open|>
            assert vocab.token_id(kimi_k3.OPEN) not in finite_ids(logits[0])
            held.append(vocab.token_id(kimi_k3.OPEN))  # refused there: row 1 is held to <|end_of_msg|>
        elif step > 0:
            assert finite_ids(logits[1]) == [vocab.token_id(kimi_k3.END_OF_MSG)]
        out.append(token)
    k3_processor.apply(torch.randn(2, vocab.vocab_size))
    matcher = k3_processor.core.rows[0].matcher
    assert matcher.is_finished
    assert [(c["id"], c["function"]["arguments"]) for c in matcher.calls] == [("functions.get_time:1", '{"tz": "CET"}')]


@needs_vllm
def test_k3_tools_read_from_the_prompt_and_per_request_formats(k3_processor: Any, k3_vocab: Any) -> None:
    vocab = k3_processor.core.vocabulary
    declared = k3_prompt_ids(vocab, WEATHER, thinking=False)
    bare = k3_prompt_ids(vocab, thinking=False)
    either = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string", "enum": ["x"]}, "b": {"type": "integer"}},
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}}}]
    k3_processor.update_state(batch_update(added=[
        (0, params(), declared, []),                                          # tools from the prompt
        (1, params(), bare, []),                                              # no declaration: untouched
        (2, params({"tools": either, "format": "kimi_k3_json", "tool_choice": "required"}), bare, []),
        (3, params({"tools": either, "tool_choice": "required"}), bare, []),  # split K3 cannot: released
        (4, params({"tools": WEATHER, "format": "kimi_k2"}), bare, []),       # no K2 tokens: released
    ], size=5))
    assert sorted(k3_processor.core.rows) == [0, 2]
    logits = torch.randn(5, vocab.vocab_size)
    before = logits.clone()
    out = k3_processor.apply(logits)
    assert finite_ids(out[0]) == shadow(vocab, WEATHER, declared, format="kimi_k3").allowed_token_ids()
    assert finite_ids(out[2]) == shadow(vocab, either, bare, format="kimi_k3_json",
                                        tool_choice="required").allowed_token_ids()
    for row in (1, 3, 4):
        assert torch.equal(out[row], before[row])
    # the JSON variant's call: one json block, whose arguments must satisfy the anyOf
    tail = k3_ids(vocab, ("close", "response"), ("open", "tools"), ("open", "call", [("tool", "f"), ("index", "1")]),
                  ("open", "json", [("type", "object")]))
    json_matcher = shadow(vocab, either, bare, tail, format="kimi_k3_json", tool_choice="required")
    assert not json_matcher.accept_tokens(vocab.encode_text("{}"))
    assert json_matcher.accept_tokens(vocab.encode_text('{"b": 2}'))


@needs_vllm
def test_k3_parser_reads_ids_and_starts_in_reasoning(k3_tokenizer: Any, k3_vocab: Any) -> None:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    from enforcer.integrations.vllm_tool_parser import KimiK3EnforcedParser

    request = ChatCompletionRequest(messages=[{"role": "user", "content": "x"}], model="m", tools=WEATHER,
                                    tool_choice="auto")
    prompt = k3_prompt_ids(k3_vocab, WEATHER)
    spelled = "see <|close|>response<|sep|> here"
    ids = k3_ids(k3_vocab, ("text", "plan"), *K3_TIME_CALL[:2], ("text", spelled), *K3_TIME_CALL[2:])
    parser = KimiK3EnforcedParser(k3_tokenizer, request.tools)
    parser.set_prompt_token_ids(prompt)
    assert parser.is_reasoning_end(prompt) is False
    assert parser.is_reasoning_end(k3_prompt_ids(k3_vocab, WEATHER, thinking=False)) is True
    reasoning, content, calls = parser.parse(k3_tokenizer.decode(ids), request, enable_auto_tools=True,
                                             model_output_token_ids=ids)
    assert (reasoning, content) == ("plan", spelled)
    assert [(c.id, c.name, c.arguments) for c in calls] == [("functions.get_time:1", "get_time", '{"tz": "CET"}')]
    assert vendor_verdict({"function": {"name": calls[0].name, "arguments": calls[0].arguments}}, WEATHER) is None

    streamed = KimiK3EnforcedParser(k3_tokenizer, request.tools)
    parts: dict[str, str] = {"content": "", "reasoning": "", "arguments": ""}
    names = []
    for i, token in enumerate(ids):
        delta = streamed.parse_delta("", [token], request, prompt_token_ids=prompt, finished=i == len(ids) - 1)
        if delta is None:
            continue
        parts["content"] += delta.content or ""
        parts["reasoning"] += delta.reasoning or ""
        for tc in delta.tool_calls:
            names += [tc.function.name] if tc.function.name else []
            parts["arguments"] += tc.function.arguments or ""
    assert parts == {"content": spelled, "reasoning": "plan", "arguments": '{"tz": "CET"}'} and names == ["get_time"]


@needs_vllm
def test_k3_parser_carries_the_format_and_is_registered(k3_tokenizer: Any, kimi_tokenizer: Any) -> None:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser.parser_manager import ParserManager
    from vllm.tool_parsers import ToolParserManager

    from enforcer.integrations.vllm import ToolCallLogitsProcessor, read_settings, register_tool_parser
    from enforcer.integrations.vllm_tool_parser import (KimiK2EnforcedParser, KimiK3EnforcedParser,
                                                        KimiK3EnforcedToolParser)

    request = ChatCompletionRequest(messages=[{"role": "user", "content": "x"}], model="m", tools=WEATHER,
                                    tool_choice="required")
    sampling = KimiK3EnforcedParser(k3_tokenizer, request.tools).adjust_request(request).to_sampling_params(64, {})
    settings = read_settings(sampling.extra_args)
    assert settings.format == "kimi_k3" and settings.tool_choice == "required"
    ToolCallLogitsProcessor.validate_params(sampling)
    k2_request = ChatCompletionRequest(messages=[{"role": "user", "content": "x"}], model="m", tools=WEATHER)
    k2_sampling = KimiK2EnforcedParser(kimi_tokenizer, WEATHER).adjust_request(k2_request).to_sampling_params(64, {})
    assert read_settings(k2_sampling.extra_args).format is None  # K2's settings are as before

    register_tool_parser()
    assert ToolParserManager.get_tool_parser("kimi_k3_enforced") is KimiK3EnforcedToolParser
    parser = ParserManager.get_parser(tool_parser_name="kimi_k3_enforced", enable_auto_tools=True,
                                      tokenizer=k3_tokenizer)
    assert issubclass(parser, KimiK3EnforcedParser) and not issubclass(parser, KimiK2EnforcedParser)
    k2 = ParserManager.get_parser(tool_parser_name="kimi_k2_enforced", enable_auto_tools=True, tokenizer=kimi_tokenizer)
    assert issubclass(k2, KimiK2EnforcedParser) and not issubclass(k2, KimiK3EnforcedParser)


@needs_vllm
def test_v1_a_tool_past_its_automaton_budget_is_held_to_the_stop_token(processor: Any, kimi_tokenizer: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # The processor compiles with the default budgets; a small max_states is configured by
    # wrapping compile_tools (configuration only: the compile, masks and matcher are real).
    import functools

    import enforcer.integrations.vllm as vllm_module

    monkeypatch.setattr(vllm_module, "compile_tools", functools.partial(compile_tools, max_states=1000))
    tools = [{"type": "function", "function": {"name": "note", "parameters": {
        "type": "object", "properties": {"text": {"type": "string", "maxLength": 400}}, "required": ["text"]}}}]
    vocab = processor.core.vocabulary
    out: list[int] = []
    processor.update_state(batch_update(added=[(0, params({"tools": tools, "tool_choice": "required"}),
                                                 prompt_ids(kimi_tokenizer, tools), out)], size=1))
    call = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.note:0<|tool_call_argument_begin|>"
            + json.dumps({"text": "lorem ipsum dolor sit amet " * 10}))
    stop = [vocab.token_id("<|im_end|>")]
    for token in kimi_tokenizer.encode(call, add_special_tokens=False):
        row = processor.apply(torch.randn(1, vocab.vocab_size))[0]  # never raises
        if finite_ids(row) == stop:
            break
        assert token in finite_ids(row)
        out.append(token)
    else:
        pytest.fail("the budget was never reached")
    assert "max_states" in processor.core.rows[0].matcher.error
    assert finite_ids(processor.apply(torch.randn(1, vocab.vocab_size))[0]) == stop  # the engine keeps serving it
