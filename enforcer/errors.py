"""Exceptions raised before decoding starts. Nothing here is raised inside the decode loop:
matchers report impossible states through their ``error`` attribute instead."""

from __future__ import annotations


class EnforcerError(Exception):
    """Base class of every error this library raises."""


class UnsupportedSchemaError(EnforcerError, ValueError):
    """A JSON Schema uses a keyword (or a combination) that cannot be enforced exactly.

    ``keyword`` names the keyword and ``pointer`` the JSON pointer of the schema object that
    holds it (``""`` is the root).
    """

    def __init__(self, keyword: str, pointer: str, reason: str = "") -> None:
        self.keyword = keyword
        self.pointer = pointer
        self.reason = reason
        where = pointer if pointer else "(root)"
        msg = f"unsupported JSON Schema keyword {keyword!r} at {where}"
        super().__init__(f"{msg}: {reason}" if reason else msg)


class InvalidSchemaError(EnforcerError, ValueError):
    """A schema that is not a valid JSON Schema, or that no JSON value can satisfy."""

    def __init__(self, pointer: str, reason: str) -> None:
        self.pointer = pointer
        self.reason = reason
        super().__init__(f"invalid JSON Schema at {pointer or '(root)'}: {reason}")


class SchemaTooComplexError(EnforcerError, ValueError):
    """The automaton for a schema grew past the configured state budget."""


class InvalidToolsError(EnforcerError, ValueError):
    """A bad OpenAI ``tools`` declaration: names the tool and the problem."""


class TokenizerError(EnforcerError, ValueError):
    """A tokenizer lacks a token the format needs, or cannot be read exactly."""
