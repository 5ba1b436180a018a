"""Vocabulary: exact bytes per id for byte-level BPE, tiktoken and SentencePiece byte fallback;
special and added tokens kept out of text; fingerprint; disk format. Also checks the test
tokenizers of ``enforcer.testing.tokenizers`` (Kimi K2 table, fast/slow agreement)."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from enforcer.errors import TokenizerError
from enforcer.testing import tokenizers as tt
from enforcer.vocabulary import FORMAT_VERSION, Vocabulary, bytes_to_unicode

KIMI_RANKS = 151_643
KIMI_IDS = 151_899

TEXTS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog. It's 3.14159 o'clock, isn't it? WE'LL SEE.",
    "你好，世界！今天天气很好。我们去公园散步吧。",
    "混合 mixed 文本 with 中文 and English 123 日本語のテキスト、カタカナ。",
    "emoji: 😀🎉👩\u200d👩\u200d👧\u200d👦 🇫🇷 ✨ and 🤖🤖🤖",
    "def f(x):\n    return {'a': [1, 2, 3]}  # comment\n\nclass A:\n\tpass\n",
    "    indented\n\t\ttabs\n\n\n   trailing   ",
    "a\r\nb\rc\n\rd\r\n\r\n\n\n  \r\n",
    '{"city": "Paris", "note": "line\\nbreak \\"quoted\\" \\u00e9\\t\\\\ end"}',
    '{"a":{"b":[1,2.5e-3,-0,true,false,null]},"s":"\\ud83d\\ude00"}',
    "Ünïcödé façade naïve café résumé ÉCOLE école",
    "Русский текст, ελληνικά, العربية, עברית, हिन्दी, ไทย, 한국어",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 e\u0301 zero\u200bwidth \u00a0nbsp \u3000ideographic space",
    "1234567890 12 345 6789 ３４５",
    "rare han: 龘靐齉爩 𠀋𠮷",
    "\x00\x01 control \x7f\x1b[0m",
    "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{}<|tool_call_end|>",
    "<think>text that spells markers</think><|im_end|>[EOS]",
    "   ",
    "\n",
    "x",
]

# Every character class the pre-tokenizers care about, for random texts.
ALPHABET = list("aZq 9\n\r\t'sSdDlLvVmM.,!{}\"\\:<|>_-") + [
    "你", "々", "〇", "ー", "ア", "é", "É", "\u0301", "ǅ", "ʰ", "ß", "١", "²", "😀", "\u3000",
    "\u00a0", "🇫", "ㄱ", "가", "ا", "ไ", "\u200d", "𠀋", "€", "\x00",
]
random_texts = st.text(alphabet=st.sampled_from(ALPHABET), max_size=40)
any_texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


def text_bytes(vocab: Vocabulary, ids: list[int]) -> bytes:
    """Concatenated token_bytes, failing on any non-text id."""
    parts = [vocab.token_bytes(i) for i in ids]
    assert None not in parts, f"non-text id in a text encoding: {ids}"
    return b"".join(parts)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def mistral_tokenizer() -> Any:
    try:
        return tt.mistral_sentencepiece_tokenizer()
    except ImportError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def mistral_vocab(mistral_tokenizer: Any) -> Vocabulary:
    return Vocabulary.from_tokenizer(mistral_tokenizer)


@pytest.fixture(scope="module")
def kimi_slow_vocab(kimi_slow_tokenizer: Any) -> Vocabulary:
    return Vocabulary.from_tokenizer(kimi_slow_tokenizer)


# ------------------------------------------------------------------------------------------
# Round trips: the bytes of an encoding are the text's UTF-8


@pytest.mark.parametrize("text", TEXTS)
def test_kimi_fast_round_trip(kimi_tokenizer: Any, kimi_vocab: Vocabulary, text: str) -> None:
    ids = tt.encode_as_text(kimi_tokenizer, text)
    assert text_bytes(kimi_vocab, ids) == text.encode("utf-8")


@pytest.mark.parametrize("text", TEXTS)
def test_kimi_slow_round_trip(kimi_slow_tokenizer: Any, kimi_slow_vocab: Vocabulary, text: str) -> None:
    ids = kimi_slow_tokenizer.encode(text, allow_special_tokens=False)
    assert ids == tt.encode_as_text(kimi_slow_tokenizer, text)
    assert text_bytes(kimi_slow_vocab, ids) == text.encode("utf-8")


@pytest.mark.parametrize("text", TEXTS)
def test_deepseek_round_trip(deepseek_tokenizer: Any, deepseek_vocab: Vocabulary, text: str) -> None:
    ids = tt.encode_as_text(deepseek_tokenizer, text)
    assert text_bytes(deepseek_vocab, ids) == text.encode("utf-8")


@pytest.mark.parametrize("text", TEXTS)
def test_sentencepiece_round_trip(mistral_tokenizer: Any, mistral_vocab: Vocabulary, text: str) -> None:
    # SentencePiece's "first" prepend scheme adds one space unless the text starts with one
    expected = text if text.startswith(" ") else " " + text
    ids = tt.encode_as_text(mistral_tokenizer, text)
    assert text_bytes(mistral_vocab, ids) == expected.encode("utf-8")


@settings(max_examples=150, deadline=None)
@given(text=st.one_of(random_texts, any_texts))
def test_random_round_trips(
    kimi_tokenizer: Any, kimi_vocab: Vocabulary, deepseek_tokenizer: Any, deepseek_vocab: Vocabulary, text: str
) -> None:
    assert text_bytes(kimi_vocab, tt.encode_as_text(kimi_tokenizer, text)) == text.encode("utf-8")
    assert text_bytes(deepseek_vocab, tt.encode_as_text(deepseek_tokenizer, text)) == text.encode("utf-8")


def test_default_encode_turns_spelled_markers_into_ids(kimi_tokenizer: Any, kimi_slow_tokenizer: Any) -> None:
    # mirrors real Kimi: encode() accepts special tokens spelled in text; encode_as_text does not
    text = "a<|tool_call_begin|>b"
    marker = KIMI_RANKS + tt.K2_SPECIAL_OFFSETS["<|tool_call_begin|>"]
    for tokenizer in (kimi_tokenizer, kimi_slow_tokenizer):
        assert marker in tokenizer.encode(text, add_special_tokens=False)
        assert marker not in tt.encode_as_text(tokenizer, text)


# ------------------------------------------------------------------------------------------
# Exactness of every id


def test_kimi_fast_and_slow_read_the_same_bytes(kimi_vocab: Vocabulary, kimi_slow_vocab: Vocabulary) -> None:
    # two independent readers: the byte-level alphabet (fast) and tiktoken's ranks (slow)
    assert kimi_vocab.vocab_size == kimi_slow_vocab.vocab_size == KIMI_IDS
    assert kimi_vocab.byte_tokens == kimi_slow_vocab.byte_tokens
    assert kimi_vocab.special_tokens == kimi_slow_vocab.special_tokens
    assert kimi_vocab.fingerprint == kimi_slow_vocab.fingerprint


def test_bare_tiktoken_encoding(kimi_slow_tokenizer: Any, kimi_slow_vocab: Vocabulary) -> None:
    bare = Vocabulary.from_tokenizer(kimi_slow_tokenizer.model)
    assert bare.byte_tokens == kimi_slow_vocab.byte_tokens
    assert bare.fingerprint == kimi_slow_vocab.fingerprint


def test_fragment_tokens_are_exact(kimi_vocab: Vocabulary, kimi_slow_tokenizer: Any) -> None:
    fragments = []
    for i, value in enumerate(kimi_vocab.byte_tokens):
        if value is None:
            continue
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            fragments.append(i)
    assert len(fragments) > 1000, "a byte-level vocabulary holds many partial UTF-8 characters"
    encoding = kimi_slow_tokenizer.model
    for i in fragments:
        assert kimi_vocab.token_bytes(i) == encoding.decode_single_token_bytes(i)


@pytest.mark.parametrize("name", ["kimi", "deepseek"])
def test_rare_chinese_splits_into_fragments(
    name: str, kimi_tokenizer: Any, kimi_vocab: Vocabulary, request: pytest.FixtureRequest
) -> None:
    tokenizer, vocab = (
        (kimi_tokenizer, kimi_vocab)
        if name == "kimi"
        else (request.getfixturevalue("deepseek_tokenizer"), request.getfixturevalue("deepseek_vocab"))
    )
    text = "龘靐齉爩𠀋"
    ids = tt.encode_as_text(tokenizer, text)
    parts = [vocab.token_bytes(i) for i in ids]
    broken = []
    for part in parts:
        assert part is not None
        try:
            part.decode("utf-8")
        except UnicodeDecodeError:
            broken.append(part)
    assert broken, f"expected partial UTF-8 tokens in {parts}"
    assert b"".join(parts).decode("utf-8") == text


def test_deepseek_single_id_decode_agrees(deepseek_tokenizer: Any, deepseek_vocab: Vocabulary) -> None:
    # the tokenizer's own decoder, id by id, for every text id whose bytes are whole UTF-8
    ids = [i for i, b in enumerate(deepseek_vocab.byte_tokens) if b is not None]
    decoded = deepseek_tokenizer.batch_decode([[i] for i in ids], clean_up_tokenization_spaces=False)
    checked = 0
    for i, text in zip(ids, decoded):
        raw = deepseek_vocab.token_bytes(i)
        assert raw is not None
        try:
            expected = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        assert text == expected, i
        checked += 1
    assert checked > 100_000


def test_sentencepiece_every_id_matches_sentencepiece(mistral_vocab: Vocabulary) -> None:
    spm = pytest.importorskip("sentencepiece")
    processor = spm.SentencePieceProcessor(model_file=str(tt.mistral_sp_model_path()))
    assert mistral_vocab.vocab_size == processor.get_piece_size() == 32_768
    byte_pieces = 0
    for i in range(processor.get_piece_size()):
        piece = processor.id_to_piece(i)
        if processor.is_control(i) or processor.is_unknown(i):
            assert mistral_vocab.token_bytes(i) is None and i in mistral_vocab.special_ids
            assert mistral_vocab.token_id(piece) == i
        elif processor.is_byte(i):
            byte_pieces += 1
            assert mistral_vocab.token_bytes(i) == bytes([int(piece[3:5], 16)])
        else:
            assert mistral_vocab.token_bytes(i) == piece.replace("\u2581", " ").encode("utf-8")
    assert byte_pieces == 256
    assert mistral_vocab.token_bytes(processor.piece_to_id("<0x0A>")) == b"\n"


# ------------------------------------------------------------------------------------------
# Special and added tokens


@pytest.mark.parametrize("kind", ["fast", "tiktoken"])
def test_kimi_markers(kind: str, kimi_tokenizer: Any, kimi_slow_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    tokenizer = kimi_tokenizer if kind == "fast" else kimi_slow_tokenizer
    vocab = kimi_vocab if kind == "fast" else Vocabulary.from_tokenizer(tokenizer)
    assert len(tokenizer) == KIMI_IDS
    assert len(vocab.special_ids) == tt.K2_SPECIAL_SLOTS
    added = tokenizer.added_tokens_decoder
    for name, offset in tt.K2_SPECIAL_OFFSETS.items():
        token_id = KIMI_RANKS + offset
        assert vocab.token_id(name) == token_id == tokenizer.convert_tokens_to_ids(name)
        assert vocab.token_bytes(token_id) is None and token_id in vocab.special_ids
        assert tokenizer.encode(name, add_special_tokens=False) == [token_id]  # a single id
        assert added[token_id].special is (name not in tt.K2_NOT_SPECIAL)
    assert vocab.token_id("<|reserved_token_151648|>") == 151_648
    assert tokenizer.eos_token == "[EOS]" and tokenizer.pad_token == "[PAD]"
    # tool and think tokens are not special: skip_special_tokens keeps them, drops the roles
    ids = tokenizer.encode("<|im_assistant|>x<|tool_call_begin|><think>", add_special_tokens=False)
    assert tokenizer.decode(ids, skip_special_tokens=True) == "x<|tool_call_begin|><think>"
    assert vocab.decode_bytes(ids) == b"x"


def test_deepseek_specials(deepseek_tokenizer: Any, deepseek_vocab: Vocabulary) -> None:
    assert deepseek_vocab.vocab_size == tt.DEEPSEEK_V3_VOCAB_SIZE
    assert set(deepseek_vocab.special_ids) == set(deepseek_tokenizer.added_tokens_decoder)
    for name in ["<｜begin▁of▁sentence｜>", "<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>", "<think>", "</think>"]:
        token_id = deepseek_vocab.token_id(name)
        assert token_id == deepseek_tokenizer.convert_tokens_to_ids(name)
        assert deepseek_vocab.token_bytes(token_id) is None


def test_missing_name_is_a_clear_error(kimi_vocab: Vocabulary) -> None:
    with pytest.raises(TokenizerError, match=r"<\|tool_sep\|>"):
        kimi_vocab.token_id("<|tool_sep|>")
    with pytest.raises(TokenizerError):
        kimi_vocab.token_id("Hello")  # ordinary tokens have no name lookup


def test_vocab_wider_than_tokenizer(kimi_tokenizer: Any, deepseek_vocab: Vocabulary) -> None:
    wide = Vocabulary.from_tokenizer(kimi_tokenizer, vocab_size=KIMI_IDS + 101)
    assert wide.vocab_size == len(wide.byte_tokens) == KIMI_IDS + 101
    assert all(wide.token_bytes(i) is None for i in range(KIMI_IDS, KIMI_IDS + 101))
    assert not any(i >= KIMI_IDS for i in wide.special_ids)
    assert all(deepseek_vocab.token_bytes(i) is None for i in range(128_815, 129_280))
    with pytest.raises(IndexError):
        wide.token_bytes(KIMI_IDS + 101)
    with pytest.raises(IndexError):
        wide.token_bytes(-1)
    with pytest.raises(TokenizerError, match="smaller"):
        Vocabulary.from_tokenizer(kimi_tokenizer, vocab_size=KIMI_IDS - 1)
    with pytest.raises(TokenizerError, match="must be an int"):
        Vocabulary.from_tokenizer(kimi_tokenizer, vocab_size="160000")
    numpy = pytest.importorskip("numpy")
    assert Vocabulary.from_tokenizer(kimi_tokenizer, vocab_size=numpy.int64(KIMI_IDS + 101)).fingerprint == wide.fingerprint


def test_added_tokens_beyond_len_tokenizer(kimi_slow_vocab: Vocabulary) -> None:
    # Real Kimi's get_vocab() leaves the special table out, so len(tokenizer) is the rank count.
    cls = tt._tiktoken_tokenizer_class()

    class RanksOnlyVocab(cls):  # type: ignore[misc, valid-type]
        def get_vocab(self) -> dict[str, int]:
            return dict(self._piece_to_id)

    tokenizer = RanksOnlyVocab(tt._qwen_ranks(), tt.KIMI_PATTERN, "kimi_k2")
    assert len(tokenizer) == KIMI_RANKS
    vocab = Vocabulary.from_tokenizer(tokenizer)
    assert vocab.fingerprint == kimi_slow_vocab.fingerprint


def test_decode_bytes_skips_non_text(kimi_tokenizer: Any, kimi_vocab: Vocabulary) -> None:
    ids = tt.encode_as_text(kimi_tokenizer, "héllo 你好")
    section = kimi_vocab.token_id("<|tool_calls_section_begin|>")
    assert kimi_vocab.decode_bytes([section, *ids, section]) == "héllo 你好".encode()
    assert kimi_vocab.decode_bytes([]) == b""


def test_unsupported_tokenizers_are_refused() -> None:
    tokenizers = pytest.importorskip("tokenizers")
    wordpiece = tokenizers.Tokenizer(tokenizers.models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]"))
    with pytest.raises(TokenizerError, match="WordPiece"):
        Vocabulary.from_tokenizer(wordpiece)
    with pytest.raises(TokenizerError, match="cannot read exact token bytes"):
        Vocabulary.from_tokenizer(object())


def test_byte_level_alphabet_is_strict() -> None:
    tokenizers = pytest.importorskip("tokenizers")
    alphabet = bytes_to_unicode()
    assert sorted(alphabet) == list(range(256)) and len(set(alphabet.values())) == 256
    vocab = {alphabet[b]: b for b in range(256)}
    vocab["raw space"] = 256  # a raw ' ' is not in the byte-level alphabet
    backend = tokenizers.Tokenizer(tokenizers.models.BPE(vocab, []))
    backend.decoder = tokenizers.decoders.ByteLevel()
    with pytest.raises(TokenizerError, match="raw space"):
        Vocabulary.from_tokenizer(backend)
    del vocab["raw space"]
    backend = tokenizers.Tokenizer(tokenizers.models.BPE(vocab, []))
    backend.decoder = tokenizers.decoders.ByteLevel()
    assert Vocabulary.from_tokenizer(backend).byte_tokens == tuple(bytes([b]) for b in range(256))


# ------------------------------------------------------------------------------------------
# Fingerprint and disk


def test_fingerprint_is_stable_and_distinct(kimi_vocab: Vocabulary, deepseek_vocab: Vocabulary,
                                            mistral_vocab: Vocabulary) -> None:
    again = Vocabulary.from_tokenizer(tt.kimi_k2_tokenizer("fast"))
    assert again.fingerprint == kimi_vocab.fingerprint
    assert len({kimi_vocab.fingerprint, deepseek_vocab.fingerprint, mistral_vocab.fingerprint}) == 3
    wider = Vocabulary(kimi_vocab.byte_tokens + (None,), [(n, i) for n, i in kimi_vocab.special_tokens.items()])
    assert wider.fingerprint != kimi_vocab.fingerprint
    tokens = list(kimi_vocab.byte_tokens)
    tokens[100] = tokens[100] + b"!"  # type: ignore[operator]
    changed = Vocabulary(tokens, kimi_vocab.special_tokens.items())
    assert changed.fingerprint != kimi_vocab.fingerprint
    renamed = Vocabulary(
        kimi_vocab.byte_tokens,
        [("<|renamed|>" if n == "[PAD]" else n, i) for n, i in kimi_vocab.special_tokens.items()],
    )
    assert renamed.fingerprint != kimi_vocab.fingerprint


@pytest.mark.parametrize("name", ["kimi", "deepseek", "mistral"])
def test_save_load_round_trip(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    vocab: Vocabulary = request.getfixturevalue(f"{name}_vocab")
    path = tmp_path / "sub" / f"{name}.vocab"
    vocab.save(path)
    loaded = Vocabulary.load(path)
    assert loaded.vocab_size == vocab.vocab_size
    assert loaded.byte_tokens == vocab.byte_tokens
    assert dict(loaded.special_tokens) == dict(vocab.special_tokens)
    assert loaded.special_ids == vocab.special_ids
    assert loaded.fingerprint == vocab.fingerprint


def test_load_rejects_other_versions_and_damage(kimi_vocab: Vocabulary, tmp_path: Path) -> None:
    path = tmp_path / "v.vocab"
    kimi_vocab.save(path)
    data = path.read_bytes()
    magic_end = data.index(b"\n") + 1
    header_end = data.index(b"\n", magic_end)
    header = json.loads(data[magic_end:header_end])
    header["format_version"] = FORMAT_VERSION + 1
    other = tmp_path / "other.vocab"
    other.write_bytes(data[:magic_end] + json.dumps(header).encode() + data[header_end:])
    with pytest.raises(TokenizerError, match=f"version {FORMAT_VERSION + 1}"):
        Vocabulary.load(other)
    damaged = tmp_path / "damaged.vocab"
    damaged.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(TokenizerError, match="fingerprint"):
        Vocabulary.load(damaged)
    truncated = tmp_path / "truncated.vocab"
    truncated.write_bytes(data[:-10])
    with pytest.raises(TokenizerError, match="truncated"):
        Vocabulary.load(truncated)
    stranger = tmp_path / "stranger.vocab"
    stranger.write_bytes(b"not a vocabulary")
    with pytest.raises(TokenizerError, match="not a toolcall-enforcer vocabulary"):
        Vocabulary.load(stranger)


def test_constructor_validates() -> None:
    with pytest.raises(TokenizerError, match="outside"):
        Vocabulary([b"a", b"b"], [("<x>", 2)])
    with pytest.raises(TypeError):
        Vocabulary([b"a", "b"], [])  # type: ignore[list-item]
    vocab = Vocabulary([b"a", b"b", b"c"], [("<x>", 1), ("<x>", 2)])
    assert vocab.token_id("<x>") == 1 and vocab.special_ids == {1, 2}
    assert vocab.byte_tokens == (b"a", None, None)


# ------------------------------------------------------------------------------------------
# The test tokenizers themselves


def test_portable_pattern_splits_like_kimis() -> None:
    regex = pytest.importorskip("regex")
    tokenizers = pytest.importorskip("tokenizers")
    assert "&&" not in tt.KIMI_PATTERN_PORTABLE
    kimi = regex.compile("(?V1)" + tt.KIMI_PATTERN)  # V1: class intersection as Kimi means it
    portable = regex.compile(tt.KIMI_PATTERN_PORTABLE)
    onig = tokenizers.pre_tokenizers.Split(tokenizers.Regex(tt.KIMI_PATTERN_PORTABLE), behavior="isolated")
    rng = random.Random(7)
    for _ in range(2000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 14)))
        expected = kimi.findall(text)
        assert portable.findall(text) == expected, text
        assert [piece for piece, _ in onig.pre_tokenize_str(text)] == expected, text


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(random_texts, any_texts))
def test_fast_and_slow_kimi_agree(kimi_tokenizer: Any, kimi_slow_tokenizer: Any, text: str) -> None:
    assert tt.encode_as_text(kimi_tokenizer, text) == kimi_slow_tokenizer.encode(text, allow_special_tokens=False)


@pytest.mark.parametrize("text", TEXTS)
def test_fast_and_slow_kimi_agree_on_texts(kimi_tokenizer: Any, kimi_slow_tokenizer: Any, text: str) -> None:
    assert kimi_tokenizer.encode(text, add_special_tokens=False) == kimi_slow_tokenizer.encode(text)


def test_build_times(kimi_tokenizer: Any, kimi_slow_tokenizer: Any, deepseek_tokenizer: Any,
                     mistral_tokenizer: Any, capsys: pytest.CaptureFixture[str]) -> None:
    lines = []
    for name, tokenizer, size in [
        ("kimi fast", kimi_tokenizer, None),
        ("kimi tiktoken", kimi_slow_tokenizer, None),
        ("deepseek-v3", deepseek_tokenizer, tt.DEEPSEEK_V3_VOCAB_SIZE),
        ("mistral sentencepiece", mistral_tokenizer, None),
    ]:
        start, cpu = time.perf_counter(), time.process_time()
        vocab = Vocabulary.from_tokenizer(tokenizer, vocab_size=size)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        lines.append(f"Vocabulary.from_tokenizer {name}: {vocab.vocab_size} ids in {wall:.3f} s ({cpu:.3f} s CPU)")
    with capsys.disabled():
        print("\n" + "\n".join(lines))


def test_encode_piece_remembers_each_piece_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tag pieces are encoded once per vocabulary, whatever compiled object asks; the memo is
    bounded (emptied when full) and answers what ``encode_text`` answers."""
    from enforcer import vocabulary as vocabulary_module

    calls: list[str] = []

    def encode(text: str) -> list[int]:
        calls.append(text)
        return [ord(c) - ord("a") for c in text]

    vocab = Vocabulary.from_token_bytes([bytes([b]) for b in b"abcdefgh"], encode=encode)
    assert vocab.encode_piece("bad") == (1, 0, 3) == tuple(vocab.encode_text("bad"))
    assert vocab.encode_piece("bad") == (1, 0, 3) and calls == ["bad", "bad"]  # the second piece call: no encode
    monkeypatch.setattr(vocabulary_module, "PIECE_MEMO_SIZE", 2)
    for piece in ("ab", "cd", "ef"):
        vocab.encode_piece(piece)
    assert len(vocab._pieces) <= 2
    with pytest.raises(TokenizerError):
        vocab.encode_piece("xyz")  # ids outside the vocabulary: encode_text's error
