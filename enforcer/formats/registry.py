"""The registry of model families: one package per family under :mod:`enforcer.formats`.

A family package (``enforcer/formats/<family>/__init__.py``) defines ``FAMILY``, a
:class:`FormatFamily`: the format names it serves (each a :class:`~.base.FormatSpec` factory),
the token names that identify its tokenizer, and where its prompt reader/renderer and its output
reader live (imported on first use). The parser, the declarations, the CLI and the engine
adapters look formats up here and name none: adding a family is adding its package.

Discovery imports every sub-package of :mod:`enforcer.formats` once (their ``__init__`` holds
only names and the spec; the heavier modules are imported when used). Cost: a few
milliseconds, once per process.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Container, Mapping, Optional

if TYPE_CHECKING:
    from ..vocabulary import Vocabulary
    from .base import FormatSpec
    from .reading import OutputReader

__all__ = ["FormatFamily", "detect_family", "families", "family_of", "format_names", "get_family"]


@dataclass(frozen=True)
class FormatFamily:
    """One model family's plugin.

    ``formats``: format name -> spec factory (the first is the family's default).
    ``markers``: token names a tokenizer of this family has (all of them; detection).
    ``validation_tokens``: the marker names a byte-level validation vocabulary needs to compile
    any declaration in this family's formats (vLLM validates before the model's tokenizer is
    known). ``reader``: ``"module:callable"``, ``(vocabulary, in_reasoning) -> OutputReader``.
    ``prompt``: the module that reads and writes prompts (see :class:`PromptModule`).
    ``test_tokenizer``: ``"module:callable"`` building a tokenizer of this family from a PyPI
    vocabulary (the CLI's default). ``parser_class``: the class-name stem of its vLLM tool parser
    (``KimiK2`` -> ``KimiK2EnforcedParser``). ``settings_format``: the ``format`` the vLLM tool
    parser writes into a request's settings (None: leave the engine's default)."""

    name: str
    formats: Mapping[str, Callable[[], "FormatSpec"]]
    markers: tuple[str, ...]
    validation_tokens: tuple[str, ...]
    reader: str
    prompt: str
    test_tokenizer: Optional[str] = None
    parser_class: str = ""
    settings_format: Optional[str] = None
    description: str = field(default="", compare=False)
    """The family's human name (``Kimi K2``), for messages."""

    @property
    def default_format(self) -> str:
        return next(iter(self.formats))

    @property
    def tool_parser_name(self) -> str:
        """The vLLM ``--tool-call-parser`` name of this family's enforced parser."""
        return f"{self.name}_enforced"

    def new_reader(self, vocabulary: "Vocabulary", in_reasoning: bool = False) -> "OutputReader":
        """A fresh output reader (one per sequence)."""
        return _resolve(self.reader)(vocabulary, in_reasoning)

    @property
    def prompt_module(self) -> ModuleType:
        return importlib.import_module(self.prompt)

    def prompt_function(self, name: str, what: str) -> Callable[..., Any]:
        """The prompt module's ``name``, or ``ValueError`` saying the family lacks ``what``."""
        function = getattr(self.prompt_module, name, None)
        if function is None:
            raise ValueError(f"format family {self.name!r} has no {what}")
        return function

    def build_test_tokenizer(self) -> Any:
        if self.test_tokenizer is None:
            raise ImportError(f"format family {self.name!r} ships no test tokenizer")
        return _resolve(self.test_tokenizer)()


def _resolve(target: str) -> Callable[..., Any]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@functools.lru_cache(maxsize=1)
def families() -> tuple[FormatFamily, ...]:
    """Every family package under :mod:`enforcer.formats`, by name."""
    from .. import formats as package

    found: dict[str, FormatFamily] = {}
    owner: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if not info.ispkg:
            continue
        family = getattr(importlib.import_module(f"{package.__name__}.{info.name}"), "FAMILY", None)
        if not isinstance(family, FormatFamily):
            continue
        if family.name in found:
            raise RuntimeError(f"two format families are called {family.name!r}")
        for fmt in family.formats:
            if fmt in owner:
                raise RuntimeError(f"format {fmt!r} is served by both {owner[fmt]!r} and {family.name!r}")
            owner[fmt] = family.name
        found[family.name] = family
    return tuple(found.values())


@functools.lru_cache(maxsize=1)
def _by_format() -> dict[str, FormatFamily]:
    return {fmt: family for family in families() for fmt in family.formats}


def format_names() -> tuple[str, ...]:
    """Every format name ``format=`` takes, sorted."""
    return tuple(sorted(_by_format()))


def family_of(format: str) -> FormatFamily:
    """The family serving ``format`` (``ValueError`` naming the known formats otherwise)."""
    try:
        return _by_format()[format]
    except (KeyError, TypeError):
        raise ValueError(f"unknown tool-call format {format!r} (known: {', '.join(format_names())})") from None


def get_family(name: str) -> FormatFamily:
    """The family called ``name``."""
    for family in families():
        if family.name == name:
            return family
    raise ValueError(f"unknown format family {name!r} (known: {', '.join(f.name for f in families())})")


def detect_family(tokens: Container[str]) -> FormatFamily:
    """The family of a tokenizer from its token names (``tokenizer.get_vocab()`` or
    ``Vocabulary.special_tokens``): the one whose markers are all present; if several are, the
    one with most markers; ``ValueError`` naming what each family needs otherwise (or on a tie).
    Cost: a few lookups per family."""
    matches = [f for f in families() if all(name in tokens for name in f.markers)]
    if not matches:
        needs = "; ".join(f"not all of {', '.join(f.markers)} (not a {f.description or f.name} model)" for f in families())
        raise ValueError(f"the tokenizer matches no known tool-call format: {needs}")
    best = max(len(f.markers) for f in matches)
    top = [f for f in matches if len(f.markers) == best]
    if len(top) > 1:
        raise ValueError(f"the tokenizer matches several tool-call formats: {', '.join(f.name for f in top)}")
    return top[0]

