"""Tool-call formats as data: a small graph of *places* that one engine runs.

A place is where the output stands: it may hold **text** of one kind (free prose, a forced tag
word, a call header, JSON arguments, one argument's key or value) and it has **edges**, each a
control token (by name) that leads to another place. Control tokens are allowed only on an
edge, and an edge is taken only once the place's text is complete. Edges may carry a *guard*
(:data:`GUARDS`) that the compiled tools evaluate from ``tool_choice``, ``parallel_tool_calls``
and the arguments written so far. Entering a place whose ``ends_call`` is set records the call.

Ids are read from the vocabulary when tools are compiled; :class:`~enforcer.engine.ToolCallMatcher`
runs every spec, so a new format is a new graph (:mod:`.kimi_k2`, :mod:`.kimi_k3`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Union

if TYPE_CHECKING:
    from ..vocabulary import Vocabulary

CALL_ID_PREFIX = "functions."
CALL_ID_SEPARATOR = ":"
CALL_ID = CALL_ID_PREFIX + "{name}" + CALL_ID_SEPARATOR + "{index}"
"""The OpenAI ``tool_calls[].id`` every family here gives a call (Kimi's own ids; the families
that write none get the same shape)."""


def call_id(name: str, index: int, template: str = CALL_ID) -> str:
    """A call's id: ``template`` (a :attr:`FormatSpec.call_id`) with the tool name and counter."""
    return template.format(name=name, index=index)

GUARDS = frozenset({
    "may_call",            # tool_choice is not "none" and there are tools
    "may_end",             # tool_choice "auto" or "none": the turn may end without a call
    "parallel",            # parallel_tool_calls: another call may follow
    "may_think",           # a think block may open (always, unless a call is forced and
                           # allow_thinking=False)
    "more_arguments",      # another argument key may follow
    "arguments_complete",  # every required argument key was written
})


@dataclass(frozen=True)
class FreeText:
    """Prose the model writes freely: every text token and every special token the format does
    not control. ``when_forced``: what is left when a call is forced (``tool_choice`` required or
    named): ``"text"`` (text tokens only) or ``"none"`` (nothing: the call must come first).
    ``forced_lead``: with ``"none"``, the text the chat template writes before the call, allowed
    exactly or not at all (Qwen3's ``\\n\\n`` after ``</think>``)."""

    kind: str = "content"
    when_forced: str = "text"
    forced_lead: str = ""


@dataclass(frozen=True)
class Word:
    """A tag word (and attributes) written in the format's own tokenization, one of several
    ``options``; the place's edge with ``to=None`` leads where the chosen option says.
    Each option: ``(word, attributes, place, guard)``."""

    options: tuple[tuple[str, tuple[tuple[str, str], ...], str, str], ...]


@dataclass(frozen=True)
class CallHeader:
    """Text naming the call: ``template`` with ``{name}`` (a declared tool name) and ``{index}``
    (the call counter), matched byte by byte in any tokenization; the state that completes it
    names the tool (:class:`~enforcer.text_rules.ChoiceRule`)."""

    template: str


@dataclass(frozen=True)
class CallTag:
    """A tag naming the call, ``word name_attribute="NAME" index_attribute="N"``, forced in the
    format's tokenization."""

    word: str
    name_attribute: str
    index_attribute: str


@dataclass(frozen=True)
class JsonArguments:
    """The chosen tool's arguments as one JSON object under its ``parameters`` schema."""


@dataclass(frozen=True)
class NamedJson:
    """A call written as one text: ``prefix`` (with ``{name}``: a declared tool name, JSON-string
    escaped), that tool's arguments as one JSON object under its ``parameters`` schema, then
    ``suffix``; matched byte by byte in any tokenization, as one automaton (the arguments' schema
    depends on the name written) whose accepting state names the tool
    (:class:`~enforcer.text_rules.ChoiceRule`). The call's arguments are the text between prefix
    and suffix."""

    prefix: str
    suffix: str

    def head(self, name: str) -> str:
        """The prefix with ``name`` in it."""
        return self.prefix.replace("{name}", json.dumps(name, ensure_ascii=False)[1:-1])


@dataclass(frozen=True)
class Separator:
    """Text that may be written between two structural tokens: exactly ``text``, or nothing."""

    text: str


@dataclass(frozen=True)
class ArgumentTag:
    """One argument's tag, ``word key_attribute="KEY" type_attribute="T"``: a declared key that
    may come next and one of the JSON types its schema admits, forced in the format's
    tokenization. An undeclared key (where the schema allows one) is free text in which each
    character of ``escapes`` is written as its escape (applied in order); the rest of the tag
    stays forced."""

    word: str
    key_attribute: str
    type_attribute: str
    escapes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ArgumentValue:
    """One argument's value under its key's schema and the type its tag named: a string as raw
    text, any other type as its JSON literal."""


Text = Union[FreeText, Word, CallHeader, CallTag, JsonArguments, NamedJson, Separator, ArgumentTag, ArgumentValue]


@dataclass(frozen=True)
class Edge:
    """A control token that leads to place ``to`` (``None``: the place a :class:`Word` chose)."""

    token: str
    to: Optional[str]
    guard: str = ""


@dataclass(frozen=True)
class Place:
    """``text`` that may be written here (None: only edges), the edges out, ``after_text``: the
    place once any free text was written (a think block may open only at the start),
    ``ends_call``: entering it completes a call, ``in_section``: inside the tool-call section."""

    name: str
    text: Optional[Text] = None
    edges: tuple[Edge, ...] = ()
    after_text: Optional[str] = None
    ends_call: bool = False
    in_section: bool = False


@dataclass(frozen=True)
class FormatSpec:
    """One tool-call format: its places, where a turn starts, its stop token, the control
    tokens (allowed only on edges) and how calls are counted.

    ``resume(prompt_ids, vocabulary)`` names the place a turn starts in after that prompt
    (or ``None`` for ``start``). ``counter_scope``: ``"dialog"`` (the counter continues from
    the calls in the prompt, counted as ``call_begin`` ids) or ``"message"`` (``first_index``
    in every message). ``tag_pieces(word, attributes)`` splits tag text into the pieces the
    format tokenizes one by one (needed by :class:`Word`, :class:`CallTag`, :class:`ArgumentTag`).
    ``any_order``: argument keys in any order rather than the declared one."""

    name: str
    stop: str
    places: tuple[Place, ...]
    start: str
    controlled: tuple[str, ...]
    first_index: int = 0
    counter_scope: str = "dialog"
    call_begin: Optional[str] = None
    call_id: str = CALL_ID
    resume: Optional[Callable[[Sequence[int], "Vocabulary"], Optional[str]]] = field(default=None, compare=False)
    tag_pieces: Optional[Callable[[str, Sequence[tuple[str, str]]], list[str]]] = field(default=None, compare=False)
    any_order: bool = False

    def __post_init__(self) -> None:
        names = [p.name for p in self.places]
        if len(set(names)) != len(names):
            raise ValueError(f"format {self.name!r}: duplicate place names")
        known = set(names)
        if self.start not in known:
            raise ValueError(f"format {self.name!r}: start place {self.start!r} is not defined")
        tagged = (Word, CallTag, ArgumentTag)
        for place in self.places:
            targets = [e.to for e in place.edges if e.to is not None] + ([place.after_text] if place.after_text else [])
            if isinstance(place.text, Word):
                targets += [option[2] for option in place.text.options]
            for target in targets:
                if target not in known:
                    raise ValueError(f"format {self.name!r}: place {place.name!r} leads to unknown place {target!r}")
            for edge in place.edges:
                if edge.guard and edge.guard not in GUARDS:
                    raise ValueError(f"format {self.name!r}: unknown guard {edge.guard!r}")
                if edge.to is None and not isinstance(place.text, Word):
                    raise ValueError(f"format {self.name!r}: place {place.name!r} has an edge without a target")
                if edge.token not in self.controlled and edge.token != self.stop:
                    raise ValueError(f"format {self.name!r}: edge token {edge.token!r} is not a control token")
            if isinstance(place.text, tagged) and self.tag_pieces is None:
                raise ValueError(f"format {self.name!r}: tag text needs tag_pieces")
            if place.text is not None and not isinstance(place.text, FreeText) and not place.edges:
                raise ValueError(f"format {self.name!r}: text in place {place.name!r} cannot end")
        if not any(isinstance(p.text, (CallHeader, CallTag, NamedJson)) for p in self.places):
            raise ValueError(f"format {self.name!r}: no place names a call")
        if not any(isinstance(p.text, (JsonArguments, ArgumentValue, NamedJson)) for p in self.places):
            raise ValueError(f"format {self.name!r}: no place holds arguments")

    def place(self, name: str) -> Place:
        return next(p for p in self.places if p.name == name)
