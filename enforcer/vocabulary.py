"""Token id -> exact bytes, for every id a model can emit.

A :class:`Vocabulary` is built once per tokenizer (well under a second for 150k ids), is
immutable, and is shared by every compiled constraint and every request. It knows three kinds
of ids:

* text ids: ``token_bytes(id)`` is the exact byte string the token stands for (a token may hold
  a fragment of a UTF-8 character);
* special and added tokens (``special_ids``): never text, ``token_bytes`` is ``None``; reachable
  by name with :meth:`Vocabulary.token_id`;
* ids the tokenizer does not define (holes, and ids past the tokenizer up to the model's logits
  width ``vocab_size``): ``None``, never allowed.

Readers (chosen from the tokenizer's shape, never by encoding text):

* a ``tiktoken.Encoding``, bare or held by a slow ``transformers`` tokenizer (Kimi's
  ``TikTokenTokenizer`` keeps it in ``.model``): ranks read with ``decode_single_token_bytes``;
* a ``tokenizers`` model (fast ``transformers`` tokenizers, or a bare ``tokenizers.Tokenizer``)
  with a byte-level decoder: the GPT-2 byte-to-unicode mapping reversed;
* the same with SentencePiece-style byte fallback: ``<0xHH>`` pieces are that byte and the
  metaspace ``▁`` is a space.
Anything else raises :class:`~enforcer.errors.TokenizerError` instead of guessing.
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
import re
import struct
import tempfile
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from .errors import TokenizerError

__all__ = ["Vocabulary", "FORMAT_VERSION", "cache_dir", "bytes_to_unicode"]

FORMAT_VERSION = 1
"""Version of the on-disk format written by :meth:`Vocabulary.save`."""

PIECE_MEMO_SIZE = 65_536
"""Most tag pieces a vocabulary remembers the encoding of (:meth:`Vocabulary.encode_piece`)."""
_MAGIC = b"toolcall-enforcer vocabulary\n"
_NONE = -1  # length stored for ids that are not text

_TIKTOKEN_ATTRIBUTES = ("model", "encoding", "tokenizer", "_model", "_encoding", "_tokenizer")
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def cache_dir() -> Path:
    """Directory for cached artefacts: ``$ENFORCER_CACHE_DIR`` or ``~/.cache/toolcall-enforcer``.

    Not created here; writers create it when they first store something.
    """
    env = os.environ.get("ENFORCER_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "toolcall-enforcer"


def bytes_to_unicode() -> dict[int, str]:
    """The GPT-2 byte-level alphabet: byte value -> the printable character that stands for it.

    Printable Latin-1 bytes stand for themselves; the other 68 bytes are shifted to U+0100 and up,
    in byte order.
    """
    keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {b: chr(b) for b in keep}
    shifted = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(0x100 + shifted)
            shifted += 1
    return table


def _byte_level_table() -> dict[int, str]:
    """``str.translate`` table: byte-level character -> the Latin-1 character of its byte.

    Characters below U+0100 that are *not* in the alphabet (raw spaces, controls) map to U+FFFF,
    so that a token holding one fails the Latin-1 encoding instead of passing silently.
    """
    table: dict[int, str] = {cp: "\uffff" for cp in range(256)}
    for byte, char in bytes_to_unicode().items():
        table[ord(char)] = chr(byte)
    return table


class Vocabulary:
    """Exact bytes of every token id of one tokenizer, padded to the model's logits width.

    Immutable and shared; build it once per tokenizer with :meth:`from_tokenizer` (or
    :meth:`load` a saved one).
    """

    def __init__(
        self,
        byte_tokens: Sequence[bytes | None],
        specials: Iterable[tuple[str, int]],
        *,
        source: str = "",
        encoder: Callable[[str], list[int]] | None = None,
    ) -> None:
        """Wrap ``byte_tokens`` (index = id; length = logits width) and ``(name, id)`` specials.

        The ids of ``specials`` become non-text whatever ``byte_tokens`` says. When one name
        appears at several ids, :meth:`token_id` answers the lowest. Cost: one pass over the ids.
        """
        tokens = list(byte_tokens)
        size = len(tokens)
        if size == 0:
            raise TokenizerError("a vocabulary needs at least one token id")
        if not set(map(type, tokens)) <= {bytes, type(None)}:
            i, value = next((i, v) for i, v in enumerate(tokens) if v is not None and type(v) is not bytes)
            raise TypeError(f"token {i}: expected bytes or None, got {type(value).__name__}")
        pairs = sorted({(int(i), str(name)) for name, i in specials})
        names: dict[str, int] = {}
        for i, name in pairs:
            if not 0 <= i < size:
                raise TokenizerError(
                    f"special token {name!r} has id {i}, outside the vocabulary size {size}"
                )
            tokens[i] = None
            names.setdefault(name, i)
        self._tokens: tuple[bytes | None, ...] = tuple(tokens)
        self._pairs: tuple[tuple[int, str], ...] = tuple(pairs)
        self._names: Mapping[str, int] = MappingProxyType(names)
        self._special_ids = frozenset(i for i, _ in pairs)
        self._source = source
        self._encoder = encoder
        self._pieces: dict[str, tuple[int, ...]] = {}
        """:meth:`encode_piece`'s memo (at most ``PIECE_MEMO_SIZE`` entries)."""
        self._lengths, self._blob = _serialise(self._tokens)
        self._fingerprint = _fingerprint(self._lengths, self._blob, self._pairs)

    # ---------------------------------------------------------------------------------------
    # Building

    @classmethod
    def from_token_bytes(
        cls,
        tokens: Sequence[bytes | None],
        special_tokens: Mapping[str, int] | Iterable[tuple[str, int]] = (),
        *,
        vocab_size: int | None = None,
        encode: Callable[[str], list[int]] | None = None,
        source: str = "token bytes",
    ) -> "Vocabulary":
        """A vocabulary from a plain list, without any tokenizer library (as xgrammar's
        ``TokenizerInfo`` takes an encoded vocabulary).

        ``tokens[i]``: the exact bytes of id ``i``, ``None`` for an id that is not text.
        ``special_tokens``: ``{name: id}`` (or ``(name, id)`` pairs) of the control tokens the
        format needs (K2: ``<|tool_calls_section_begin|>`` ... ``<|im_end|>``); their ids are
        never text and may lie past ``tokens``. ``vocab_size``: the logits width (default: enough
        for ``tokens`` and the special ids; wider pads with non-text ids). ``encode``: the tokenizer's text -> ids (nothing special recognised),
        needed only by formats that force tag text in its own tokenization (Kimi K3). Cost: one
        pass over the ids. Raises :class:`TokenizerError` for a special id outside the
        vocabulary or a ``vocab_size`` below ``len(tokens)``.
        """
        listed = list(tokens)
        pairs = list(special_tokens.items() if isinstance(special_tokens, Mapping) else special_tokens)
        needed = max([len(listed), *(int(i) + 1 for _, i in pairs)])
        width = needed if vocab_size is None else vocab_size
        if isinstance(width, bool) or not isinstance(width, int) or width < len(listed):
            raise TokenizerError(f"vocab_size must be an int of at least len(tokens) = {len(listed)}, "
                                 f"got {vocab_size!r}")
        return cls(listed + [None] * (width - len(listed)), pairs, source=source, encoder=encode)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, vocab_size: int | None = None) -> "Vocabulary":
        """Read the exact bytes of every id of ``tokenizer``.

        ``tokenizer``: a ``transformers`` tokenizer (fast, or slow over ``tiktoken``), a bare
        ``tokenizers.Tokenizer`` or a bare ``tiktoken.Encoding``. ``vocab_size``: the model's
        logits width (default: the tokenizer's id count); ids past the tokenizer are ``None``.
        Cost: one pass over the vocabulary, no text is encoded (about 0.2 s for 150k ids).
        Raises :class:`TokenizerError` when the bytes cannot be read exactly.
        """
        text, specials, count, source = _read(tokenizer)
        highest = max([count - 1, *text.keys(), *(i for _, i in specials)])
        needed = highest + 1
        if vocab_size is None:
            vocab_size = needed
        try:
            vocab_size = operator.index(vocab_size)
        except TypeError:
            raise TokenizerError(f"vocab_size must be an int, got {vocab_size!r}") from None
        if vocab_size < needed:
            raise TokenizerError(
                f"vocab_size {vocab_size} is smaller than the tokenizer, whose ids reach {highest}"
            )
        tokens: list[bytes | None] = [None] * vocab_size
        for i, value in text.items():
            tokens[i] = value
        return cls(tokens, specials, source=source, encoder=_text_encoder(tokenizer))

    # ---------------------------------------------------------------------------------------
    # Queries

    @property
    def vocab_size(self) -> int:
        """The logits width: every id is in ``range(vocab_size)``."""
        return len(self._tokens)

    @property
    def byte_tokens(self) -> tuple[bytes | None, ...]:
        """Bytes of every id (index = id, length ``vocab_size``); ``None`` for non-text ids."""
        return self._tokens

    @property
    def special_ids(self) -> frozenset[int]:
        """Ids of special and added tokens (never text)."""
        return self._special_ids

    @property
    def special_tokens(self) -> Mapping[str, int]:
        """Read-only map: special or added token name -> id."""
        return self._names

    @property
    def fingerprint(self) -> str:
        """sha256 (hex) over the bytes of every id, the special names and ids, and vocab_size."""
        return self._fingerprint

    @property
    def source(self) -> str:
        """Free-text description of where the vocabulary was read from (not fingerprinted)."""
        return self._source

    def token_bytes(self, token_id: int) -> bytes | None:
        """Exact bytes of ``token_id``, or ``None`` when it is not text. O(1)."""
        return self._tokens[self._check_id(token_id)]

    def token_id(self, name: str) -> int:
        """Id of the special or added token ``name``; :class:`TokenizerError` if there is none."""
        try:
            return self._names[name]
        except KeyError:
            raise TokenizerError(
                f"the tokenizer has no special or added token {name!r} ({self._source or 'vocabulary'})"
            ) from None

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of the text ids in ``ids``, joined; non-text ids are skipped."""
        tokens = self._tokens
        return b"".join(
            value for value in (tokens[self._check_id(i)] for i in ids) if value is not None
        )

    def encode_text(self, text: str) -> list[int]:
        """The tokenizer's own ids for ``text``, with nothing special recognised (text that spells
        a marker stays text). Formats that force tag text in its canonical tokenization use it at
        compile time; it is never used to find structure. Needs a vocabulary built by
        :meth:`from_tokenizer` (a loaded one has no tokenizer): :class:`TokenizerError` otherwise,
        or when the ids do not spell ``text`` exactly."""
        if self._encoder is None:
            raise TokenizerError("this vocabulary has no tokenizer to encode text with (build it with "
                                 "Vocabulary.from_tokenizer)")
        ids = [int(i) for i in self._encoder(text)]
        if any(not 0 <= i < len(self._tokens) for i in ids) or \
                b"".join(self._tokens[i] or b"\xff\xff" for i in ids) != text.encode("utf-8"):
            raise TokenizerError(f"the tokenizer does not encode {text!r} as text tokens that spell it exactly")
        return ids

    def encode_piece(self, text: str) -> tuple[int, ...]:
        """:meth:`encode_text` of a piece of tag text that compiles meet again and again (a
        tool name, ``' key="'``, an index), remembered for the vocabulary's lifetime: an encode
        is ~10 us, and every new tool set's first call tag encodes its pieces. The memo holds
        at most :data:`PIECE_MEMO_SIZE` pieces (emptied when full). Same errors as
        :meth:`encode_text`."""
        hit = self._pieces.get(text)
        if hit is None:
            hit = tuple(self.encode_text(text))
            if len(self._pieces) >= PIECE_MEMO_SIZE:
                self._pieces.clear()
            self._pieces[text] = hit
        return hit

    def _check_id(self, token_id: int) -> int:
        if not 0 <= token_id < len(self._tokens):
            raise IndexError(f"token id {token_id} is outside the vocabulary [0, {len(self._tokens)})")
        return token_id

    def __repr__(self) -> str:
        return (
            f"Vocabulary(vocab_size={self.vocab_size}, specials={len(self._special_ids)}, "
            f"fingerprint={self._fingerprint[:12]}, source={self._source!r})"
        )

    # ---------------------------------------------------------------------------------------
    # Disk

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the vocabulary to ``path`` (atomically: a temporary file, then a rename)."""
        header = {
            "format_version": FORMAT_VERSION,
            "vocab_size": self.vocab_size,
            "blob_size": len(self._blob),
            "specials": [[i, name] for i, name in self._pairs],
            "fingerprint": self._fingerprint,
            "source": self._source,
        }
        data = b"".join(
            (_MAGIC, json.dumps(header, ensure_ascii=True).encode("ascii"), b"\n", self._lengths, self._blob)
        )
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "Vocabulary":
        """Read a file written by :meth:`save`; the fingerprint is checked against the contents.

        Raises :class:`TokenizerError` for another format version, or a damaged file.
        """
        data = Path(path).read_bytes()
        if not data.startswith(_MAGIC):
            raise TokenizerError(f"{path} is not a toolcall-enforcer vocabulary file")
        end = data.find(b"\n", len(_MAGIC))
        try:
            header = json.loads(data[len(_MAGIC) : end])
        except ValueError as exc:
            raise TokenizerError(f"{path}: unreadable vocabulary header ({exc})") from None
        version = header.get("format_version") if isinstance(header, dict) else None
        if version != FORMAT_VERSION:
            raise TokenizerError(
                f"{path} has vocabulary format version {version!r}; this library reads version "
                f"{FORMAT_VERSION}: rebuild it with Vocabulary.from_tokenizer"
            )
        size, blob_size = int(header["vocab_size"]), int(header["blob_size"])
        start = end + 1
        lengths_end = start + 4 * size
        if len(data) != lengths_end + blob_size:
            raise TokenizerError(f"{path}: truncated or padded vocabulary file")
        lengths = np.frombuffer(data, dtype="<i4", count=size, offset=start)
        blob = memoryview(data)[lengths_end:]
        stops = np.cumsum(np.maximum(lengths, 0), dtype=np.int64)
        if size and int(stops[-1]) != blob_size:
            raise TokenizerError(f"{path}: token lengths do not match the stored bytes")
        tokens: list[bytes | None] = [None] * size
        begin = 0
        for i, (length, stop) in enumerate(zip(lengths.tolist(), stops.tolist())):
            if length != _NONE:
                tokens[i] = bytes(blob[begin:stop])
            begin = stop
        vocab = cls(tokens, [(name, i) for i, name in header["specials"]], source=header.get("source", ""))
        if vocab.fingerprint != header["fingerprint"]:
            raise TokenizerError(f"{path}: contents do not match the stored fingerprint")
        return vocab


# -------------------------------------------------------------------------------------------
# Serialisation shared by save() and the fingerprint


def _serialise(tokens: Sequence[bytes | None]) -> tuple[bytes, bytes]:
    """(little-endian int32 length of each id, ``-1`` for non-text; concatenated bytes)."""
    lengths = np.array([_NONE if t is None else len(t) for t in tokens], dtype="<i4")
    return lengths.tobytes(), b"".join([t for t in tokens if t is not None])


def _fingerprint(lengths: bytes, blob: bytes, pairs: Sequence[tuple[int, str]]) -> str:
    digest = hashlib.sha256()
    digest.update(b"toolcall-enforcer vocabulary fingerprint 1\0")
    digest.update(struct.pack("<Q", len(lengths) // 4))
    digest.update(lengths)
    digest.update(blob)
    for i, name in pairs:
        encoded = name.encode("utf-8")
        digest.update(struct.pack("<QI", i, len(encoded)))
        digest.update(encoded)
    return digest.hexdigest()


# -------------------------------------------------------------------------------------------
# Readers: each returns (text bytes by id, [(name, id)] specials, id count, source)

_Read = tuple[dict[int, bytes], list[tuple[str, int]], int, str]


def _text_encoder(tokenizer: Any) -> Callable[[str], list[int]] | None:
    """A function text -> the tokenizer's ids with no special or added token recognised, or None.

    tiktoken (bare or held by a slow tokenizer): ``encode`` with nothing special allowed. Fast
    tokenizers: normaliser, pre-tokeniser and model of the backend, skipping its added tokens (a
    fast tokenizer's ``split_special_tokens`` leaves added tokens that are not special alone)."""
    encoding = _as_tiktoken(tokenizer) or next(
        (e for e in (_as_tiktoken(getattr(tokenizer, a, None)) for a in _TIKTOKEN_ATTRIBUTES) if e is not None), None)
    if encoding is not None:
        return lambda text: list(encoding.encode(text, disallowed_special=()))
    backend = _as_backend(tokenizer) or _as_backend(getattr(tokenizer, "backend_tokenizer", None))
    if backend is None:
        return None

    def encode(text: str) -> list[int]:
        if backend.normalizer is not None:
            text = backend.normalizer.normalize_str(text)
        pieces = [text] if backend.pre_tokenizer is None else [p for p, _ in backend.pre_tokenizer.pre_tokenize_str(text)]
        return [token.id for piece in pieces for token in backend.model.tokenize(piece)]

    return encode


def _read(tokenizer: Any) -> _Read:
    encoding = _as_tiktoken(tokenizer)
    if encoding is not None:
        return _read_tiktoken(encoding)
    backend = _as_backend(tokenizer)
    if backend is not None:
        return _read_backend(backend, f"tokenizers {type(backend.model).__name__}")
    held = next(
        (e for e in (_as_tiktoken(getattr(tokenizer, a, None)) for a in _TIKTOKEN_ATTRIBUTES) if e is not None),
        None,
    )
    fast = getattr(tokenizer, "backend_tokenizer", None)
    if held is not None:
        text, specials, count, _ = _read_tiktoken(held)
    elif fast is not None and _as_backend(fast) is not None:
        text, specials, count, _ = _read_backend(fast, "")
    else:
        raise TokenizerError(
            f"cannot read exact token bytes from {type(tokenizer).__name__}: supported are "
            "tiktoken-based tokenizers, fast (tokenizers-backed) tokenizers with a byte-level or "
            "byte-fallback model, and bare tiktoken.Encoding / tokenizers.Tokenizer objects"
        )
    specials = specials + _hf_specials(tokenizer)
    try:
        count = max(count, len(tokenizer))
    except TypeError:
        pass
    name = getattr(tokenizer, "name_or_path", "") or ""
    return text, specials, count, f"{type(tokenizer).__name__}({name})" if name else type(tokenizer).__name__


def _as_tiktoken(obj: Any) -> Any:
    """``obj`` if it is a ``tiktoken.Encoding`` (checked without importing tiktoken)."""
    cls = type(obj)
    if cls.__name__ == "Encoding" and cls.__module__.split(".")[0] == "tiktoken":
        return obj
    return None


def _as_backend(obj: Any) -> Any:
    """``obj`` if it is a ``tokenizers.Tokenizer`` (checked without importing tokenizers)."""
    cls = type(obj)
    if cls.__name__ == "Tokenizer" and cls.__module__.split(".")[0] == "tokenizers":
        return obj
    return None


def _read_tiktoken(encoding: Any) -> _Read:
    specials = [(name, encoding.encode_single_token(name)) for name in encoding.special_tokens_set]
    special_ids = {i for _, i in specials}
    count = int(encoding.n_vocab)
    text: dict[int, bytes] = {}
    decode = encoding.decode_single_token_bytes
    for i in range(count):
        if i in special_ids:
            continue
        try:
            text[i] = decode(i)
        except KeyError:  # a hole in the ranks
            continue
    return text, specials, count, f"tiktoken {encoding.name}"


def _decoder_steps(backend: Any) -> list[dict[str, Any]]:
    """The decoder of a ``tokenizers.Tokenizer`` as a flat list of JSON step objects."""
    decoder = backend.decoder
    if decoder is None:
        return []
    steps: list[dict[str, Any]] = []
    pending = [json.loads(decoder.__getstate__())]
    while pending:
        step = pending.pop(0)
        if step.get("type") == "Sequence":
            pending[:0] = step.get("decoders", [])
        else:
            steps.append(step)
    return steps


def _read_backend(backend: Any, source: str) -> _Read:
    model = backend.model
    kind = type(model).__name__
    if kind not in ("BPE", "Unigram", "WordLevel"):
        raise TokenizerError(f"cannot read exact token bytes from a tokenizers {kind} model")
    steps = _decoder_steps(backend)
    types = [step.get("type") for step in steps]
    added = backend.get_added_tokens_decoder()
    # an added token may also sit in the model's vocabulary: it is special all the same
    vocab = {p: i for p, i in backend.get_vocab(with_added_tokens=False).items() if i not in added}
    text: dict[int, bytes] = {}
    if "ByteLevel" in types:
        table = _byte_level_table()
        for piece, i in vocab.items():
            try:
                text[i] = piece.translate(table).encode("latin-1")
            except UnicodeEncodeError:
                raise TokenizerError(
                    f"token {i} ({piece!r}) is not in the byte-level alphabet its decoder expects"
                ) from None
    elif "ByteFallback" in types or getattr(model, "byte_fallback", False) or _metaspace(steps):
        space = _metaspace(steps) or "\u2581"
        byte_fallback = "ByteFallback" in types or bool(getattr(model, "byte_fallback", False))
        unknown = getattr(model, "unk_token", None)
        for piece, i in vocab.items():
            if piece == unknown:
                continue  # the unknown piece stands for no bytes: keep it out of text
            match = _BYTE_PIECE.fullmatch(piece) if byte_fallback else None
            text[i] = bytes([int(match.group(1), 16)]) if match else piece.replace(space, " ").encode("utf-8")
    else:
        raise TokenizerError(
            f"cannot read exact token bytes from a {kind} model whose decoder is {types or 'absent'}: "
            "expected a byte-level or a byte-fallback (SentencePiece-style) decoder"
        )
    specials = [(token.content, int(i)) for i, token in added.items()]
    count = int(backend.get_vocab_size(with_added_tokens=True))
    return text, specials, count, source


def _metaspace(steps: Sequence[dict[str, Any]]) -> str | None:
    """The metaspace character the decoder turns into a space, if it does."""
    for step in steps:
        if step.get("type") == "Metaspace":
            return str(step.get("replacement", "\u2581"))
        if step.get("type") == "Replace" and step.get("content") == " ":
            pattern = step.get("pattern", {})
            if isinstance(pattern, dict) and "String" in pattern:
                return str(pattern["String"])
    return None


def _hf_specials(tokenizer: Any) -> list[tuple[str, int]]:
    """Added and special tokens a ``transformers`` tokenizer declares, as ``(name, id)``."""
    pairs: list[tuple[str, int]] = []
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    for i, token in added.items():
        pairs.append((str(getattr(token, "content", token)), int(i)))
    names = list(getattr(tokenizer, "all_special_tokens", None) or [])
    if names:
        ids = tokenizer.convert_tokens_to_ids(names)
        unk = getattr(tokenizer, "unk_token_id", None)
        for name, i in zip(names, ids):
            if i is not None and (i != unk or name == getattr(tokenizer, "unk_token", None)):
                pairs.append((str(name), int(i)))
    return pairs
