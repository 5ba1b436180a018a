"""``transformers`` adapter: a ``LogitsProcessor`` that enforces tool calls in ``generate()``.

Usage::

    proc = ToolCallLogitsProcessor(tokenizer, tools, tool_choice="required")
    out = model.generate(**enc, logits_processor=LogitsProcessorList([proc]),
                         eos_token_id=proc.stop_token_ids, pad_token_id=tokenizer.pad_token_id)

One processor serves one ``generate()`` call (call :meth:`ToolCallLogitsProcessor.reset` to reuse
it); the expensive objects (``Vocabulary``, ``CompiledTools``) are built once in the constructor
and can be passed in to share them between processors. Greedy search and sampling are supported,
with any batch size and left padding; beam search is refused.

Masks are applied as an additive bias (0 where allowed, ``-inf`` elsewhere) cached by the exact
bitmask row: the masks of a tool-call grammar repeat (free text, inside a string, after a key...),
so after the first steps every row is one dictionary hit plus one vectorised add.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import LogitsProcessor

from ..tools import compile_tools
from ..vocabulary import Vocabulary

__all__ = ["ProcessorStats", "ToolCallLogitsProcessor"]

_BEAM_SEARCH = (
    "ToolCallLogitsProcessor does not support beam search (num_beams > 1): beams are reordered "
    "between steps, so one matcher per row cannot follow them. Use greedy search or sampling "
    "(num_beams=1)."
)


@dataclass
class ProcessorStats:
    """Per-step timings in seconds, one entry per ``__call__`` (the demo prints them).

    ``total``: the whole call; ``advance``: feeding the previous token to every matcher and
    filling the packed bitmask; ``apply``: turning the bitmask into masked scores.
    """

    total: list[float] = field(default_factory=list)
    advance: list[float] = field(default_factory=list)
    apply: list[float] = field(default_factory=list)
    bias_hits: int = 0
    bias_misses: int = 0

    def summary(self, which: str = "total") -> dict[str, float]:
        """``{"steps", "mean_us", "p50_us", "p99_us", "max_us"}`` of one timing list."""
        values = np.asarray(getattr(self, which), dtype=np.float64) * 1e6
        if values.size == 0:
            return {"steps": 0, "mean_us": 0.0, "p50_us": 0.0, "p99_us": 0.0, "max_us": 0.0}
        return {
            "steps": int(values.size),
            "mean_us": float(values.mean()),
            "p50_us": float(np.percentile(values, 50)),
            "p99_us": float(np.percentile(values, 99)),
            "max_us": float(values.max()),
        }


class ToolCallLogitsProcessor(LogitsProcessor):
    """Constrains every row of a ``generate()`` batch to the tool-call grammar of ``tools``.

    ``tokenizer``: the model's ``transformers`` tokenizer (the format's marker tokens must be in
    it). ``tools``: the OpenAI ``tools`` list. ``tool_choice``, ``parallel_tool_calls``,
    ``format``: as in :func:`enforcer.compile_tools`. ``vocab_size``: the model's logits width
    (default: the tokenizer's id count; wider logits are accepted and their extra ids are never
    allowed). ``vocabulary``: a prebuilt :class:`Vocabulary` to share instead of reading the
    tokenizer. ``pad_token_id``: the id stripped from the start of each prompt row (left padding;
    default ``tokenizer.pad_token_id``). ``bias_cache_size``: how many distinct masks keep a
    ready additive bias (one float row of the logits width each). Other keyword arguments go to
    :func:`enforcer.compile_tools` (``allow_thinking``, JSON-schema options).

    Cost: the constructor reads the vocabulary (~0.2 s for 150k ids) and compiles the tools;
    the first call builds one matcher per row; each later call is one ``accept_token`` and one
    ``fill_bitmask`` per row plus one cached-bias add. Raises the compiler's errors
    (``InvalidToolsError``, ``UnsupportedSchemaError``, ``TokenizerError``) from the constructor.

    After generation: ``matchers`` (one per row), ``prompt_ids`` (each row's prompt without its
    left padding), ``errors`` (per row, ``None`` when the row was
    never refused a token), ``stats`` (:class:`ProcessorStats`).
    """

    def __init__(
        self,
        tokenizer: Any,
        tools: Sequence[Mapping[str, Any]],
        tool_choice: str | Mapping[str, Any] = "auto",
        parallel_tool_calls: bool = True,
        format: str = "kimi_k2",
        vocab_size: int | None = None,
        *,
        vocabulary: Vocabulary | None = None,
        pad_token_id: int | None = None,
        bias_cache_size: int = 64,
        **compile_options: Any,
    ) -> None:
        if vocabulary is None:
            vocabulary = Vocabulary.from_tokenizer(tokenizer, vocab_size)
        elif vocab_size is not None and vocab_size != vocabulary.vocab_size:
            raise ValueError(
                f"vocab_size {vocab_size} disagrees with the given vocabulary ({vocabulary.vocab_size} ids)"
            )
        if bias_cache_size < 1:
            raise ValueError(f"bias_cache_size must be at least 1, got {bias_cache_size}")
        self.vocabulary = vocabulary
        self.compiled = compile_tools(
            tools,
            vocabulary,
            format=format,
            tool_choice=tool_choice,
            parallel_tool_calls=parallel_tool_calls,
            **compile_options,
        )
        self.stop_token_ids: list[int] = [int(i) for i in self.compiled.stop_token_ids]
        if not self.stop_token_ids:
            raise ValueError(f"format {format!r} declares no stop token")
        self.pad_token_id = getattr(tokenizer, "pad_token_id", None) if pad_token_id is None else pad_token_id
        self._words = (vocabulary.vocab_size + 31) // 32
        stop_row = np.zeros(self._words, dtype=np.int32)
        for stop in self.stop_token_ids:
            stop_row.view(np.uint32)[stop >> 5] |= np.uint32(1 << (stop & 31))
        self._stop_row = stop_row
        self._empty_key = bytes(self._words * 4)
        self._bias: OrderedDict[bytes, Any] = OrderedDict()
        self._on_host = True
        self._bias_cache_size = bias_cache_size
        self._bias_setting: tuple[int, torch.device, torch.dtype] | None = None
        self.reset()

    def reset(self) -> None:
        """Forget the rows of the previous ``generate()`` call (compiled tools and biases stay)."""
        self.matchers: list[Any] = []
        self.prompt_ids: list[list[int]] = []
        self.errors: list[str | None] = []
        self.stats = ProcessorStats()
        self._held: list[bool] = []
        self._seen: torch.Tensor | None = None
        self._bitmask = np.zeros((0, self._words), dtype=np.int32)

    # ------------------------------------------------------------------------------------------

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Scores with every id the row's matcher does not allow set to ``-inf`` (a new tensor)."""
        start = time.perf_counter()
        if self._seen is None:
            self._start(input_ids, scores)
        else:
            self._advance(input_ids)
        self._seen = input_ids.clone()
        keys = self._fill()
        middle = time.perf_counter()
        out = self._apply(keys, scores)
        end = time.perf_counter()
        self.stats.total.append(end - start)
        self.stats.advance.append(middle - start)
        self.stats.apply.append(end - middle)
        return out

    def _start(self, input_ids: torch.Tensor, scores: torch.Tensor) -> None:
        """First call: check the setting, then one matcher per row from its unpadded prompt."""
        if input_ids.dim() != 2 or scores.dim() != 2 or scores.shape[0] != input_ids.shape[0]:
            raise ValueError(
                f"expected input_ids (batch, length) and scores (batch, vocab), got "
                f"{tuple(input_ids.shape)} and {tuple(scores.shape)}"
            )
        if scores.shape[1] < self.vocabulary.vocab_size:
            raise ValueError(
                f"the model's logits have {scores.shape[1]} columns but the tokenizer has "
                f"{self.vocabulary.vocab_size} ids: resize the embeddings "
                "(model.resize_token_embeddings(len(tokenizer)))"
            )
        # transformers' beam search hands log-probabilities to the processors: every row's
        # logsumexp is 0. Raw logits of a real model essentially never are.
        lse = torch.logsumexp(scores.float(), dim=-1)
        if bool(torch.all(lse.abs() < 1e-4)):
            raise ValueError(_BEAM_SEARCH)
        setting = (int(scores.shape[1]), scores.device, scores.dtype)
        if setting != self._bias_setting:
            self._bias.clear()
            self._bias_setting = setting
            self._on_host = scores.device.type == "cpu" and scores.dtype == torch.float32
        rows = input_ids.shape[0]
        self._bitmask = np.zeros((rows, self._words), dtype=np.int32)
        for row in input_ids.tolist():
            start = 0
            if self.pad_token_id is not None:
                while start < len(row) and row[start] == self.pad_token_id:
                    start += 1
            self.prompt_ids.append(row[start:])
            self.matchers.append(self.compiled.matcher(prompt_ids=row[start:]))
            self.errors.append(None)
            self._held.append(False)

    def _advance(self, input_ids: torch.Tensor) -> None:
        """Feed each live row's newest token to its matcher; refuse anything but one new column."""
        seen = self._seen
        assert seen is not None
        if input_ids.shape[0] != seen.shape[0]:
            raise ValueError(
                f"{_BEAM_SEARCH} (the batch had {seen.shape[0]} rows at the first step and "
                f"{input_ids.shape[0]} now)"
            )
        if input_ids.shape[1] != seen.shape[1] + 1 or not torch.equal(input_ids[:, :-1], seen):
            raise ValueError(
                "input_ids do not extend the rows of the previous step by one token. "
                f"{_BEAM_SEARCH} To reuse the processor for another generate() call, call reset() first."
            )
        for row, token in enumerate(input_ids[:, -1].tolist()):
            if self._held[row]:
                continue
            matcher = self.matchers[row]
            if not matcher.accept_token(token):
                self.errors[row] = matcher.error or f"token {token} was not allowed"
                self._held[row] = True
            elif matcher.is_finished:
                self._held[row] = True

    def _fill(self) -> list[bytes]:
        """Fill the packed bitmask (held rows: the stop tokens only); return each row's bytes."""
        bitmask = self._bitmask
        keys = []
        for row, matcher in enumerate(self.matchers):
            if self._held[row]:
                bitmask[row] = self._stop_row
            else:
                matcher.fill_bitmask(bitmask, row)
            key = bitmask[row].tobytes()
            if key == self._empty_key:
                self.errors[row] = matcher.error or "the matcher allows no token"
                self._held[row] = True
                bitmask[row] = self._stop_row
                key = bitmask[row].tobytes()
            keys.append(key)
        return keys

    def _apply(self, keys: list[bytes], scores: torch.Tensor) -> torch.Tensor:
        """``scores`` plus each row's cached bias, written into a new tensor.

        On the CPU the add runs in numpy: single-threaded, so it never waits on torch's
        intra-op thread pool (which costs milliseconds per step when the cores are busy).
        """
        biases = [self._bias_for(key) for key in keys]
        out = torch.empty_like(scores)
        if self._on_host:
            source, target = scores.detach().numpy(), out.numpy()
            for row, bias in enumerate(biases):
                np.add(source[row], bias, out=target[row])
        else:
            for row, bias in enumerate(biases):
                torch.add(scores[row], bias, out=out[row])
        return out

    def _bias_for(self, key: bytes) -> Any:
        """The additive bias (numpy row on the CPU, tensor elsewhere) of one packed mask row,
        from the LRU cache or built (~50 us for 150k ids)."""
        bias = self._bias.get(key)
        if bias is not None:
            self._bias.move_to_end(key)
            self.stats.bias_hits += 1
            return bias
        self.stats.bias_misses += 1
        allowed = np.unpackbits(np.frombuffer(key, dtype=np.uint8), bitorder="little")
        allowed = allowed[: self.vocabulary.vocab_size].view(np.bool_)
        assert self._bias_setting is not None
        width, device, dtype = self._bias_setting
        host = np.full(width, -np.inf, dtype=np.float32)
        host[: allowed.size][allowed] = 0.0
        bias = host if self._on_host else torch.from_numpy(host).to(device=device, dtype=dtype)
        self._bias[key] = bias
        if len(self._bias) > self._bias_cache_size:
            self._bias.popitem(last=False)
        return bias
