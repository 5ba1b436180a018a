"""vLLM adapter: enforced tool calls (every format family of the registry) for every request of a vLLM engine.

:class:`ToolCallLogitsProcessor` is one batch-level logits processor with both of vLLM's
interfaces: the V1 one (``__init__(vllm_config, device, is_pin_memory)``, ``update_state``,
``apply(logits)``; the CPU backend and the V1 GPU runner) and the Model Runner V2 one
(``__init__(vllm_config, req_states)``, ``add_request``, ``apply_staged_writes``,
``apply(logits, ctx)``; the default on GPUs since vLLM 0.32). Both are thin faces over one core,
:class:`BatchEnforcer`. Being a subclass of both base classes matters: the two runners load the
same entry-point group (``vllm.logits_processors``) and the V2 loader refuses a V1-only class,
which would stop the engine from starting.

The format is a property of the engine's tokenizer, detected once (:func:`detect_format`,
through :mod:`enforcer.formats.registry`: Kimi K2 by ``<|tool_calls_section_begin|>``, Kimi K3 by
its four control tokens, Qwen3 by ``<|im_start|>``, ``<|im_end|>``, ``<tool_call>``,
``</tool_call>``, DeepSeek-V3.1 by its tool-call tokens); no family -> the processor stays inert
for that model.

Per request, ``SamplingParams.extra_args["enforcer"]`` (a dict, or its JSON text; over HTTP
``vllm_xargs={"enforcer": "<json>"}``; :mod:`.vllm_settings`) holds ``tools``, ``tool_choice``,
``parallel_tool_calls``, ``first_call_index``, ``enabled`` and ``format`` (any registered format;
default: the engine's). Without settings the tools are read from the prompt's tool declaration
by the family's prompt reader (K2: the ``tool_declare`` message; K3: the ``type="tool-declare"``
system message; Qwen3: the ``<tools>`` lines of the system message; DeepSeek-V3.1: the
``## Tools`` section of the system prompt), so an unmodified OpenAI client gets
enforced calls; a request without tools costs one dictionary miss per step. Bad declarations are
rejected in :meth:`ToolCallLogitsProcessor.validate_params` (vLLM answers HTTP 400 with the
reason) under the rules of the request's ``format``, K2's when it names none (vLLM validates
where the engine's tokenizer is not known); nothing raises inside ``update_state`` or
``apply``: a row the processor cannot follow (including a declaration the engine's format cannot
compile) is released (left unconstrained) or held to the stop token, and the reason is logged once.

Under Model Runner V2 with speculative decoding every draft row is masked
(:meth:`BatchEnforcer.constrain_drafts`). Where the processor cannot act at all (the V1 runner
with speculation or with async scheduling and the entry point only, TPUs:
:func:`unenforceable_reason`), the :class:`AdmissionGuard` that the general plugin installs
refuses each request that asks for enforcement, so none runs silently unconstrained.

``ENFORCER_VLLM_DISABLE=1`` in the engine's environment turns every instance into a no-op
without uninstalling the package.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref
from collections.abc import Container, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from vllm.logger import init_logger
from vllm.sampling_params import SamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality
from vllm.v1.sample.logits_processor import LogitsProcessor as V1LogitsProcessor
from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as V2LogitsProcessor

from ..engine import ToolCallMatcher
from ..errors import EnforcerError
from ..formats.registry import detect_family, families, family_of, get_family
from ..logits import allowed_on_device, allows_any, mask_rows_from_words
from ..tools import CompiledTools, compile_tools
from ..vocabulary import Vocabulary
from .vllm_settings import FORMATS, SETTINGS_KEY, RequestSettings, read_settings

__all__ = [
    "DISABLE_ENV",
    "FORMATS",
    "SETTINGS_KEY",
    "BatchEnforcer",
    "DraftRows",
    "RequestSettings",
    "ToolCallLogitsProcessor",
    "AdmissionGuard",
    "detect_format",
    "install_admission_guard",
    "load_vocabulary",
    "read_settings",
    "register_tool_parser",
    "unenforceable_reason",
    "validate_settings",
]

logger = init_logger(__name__)

DISABLE_ENV = "ENFORCER_VLLM_DISABLE"
"""Set to ``1`` in the engine's environment to turn the processor into a no-op."""
FORMAT = "kimi_k2"
"""The format whose rules validate a request's declarations when it names no ``format`` (the
engine's format is not known where vLLM validates; see the module docstring)."""
def _disabled() -> bool:
    return os.environ.get(DISABLE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


@functools.lru_cache(maxsize=None)
def _validation_vocabulary(family_name: str) -> Vocabulary:
    """256 single-byte tokens plus the ``validation_tokens`` of the family called
    ``family_name``, encoding text byte by byte: enough to compile any declaration and so find
    every error that does not depend on the model's tokenizer. Built once per family, ~1 ms."""
    family = get_family(family_name)
    names = family.validation_tokens
    tokens: list[bytes | None] = [bytes([b]) for b in range(256)] + [None] * len(names)
    return Vocabulary(tokens, [(name, 256 + i) for i, name in enumerate(names)],
                      source=f"enforcer.vllm validation ({family.name})", encoder=lambda text: list(text.encode("utf-8")))


def validate_settings(settings: RequestSettings) -> None:
    """Compile the request's tools against a byte vocabulary in the request's ``format`` (K2's
    when it names none); ``ValueError`` with the reason (bad name, invalid or unsupported schema
    with its JSON pointer, bad tool_choice). Cost: the compile (cached by the tools' canonical
    key), milliseconds for usual tools."""
    if not settings.enabled:
        return
    tools = settings.tools
    if tools is None:
        if settings.tool_choice not in ("auto", "none", "required") and not isinstance(settings.tool_choice, Mapping):
            raise ValueError(f"{SETTINGS_KEY}.tool_choice {settings.tool_choice!r} is not auto, none, required "
                             "or a named function")
        return  # tools come from the prompt, which validation does not see
    fmt = settings.format or FORMAT
    try:
        compile_tools(tools, _validation_vocabulary(family_of(fmt).name), format=fmt, tool_choice=settings.tool_choice,
                      parallel_tool_calls=settings.parallel_tool_calls)
    except EnforcerError as exc:
        raise ValueError(f"enforcer: {exc}") from None
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"enforcer: the tools cannot be compiled: {exc}") from None


# --------------------------------------------------------------------------------------------
# Vocabulary


_VOCABULARIES: dict[tuple, Vocabulary] = {}
_VOCABULARY_LOCK = threading.Lock()


def detect_format(tokens: Container[str]) -> str:
    """The default tool-call format of a tokenizer's family from its token names
    (``tokenizer.get_vocab()`` or ``Vocabulary.special_tokens``; see
    :func:`~enforcer.formats.registry.detect_family`); ``ValueError`` naming what each family
    needs otherwise. Cost: a few lookups per family."""
    return detect_family(tokens).default_format


def load_vocabulary(model_config: Any) -> Vocabulary:
    """The :class:`Vocabulary` of the engine's tokenizer, as wide as the model's logits.

    Raises ``ValueError`` when the engine has no tokenizer or the tokenizer has the marker
    tokens of no registered family (:func:`detect_format`, checked before the vocabulary is
    read), and the vocabulary's own errors. Cached per (tokenizer, revision, width); the
    first call reads the tokenizer (~0.3 s for 150k ids).
    """
    if getattr(model_config, "skip_tokenizer_init", False):
        raise ValueError("the engine runs without a tokenizer (skip_tokenizer_init)")
    width = int(model_config.get_vocab_size())
    key = (str(model_config.tokenizer), getattr(model_config, "tokenizer_revision", None), width)
    with _VOCABULARY_LOCK:
        hit = _VOCABULARIES.get(key)
        if hit is None:
            from vllm.tokenizers import cached_tokenizer_from_config

            tokenizer = cached_tokenizer_from_config(model_config)
            detect_format(tokenizer.get_vocab())
            hit = _VOCABULARIES[key] = Vocabulary.from_tokenizer(tokenizer, vocab_size=max(width, len(tokenizer)))
    return hit


# --------------------------------------------------------------------------------------------
# The core: rows, matchers, masks

_ACTIVE, _STOPPING, _RELEASED = range(3)


class _Row:
    """One constrained request: its matcher, how many of its output tokens it has seen, and
    its format's stop token as a packed mask row (shared, read-only)."""

    __slots__ = ("matcher", "seen", "state", "name", "stop")

    def __init__(self, matcher: ToolCallMatcher, name: str, stop: np.ndarray) -> None:
        self.matcher = matcher
        self.seen = 0
        self.state = _ACTIVE
        self.name = name
        self.stop = stop


class DraftRows(NamedTuple):
    """One request's logits rows in a speculative step: ``logits_rows[j]`` is sampled after
    the committed tokens and ``drafts[:j]`` (``drafts`` stops at the first placeholder, so it
    may be shorter than ``len(logits_rows) - 1``)."""

    key: int
    logits_rows: list[int]
    drafts: list[int]


class BatchEnforcer:
    """Matchers for the constrained rows of a batch and the masks they produce.

    Engine-neutral: rows are keyed by an int (V1 batch index, V2 request slot). ``add`` makes a
    row from a request's settings and prompt (compiles through the shared LRU of
    :func:`compile_tools`), ``advance`` feeds it the tokens generated since, ``constrain``
    writes the masks of many rows into the logits. ``format``: the engine's tool-call format
    (default: :func:`detect_format` on the vocabulary, once; ``ValueError`` when no registered
    family matches); a request's ``format`` setting overrides it for that request.
    Lifetime: one per processor instance.
    Cost per step and row: one ``accept_token``, the row's mask looked up (no copy), whether it
    allows anything (a scan up to its first nonzero words), then, on a CPU, the compiled in-place kernel
    (:func:`~enforcer.logits.mask_rows_from_words`: a scan of the mask's words where it lies, a
    write per banned id, any float dtype); on other devices the masks packed into one bitmask,
    one bit unpack and masked fill for all rows. Nothing is kept per mask.
    """

    def __init__(self, vocabulary: Vocabulary, *, format: str | None = None, dense: bool | None = None) -> None:
        if format is not None and format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
        self.vocabulary = vocabulary
        self.format = format or detect_format(vocabulary.special_tokens)
        self.dense = dense
        """Application strategy: None picks by device (the in-place kernel on CPU, dense elsewhere)."""
        self.vocab_size = vocabulary.vocab_size
        self.words = (self.vocab_size + 31) // 32
        self.rows: dict[int, _Row] = {}
        self._bitmask = np.zeros((8, self.words), dtype=np.int32)
        self._stop_rows: dict[tuple[int, ...], np.ndarray] = {}
        self._warned: set[str] = set()

    # ---- rows --------------------------------------------------------------------------------

    def add(self, key: int, settings: RequestSettings | None, prompt_ids: Sequence[int] | None,
            name: str = "") -> bool:
        """Make (or clear) row ``key`` for a new request; True when it is constrained.

        Never raises: a declaration that cannot be compiled (tools read from the prompt, or
        explicit ones validated in another format, or a ``format`` the tokenizer lacks the
        tokens of) leaves the row unconstrained and is logged."""
        self.rows.pop(key, None)
        try:
            if settings is not None and not settings.enabled:
                return False
            if settings is None:
                settings = RequestSettings()
            fmt = settings.format or self.format
            tools = settings.tools
            prompt = list(prompt_ids) if prompt_ids is not None else None
            if tools is None:
                if not prompt:
                    return False
                tools = family_of(fmt).prompt_function("read_tool_declaration", "declaration reader")(
                    prompt, self.vocabulary)
                if not tools:
                    return False
            compiled = compile_tools(tools, self.vocabulary, format=fmt, tool_choice=settings.tool_choice,
                                     parallel_tool_calls=settings.parallel_tool_calls)
            matcher = compiled.matcher(prompt_ids=prompt, first_call_index=settings.first_call_index)
        except Exception as exc:  # noqa: BLE001 - an engine step must never fail for one request
            logger.warning("enforcer: request %s is not constrained: %s", name or key, exc)
            return False
        self.rows[key] = _Row(matcher, name or str(key), self._stop_row(compiled))
        return True

    def remove(self, key: int) -> None:
        self.rows.pop(key, None)

    def move(self, a: int, b: int, swap: bool) -> None:
        """Row ``a`` goes to ``b`` (``b``'s row is dropped); with ``swap`` they trade places."""
        ra = self.rows.pop(a, None)
        rb = self.rows.pop(b, None)
        if ra is not None:
            self.rows[b] = ra
        if swap and rb is not None:
            self.rows[a] = rb

    def _stop_row(self, compiled: CompiledTools) -> np.ndarray:
        """The packed mask row of ``compiled``'s stop tokens (one per distinct stop set)."""
        ids = tuple(compiled.stop_token_ids)
        stop = self._stop_rows.get(ids)
        if stop is None:
            stop = np.zeros(self.words, dtype=np.int32)
            for t in ids:
                stop.view(np.uint32)[t >> 5] |= np.uint32(1 << (t & 31))
            stop.setflags(write=False)
            self._stop_rows[ids] = stop
        return stop

    def advance(self, key: int, tokens: Sequence[int]) -> None:
        """Feed row ``key`` the tokens of ``tokens`` (the whole output so far) it has not seen."""
        row = self.rows.get(key)
        if row is None:
            return
        for token in tokens[row.seen:]:
            if row.state == _RELEASED:
                return
            self._feed(row, token)

    def feed(self, key: int, token: int) -> None:
        """Feed row ``key`` its next generated token."""
        row = self.rows.get(key)
        if row is not None and row.state != _RELEASED:
            self._feed(row, token)

    def _feed(self, row: _Row, token: int) -> None:
        """A token the matcher refuses (something after the processor changed the choice) holds
        the row to the stop token; a placeholder (-1) releases it; the stop token ends it."""
        if token < 0:
            self._release(row, "its output tokens are placeholders (async scheduling without output "
                               "ids: pass the processor with --logits-processors or use Model Runner V2)")
            return
        row.seen += 1
        if row.state != _ACTIVE:
            return
        if not row.matcher.accept_token(token):
            self._warn_once(f"refused:{row.name}", "enforcer: request %s sampled token %d, which the "
                            "enforcer had not allowed; holding it to the stop token", row.name, token)
            row.state = _STOPPING
        elif row.matcher.is_finished:
            row.state = _RELEASED  # the turn is over; what follows is not a tool call

    def _release(self, row: _Row, why: str) -> None:
        row.state = _RELEASED
        self._warn_once(f"released:{why}", "enforcer: request %s is no longer constrained: %s", row.name, why)

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message, *args)

    # ---- masks -------------------------------------------------------------------------------

    def constrain(self, logits: torch.Tensor, targets: Sequence[tuple[int, int]]) -> torch.Tensor:
        """Mask ``logits`` (modified in place and returned) for ``(logits_row, key)`` pairs.

        Never raises: on an internal error the logits are returned as they are (those rows are
        released) and the error is logged once."""
        if not targets:
            return logits
        try:
            self._check_logits(logits)
            width = logits.shape[-1]
            kept = [(logits_row, self.rows[key]) for logits_row, key in targets if self.rows[key].state != _RELEASED]
            # mask i belongs to logits row kept[i][0]
            masks = [row.matcher.mask_words() if row.state == _ACTIVE else row.stop for _, row in kept]
            for i, (_, row) in enumerate(kept):
                if not allows_any(masks[i], width):
                    self._warn_once(f"empty:{row.name}", "enforcer: request %s reached a state that allows no "
                                    "token (%s); holding it to the stop token", row.name, row.matcher.error)
                    row.state = _STOPPING
                    masks[i] = row.stop
            self._apply_masks(logits, [logits_row for logits_row, _ in kept], masks)
        except Exception as exc:  # noqa: BLE001 - never fail the engine step
            self._warn_once(f"error:{type(exc).__name__}", "enforcer: masking failed (%r); the rows of this step "
                            "are released", exc)
            for _, key in targets:
                row = self.rows.get(key)
                if row is not None:
                    row.state = _RELEASED
        return logits

    def constrain_drafts(self, logits: torch.Tensor, requests: Sequence["DraftRows"]) -> torch.Tensor:
        """Mask the rows of requests that own several rows (speculative decoding): row ``j`` of
        a request gets the mask after its committed tokens and its first ``j`` drafts. A
        scratch walk advances the matcher by the drafts and rolls it back; nothing of the walk
        stays. Where the walk stops (a placeholder draft, a draft the matcher refuses, a state
        that allows nothing) the later rows get the stop-token mask: vLLM rejects such a draft
        (its own row banned it, or it is a placeholder), so those rows are never sampled, and
        if something forced the draft in anyway the request is held to the stop token like any
        refused token. Rows after a draft that ends the turn are left as they are (the turn is
        over). One-row requests get exactly :meth:`constrain`'s masks.

        Never raises (as :meth:`constrain`). Cost per row: one ``accept_token`` and one
        ``fill_bitmask`` (drafts), plus the mask lookup and write of :meth:`constrain`."""
        rows = [r for r in requests if r.key in self.rows and self.rows[r.key].state != _RELEASED]
        if not rows:
            return logits
        try:
            self._check_logits(logits)
            width = logits.shape[-1]
            picked: list[int] = []  # logits rows; mask i belongs to picked[i]
            masks: list[np.ndarray] = []
            for request in rows:
                row = self.rows[request.key]
                matcher, walked, walking = row.matcher, 0, row.state == _ACTIVE
                for j, logits_row in enumerate(request.logits_rows):
                    if j and walking:
                        if j > len(request.drafts) or not matcher.accept_token(request.drafts[j - 1]):
                            walking = False
                        else:
                            walked += 1
                            if matcher.is_finished:
                                break  # the turn ends with this draft: later rows are free
                    words = matcher.mask_words() if walking else row.stop
                    if not allows_any(words, width):
                        if not walked:  # the committed state itself: as in constrain()
                            self._warn_once(f"empty:{row.name}", "enforcer: request %s reached a state that allows "
                                            "no token (%s); holding it to the stop token", row.name, matcher.error)
                            row.state = _STOPPING
                        walking = False
                        words = row.stop
                    masks.append(words)
                    picked.append(logits_row)
                matcher.rollback(walked)
            self._apply_masks(logits, picked, masks)
        except Exception as exc:  # noqa: BLE001 - never fail the engine step
            self._warn_once(f"error:{type(exc).__name__}", "enforcer: masking failed (%r); the rows of this step "
                            "are released", exc)
            for request in rows:
                self.rows[request.key].state = _RELEASED
        return logits

    def _apply_masks(self, logits: torch.Tensor, picked: list[int], masks: list[np.ndarray]) -> None:
        """Write ``masks[i]`` (packed words) into logits row ``picked[i]``: on the CPU by the
        compiled in-place kernel, each mask read where it lies
        (:func:`~enforcer.logits.mask_rows_from_words`); packed into one bitmask and applied dense
        on an accelerator, for strided logits, or as ``dense`` says."""
        if not picked:
            return
        on_host = logits.device.type == "cpu" and logits.is_contiguous()
        if not on_host if self.dense is None else self.dense:
            bitmask = self._rows_bitmask(len(masks))
            for i, words in enumerate(masks):
                bitmask[i] = words
            self._apply_dense(logits, picked, bitmask)
        else:
            mask_rows_from_words(logits, picked, masks)

    def _check_logits(self, logits: torch.Tensor) -> None:
        """Refuse logits wider than the vocabulary."""
        if logits.shape[-1] > self.vocab_size:
            raise ValueError(f"logits have {logits.shape[-1]} columns, the vocabulary {self.vocab_size}")

    def _rows_bitmask(self, n: int) -> np.ndarray:
        if self._bitmask.shape[0] < n:
            self._bitmask = np.zeros((max(n, 2 * self._bitmask.shape[0]), self.words), dtype=np.int32)
        return self._bitmask

    def _apply_dense(self, logits: torch.Tensor, picked: Sequence[int], bitmask: np.ndarray) -> None:
        """Accelerators: upload the packed rows once (row i of ``bitmask`` is ``picked[i]``'s),
        unpack them on the device, one masked fill."""
        rows = torch.tensor(picked, dtype=torch.int64, device=logits.device)
        packed = torch.from_numpy(bitmask[:len(picked)]).to(logits.device, non_blocking=True)
        keep = allowed_on_device(packed, logits.shape[-1])
        sub = logits.index_select(0, rows).masked_fill_(~keep, float("-inf"))
        logits.index_copy_(0, rows, sub)


# --------------------------------------------------------------------------------------------
# The vLLM processor (V1 and Model Runner V2)

_LIVE: "weakref.WeakValueDictionary[int, ToolCallLogitsProcessor]" = weakref.WeakValueDictionary()


def _settings_or_none(params: SamplingParams, name: str) -> tuple[bool, RequestSettings | None]:
    """(usable, settings): unusable settings (only possible when validation was bypassed) leave
    the request unconstrained, with a warning."""
    try:
        return True, read_settings(params.extra_args)
    except ValueError as exc:
        logger.warning("enforcer: request %s is not constrained: %s", name, exc)
        return False, None


class _V2Request(NamedTuple):
    """A constrained request's rows in one V2 ``apply`` call."""

    slot: int
    rows: list[int]
    """Logits rows by draft position (row 0 first)."""
    fed: list[int]
    """The token fed at each row: row 0 the newest committed one, row ``j`` draft ``j - 1``
    (-1: a placeholder draft, during prefill)."""
    position: int
    """Position in the sequence of row 0's token."""


def _v2_layout(num_rows: int, slots: list[int], ctx: Any, constrained: Container[int]) -> list[_V2Request]:
    """The rows of the ``constrained`` slots among ``slots`` (``ctx.idx_mapping_np``). One row
    per request: the layout is ``slots`` itself, and only those rows' tokens and positions are
    copied. Otherwise (drafts) ``ctx.expanded_idx_mapping``, ``expanded_local_pos``,
    ``input_ids`` and ``pos`` of every row come over in one copy (4 ints a row). Raises
    ``ValueError`` when a request's draft positions are not ``0..k``."""
    if num_rows == len(slots):
        mine = [(r, s) for r, s in enumerate(slots) if s in constrained]
        index = torch.tensor([r for r, _ in mine], dtype=torch.int64, device=ctx.input_ids.device)
        fed, pos = torch.stack((ctx.input_ids.index_select(0, index).long(),
                                ctx.pos.index_select(0, index).long())).cpu().tolist()
        return [_V2Request(s, [r], [t], p) for (r, s), t, p in zip(mine, fed, pos)]
    host = torch.stack((ctx.expanded_idx_mapping[:num_rows].long(), ctx.expanded_local_pos[:num_rows].long(),
                        ctx.input_ids[:num_rows].long(), ctx.pos[:num_rows].long())).cpu().tolist()
    by_slot: dict[int, list[tuple[int, int, int, int]]] = {}
    for r, (s, j, t, p) in enumerate(zip(*host)):
        if s in constrained:
            by_slot.setdefault(s, []).append((j, r, t, p))
    out = []
    for s, entries in by_slot.items():
        entries.sort()
        if [j for j, _, _, _ in entries] != list(range(len(entries))):
            raise ValueError(f"the rows of slot {s} have draft positions {[j for j, _, _, _ in entries]}")
        out.append(_V2Request(s, [r for _, r, _, _ in entries], [t for _, _, t, _ in entries], entries[0][3]))
    return out


def _draft_prefix(tokens: Sequence[int]) -> list[int]:
    """``tokens`` up to the first placeholder (a negative id)."""
    for i, token in enumerate(tokens):
        if token < 0:
            return list(tokens[:i])
    return list(tokens)


class ToolCallLogitsProcessor(V1LogitsProcessor, V2LogitsProcessor):
    """Enforces the tool calls of the engine tokenizer's format family (Kimi K2, Kimi K3,
    Qwen3, DeepSeek-V3.1: any in :mod:`enforcer.formats.registry`), per request, in a vLLM
    engine (V1 and Model Runner V2).

    Enabled by installing the package (entry point ``vllm.logits_processors``) or explicitly:
    ``LLM(..., logits_processors=[ToolCallLogitsProcessor])`` /
    ``--logits-processors enforcer.integrations.vllm:ToolCallLogitsProcessor``. A second
    instance for the same engine (entry point and explicit) stays inert. Lifetime: one per
    engine worker; construction reads the tokenizer once (cached across instances).
    """

    def __init__(self, vllm_config: Any, device_or_states: Any, is_pin_memory: bool | None = None) -> None:
        self._v2_states = device_or_states if hasattr(device_or_states, "all_token_ids") else None
        self._vllm_config = vllm_config  # held: its id keys the one-active-copy rule below
        self.core: BatchEnforcer | None = None
        self._pending: dict[int, RequestSettings | None] = {}
        self._prompt_lens: dict[int, int] = {}
        self._outputs: dict[int, list[int]] = {}
        self._step = 0
        """V2: steps seen (``apply_staged_writes`` runs once per step, before the forward pass)."""
        self._drafts: dict[int, tuple[int, list[int]]] = {}
        """V2: per slot, the step and the drafts its rows were fed at its last ``apply``."""
        if _disabled():
            logger.info("enforcer: %s is set; tool calls are not enforced", DISABLE_ENV)
            return
        owner = _LIVE.get(id(vllm_config))
        if owner is not None and owner is not self:
            logger.info("enforcer: the tool-call processor is already active for this engine; this copy stays inert")
            return
        try:
            vocabulary = load_vocabulary(vllm_config.model_config)
        except Exception as exc:  # noqa: BLE001 - a model we cannot serve must still start
            logger.info("enforcer: tool calls are not enforced for this model: %s", exc)
            return
        self.core = BatchEnforcer(vocabulary)
        logger.info("enforcer: enforcing %s tool calls", self.core.format)
        _LIVE[id(vllm_config)] = self

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        """Reject bad settings and bad explicit tool declarations (``ValueError``: HTTP 400)."""
        if _disabled():
            return
        settings = read_settings(sampling_params.extra_args)
        if settings is not None:
            validate_settings(settings)

    def is_argmax_invariant(self) -> bool:
        return False

    # ---- V1 -----------------------------------------------------------------------------------

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        """V1: removed, then added (``output_ids`` is the live list the engine appends to),
        then moved. Constrained rows keep a reference to their output list."""
        core = self.core
        if core is None or batch_update is None:
            return
        for index in batch_update.removed:
            core.remove(index)
            self._outputs.pop(index, None)
        for index, params, prompt_ids, output_ids in batch_update.added:
            self._outputs.pop(index, None)
            usable, settings = _settings_or_none(params, str(index))
            if usable and core.add(index, settings, prompt_ids, name=f"at batch index {index}"):
                self._outputs[index] = output_ids
        for a, b, direction in batch_update.moved:
            swap = direction == MoveDirectionality.SWAP
            core.move(a, b, swap)
            oa, ob = self._outputs.pop(a, None), self._outputs.pop(b, None)
            if oa is not None:
                self._outputs[b] = oa
            if swap and ob is not None:
                self._outputs[a] = ob

    def apply(self, logits: torch.Tensor, ctx: Any = None) -> torch.Tensor:
        """V1 (``ctx`` None): mask every constrained row of the batch. V2: see :meth:`_apply_v2`."""
        core = self.core
        if core is None or not core.rows:
            return logits
        if ctx is not None:
            return self._apply_v2(logits, ctx)
        targets = []
        n = logits.shape[0]
        for index, outputs in self._outputs.items():
            if index < n:
                core.advance(index, outputs)
                targets.append((index, index))
        return core.constrain(logits, targets)

    # ---- Model Runner V2 ----------------------------------------------------------------------

    def add_request(self, req_idx: int, sampling_params: SamplingParams) -> bool:
        """V2: remember the request's settings; its prompt is read in :meth:`apply_staged_writes`.
        True unless the request opted out (the prompt may declare tools)."""
        core = self.core
        if core is None:
            return False
        core.remove(req_idx)
        self._pending.pop(req_idx, None)
        self._drafts.pop(req_idx, None)
        usable, settings = _settings_or_none(sampling_params, f"in slot {req_idx}")
        if not usable or (settings is not None and not settings.enabled):
            return False
        self._pending[req_idx] = settings
        return True

    def apply_staged_writes(self) -> None:
        """V2: build the matchers of the requests added this step from their prompt (and the
        output a resumed request already has), read back from the device once per request."""
        self._step += 1
        core, states = self.core, self._v2_states
        if core is None or states is None or not self._pending:
            return
        pending, self._pending = self._pending, {}
        for slot, settings in pending.items():
            try:
                prompt_len = int(states.prompt_len.np[slot])
                filled = int(states.prefill_len.np[slot])
                ids = states.all_token_ids.gpu[slot, :filled].tolist()
            except Exception as exc:  # noqa: BLE001
                logger.warning("enforcer: the prompt of slot %d cannot be read (%r); not constrained", slot, exc)
                continue
            if core.add(slot, settings, ids[:prompt_len], name=f"in slot {slot}"):
                self._prompt_lens[slot] = prompt_len
                core.advance(slot, ids[prompt_len:])

    def _apply_v2(self, logits: torch.Tensor, ctx: Any) -> torch.Tensor:
        """V2: mask the rows of the constrained requests among this call's ``ctx.idx_mapping_np``
        (one call per step, or several on disjoint groups of whole requests when vLLM verifies
        drafts in chunks). With speculative decoding a request owns rows ``0..k``: row 0 follows
        its committed tokens, row ``j`` its first ``j`` drafts (:meth:`BatchEnforcer.constrain_drafts`).

        The layout (row -> slot, draft position, fed token, position) comes from the device in
        one small copy per call; committed tokens follow from it (:meth:`_v2_catch_up`)."""
        core = self.core
        assert core is not None
        slots = ctx.idx_mapping_np.tolist()
        if not any(s in core.rows for s in slots):
            return logits
        try:
            layout = _v2_layout(logits.shape[0], slots, ctx, core.rows)
        except Exception as exc:  # noqa: BLE001 - never fail the engine step
            for slot in slots:
                if slot in core.rows:
                    core._release(core.rows[slot], f"the batch layout cannot be read ({exc!r})")
            return logits
        requests = []
        for slot, rows, fed, position in layout:
            self._v2_catch_up(slot, fed[0], position)
            drafts = _draft_prefix(fed[1:])
            self._drafts[slot] = (self._step, drafts)
            requests.append(DraftRows(slot, rows, drafts))
        return core.constrain_drafts(logits, requests)

    def _v2_catch_up(self, slot: int, fed: int, position: int) -> None:
        """Feed slot's matcher the tokens committed since it last saw it: row 0 was fed the
        newest one, at ``position``; the ones before it are the drafts vLLM accepted from the
        slot's rows of the previous step, when this processor saw them (with the batch split
        across ranks another rank may have sampled it: then they are read from the device)."""
        core = self.core
        assert core is not None
        row = core.rows[slot]
        prompt_len = self._prompt_lens.get(slot, 0)
        gap = position + 1 - prompt_len - row.seen
        if gap <= 0:  # prefill, or no new token since the last call
            return
        step, accepted = self._drafts.get(slot, (-1, []))
        if gap == 1 or (step == self._step - 1 and gap - 1 <= len(accepted)):
            tokens = [*accepted[: gap - 1], fed]
        else:
            try:
                start = prompt_len + row.seen
                tokens = self._v2_states.all_token_ids.gpu[slot, start: position + 1].tolist()
            except Exception as exc:  # noqa: BLE001 - never fail the engine step
                core._release(row, f"its committed tokens cannot be read ({exc!r})")
                return
        for token in tokens:
            core.feed(slot, token)


# --------------------------------------------------------------------------------------------
# Engines the processor cannot act in: requests that ask for enforcement are refused


def unenforceable_reason(vllm_config: Any) -> str | None:
    """Why the processor cannot constrain anything in an engine of ``vllm_config``, or None.

    In vLLM 0.32, on the V1 model runner:

    - with speculative decoding, ``build_logitsprocs``
      (``vllm/v1/sample/logits_processor/__init__.py``) builds no custom processor at all, and
      structured-output backends are a closed list (``StructuredOutputsConfig.backend``,
      ``StructuredOutputManager.grammar_init``), so no plugin can constrain the draft rows;
    - with async scheduling, the output lists a processor loaded from the entry point sees
      hold placeholders (``InputBatch.update_async_output_token_ids`` fills them only when
      custom processors were passed explicitly or a request needs output ids).

    TPUs: ``_load_custom_logitsprocs`` loads none. Cost: a few attribute reads."""
    if not getattr(vllm_config, "use_v2_model_runner", False):
        spec = getattr(vllm_config, "speculative_config", None)
        if spec is not None:
            return (f"speculative decoding ({getattr(spec, 'method', None) or 'on'}) runs on vLLM's V1 model runner "
                    "here, which loads no custom logits processors when speculation is on (build_logitsprocs) and "
                    "takes no structured-output backend from plugins; run Model Runner V2 "
                    "(VLLM_USE_V2_MODEL_RUNNER=1) or turn speculative decoding off")
        scheduler = getattr(vllm_config, "scheduler_config", None)
        if getattr(scheduler, "async_scheduling", False) and not _passed_explicitly(vllm_config):
            return ("async scheduling on vLLM's V1 model runner gives a logits processor loaded from the entry point "
                    "placeholder output tokens; pass it explicitly (--logits-processors "
                    "enforcer.integrations.vllm:ToolCallLogitsProcessor), or run Model Runner V2, or "
                    "--no-async-scheduling")
    try:
        from vllm.platforms import current_platform

        if current_platform.is_tpu():
            return "vLLM loads no custom logits processors on TPUs"
    except Exception:  # noqa: BLE001 - a platform we cannot ask is not a TPU we know of
        pass
    return None


def _passed_explicitly(vllm_config: Any) -> bool:
    """The engine's ``logits_processors`` name this processor (class or its FQCN)."""
    named = getattr(getattr(vllm_config, "model_config", None), "logits_processors", None) or ()
    return any(p is ToolCallLogitsProcessor or (isinstance(p, type) and issubclass(p, ToolCallLogitsProcessor))
               or p == f"{__name__}:{ToolCallLogitsProcessor.__name__}" for p in named)


class AdmissionGuard:
    """Refuses, at admission, the requests an engine would leave unenforced although they ask
    for enforcement (settings, or a prompt that declares tools): never a silently
    unconstrained tool call. One per vLLM ``InputProcessor`` of an engine with an
    :func:`unenforceable_reason`; the decision is the processor's own (:meth:`BatchEnforcer.add`
    on the engine's vocabulary, loaded at the first request, ~0.3 s once), so exactly the
    requests the processor would have constrained are refused. Thread-safe (vLLM processes
    inputs on a thread pool)."""

    def __init__(self, model_config: Any, reason: str) -> None:
        self.model_config = model_config
        self.reason = reason
        self._core: BatchEnforcer | None = None
        self._inert = False
        self._lock = threading.Lock()

    @classmethod
    def for_engine(cls, vllm_config: Any) -> "AdmissionGuard | None":
        """The guard of an engine, or None where the processor can act; logs the limitation
        as an error when there is one (engine start)."""
        reason = unenforceable_reason(vllm_config)
        if reason is None or _disabled():
            return None
        logger.error("enforcer: tool calls cannot be enforced in this engine: %s. Requests that ask for "
                     "enforced tool calls will be refused.", reason)
        return cls(vllm_config.model_config, reason)

    def refusal(self, params: Any, prompt_ids: Sequence[int] | None) -> str | None:
        """The message a request is refused with, or None when it asks for no enforcement
        (no settings and no declaration, ``enabled: false``, a model that is not Kimi's)."""
        if not isinstance(params, SamplingParams) or _disabled():
            return None
        settings = read_settings(params.extra_args)
        if settings is not None and not settings.enabled:
            return None
        with self._lock:
            if self._core is None and not self._inert:
                try:
                    self._core = BatchEnforcer(load_vocabulary(self.model_config))
                except Exception:  # noqa: BLE001 - the processor is inert for this model too
                    self._inert = True
            if self._core is None or not self._core.add(0, settings, prompt_ids, name="at admission"):
                return None
            self._core.remove(0)
        asked = "its enforcer settings" if settings is not None else "the tools its prompt declares"
        return (f"enforcer: this request asks for enforced tool calls ({asked}), which this engine cannot "
                f"enforce: {self.reason}. To run it unconstrained, send extra_args[{SETTINGS_KEY!r}] = "
                f"{{\"enabled\": false}} (vllm_xargs over HTTP).")


def install_admission_guard() -> None:
    """Wrap vLLM's ``InputProcessor`` so that each engine gets its :class:`AdmissionGuard`
    (made, and the limitation logged, when the engine's input processor is built) and each
    request it refuses fails in ``process_inputs`` with ``VLLMValidationError`` (HTTP 400 on
    the server, an exception from ``LLM.generate``). Idempotent; never raises."""
    try:
        from vllm.exceptions import VLLMValidationError
        from vllm.v1.engine.input_processor import InputProcessor

        if getattr(InputProcessor.process_inputs, "_enforcer_guarded", False):
            return
        original_init, original_process = InputProcessor.__init__, InputProcessor.process_inputs

        @functools.wraps(original_init)
        def __init__(self: Any, vllm_config: Any, *args: Any, **kwargs: Any) -> None:
            original_init(self, vllm_config, *args, **kwargs)
            self._enforcer_guard = AdmissionGuard.for_engine(vllm_config)

        @functools.wraps(original_process)
        def process_inputs(self: Any, *args: Any, **kwargs: Any) -> Any:
            request = original_process(self, *args, **kwargs)
            guard = getattr(self, "_enforcer_guard", None)
            if guard is not None:
                message = guard.refusal(request.sampling_params, request.prompt_token_ids)
                if message is not None:
                    raise VLLMValidationError(message, parameter="extra_args.enforcer")
            return request

        process_inputs._enforcer_guarded = True  # type: ignore[attr-defined]
        InputProcessor.__init__ = __init__  # type: ignore[method-assign]
        InputProcessor.process_inputs = process_inputs  # type: ignore[method-assign]
    except Exception as exc:  # noqa: BLE001 - a plugin must not stop vLLM from starting
        logger.error("enforcer: the admission guard could not be installed (%r): requests that ask for enforced "
                     "tool calls in an engine that cannot enforce them (speculative decoding on the V1 model "
                     "runner) will not be refused", exc)


# --------------------------------------------------------------------------------------------
# The tool parser plugin (entry point ``vllm.general_plugins``)

TOOL_PARSER_NAME = "kimi_k2_enforced"
K3_TOOL_PARSER_NAME = "kimi_k3_enforced"


def _tool_parsers() -> dict[str, tuple[str, str]]:
    """Parser name -> (the registered tool parser class, the id-based parser the lookup routes
    to), both in :mod:`enforcer.integrations.vllm_tool_parser`: one pair per format family."""
    return {family.tool_parser_name: (f"{family.parser_class}EnforcedToolParser", f"{family.parser_class}EnforcedParser")
            for family in families()}


def register_tool_parser() -> None:
    """The package's ``vllm.general_plugins`` entry point (runs in every vLLM process):
    :func:`install_admission_guard`, then register one ``{family}_enforced`` tool parser per
    format family (``kimi_k2_enforced``, ``kimi_k3_enforced``, ...; lazily: no parser module is
    imported here) and route the server's parser lookup for those names to the id-based
    ``{Family}EnforcedParser`` of :mod:`enforcer.integrations.vllm_tool_parser` (vLLM otherwise
    wraps every tool parser in a text-based composition). Idempotent; never raises (a vLLM
    whose layout changed keeps working without the routing)."""
    install_admission_guard()
    try:
        from vllm.parser.parser_manager import ParserManager
        from vllm.tool_parsers import ToolParserManager

        parsers = _tool_parsers()
        for name, (tool_parser, _) in parsers.items():  # vLLM's own plugin API for tool parsers
            ToolParserManager.register_lazy_module(name, "enforcer.integrations.vllm_tool_parser", tool_parser)
        # Why the lookup is still wrapped (vLLM 0.32.0, re-read in vllm/parser/parser_manager.py,
        # vllm/parser/abstract_parser.py, vllm/tool_parsers/abstract_tool_parser.py and
        # vllm/parser/engine/adapters.py): every plugin API registers ToolParser classes only
        # (ToolParserManager.register_module / register_lazy_module, used above;
        # --tool-parser-plugin, which imports a module that calls them; vllm.general_plugins, how
        # this function runs). ParserManager has no registry: get_parser -> _compose_parser builds
        # the server's Parser class itself, special cases hard-coded by name (harmony, hf,
        # kimi_k3, cohere_command3/4, minicpmv), else a DelegatingParser subclass around the
        # registered tool parser. The serving layer hands that Parser the output token ids
        # (parse(..., model_output_token_ids=...)), but DelegatingParser.parse -> _extract_tool_calls
        # hands the tool parser the *text* only (ToolParser.extract_tool_calls(model_output,
        # request)); vLLM's own id-aware parser engines reach it through the same door
        # (ParserEngineToolAdapter.extract_tool_calls takes model_output text). The ids are the only
        # way to tell a marker from text that spells it, and no registrable class receives them in
        # a non-streaming response. So for our names alone the composed class is swapped for the
        # id-based _EnforcedParser; every other name gets vLLM's own class untouched. The wrap is
        # installed once (idempotent) and keeps vLLM's tool_strict_level.
        original = ParserManager.__dict__["get_parser"].__func__
        if getattr(original, "_enforcer_routed", False):
            return

        def get_parser(cls: Any, *args: Any, **kwargs: Any) -> Any:
            parser = original(cls, *args, **kwargs)
            name = kwargs.get("tool_parser_name", args[0] if args else None)
            if parser is None or name not in parsers or getattr(parser, "tool_parser_cls", None) is None:
                return parser
            from . import vllm_tool_parser

            routed = getattr(vllm_tool_parser, parsers[name][1])
            return type(routed.__name__.replace("Parser", "ServerParser"), (routed,),
                        {"tool_strict_level": getattr(parser, "tool_strict_level", routed.tool_strict_level)})

        get_parser._enforcer_routed = True  # type: ignore[attr-defined]
        ParserManager.get_parser = classmethod(get_parser)  # type: ignore[method-assign]
    except Exception as exc:  # noqa: BLE001 - a plugin must not stop vLLM from starting
        logger.warning("enforcer: the %s tool parsers could not be registered: %r", "/".join(_tool_parsers()), exc)
