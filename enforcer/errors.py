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

    def relocated(self, prefix: str, context: str) -> "UnsupportedSchemaError":
        """The same error (same class) for a schema embedded at ``prefix`` (a JSON pointer),
        with ``context`` (for example the tool's name) before the reason."""
        return UnsupportedSchemaError(self.keyword, prefix + self.pointer,
                                      context + (f": {self.reason}" if self.reason else ""))


class InvalidSchemaError(EnforcerError, ValueError):
    """A schema that is not a valid JSON Schema, or that no JSON value can satisfy."""

    def __init__(self, pointer: str, reason: str) -> None:
        self.pointer = pointer
        self.reason = reason
        super().__init__(f"invalid JSON Schema at {pointer or '(root)'}: {reason}")


class SchemaTooComplexError(UnsupportedSchemaError):
    """A schema whose automaton would exceed a compile-time budget (or that nests too deeply to
    compile), refused before any token is decoded.

    ``pointer`` is the JSON pointer of the sub-schema where the budget was first exceeded
    (``""``: the root, or not known), ``keyword`` the keyword responsible where one is (``""``
    for structure: nesting, ``$ref`` fan-out), ``budget`` the limit that was exceeded, as
    ``"<option>=<value>"`` (for example ``"max_nfa_states=4000000"``), or ``""``.
    """

    def __init__(self, reason: str, pointer: str = "", budget: str = "", keyword: str = "") -> None:
        self.keyword = keyword
        self.pointer = pointer
        self.reason = reason
        self.budget = budget
        where = pointer if pointer else "(root)"
        msg = f"schema too complex at {where}: {reason}"
        ValueError.__init__(self, f"{msg} (budget {budget})" if budget else msg)

    def relocated(self, prefix: str, context: str) -> "SchemaTooComplexError":
        return SchemaTooComplexError(f"{context}: {self.reason}", prefix + self.pointer, self.budget, self.keyword)


class InvalidToolsError(EnforcerError, ValueError):
    """A bad OpenAI ``tools`` declaration: names the tool and the problem."""


class TokenizerError(EnforcerError, ValueError):
    """A tokenizer lacks a token the format needs, or cannot be read exactly."""
