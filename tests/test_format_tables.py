"""The format automata shipped as package data (enforcer/data/format_tables.bin): each entry must
be exactly what building the format from its source gives, and an unusable file must make the
library build instead. A failure of the first two tests means the shipped tables are stale:
``python -c "from enforcer.regex import write_format_tables; write_format_tables()"``.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest

from enforcer import regex
from enforcer.regex import FORMAT_TABLES, build_format_dfa, shipped_format_dfa, write_format_tables

ESCAPES = ("all", "common", "raw")
FORMATS = tuple(regex._FORMAT_SOURCES)
REGENERATE = 'regenerate: python -c "from enforcer.regex import write_format_tables; write_format_tables()"'


@pytest.mark.parametrize("escapes", ESCAPES)
def test_shipped_tables_equal_a_fresh_build(escapes: str) -> None:
    for fmt in FORMATS:
        shipped = shipped_format_dfa(FORMAT_TABLES, fmt, escapes)
        assert shipped is not None, f"no current entry for {fmt!r} ({escapes}): {REGENERATE}"
        built = build_format_dfa(fmt, escapes)
        assert shipped.transitions.dtype == built.transitions.dtype and shipped.transitions.flags.c_contiguous
        assert np.array_equal(shipped.transitions, built.transitions), f"{fmt!r} ({escapes}) differs: {REGENERATE}"
        assert shipped.accepting.dtype == built.accepting.dtype
        assert np.array_equal(shipped.accepting, built.accepting), f"{fmt!r} ({escapes}) differs: {REGENERATE}"


def test_shipped_tables_hold_only_current_entries() -> None:
    index, _ = regex._table_file(FORMAT_TABLES)
    assert set(index) == {regex._format_table_key(fmt, escapes) for fmt in FORMATS for escapes in ESCAPES}, REGENERATE


def test_format_node_reads_the_shipped_table(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(fmt: str, escapes: str) -> None:
        raise AssertionError(f"{fmt!r} ({escapes}) was built, not read")

    monkeypatch.setattr(regex, "build_format_dfa", refuse)
    node = regex._format.__wrapped__("uri-reference", "common")  # uncached: the process's own stays
    assert node.dfa.matches("https://example.com/a?b#c") and not node.dfa.matches("a b")


def _write_entry(path: Path, key: str, classes: bytes, accepting: bytes, columns: np.ndarray) -> None:
    """A table file holding one entry, in the layout of FORMAT_TABLES."""
    entry = zlib.compress(classes + accepting + columns.astype("<i2").tobytes())
    path.write_bytes(json.dumps({key: [0, len(entry), *columns.shape]}).encode() + b"\n" + entry)


def _unusable_files(tmp_path: Path) -> dict[str, Path]:
    shipped = FORMAT_TABLES.read_bytes()
    key = regex._format_table_key("email", "common")
    head, _, body = shipped.partition(b"\n")
    offset, length, states, width = json.loads(head)[key]
    files = {name: tmp_path / f"{name}.bin" for name in (
        "missing", "garbage", "truncated", "flipped", "wrong_shape", "target_out_of_range", "class_out_of_range",
        "negative_entry", "deep_json")}
    files["garbage"].write_bytes(bytes(range(256)) * 8)
    files["truncated"].write_bytes(shipped[:len(head) + 1 + offset + length // 2])
    flipped = bytearray(shipped)
    flipped[len(head) + 1 + offset + length // 2] ^= 0x10
    files["flipped"].write_bytes(bytes(flipped))
    index = json.loads(head)
    index[key] = [offset, length, states + 1, width]
    files["wrong_shape"].write_bytes(json.dumps(index).encode() + b"\n" + body)
    identity = bytes(range(256))
    _write_entry(files["target_out_of_range"], key, identity, b"\xff", np.full((1, 256), 1))
    _write_entry(files["class_out_of_range"], key, bytes(256 * [3]), b"\xff", np.zeros((1, 3)))
    index[key] = [-1, length, states, width]
    files["negative_entry"].write_bytes(json.dumps(index).encode() + b"\n" + body)
    files["deep_json"].write_bytes(b"[" * 100_000 + b"\n")
    return files


def test_unusable_table_files_make_the_format_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = build_format_dfa("email", "common")
    for name, path in _unusable_files(tmp_path).items():
        assert shipped_format_dfa(path, "email", "common") is None, name
        monkeypatch.setattr(regex, "FORMAT_TABLES", path)
        node = regex._format.__wrapped__("email", "common")  # uncached: the process's own stays
        assert np.array_equal(node.dfa.transitions, built.transitions), name
        assert np.array_equal(node.dfa.accepting, built.accepting), name


def test_edited_format_source_finds_no_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    assert shipped_format_dfa(FORMAT_TABLES, "ipv4", "common") is not None
    monkeypatch.setitem(regex._FORMAT_SOURCES, "ipv4", regex._FORMAT_SOURCES["ipv4"] + "|localhost")
    assert shipped_format_dfa(FORMAT_TABLES, "ipv4", "common") is None
    node = regex._format.__wrapped__("ipv4", "common")
    assert node.dfa.matches("localhost") and node.dfa.matches("10.0.0.1")


def test_write_format_tables_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "tables.bin"
    write_format_tables(path)
    for fmt in ("date-time", "hostname"):
        written = shipped_format_dfa(path, fmt, "raw")
        assert written is not None
        assert np.array_equal(written.transitions, build_format_dfa(fmt, "raw").transitions)
