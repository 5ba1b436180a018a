"""``transformers`` adapter: a ``LogitsProcessor`` that enforces tool calls in ``generate()``.

Usage::

    proc = ToolCallLogitsProcessor(tokenizer, tools, tool_choice="required")   # Kimi K2
    out = model.generate(**enc, logits_processor=LogitsProcessorList([proc]),
                         eos_token_id=proc.stop_token_ids, pad_token_id=tokenizer.pad_token_id)

Any format of :func:`enforcer.compile_tools` works the same way: ``format="kimi_k3"`` (or
``"kimi_k3_json"``) with a Kimi K3 tokenizer and prompt ids from
:func:`enforcer.declarations.encode_chat`; ``stop_token_ids`` is then ``<|end_of_msg|>``, and each
row's matcher starts where its prompt left the turn (inside ``<|open|>think<|sep|>`` or
``<|open|>response<|sep|>``). Read the rows back with ``parse_tool_calls(ids, vocabulary,
format="kimi_k3", in_reasoning=True)`` when the prompt opened the think block. Qwen3
(``format="qwen3"``) and DeepSeek-V3.1 (``format="deepseek_v3_1"``) take prompt text from
``render_chat(messages, tools, format=...)`` encoded by their tokenizer; every format of
:data:`enforcer.formats.FORMAT_NAMES` works the same way.

One processor serves one ``generate()`` call (or call :meth:`ToolCallLogitsProcessor.reset`).
Making one per request is cheap: the ``Vocabulary`` is cached per tokenizer object, the
``CompiledTools`` by ``compile_tools``' own cache, and the mask biases below are shared. Greedy
search and sampling are supported, with any batch size and left padding; beam search is refused.

Mask application: float32 scores in host memory go through one compiled pass over the batch
(:func:`~enforcer.logits.masked_scores`: a word of zero bits fills 32 columns with ``-inf``, a
word of ones copies them). Scores on an accelerator take the packed bitmask there (one copy
from pinned host memory, 19 KB a row for 151,899 ids) and are masked by three batch-wide
kernels whatever the batch (the bits unpacked, then one ``torch.where``): measured on an H200
at 128 rows, 0.22 ms a step against 8.6 ms row by row (xgrammar's CUDA kernel: 0.14 ms). Other host scores (bfloat16, float64...)
row by row: a mask with few allowed ids (at most ``SPARSE_WORDS`` non-zero words: forced
markers, call headers, digits...) by copying those scores into a row of ``-inf``; any other
mask as an additive bias (0 where allowed, ``-inf`` elsewhere) looked up by the exact packed row
in an LRU shared by every processor. Dense masks repeat (free text, inside a string...), so they
cost one hash, one dictionary hit and one vectorised add.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import LogitsProcessor

from ..batch import fill_bitmasks
from ..logits import allowed_on_device, masked_scores
from ..formats import FormatSpec
from ..tools import compile_tools
from ..vocabulary import Vocabulary

__all__ = ["BIAS_CACHE_ENTRIES", "SPARSE_WORDS", "ProcessorStats", "ToolCallLogitsProcessor"]

BIAS_CACHE_ENTRIES = 64
"""Dense-mask biases kept for all processors together (each one float row of the logits width:
about 39 MB in all for 151,899 float32 columns)."""
SPARSE_WORDS = 4
"""A mask row with at most this many non-zero 32-bit words is applied by index, not by bias."""

_BEAM_SEARCH = (
    "ToolCallLogitsProcessor does not support beam search (num_beams > 1): beams are reordered "
    "between steps, so one matcher per row cannot follow them. Use greedy search or sampling "
    "(num_beams=1)."
)
_BIT_OFFSETS = np.arange(32, dtype=np.uint32)


class _BiasCache:
    """Thread-safe LRU of additive biases keyed by (logits width, device, dtype, packed row).

    A value is a numpy float32 row for CPU float32 scores, else a tensor on the scores' device.
    Lives for the process; bounded by ``BIAS_CACHE_ENTRIES``.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> Any:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: tuple[Any, ...], value: Any) -> None:
        with self._lock:
            self._entries[key] = value
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)


_BIASES = _BiasCache(BIAS_CACHE_ENTRIES)
_VOCABULARIES: "weakref.WeakKeyDictionary[Any, dict[tuple[int, int | None], Vocabulary]]" = weakref.WeakKeyDictionary()
_VOCABULARIES_LOCK = threading.Lock()


def _vocabulary_for(tokenizer: Any, vocab_size: int | None) -> Vocabulary:
    """``Vocabulary.from_tokenizer`` cached per tokenizer object and size (tokens added later
    change ``len(tokenizer)`` and so the key). Cost on a miss: ~0.2 s for 150k ids."""
    key = (len(tokenizer), vocab_size)
    with _VOCABULARIES_LOCK:
        try:
            cached = _VOCABULARIES.get(tokenizer, {}).get(key)
        except TypeError:  # not weak-referenceable: no caching
            cached = None
    if cached is not None:
        return cached
    vocabulary = Vocabulary.from_tokenizer(tokenizer, vocab_size)
    with _VOCABULARIES_LOCK:
        try:
            _VOCABULARIES.setdefault(tokenizer, {})[key] = vocabulary
        except TypeError:
            pass
    return vocabulary


@dataclass
class ProcessorStats:
    """Per-step timings in seconds, one entry per ``__call__`` (the demo prints them).

    ``total``: the whole call; ``advance``: feeding the previous token to every matcher and
    filling the packed bitmask; ``apply``: turning the bitmask into masked scores.
    ``bias_hits``/``bias_misses``: dense rows served from / added to the shared bias cache;
    ``sparse_rows``: rows with few allowed ids, copied by index instead (both for scores other
    than float32 in host memory, which one compiled pass masks whole).
    """

    total: list[float] = field(default_factory=list)
    advance: list[float] = field(default_factory=list)
    apply: list[float] = field(default_factory=list)
    bias_hits: int = 0
    bias_misses: int = 0
    sparse_rows: int = 0

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
    ``format`` (a name of :data:`enforcer.formats.FORMAT_NAMES` or a ``FormatSpec``): as in
    :func:`enforcer.compile_tools`; the stop ids are the compiled format's and each row's
    matcher starts where its (unpadded) prompt left the turn. ``vocab_size``: the model's logits width
    (default: the tokenizer's id count; wider logits are accepted and their extra ids are never
    allowed). ``vocabulary``: a prebuilt :class:`Vocabulary` to use instead of reading the
    tokenizer. ``pad_token_id``: the id stripped from the start of each prompt row (left padding;
    default ``tokenizer.pad_token_id``). Other keyword arguments go to
    :func:`enforcer.compile_tools` (``allow_thinking``, JSON-schema options).

    Cost: the constructor reads the vocabulary (~0.2 s for 150k ids, once per tokenizer) and
    compiles the tools (cached); the first call builds one matcher per row; each later call is
    one ``accept_token`` and one ``fill_bitmask`` per row plus the mask application. Raises the
    compiler's errors (``InvalidToolsError``, ``UnsupportedSchemaError``, ``TokenizerError``)
    from the constructor.

    After generation: ``matchers`` (one per row), ``prompt_ids`` (each row's prompt without its
    left padding), ``errors`` (per row, ``None`` unless the row was refused a token or left with
    none allowed; it is then held on the stop token), ``stats`` (:class:`ProcessorStats`).
    ``generate()`` stops a row on its stop token without calling the processor again, so the
    last row to finish has a matcher that has not seen that token.
    """

    def __init__(
        self,
        tokenizer: Any,
        tools: Sequence[Mapping[str, Any]],
        tool_choice: str | Mapping[str, Any] = "auto",
        parallel_tool_calls: bool = True,
        format: str | FormatSpec = "kimi_k2",
        vocab_size: int | None = None,
        *,
        vocabulary: Vocabulary | None = None,
        pad_token_id: int | None = None,
        **compile_options: Any,
    ) -> None:
        if vocabulary is None:
            vocabulary = _vocabulary_for(tokenizer, vocab_size)
        elif vocab_size is not None and vocab_size != vocabulary.vocab_size:
            raise ValueError(
                f"vocab_size {vocab_size} disagrees with the given vocabulary ({vocabulary.vocab_size} ids)"
            )
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
            raise ValueError(f"format {self.compiled.format.name!r} declares no stop token")
        self.pad_token_id = getattr(tokenizer, "pad_token_id", None) if pad_token_id is None else pad_token_id
        self._words = (vocabulary.vocab_size + 31) // 32
        stop_row = np.zeros(self._words, dtype=np.int32)
        for stop in self.stop_token_ids:
            stop_row.view(np.uint32)[stop >> 5] |= np.uint32(1 << (stop & 31))
        self._stop_row = stop_row
        self.reset()

    def reset(self) -> None:
        """Forget the rows of the previous ``generate()`` call (the compiled tools stay)."""
        self.matchers: list[Any] = []
        self.prompt_ids: list[list[int]] = []
        self.errors: list[str | None] = []
        self.stats = ProcessorStats()
        self._held: list[bool] = []
        self._seen: torch.Tensor | None = None
        self._bitmask = np.zeros((0, self._words), dtype=np.int32)
        self._setting: tuple[int, str, torch.dtype] = (0, "cpu", torch.float32)
        self._on_host = True
        self._minus_inf: torch.Tensor | None = None
        """``-inf`` on the scores' device and dtype when they live on an accelerator (else None)."""

    # ------------------------------------------------------------------------------------------

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Scores with every id the row's matcher does not allow set to ``-inf`` (a new tensor)."""
        start = time.perf_counter()
        if self._seen is None:
            self._start(input_ids, scores)
        else:
            self._advance(input_ids)
        self._seen = input_ids.clone()
        self._fill()
        middle = time.perf_counter()
        out = self._masked(scores)
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
        self._setting = (int(scores.shape[1]), str(scores.device), scores.dtype)
        self._on_host = scores.device.type == "cpu" and scores.dtype == torch.float32
        self._bitmask = np.zeros((input_ids.shape[0], self._words), dtype=np.int32)
        if scores.device.type != "cpu":
            self._start_on_device(scores)
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

    def _fill(self) -> None:
        """Fill the packed bitmask; a held row, or one whose matcher allows nothing (recorded
        as its error and held from then on), gets the stop tokens only."""
        bitmask = self._bitmask
        live = [row for row in range(len(self.matchers)) if not self._held[row]]
        fill_bitmasks([self.matchers[row] for row in live], bitmask, live)
        for row, matcher in enumerate(self.matchers):
            if not self._held[row] and not bitmask[row].any():
                self.errors[row] = matcher.error or "the matcher allows no token"
                self._held[row] = True
            if self._held[row]:
                bitmask[row] = self._stop_row

    def _start_on_device(self, scores: torch.Tensor) -> None:
        """Scores on an accelerator: the bitmask is filled in pinned host memory (a faster copy
        to the device; pageable where pinning is unavailable), and ``-inf`` is made on the device,
        once per ``generate()`` call."""
        shape = self._bitmask.shape
        try:
            pinned = torch.zeros(shape, dtype=torch.int32, pin_memory=scores.device.type == "cuda")
        except RuntimeError:  # no pinnable memory (a driver or sandbox limit): pageable
            pinned = torch.zeros(shape, dtype=torch.int32)
        self._bitmask = pinned.numpy()
        self._minus_inf = torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device)

    def _masked(self, scores: torch.Tensor) -> torch.Tensor:
        """``scores`` under the bitmask, as a new tensor: float32 scores in host memory in one
        compiled pass over the batch (:func:`~enforcer.logits.masked_scores`), scores on an
        accelerator by a few batch-wide kernels there (:meth:`_masked_on_device`), other host
        scores row by row through a plan (:meth:`_plan`, :meth:`_apply`)."""
        if self._on_host:
            out = torch.empty_like(scores)
            masked_scores(scores.detach().numpy(), out.numpy(), self._bitmask)
            return out
        if self._minus_inf is not None:
            return self._masked_on_device(scores)
        return self._apply([self._plan(row) for row in self._bitmask], scores)

    def _masked_on_device(self, scores: torch.Tensor) -> torch.Tensor:
        """``scores`` (on an accelerator) under the bitmask: the packed rows copied there,
        unpacked (:func:`~enforcer.logits.allowed_on_device`), then one ``torch.where``; ids
        past the bitmask's ``32 * words`` columns are ``-inf``. Three kernels and one copy a step."""
        packed = torch.from_numpy(self._bitmask).to(scores.device)
        return torch.where(allowed_on_device(packed, scores.shape[1]), scores, self._minus_inf)

    def _plan(self, packed: np.ndarray) -> Any:
        """How to apply one packed mask row (every row allows an id: see :meth:`_fill`): its
        allowed ids (int64 array) when they sit in at most ``SPARSE_WORDS`` words, else its
        additive bias."""
        words = np.flatnonzero(packed)
        if words.size <= SPARSE_WORDS:
            self.stats.sparse_rows += 1
            bits = (packed[words].view(np.uint32)[:, None] >> _BIT_OFFSETS) & 1
            return (words[:, None] * 32 + _BIT_OFFSETS.astype(np.int64))[bits.astype(bool)]
        return self._bias_for(packed.tobytes())

    def _apply(self, plans: list[Any], scores: torch.Tensor) -> torch.Tensor:
        """``scores`` (not float32 in host memory) masked row by row into a new tensor."""
        out = torch.empty_like(scores)
        for row, plan in enumerate(plans):
            if isinstance(plan, torch.Tensor):
                torch.add(scores[row], plan, out=out[row])
            else:
                index = torch.from_numpy(plan).to(scores.device)
                out[row].fill_(float("-inf"))
                out[row, index] = scores[row, index]
        return out

    def _bias_for(self, key: bytes) -> Any:
        """The additive bias of one packed mask row, a tensor of the scores' device and dtype,
        from the shared cache or built (~50 us for 150k ids)."""
        width, device, dtype = self._setting
        cache_key = (width, device, dtype, key)
        bias = _BIASES.get(cache_key)
        if bias is not None:
            self.stats.bias_hits += 1
            return bias
        self.stats.bias_misses += 1
        allowed = np.unpackbits(np.frombuffer(key, dtype=np.uint8), bitorder="little")
        allowed = allowed[: self.vocabulary.vocab_size].view(np.bool_)
        host = np.full(width, -np.inf, dtype=np.float32)
        host[: allowed.size][allowed] = 0.0
        bias = torch.from_numpy(host).to(device=device, dtype=dtype)
        _BIASES.put(cache_key, bias)
        return bias
