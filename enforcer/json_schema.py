"""JSON Schema to a byte-level expression of every accepted serialisation.

The compiler walks the schema once and returns a :class:`~enforcer.automaton.Node`; the caller
turns it into a DFA. Policies, each an option of :class:`SchemaOptions`: object properties in
declared order (extra properties, where allowed, after the declared ones), whitespace bounded
(compact, ``json.dumps`` default separators and indented output are all accepted), free-form
values nested at most ``free_form_depth`` deep, ``$ref`` recursion as deep as a text goes (a
sub-value met inside itself is a knot, built a level at a time: :mod:`enforcer.knots`; cut after
``max_recursion`` expansions where it cannot be one). Keywords that cannot be enforced exactly raise :class:`UnsupportedSchemaError` with
their JSON pointer. Cost: linear in the schema, plus jsonschema validation of enum candidates.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
from array import array
from collections import Counter, deque
from dataclasses import dataclass
from functools import cached_property, lru_cache, partial
from typing import Any, Callable, Hashable, Iterable, Iterator, NamedTuple, Sequence

import numpy as np

from . import knots, numbers
from .automaton import (DEAD, DFA, EPSILON, MAX_LEVEL_BLOCK_STATES, NOTHING, CountedDFA, CountedProduct, Deferred, Embedded, Graph,
                        Node, Repeat, alt, byte_chars, codepoints, compile_node, eager_budget, eager_states_spent, literal,
                        nfa_budget_size, nfa_size, optional, refund_eager_states, repeat, separated, seq,
                        states_exceeded)
from .errors import EnforcerError, InvalidSchemaError, SchemaTooComplexError, UnsupportedSchemaError
from .regex import FORMAT_DOCS, JSON_STRING_CHAR_ANY, UNENFORCED_FORMATS, format_node, json_string_char, pattern_node
from .schema_check import validator_class
from .schema_resources import (SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_VALUES, ResourceIndex, check_resource, holds_key,
                               holds_reference, keys_present, normalise_resources, resource_documents)
from .schema_resources import escape as _escape

try:
    from ._kernels import minimal_acyclic
except ImportError:  # a source tree without the built extension: the Python construction
    minimal_acyclic = None

TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
_TYPE_NAMES = frozenset(TYPES)

ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$comment", "$schema", "$id", "deprecated",
    "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "$defs", "definitions",
    "$vocabulary", "$anchor", "contentSchema", "$dynamicAnchor",
})
KEYWORDS = frozenset({
    "type", "enum", "const", "nullable", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "format", "items", "prefixItems", "additionalItems", "maxItems", "minItems",
    "uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems", "properties", "patternProperties",
    "additionalProperties", "propertyNames", "required", "dependentRequired", "dependentSchemas", "dependencies",
    "maxProperties", "minProperties", "unevaluatedProperties", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
    "$ref", "$dynamicRef", "$recursiveRef", "$recursiveAnchor",
})
"""Keywords that assert or apply (drafts 4 to 2020-12, and OpenAPI's ``nullable``). Any other
key of a schema object (an annotation, a vendor's ``x-...``, a misspelt ``_id``) is one a
validator ignores."""
UNSUPPORTED = frozenset({
    "unevaluatedProperties",
    "unevaluatedItems", "$recursiveRef", "$recursiveAnchor", "uniqueItems",
})
ALWAYS_REFUSED = ("uniqueItems", "$recursiveRef", "$recursiveAnchor")
"""Keywords refused wherever the compile meets them (``unevaluated*`` are folded first)."""
REFUSAL_REASONS = {
    "uniqueItems": "an automaton cannot remember the items written; a matcher's item memory takes arrays of strings "
                   "whose place alone says their items must differ (JSON mode, and tool formats with JSON arguments)",
}
_WALKED_KEYWORDS = frozenset({"$ref", "$dynamicRef", *ALWAYS_REFUSED})
"""Keywords whose presence anywhere in the documents a compiler looks up once, at its start."""
_TRANSFORMED_FIRST = ("unevaluatedProperties", "unevaluatedItems")
"""Keywords that make ``_value`` rewrite a schema before checking its keywords (as dependent
schemas do)."""
_NOT_TYPED_DIRECTLY = ("$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "if", "not", "enum", "const")
"""Keywords that send a schema elsewhere than ``_typed``'s object and array builders (merged,
split or negated: its children may be compiled restricted, or not at all)."""
_REFERENCES = ("$ref", "$dynamicRef")
_SCOPE = "scope "
"""Prefix of the ``Refs`` entries that record the schema resources a path entered (the dynamic
scope ``$dynamicRef`` resolves against), with depth -1 (never a ``$ref`` expansion's)."""
KNOWN_METASCHEMAS = frozenset({
    "json-schema.org/draft-04/schema", "json-schema.org/draft-06/schema", "json-schema.org/draft-07/schema",
    "json-schema.org/draft/2019-09/schema", "json-schema.org/draft/2020-12/schema", "json-schema.org/schema",
})
_SPLIT_APPLICATORS = frozenset({"$ref", "allOf", "anyOf", "oneOf", "if", "then", "else"})
"""Applicators whose evaluations :meth:`SchemaCompiler._evaluation_alternatives` splits into
alternatives (a ``not`` evaluates nothing: it constrains only)."""
_COVERING = {"unevaluatedProperties": "additionalProperties", "unevaluatedItems": "items"}
"""The keyword an ``unevaluated*`` equals once what is evaluated is static."""
MAX_EVALUATION_ALTERNATIVES = 64
"""Most alternatives one ``unevaluated*`` fold splits a schema into."""
_MAX_OVERLAPPING_BRANCHES = 6
"""Most branches of an ``anyOf`` that may match together an ``unevaluated*`` fold splits by
which of them match (``2**n - 1`` sets)."""


@dataclass(frozen=True)
class _Alternative:
    """One alternative of a schema split for an ``unevaluated*`` fold: its conjunction of
    ``evaluating`` parts (whose properties/items count as evaluated) and ``constraining`` parts
    (which hold but evaluate nothing)."""

    evaluating: tuple[Any, ...]
    constraining: tuple[Any, ...]

    def both(self, other: "_Alternative") -> "_Alternative":
        return _Alternative(self.evaluating + other.evaluating, self.constraining + other.constraining)


class _ContainsBound(NamedTuple):
    """One ``contains`` of an array with its ``minContains`` and ``maxContains`` (None:
    unbounded), written at ``pointer``."""

    schema: Any
    minimum: int
    maximum: int | None
    pointer: str


class _KeyWitness(NamedTuple):
    """A member an object must hold (what fails a keyword on keys: see
    :meth:`SchemaCompiler._key_witness`): its key none of ``names`` and matching none of
    ``patterns`` (``outside``), else matching the one of ``patterns``; its value meeting
    ``value`` as well (True: any)."""

    outside: bool
    names: tuple[str, ...]
    patterns: tuple[str, ...]
    value: Any


@dataclass(slots=True)
class _SubtreeFacts:
    """What building one sub-value's node depended on, besides the schema and its cache key:
    the most times one ``$ref`` had been expanded on the path when it was expanded again
    (``-1``: no expansion; the node is the same under any recursion cut above it). Filled while
    the sub-value is built (its own and its children's), then kept with its cached node."""

    deepest_expansion: int = -1


class _Built(NamedTuple):
    """A cached sub-value: the schema (kept alive, so that its id stays unique), its node, and
    what the node depended on."""

    schema: Any
    node: Node
    facts: _SubtreeFacts


def _located(exc: SchemaTooComplexError, pointer: str, keyword: str) -> SchemaTooComplexError:
    """``exc`` located at ``pointer`` and ``keyword`` when it is an automaton's, built eagerly past
    ``max_states`` (:func:`~enforcer.automaton.states_exceeded`: checked state by state, so the
    refusal costs at most that many states) and not located yet by a sub-schema inside; else
    ``exc`` itself."""
    if exc.pointer or exc.keyword or not exc.budget.startswith(("max_states=", "max_eager_states=")):
        return exc
    return SchemaTooComplexError(exc.reason, pointer, exc.budget, keyword)


# keywords whose value makes them no-ops (spec defaults), so they need no support
_NO_OP = {"uniqueItems": False, "minProperties": 0}
_DISJOINT_LEVELS = 8
DEFAULT_MAX_EAGER_STATES = 250_000
"""Default budget: states one compile builds whole, summed. Each is a row built, trimmed and
renumbered (1-10 us), held over its automaton's byte classes (one 4-byte entry per class:
13-76 in the corpora's automata), and the automata built whole stay for the compile (one is
reused wherever its expression comes again), so this bounds a compile's tables to well under
100 MB and its whole builds to about a second (to about 250 MB with the 1 KB rows of 256
entries held before session 37). Two jsonschemabench schemas of 6,156 compile only past it
(Github_hard o90971: 723,000 states, 2.7-4.5 s and 780 MB with 1 KB rows; JSON Schema Store's
jsonld: 357,000, 1-1.7 s and 430 MB), and seven of MaskBench's 147 handwritten ones
(350,000-830,000 states, 0.5-2.4 s and 230-890 MB); the refusals that filled 1,000,000 took
up to 9 s and 2.1 GB (prometheus)."""
DEFAULT_MAX_NFA_STATES = 4_000_000
"""Default budget: NFA states per compiled value automaton. An NFA this large takes about
0.3 s and at most 200 MB (``NFA_STATE_BYTES`` each) to build when a walk first reaches it;
GOV.UK's content schemas (jsonschemabench Github_hard, recursive link sets) need 2.5-3.1
million."""
MAX_COUNTED_PROPERTIES = 1_000
"""Largest ``minProperties``/``maxProperties`` bound counted exactly. Each count is a copy of
the object's states: a bound whose copies of the undeclared keys' member alone pass
``max_nfa_states`` is over budget before the object is built."""
MAX_KEY_LANGUAGES = 16
"""Most key languages of undeclared keys per object: one per set of ``patternProperties``
patterns some key matches exactly (disjoint patterns: one each, and one for none)."""
MAX_SUB_VALUES = 20_000
"""Most sub-values one compile builds, over all its fallback attempts (about 40 microseconds
each on average: under a second at most). The largest compiled jsonschemabench schema builds
13,535 (Kubernetes kb_1161, 0.7 s); JSON Schema Store's service-schema built 938,000 in 30 s
before its refusal, 100,000 in 3.6 s under the first bound, and 25,000 in 1.0 s under the one
before this."""
FALLBACK_SHARE = 2
"""A knotted attempt refused on ``max_eager_states`` leaves its fallback (recursion cut, no
knots) this fraction of what it left of each budget, eager states and sub-values, not all of
the eager budget again: a refusal builds at most 1.5 budgets of each (Prometheus' config,
refused: 1.2 -> 0.8 s; JSON Schema Store's web-types 2.6 -> 1.6 s). The fallbacks that compile
after such an attempt build up to 90,000 eager states (MaskBench's oneofpr1 in spec mode) and
a few hundred sub-values."""
FALLBACK_SUB_VALUES = 2_500
"""Most sub-values the fallback after a knotted attempt (recursion cut, no knots) builds on top of
that attempt's. Fallbacks that compile build a few hundred (866 at most over jsonschemabench and
MaskBench, strict and spec: JSON Schema Store's discovery); those that went on to 9,000 (web-types,
circleciconfig) were refused in the end, after 0.8 s of it."""
MAX_NESTING = 100
"""Deepest chain of sub-schemas compiled one inside another (through ``properties``, ``items``,
``$ref``, ``allOf``, ...). Deeper schemas raise :class:`SchemaTooComplexError` naming the
pointer: the compiler and the automaton builder recurse a few Python frames per level."""

Refs = tuple[tuple[str, int], ...]
"""The ``$ref`` expansions on the current path, each with the value depth where it happened,
and the schema resources the path entered (``_SCOPE`` entries)."""


@dataclass(frozen=True)
class SchemaOptions:
    """How a schema is turned into text. Hashable: part of every cache key."""

    strict: bool = True
    """Objects without ``additionalProperties`` admit no extra keys (the peers' default).
    ``False`` follows the specification: extra keys, with any value, after the declared ones."""
    indent_width: int = 4
    """After a newline, up to ``indent_width * (depth + 1)`` spaces (capped by ``max_indent``)."""
    max_indent: int = 32
    free_form_depth: int = 32
    """Nesting allowed inside values the schema does not describe (``{}``, bare ``object``).
    A lazily built automaton holds one placeholder state per such value and adds a level of
    containers (about 190 NFA states) the first time a walk reaches it, so a level costs only
    where a text goes; its states count against ``max_states`` and ``max_automaton_bytes``.
    Where an automaton is built whole (``allOf`` parts that do not merge, ``not``,
    ``uniqueItems`` items) they nest at most ``WHOLE_FREE_FORM_DEPTH`` (4) deep."""
    max_recursion: int = 3
    """Recursion is a knot (:mod:`enforcer.knots`): a lazily built automaton follows it as deep as
    a text goes. Where it is not one, this is how often one ``$ref`` may be expanded on a path
    before recursion is cut: past the depth where whitespace widths stop changing (recursion
    through schemas the compiler combines), on every path in documents with ``$dynamicRef``,
    and where knots cannot be decoded exactly (a recursion with no finite value, a level
    holding a block too large to copy). A value whose automaton exceeds ``max_nfa_states``
    with recursion expanded is compiled again with recursion cut one expansion earlier, down
    to ``MIN_RECURSION`` expansions, before it is refused. Automata built whole (intersections,
    differences) cut recursion at the knot."""
    assert_formats: bool = True
    """Enforce ``format`` (date-time, uuid, ...). ``False`` treats it as an annotation."""
    unknown_formats: str = "ignore"
    """Formats outside the supported list (OpenAPI's ``byte``, ``float``, ...): ``"ignore"``
    treats them as the annotations JSON Schema 2020-12 makes them by default (validators,
    and Moonshot's verifier, do not check them); ``"error"`` raises UnsupportedSchemaError."""
    max_states: int = 200_000
    """States one automaton may have: an eagerly built one (patterns, formats, intersections)
    is refused beyond it at compile time; a lazily built one stops growing while decoding
    (the matcher's ``error`` says so; see :class:`~enforcer.automaton.LazyDFA`)."""
    max_automaton_bytes: int = 512 << 20
    """Bytes one lazily built automaton may hold (NFA, subsets, table, rows): an NFA estimated
    above it is refused at compile time; past it while decoding the automaton stops growing."""
    max_mask_bytes: int = 256 << 20
    """Bytes of masks one compiled value keeps; past it new masks are computed but not kept."""
    max_eager_states: int = DEFAULT_MAX_EAGER_STATES
    """States one compile may build whole, summed over every automaton it determinises or
    intersects eagerly (patterns, formats, intersections of ``allOf`` parts that do not merge,
    negations): past it the schema is refused (:class:`SchemaTooComplexError` naming the
    sub-schema and keyword), so that no compile spends more than seconds on automata that
    are each within ``max_states``."""
    max_nfa_states: int = DEFAULT_MAX_NFA_STATES
    """Budget of the value automaton, in NFA states counted before it is built
    (:func:`~enforcer.automaton.nfa_budget_size`: an embedded automaton's states, which hold no
    edges, count 18/50 of one): a schema whose expression needs more (bounded repeats times
    nesting times ``$ref`` fan-out, long constants, long minimum lengths) raises
    :class:`SchemaTooComplexError` naming the sub-schema that first exceeds it, before any
    token. The lazy DFA's states are sets of these NFA states, built as walks reach them."""

    resources: Any = ()
    """Schema documents that ``$ref`` may name outside the schema, by absolute URI: a mapping
    ``{uri: schema}`` (like jsonschema's ``referencing.Registry``), kept as sorted
    ``(uri, canonical JSON)`` pairs so the options stay hashable. A document may carry its own
    ``$id``s and anchors; one written in another dialect than the schema's is refused when
    referenced. Nothing is ever fetched: a reference to anything else is refused, named."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "resources", normalise_resources(self.resources))
        if self.unknown_formats not in ("ignore", "error"):
            raise ValueError(f"unknown_formats must be 'ignore' or 'error', not {self.unknown_formats!r}")
        for name, lowest in _OPTION_MINIMA.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
                raise ValueError(f"{name} must be an integer of at least {lowest}, not {value!r}")
        for name in ("strict", "assert_formats"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, not {getattr(self, name)!r}")


_OPTION_MINIMA = {"indent_width": 0, "max_indent": 0, "free_form_depth": 0, "max_recursion": 1, "max_states": 1,
                  "max_automaton_bytes": 1, "max_mask_bytes": 0, "max_eager_states": 1, "max_nfa_states": 1}
"""The smallest value each integer option of :class:`SchemaOptions` takes (a negative
``free_form_depth`` silently meant scalars only)."""


@lru_cache(maxsize=None)
def _whitespace(spaces: int) -> Node:
    """Nothing, one space, or a newline and up to ``spaces`` spaces (one shared node per width:
    nodes are immutable)."""
    return optional(alt(literal(" "), seq(literal("\n"), repeat(literal(" "), 0, spaces))))


@lru_cache(maxsize=None)
def _comma(spaces: int) -> Node:
    return seq(literal(","), _whitespace(spaces))


_COLON = seq(literal(":"), optional(literal(" ")))


def _text_without_references(value: Any) -> str | None:
    """``value`` as canonical JSON (sorted keys), the key of a node that depends on the schema
    text alone; None when it holds a reference or a base URI (:func:`holds_reference`: the node
    then depends on the path that reached it) or something JSON cannot write."""
    if holds_reference(value):
        return None
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return None


def _json_key(value: Any) -> str:
    """Canonical text for JSON equality (1 == 1.0, True != 1)."""
    if isinstance(value, str):
        return "s" + value  # fast path (enums of many strings); never starts like the JSON below
    if type(value) is int:
        return "n" + str(value)  # fast path: a Python int's text is its canonical text
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        d = numbers.to_decimal(value)
        if d is not None:  # fast path for numbers: equal numbers share one canonical text
            return "n" + numbers.canonical_text(d)[0]
    return json.dumps(_json_key_form(value), sort_keys=True)


def _json_key_form(v: Any) -> Any:
    """:func:`_json_key`'s value as plain JSON: each value tagged with its kind, numbers
    normalised, object members sorted. (A module function: a nested recursive one would be a
    closure in a reference cycle, left for the collector at each call.)"""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return [type(v).__name__, v]
    if isinstance(v, (int, float)):
        d = numbers.to_decimal(v)
        return ["num", str(d.normalize()) if d is not None else repr(v)]
    if isinstance(v, list):
        return ["list", [_json_key_form(x) for x in v]]
    if isinstance(v, dict):
        return ["dict", sorted((k, _json_key_form(x)) for k, x in v.items())]
    return ["other", repr(v)]


class SchemaCompiler:
    """Compiles one root schema. Lifetime: one ``compile_json_schema`` call."""

    def __init__(self, root: Any, options: SchemaOptions, raw_strings: bool = False, knots: bool = True,
                 dialect_uri: str | None = None) -> None:
        """``raw_strings``: a string at the top level (depth 0) is its raw UTF-8 text, without
        quotes or JSON escapes (formats that write string values unquoted); nested strings stay
        JSON. ``knots``: False builds every value as a document with ``$dynamicRef`` gets it
        (recursion cut on each path; see :attr:`_knots`). ``dialect_uri``: the ``$schema`` of a
        region of ``root`` written in another dialect than the root (:meth:`_in_dialect`); the
        compiler then builds that region's values in that dialect."""
        dialect_source = root if dialect_uri is None else {"$schema": dialect_uri}
        self.dialect = dialect_of(dialect_source)
        self._external = resource_documents(options.resources) if options.resources else {}
        later = _LATER_KEYWORDS.get(self.dialect, frozenset())
        # one walk finds the keywords looked up at the start and any the dialect lacks; the root
        # is copied without the latter only where one appears (the walk costs less than the copy)
        found = keys_present([root, *self._external.values()], _WALKED_KEYWORDS | later)
        self.root = root
        if not found.isdisjoint(later):
            self.root = _without_keywords(root, later)
            found = keys_present([self.root, *self._external.values()], _WALKED_KEYWORDS)
        self.keywords_present = found & _WALKED_KEYWORDS
        """Which of ``_WALKED_KEYWORDS`` appear in the documents at all: without a keyword refused
        wherever it stands, :meth:`_refuse_early` has nothing to look for; without
        ``uniqueItems``, there is no item memory to plan."""
        self.options = options
        self.raw_strings = raw_strings
        self._region_of: str | None = None if dialect_uri is None else dialect_of(root)
        """The dialect of the root when this compiler builds a region in another one (None: it
        compiles the root)."""
        self._knots_asked = knots
        self._dialects: dict[str, SchemaCompiler] = {}
        """A compiler per other dialect that a region of the root is written in."""
        self._validator_cls = validator_class(dialect_source)
        self._checked: set[str] = set()  # the given resources checked so far
        self._validator_root = root if isinstance(root, (dict, bool)) else {}
        self._any_cache: dict[tuple[int, int], Node] = {}
        self._enums: dict[tuple[str, int, str, int], tuple[Any, Node]] = {}
        """(keyword, id of its members, the rest of the schema, depth) -> (the members, kept so that
        their id stays theirs, the node)."""
        self.max_recursion = options.max_recursion
        """The recursion cut in use (lowered from the option when a value exceeds its budget)."""
        self._recursed = False  # a $ref was expanded inside its own expansion
        self._sub_values_built = 0  # over every attempt of this compile (see MAX_SUB_VALUES)
        self._sub_values_limit = MAX_SUB_VALUES  # less for a fallback (FALLBACK_SUB_VALUES, FALLBACK_SHARE)
        self._nesting = 0
        self._unique_holders: dict[int, dict] = {}
        """id of the ``items`` of each schema whose ``uniqueItems`` matchers enforce -> that
        schema (:meth:`leave_unique_items_to`)."""
        self._resources: ResourceIndex | None = None
        self._made: dict[int, tuple[dict, dict]] = {}
        """id of a schema this compiler made (not the document's) -> (it, kept so that its id
        stays its own; the first made schema of the same content): see :meth:`_canonical`."""
        self._made_by_content: dict[tuple, dict] = {}
        self._list_contents: dict[int, tuple[list, tuple]] = {}
        """id of a list inside a made schema -> (it, kept alive; its content, see :meth:`_content`)."""
        self._counted: dict[tuple[bool, int, int], Node] = {}
        self._string_products: dict[tuple[bool, bool, Any, Any, int, int | None, tuple | None], Node] = {}
        """(raw, every writing, pattern, asserted format, minLength, maxLength, the pattern and
        format of a ``not`` beside them) -> the string body their product makes, built once per
        compile (the same pattern and bounds in several places: a product of 166,000 states took
        0.8 s each time in Github_hard o62065; an ``if`` on a pattern, whose ``else`` is its
        difference, 459 times in o3895)."""
        self._key_literals: dict[str, Node] = {}
        self._patterns: dict[tuple[str, str], Node] = {}
        """(pattern, escape mode) -> its string bodies, parsed and built once per compile (a
        ``$ref``-ed definition's patterns are met again at every depth and path it is built at:
        1,775 builds of a dozen patterns in Github_hard o82273)."""
        self._disjoint_verdicts: dict[tuple[int, int, int], tuple[Any, Any, bool]] = {}
        """(id of a, id of b, level) -> (a, b, :meth:`_disjoint` of them): a and b kept so that
        their ids stay theirs; once per compile (a ``oneOf`` of a ``$ref``-ed definition has its
        pairs tested again wherever it is built)."""
        self._string_texts: dict[str, DFA | None] = {}
        """A plain string schema's keywords (JSON) -> its raw text automaton (None: refused), for
        :meth:`_strings_apart`, built once per compile."""
        self._strings_apart_verdicts: dict[tuple[str, str], bool] = {}
        self._enum_types: dict[int, tuple[Any, frozenset[str]]] = {}
        self._negated_constants: dict[tuple[str, int, int], Node] = {}
        """(a schema with ``not: {enum}`` of strings, booleans or null, as JSON; depth; free-form
        depth) -> its automaton, built once per compile."""
        self._exclusive_verdicts: dict[tuple[int, ...], tuple[Any, list[Any], Any]] = {}
        """(id of an ``allOf`` holder, ids of its parts) -> (holder, parts, its exclusive
        conditions' union or None): see :meth:`_exclusive_conditions_of`."""
        self._scalar_intersections: dict[tuple[str, str, int], Node] = {}
        """(JSON type, the unmerged ``allOf`` parts restricted to it as JSON, depth) -> their
        intersection, for the scalar types (no ``$ref`` inside), built once per compile: a
        definition met again through another ``$ref`` path rebuilt it (Github_hard o3895's
        ``oneOf`` of patterns under an ``if``: 3 times each)."""
        self._values: dict[tuple, _Built] = {}
        """:meth:`_value_key` -> its node: a sub-schema met again (``$ref`` fan-out, a definition
        used by several properties) is one node, built once. A value compiled again with
        recursion cut earlier keeps the nodes that no cut changes."""
        self._knots = knots and "$dynamicRef" not in self.keywords_present
        """Recursion as knots and large repeated sub-values as shares (:mod:`enforcer.knots`):
        sub-values keyed by schema and depth alone. Off where ``$dynamicRef`` makes a value
        depend on its path, and for a value whose knots :func:`~enforcer.knots.finish` refuses
        (then ``$ref`` recursion is cut after ``max_recursion`` expansions on each path)."""
        self._saturated = 1
        """The depth from which whitespace widths stop changing: deeper values are built alike."""
        while self._width(self._saturated) != self._width(self._saturated + 1):
            self._saturated += 1
        self._in_progress: dict[tuple, Deferred | None] = {}
        """Keys of the sub-values being built -> the knot made when one met itself (None: none)."""
        self._shares: dict[int, tuple[Node, Node]] = {}
        """id of a node met again -> (that node, kept so its id stays its own; what each use holds:
        a share, or the node itself when it is small or holds a block too large to copy)."""
        self._block_sizes: dict[int, tuple[Node, int]] = {}  # knots.copyable's memo (of largest_block)
        self._cyclic: bool | None = None  # see _reference_cycle
        self._knotted = False
        """The attempt with knots made a knot or a share, or expanded a ``$ref`` inside its own
        expansion: what it built may differ from a build with recursion cut."""
        self._building: list[_SubtreeFacts] = []  # one per sub-value being built, innermost last
        self._cycles: dict[str, list[str]] = {}
        """``$ref`` name -> a cycle back to it that never descends (``[]``: none; see
        :meth:`_cycle_back_to`)."""

    @cached_property
    def _validator(self) -> Any:
        """jsonschema's validator of the root in its dialect (with the given resources), made
        when a keyword first needs one (an enum's members checked against the rest of their
        schema, ``propertyNames``): about 30 us that most compiles never spend."""
        return self._validator_cls(self._validator_root, **_registry(self._external, self._validator_cls))

    # ---- whitespace and punctuation ---------------------------------------------------------

    def ws(self, level: int) -> Node:
        """Whitespace before content at nesting ``level`` (or before the bracket that closes
        level ``level + 1``): nothing, one space, or a newline and up to
        ``indent_width * level`` spaces. Covers compact, ``json.dumps`` default and indented
        output while keeping the automaton small."""
        return _whitespace(self._width(level))

    def _comma(self, level: int) -> Node:
        return _comma(self._width(level))

    def _width(self, level: int) -> int:
        """Spaces allowed after a newline at nesting ``level``."""
        return min(self.options.indent_width * level, self.options.max_indent)

    @staticmethod
    def _colon() -> Node:
        return _COLON

    # ---- entry --------------------------------------------------------------------------

    def compile(self) -> Node:
        if isinstance(self.root, dict) and "$schema" in self.root and not _known_metaschema(self.root["$schema"]):
            raise UnsupportedSchemaError("$schema", "", f"unknown meta-schema {str(self.root['$schema']).rstrip('#')!r}: "
                                         "its vocabularies may change what keywords mean")
        if not self.keywords_present.isdisjoint(ALWAYS_REFUSED):
            self._refuse_early()
        with eager_budget(self.options.max_eager_states):
            return self.value(self.root, "", 0, ())

    def leave_unique_items_to(self, holders: Iterable[dict]) -> None:
        """Compile the arrays of these schemas (of this root) without their ``uniqueItems``:
        the caller's matchers enforce it (:mod:`enforcer.item_memory`). Elsewhere it is refused."""
        self._unique_holders.update((id(holder.get("items")), holder) for holder in holders)

    def _left_to_item_memory(self, schema: dict) -> bool:
        """Whether ``schema``'s ``uniqueItems`` is enforced by the matchers' item memory: it is
        a schema the plan covers, or a copy of one (narrowed to arrays, annotations beside:
        every other keyword the same object)."""
        holder = self._unique_holders.get(id(schema.get("items")))
        return holder is not None \
            and all(k == "type" or k in ANNOTATIONS or (k in holder and holder[k] is v) for k, v in schema.items()) \
            and all(k in schema for k in holder if k in _TYPE_KEYWORDS["array"])

    def _region(self, schema: Any, pointer: str, depth: int, refs: Refs) -> Node | None:
        """The value of ``schema`` when it is a region in another dialect (a subschema below the
        root with a ``$schema`` of its own, :meth:`_in_dialect`); None otherwise."""
        if not isinstance(schema, dict) or "$schema" not in schema or schema is self.root:
            return None
        other = self._dialect_of_region(schema["$schema"], pointer)
        return None if other is None else self._in_dialect(other, schema, pointer, depth, refs)

    def _dialect_of_region(self, uri: Any, pointer: str) -> str | None:
        """A subschema below the root that names its own ``$schema``: None when it is this
        compiler's dialect, else that dialect's URI (a region :meth:`_in_dialect` builds).
        Validators switch dialect there (jsonschema does, for the subschema and every schema it
        references without a ``$schema`` of its own): ``integer``, the exclusive bounds,
        ``items`` and the keywords a draft lacks change meaning. Refused: an unknown
        meta-schema; a region inside a region; a region in a later dialect than the root's
        (the root's compile has dropped the keywords its dialect lacks from every subschema)."""
        if not isinstance(uri, str) or not _known_metaschema(uri):
            raise UnsupportedSchemaError("$schema", pointer, f"this subschema is written in the unknown meta-schema "
                                         f"{uri!r}: its vocabularies may change what keywords mean")
        dialect = dialect_of({"$schema": uri})
        if dialect == self.dialect:
            return None
        if self._region_of is not None:
            raise UnsupportedSchemaError("$schema", pointer, f"a subschema in {dialect} inside a region in "
                                         f"{self.dialect} of a schema in {self._region_of}: one change of dialect "
                                         "is supported")
        if not _LATER_KEYWORDS.get(self.dialect, frozenset()) <= _LATER_KEYWORDS.get(dialect, frozenset()):
            raise UnsupportedSchemaError("$schema", pointer, f"a subschema in {dialect}, later than the schema's "
                                         f"{self.dialect}: keywords its dialect lacks are not compiled there")
        return uri

    def _in_dialect(self, uri: str, schema: dict, pointer: str, depth: int, refs: Refs) -> Node:
        """``schema``, whose ``$schema`` names ``uri``, built by a compiler of that dialect over
        the same root (one per dialect, kept for this compile): the region and every schema it
        references are read in that dialect, as validators read them. Its knots and recursion
        cuts are its own; the eager budget is this compile's."""
        dialect = dialect_of({"$schema": uri})
        compiler = self._dialects.get(dialect)
        if compiler is None:
            compiler = self._dialects[dialect] = SchemaCompiler(self.root, self.options, self.raw_strings,
                                                                self._knots_asked, dialect_uri=uri)
        region = _without_keywords(schema, _LATER_KEYWORDS.get(compiler.dialect, frozenset()))
        return compiler.value(region, pointer, depth, refs)

    def _refuse_early(self) -> None:
        """Raise the refusal of a keyword that is never enforced (:data:`ALWAYS_REFUSED`) when
        it sits where the compile is sure to meet it, before any automaton is built: a schema
        on a path of ``properties``, ``additionalProperties``, ``items``/``prefixItems``/
        ``additionalItems`` and bare ``$ref``s from the root, each schema on it one that the
        compiler types directly (no applicator, constant or dependent schema beside it, which
        could restrict its children away). The same error the compile raises on reaching it,
        without the eager intersections met before it (a schema spent 5 s on them before its
        refusal). Cost: one visit per schema object on those paths."""
        stack: list[tuple[Any, str]] = [(self.root, "")]
        seen: set[int] = set()
        while stack:
            schema, pointer = stack.pop()
            for _ in range(32):  # bare $ref chains, as _value follows them
                if not (isinstance(schema, dict) and set(schema) - ANNOTATIONS == {"$ref"}):
                    break
                try:  # the pointer stays the referring one's, as the compile reports it
                    schema, _ = self.resolve(schema["$ref"], pointer, schema)
                except (InvalidSchemaError, UnsupportedSchemaError):
                    schema = None  # the compile reports it where it meets it
            if not isinstance(schema, dict) or id(schema) in seen:
                continue
            seen.add(id(schema))
            if any(k in schema for k in _TRANSFORMED_FIRST) or _schema_dependencies(schema) \
                    or _validated_constants(schema):
                continue  # rewritten (or its members validated) before its keywords are checked
            for key in ALWAYS_REFUSED:
                if key in schema and _NO_OP.get(key, object()) != schema[key] and not self._excluded_by_type(schema, key) \
                        and not (key == "uniqueItems" and self._left_to_item_memory(schema)):
                    raise UnsupportedSchemaError(key, pointer, REFUSAL_REASONS.get(key, ""))
            if any(k in schema for k in _NOT_TYPED_DIRECTLY):
                continue
            try:
                types = declared_types(schema)
            except InvalidSchemaError:
                continue
            stack.extend(reversed(self._typed_children(schema, pointer, types)))

    @staticmethod
    def _typed_children(schema: dict, pointer: str, types: set[str]) -> list[tuple[Any, str]]:
        """The sub-schemas ``_object``/``_array`` compile whatever the value (for
        :meth:`_refuse_early`), with their pointers, in the order they are compiled."""
        children: list[tuple[Any, str]] = []
        properties = schema.get("properties")
        if "object" in types and not any(k in schema for k in ("patternProperties", "propertyNames")):
            if isinstance(properties, dict) and False not in properties.values():
                children += [(sub, f"{pointer}/properties/{_escape(name)}") for name, sub in properties.items()]
            if isinstance(schema.get("additionalProperties"), dict):
                children.append((schema["additionalProperties"], f"{pointer}/additionalProperties"))
        if "array" in types and "contains" not in schema:
            for key in ("prefixItems", "items"):
                value = schema.get(key)
                if isinstance(value, list):
                    children += [(sub, f"{pointer}/{key}/{i}") for i, sub in enumerate(value)]
                elif isinstance(value, dict):
                    children.append((value, f"{pointer}/{key}"))
            if isinstance(schema.get("additionalItems"), dict) and isinstance(schema.get("items"), list):
                children.append((schema["additionalItems"], f"{pointer}/additionalItems"))
        return children

    def value(self, schema: Any, pointer: str, depth: int, refs: Refs) -> Node:
        """Every accepted serialisation of values of ``schema`` at value nesting ``depth``. An
        outermost value over its budget is compiled again with recursion cut earlier
        (``SchemaOptions.max_recursion``): at most two attempts with the defaults. With two or
        more fallbacks left (``max_recursion`` 4 or more) the second attempt is the earliest
        cut (:meth:`_probe_floor`: over budget there, refused)."""
        if self._nesting:
            return self._sub_value(schema, pointer, depth, refs)
        if self._knots:
            spent = eager_states_spent()
            self._knotted = False
            try:
                node = self._attempts(schema, pointer, depth, refs)
                if self._knotted:  # else it holds no knot or share to check
                    knots.finish(node, self._block_sizes)
                return node
            except (knots.KnotsUnusable, SchemaTooComplexError) as exc:
                budget = getattr(exc, "budget", "")
                if not self._knotted or budget.startswith("MAX_SUB_VALUES"):
                    # a build with recursion cut would meet the same: without knots it builds
                    # a sub-value per $ref path and at least as many expansions
                    raise
                # built again as before knots: recursion cut, every path its own nodes (its
                # sub-values counted on from this attempt's: MAX_SUB_VALUES bounds the compile)
                self._knots = False
                self._values, self._shares, self._in_progress = {}, {}, {}
                self.max_recursion, self._recursed = self.options.max_recursion, False
                share = self._sub_values_built + FALLBACK_SUB_VALUES
                if budget.startswith("max_eager_states="):  # spent: the fallback has its share of each budget
                    limit = self.options.max_eager_states
                    spent = None if spent is None else max(spent, limit - limit // FALLBACK_SHARE)
                    share = min(share, self._sub_values_limit
                                - (self._sub_values_limit - self._sub_values_built) // FALLBACK_SHARE)
                self._sub_values_limit = min(self._sub_values_limit, share)
                if spent is not None:
                    refund_eager_states(spent)
        return self._attempts(schema, pointer, depth, refs)

    def _attempts(self, schema: Any, pointer: str, depth: int, refs: Refs) -> Node:
        """The outermost value, built again with recursion cut earlier while over its budget."""
        probed: Node | None = None  # the value at the earliest cut, once probed
        floor_tried = False
        spent = eager_states_spent()
        while True:
            if probed is not None and self.max_recursion == MIN_RECURSION:
                return probed
            if spent is not None:
                refund_eager_states(spent)  # each attempt has the whole eager budget
            try:
                return self._sub_value(schema, pointer, depth, refs)
            except SchemaTooComplexError as exc:
                if not exc.budget.startswith("max_nfa_states") or not self._recursed \
                        or self.max_recursion <= MIN_RECURSION:
                    # other limits are met while building automata (costly to meet again);
                    # without recursion to cut earlier nothing makes the value smaller
                    raise
                if self.max_recursion - MIN_RECURSION > 1 and not floor_tried:
                    floor_tried = True
                    if spent is not None:
                        refund_eager_states(spent)
                    probed = self._probe_floor(schema, pointer, depth, refs)
                self.max_recursion -= 1
                self._recursed = False
                # a node whose $refs were all expanded fewer times than the new cut is the
                # same node: kept (Kubernetes kb_1161 built 46,000 sub-values again)
                self._values = {key: built for key, built in self._values.items()
                                if built.facts.deepest_expansion < self.max_recursion}

    def _probe_floor(self, schema: Any, pointer: str, depth: int, refs: Refs) -> Node | None:
        """The value with recursion cut at ``MIN_RECURSION``, tried once the first attempt is
        over budget with two or more fallbacks left. Automata only grow with each expansion, so
        when this one is over budget every fallback is too: its refusal is raised at once, one
        attempt instead of one per cut. Otherwise the fallbacks go on from where they were,
        and this node is theirs if they reach this cut; None when the probe met another budget
        (no verdict). The probe leaves the attempts' state and sub-value count as it found
        them."""
        saved = (self.max_recursion, self._values, self._recursed, self._sub_values_built)
        self.max_recursion, self._values, self._recursed = MIN_RECURSION, {}, False
        try:
            return self._sub_value(schema, pointer, depth, refs)
        except SchemaTooComplexError as exc:
            if exc.budget.startswith("max_nfa_states"):
                raise exc from None  # the refusal itself, not chained to the first attempt's
            return None
        finally:
            self.max_recursion, self._values, self._recursed, self._sub_values_built = saved

    def _sub_value(self, schema: Any, pointer: str, depth: int, refs: Refs) -> Node:
        if self._nesting >= MAX_NESTING:
            raise SchemaTooComplexError(f"sub-schemas nest more than {MAX_NESTING} deep "
                                        f"(through {', '.join(r for r, _ in refs[-3:]) or 'no $ref'})", pointer,
                                        f"MAX_NESTING={MAX_NESTING}")
        if self._resources is not None and type(schema) is dict:
            schema = self._canonical(schema)
        key = self._value_key(schema, depth, refs)
        hit = self._values.get(key)
        if hit is not None:
            self._depended_on(hit.facts.deepest_expansion)
            return self._repeated(hit.node) if self._knots else hit.node
        if key in self._in_progress:  # met inside itself: a knot
            made = self._in_progress[key]
            if made is None:
                made = self._in_progress[key] = knots.knot()
                self._knotted = True
            return made
        self._sub_values_built += 1
        if self._sub_values_built > self._sub_values_limit:
            reason = "" if self._sub_values_limit == MAX_SUB_VALUES else \
                (f" (the fallback after a knotted attempt: {FALLBACK_SUB_VALUES:,} more at most, and half of what "
                 "that attempt left once automata built whole ran out)")
            raise SchemaTooComplexError(f"more than {self._sub_values_limit:,} sub-values built{reason}", pointer,
                                        f"MAX_SUB_VALUES={MAX_SUB_VALUES}")
        building = self._building
        facts = _SubtreeFacts()
        building.append(facts)
        self._nesting += 1
        if self._knots:
            self._in_progress[key] = None
        try:
            node = self._value(schema, pointer, depth, refs)
        except SchemaTooComplexError as exc:
            located = _located(exc, pointer, "")
            if located is exc:
                raise
            raise located from None
        finally:
            self._nesting -= 1
            building.pop()
            made = self._in_progress.pop(key, None)
        if made is not None:
            level = knots.level_of(made)
            assert level is not None
            level.node = node
        if building:  # the flags were set where the facts were found: only the parent learns them
            parent = building[-1]
            parent.deepest_expansion = max(parent.deepest_expansion, facts.deepest_expansion)
        if nfa_budget_size(node) > self.options.max_nfa_states:  # (inline: once per sub-value)
            self.check_size(node, pointer)
        self._values[key] = _Built(schema, node, facts)
        # where recursion can happen every large sub-value is a share at its first use too: a
        # knot's or share's level is copied at each expansion, so it holds placeholders, not
        # large copies
        if node.nfa_states >= SHARED_MIN_STATES and self._knot_levels_possible():
            return self._repeated(node)
        return node

    def _knot_levels_possible(self) -> bool:
        """Whether what is built now may sit in a knot's level, which is copied at each expansion
        (knots are on and a ``$ref`` can lead back to itself)."""
        return self._knots and self._reference_cycle()

    def _reference_cycle(self) -> bool:
        """Whether a ``$ref`` of the document can lead back to itself (a superset: references
        anywhere under a target count, resolved where they are written; unresolvable ones do
        not). Computed once per compile: one depth-first walk of the graph whose edges are the
        documents' values (object members, array items) and each ``$ref`` to what it names, each
        value and reference visited once; a cycle there takes a reference (values alone form a
        tree), so it is a reference that leads back to itself."""
        if self._cyclic is None and "$ref" not in self.keywords_present:
            self._cyclic = False  # no reference anywhere: no walk
        if self._cyclic is None:
            on_path, done = 1, 2
            state: dict[int, int] = {}
            stack: list[tuple[Any, bool]] = [(self.root, False)]
            self._cyclic = False
            while stack:
                value, leaving = stack.pop()
                if leaving:
                    state[id(value)] = done
                    continue
                if id(value) in state:
                    continue
                state[id(value)] = on_path
                stack.append((value, True))
                if isinstance(value, dict):
                    following = list(value.values())
                    ref = value.get("$ref")
                    if isinstance(ref, str):
                        try:
                            following.append(self.resolve(ref, "", value)[0])
                        except (InvalidSchemaError, UnsupportedSchemaError):
                            pass
                elif isinstance(value, list):
                    following = value
                else:
                    continue
                for nxt in following:
                    if not isinstance(nxt, (dict, list)):
                        continue
                    seen = state.get(id(nxt))
                    if seen == on_path:
                        self._cyclic = True
                        return True
                    if seen is None:
                        stack.append((nxt, False))
        return self._cyclic

    def _canonical(self, schema: dict) -> dict:
        """``schema``, or, when the compiler made it (a conjunction of parts, a conditional's
        union, merged keywords: no schema object of the document), the first schema it made
        with the same content, so that a combination made again is the same sub-value: its
        node is built once per depth, and met inside itself it is a knot. Without this a
        recursion through made schemas never met itself and built a new sub-value per level
        until ``MAX_SUB_VALUES`` (a ``$ref`` cycle through ``patternProperties`` and ``allOf``:
        25,000 sub-values in 2.7 s, then refused; now compiled in 0.2 s). Only once a ``$ref``
        was resolved: without one the document is a tree and nothing recurs. A made schema's
        ``$ref`` resolves against the root's base whatever it was made from, so equal content
        is an equal schema. Content: its keys in order, each value's canonical schema (by
        identity) or, for a list, its members' content, or the scalar with its type. Cost: one
        pass over a made schema's keys the first time it is met, a lookup after."""
        if self._resources.holds(schema):  # the common case first
            return schema
        hit = self._made.get(id(schema))
        if hit is not None:
            return hit[1]
        content = tuple((key, self._content(value)) for key, value in schema.items())
        canonical = self._made_by_content.setdefault(content, schema)
        self._made[id(schema)] = (schema, canonical)
        return canonical

    def _content(self, value: Any) -> Any:
        """What :meth:`_canonical` compares of a made schema's value."""
        if type(value) is dict:
            return id(self._canonical(value))
        if type(value) is list:
            hit = self._list_contents.get(id(value))
            if hit is None:
                hit = self._list_contents[id(value)] = (value, tuple(self._content(v) for v in value))
            return hit[1]
        return type(value), value

    def _value_key(self, schema: Any, depth: int, refs: Refs) -> tuple:
        """What a sub-value's node depends on besides the options: with knots, the schema and
        its depth up to where widths stop changing; else the ``$ref`` path too (its expansions
        decide where recursion is cut, its resources what ``$dynamicRef`` names)."""
        if self._knots:
            return id(schema), min(depth, self._saturated)
        return id(schema), depth, refs

    def _repeated(self, node: Node) -> Node:
        """What each use of ``node`` holds where it is used more than once (a sub-value met
        again, a counted repeat's copies): a share (one placeholder state) when the node has
        ``SHARED_MIN_STATES`` states or more and no block too large to copy; else the node."""
        if node.nfa_states < SHARED_MIN_STATES:
            return node
        hit = self._shares.get(id(node))
        if hit is None:
            usable = knots.copyable(node, self._block_sizes)
            hit = self._shares[id(node)] = (node, knots.share(node) if usable else node)
            self._knotted |= usable
        return hit[1]

    def _depended_on(self, expansion: int) -> None:
        """Record that the node being built expanded a ``$ref`` already expanded ``expansion``
        times on its path (``-1``: none): in the flag the budget fallbacks read and in the facts
        of the sub-value being built."""
        self._recursed |= expansion > 0
        if self._building:
            facts = self._building[-1]
            facts.deepest_expansion = max(facts.deepest_expansion, expansion)

    @staticmethod
    @contextlib.contextmanager
    def _eager(pointer: str, keyword: str) -> Iterator[None]:
        """Around automata built whole (determinised, intersected) for ``keyword`` at
        ``pointer``: see :func:`_located` (every sub-value is located so too, without a keyword)."""
        try:
            yield
        except SchemaTooComplexError as exc:
            located = _located(exc, pointer, keyword)
            if located is exc:
                raise
            raise located from None

    def _counted_string(self, raw: bool, min_len: int, max_len: int, pointer: str) -> Node:
        """A string body of ``min_len..max_len`` characters as one counted repeat (its unit's
        rows, not a table: see :class:`~enforcer.automaton.CountedDFA`), made once per bounds
        in this compile; its states count against ``max_nfa_states``."""
        key = (raw, min_len, max_len)
        if key not in self._counted:
            counted = Embedded(CountedDFA(_string_char_dfa(raw), min_len, max_len))
            self._within_budget(nfa_budget_size(counted), pointer, f"maxLength {max_len}", "maxLength")
            self._counted[key] = counted
        return self._counted[key]

    def _check_repeat(self, unit: Node, copies: int, pointer: str, keyword: str) -> None:
        """Refuse ``copies`` copies of ``unit`` past the budget before building them."""
        self._within_budget(nfa_budget_size(unit) * copies, pointer, f"{keyword} {copies}", keyword)

    def check_size(self, node: Node, pointer: str) -> None:
        """Refuse ``node`` when its NFA would exceed ``max_nfa_states`` (see
        :func:`~enforcer.automaton.nfa_budget_size`)."""
        self._within_budget(nfa_budget_size(node), pointer, "its automaton")

    def _within_budget(self, size: int, pointer: str, what: str, keyword: str = "", at_least: bool = False) -> None:
        budget = self.options.max_nfa_states
        if size > budget:
            raise SchemaTooComplexError(f"{what} needs {'at least ' if at_least else ''}{size:,} NFA states", pointer,
                                        f"max_nfa_states={budget}", keyword)

    def _value(self, schema: Any, pointer: str, depth: int, refs: Refs) -> Node:
        region = self._region(schema, pointer, depth, refs)
        if region is not None:
            return region
        if isinstance(schema, dict) and ("$ref" in schema or "$dynamicRef" in schema) \
                and len(set(schema) - ANNOTATIONS) == 1:
            target, refs = self._deref_path(schema, pointer, depth, refs)  # chains: a loop, not a nesting
            if self._knots and isinstance(target, dict):  # one node per target, whichever reference names it
                return self._sub_value(target, pointer, depth, refs)
            schema = target
            region = self._region(schema, pointer, depth, refs)
            if region is not None:
                return region
        if schema is True or (isinstance(schema, dict) and ANNOTATIONS.issuperset(schema)):
            return self.any_value(depth, self.options.free_form_depth)
        if schema is False:
            return NOTHING
        if not isinstance(schema, dict):
            raise InvalidSchemaError(pointer, f"a schema must be an object or a boolean, not {type(schema).__name__}")
        if _validated_constants(schema):
            return self._enum(schema, pointer, depth)
        if "unevaluatedProperties" in schema or "unevaluatedItems" in schema:
            schema = self._fold_unevaluated(schema, pointer)
        dependent = _schema_dependencies(schema)
        if dependent:
            return self.value(self._dependent_union(schema, dependent, pointer), pointer, depth, refs)
        self._check_keywords(schema, pointer)
        if "$ref" in schema or "$dynamicRef" in schema:
            return self._ref(schema, pointer, depth, refs)
        if "allOf" in schema:
            return self._all_of(schema, pointer, depth, refs)
        if "if" in schema:
            return self._if_then_else(schema, pointer, depth, refs)
        if "anyOf" in schema or "oneOf" in schema:
            return self._any_of(schema, pointer, depth, refs)
        if "not" in schema:
            return self._not(schema, pointer, depth, refs)
        node = self._typed(schema, pointer, depth, refs)
        if schema.get("nullable") is True:
            node = alt(node, literal("null"))
        return node

    @staticmethod
    def _dependent_union(schema: dict, dependent: dict[str, Any], pointer: str) -> dict:
        """``schema`` with ``dependentSchemas`` (draft 4-7: ``dependencies`` of schemas) as the
        union over which of their keys an object holds: for each subset T, the object holds
        exactly the keys of T among them and meets their schemas; non-objects meet the rest
        alone. Exact; ``2 ** len(dependent)`` branches, so at most ``MAX_DEPENDENT_SCHEMAS``."""
        if len(dependent) > MAX_DEPENDENT_SCHEMAS:
            raise UnsupportedSchemaError("dependentSchemas", pointer, f"more than {MAX_DEPENDENT_SCHEMAS} dependent "
                                         "schemas (one branch per subset of their keys)")
        rest = {k: v for k, v in schema.items() if k != "dependentSchemas"}
        if isinstance(rest.get("dependencies"), dict):
            rest["dependencies"] = {k: v for k, v in rest["dependencies"].items() if isinstance(v, list)}
        names = list(dependent)
        # the keys' presence written as properties must not close a bare object in strict mode
        bare = "properties" not in rest and "additionalProperties" not in rest
        branches: list[Any] = [{"allOf": [rest, {"not": {"type": "object"}}]}]
        for chosen in range(1 << len(names)):
            present = [n for i, n in enumerate(names) if chosen >> i & 1]
            keys: dict[str, Any] = {"type": "object", "required": present}
            absent = {n: False for n in names if n not in present}
            if absent:
                keys["properties"] = absent
                if bare and not any(isinstance(dependent[n], dict) and "properties" in dependent[n] for n in present):
                    keys["additionalProperties"] = True
            branches.append({"allOf": [rest, keys, *(dependent[n] for n in present)]})
        return {"anyOf": branches}

    def _fold_unevaluated(self, schema: dict, pointer: str) -> Any:
        """``schema`` with ``unevaluatedProperties``/``unevaluatedItems`` written as the keyword
        they then equal, where that is exact. The schema is split into alternatives
        (:meth:`_evaluation_alternatives`) whose union is the schema and in each of which the
        evaluated properties (items) are the same for every value: those its evaluating parts
        declare. In each, with ``additionalProperties`` (``items``) in an evaluating part every
        one is evaluated and the keyword is a no-op; otherwise it is the ``additionalProperties``
        (``items``) of the evaluating parts merged into one schema, beside the alternative's
        constraining parts (which evaluate nothing: a failed ``if``, a ``not``). One
        alternative: that schema; several: their ``anyOf`` (alternatives that overlap evaluate
        the same, so the union is exact)."""
        folded = [_all_of_schema([*a.evaluating, *a.constraining]) for a in self._folded(schema, pointer, ())]
        return folded[0] if len(folded) == 1 else {"anyOf": folded}

    def _folded(self, schema: dict, pointer: str, path: tuple[str, ...]) -> list[_Alternative]:
        """The alternatives of :meth:`_fold_unevaluated`, each with its one merged evaluating part."""
        keywords = tuple(k for k in ("unevaluatedProperties", "unevaluatedItems") if k in schema)
        folded = []
        for alternative in self._evaluation_alternatives(schema, pointer, keywords, path, root=True):
            evaluating, contained, counts = self._without_contains(alternative.evaluating, keywords)
            flat: Any = {}
            for part in evaluating:
                flat = merge(flat, part) if flat is not None else None
            if not isinstance(flat, (dict, bool)):
                raise UnsupportedSchemaError(keywords[0], pointer, "the evaluating sub-schemas do not merge into "
                                             "one schema")
            flat = {} if flat is True else dict(flat) if flat is not False else False  # merge may return a part
            for keyword in keywords:
                covering = _COVERING[keyword]
                if isinstance(flat, dict) and not any(isinstance(p, dict) and covering in p for p in evaluating):
                    unevaluated = schema[keyword]
                    flat[covering] = ({"anyOf": [*contained, unevaluated]}
                                      if keyword == "unevaluatedItems" and contained else unevaluated)
            folded.append(_Alternative((flat,), alternative.constraining + counts))
        return folded

    @staticmethod
    def _without_contains(parts: tuple[Any, ...], keywords: tuple[str, ...]
                          ) -> tuple[tuple[Any, ...], list[Any], tuple[Any, ...]]:
        """For an ``unevaluatedItems`` fold: ``parts`` without their ``contains`` (and its
        bounds), the ``contains`` schemas, and the removed keywords as constraining parts. In
        draft 2020-12 an item a ``contains`` schema matches is evaluated, at any position
        (``minContains: 0`` too): past the evaluated prefix, an item must match one of them or
        ``unevaluatedItems``. (Beside a draft 2019-09 ``contains`` the fold is refused.)"""
        if "unevaluatedItems" not in keywords:
            return parts, [], ()
        kept, contained, counts = [], [], []
        for part in parts:
            if isinstance(part, dict) and "contains" in part:
                contained.append(part["contains"])
                counts.append({k: part[k] for k in ("contains", "minContains", "maxContains") if k in part})
                part = {k: v for k, v in part.items() if k not in ("contains", "minContains", "maxContains")}
            kept.append(part)
        return tuple(kept), contained, tuple(counts)

    def _evaluation_alternatives(self, schema: Any, pointer: str, keywords: tuple[str, ...],
                                 path: tuple[str, ...], root: bool = False) -> list[_Alternative]:
        """``schema`` as alternatives (their union is ``schema``) in each of which what is
        evaluated does not depend on the value; ``keywords``: the ``unevaluated*`` being folded;
        ``path``: the ``$ref`` targets entered. Applicators split: ``allOf`` and ``$ref``
        (non-recursive) into the product of their parts' alternatives; ``anyOf``/``oneOf`` of
        pairwise disjoint branches into one alternative per branch (exactly one branch matches,
        so exactly its evaluations count); ``if`` into (``if`` and ``then``) or, per way the
        condition fails (:meth:`_failures`, a constraining part: a failed ``if``
        evaluates nothing), ``else``. Nested ``unevaluated*`` fold first (they see their own
        evaluations). Anything else whose evaluations depend on the value is refused, named.
        Cost: the product of the branches, at most ``MAX_EVALUATION_ALTERNATIVES``."""
        if not isinstance(schema, dict):
            if not isinstance(schema, bool):
                raise InvalidSchemaError(pointer, "a schema must be an object or a boolean")
            return [_Alternative((schema,), ())]
        if not root and any(k in schema for k in ("unevaluatedProperties", "unevaluatedItems")):
            return self._folded(schema, pointer, path)
        blocked = [k for k in ("$dynamicRef", "dependencies") if k in schema]
        if "unevaluatedItems" in keywords and "contains" in schema and self.dialect != "2020-12":
            blocked.append("contains")  # draft 2019-09 says it evaluates nothing; its validators disagree
        if blocked:
            raise UnsupportedSchemaError(keywords[0], pointer, f"not folded beside '{blocked[0]}' at "
                                         f"{pointer or '(root)'} (what it evaluates depends on the instance)")
        if "unevaluatedItems" in keywords and (isinstance(schema.get("items"), list) or "additionalItems" in schema):
            raise UnsupportedSchemaError("unevaluatedItems", pointer, "with the draft 2019-09 array form of 'items'")
        own = {k: v for k, v in schema.items()
               if k not in _SPLIT_APPLICATORS and k not in keywords and k not in ("not", "dependentSchemas")}
        alternatives = [_Alternative((own,), ({"not": schema["not"]},) if "not" in schema else ())]

        def times(others: list[_Alternative]) -> None:
            nonlocal alternatives
            alternatives = [a.both(b) for a in alternatives for b in others]
            if len(alternatives) > MAX_EVALUATION_ALTERNATIVES:
                raise UnsupportedSchemaError(keywords[0], pointer, f"more than {MAX_EVALUATION_ALTERNATIVES} "
                                             "combinations of what the applicators evaluate")

        if "$ref" in schema and self.dialect not in DRAFTS_IGNORING_REF_SIBLINGS:
            target, target_pointer = self.resolve(schema["$ref"], pointer, schema)
            if target_pointer in path:
                raise UnsupportedSchemaError(keywords[0], pointer, f"not folded through the recursive $ref to "
                                             f"{target_pointer or '#'} (what it evaluates depends on the depth)")
            times(self._evaluation_alternatives(target, target_pointer, keywords, path + (target_pointer,)))
        for i, part in enumerate(schema.get("allOf", [])):
            times(self._evaluation_alternatives(part, f"{pointer}/allOf/{i}", keywords, path + (f"{pointer}/allOf/{i}",)))
        for key in ("anyOf", "oneOf"):
            if key not in schema:
                continue
            branches = schema[key]
            if not isinstance(branches, list) or not branches:
                raise InvalidSchemaError(pointer, f"'{key}' must be a non-empty array")
            times(self._branch_alternatives(key, branches, pointer, keywords, path))
        dependent = schema.get("dependentSchemas", {})
        if not isinstance(dependent, dict):
            raise InvalidSchemaError(pointer, "'dependentSchemas' must be an object")
        for name, sub in dependent.items():  # the key absent, or present with its schema applied
            at = f"{pointer}/dependentSchemas/{_escape(name)}"
            times([_Alternative((), ({"properties": {name: False}},))]
                  + [_Alternative((), ({"required": [name]},)).both(a)
                     for a in self._evaluation_alternatives(sub, at, keywords, path + (at,))])
        if "if" in schema:
            condition = self.deref(schema["if"], f"{pointer}/if")
            failures = self._failures(condition, f"{pointer}/if")
            if failures is None:
                raise UnsupportedSchemaError(keywords[0], pointer, f"not folded beside 'if' at {pointer or '(root)'}: "
                                             "its condition is not negated exactly")
            sub = [(schema.get(k, True), f"{pointer}/{k}") for k in ("if", "then", "else")]
            met, then_, else_ = (self._evaluation_alternatives(s, p, keywords, path + (p,)) for s, p in sub)
            matched = [b.both(a) for a in met for b in then_]  # then's keys first, as _if_then_else writes them
            failed = [_Alternative((), (failure,)).both(b) for failure in failures for b in else_]
            times(matched + failed)
        return alternatives

    def _branch_alternatives(self, key: str, branches: Any, pointer: str, keywords: tuple[str, ...],
                             path: tuple[str, ...]) -> list[_Alternative]:
        """The alternatives of ``anyOf``/``oneOf`` (``key``: ``branches``) for an ``unevaluated*``
        fold (see :meth:`_evaluation_alternatives`): one per set of branches that match together
        (``oneOf``: single branches), the others failing beside them as constraining parts (their
        :meth:`_failures`; a branch disjoint from a matching one fails anyway). Exact: every
        value lies in the alternatives of exactly one such set, whose evaluations are those of its
        branches together. Pairwise disjoint branches, or ``anyOf`` in strict mode (where one
        branch must declare every key): one alternative per branch. Refused when a branch that
        may match beside another is not negated exactly."""
        if not isinstance(branches, list) or not branches:
            raise InvalidSchemaError(pointer, f"'{key}' must be a non-empty array")
        at = [f"{pointer}/{key}/{i}" for i in range(len(branches))]
        plain = [self.deref(b, at[i]) for i, b in enumerate(branches)]
        overlap = {(i, j) for i in range(len(plain)) for j in range(len(plain))
                   if i != j and not self._disjoint(plain[i], plain[j])}
        each = [self._evaluation_alternatives(b, at[i], keywords, path + (at[i],)) for i, b in enumerate(branches)]
        if not overlap or (key == "anyOf" and self.options.strict):
            # strict: a value is accepted when one branch (with the keys beside it) declares all
            # its keys, as anyOf is compiled elsewhere; no other branch's evaluations count
            return [alt for found in each for alt in found]
        if key == "oneOf":
            chosen = [(i,) for i in range(len(branches))]
        else:
            if len(branches) > _MAX_OVERLAPPING_BRANCHES:
                raise UnsupportedSchemaError(keywords[0], pointer, f"not folded beside '{key}' at {pointer or '(root)'}:"
                                             f" {len(branches)} branches that may match together (at most "
                                             f"{_MAX_OVERLAPPING_BRANCHES} are split by which of them match)")
            chosen = [s for size in range(1, len(branches) + 1) for s in itertools.combinations(range(len(branches)), size)
                      if all((i, j) in overlap for i, j in itertools.combinations(s, 2))]
        failing: dict[int, Any] = {}
        alternatives: list[_Alternative] = []
        for matched in chosen:
            others = [j for j in range(len(branches))
                      if j not in matched and any((i, j) in overlap for i in matched)]
            for j in others:
                if j not in failing:
                    found = self._failures(branches[j], at[j])
                    if found is None:
                        raise UnsupportedSchemaError(keywords[0], pointer, f"not folded beside '{key}' at "
                                                     f"{pointer or '(root)'}: branch {j} may match beside branch "
                                                     f"{matched[0]} and is not negated exactly")
                    failing[j] = _any_of_schema(found) if found else False
            if any(failing[j] is False for j in others):
                continue  # a branch every value matches: it never fails
            combined = [_Alternative((), tuple(failing[j] for j in others))]
            for i in matched:
                combined = [a.both(b) for a in combined for b in each[i]]
            alternatives += combined
            if len(alternatives) > MAX_EVALUATION_ALTERNATIVES:
                raise UnsupportedSchemaError(keywords[0], pointer, f"more than {MAX_EVALUATION_ALTERNATIVES} "
                                             "combinations of what the applicators evaluate")
        return alternatives

    def _check_keywords(self, schema: dict, pointer: str) -> None:
        """Refuse an unsupported keyword that applies here: one of a type ``type`` excludes
        (``uniqueItems`` beside ``type: object``) constrains nothing."""
        for key, val in schema.items():
            if key in UNSUPPORTED and _NO_OP.get(key, object()) != val and not self._excluded_by_type(schema, key) \
                    and not (key == "uniqueItems" and self._left_to_item_memory(schema)):
                raise UnsupportedSchemaError(key, pointer, REFUSAL_REASONS.get(key, ""))
        if isinstance(schema.get("items"), list) and "prefixItems" in schema:
            raise InvalidSchemaError(pointer, "'items' as an array together with 'prefixItems'")

    @staticmethod
    def _excluded_by_type(schema: dict, key: str) -> bool:
        """Whether ``key`` is a keyword of a JSON type the schema's ``type`` rules out."""
        if "type" not in schema:
            return False
        try:
            types = declared_types(schema)
        except InvalidSchemaError:
            return False  # reported where the type is read
        return any(key in keywords and t not in types for t, keywords in _TYPE_KEYWORDS.items())

    # ---- references and combinators ------------------------------------------------------

    def resolve(self, ref: str, pointer: str, holder: Any) -> tuple[Any, str]:
        """The sub-schema ``ref`` (held by the schema object ``holder``) names and its JSON
        pointer, resolved against ``holder``'s base URI (:class:`ResourceIndex`): a resource
        of this document, then a JSON pointer or plain-name anchor in it. Other references are
        refused."""
        if not isinstance(ref, str):
            raise InvalidSchemaError(pointer, "$ref must be a string")
        if self._resources is None:
            self._resources = ResourceIndex(self.root, "id" if self.dialect == "draft4" else "$id",
                                            self.dialect in DRAFTS_IGNORING_REF_SIBLINGS, self._external)
        target = self._resources.resolve(ref, holder)
        if target.pointer is None:
            if target.malformed:
                raise InvalidSchemaError(pointer, target.reason)
            raise UnsupportedSchemaError("$ref", pointer, target.reason)
        uri = target.pointer.partition("#")[0] if not target.pointer.startswith("/") else ""
        if uri and uri not in self._checked:
            self._check_resource(uri, pointer)
        return target.schema, target.pointer

    def _check_resource(self, uri: str, pointer: str) -> None:
        """Check the given resource ``uri`` the first time a reference (at ``pointer``) leads
        into it: a schema of the schema's own dialect."""
        document = self._external[uri]
        if isinstance(document, dict) and "$schema" in document and dialect_of(document) != self.dialect:
            raise UnsupportedSchemaError("$ref", pointer, f"resource {uri!r} is written in {dialect_of(document)}, "
                                         f"the schema in {self.dialect}: keywords would change meaning")
        root_dialect = self.root.get("$schema") if isinstance(self.root, dict) else None
        check_resource(uri, document, root_dialect if isinstance(root_dialect, str) else None)
        self._checked.add(uri)

    def _scope(self, refs: Refs, holder: Any, pointer: str) -> list[str]:
        """The dynamic scope at ``holder`` on this path: the bases of the schema resources
        entered, outermost first: the root's, those recorded in ``refs`` (each ``$ref``
        target's), then those entered by nesting since the last target down to ``holder``."""
        assert self._resources is not None  # set by the resolve that precedes every call
        start = next((r[1:] for r, d in reversed(refs) if d >= 0), "")
        nested = self._resources.entered(start, holder)
        if nested is None:
            raise UnsupportedSchemaError("$dynamicRef", pointer, "its dynamic scope is not known here (a schema the "
                                         "compiler combined from others)")
        return [self._resources.root_base, *(r[len(_SCOPE):] for r, d in refs if d < 0), *nested]

    def _dynamic_target(self, ref: str, pointer: str, refs: Refs, holder: Any) -> tuple[Any, str]:
        """What ``$dynamicRef: ref`` (in ``holder``) names on this path (2020-12): its target as a
        ``$ref``'s; when that holds a ``$dynamicAnchor`` of the fragment's name, the outermost
        resource of the dynamic scope (:meth:`_scope`) with a ``$dynamicAnchor`` of that name.
        Exact: compilation follows every path from the root, so each path's scope is known."""
        target, target_pointer = self.resolve(ref, pointer, holder)
        name = ref.partition("#")[2]
        if not name or name.startswith("/") or not isinstance(target, dict) or target.get("$dynamicAnchor") != name:
            return target, target_pointer
        assert self._resources is not None
        for base in self._scope(refs, holder, pointer):
            found = self._resources.dynamic_anchors.get((base, name))
            if found is not None:
                return found
        return target, target_pointer

    def _expand(self, keyword: str, pointer: str, depth: int, refs: Refs, holder: Any) -> tuple[Any, str, Refs]:
        """The target of ``holder``'s ``$ref`` or ``$dynamicRef`` (``keyword``) met at value
        ``depth``, its pointer and the path's expansions (with the resources entered); the
        target is ``False`` once it was expanded ``max_recursion`` times on this path
        (recursion cut: the branch is not generated deeper). A ``$ref`` the path already
        expanded at this depth is met again at the same value, beside that expansion (a
        sibling, a later ``allOf`` part, a union over the same definitions under both
        ``properties`` and ``patternProperties``) or through it. Through it is a cycle that
        never descends (:meth:`_cycle_back_to`): it would expand forever (validators loop on
        it), so it is refused, named. Else it is expanded again, not counted again (it is no
        recursion): nothing its target leads to at this value leads back to it, so expanding
        ends, and expanding a ``$ref`` is exact."""
        if keyword == "$dynamicRef":
            target, target_pointer = self._dynamic_target(holder[keyword], pointer, refs, holder)
        else:
            target, target_pointer = self.resolve(holder[keyword], pointer, holder)
        assert self._resources is not None
        start = next((r[1:] for r, d in reversed(refs) if d >= 0), "")
        entered = [*(self._resources.entered(start, holder) or []), self._resources.base_of(target)]
        known = {r for r, d in refs if d < 0}
        for base in entered:
            if _SCOPE + base not in known and base != self._resources.root_base:
                refs = refs + ((_SCOPE + base, -1),)
                known.add(_SCOPE + base)
        ref = "#" + target_pointer  # one name per target, however (and wherever) the reference spells it
        if (ref, depth) in refs:
            cycle = self._cycle_back_to(ref, target)
            if cycle:
                raise UnsupportedSchemaError("$ref", pointer, f"reference cycle {' -> '.join(cycle)} never descends "
                                             "into the value, so it expands forever")
            return target, target_pointer, refs  # counted once at this depth
        # with knots, recursion before widths stop changing ends (depth grows, bounded by
        # the knot's depth): only expansions past it count towards the cut
        expanded = sum(r == ref and (not self._knots or d >= self._saturated) for r, d in refs)
        self._knotted |= self._knots and any(r == ref for r, _ in refs)
        if expanded >= self.max_recursion:
            return False, target_pointer, refs
        self._depended_on(expanded)
        return target, target_pointer, refs + ((ref, depth),)

    def _cycle_back_to(self, ref: str, target: Any) -> list[str]:
        """The references on a path from ``target`` (what ``ref`` names) back to ``ref`` that
        never descends into the value, ``ref`` first and last (``[]``: there is none): through
        the keywords the compile follows at one value (:meth:`_in_place_subschemas`), beside a
        ``$ref`` too. A superset of the paths the compile can take, so no cycle it could
        follow is missed. Cost: one visit per schema object so reached, once per ``ref`` in a
        compile."""
        if ref in self._cycles:
            return self._cycles[ref]
        came_from: dict[int, tuple[int, str | None]] = {}  # id -> (id of the schema it was met in, via which $ref)
        queue: deque[Any] = deque([target])
        cycle: list[str] = []
        while queue and not cycle:
            schema = queue.popleft()
            for sub, via in self._in_place_subschemas(schema):
                if via == ref:
                    at, path = id(schema), []
                    while at != id(target):
                        at, via = came_from[at]
                        path += [via] if via is not None else []
                    cycle = [ref, *reversed(path), ref]
                    break
                if id(sub) not in came_from and sub is not target:
                    came_from[id(sub)] = (id(schema), via)
                    queue.append(sub)
        self._cycles[ref] = cycle
        return cycle

    def _in_place_subschemas(self, schema: Any) -> Iterator[tuple[Any, str | None]]:
        """The sub-schemas that apply to the same value as ``schema`` (``allOf``/``anyOf``/
        ``oneOf``, ``not``, ``if``/``then``/``else``, dependent schemas, what its ``$ref`` or
        ``$dynamicRef`` may name), each with the reference that names it (None: written in
        place)."""
        if not isinstance(schema, dict):
            return
        for key in ("allOf", "anyOf", "oneOf"):
            if isinstance(schema.get(key), list):
                yield from ((sub, None) for sub in schema[key])
        for key in ("not", "if", "then", "else"):
            if key in schema:
                yield schema[key], None
        yield from ((sub, None) for sub in _schema_dependencies(schema).values())
        for keyword in _REFERENCES:
            if keyword in schema:
                yield from ((sub, "#" + pointer) for sub, pointer in self._possible_targets(keyword, schema))

    def _possible_targets(self, keyword: str, holder: dict) -> list[tuple[Any, str]]:
        """What ``holder``'s ``$ref`` or ``$dynamicRef`` (``keyword``) may name on some path, with
        pointers: a ``$dynamicRef`` to a dynamic anchor names the root resource's anchor of that
        name where there is one (the root is the outermost resource of every scope), else its
        own target or any resource's (:meth:`_dynamic_target`); none where the compile refuses
        the reference."""
        try:
            target, target_pointer = self.resolve(holder[keyword], "", holder)
        except (InvalidSchemaError, UnsupportedSchemaError):
            return []
        name = holder[keyword].partition("#")[2]
        if keyword != "$dynamicRef" or not isinstance(target, dict) or target.get("$dynamicAnchor") != name:
            return [(target, target_pointer)]
        assert self._resources is not None  # set by the resolve
        anchors = self._resources.dynamic_anchors
        outermost = anchors.get((self._resources.root_base, name))
        if outermost is not None:
            return [outermost]
        return [(target, target_pointer), *(found for (_, anchor), found in anchors.items() if anchor == name)]

    def _ref(self, schema: dict, pointer: str, depth: int, refs: Refs) -> Node:
        keyword = "$ref" if "$ref" in schema else "$dynamicRef"
        target, target_pointer, refs = self._expand(keyword, pointer, depth, refs, schema)
        if target is False:
            return NOTHING
        rest = {k: v for k, v in schema.items() if k != keyword and k not in ANNOTATIONS}
        if self.dialect in DRAFTS_IGNORING_REF_SIBLINGS:
            rest = {}  # draft 4-7: keywords beside $ref are ignored
        if not rest:
            return self.value(target, target_pointer, depth, refs)
        return self.value({"allOf": [rest, target]}, pointer, depth, refs)  # siblings first, as a validator lists them

    def _deref_path(self, schema: Any, pointer: str, depth: int, refs: Refs) -> tuple[Any, Refs]:
        """``schema`` with chains of bare ``$ref`` followed (each expansion counted on the path)."""
        while isinstance(schema, dict) and len(set(schema) - ANNOTATIONS) == 1 and set(schema) & set(_REFERENCES):
            schema, _, refs = self._expand("$ref" if "$ref" in schema else "$dynamicRef", pointer, depth, refs, schema)
        return schema, refs

    def deref(self, schema: Any, pointer: str) -> Any:
        """``schema`` with up to 32 bare ``$ref`` followed (in drafts 4-7, any ``$ref``: the
        keywords beside it are ignored), for analyses that never build a value (their callers
        stop on cycles)."""
        seen = 0
        bare_only = self.dialect not in DRAFTS_IGNORING_REF_SIBLINGS
        while isinstance(schema, dict) and "$ref" in schema and seen < 32 \
                and (not bare_only or set(schema) - ANNOTATIONS == {"$ref"}):
            schema, _ = self.resolve(schema["$ref"], pointer, schema)
            seen += 1
        return schema

    def _all_of(self, schema: dict, pointer: str, depth: int, refs: Refs) -> Node:
        parts = schema["allOf"]
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        merged: Any = rest
        leftovers: list[tuple[Any, str]] = []
        entry = refs
        # X and X is X: a part reached again the same way (one definition met twice at this
        # value, as a key under both properties and patternProperties) is compiled once
        flat: list[tuple[Any, Any, str, Refs]] = []
        met: set[tuple[int, Refs]] = set()
        for raw, part, part_pointer, part_refs in self._all_of_parts(parts, pointer, depth, entry):
            if (id(part), part_refs) not in met:
                met.add((id(part), part_refs))
                flat.append((raw, part, part_pointer, part_refs))
        if sum(isinstance(part, dict) and "if" in part for _, part, _, _ in flat) > 1:
            exclusive = self._exclusive_conditions_of(schema, rest, [part for _, part, _, _ in flat], pointer)
            if exclusive is not None:
                for _, _, _, part_refs in flat:
                    refs = refs + tuple(r for r in part_refs[len(entry):] if r not in refs)
                return self.value(exclusive, pointer, depth, refs)
            # conditions that cannot merge: as unions, distributed (lazily) rather than intersected
            for k, (raw, part, ptr, part_refs) in enumerate(flat):
                if isinstance(part, dict) and "if" in part:
                    union = self._conditional_union(part, ptr)
                    flat[k] = (union, union, ptr, part_refs)
        if any(_absent_key(part) is not None for _, part, _, _ in flat):
            # 'not: {required: [k]}' is 'an object without k': merged as properties {k: false},
            # which closes no object in strict mode that no part declares keys of
            open_object = self.options.strict and not any(
                self._declares_keys(part, pointer) for part in [rest, *(part for _, part, _, _ in flat)])
            for k, (raw, part, ptr, part_refs) in enumerate(flat):
                name = _absent_key(part)
                if name is not None:
                    flat[k] = (raw, _absent_key_schema(name, open_object), ptr, part_refs)
        for i, (raw, part, part_pointer, part_refs) in enumerate(flat):
            refs = refs + tuple(r for r in part_refs[len(entry):] if r not in refs)
            if isinstance(part, dict) and ("unevaluatedProperties" in part or "unevaluatedItems" in part):
                part = self._fold_unevaluated(part, part_pointer)  # it sees only its own evaluations
            later = [r for r, _, _, _ in flat[i + 1:]]
            if not leftovers and self._distributes(part, later, [p for _, p, _, _ in flat[i + 1:]]):
                return self._distributed(merged, part, later, part_pointer, depth, refs)
            m = merge(merged, part)
            if m is None:
                leftovers.append((part, part_pointer))
            else:
                merged = m
        if not leftovers:
            return self.value(merged, pointer, depth, refs)
        # intersect what could not be merged, one JSON type at a time: the conflicting keywords
        # usually concern one type, and typed automata are far smaller than any-type ones
        types = self._types_of(merged)
        for part, _ in leftovers:
            types &= self._types_of(part)
        nodes = []
        for t in TYPES:
            if t not in types or (t == "integer" and "number" in types):
                continue
            current = self._restricted(merged, t)
            pending = []
            for part, ptr in leftovers:
                part_t = self._restricted(part, t)
                m = merge(current, part_t)
                if m is None:
                    pending.append((part_t, ptr))
                else:
                    current = m
            if not pending:
                nodes.append(self.value(current, pointer, depth, refs))
                continue
            parts_t = [current, *(part_t for part_t, _ in pending)]
            if t == "array":  # several contains (or not) counted in one graph rather than intersected whole
                counted = self._many_contains(parts_t, [pointer, *(ptr for _, ptr in pending)], pointer, depth, refs)
                if counted is None:
                    counted = self._negations_expanded(parts_t, t, pointer, depth, refs)
                if counted is not None:
                    nodes.append(counted)
                    continue
            if t == "object":
                witnessed = self._many_witnesses(parts_t, pointer, depth, refs)
                if witnessed is not None:
                    nodes.append(witnessed)
                    continue
                current, *shared = self._sharing_keys(parts_t, pointer)
                pending = [(part_t, ptr) for part_t, (_, ptr) in zip(shared, pending)]
            key = self._scalar_intersection_key(t, [current, *(part_t for part_t, _ in pending)], depth)
            node = self._scalar_intersections.get(key) if key is not None else None
            if node is None:
                with self._eager(pointer, "allOf"):
                    dfa = compile_node(self.value(current, pointer, depth, refs), self.options.max_states)
                    for part_t, ptr in pending:
                        dfa = dfa.intersect(compile_node(self.value(part_t, ptr, depth, refs),
                                                         self.options.max_states), self.options.max_states)
                node = Embedded(dfa) if not dfa.is_empty else NOTHING
                if key is not None:
                    self._scalar_intersections[key] = node
            nodes.append(node)
        return alt(*nodes)

    def _many_witnesses(self, parts: list[Any], pointer: str, depth: int, refs: Refs) -> Node | None:
        """The objects meeting every one of ``parts`` (object schemas of an ``allOf`` that do
        not merge) when what keeps them apart is two or more ``not`` of keys with any value
        (:meth:`_key_witness`: a key outside names and patterns, or one of them): the parts
        merged without them, each a witness the object must hold (:meth:`_object`). None for
        any other conflict, past ``MAX_KEY_WITNESSES``, or where the merged parts hold
        keywords :meth:`_object` does not read (schema dependencies among them; the caller
        intersects automata)."""
        witnesses: list[_KeyWitness] = []
        merged: Any = True
        for part in parts:
            if not isinstance(part, dict):
                return None
            if "not" in part:
                witness = self._key_witness(self.deref(part["not"], f"{pointer}/not"), f"{pointer}/not")
                if witness is None or witness.value is not True:
                    return None
                witnesses.append(witness)
            merged = merge(merged, {k: v for k, v in part.items() if k != "not"})
            if merged is None:
                return None
        if not 2 <= len(witnesses) <= MAX_KEY_WITNESSES:
            return None
        if merged is False:
            return NOTHING
        dependencies = merged.get("dependencies", {})
        if set(merged) & KEYWORDS - _WITNESSED_OBJECT_KEYWORDS - {"dependencies"} \
                or not isinstance(dependencies, dict) or not all(isinstance(v, list) for v in dependencies.values()):
            return None
        return self._object(merged, pointer, depth, refs, tuple(witnesses))

    def _negations_expanded(self, parts: list[Any], json_type: str, pointer: str, depth: int,
                            refs: Refs) -> Node | None:
        """``allOf: parts`` (schemas of ``json_type`` that do not merge) with each ``not``
        replaced by the union of the ways its schema fails (:meth:`_failures`), so that the
        parts merge (two arrays that must fail ``contains`` schemas: items that fail both; a
        ``not`` beside two ``contains``, which :meth:`_many_contains` does not count) rather
        than be intersected whole. None without a ``not``, where one is not negated exactly,
        or where a way to fail is itself a ``not`` (it would not merge either)."""
        negated = {id(part) for part in parts if isinstance(part, dict) and "not" in part}
        if not negated:
            return None
        expanded: list[Any] = []
        for part in parts:
            if id(part) not in negated:
                expanded.append(part)
                continue
            failures = self._failures(part["not"], f"{pointer}/not")
            if failures is None:
                return None
            typed = [self._restricted(f, json_type) for f in failures if json_type in self._types_of(f)]
            if any(isinstance(f, dict) and "not" in f for f in typed):
                return None
            expanded += [{k: v for k, v in part.items() if k != "not"}, _any_of_schema(typed) if typed else False]
        return self.value({"allOf": expanded}, pointer, depth, refs)

    def _restricted(self, schema: Any, json_type: str) -> Any:
        """``schema`` for values of ``json_type`` (:func:`_restrict`), without a ``not`` of a
        schema that admits no value of that type (every such value meets it); False beside a
        ``not`` of every value of a type other than numbers."""
        typed = _restrict(schema, json_type)
        if isinstance(typed, dict) and "not" in typed:
            negated = self.deref(typed["not"], "")
            if json_type not in self._types_of(negated):
                typed = {k: v for k, v in typed.items() if k != "not"}
            elif json_type not in ("integer", "number") and isinstance(negated, dict) \
                    and set(negated) & KEYWORDS <= {"type"}:
                return False  # a not of every value of the type
        return typed

    @staticmethod
    def _scalar_intersection_key(t: str, parts: list[Any], depth: int) -> tuple[str, str, int] | None:
        """The key of :attr:`_scalar_intersections` for ``parts`` of type ``t``; None for containers
        (their free-form values depend on the fallback settings) and for parts without a
        reference-free text (:func:`_text_without_references`)."""
        text = _text_without_references(parts) if t not in ("object", "array") else None
        return (t, text, depth) if text is not None else None

    def _exclusive_conditions_of(self, schema: dict, rest: dict, parts: list[Any], pointer: str) -> Any | None:
        """:meth:`_exclusive_conditions` of ``schema``'s ``allOf`` (``rest`` its other keywords),
        remembered by the identities of ``schema`` and ``parts`` (kept alive with the verdict):
        a definition met at several depths and paths asks again (JSON Schema Store's yippee-ki:
        171 times for 22 of them), and the same union object lets the value built from it be
        reused."""
        key = (id(schema), *(id(part) for part in parts))
        hit = self._exclusive_verdicts.get(key)
        if hit is None:
            hit = self._exclusive_verdicts[key] = (schema, parts, self._exclusive_conditions(rest, parts, pointer))
        return hit[2]

    def _exclusive_conditions(self, rest: dict, parts: list[Any], pointer: str) -> Any | None:
        """``allOf: parts`` (beside ``rest``) holding conditionals no two of whose ``if``s a value
        meeting the other parts can meet (a tag constant per condition, as JSON Schema Store's
        schemas write them), as one union of N+1 conjunctions where distributing the
        conditions would make 2^N: a value meets condition ``i`` (then ``then_i`` and every
        other ``else``), or none (each ``if``'s failures, every ``else``). Exact. None when
        two conditions may overlap or a condition's failure is not negated exactly (the caller's
        ways apply). Cost: one disjointness test per pair of conditions."""
        context: list[Any] = [rest]
        by_condition: dict[str, tuple[Any, list[Any], list[Any], str]] = {}  # one if met twice: its thens, elses
        for i, part in enumerate(parts):
            if not (isinstance(part, dict) and "if" in part):
                context.append(part)
                continue
            own = {k: v for k, v in part.items() if k not in ("if", "then", "else")}
            if set(own) - ANNOTATIONS:
                context.append(own)
            if "then" in part or "else" in part:
                condition_pointer = f"{pointer}/allOf/{i}/if"
                condition = self.deref(part["if"], condition_pointer)
                _, thens, elses, _ = by_condition.setdefault(json.dumps(condition, sort_keys=True),
                                                             (condition, [], [], condition_pointer))
                thens.append(part.get("then", True))
                elses.append(part.get("else", True))
        if len(by_condition) < 2:
            return None
        conditions = [(condition, _all_of_schema(thens), _all_of_schema(elses), condition_pointer)
                      for condition, thens, elses, condition_pointer in by_condition.values()]
        merged: Any = True
        for part in context:
            merged = merge(merged, part)
            if merged is None:
                return None
        if not self._tags_apart([condition for condition, _, _, _ in conditions], merged):
            within = []
            for condition, _, _, _ in conditions:
                conjunction = merge(merged, condition)
                within.append(conjunction if conjunction is not None else _both(merged, condition))
            for i in range(len(within)):
                for j in range(i + 1, len(within)):
                    if not self._disjoint(within[i], within[j]):
                        return None
        failing: list[Any] = []
        for condition, _, _, condition_pointer in conditions:
            found = self._failures(condition, condition_pointer)
            if found is None:
                return None
            found = [f for f in found if not self._disjoint(f, merged)]
            if not found:
                failing = [False]  # every value meeting the other parts meets some condition
                break
            failing.append(_any_of_schema(found))
        elses = [otherwise for _, _, otherwise, _ in conditions]
        branches = [{"allOf": [*context, then, condition, *(e for j, e in enumerate(elses) if j != i)]}
                    for i, (condition, then, _, _) in enumerate(conditions)]
        if failing != [False]:
            branches.append({"allOf": [*context, *failing, *elses]})
        return {"anyOf": branches}

    def _tags_apart(self, conditions: list[Any], context: Any) -> bool:
        """Whether each of ``conditions`` is ``properties: {K: {const: v}}`` (``enum`` of one
        value; ``required`` and ``type: object`` allowed) over one key ``K``, with ``v`` all
        different, on objects holding ``K`` (required by the condition or by ``context``) and
        no other type (``type: object`` in the condition or the context): then no value meets
        two of them. A linear test of the common case of :meth:`_exclusive_conditions`."""
        context_required = context.get("required", []) if isinstance(context, dict) else []
        objects_only = self._types_of(context) <= {"object"}
        tag_key = None
        seen: set[str] = set()
        for condition in conditions:
            if not isinstance(condition, dict) or set(condition) - ANNOTATIONS - {"properties", "required", "type"}:
                return False
            properties = condition.get("properties")
            if not isinstance(properties, dict) or len(properties) != 1:
                return False
            (key, sub), = properties.items()
            sub = self.deref(sub, "")
            if not isinstance(sub, dict) or set(sub) - ANNOTATIONS - {"const", "enum", "type"}:
                return False
            values = [sub["const"]] if "const" in sub else sub.get("enum")
            if not isinstance(values, list) or len(values) != 1:
                return False  # (a "type" beside the constant can only make the condition unmet)
            if tag_key is None:
                tag_key = key
            required = condition.get("required", [])
            if key != tag_key or not isinstance(required, list) or set(required) - {key} \
                    or key not in required and key not in context_required \
                    or not objects_only and condition.get("type") not in ("object", ["object"]):
                return False
            tag = _json_key(values[0])
            if tag in seen:
                return False
            seen.add(tag)
        return True

    def _all_of_parts(self, parts: list[Any], pointer: str, depth: int, refs: Refs,
                      level: int = 0) -> list[tuple[Any, Any, str, Refs]]:
        """``(as written, with bare $refs followed, pointer, $ref path)`` of each part of an
        ``allOf`` at ``pointer``, a part that is itself an ``allOf`` replaced by its own keys and
        then its parts (the conjunction is the same; its keys keep the order a reader meets
        them in, depth first). Each part expands from the allOf's own path (two parts naming
        one definition are no cycle)."""
        flat = []
        for i, raw in enumerate(parts):
            part_pointer = f"{pointer}/allOf/{i}"
            part, part_refs = self._deref_path(raw, part_pointer, depth, refs)
            nested = isinstance(part, dict) and isinstance(part.get("allOf"), list) and level < _FLATTENED_LEVELS \
                and not any(k in part for k in ("$ref", "$dynamicRef", "unevaluatedProperties", "unevaluatedItems"))
            if not nested:
                flat.append((raw, part, part_pointer, part_refs))
                continue
            own = {k: v for k, v in part.items() if k != "allOf"}
            if set(own) - ANNOTATIONS:
                flat.append((own, own, part_pointer, part_refs))
            flat += self._all_of_parts(part["allOf"], part_pointer, depth, part_refs, level + 1)
        return flat

    def _sharing_keys(self, parts: list[Any], pointer: str) -> list[Any]:
        """Object schemas to be intersected, each with every key any of them declares (in
        ``properties``, ``required``, ...; through their branches, conditions and ``$ref``s) as a
        property, in one order: the properties of all, then the keys only named. Each part alone
        would write its own keys in its own order and, in strict mode, close the object over
        them, so that the intersection kept only objects whose keys all parts declare, in an
        order all share. A key a part does not declare gets that part's
        ``additionalProperties`` (``true`` without one); strict mode closes the parts when
        some declares properties and none has ``additionalProperties``, as it would close the
        merged schema. Exact: each part still constrains every key as it did. Parts are
        returned as they are when one has ``patternProperties`` (its undeclared keys are not
        rewritten)."""
        parts = [self._ref_target(part, pointer) for part in parts]
        found = [d for part in parts for d in self._object_declarations(part, pointer, set())]
        if any(k in d for d in found for k in ("patternProperties", "unevaluatedProperties")):
            return parts
        names = [n for d in found for n in d.get("properties", {})]
        names += [n for d in found for n in _named_keys(d)]
        names = list(dict.fromkeys(n for n in names if isinstance(n, str)))
        if not names:
            return parts
        closed = self.options.strict and any("properties" in d for d in found) and \
            not any("additionalProperties" in d for d in found)
        shared = []
        for part in parts:
            if not isinstance(part, dict):
                shared.append(part)
                continue
            own, extra = part.get("properties", {}), part.get("additionalProperties", True)
            rewritten = {**part, "properties": {n: own.get(n, extra) for n in names}}
            if not closed:
                rewritten["additionalProperties"] = extra
            shared.append(rewritten)
        return shared

    def _declares_keys(self, schema: Any, pointer: str) -> bool:
        """Whether ``schema`` says which keys its objects hold (``properties``,
        ``patternProperties`` or ``additionalProperties`` at its level): else strict mode
        leaves its objects open."""
        return any(k in d for d in self._object_declarations(schema, pointer, set())
                   for k in ("properties", "patternProperties", "additionalProperties"))

    def _ref_target(self, schema: Any, pointer: str) -> Any:
        """``schema``, or in drafts 4-7 (where a ``$ref`` makes its siblings ignored) what its
        ``$ref`` names, followed up to 32 times."""
        for _ in range(32):
            if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)
                    and self.dialect in DRAFTS_IGNORING_REF_SIBLINGS):
                break
            schema, _ = self.resolve(schema["$ref"], pointer, schema)
        return schema

    def _object_declarations(self, schema: Any, pointer: str, seen: set[int]) -> Iterator[dict]:
        """The schema objects that describe a value at the level of ``schema`` (itself, its
        ``allOf``/``anyOf``/``oneOf`` parts, ``if``/``then``/``else``, dependent schemas and
        what its ``$ref``s name), each once. Cost: one visit per schema object reached."""
        schema = self._ref_target(schema, pointer)
        if not isinstance(schema, dict) or id(schema) in seen:
            return
        seen.add(id(schema))
        yield schema
        subs: list[Any] = [schema.get(k) for k in ("if", "then", "else")]
        for key in ("allOf", "anyOf", "oneOf"):
            subs += schema.get(key) if isinstance(schema.get(key), list) else []
        for key in ("dependentSchemas", "dependencies"):
            subs += [v for v in schema.get(key, {}).values() if isinstance(v, dict)] \
                if isinstance(schema.get(key), dict) else []
        if isinstance(schema.get("$ref"), str):
            subs.append(self.resolve(schema["$ref"], pointer, schema)[0])
        for sub in subs:
            yield from self._object_declarations(sub, pointer, seen)

    @staticmethod
    def _distributes(part: Any, later: list[Any], later_parts: list[Any]) -> bool:
        """Whether ``allOf`` distributes over ``part``'s ``anyOf``/``oneOf``: later parts exist
        (their keys must follow the branch's, as a validator sees them: the part, its branch,
        then the later parts) and none is written as a union, or, with the later unions
        (``later_parts``: with bare ``$ref``s followed) distributed too, at most
        ``MAX_DISTRIBUTED_BRANCHES`` conjunctions come out (branches multiply; unions that
        cannot merge are otherwise intersected whole)."""
        if not later or not isinstance(part, dict) or ("anyOf" in part) == ("oneOf" in part):
            return False
        if not any(isinstance(p, dict) and ("anyOf" in p or "oneOf" in p) for p in later):
            return True
        branches = len(part["anyOf" if "anyOf" in part else "oneOf"] or [])
        for other in later_parts:
            for key in ("anyOf", "oneOf"):
                if isinstance(other, dict) and isinstance(other.get(key), list):
                    branches *= max(1, len(other[key]))
        return branches <= MAX_DISTRIBUTED_BRANCHES

    def _distributed(self, merged: Any, part: dict, later: list[Any], pointer: str, depth: int, refs: Refs) -> Node:
        """``allOf: [merged, part, *later]`` with ``part = rest + anyOf/oneOf: [B_k]`` as the union
        of ``allOf: [merged, rest, B_k, *later]``: exact (with the other parts holding, exactly
        one ``B_k`` matches iff exactly one conjunction does), and objects keep one declared key
        order, the part's branch before the later parts."""
        key = "anyOf" if "anyOf" in part else "oneOf"
        branches = part[key]
        if not isinstance(branches, list) or not branches:
            raise InvalidSchemaError(pointer, f"'{key}' must be a non-empty array")
        rest = {k: v for k, v in part.items() if k != key}
        followed = [self._deref_path(b, f"{pointer}/{key}/{i}", depth, refs) for i, b in enumerate(branches)]
        exclusions: list[list[Any]] = [[] for _ in followed]
        if key == "oneOf":
            context: Any = merge(merged, rest)
            for other in later:
                context = merge(context, other)
            exclusions = self._one_of_exclusions([b for b, _ in followed], context, [merged, rest, *later], pointer)
        return alt(*(self._one_branch([merged, rest, branch, *later], excluded, pointer, i, depth, branch_refs)
                     if excluded else
                     self.value({"allOf": [merged, rest, branch, *later]}, f"{pointer}/{key}/{i}", depth, branch_refs)
                     for i, ((branch, branch_refs), excluded) in enumerate(zip(followed, exclusions))))

    def _one_branch(self, parts: list[Any], excluded: list[Any], pointer: str, index: int, depth: int,
                    refs: Refs) -> Node:
        """Branch ``index`` of the ``oneOf`` at ``pointer`` (``parts``: it with what holds beside
        it) where the ``excluded`` negations of the branches it may overlap also hold. A
        negation the compile cannot enforce beside the branch (a ``not`` refused) refuses the
        ``oneOf``, naming the branch."""
        try:
            return self.value({"allOf": [*parts, *excluded]}, f"{pointer}/oneOf/{index}", depth, refs)
        except SchemaTooComplexError:
            raise
        except UnsupportedSchemaError as exc:
            if exc.keyword != "not":
                raise
            raise UnsupportedSchemaError("oneOf", pointer, f"branch {index} may share values with another branch, "
                                         f"whose negation is not enforced exactly beside it ({exc})") from None

    def _one_of_exclusions(self, branches: list[Any], rest: Any, beside: list[Any], pointer: str) -> list[list[Any]]:
        """For each branch of a ``oneOf`` (each with ``rest``, None: not mergeable; ``beside``:
        the schemas it is compiled with, as written), the
        negations of the other branches it may share a value with: the branch is compiled with
        them, so that exactly one branch matches (``oneOf [A_i] = anyOf_i allOf [A_i, not A_j]``,
        ``j`` over the branches that may overlap ``A_i``; the others are excluded by ``A_i``
        itself). A negation is the union of the ways that branch fails
        (:meth:`_failures`), exact for the conditions ``if`` and ``not`` negate; a
        ``oneOf`` needing any other negation is refused, naming both branches. Cost: one
        disjointness test per pair of branches."""
        exclusions: list[list[Any]] = [[] for _ in branches]
        if _distinct_literals(branches):
            return exclusions
        with_rest = [merge(rest, b) for b in branches]  # exact: only values meeting rest count
        failures: dict[int, list[Any] | None] = {}
        combinations = [1] * len(branches)  # ways to fail the negations of each branch so far
        for i in range(len(branches)):
            for j in range(i + 1, len(branches)):
                a = with_rest[i] if with_rest[i] is not None else branches[i]
                b = with_rest[j] if with_rest[j] is not None else branches[j]
                if self._disjoint(a, b) or self._generated_apart(with_rest[i], with_rest[j]):
                    continue
                apart = self._types_apart(a, b, with_rest[i], with_rest[j])
                for kept, negated in ((i, j), (j, i)):
                    if negated not in failures:
                        failures[negated] = self._failures(branches[negated], f"{pointer}/oneOf/{negated}")
                    found = failures[negated]
                    if found is None:
                        raise UnsupportedSchemaError(
                            "oneOf", pointer, f"branches {i} and {j} may both match one value, and branch "
                            f"{negated} is not negated exactly ({_NEGATED})")
                    if apart:  # a value of these types fails the other branch already: only the rest need
                        covered = set(apart) | ({"integer"} if "number" in apart else set())
                        found = [{"type": apart}] + [f for f in found if not self._types_of(f) <= covered]
                    kept_schema = with_rest[kept] if with_rest[kept] is not None else branches[kept]
                    found = [f for f in found if not self._disjoint(f, kept_schema)]  # ways no kept value has
                    negation = self._negation(found, [*beside, branches[kept]], pointer)
                    exclusions[kept].append(negation)
                    # the ways multiply as negations are added: refused as soon as a branch
                    # passes the bound, not after every pair (cityjson's 32 branches: 3.9 s)
                    combinations[kept] *= len(negation["anyOf"]) \
                        if isinstance(negation, dict) and "anyOf" in negation else 1
                    if combinations[kept] > MAX_DISTRIBUTED_BRANCHES:
                        raise UnsupportedSchemaError(
                            "oneOf", pointer, f"branch {kept} may share values with {len(exclusions[kept])} other "
                            f"branches or more, and failing them all takes {combinations[kept]} combinations of "
                            f"ways or more (at most {MAX_DISTRIBUTED_BRANCHES} are compiled)")
        return exclusions

    def _types_apart(self, a: Any, b: Any, merged_a: Any, merged_b: Any) -> list[str]:
        """The JSON types no value of which meets both ``a`` and ``b`` (``merged_*``: the same
        merged with the rest, None if not mergeable), tested one type at a time (``number``
        standing for both number types): branches that differ only on objects still share
        every other type."""
        found = []
        for t in ("null", "boolean", "number", "string", "array", "object"):
            a_t, b_t = _restrict(a, t), _restrict(b, t)
            if self._disjoint(a_t, b_t) or (t == "object" and merged_a is not None and merged_b is not None
                                           and self._generated_apart(_restrict(merged_a, t), _restrict(merged_b, t))):
                found.append(t)
        return found

    def _failures(self, condition: Any, pointer: str, entered: frozenset[int] = frozenset()) -> list[Any] | None:
        """Schemas that together hold exactly the values failing ``condition`` (``[]``: none
        fails), or None when it is not of a form negated exactly. A value fails when it fails
        one of the keywords, each negated as schemas the compiler enforces exactly: ``type``;
        number bounds (draft 4's too); ``minLength``/``maxLength``, ``minItems``/``maxItems``;
        ``pattern`` and asserted ``format`` (strings whose content fails them: a ``not`` of
        them, see :meth:`_failing_content`); ``const``/``enum`` of strings, booleans or null;
        ``required``; ``properties``, ``items``/``prefixItems`` (``contains`` of the item's
        failures past no prefix), ``contains`` (with its bounds), dependent keys and schemas
        whose sub-schemas are negated so; keys outside ``propertyNames`` of names and
        patterns, members failing ``patternProperties`` or ``additionalProperties`` (a ``not``
        of them, see :meth:`_key_witness`); ``allOf`` (each part's failures), ``anyOf`` (every
        branch failed at once), ``oneOf`` (:meth:`_one_of_failures`), ``not X`` (``X``),
        ``$ref`` (its target's; a reference cycle is not negated). Keys no validator reads are
        ignored. A keyword of one type fails only values of that type. ``entered``: the schema
        objects negated on this path."""
        condition = self.deref(condition, pointer)
        if condition is True or (isinstance(condition, dict) and not set(condition) & KEYWORDS):
            return []
        if condition is False:
            return [True]
        if not isinstance(condition, dict) or id(condition) in entered or len(entered) >= MAX_NESTING:
            return None
        entered = entered | {id(condition)}
        if isinstance(condition.get("$ref"), str) and self.dialect in DRAFTS_IGNORING_REF_SIBLINGS:
            return self._failures(self.resolve(condition["$ref"], pointer, condition)[0], pointer, entered)
        required = condition.get("required", [])
        properties = condition.get("properties", {})
        if not isinstance(required, list) or not isinstance(properties, dict):
            return None
        failures: list[Any] = []
        for key, value in _active_conditional(condition).items():
            if key in KEYWORDS and key not in ("properties", "required") and _NO_OP.get(key, object()) != value:
                found = self._keyword_failures(key, value, condition, pointer, entered)
                if found is None:
                    return None
                failures += found
        for name, sub in properties.items():
            values = _scalar_constants(sub)
            if values is not None:
                mismatch = {"type": "object", "properties": {name: {"not": {"enum": values}}}}
                if name not in required:
                    mismatch["required"] = [name]  # absent satisfies the condition: a failure has the key
                failures.append(mismatch)
                continue
            inner = self._failures(sub, f"{pointer}/properties/{_escape(name)}", entered)
            if inner is None:
                return None
            if inner:  # the key present, its value failing the sub-schema one of the ways it can
                failures.append({"type": "object", "required": [name], "properties": {name: _any_of_schema(inner)}})
        for name in required:  # the key absent (a constant's mismatch above already holds that case)
            if _scalar_constants(properties.get(name)) is None:
                failures.append({"type": "object", "properties": {name: False}})
        return failures

    def _one_of_failures(self, branches: list[Any], pointer: str, entered: frozenset[int]) -> list[Any] | None:
        """The failures of ``oneOf: branches``: failing every branch at once, or matching two
        that may overlap (each such pair as their conjunction; :meth:`_disjoint` pairs share no
        value). Exact; None past ``MAX_DISTRIBUTED_BRANCHES`` overlapping pairs."""
        each = [self._failures(b, f"{pointer}/oneOf/{i}", entered) for i, b in enumerate(branches)]
        if any(found is None for found in each):
            return None
        plain = [self.deref(b, f"{pointer}/oneOf/{i}") for i, b in enumerate(branches)]
        both = [{"allOf": [branches[i], branches[j]]} for i in range(len(branches)) for j in range(i + 1, len(branches))
                if not self._disjoint(plain[i], plain[j])]
        if len(both) > MAX_DISTRIBUTED_BRANCHES:
            return None
        none = [_all_of_schema([_any_of_schema(found) for found in each])] if all(each) else []
        return none + both

    def _keyword_failures(self, key: str, value: Any, condition: dict, pointer: str,
                          entered: frozenset[int]) -> list[Any] | None:
        """The failures of one keyword of ``condition`` (see :meth:`_failures`)."""
        if key == "type":  # the other types (numbers with a fraction where only integers are allowed)
            types = declared_types({key: value})
            others = [t for t in TYPES if t not in types and t not in ("integer", "number")]
            others += [] if "number" in types else ["number"] if "integer" not in types else []
            only_integers = types & {"integer", "number"} == {"integer"}
            fractional = [{"type": "number", "not": {"type": "integer"}}] if only_integers else []
            return ([{"type": others}] if others else []) + fractional
        if key in _BOUND_FAILURES and self.dialect != "draft4" and numbers.to_decimal(value) is not None \
                and not isinstance(value, bool):
            return [{"type": "number", _BOUND_FAILURES[key]: value}]
        if self.dialect == "draft4" and key in ("minimum", "maximum") and numbers.to_decimal(value) is not None \
                and not isinstance(value, bool):  # exclusiveMinimum/Maximum: booleans that modify the bound
            opposite = "maximum" if key == "minimum" else "minimum"
            exclusive = condition.get(f"exclusive{key.capitalize()}") is True
            return [{"type": "number", opposite: value, f"exclusive{opposite.capitalize()}": not exclusive}]
        if self.dialect == "draft4" and key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
            return []  # read with its bound
        if key in _COUNT_FAILURES and type(value) is int:
            json_type, opposite, step = _COUNT_FAILURES[key]
            return [{"type": json_type, opposite: value + step}] if value + step >= 0 else []
        if key in ("const", "enum"):
            return self._constant_failures([value] if key == "const" else value)
        if key == "multipleOf":  # a number that is no multiple (written without exponent)
            step = numbers.to_decimal(value)
            return [{"type": "number", "not": {key: value}}] \
                if step is not None and step > 0 and not isinstance(value, bool) else None
        if key in ("pattern", "format"):
            if key == "format" and not (self.options.assert_formats and (
                    value in FORMAT_DOCS or value in UNENFORCED_FORMATS or self.options.unknown_formats == "error")):
                return []  # an annotation
            return [{"type": "string", "not": {key: value}}]
        if key == "not":
            return [value] if value is not False else []
        if key == "$ref":
            return self._failures(self.resolve(value, pointer, condition)[0], pointer, entered)
        if key == "allOf" and isinstance(value, list):
            failures: list[Any] = []
            for i, part in enumerate(value):
                found = self._failures(part, f"{pointer}/allOf/{i}", entered)
                if found is None:
                    return None
                failures += found
            return failures
        if key == "anyOf" and isinstance(value, list) and value:
            each = [self._failures(b, f"{pointer}/anyOf/{i}", entered) for i, b in enumerate(value)]
            if any(found is None for found in each):
                return None
            if any(not found for found in each):
                return []  # a branch every value matches
            return [_all_of_schema([_any_of_schema(found) for found in each])]
        if key == "oneOf" and isinstance(value, list) and value:
            return self._one_of_failures(value, pointer, entered)
        prefix_key = "prefixItems" if self.dialect == "2020-12" else "items"
        if key == prefix_key and isinstance(value, list):
            failures = []
            for index, item in enumerate(value):  # an array fails where item ``index`` is there and fails
                found = self._failures(item, f"{pointer}/{key}/{index}", entered)
                if found is None:
                    return None
                if found:
                    failures.append({"type": "array", "minItems": index + 1,
                                     "prefixItems": [True] * index + [_any_of_schema(found)]})
            return failures
        if key == "items" and _prefix(condition) is None:
            found = self._failures(value, f"{pointer}/items", entered)
            return None if found is None else [{"type": "array", "contains": _any_of_schema(found)}] if found else []
        if key == "contains":  # an array with fewer matching items than minContains or more than maxContains
            least, most = condition.get("minContains", 1), condition.get("maxContains")
            failures = [{"type": "array", "items": {"not": value}}] if least else []
            if type(least) is int and least > 1:
                failures.append({"type": "array", "contains": value, "maxContains": least - 1})
            if type(most) is int:
                failures.append({"type": "array", "contains": value, "minContains": most + 1})
            return failures
        if key in ("minContains", "maxContains"):
            return [] if "contains" in condition else None  # read with contains; alone, nothing
        if key in ("dependentRequired", "dependentSchemas", "dependencies") and isinstance(value, dict):
            failures = []  # an object with the key and without a key it requires, or failing its schema
            for name, needed in value.items():
                if isinstance(needed, list):
                    failures += [{"type": "object", "required": [name], "properties": {other: False}}
                                 for other in needed]
                    continue
                found = self._failures(needed, f"{pointer}/{key}/{_escape(name)}", entered)
                if found is None:
                    return None
                if found:
                    failures.append({"allOf": [{"type": "object", "required": [name]}, _any_of_schema(found)]})
            return failures
        if key == "additionalItems" and not isinstance(condition.get("items"), list):
            return []  # without a tuple of items it applies to nothing
        if key == "propertyNames" and (_names_outside({key: value}) is not None
                                       or _names_inside({key: value}) is not None):
            return [{"type": "object", "not": {key: value}}]  # an object with a key outside them (or one of them)
        if key == "additionalProperties":  # an object with an undeclared key whose value fails it
            found = self._failures(value, f"{pointer}/additionalProperties", entered)
            declared = {k: {name: True for name in condition.get(k, {})} for k in ("properties", "patternProperties")}
            return None if found is None else [{"type": "object", "not": {**declared, key: value}}] if found else []
        if key == "patternProperties" and isinstance(value, dict):
            failures = []
            for pattern, sub in value.items():  # an object with a key matching it whose value fails its schema
                found = self._failures(sub, f"{pointer}/patternProperties/{_escape(pattern)}", entered)
                if found is None:
                    return None
                if found:
                    failures.append({"type": "object", "not": {key: {pattern: sub}}})
            return failures
        return None

    def _constant_failures(self, values: Any) -> list[Any] | None:
        """The failures of ``enum: values`` of strings, booleans, null and numbers: a value of
        another type or a scalar not listed; a number strictly between two listed ones, or past
        them (exclusive bounds, which write numbers as ``enum`` does: no exponent form, so no
        writing of a listed number is left). None with an object or array among them."""
        if not isinstance(values, list) or any(isinstance(v, (dict, list)) for v in values):
            return None
        points = sorted({numbers.to_decimal(v): v for v in values
                         if isinstance(v, (int, float)) and not isinstance(v, bool)}.items())
        scalars = [v for v in values if isinstance(v, (str, bool)) or v is None]
        if not points:
            return [{"not": {"enum": scalars}}]
        other = {"type": [t for t in TYPES if t not in ("integer", "number")]}
        failures: list[Any] = [{**other, "not": {"enum": scalars}} if scalars else other]
        edges = [v for _, v in points]
        for low, high in zip([None, *edges], [*edges, None]):
            failures.append({"type": "number", **self._exclusive_bounds(low, high)})
        return failures

    def _exclusive_bounds(self, low: Any, high: Any) -> dict:
        """Keywords for ``low < x < high`` (None: unbounded) in this schema's dialect."""
        if self.dialect == "draft4":  # exclusiveMinimum/Maximum are booleans beside the bounds
            bounds: dict = {}
            if low is not None:
                bounds.update(minimum=low, exclusiveMinimum=True)
            if high is not None:
                bounds.update(maximum=high, exclusiveMaximum=True)
            return bounds
        return {**({} if low is None else {"exclusiveMinimum": low}),
                **({} if high is None else {"exclusiveMaximum": high})}

    def _key_witness(self, negated: Any, pointer: str) -> _KeyWitness | None:
        """The member an object must hold to fail ``negated`` when it holds only keywords on
        keys: ``propertyNames`` of names and patterns (a key outside them, any value);
        ``propertyNames`` of the ``not`` of names and patterns (a key that is one of the names
        or matches one of the patterns, any value); ``patternProperties`` of one pattern (a
        key matching it whose value fails its schema);
        ``additionalProperties`` beside ``properties``/``patternProperties`` every value meets
        (an undeclared key whose value fails it). None for any other schema."""
        outside = _names_outside(negated)
        if outside is not None:
            return _KeyWitness(True, tuple(outside[0]), tuple(outside[1]), True)
        inside = _names_inside(negated)
        if inside is not None:
            return _KeyWitness(False, (), (_names_pattern(*inside),), True)
        keys = set(negated) & KEYWORDS if isinstance(negated, dict) else set()
        patterns = negated.get("patternProperties") if keys else None
        if keys == {"patternProperties"} and isinstance(patterns, dict) and len(patterns) == 1:
            (pattern, sub), = patterns.items()
            failures = self._failures(sub, f"{pointer}/patternProperties/{_escape(pattern)}")
            value: Any = _any_of_schema(failures) if failures else False
            return None if failures is None else _KeyWitness(False, (), (pattern,), value)
        if "additionalProperties" not in keys or keys - {"additionalProperties", "properties", "patternProperties"}:
            return None
        declared = [negated.get("properties", {}), patterns or {}]
        if not all(isinstance(d, dict) and all(self._failures(sub, pointer) == [] for sub in d.values())
                   for d in declared):
            return None
        failures = self._failures(negated["additionalProperties"], f"{pointer}/additionalProperties")
        value = _any_of_schema(failures) if failures else False
        return None if failures is None else _KeyWitness(True, tuple(declared[0]), tuple(declared[1]), value)

    def _negation(self, failures: list[Any], context: list[Any], pointer: str) -> Any:
        """One schema for the union of ``failures`` met beside the ``context`` schemas
        (:meth:`_opened`)."""
        failures = self._opened(failures, context, pointer)
        if not failures:
            return False
        return _any_of_schema(failures)

    def _opened(self, failures: list[Any], context: list[Any], pointer: str) -> list[Any]:
        """``failures`` to be met beside the ``context`` schemas: the keys a failure names
        declare nothing, so in strict mode an object the context leaves bare stays open
        (``additionalProperties: true`` on failures that name properties and not it)."""
        if not self.options.strict or any(self._declares_keys(part, pointer) for part in context):
            return failures
        return [{**f, "additionalProperties": True}
                if isinstance(f, dict) and "properties" in f and "additionalProperties" not in f else f
                for f in failures]

    def _any_of(self, schema: dict, pointer: str, depth: int, refs: Refs) -> Node:
        key = "anyOf" if "anyOf" in schema else "oneOf"
        rest = {k: v for k, v in schema.items() if k != key}
        if not isinstance(schema[key], list) or not schema[key]:
            raise InvalidSchemaError(pointer, f"'{key}' must be a non-empty array")
        if key == "oneOf":
            always = [i for i, b in enumerate(schema[key]) if b is True or (isinstance(b, dict) and not set(b) - ANNOTATIONS)]
            if len(always) > 1:
                return NOTHING  # every value matches two branches
            if always:  # one branch matches every value: exactly the values no other branch matches
                others = [{"not": b} for i, b in enumerate(schema[key]) if i != always[0] and b is not False]
                return self.value(_all_of_schema([rest, *others]) if others else rest, pointer, depth, refs)
        followed = [self._deref_path(b, f"{pointer}/{key}/{i}", depth, refs) for i, b in enumerate(schema[key])]
        branches = [b for b, _ in followed]
        exclusions = self._one_of_exclusions(branches, rest, [rest], pointer) if key == "oneOf" \
            else [[] for _ in branches]
        nodes = []
        for i, ((branch, branch_refs), excluded) in enumerate(zip(followed, exclusions)):
            bptr = f"{pointer}/{key}/{i}"
            if excluded:  # the branch's keys first, then what the other branches must fail
                nodes.append(self._one_branch([rest, branch], excluded, pointer, i, depth, branch_refs))
                continue
            m = merge(rest, branch)
            if m is None:
                nodes.append(self.value({"allOf": [rest, branch]}, bptr, depth, branch_refs))
            else:
                nodes.append(self.value(m, bptr, depth, branch_refs))
        return alt(*nodes)

    def _types_of(self, schema: Any, path: frozenset[int] = frozenset()) -> set[str]:
        """The JSON types ``schema`` may admit (a superset; every type on a ``$ref`` cycle)."""
        schema = self.deref(schema, "")
        if schema is True or not isinstance(schema, dict) or id(schema) in path or len(path) > MAX_NESTING:
            return set(TYPES) if schema is not False else set()
        path = path | {id(schema)}
        types = declared_types(schema)
        if "enum" in schema:
            types &= self._constant_types(schema["enum"])
        elif "const" in schema:
            types &= self._constant_types([schema["const"]])
        for key in ("anyOf", "oneOf"):
            if key in schema:
                union: set[str] = set()
                for b in schema[key]:
                    union |= self._types_of(b, path)
                types &= union
        if "allOf" in schema:
            for b in schema["allOf"]:
                types &= self._types_of(b, path)
        if "integer" in types or "number" in types:
            types |= {"integer"}
        return types

    def _constant_types(self, values: Any) -> set[str]:
        """The JSON types of an enum's ``values`` (``number`` too beside an integer), once per
        list object in a compile (the list is held with its verdict, so that its id stays
        unique)."""
        hit = self._enum_types.get(id(values))
        if hit is None:
            found = {_type_of(v) for v in values} if isinstance(values, list) else set(TYPES)
            if "integer" in found:
                found.add("number")
            hit = self._enum_types[id(values)] = (values, frozenset(found))
        return set(hit[1])

    def _disjoint(self, a: Any, b: Any, level: int = 0) -> bool:
        """Sound test: True only when no JSON value can satisfy both schemas (properties and
        applicators are followed ``_DISJOINT_LEVELS`` deep; deeper, "may overlap"): a part of an
        ``allOf`` (or the target of a ``$ref`` beside other keywords) disjoint from the other
        schema, every branch of an ``anyOf``/``oneOf`` disjoint from it."""
        if a is False or b is False:
            return True
        if level > _DISJOINT_LEVELS:
            return False
        key = (id(a), id(b), level)
        hit = self._disjoint_verdicts.get(key)
        if hit is not None and hit[0] is a and hit[1] is b:
            return hit[2]
        verdict = self._disjoint_uncached(a, b, level)
        self._disjoint_verdicts[key] = (a, b, verdict)
        return verdict

    def _disjoint_uncached(self, a: Any, b: Any, level: int) -> bool:
        try:
            a, b = self.deref(a, ""), self.deref(b, "")
            if self._disjoint_here(a, b, level):
                return True
            for x, y in ((a, b), (b, a)):
                if isinstance(x, dict) and any(self._disjoint(part, y, level + 1) for part in self._conjuncts(x)):
                    return True
                for key in ("anyOf", "oneOf"):
                    branches = x.get(key) if isinstance(x, dict) else None
                    if isinstance(branches, list) and branches \
                            and all(self._disjoint(branch, y, level + 1) for branch in branches):
                        return True
        except EnforcerError:
            pass  # a reference not resolved here: the compile names it where it builds the value
        return False

    def _conjuncts(self, schema: dict) -> list[Any]:
        """Schemas every value meeting ``schema`` meets besides its own keywords: its ``allOf``
        parts and the target of a ``$ref`` beside other keywords (2019-09 on)."""
        parts = list(schema["allOf"]) if isinstance(schema.get("allOf"), list) else []
        if isinstance(schema.get("$ref"), str):
            parts.append(self.resolve(schema["$ref"], "", schema)[0])
        return parts

    def _disjoint_here(self, a: Any, b: Any, level: int) -> bool:
        """:meth:`_disjoint` on the keywords of ``a`` and ``b`` themselves (types, strings'
        automata, constants, the values of properties both require)."""
        ta, tb = self._types_of(a), self._types_of(b)
        ta_n = ta | ({"integer"} if "number" in ta else set())
        tb_n = tb | ({"integer"} if "number" in tb else set())
        if not (ta_n & tb_n):
            return True
        if ta_n & tb_n == {"string"} and self._strings_apart(a, b):
            return True
        for x, y in ((a, b), (b, a)):
            if isinstance(x, dict) and ("enum" in x or "const" in x):
                values = x["enum"] if "enum" in x else [x["const"]]
                if not any(self._validator.evolve(schema=y).is_valid(v) for v in values):
                    return True
        if isinstance(a, dict) and isinstance(b, dict):
            pa, pb = a.get("properties", {}), b.get("properties", {})
            common = set(a.get("required", [])) & set(b.get("required", []))
            both_objects = (ta & tb) <= {"object"}
            if both_objects:
                for name in common:
                    if name in pa and name in pb and self._disjoint(self.deref(pa[name], ""), self.deref(pb[name], ""), level + 1):
                        return True
                # a property required by one side and forbidden by the other
                for x, y in ((a, b), (b, a)):
                    for name in x.get("required", []):
                        if y.get("properties", {}).get(name) is False:
                            return True
                        if y.get("additionalProperties") is False and name not in y.get("properties", {}) \
                                and not y.get("patternProperties"):
                            return True
        return False

    def _strings_apart(self, a: Any, b: Any) -> bool:
        """Whether no string meets both ``a`` and ``b``, each a plain string schema (lengths,
        ``pattern``, ``format``; any other keyword: False) with a pattern or format: their raw
        text automata share no string. Sound; False where an automaton is refused."""
        keys = []
        for schema in (a, b):
            schema = _restrict(schema, "string")
            if not isinstance(schema, dict) or set(schema) & KEYWORDS - _TYPE_KEYWORDS["string"] - {"type"} \
                    or not set(schema) & {"pattern", "format"}:
                return False
            key = json.dumps({k: schema[k] for k in _TYPE_KEYWORDS["string"] if k in schema}, sort_keys=True)
            if key not in self._string_texts:
                try:
                    self._string_texts[key] = compile_node(self._string_body(schema, "", raw=True),
                                                           self.options.max_states)
                except EnforcerError:
                    self._string_texts[key] = None
            keys.append(key)
        pair = (keys[0], keys[1]) if keys[0] <= keys[1] else (keys[1], keys[0])
        if pair not in self._strings_apart_verdicts:
            first, second = (self._string_texts[key] for key in pair)
            try:
                apart = first is not None and second is not None \
                    and first.intersect(second, self.options.max_states).is_empty
            except SchemaTooComplexError:
                apart = False
            self._strings_apart_verdicts[pair] = apart
        return self._strings_apart_verdicts[pair]

    def _if_then_else(self, schema: dict, pointer: str, depth: int, refs: Refs) -> Node:
        return self.value(self._conditional_union(schema, pointer), pointer, depth, refs)

    def _conditional_union(self, schema: dict, pointer: str) -> Any:
        """``schema`` without ``if``/``then``/``else``: a union of exact branches, (base,
        ``then``, ``if``) and, for each way ``if`` can fail (:meth:`_failures`), (base,
        ``else``, that failure). Other conditions are refused (their complement is not built);
        an ``if`` with neither ``then`` nor ``else`` constrains nothing."""
        base = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
        if "then" not in schema and "else" not in schema:
            return base
        then_schema, else_schema = schema.get("then", True), schema.get("else", True)
        condition = self.deref(schema["if"], f"{pointer}/if")
        if condition is True or condition == {}:
            return _all_of_schema([base, then_schema])
        if condition is False:
            return _all_of_schema([base, else_schema])
        failures = self._failures(condition, f"{pointer}/if")
        if failures is None:
            raise UnsupportedSchemaError("if", pointer, f"its condition is not negated exactly ({_NEGATED})")
        branches = [{"allOf": [base, then_schema, condition]}]
        branches += [{"allOf": [base, else_schema, failure]} for failure in failures]
        return {"anyOf": branches}

    def _written_keys(self, schema: Any) -> set[str] | None:
        """The keys any object this compiler writes for ``schema`` can hold (None: not known,
        or undeclared keys may appear)."""
        schema = self.deref(schema, "")
        if not isinstance(schema, dict) or any(k in schema for k in ("$ref", "allOf", "anyOf", "oneOf", "not",
                                                                     "patternProperties", "if")):
            return None
        additional = schema.get("additionalProperties")
        closed = additional is False or (additional is None and self.options.strict and "properties" in schema)
        if not closed:
            return None
        named = set(schema.get("properties", {})) | set(schema.get("required", []))
        for key in ("dependentRequired", "dependencies"):
            for name, deps in schema.get(key, {}).items():
                named |= {name, *deps} if isinstance(deps, list) else {name}
        return named

    def _generated_apart(self, a: Any, b: Any) -> bool:
        """True when no value this compiler writes for ``a`` satisfies ``b`` and vice versa, for
        branches that may share only objects: the objects written for one (closed, as strict
        mode writes them) lack a key the other requires. Sound for the values generated."""
        if a is None or b is None:
            return False
        ta, tb = self._types_of(a), self._types_of(b)
        if (ta & tb) - {"object"}:
            return False
        for x, y in ((a, b), (b, a)):
            keys = self._written_keys(x)
            y = self.deref(y, "")
            if keys is None or not isinstance(y, dict) or set(y.get("required", [])) <= keys:
                return False
        return True

    def _not(self, schema: dict, pointer: str, depth: int, refs: Refs) -> Node:
        negated = self.deref(schema["not"], f"{pointer}/not")
        rest = {k: v for k, v in schema.items() if k != "not"}
        if negated is True or negated == {}:
            return NOTHING
        if negated is False:
            return self.value(rest, pointer, depth, refs)
        keys = set(negated) - ANNOTATIONS
        if keys == {"type"}:
            excluded = declared_types(negated)
            allowed = [t for t in TYPES if t not in excluded]
            if "integer" in excluded and "number" not in excluded:
                return self._not_integer(rest, [t for t in allowed if t not in ("integer", "number")], pointer,
                                         depth, refs)
            m = merge(rest, {"type": allowed})
            if m is None:
                raise UnsupportedSchemaError("not", pointer)
            return self.value(m, pointer, depth, refs)
        if keys == {"not"}:  # double negation
            inner = negated["not"]
            both = _all_of_schema([rest, inner]) if set(rest) - ANNOTATIONS else inner
            return self.value(both, f"{pointer}/not/not", depth, refs)
        if keys <= {"enum", "const"} and len(keys) == 1:
            values = negated["enum"] if "enum" in negated else [negated["const"]]
            if all(isinstance(v, (str, bool)) or v is None for v in values):
                text = _text_without_references(schema)  # with none, the same value at any recursion cut
                key = (text, depth) if text is not None else None
                if key is not None and key in self._negated_constants:  # failures of tagged conditions repeat it
                    return self._negated_constants[key]
                # values of other types never equal a constant: compiled as they are, not built
                # whole (a value of any type but `true`: ~1,600 states per depth; Github_medium
                # o39168's compile 17.9 -> 7.1 ms). Not where recursion is knotted: there
                # Github_medium o39217, refused over the eager budget otherwise, would compile
                # into an automaton of 0.7 MB per state decoded (subsets of its levels; its
                # instances stopped on the decode budget), with its other types inline or shared
                constant_types = sorted({_type_of(v) for v in values})
                equal_typed = merge(rest, {"type": constant_types})
                other_typed = merge(rest, {"type": [t for t in TYPES if t not in constant_types]})
                split = isinstance(equal_typed, dict) and isinstance(other_typed, dict) \
                    and bool(declared_types(other_typed)) and not self._knot_levels_possible()
                with self._eager(pointer, "not"):
                    base = compile_node(self.value(equal_typed if split else rest, pointer, depth, refs),
                                        self.options.max_states)
                    excluded = compile_node(alt(*(self.literal_value(v, depth) for v in values)),
                                            self.options.max_states)
                    dfa = base.difference(excluded, self.options.max_states)
                node = Embedded(dfa) if not dfa.is_empty else NOTHING
                if split:
                    node = alt(node, self.value(other_typed, pointer, depth, refs))
                if key is not None:
                    self._negated_constants[key] = node
                return node
        if set(negated) & KEYWORDS == {"multipleOf"}:
            numbers_rest = self._only(rest, "number", pointer)  # the numbers that are no multiple
            return self._not_multiple(numbers_rest, negated["multipleOf"], pointer, depth, refs) if numbers_rest \
                else NOTHING
        if set(negated) & KEYWORDS and set(negated) & KEYWORDS <= {"pattern", "format"}:
            strings = self._only(rest, "string", pointer)  # the strings whose content fails them
            return self._string(strings, pointer, self.raw_strings and depth == 0, negated) if strings else NOTHING
        witness = self._key_witness(negated, f"{pointer}/not")
        if witness is not None:  # the objects with a member that fails it
            objects = self._only(rest, "object", pointer)
            return self._object(objects, pointer, depth, refs, (witness,)) if objects and witness.value is not False \
                else NOTHING
        failures = self._failures(negated, f"{pointer}/not")  # the values failing it, one way each
        if failures is None:
            raise UnsupportedSchemaError("not", pointer, f"its schema is not negated exactly ({_NEGATED})")
        if not failures:
            return NOTHING
        return self.value({"anyOf": [_all_of_schema([rest, failure]) for failure in self._opened(failures, [rest],
                                                                                                  pointer)]},
                          pointer, depth, refs)

    @staticmethod
    def _only(rest: dict, json_type: str, pointer: str) -> dict | None:
        """``rest`` for its values of ``json_type`` (None: it has none), beside a ``not`` that
        only values of that type meet; refused where ``rest`` holds a keyword of no type
        (``enum``, ``const``: compiled elsewhere, not beside such a negation)."""
        typed = _restrict(rest, json_type)
        other = set(typed) & KEYWORDS - _TYPE_KEYWORDS[json_type] - {"type", "nullable"} \
            if isinstance(typed, dict) else {"$ref"}
        if other:
            raise UnsupportedSchemaError("not", pointer, f"negated {json_type} keywords beside {sorted(other)[0]!r}")
        return typed if declared_types(typed) else None

    def _not_multiple(self, rest: dict, step_value: Any, pointer: str, depth: int, refs: Refs) -> Node:
        """The numbers of ``rest`` that are no multiple of ``step_value``, written without
        exponent (as bounded numbers are) and divisible as written
        (:data:`~enforcer.numbers.DIVISIBLE_AS_WRITTEN`, as positive ``multipleOf``): every such
        writing of ``rest``'s numbers minus every writing of a multiple
        (:func:`~enforcer.numbers.multiple_of`, trailing zeros included). Built whole, within
        ``max_states``."""
        step = numbers.to_decimal(step_value)
        if step is None or step <= 0 or isinstance(step_value, bool):
            raise InvalidSchemaError(f"{pointer}/not", "'multipleOf' must be a number > 0")
        multiples = numbers.multiple_of(step, False)
        if multiples is None:
            raise UnsupportedSchemaError("not", pointer, "a multipleOf step too fine to negate exactly")
        limit = self.options.max_states
        with self._eager(pointer, "not"):
            plain = compile_node(self.value(rest, pointer, depth, refs), limit).intersect(_divisible_as_written(), limit)
            dfa = plain.difference(compile_node(multiples, limit), limit)
        return Embedded(dfa) if not dfa.is_empty else NOTHING

    def _not_integer(self, rest: dict, others: list[str], pointer: str, depth: int, refs: Refs) -> Node:
        """``rest`` and ``not: {type: integer}`` (with ``others``, the other types left): numbers
        with a non-zero fraction digit (draft-04: with a fraction part), written without exponent
        (``1.5e1`` is the integer 15), where ``rest`` says nothing of numbers."""
        number_keys = set(rest) - ANNOTATIONS - {"type"} - _NON_NUMBER_KEYWORDS
        if number_keys:
            raise UnsupportedSchemaError("not", pointer, f"'not: integer' beside {sorted(number_keys)[0]!r} "
                                         "is not supported")
        m = merge(rest, {"type": others})
        nodes = [self.value(m, pointer, depth, refs)] if others and m is not None else []
        if "number" in declared_types(rest):  # draft-04: a fraction part makes a non-integer, 1.0 too
            nodes.append(numbers.WITH_FRACTION if self.dialect == "draft4" else numbers.FRACTIONAL)
        return alt(*nodes)

    # ---- typed values -----------------------------------------------------------------------

    def _typed(self, schema: dict, pointer: str, depth: int, refs: Refs) -> Node:
        if "enum" in schema or "const" in schema:
            return self._enum(schema, pointer, depth)
        declared = schema.get("type")
        if type(declared) is str and declared in _TYPE_NAMES:  # one type: no union to build
            return self._of_type(declared, schema, pointer, depth, refs)
        types = declared_types(schema)
        if "number" in types:
            types.discard("integer")
        return alt(*(self._of_type(t, schema, pointer, depth, refs) for t in TYPES if t in types))

    def _of_type(self, name: str, schema: dict, pointer: str, depth: int, refs: Refs) -> Node:
        """The values of JSON type ``name`` that ``schema``'s keywords of that type admit."""
        if name == "string":
            return self._string(schema, pointer, raw=self.raw_strings and depth == 0)
        if name == "object":
            return self._object(schema, pointer, depth, refs)
        if name == "integer" or name == "number":
            return self._number(schema, pointer, name == "integer")
        if name == "array":
            return self._array(schema, pointer, depth, refs)
        return _BOOLEAN if name == "boolean" else literal("null")

    def _enum(self, schema: dict, pointer: str, depth: int) -> Node:
        """The ``enum``/``const`` members the rest of the schema admits: strings as one trie
        (shared prefixes written once), other values as alternatives. Linear in the members:
        each is checked once against the schema without its ``enum``/``const``; the same
        members (one object: a definition met again) beside the same rest at the same depth are
        built once per compile (a schema may repeat an enum thousands of times: Github_hard
        o69211, 7,109 tries). Keyed by identity, so a large enum is never serialised for it."""
        keyword = "const" if "const" in schema else "enum"
        members = schema[keyword]
        values = [members] if keyword == "const" else members
        if not isinstance(values, list):
            raise InvalidSchemaError(pointer, "'enum' must be an array")
        rest = {k: v for k, v in schema.items() if k != keyword}  # an enum beside a const: checked as the rest
        if _PLAIN_ENUM_KEYWORDS.issuperset(rest):
            # the plain case: the node depends on the type alone (no text of the annotations)
            declared = rest.get("type")
            rest_key: Any = ("type", declared if declared is None or isinstance(declared, str) else _json_key(declared))
        else:
            rest_key = _json_key(rest)
            if "$ref" in rest_key or "$dynamicRef" in rest_key:  # the rest's verdicts depend on where it is
                return self._enum_node(values, rest, pointer, depth, keyword)
        key = (keyword, id(members), rest_key, depth)
        hit = self._enums.get(key)
        if hit is None or hit[0] is not members:
            hit = self._enums[key] = (members, self._enum_node(values, rest, pointer, depth, keyword))
        return hit[1]

    def _enum_node(self, values: list[Any], rest: dict, pointer: str, depth: int, keyword: str) -> Node:
        """:meth:`_enum` built (``keyword``: the one holding ``values``, for refusals)."""
        keywords = set(rest) - ANNOTATIONS
        types = _plain_types(rest["type"]) if keywords == {"type"} else None
        check = self._validator.evolve(schema=rest) if keywords and types is None else None
        seen: set[str] = set()
        strings: list[str] = []
        decimals: list[tuple[str, bool]] = []
        others: list[Any] = []
        nodes = []
        for v in values:
            key = _json_key(v)
            if key in seen or (types is not None and _type_of(v) not in types) \
                    or (check is not None and not check.is_valid(v)):
                continue
            seen.add(key)
            if isinstance(v, str):
                strings.append(v)
            elif type(v) is int:
                decimals.append((str(v), True))
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                decimals.append(numbers.canonical_text(self._finite(v)))
            else:
                others.append(v)
        if others:
            nodes.append(self._constant_trie(others, depth))
        if strings:
            raw = self.raw_strings and depth == 0
            self._check_longest(strings, raw, pointer, keyword)
            nodes.append(_string_trie(strings, raw=raw))
        if decimals:
            nodes.append(_number_trie(decimals))
        return alt(*nodes)

    def _check_longest(self, strings: list[str], raw: bool, pointer: str, keyword: str) -> None:
        """Refuse before building when the longest string alone exceeds the budget: its path in
        any automaton of the values holds one encoded form per character."""
        longest = max(strings, key=len)
        if len(longest) > 1000:  # a Counter pass, for values long enough to matter
            size = sum(nfa_size(_encoded_char(c, raw)) * n for c, n in Counter(longest).items())
            self._within_budget(size, pointer, f"a {keyword} value of {len(longest):,} characters", keyword)

    @staticmethod
    def _finite(value: Any) -> Any:
        d = numbers.to_decimal(value)
        if d is None:
            raise InvalidSchemaError("", f"non-finite number {value!r} in enum/const")
        return d

    def literal_value(self, value: Any, depth: int) -> Node:
        """Every accepted serialisation of one JSON value (any escape form for strings)."""
        if value is None:
            return literal("null")
        if value is True:
            return literal("true")
        if value is False:
            return literal("false")
        if isinstance(value, (int, float)):
            return _number_trie([numbers.canonical_text(self._finite(value))])
        if isinstance(value, str):
            if self.raw_strings and depth == 0:
                return literal(value)
            return seq(literal('"'), *(json_string_char([(ord(c), ord(c))]) for c in value), literal('"'))
        if isinstance(value, (list, dict)):
            return self._constant_trie([value], depth)
        raise InvalidSchemaError("", f"not a JSON value: {value!r}")

    def _constant_trie(self, values: list[Any], depth: int) -> Node:
        """JSON values (arrays and objects written in their given key order, whitespace as
        anywhere else) as one minimal acyclic automaton over their symbols (see
        :meth:`_symbols`): linear in their total size, shared structure written once."""
        sequences = []
        for value in values:
            out: list[str] = []
            self._symbols(value, depth, out)
            sequences.append(tuple(out))
        return _minimal_acyclic(sequences, self._symbol_node)

    def _symbols(self, value: Any, depth: int, out: list[str]) -> None:
        """Append the symbols of ``value`` at ``depth``: one character of a string's content
        (length 1), or a tagged piece (length > 1): ``\x00`` + raw text, ``\x01``/``\x02`` +
        level (whitespace, comma), ``\x03:`` (colon), ``\x04`` + key name, ``\x05z`` (an
        integer's optional ``.0...``), ``\x06z`` (a fraction's optional zeros), ``\x070``
        (``0`` or ``-0``). Recursive: the document check bounds the depth."""
        if value is None or isinstance(value, bool):
            out.append("\x00" + json.dumps(value))
        elif isinstance(value, (int, float)):
            text, is_integer = numbers.canonical_text(self._finite(value))
            if text == "0":
                out.append("\x070")
            else:
                out.extend("\x00" + c for c in text)
            out.append("\x05z" if is_integer else "\x06z")
        elif isinstance(value, str):
            out.append('\x00"')
            out.extend(value)
            out.append('\x00"')
        elif isinstance(value, list):
            out += ["\x00[", f"\x01{depth + 1}"]
            for i, item in enumerate(value):
                if i:
                    out.append(f"\x02{depth + 1}")
                self._symbols(item, depth + 1, out)
            out += [f"\x01{depth}", "\x00]"] if value else ["\x00]"]
        elif isinstance(value, dict):
            out += ["\x00{", f"\x01{depth + 1}"]
            for i, (key, item) in enumerate(value.items()):
                if i:
                    out.append(f"\x02{depth + 1}")
                out += ["\x04" + key, "\x03:"]
                self._symbols(item, depth + 1, out)
            out += [f"\x01{depth}", "\x00}"] if value else ["\x00}"]
        else:
            raise InvalidSchemaError("", f"not a JSON value: {value!r}")

    def _symbol_node(self, symbol: str) -> Node:
        """The node of one symbol of :meth:`_symbols`."""
        if len(symbol) == 1:
            return _encoded_char(symbol, False)
        tag, rest = symbol[0], symbol[1:]
        if tag == "\x00":
            return literal(rest)
        if tag == "\x01":
            return self.ws(int(rest))
        if tag == "\x02":
            return self._comma(int(rest))
        if tag == "\x03":
            return self._colon()
        if tag == "\x04":
            return self._key_literal(rest)
        if tag == "\x05":
            return numbers.ZERO_FRACTION
        if tag == "\x06":
            return repeat(literal("0"), 0, None)
        return alt(literal("0"), literal("-0"))

    def _number(self, schema: dict, pointer: str, integer: bool) -> Node:
        lower = upper = None
        draft4 = self.dialect == "draft4"
        for key, exclusive, is_lower in (("minimum", False, True), ("exclusiveMinimum", True, True),
                                         ("maximum", False, False), ("exclusiveMaximum", True, False)):
            if key not in schema:
                continue
            if draft4:  # draft-04: exclusiveMinimum/Maximum are booleans that modify the bound
                if key.startswith("exclusive"):
                    continue
                exclusive = schema.get("exclusiveMinimum" if is_lower else "exclusiveMaximum") is True
            d = numbers.to_decimal(schema[key])
            if d is None:
                raise UnsupportedSchemaError(key, pointer, f"bound must be a finite number, got {schema[key]!r}")
            if is_lower:
                if lower is None or d > lower[0] or (d == lower[0] and exclusive):
                    lower = (d, exclusive)
            elif upper is None or d < upper[0] or (d == upper[0] and exclusive):
                upper = (d, exclusive)
        constrained = lower is not None or upper is not None or "multipleOf" in schema
        if integer and draft4:
            if not constrained:
                return numbers.PLAIN_INTEGER
            node = self._bounded(schema, pointer, lower, upper, integer)
            dfa = compile_node(node, self.options.max_states).intersect(_plain_integer_dfa(), self.options.max_states)
            return Embedded(dfa) if not dfa.is_empty else NOTHING
        if not constrained:
            return numbers.INTEGER if integer else numbers.NUMBER
        return self._bounded(schema, pointer, lower, upper, integer)

    def _bounded(self, schema: dict, pointer: str, lower: Any, upper: Any, integer: bool) -> Node:
        """Numbers within the bounds and ``multipleOf`` (exact, no exponent form)."""
        node = numbers.bounded_number(lower, upper, integer)
        if "multipleOf" in schema:
            step = numbers.to_decimal(schema["multipleOf"])
            if step is None or step <= 0:
                raise InvalidSchemaError(pointer, "'multipleOf' must be a number > 0")
            mult = numbers.multiple_of(step, integer)
            if mult is None:
                raise UnsupportedSchemaError("multipleOf", pointer, "step too fine to enforce exactly")
            with self._eager(pointer, "multipleOf"):
                dfa = compile_node(node, self.options.max_states).intersect(compile_node(mult, self.options.max_states),
                                                                            self.options.max_states)
                dfa = dfa.intersect(_divisible_as_written(), self.options.max_states)
            node = Embedded(dfa) if not dfa.is_empty else NOTHING
        return node

    def _string(self, schema: dict, pointer: str, raw: bool = False, failing: dict | None = None) -> Node:
        """A JSON string, or with ``raw`` the bare UTF-8 text of one; with ``failing`` (the
        ``pattern``/``format`` of a ``not`` beside ``schema``), only those whose content fails it."""
        if not raw and failing is None and not any(k in schema for k in _STRING_KEYWORDS):
            return _FREE_STRING  # any string: the most common value of all
        body = self._string_body(schema, pointer, raw, failing=failing)
        return body if raw else seq(literal('"'), body, literal('"'))

    def _string_body(self, schema: dict, pointer: str, raw: bool, every_writing: bool = False,
                     failing: dict | None = None) -> Node:
        """The string bodies of :meth:`_string`. ``every_writing``: formats take every JSON
        escape, as patterns do (else the common ones: see :data:`~enforcer.regex.Escapes`)."""
        min_len = _count(schema, "minLength", pointer) or 0
        max_len = _count(schema, "maxLength", pointer)
        if max_len is not None and min_len > max_len:
            return NOTHING  # no length fits (and an empty counted table is no automaton to embed)
        fmt = schema.get("format")
        fmt_key = fmt if self.options.assert_formats else None
        failing_key = None if failing is None else \
            (failing.get("pattern"), failing.get("format") if self.options.assert_formats else None)
        texts = (schema.get("pattern"), fmt_key, *(failing_key or ()))
        key = (raw, every_writing, schema.get("pattern"), fmt_key, min_len, max_len, failing_key) \
            if all(isinstance(text, (str, type(None))) for text in texts) else None
        body = self._string_products.get(key) if key is not None else None
        if body is not None:
            return body
        constraints: list[Node] = []
        if "pattern" in schema:
            constraints.append(self._pattern(schema["pattern"], pointer, "raw" if raw else "all"))
        if fmt is not None and self.options.assert_formats:
            # formats take the escapes real serialisers write (json.dumps never escapes the
            # printable ASCII that dates, addresses and ids consist of): automata 5x smaller
            if fmt in UNENFORCED_FORMATS:
                raise UnsupportedSchemaError("format", pointer, f"format {fmt!r}: {UNENFORCED_FORMATS[fmt]} "
                                             "(assert_formats=False treats formats as annotations)")
            fnode = format_node(fmt, pointer, escapes="raw" if raw else "all" if every_writing else "common")
            if fnode is not None:
                constraints.append(fnode)
            elif self.options.unknown_formats == "error":
                raise UnsupportedSchemaError("format", pointer, f"format {fmt!r} is not supported")
        if failing is not None:
            constraints.append(self._failing_content(failing, pointer, raw))
        keyword = "pattern" if "pattern" in schema else "format" if fmt_key else "not"
        if min_len or max_len is not None or not constraints:
            char = RAW_CHAR_ANY if raw else JSON_STRING_CHAR_ANY
            if max_len is not None:
                body = self._counted_product(constraints, raw, min_len, max_len, pointer, keyword) \
                    if constraints else None
                if body is None and constraints and max_len > MAX_COUNTED_LENGTH:  # the product is eager
                    raise SchemaTooComplexError(f"maxLength {max_len} with a pattern or format needs a counted "
                                                f"table of about {20 * max_len:,} states", pointer,
                                                f"MAX_COUNTED_LENGTH={MAX_COUNTED_LENGTH}", "maxLength")
                if body is None:
                    constraints.append(self._counted_string(raw, min_len, max_len, pointer))
            else:  # one NFA copy per counted character, built lazily
                self._check_repeat(char, min_len, pointer, "minLength")
                constraints.append(repeat(char, min_len, None))
        if body is None and len(constraints) == 1:
            body = constraints[0]
        if body is None:
            with self._eager(pointer, keyword):
                dfa = self._intersected(constraints)
            body = Embedded(dfa) if not dfa.is_empty else NOTHING
        if key is not None:
            self._string_products[key] = body
        return body

    def _counted_product(self, constraints: list[Node], raw: bool, min_len: int, max_len: int, pointer: str,
                         keyword: str) -> Node | None:
        """The bodies of ``min_len..max_len`` characters that every one of ``constraints`` (a
        pattern, a format, a ``not``) accepts, as a :class:`~enforcer.automaton.CountedProduct`:
        the constraints intersected whole (small: they do not count), the length kept as a
        count. None where that form is not exact; the caller then intersects whole. A pattern
        that is itself one character class counted is the class counted within both bounds
        (:meth:`_counted_class`)."""
        counted_class = self._counted_class(constraints, raw, min_len, max_len, pointer) \
            if len(constraints) == 1 else None
        if counted_class is not None:
            return counted_class
        with self._eager(pointer, keyword):
            content = self._intersected(constraints)
            if content.is_empty:
                return NOTHING
            counted = CountedDFA(_string_char_dfa(raw), min_len, max_len)
            try:
                product = CountedProduct.of(counted, content, self.options.max_states)
            except SchemaTooComplexError as exc:
                if not exc.budget.startswith("MAX_PRODUCT_BLOCK_STATES"):
                    raise
                raise SchemaTooComplexError(f"maxLength {max_len} with a pattern or format needs {exc.reason}",
                                            pointer, exc.budget, "maxLength") from None
        if product is None:
            return None
        if product.is_empty:
            return NOTHING
        node = Embedded(product)
        self._within_budget(nfa_budget_size(node), pointer, f"maxLength {max_len}", "maxLength")
        return node

    def _counted_class(self, constraints: list[Node], raw: bool, min_len: int, max_len: int,
                       pointer: str) -> Node | None:
        """``pattern: "^[a-z]{1,64}$"`` beside ``minLength``/``maxLength`` (969 of the corpora's
        6,696 patterns are one class counted): the pattern's node is a repeat of one character
        (every string of its unit is one string character, which a difference with the
        character automaton checks), so the body is that unit counted from the larger minimum
        to the smaller maximum, a :class:`~enforcer.automaton.CountedDFA` of the unit's rows.
        Exact. None for any other pattern (the caller builds the product: ~4-10 ms at these
        bounds, a table per count)."""
        (pattern,) = constraints
        if not isinstance(pattern, Repeat):
            return None
        with self._eager(pointer, "pattern"):
            unit = compile_node(pattern.node, self.options.max_states)
            if unit.is_empty or unit.accepting[0] or not unit.difference(_string_char_dfa(raw)).is_empty:
                return None
        low = max(pattern.minimum, min_len)
        high = max_len if pattern.maximum is None else min(pattern.maximum, max_len)
        if low > high:
            return NOTHING
        node = Embedded(CountedDFA(unit, low, high))
        self._within_budget(nfa_budget_size(node), pointer, f"maxLength {max_len}", "maxLength")
        return node

    def _intersected(self, constraints: list[Node]) -> DFA:
        """The strings every one of ``constraints`` accepts, built whole within ``max_states``."""
        dfa = compile_node(constraints[0], self.options.max_states)
        for c in constraints[1:]:
            dfa = dfa.intersect(compile_node(c, self.options.max_states), self.options.max_states)
        return dfa

    def _failing_content(self, negated: dict, pointer: str, raw: bool) -> Node:
        """The bodies of the strings whose content fails ``negated`` (its ``pattern`` and
        ``format``): every body (raw: text) minus every writing of the strings it admits, its
        format lifted with all escapes like its pattern, so that no writing of an admitted
        string is left. Exact: a body spells one content, and the content languages are
        regular, so their complement is. Built whole, within ``max_states``."""
        admitted = self._string_body(negated, pointer, raw, every_writing=True)
        limit = self.options.max_states
        with self._eager(pointer, "not"):
            anything = compile_node(repeat(RAW_CHAR_ANY if raw else JSON_STRING_CHAR_ANY, 0, None), limit)
            dfa = anything.difference(compile_node(admitted, limit), limit)
        return Embedded(dfa) if not dfa.is_empty else NOTHING

    def _array(self, schema: dict, pointer: str, depth: int, refs: Refs) -> Node:
        if "contains" in schema:
            return self._contains_array(schema, pointer, depth, refs)
        items = schema.get("items", True)
        prefix = schema.get("prefixItems", [])
        prefix_ptr, items_ptr = f"{pointer}/prefixItems", f"{pointer}/items"
        if isinstance(items, list):  # draft 4-7 tuple form
            prefix, items = items, schema.get("additionalItems", True)
            prefix_ptr, items_ptr = f"{pointer}/items", f"{pointer}/additionalItems"
        min_items = _count(schema, "minItems", pointer) or 0
        max_items = _count(schema, "maxItems", pointer)
        inner = depth + 1
        comma = self._comma(inner)
        prefix_nodes = [self.value(p, f"{prefix_ptr}/{i}", inner, refs) for i, p in enumerate(prefix)]
        rest_item = self.value(items, items_ptr, inner, refs)
        k = len(prefix_nodes)
        if max_items is not None and max_items < k:
            k = max_items
            prefix_nodes = prefix_nodes[:k]
        # states 0..k: i prefix items written; state k+1: end
        edges: list[tuple[int, Node, int]] = []
        for i, p in enumerate(prefix_nodes):
            edges.append((i, seq(comma if i else EPSILON, p), i + 1))
        accepting = {i for i in range(k + 1) if i >= min_items}
        lo = max(min_items - k, 0)
        hi = None if max_items is None else max_items - k
        if rest_item is not NOTHING and (hi is None or hi > 0):
            rest = None if hi is None else self._counted_list(rest_item, comma, lo, hi, k > 0, schema, pointer)
            if rest is None:
                copies = hi if hi is not None else (lo + 1 if k else max(lo, 1))
                if self._knots and copies > 1:  # one copy per count (an unbounded list loops through one)
                    rest_item = self._repeated(rest_item)
                self._check_repeat(seq(comma, rest_item), hi if hi is not None else lo, pointer,
                                   "maxItems" if hi is not None else "minItems")
                rest = repeat(seq(comma, rest_item), lo, hi) if k else separated(rest_item, comma, lo, hi)
            edges.append((k, rest, k + 1))
            accepting.add(k + 1)
            if lo > 0:
                accepting.discard(k)
        open_ws, close_ws = self.ws(inner), self.ws(depth)
        if k == 0:  # no prefix: the items are the one edge, or there are none
            items_node = edges[0][1] if edges else NOTHING
        else:
            items_node = Graph.trimmed_of(k + 2, 0, frozenset(accepting - {0}), tuple(edges))
        non_empty = seq(literal("["), open_ws, items_node, close_ws, literal("]"))
        empty = seq(literal("["), open_ws, literal("]")) if 0 in accepting else NOTHING
        return alt(non_empty, empty)

    def _counted_list(self, item: Node, comma: Node, low: int, high: int, after_prefix: bool, schema: dict,
                      pointer: str) -> Node | None:
        """``low..high`` items (after a prefix: each led by ``comma``; else ``comma``-separated)
        as one counted repeat of the unit ``comma item`` (its rows, not a copy per count: see
        :class:`~enforcer.automaton.CountedDFA`), where the copies would take
        ``COUNTED_ITEMS_MIN_STATES`` NFA states or more and the unit is a small prefix-free
        language of plain NFA states (no placeholder, whose level a table built whole would cut,
        and no embedded automaton: a ``maxLength`` item's counted string keeps its masks shared
        by remaining length only as its own block), and, where ``$ref`` recursion may
        put it in a level built on demand, its block is no larger than such a level may hold
        (``MAX_LEVEL_BLOCK_STATES``). Github_medium o9874's ``maxItems: 1000`` of 24-digit hex
        strings was 980,000 NFA states, built in 6 ms at its first mask. Same language; None
        where it does not apply (the caller copies the item)."""
        unit = seq(comma, item)
        if high * unit.nfa_states < COUNTED_ITEMS_MIN_STATES or unit.nfa_states > COUNTED_UNIT_MAX_STATES \
                or unit.block_states or self._left_to_item_memory(schema):
            return None
        try:
            dfa = compile_node(unit, COUNTED_UNIT_MAX_STATES)
        except SchemaTooComplexError:  # its table is too large (or the eager budget is spent): copies
            return None
        try:
            counted = CountedDFA(dfa, low, high) if after_prefix else CountedDFA(dfa, max(low - 1, 0), high - 1)
        except ValueError:  # not a prefix-free unit: an item that a longer item extends (a number)
            return None
        if counted.num_states > MAX_LEVEL_BLOCK_STATES and self._knot_levels_possible():
            return None  # a recursion's level may hold it, copied at each expansion: too large there
        node: Node = Embedded(counted)
        if not after_prefix:  # the first item, then the rest counted
            node = seq(item, node)
            node = optional(node) if low == 0 else node
        self._within_budget(nfa_budget_size(node), pointer, f"maxItems {high}", "maxItems")
        return node

    def _contains_products(self, item: Node, contains: Node, no_exponent: DFA | None, pointer: str) -> tuple[DFA, DFA]:
        """(item and contains, item but not contains) as DFAs built whole, each within
        ``MAX_CONTAINS_PRODUCT_STATES`` (a ``contains`` nested in another's items multiplies
        the states at every level: 3 levels took 7 s and 700 MB, 5 passed 1 GB before this)."""
        limit = min(self.options.max_states, MAX_CONTAINS_PRODUCT_STATES)
        try:
            dfa = compile_node(item, limit)
            if no_exponent is not None:
                dfa = dfa.intersect(no_exponent, limit)
            contains_dfa = compile_node(contains, limit)
            return dfa.intersect(contains_dfa, limit), dfa.difference(contains_dfa, limit)
        except SchemaTooComplexError:
            raise SchemaTooComplexError(f"the items that match 'contains' need more than {limit:,} automaton states",
                                        pointer, f"MAX_CONTAINS_PRODUCT_STATES={limit}", "contains") from None

    def _contains_by_value(self, item: Any, contains: Any, pointer: str, cptr: str, depth: int,
                           refs: Refs) -> tuple[Node, Node] | None:
        """(matching, not matching) items of one structured type, split by value: ``item``
        with ``contains`` and ``item`` with ``not contains`` (:meth:`_not`), each compiled as a
        schema, lazily like any other. Exact whatever the writing (a written item is one value,
        which meets ``contains`` or fails it), so ``maxContains`` counts these too. None where
        the negation is not enforced exactly; the caller then intersects automata."""
        if self._failures(contains, cptr) is None:
            return None
        try:
            other = self.value({"allOf": [item, {"not": contains}]}, pointer, depth, refs)
        except UnsupportedSchemaError as exc:
            if exc.keyword != "not":
                raise
            return None
        return self.value({"allOf": [item, contains]}, pointer, depth, refs), other

    def _contains_array(self, schema: dict, pointer: str, depth: int, refs: Refs) -> Node:
        """An array with ``contains``: :meth:`_counted_items` with its one bound."""
        return self._counted_items(schema, [self._contains_bound(schema, pointer)], pointer, depth, refs)

    def _many_contains(self, parts: list[Any], pointers: list[str], pointer: str, depth: int,
                       refs: Refs) -> Node | None:
        """The arrays meeting every one of ``parts`` (array schemas of an ``allOf`` that do not
        merge, at ``pointers``) when what keeps them apart is two or more ``contains``: the
        parts merged without them, each ``contains`` counted on its own
        (:meth:`_counted_items`, items split by value); beside an ``anyOf`` of one part, one
        such conjunction per branch. None for any other conflict, for merged parts holding
        other keywords besides items and their counts, past ``MAX_CONTAINS_BOUNDS`` bounds,
        or where a ``contains`` is not negated exactly (the caller intersects automata)."""
        bounds: list[_ContainsBound] = []
        merged: Any = True
        for part, part_pointer in zip(parts, pointers):
            if not isinstance(part, dict):
                return None
            if "contains" in part:
                bounds.append(self._contains_bound(part, part_pointer))
            merged = merge(merged, {k: v for k, v in part.items() if k not in _CONTAINS_KEYWORDS})
            if merged is None:
                return None
        if merged is False:
            return NOTHING
        if not 2 <= len(bounds) <= MAX_CONTAINS_BOUNDS \
                or any(self._failures(b.schema, f"{b.pointer}/contains") is None for b in bounds):
            return None
        beside = set(merged) & KEYWORDS - _COUNTED_ITEMS_KEYWORDS
        if beside == {"anyOf"} and isinstance(merged["anyOf"], list):  # one part's union: one conjunction a branch
            bare = [{k: v for k, v in part.items() if k != "anyOf"} for part in parts]
            return self.value({"anyOf": [{"allOf": [*bare, branch]} for branch in merged["anyOf"]]},
                              pointer, depth, refs)
        if beside:
            return None
        return self._counted_items(merged, bounds, pointer, depth, refs)

    @staticmethod
    def _contains_bound(schema: dict, pointer: str) -> _ContainsBound:
        minimum = _count(schema, "minContains", pointer)
        return _ContainsBound(schema["contains"], 1 if minimum is None else minimum,
                              _count(schema, "maxContains", pointer), pointer)

    def _counted_items(self, schema: dict, bounds: list[_ContainsBound], pointer: str, depth: int,
                       refs: Refs) -> Node:
        """The arrays of ``schema`` (its items and item counts) whose items match each bound's
        ``contains`` between its ``minContains`` and ``maxContains`` times: a graph over (items
        written, matching items counted per bound, each up to its bound), each item written
        as one of its classes (which ``contains`` it matches). One bound: the item automaton
        intersected with the ``contains`` one and their difference for scalars, arrays and
        objects split by value (:meth:`_contains_by_value`); the scalar count is exact when
        ``contains``' automaton holds every writing of its values that the item automaton
        holds; short of that an item may be counted as not matching, which only
        ``maxContains`` could let through, so under ``maxContains`` numbers are written
        without exponent (the one form bounded numbers lack) and arrays and objects must be
        split by value. Several bounds: every class by value, ``item`` with each ``contains``
        or its negation. Items, bounds and counts: within ``MAX_CONTAINS_STATES``."""
        prefix_schemas = schema.get("prefixItems", [])
        rest_schema = schema.get("items", True)
        if isinstance(rest_schema, list) or "additionalItems" in schema:
            raise UnsupportedSchemaError("contains", pointer, "with the draft 2019-09 array form of 'items'")
        min_items = _count(schema, "minItems", pointer) or 0
        max_items = _count(schema, "maxItems", pointer)
        if any(b.maximum is not None and b.maximum < b.minimum for b in bounds):
            return NOTHING
        inner = depth + 1
        classes_of: dict[int, list[tuple[Node, tuple[int, ...]]]] = {}

        def item_classes(sub: Any, sub_pointer: str) -> list[tuple[Node, tuple[int, ...]]]:
            """The writings of one item schema by the bounds they match (1) or fail (0)."""
            if id(sub) not in classes_of:
                if len(bounds) == 1:
                    matching, other = self._one_contains_split(sub, bounds[0], sub_pointer, inner, refs)
                    found = [(matching, (1,)), (other, (0,))]
                else:
                    found = [(self.value({"allOf": [sub, *(b.schema if bit else {"not": b.schema}
                                                           for b, bit in zip(bounds, bits))]},
                                         sub_pointer, inner, refs), bits)
                             for bits in itertools.product((1, 0), repeat=len(bounds))]
                classes_of[id(sub)] = [(node, bits) for node, bits in found if node is not NOTHING]
            return classes_of[id(sub)]

        k = len(prefix_schemas)
        # items written, capped (at least "none" and "some": the comma depends on it)
        positions = max(k, min_items, 1) + 1 if max_items is None else max_items + 1
        # matching items per bound: up to maxContains, else capped at minContains
        counts = [b.maximum + 1 if b.maximum is not None else b.minimum + 1 for b in bounds]
        size = positions * math.prod(counts)
        if size > MAX_CONTAINS_STATES:
            raise SchemaTooComplexError(f"counting {' and '.join(str(c - 1) for c in counts)} matching items over "
                                        f"{positions - 1} positions", pointer,
                                        f"MAX_CONTAINS_STATES={MAX_CONTAINS_STATES}", "contains")
        comma = self._comma(inner)

        def state(n: int, tally: tuple[int, ...]) -> int:
            index = n
            for c, limit in zip(tally, counts):
                index = index * limit + c
            return index

        edges: list[tuple[int, Node, int]] = []
        accepting: set[int] = set()
        for n in range(positions):
            for tally in itertools.product(*(range(c) for c in counts)):
                here = state(n, tally)
                if n >= min_items and all(c >= b.minimum for c, b in zip(tally, bounds)):
                    accepting.add(here)
                if max_items is not None and n >= max_items:
                    continue
                sub, sub_ptr = (prefix_schemas[n], f"{pointer}/prefixItems/{n}") if n < k else (rest_schema,
                                                                                               f"{pointer}/items")
                nxt = min(n + 1, positions - 1)
                sep = comma if n else EPSILON
                for node, bits in item_classes(sub, sub_ptr):
                    after = tuple(c + bit if b.maximum is not None else min(c + bit, limit - 1)
                                  for c, bit, b, limit in zip(tally, bits, bounds, counts))
                    if all(c < limit for c, limit in zip(after, counts)):  # past a maxContains: dead
                        edges.append((here, seq(sep, node), state(nxt, after)))
        start = state(0, (0,) * len(bounds))
        open_ws, close_ws = self.ws(inner), self.ws(depth)
        graph = Graph.trimmed_of(size, start, frozenset(accepting - {start}), tuple(edges))
        non_empty = seq(literal("["), open_ws, graph, close_ws, literal("]"))
        empty = seq(literal("["), open_ws, literal("]")) if start in accepting else NOTHING
        return alt(non_empty, empty)

    def _one_contains_split(self, sub: Any, bound: _ContainsBound, sub_pointer: str, depth: int,
                            refs: Refs) -> tuple[Node, Node]:
        """(matching, not matching) writings of one item schema for one ``contains``, one JSON
        type at a time: a type ``contains`` never admits is all not matching, one it admits
        whole is all matching (neither builds an automaton); arrays and objects are split by
        value where ``contains`` is negated exactly (:meth:`_contains_by_value`); the others
        are automaton products (see :meth:`_counted_items`)."""
        contains, cptr = bound.schema, f"{bound.pointer}/contains"
        contains_types = self._types_of(contains)
        no_exponent = _no_exponent_dfa() if bound.maximum is not None and contains_types & {"integer", "number"} \
            else None
        matching: list[Node] = []
        other: list[Node] = []
        item_types = self._types_of(sub)
        for t in TYPES:
            if t not in item_types or (t == "integer" and "number" in item_types):
                continue
            family = {"integer", "number"} if t in ("integer", "number") else {t}
            sub_t = _restrict({} if sub is True else sub, t)
            contains_t = _restrict({} if contains is True else contains, t)
            if not family & contains_types:
                other.append(self.value(sub_t, sub_pointer, depth, refs))
            elif isinstance(contains_t, dict) and set(contains_t) - ANNOTATIONS <= {"type"} and \
                    t in declared_types(contains_t):
                matching.append(self.value(sub_t, sub_pointer, depth, refs))
            else:
                by_value = self._contains_by_value(sub_t, contains_t, sub_pointer, cptr, depth, refs) \
                    if t in ("array", "object") else None
                if by_value is not None:
                    matching.append(by_value[0])
                    other.append(by_value[1])
                    continue
                if bound.maximum is not None and t in ("array", "object"):
                    raise UnsupportedSchemaError("maxContains", bound.pointer, f"counting matching {t}s needs "
                                                 f"'contains' negated exactly ({_NEGATED})")
                both, rest = self._contains_products(self.value(sub_t, sub_pointer, depth, refs),
                                                     self.value(contains_t, cptr, depth, refs), no_exponent, cptr)
                matching.append(Embedded(both) if not both.is_empty else NOTHING)
                other.append(Embedded(rest) if not rest.is_empty else NOTHING)
        return alt(*matching), alt(*other)

    def _key_literal(self, name: str) -> Node:
        """The key ``name`` quoted, raw or ``\\u``-escaped past ASCII (once per name per compile)."""
        hit = self._key_literals.get(name)
        if hit is None:
            if name.isascii() and name.isprintable() and '"' not in name and "\\" not in name:
                hit = literal(f'"{name}"')  # JSON writes it as is, one way (most keys: ~3 us less)
            else:
                forms = {json.dumps(name, ensure_ascii=False), json.dumps(name)}
                hit = alt(*(literal(f) for f in sorted(forms)))
            self._key_literals[name] = hit
        return hit

    def _object(self, schema: dict, pointer: str, depth: int, refs: Refs,
                witnesses: tuple[_KeyWitness, ...] = ()) -> Node:
        """Declared properties in declared order, then keys the schema names elsewhere
        (``required``, ``dependentRequired``) in that order, then undeclared keys where allowed
        (values under the ``patternProperties`` their name matches, else
        ``additionalProperties``). A graph over (position, anything written, names written
        that dependencies mention, properties counted, the ``witnesses`` written) enforces
        ``required``, ``dependentRequired`` and ``minProperties``/``maxProperties`` exactly.
        ``witnesses``: only objects holding a member of each (a ``not`` of keywords on keys,
        see :meth:`_not`; several only with any value, see :meth:`_many_witnesses`), written
        where a named key is or among the undeclared ones; one member may be the witness of
        several."""
        properties = schema.get("properties", {})
        required = list(dict.fromkeys(schema.get("required", [])))
        dependent: dict[str, list[str]] = {}
        for key in ("dependentRequired", "dependencies"):
            for name, deps in schema.get(key, {}).items():
                dependent.setdefault(name, []).extend(deps)
        patterns = schema.get("patternProperties", {})
        names_schema = schema.get("propertyNames", True)
        additional = schema.get("additionalProperties")
        if additional is None:
            # strict mode closes objects that declare properties; a bare object (or one with
            # only patternProperties) stays open
            additional = not (self.options.strict and "properties" in schema)
        inner = depth + 1
        colon = self._colon()
        comma = self._comma(inner)
        pattern_dfas = [(p, self.key_pattern(p, f"{pointer}/patternProperties/{_escape(p)}")) for p in patterns]
        name_check = None if names_schema is True else self._validator.evolve(schema=names_schema)
        # names the schema mentions outside 'properties' are written like declared ones
        named = list(properties) + [n for n in _named_keys(schema) if n not in properties]
        members: list[tuple[str, Node | None]] = []
        members_size = 0
        bounded_below = not witnesses and schema.get("maxProperties") is None and not schema.get("minProperties")
        relevant = frozenset(n for n, deps in dependent.items() for n in (n, *deps))  # names dependencies mention
        # per named key, its members: (node, the witnesses it is) beside the plain member
        named_options: dict[str, list[tuple[Node, frozenset[int]]]] = {}
        witness_patterns = [[self.key_pattern(p, pointer) for p in w.patterns] for w in witnesses]
        for name in named:
            parts: list[Any] = [properties[name]] if name in properties else []
            sub_pointer = f"{pointer}/properties/{_escape(name)}" if name in properties else pointer
            matching = [patterns[p] for p, dfa in pattern_dfas if dfa.matches(name.encode("utf-8"))]
            parts += matching
            if name not in properties and not matching:
                # a key the schema names is allowed in strict mode too, with any value unless
                # additionalProperties says otherwise
                parts.append(schema.get("additionalProperties", True))
            allowed = name_check is None or name_check.is_valid(name)
            sub = self.value(_all_of_schema(parts), sub_pointer, inner, refs) if allowed else NOTHING
            member = None if sub is NOTHING else seq(self._key_literal(name), colon, sub)
            if member is not None and bounded_below and name not in relevant:
                # every such member is an edge of the object's graph (kept by its trimming: no
                # dependency or count can make it a dead end), so the object's automaton is at
                # least their sum: over budget here is the refusal its own check would make
                # once the rest is built (Kubernetes kb_1161: 5.7 -> 1.2 s; only a required key
                # found impossible further on would have emptied the object instead)
                members_size += nfa_budget_size(member)
                self._within_budget(members_size, pointer, "its automaton", at_least=True)
            if member is None and name in required:
                return NOTHING  # a required key that may not appear: no value satisfies this
            members.append((name, member))
            if not witnesses:  # the common case: one member, marking nothing
                named_options[name] = [(member, _NO_WITNESSES)] if member is not None else []
                continue
            is_witness = [allowed and self._witnessed_by(w, name, w_patterns)
                          for w, w_patterns in zip(witnesses, witness_patterns)]
            marks = frozenset(i for i, w in enumerate(witnesses) if is_witness[i] and w.value is True)
            options = [(member, marks)] if member is not None else []
            for i, w in enumerate(witnesses):
                if is_witness[i] and w.value is not True:  # the member whose value also fails as the witness's
                    found = seq(self._key_literal(name), colon, self.value(_all_of_schema([*parts, w.value]),
                                                                           sub_pointer, inner, refs))
                    if found is not NOTHING:
                        options.append((found, marks | {i}))
            named_options[name] = options
        # undeclared members: any, or (each set of witnesses) keys that are each of them
        extras = [(self._extra_members(named, pattern_dfas, patterns, additional, names_schema, pointer, inner, refs),
                   _NO_WITNESSES)]
        witness_keys = [self._witness_keys(w, named) for w in witnesses]  # once each, for every set holding it
        for chosen in _nonempty_subsets(len(witnesses)):
            keys = witness_keys[chosen[0]]
            for i in chosen[1:]:
                keys = keys.intersect(witness_keys[i], self.options.max_states)
            values = [witnesses[i].value for i in chosen if witnesses[i].value is not True]
            extras.append((self._extra_members(named, pattern_dfas, patterns, additional, names_schema, pointer,
                                               inner, refs, keys, _all_of_schema(values) if values else True),
                           frozenset(chosen)))
        extra = extras[0][0]
        min_props = _count(schema, "minProperties", pointer) or 0
        max_props = _count(schema, "maxProperties", pointer)
        if max_props is not None and extra is NOTHING and max_props >= len(members):
            max_props = None  # never reached: only the named keys may appear
        if extra is not NOTHING and min_props > len(required) + 1:
            # each undeclared key counts one, but an automaton cannot tell two undeclared keys
            # apart: '{"x":0,"x":0}' would count two properties where JSON has one. Counting is
            # exact while one undeclared key on top of the required ones reaches the bound.
            raise UnsupportedSchemaError("minProperties", pointer, f"reaching {min_props} properties may take "
                                         "two or more undeclared keys, and an automaton cannot check that "
                                         "they differ (a repeated key counts once in JSON)")
        cap = max_props if max_props is not None else min_props
        keyword = "maxProperties" if max_props is not None else "minProperties"
        if cap > MAX_COUNTED_PROPERTIES:
            raise UnsupportedSchemaError(keyword, pointer, f"counting {cap} properties exceeds the supported "
                                         f"{MAX_COUNTED_PROPERTIES}")
        if extra is not NOTHING:  # one copy of the undeclared keys' member per count below the cap
            if self._knots:
                extra = self._repeated(extra)
                extras[0] = (extra, _NO_WITNESSES)
            self._check_repeat(extra, cap, pointer, keyword)
        # states: (index, anything written yet, relevant names written, properties counted up to
        # cap, the witnesses written), built breadth first
        every_witness = frozenset(range(len(witnesses)))
        start: tuple[int, bool, frozenset, int, frozenset] = (0, False, frozenset(), 0, frozenset())
        index = {start: 0}
        order = [start]
        edges: list[tuple[int, Node, int]] = []
        accepting: list[int] = []  # the states that end the object after a member
        empty_ok = False  # whether the start state ends it: "{}" is accepted

        def state(key: tuple[int, bool, frozenset, int, frozenset]) -> int:
            if key not in index:
                index[key] = len(order)
                order.append(key)
            return index[key]

        def counted(count: int) -> int | None:
            """The count after one more property (None: over maxProperties)."""
            if max_props is not None:
                return count + 1 if count < max_props else None
            return min(count + 1, cap)

        # a member goes in through one entry state per (target, member): the sources before and
        # after a first member (separator "" or ",") share it, so each member is built once
        entries: dict[tuple[int, int], tuple[int, Node]] = {}

        def enter(src: int, written: bool, member: Node, target: int) -> None:
            key = (target, id(member))
            if key not in entries:
                entries[key] = (len(entries), member)
            edges.append((src, comma if written else EPSILON, -1 - entries[key][0]))

        # per position, the name it adds to the names dependencies mention (None: it adds none);
        # a state's sets are new objects only where they grow (the common object: never)
        mentions = [frozenset((name,)) if name in relevant else None for name, _ in members]
        i = 0
        while i < len(order):
            pos, written, seen, count, witnessed = order[i]
            src = i
            nxt = counted(count)
            if pos >= len(members):
                if witnessed == every_witness and count >= min_props and (not dependent or all(
                        set(dependent[n]) <= seen for n in seen if n in dependent)):
                    if written:
                        accepting.append(src)
                    else:
                        empty_ok = True
                if nxt is not None:
                    for node, marks in extras:
                        if node is not NOTHING and (not marks or not marks <= witnessed):
                            enter(src, written, node, state((len(members) + 1, True, seen, nxt,
                                                             witnessed | marks if marks else witnessed)))
            else:
                name, plain = members[pos]
                if nxt is not None:
                    after = seen | mentions[pos] if mentions[pos] is not None else seen
                    for node, marks in named_options[name]:
                        if node is plain or not marks <= witnessed:
                            enter(src, written, node, state((pos + 1, True, after, nxt,
                                                             witnessed | marks if marks else witnessed)))
                if name not in required:
                    edges.append((src, EPSILON, state((pos + 1, written, seen, count, witnessed))))
            i += 1
        states = len(order)
        graph_edges = tuple((src, sub, states - 1 - dst if dst < 0 else dst) for src, sub, dst in edges)
        graph_edges += tuple((states + k, member, target) for (target, _), (k, member) in entries.items())
        body = Graph.trimmed_of(states + len(entries), 0, frozenset(accepting), graph_edges)
        open_ws, close_ws = self.ws(inner), self.ws(depth)
        return alt(seq(literal("{"), open_ws, body, close_ws, literal("}")),
                   seq(literal("{"), open_ws, literal("}")) if empty_ok else NOTHING)

    @staticmethod
    def _witnessed_by(witness: _KeyWitness, name: str, patterns: list[DFA]) -> bool:
        """Whether the key ``name`` may be the ``witness``'s (``patterns``: its patterns' raw
        key automata)."""
        matched = any(dfa.matches(name.encode("utf-8")) for dfa in patterns)
        return name not in witness.names and not matched if witness.outside else matched

    def _witness_keys(self, witness: _KeyWitness, named: list[str]) -> DFA:
        """The quoted undeclared keys (none of ``named``) that may be the ``witness``'s."""
        limit = self.options.max_states
        if not witness.outside:
            return _extra_key_dfa(tuple(named), limit).intersect(_quoted_key_dfa(witness.patterns[0], limit), limit)
        keys = _extra_key_dfa(tuple(dict.fromkeys([*named, *witness.names])), limit)
        for pattern in witness.patterns:
            keys = keys.difference(_quoted_key_dfa(pattern, limit), limit)
        return keys

    def key_pattern(self, pattern: str, pointer: str) -> DFA:
        """The raw UTF-8 key names a ``patternProperties`` pattern matches (search semantics)."""
        if not isinstance(pattern, str):
            raise InvalidSchemaError(pointer, "a patternProperties key must be a string")
        return compile_node(self._pattern(pattern, pointer, "raw"), self.options.max_states)

    def _pattern(self, pattern: Any, pointer: str, escapes: str) -> Node:
        """:func:`~enforcer.regex.pattern_node`, once per pattern and escape mode per compile
        (a refused pattern is refused again, naming each pointer)."""
        if not isinstance(pattern, str):
            return pattern_node(pattern, pointer, escapes=escapes)  # refused there, named
        hit = self._patterns.get((pattern, escapes))
        if hit is None:
            hit = self._patterns[(pattern, escapes)] = pattern_node(pattern, pointer, escapes=escapes)
        return hit

    def _extra_members(self, named: list[str], pattern_dfas: list[tuple[str, DFA]], patterns: dict,
                       additional: Any, names_schema: Any, pointer: str, inner: int, refs: Refs,
                       within: DFA | None = None, also: Any = True) -> Node:
        """``key: value`` for keys none of ``named``: for each set of patterns a key matches
        (exactly those), the key texts of that set and values under those patterns' schemas;
        keys matching no pattern take ``additionalProperties``. Keys also obey
        ``propertyNames`` and, given, lie ``within`` those quoted key texts; values also meet
        ``also``. NOTHING when no undeclared key may appear."""
        if names_schema is False or (additional is False and not pattern_dfas):
            return NOTHING  # no undeclared key may appear (no key language to build)
        max_states = self.options.max_states
        keys = _extra_key_dfa(tuple(named), max_states)
        if within is not None:
            keys = keys.intersect(within, max_states)
        if names_schema is not True:
            # the key is a value of its own, nested in the object like the member's value
            names = self.value(_restrict(names_schema, "string"), f"{pointer}/propertyNames", inner, refs)
            if names is NOTHING:
                return NOTHING
            keys = keys.intersect(compile_node(names, max_states), max_states)
        if keys.is_empty:
            return NOTHING
        # split the keys by each pattern in turn, keeping only key sets some key is in
        regions: list[tuple[DFA, tuple[str, ...]]] = [(keys, ())]
        for p, _ in pattern_dfas:
            quoted = _quoted_key_dfa(p, max_states)
            split = [(dfa.intersect(quoted, max_states), chosen + (p,)) for dfa, chosen in regions] \
                + [(dfa.difference(quoted, max_states), chosen) for dfa, chosen in regions]
            regions = [(dfa, chosen) for dfa, chosen in split if not dfa.is_empty]
            if len(regions) > MAX_KEY_LANGUAGES:
                raise UnsupportedSchemaError("patternProperties", pointer, f"keys match more than {MAX_KEY_LANGUAGES} "
                                             "sets of its patterns (each set is a key language of its own)")
        options: list[Node] = []
        for key_dfa, chosen in regions:
            parts = [patterns[p] for p in chosen] or [additional]
            parts += [also] if also is not True else []
            where = f"{pointer}/patternProperties" if chosen else f"{pointer}/additionalProperties"
            value = self.value(_all_of_schema(parts), where, inner, refs)
            if value is not NOTHING:
                options.append(seq(Embedded(key_dfa), self._colon(), value))
        return alt(*options)

    # ---- free-form values ---------------------------------------------------------------

    def any_value(self, depth: int, budget: int) -> Node:
        """Any JSON value at nesting ``depth`` with containers nested at most ``budget`` deep
        (:func:`_deferred_free_form`: one placeholder NFA state per use, its levels added as
        walks reach them; one node per depth and budget, shared by every use)."""
        key = (depth, budget)
        hit = self._any_cache.get(key)
        if hit is None:
            widths: list[int] = []
            for k in range(budget + 1):  # until they stop changing (max_indent): the rest repeat the last
                width = self._width(depth + k)
                if widths and width == widths[-1]:
                    break
                widths.append(width)
            hit = self._any_cache[key] = _deferred_free_form(tuple(widths), budget)
        return hit


MAX_DISTRIBUTED_BRANCHES = 16
"""Most conjunctions an ``allOf`` over ``anyOf``/``oneOf`` parts is distributed into."""
_FLATTENED_LEVELS = 8
"""Most levels of ``allOf`` nested in ``allOf`` read as one list of parts."""
SHARED_MIN_STATES = 500
"""NFA states from which a sub-value met again is held as a share (one placeholder state per
use, its level copied where a walk enters it) rather than copied at every use."""
MIN_RECURSION = 2
"""The earliest recursion cut a value over its budget falls back to (one expansion rejected a
valid Kubernetes instance that two refuse: refusing is the honest answer there)."""
WHOLE_FREE_FORM_DEPTH = 4
"""How deep free-form values nest in automata built whole (intersections, differences,
``uniqueItems`` items): each level doubles their states (4: ~4,700 NFA states, ~5,000 DFA
states), so they are cut there; lazily built automata take ``SchemaOptions.free_form_depth``."""
_FREE_STRING = seq(literal('"'), repeat(JSON_STRING_CHAR_ANY, 0, None), literal('"'))
_BOOLEAN = alt(literal("true"), literal("false"))
_STRING_KEYWORDS = ("pattern", "format", "minLength", "maxLength")
"""The keywords that constrain a string's content (:meth:`SchemaCompiler._string_body`)."""
_PLAIN_ENUM_KEYWORDS = ANNOTATIONS | {"type"}
"""What an enum's schema may hold besides it for its node to depend on its type alone."""


def _free_form_level(widths: tuple[int, ...], budget: int, deeper: Callable[[tuple[int, ...], int], Node]) -> Node:
    """Any JSON value with containers nested at most ``budget`` deep, ``widths[k]`` the
    whitespace width ``k`` levels down from its own (the last repeating past the tuple), the
    values inside its containers ``deeper(widths[1:], budget - 1)``. Containers are graphs
    with a single item edge: each level holds one copy of the level below for arrays and one
    for objects (an automaton must remember which bracket each open level closes with)."""
    options = [literal("null"), literal("true"), literal("false"), numbers.NUMBER, _FREE_STRING]
    if budget > 0:
        inner = widths[1:] or widths
        item = deeper(inner, budget - 1)
        member = seq(_FREE_STRING, _COLON, item)
        around = (widths[0], inner[0])
        options += [_container("[", "]", item, around), _container("{", "}", member, around)]
    return alt(*options)


@lru_cache(maxsize=256)
def _free_form(widths: tuple[int, ...], budget: int) -> Node:
    """:func:`_free_form_level` with every level built: its states double per level. Cached:
    depends on the widths and budget only."""
    return _free_form_level(widths, budget, _free_form)


@lru_cache(maxsize=1024)
def _deferred_free_form(widths: tuple[int, ...], budget: int) -> Node:
    """:func:`_free_form_level` as a :class:`~enforcer.automaton.Deferred` node whose levels a
    lazily built automaton adds when a walk reaches them (about 190 NFA states a level), cut at
    ``WHOLE_FREE_FORM_DEPTH`` where an automaton is built whole. Cached (a node per widths and
    budget: a level's template is built once per process)."""
    if budget == 0:
        return _free_form(widths, 0)
    whole = min(budget, WHOLE_FREE_FORM_DEPTH)
    return Deferred(partial(_free_form_level, widths, budget, _deferred_free_form), _free_form(widths[:whole + 1], whole))


def _container(open_: str, close: str, item: Node, widths: tuple[int, int]) -> Node:
    """``open item (, item)* close`` or an empty container, with one copy of ``item``; whitespace
    ``widths[1]`` wide inside, ``widths[0]`` before the closing bracket."""
    # 0 -open-> 1 -item-> 2 -comma-> 3 -item-> 2 ; 1 -close-> 4 ; 2 -close-> 4
    edges = (
        (0, seq(literal(open_), _whitespace(widths[1])), 1),
        (1, literal(close), 4),
        (1, EPSILON, 3),
        (3, item, 2),
        (2, _comma(widths[1]), 3),
        (2, seq(_whitespace(widths[0]), literal(close)), 4),
    )
    return Graph(5, 0, frozenset({4}), edges)


_KEY_ESCAPES = {'"': b'\\"', "\\": b"\\\\", "\b": b"\\b", "\f": b"\\f", "\n": b"\\n", "\r": b"\\r", "\t": b"\\t"}
"""The short escapes JSON has, by character: the writings of these characters in a canonical key."""
_CANONICAL_KEY_CHAR = alt(
    codepoints([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF)]),
    *(literal(escape) for escape in _KEY_ESCAPES.values()),
    seq(literal("\\u00"), byte_chars(b"01"), byte_chars(b"0123456789abcdefABCDEF")),
)


@lru_cache(maxsize=None)
def _any_key_dfa() -> DFA:
    """Every canonically written quoted key (15 states). A constant of the library: built once
    per process at first use (0.2 ms) and kept across ``clear_cache``, like the format automata."""
    return compile_node(seq(literal('"'), repeat(_CANONICAL_KEY_CHAR, 0, None), literal('"')))


def _canonical_keys(max_states: int) -> DFA:
    """:func:`_any_key_dfa`, refused when ``max_states`` cannot hold it."""
    keys = _any_key_dfa()
    if keys.num_states > max_states:
        raise states_exceeded(max_states)
    return keys


@lru_cache(maxsize=256)
def _extra_key_dfa(declared: tuple[str, ...], max_states: int) -> DFA:
    """Quoted keys that are none of the declared names. Extra keys are written in canonical
    form: raw characters except where JSON requires an escape (so that a declared name cannot
    sneak in through ``\\u`` escapes). Cached by the names (256 sets), cleared by nothing: a
    set of names costs ~20 us per name to build (:func:`_keys_except`)."""
    keys = _canonical_keys(max_states)
    return _keys_except(keys, declared, max_states) if declared else keys


def _keys_except(keys: DFA, declared: tuple[str, ...], max_states: int) -> DFA:
    """The minimal automaton of ``keys`` (:func:`_any_key_dfa`) less the canonical writings of
    ``declared``, built directly: the trie of the writings (one state per character prefix and
    per partial writing of its next character) lies over ``keys``, each trie state taking the
    row of the ``keys`` state its bytes reach with the trie's own edges written over it, the
    writing of a whole name leading nowhere; trie states with the same ``keys`` state and the
    same edges are merged bottom-up (the minimal acyclic part), then come the states of
    ``keys`` but its start (never entered again). Cost: a Python step per byte of the names
    and a numpy row per state (0.05 ms for 15 names, against 1.3 ms for determinising the
    names, the product and its minimisation)."""
    children: list[dict[int, int]] = [{}]  # the trie; node 0: before the opening quote
    reached = [0]  # the state of ``keys`` each trie node's bytes reach
    rank = [(0, 0)]  # (characters read, bytes of the next one): children rank higher
    ends: set[int] = set()  # nodes past a whole name
    after: dict[tuple[int, str], int] = {}  # (node, character) -> the node past its writings

    def node(parent: int, byte: int, depth: tuple[int, int]) -> int:
        children.append({})
        reached.append(keys.row(reached[parent])[byte])
        rank.append(depth)
        children[parent][byte] = len(reached) - 1
        return len(reached) - 1

    for name in declared:
        at = 0
        for depth, char in enumerate(("", *name, "")):
            whole = after.get((at, char))
            if whole is None:
                for writing in _canonical_writings(char):
                    step = at
                    for i, byte in enumerate(writing[:-1]):
                        step = children[step].get(byte) or node(step, byte, (depth, i + 1))
                    if whole is None:
                        whole = node(step, writing[-1], (depth + 1, 0))
                    else:
                        children[step][writing[-1]] = whole
                after[at, char] = whole
            at = whole
        ends.add(at)
    merged: dict[tuple, int] = {}
    number = [DEAD] * len(reached)
    for x in sorted(range(len(reached)), key=rank.__getitem__, reverse=True):
        if x not in ends:
            edges = tuple(sorted((byte, number[child]) for byte, child in children[x].items()))
            number[x] = merged.setdefault((reached[x], edges), len(merged))
    trie = len(merged)
    if trie + keys.num_states - 1 > max_states:
        raise states_exceeded(max_states)
    # trie states count down from the root (numbered last, so state 0); keys' state s is trie + s - 1
    shifted = np.where(keys.transitions >= 0, keys.transitions + (trie - 1), DEAD).astype(np.int32)
    table = np.empty((trie + keys.num_states - 1, 256), dtype=np.int32)
    table[trie:] = shifted[1:]
    accepting = np.concatenate([np.zeros(trie, dtype=bool), keys.accepting[1:]])
    done = [False] * trie
    for x, k in enumerate(number):
        if k == DEAD or done[k]:
            continue
        done[k] = True
        state = trie - 1 - k
        table[state] = shifted[reached[x]]
        accepting[state] = keys.accepting[reached[x]]
        for byte, child in children[x].items():
            table[state, byte] = DEAD if number[child] == DEAD else trie - 1 - number[child]
    return DFA(table, accepting)


@lru_cache(maxsize=256)
def _quoted_key_dfa(pattern: str, max_states: int) -> DFA:
    """Canonical quoted keys whose name ``pattern`` matches (search semantics): the pattern over
    JSON-string bodies, kept to canonical writings (raw text, with ``"``, ``\\`` and control
    characters escaped)."""
    body = pattern_node(pattern, "", escapes="all")
    canonical = _canonical_keys(max_states)
    return canonical.intersect(compile_node(seq(literal('"'), body, literal('"')), max_states), max_states)


_BOUND_FAILURES = {"minimum": "exclusiveMaximum", "maximum": "exclusiveMinimum",
                   "exclusiveMinimum": "maximum", "exclusiveMaximum": "minimum"}
"""A number fails ``key: v`` exactly when it meets ``_BOUND_FAILURES[key]: v`` (2020-12 bounds)."""


_COUNT_FAILURES = {"minLength": ("string", "maxLength", -1), "maxLength": ("string", "minLength", 1),
                   "minItems": ("array", "maxItems", -1), "maxItems": ("array", "minItems", 1)}
"""A value fails ``key: n`` exactly when it is of ``type`` and meets ``opposite: n + step``."""
_NEGATED = ("only types, number bounds, lengths, patterns, formats, constants of strings, booleans or null, "
            "object keys and these through properties, items, contains, dependencies, additionalProperties, "
            "patternProperties, allOf, anyOf, oneOf, not and non-recursive $ref are")
"""What :meth:`SchemaCompiler._failures` negates, for refusals."""


def _names_outside(negated: Any) -> tuple[list[str], list[str]] | None:
    """(names, patterns) when ``negated`` is ``propertyNames`` of an ``enum``/``const`` of
    names, a ``pattern``, an ``anyOf`` of those, or ``false`` (none): what ``not`` of it makes
    an object with a key that is none of the names and matches none of the patterns (None
    otherwise)."""
    if not isinstance(negated, dict) or set(negated) & KEYWORDS != {"propertyNames"}:
        return None
    schema = negated["propertyNames"]
    if schema is False:  # no key allowed: any key fails it
        return [], []
    parts = schema.get("anyOf") if isinstance(schema, dict) and set(schema) & KEYWORDS == {"anyOf"} else [schema]
    names: list[str] = []
    patterns: list[str] = []
    for part in parts if isinstance(parts, list) else [None]:
        keys = set(part) & KEYWORDS if isinstance(part, dict) else None
        if keys in ({"enum"}, {"const"}):
            values = part["enum"] if "enum" in part else [part["const"]]
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                return None
            names += values
        elif keys == {"pattern"} and isinstance(part["pattern"], str):
            patterns.append(part["pattern"])
        else:
            return None
    return names, patterns


def _nonempty_subsets(n: int) -> list[tuple[int, ...]]:
    """The non-empty subsets of ``range(n)``, each ascending."""
    return [chosen for size in range(1, n + 1) for chosen in itertools.combinations(range(n), size)]


def _names_inside(negated: Any) -> tuple[list[str], list[str]] | None:
    """(names, patterns) when ``negated`` is ``propertyNames`` of the ``not`` of what
    :func:`_names_outside` reads: what ``not`` of it makes an object with a key that is one of
    the names or matches one of the patterns (None otherwise)."""
    if not isinstance(negated, dict) or set(negated) & KEYWORDS != {"propertyNames"}:
        return None
    named = negated["propertyNames"]
    if not isinstance(named, dict) or set(named) & KEYWORDS != {"not"}:
        return None
    return _names_outside({"propertyNames": named["not"]})


def _names_pattern(names: list[str], patterns: list[str]) -> str:
    """One pattern a key name matches when it is one of ``names`` or matches one of
    ``patterns`` (search semantics; names anchored, their syntax characters escaped)."""
    escaped = ("".join(f"\\u{ord(c):04x}" if ord(c) < 0x20 else "\\" + c if c in _SYNTAX_CHARACTERS else c
                       for c in name) for name in names)
    exact = [f"^(?:{'|'.join(escaped)})$"] if names else []
    return "|".join(f"(?:{p})" for p in [*exact, *patterns]) if exact or patterns else "[^\\s\\S]"


_SYNTAX_CHARACTERS = frozenset("\\^$.|?*+()[]{}/")


def _excluded_constants(negated: Any) -> list[Any] | None:
    """The values of a negated ``const``/``enum`` (None for any other schema)."""
    if not isinstance(negated, dict) or set(negated) & KEYWORDS not in ({"const"}, {"enum"}):
        return None
    values = negated["enum"] if "enum" in negated else [negated["const"]]
    return values if isinstance(values, list) else None


def _any_of_schema(parts: list[Any]) -> Any:
    """One schema for the union of ``parts`` (the single part itself)."""
    return parts[0] if len(parts) == 1 else {"anyOf": parts}


def _absent_key(schema: Any) -> str | None:
    """``k`` when ``schema`` is ``not: {required: [k]}`` (objects without the key ``k``)."""
    if not isinstance(schema, dict) or set(schema) - ANNOTATIONS != {"not"}:
        return None
    negated = schema["not"]
    if not isinstance(negated, dict) or set(negated) - ANNOTATIONS != {"required"}:
        return None
    required = negated["required"]
    return required[0] if isinstance(required, list) and len(required) == 1 and isinstance(required[0], str) else None


def _absent_key_schema(name: str, open_object: bool) -> dict:
    """Objects without the key ``name`` (``open_object``: any other key allowed in strict mode)."""
    schema: dict = {"type": "object", "properties": {name: False}}
    if open_object:
        schema["additionalProperties"] = True
    return schema


def _named_keys(schema: dict) -> list[str]:
    """The keys ``schema`` names outside ``properties``, in the order an object writes them
    after its properties: ``required``, then each ``dependentRequired`` (list-valued
    ``dependencies``) trigger with the keys it requires."""
    dependent: dict[Any, list[Any]] = {}
    for key in ("dependentRequired", "dependencies"):
        value = schema.get(key)
        for name, deps in value.items() if isinstance(value, dict) else ():
            if isinstance(deps, list):
                dependent.setdefault(name, []).extend(deps)
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    return list(dict.fromkeys([*required, *(x for n, d in dependent.items() for x in (n, *d))]))


def _scalar_constants(schema: Any) -> list[Any] | None:
    """The values of a schema that is exactly a ``const``/``enum`` of strings, booleans or null
    (None for any other schema)."""
    if not isinstance(schema, dict) or set(schema) - ANNOTATIONS not in ({"const"}, {"enum"}):
        return None
    values = [schema["const"]] if "const" in schema else schema["enum"]
    if not isinstance(values, list) or not all(isinstance(v, (str, bool)) or v is None for v in values):
        return None
    return values


_NOT_VALIDATED_ALIKE = frozenset({"$ref", "$dynamicRef", "$recursiveRef", "format", "$id", "id"})
"""Keys under which jsonschema's verdict on a constant may differ from what the compiler
enforces: references (resolved against the root's base, not a nested resource's), formats (not
asserted by the validator the compiler holds)."""


def _validated_constants(schema: dict) -> bool:
    """Whether ``schema`` is an ``enum``/``const`` whose members are checked whole against the
    rest of it by jsonschema (:meth:`SchemaCompiler._enum`), whatever its other keywords
    (applicators, ``not``, ``uniqueItems``): the values are exactly the members it admits.
    Not when a key of :data:`_NOT_VALIDATED_ALIKE` appears in it at any depth."""
    if "enum" not in schema and "const" not in schema:
        return False
    if set(schema) - ANNOTATIONS <= {"enum", "const", "type"}:
        return False  # the plain case: _typed sends it to _enum already
    return not holds_key({k: v for k, v in schema.items() if k not in ("enum", "const")}, _NOT_VALIDATED_ALIKE)


def _all_of_schema(parts: list[Any]) -> Any:
    """One schema for the conjunction of ``parts`` (the single part itself)."""
    return parts[0] if len(parts) == 1 else {"allOf": parts}


def _canonical_writings(char: str) -> tuple[bytes, ...]:
    """Every canonical writing of ``char`` in a key (the language of :data:`_CANONICAL_KEY_CHAR`
    for this one character): its short escape where JSON has one, ``\\u00XX`` (either case of
    the last digit) for a control character, else its raw UTF-8; ``""`` (a key's opening or
    closing quote): ``"``."""
    if char == "":
        return (b'"',)
    code = ord(char)
    writings = [_KEY_ESCAPES[char]] if char in _KEY_ESCAPES else []
    if code < 0x20:
        digits = f"{code:04x}"
        writings += dict.fromkeys((f"\\u{digits}".encode(), f"\\u{digits[:3]}{digits[3].upper()}".encode()))
    elif char not in _KEY_ESCAPES:
        writings.append(char.encode())
    return tuple(writings)


@lru_cache(maxsize=4096)
def _encoded_char(char: str, raw: bool) -> Node:
    """Every way to write ``char`` inside a JSON string (or, ``raw``, its UTF-8 bytes)."""
    return literal(char) if raw else json_string_char([(ord(char), ord(char))])


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix (binary search over C-level slice comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _minimal_acyclic(sequences: Iterable[Sequence[Hashable]], form: Callable[[Any], Node]) -> Graph:
    """The distinct ``sequences`` of symbols as their minimal acyclic automaton (shared prefixes
    and shared suffixes written once: ``value-0`` .. ``value-99999`` is a few dozen states), each
    symbol edge the node ``form`` gives it: built by the compiled
    :func:`enforcer._kernels.minimal_acyclic` when built (its symbols as int32 arrays: a
    string's code points, else an id per distinct symbol), else :func:`_acyclic_reference`.
    Linear in the total length: a few C operations per symbol, then one edge tuple per edge
    (the five string enums of jsonschemabench's o20453, 62 names of 1,164 characters: 0.23 ms,
    against 0.67 ms in Python)."""
    distinct = sorted(set(sequences))
    symbol_of: Callable[[Any], Any]  # a row's symbol (an int from the kernel) as ``form`` takes it
    if minimal_acyclic is None:
        num_states, finals, rows = _acyclic_reference(distinct)
        sources, symbols, targets = (list(column) for column in zip(*rows)) if rows else ([], [], [])
        symbol_of = _same
    else:
        if all(isinstance(value, str) for value in distinct):
            coded = [array("i", value.encode("utf-32-le")) for value in distinct]
            symbol_of = chr
        else:
            ids: dict[Hashable, int] = {}
            coded = [array("i", [ids.setdefault(x, len(ids)) for x in value]) for value in distinct]
            symbol_of = list(ids).__getitem__
        num_states, final, table = minimal_acyclic(coded)
        finals = np.flatnonzero(final).tolist()
        sources, symbols, targets = table.T.tolist()
    forms = {symbol: form(symbol_of(symbol)) for symbol in set(symbols)}  # one node per distinct symbol
    bodies = tuple(map(forms.__getitem__, symbols))
    return Graph.of_trim(num_states, 0, frozenset(finals), tuple(sources), bodies, tuple(targets))


def _same(symbol: Any) -> Any:
    return symbol


def _acyclic_reference(distinct: list[Sequence[Hashable]]) -> tuple[int, list[int], list[tuple[int, Any, int]]]:
    """:func:`enforcer._kernels.minimal_acyclic` in Python (without the compiled kernels, and
    the oracle of its differential test): Daciuk et al.'s incremental construction over the
    sorted ``distinct`` sequences (a finished branch is replaced by an equal one already
    registered), numbered breadth first. Returns (states, the final ones, (from, symbol, to)
    edges state by state). One Python step per symbol."""
    children: list[dict[Any, int]] = [{}]
    final = [False]
    register: dict[tuple, int] = {}
    unchecked: list[tuple[int, Any, int]] = []  # the last sequence's path not yet registered

    def register_down_to(length: int) -> None:
        while len(unchecked) > length:
            parent, symbol, child = unchecked.pop()
            key = (final[child], tuple(children[child].items()))  # children registered already
            kept = register.setdefault(key, child)
            if kept != child:
                children[parent][symbol] = kept

    previous: Sequence[Hashable] = ()
    for value in distinct:
        shared = _common_prefix(previous, value)
        register_down_to(shared)
        state = unchecked[-1][2] if unchecked else 0
        for symbol in value[shared:]:
            new = len(children)
            children.append({})
            final.append(False)
            children[state][symbol] = new
            unchecked.append((state, symbol, new))
            state = new
        final[state] = True
        previous = value
    register_down_to(0)
    number = {0: 0}  # the states reachable from the start (replaced branches are left out)
    order = [0]
    for state in order:
        for child in children[state].values():
            if child not in number:
                number[child] = len(order)
                order.append(child)
    rows = [(number[state], symbol, number[child]) for state in order for symbol, child in children[state].items()]
    return len(order), [number[s] for s in order if final[s]], rows


_PLAIN_TYPE_NAMES = frozenset({"string", "boolean", "null", "object", "array"})
"""The JSON types that need no number rules: :func:`_type_of` tells a member's exactly."""


def _plain_types(declared: Any) -> frozenset[str] | None:
    """The types a ``type`` keyword names when all are string, boolean, null, object or array;
    None when it names number or integer (their rules, dialect by dialect, are jsonschema's to
    apply)."""
    named = [declared] if isinstance(declared, str) else declared
    if isinstance(named, list) and named and all(isinstance(t, str) and t in _PLAIN_TYPE_NAMES for t in named):
        return frozenset(named)
    return None


def _string_trie(values: list[str], raw: bool) -> Node:
    """The distinct JSON strings ``values`` (quoted, every escape form; or ``raw`` text) as one
    minimal acyclic automaton of their characters (:func:`_minimal_acyclic`)."""
    body = _minimal_acyclic(values, lambda char: _encoded_char(char, raw))
    return body if raw else seq(literal('"'), body, literal('"'))


def _distinct_literals(branches: list[Any]) -> bool:
    """True when every branch is only a ``const`` or an ``enum`` and no value is in two
    branches (so they are disjoint: linear, where the pairwise test is quadratic)."""
    seen: set[str] = set()
    for branch in branches:
        if not isinstance(branch, dict) or len(set(branch) - ANNOTATIONS) != 1:
            return False
        if "const" in branch:
            values = [branch["const"]]
        elif isinstance(branch.get("enum"), list):
            values = branch["enum"]
        else:
            return False
        keys = {_json_key(v) for v in values}
        if keys & seen:
            return False
        seen |= keys
    return True


def _number_trie(canonical: list[tuple[str, bool]]) -> Node:
    """Every plain JSON text (no exponent) equal to one of the numbers whose canonical texts
    (:func:`~enforcer.numbers.canonical_text`) are ``canonical``: two tries, integers then
    ``.0...`` optionally, fractions then more zeros optionally (and ``-0`` for zero). Linear in
    the digits, however many values."""
    integers: set[str] = set()
    fractions: set[str] = set()
    for text, is_integer in canonical:
        (integers if is_integer else fractions).add(text)
    if "0" in integers:
        integers.add("-0")
    nodes = []
    if integers:
        nodes.append(seq(_string_trie(sorted(integers), raw=True), numbers.ZERO_FRACTION))
    if fractions:
        nodes.append(seq(_string_trie(sorted(fractions), raw=True), repeat(literal("0"), 0, None)))
    return alt(*nodes)


@lru_cache(maxsize=None)
def _plain_integer_dfa() -> DFA:
    return compile_node(numbers.PLAIN_INTEGER)


DRAFTS_IGNORING_REF_SIBLINGS = frozenset({"draft4", "draft6", "draft7"})
_DIALECTS = {"json-schema.org/draft-04/schema": "draft4", "json-schema.org/draft-06/schema": "draft6",
             "json-schema.org/draft-07/schema": "draft7", "json-schema.org/draft/2019-09/schema": "2019-09",
             "json-schema.org/draft/2020-12/schema": "2020-12", "json-schema.org/schema": "2020-12"}


def _registry(documents: dict[str, Any], validator_cls: type) -> dict[str, Any]:
    """``registry=`` for a jsonschema validator that must resolve references into the given
    resource ``documents`` (no keyword at all without them)."""
    if not documents:
        return {}
    from referencing import Registry
    from referencing.jsonschema import specification_with

    default = validator_cls.META_SCHEMA.get("$schema", "https://json-schema.org/draft/2020-12/schema")
    pairs = []
    for uri, document in documents.items():
        dialect = document.get("$schema", default) if isinstance(document, dict) else default
        pairs.append((uri, specification_with(str(dialect), default=specification_with(default)).create_resource(document)))
    return {"registry": Registry().with_resources(pairs).crawl()}


_DRAFT6_KEYWORDS = frozenset({"const", "contains", "propertyNames"})
_DRAFT7_KEYWORDS = frozenset({"if", "then", "else"})
_DRAFT2019_KEYWORDS = frozenset({"dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
                                 "minContains", "maxContains", "$recursiveRef", "$recursiveAnchor"})
_DRAFT2020_KEYWORDS = frozenset({"prefixItems", "$dynamicRef"})
_LATER_KEYWORDS = {
    "draft4": _DRAFT6_KEYWORDS | _DRAFT7_KEYWORDS | _DRAFT2019_KEYWORDS | _DRAFT2020_KEYWORDS,
    "draft6": _DRAFT7_KEYWORDS | _DRAFT2019_KEYWORDS | _DRAFT2020_KEYWORDS,
    "draft7": _DRAFT2019_KEYWORDS | _DRAFT2020_KEYWORDS,
    "2019-09": _DRAFT2020_KEYWORDS,
}
"""Keywords a dialect does not have, by dialect: a validator of it ignores them (a draft-04
schema's ``if`` is an unknown key, so its ``then`` applies to nothing)."""


def _without_keywords(schema: Any, keywords: frozenset[str]) -> Any:
    """``schema`` with ``keywords`` removed from every schema object in it (through the
    keywords whose values are sub-schemas, and schema-valued ``dependencies``); the same object
    when ``keywords`` is empty. Cost: one copy of the schema objects."""
    if not keywords or not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in keywords:
            continue
        if key in SCHEMA_MAPS or key == "dependencies":
            value = {k: _without_keywords(v, keywords) for k, v in value.items()} if isinstance(value, dict) else value
        elif key in SCHEMA_LISTS and isinstance(value, list):
            value = [_without_keywords(v, keywords) for v in value]
        elif key in SCHEMA_VALUES:
            value = _without_keywords(value, keywords)
        out[key] = value
    return out


def _known_metaschema(uri: Any) -> bool:
    """Whether ``uri`` (a ``$schema``) names a meta-schema of :data:`KNOWN_METASCHEMAS`."""
    return str(uri).rstrip("#").split("://", 1)[-1] in KNOWN_METASCHEMAS


def dialect_of(root: Any) -> str:
    """``draft4`` ... ``2020-12`` from the root's ``$schema`` (2020-12 when absent or unknown:
    :meth:`SchemaCompiler.compile` refuses unknown meta-schemas)."""
    uri = root.get("$schema") if isinstance(root, dict) else None
    if not isinstance(uri, str):
        return "2020-12"
    return _DIALECTS.get(uri.rstrip("#").split("://", 1)[-1], "2020-12")


RAW_CHAR_ANY: Node = json_string_char(((0, 0x10FFFF),), escapes="raw")
"""Any one character as raw UTF-8."""
_STRING_CHAR_DFA: dict[bool, DFA] = {}


@lru_cache(maxsize=1)
def _divisible_as_written() -> DFA:
    """:data:`~enforcer.numbers.DIVISIBLE_AS_WRITTEN` as a table (made once per process, like
    the format automata)."""
    return compile_node(numbers.DIVISIBLE_AS_WRITTEN)


def _string_char_dfa(raw: bool = False) -> DFA:
    """The DFA of one encoded (or ``raw``) string character (built once)."""
    if raw not in _STRING_CHAR_DFA:
        _STRING_CHAR_DFA[raw] = compile_node(RAW_CHAR_ANY if raw else JSON_STRING_CHAR_ANY)
    return _STRING_CHAR_DFA[raw]


MAX_DEPENDENT_SCHEMAS = 6
"""Most ``dependentSchemas`` per object (one union branch per subset of their keys: 64)."""


def _schema_dependencies(schema: dict) -> dict[str, Any]:
    """``dependentSchemas`` and the schema values of draft 4-7 ``dependencies``, by key."""
    if "dependentSchemas" not in schema and "dependencies" not in schema:
        return {}  # nearly every schema: no dictionary built from its keywords
    found = dict(schema["dependentSchemas"]) if isinstance(schema.get("dependentSchemas"), dict) else {}
    if isinstance(schema.get("dependencies"), dict):
        found.update((k, v) for k, v in schema["dependencies"].items() if not isinstance(v, list))
    return found


MAX_CONTAINS_STATES = 4096
"""Most (items written, matching items counted) states of one array with ``contains``."""
_NO_WITNESSES: frozenset[int] = frozenset()
MAX_KEY_WITNESSES = 6
"""Most keys one object must hold for ``not``s of keywords on keys (``2**n`` undeclared key
languages, see :meth:`SchemaCompiler._many_witnesses`)."""
_WITNESSED_OBJECT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "dependentRequired",
                                        "patternProperties", "propertyNames", "minProperties", "maxProperties"})
"""What :meth:`SchemaCompiler._object` reads of a schema it is handed with several witnesses."""
MAX_CONTAINS_BOUNDS = 3
"""Most ``contains`` of one array counted together (``2**n`` item classes, see
:meth:`SchemaCompiler._many_contains`)."""
_CONTAINS_KEYWORDS = ("contains", "minContains", "maxContains")
_COUNTED_ITEMS_KEYWORDS = frozenset({"type", "items", "prefixItems", "additionalItems", "minItems", "maxItems"})
"""What :meth:`SchemaCompiler._counted_items` reads besides the bounds (other keywords: not counted)."""
MAX_CONTAINS_PRODUCT_STATES = 20_000
"""Most states of one item automaton intersected with (or minus) ``contains``' (~20 MB of table)."""


@lru_cache(maxsize=None)
def _no_exponent_dfa() -> DFA:
    """JSON texts whose numbers have no exponent: outside strings, no ``e``/``E`` right after a
    digit (states: outside, outside after a digit, in a string, after a backslash in one)."""
    table = np.full((4, 256), -1, dtype=np.int32)
    table[0, :] = table[1, :] = 0
    table[0, ord("0"):ord("9") + 1] = table[1, ord("0"):ord("9") + 1] = 1
    table[1, ord("e")] = table[1, ord("E")] = -1
    table[0, ord('"')] = table[1, ord('"')] = 2
    table[2, :] = 2
    table[2, ord("\\")] = 3
    table[2, ord('"')] = 0
    table[3, :] = 2
    return DFA(table, np.array([True, True, False, False]))


COUNTED_ITEMS_MIN_STATES = 8_192
"""NFA states of a bounded list's copies from which its items are one counted repeat
(:meth:`SchemaCompiler._counted_list`): about 0.6 ms of NFA building, against the unit's
determinisation (tenths of a millisecond for an item of a few hundred states)."""
COUNTED_UNIT_MAX_STATES = 4_096
"""Most NFA states of a counted list's unit (separator and item) and most states of its
automaton, built whole: past either, the item is copied per count."""
MAX_COUNTED_LENGTH = 2048
"""Largest ``maxLength`` beside a ``pattern`` or ``format``: their intersection is a table of
about 20 states per character (41,000 at 2048, each a row over the table's byte classes); past it
:class:`SchemaTooComplexError`. A plain string's bound is a counted repeat built lazily, within
``max_nfa_states`` (20 states per character)."""


def _count(schema: dict, key: str, pointer: str) -> int | None:
    """A non-negative integer keyword (``2.0`` counts as 2, as JSON Schema says)."""
    value = schema.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
        raise InvalidSchemaError(pointer, f"'{key}' must be a non-negative integer, got {value!r}")
    return int(value)


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def declared_types(schema: dict) -> set[str]:
    t = schema.get("type")
    if t is None:
        return set(TYPES)
    types = {t} if isinstance(t, str) else set(t)
    unknown = types - set(TYPES)
    if unknown:
        raise InvalidSchemaError("", f"unknown type {sorted(unknown)}")
    if "number" in types:
        types.add("integer")
    return types


# ---- allOf merging --------------------------------------------------------------------------


def _prefix(schema: dict) -> list | None:
    """The tuple part of an array schema (``prefixItems`` or draft-7 array ``items``)."""
    if isinstance(schema.get("prefixItems"), list):
        return schema["prefixItems"]
    if isinstance(schema.get("items"), list):
        return schema["items"]
    return None


_TYPE_KEYWORDS = {
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "string": {"minLength", "maxLength", "pattern", "format"},
    "array": {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains", "minContains",
              "maxContains", "uniqueItems", "unevaluatedItems"},
    "object": {"properties", "required", "additionalProperties", "dependentRequired", "dependencies",
               "patternProperties", "propertyNames", "minProperties", "maxProperties", "unevaluatedProperties",
               "dependentSchemas"},
}


_NON_NUMBER_KEYWORDS = frozenset().union(*(kws for t, kws in _TYPE_KEYWORDS.items() if t != "number"))


def _restrict(schema: Any, json_type: str) -> Any:
    """``schema`` for values of one type: the type fixed, other types' keywords dropped (they
    do not apply to this type, so the meaning is unchanged)."""
    if not isinstance(schema, dict):
        return schema
    own = "number" if json_type == "integer" else json_type
    drop = set().union(*(kws for t, kws in _TYPE_KEYWORDS.items() if t != own))
    typed = merge({k: v for k, v in schema.items() if k not in drop}, {"type": json_type})
    return typed if typed is not None else schema


def _has_prefix(schema: dict) -> bool:
    return _prefix(schema) is not None


def _rest_schema(schema: dict) -> Any:
    """The schema of array items past the prefix."""
    if isinstance(schema.get("items"), list):
        return schema.get("additionalItems", True)
    return schema.get("items", True)


def _item_schema(schema: dict, i: int) -> Any:
    prefix = _prefix(schema) or []
    return prefix[i] if i < len(prefix) else _rest_schema(schema)


def _active_conditional(schema: dict) -> dict:
    """``schema`` without ``if``/``then``/``else`` where they constrain nothing (an ``if``
    with neither ``then`` nor ``else``; ``then``/``else`` without ``if``)."""
    if "if" in schema:
        idle = () if "then" in schema or "else" in schema else ("if",)
    else:
        idle = ("then", "else")
    return {k: v for k, v in schema.items() if k not in idle} if any(k in schema for k in idle) else schema


def _conjoined(a: Any, b: Any) -> dict:
    """``allOf: [a, b]``, extending ``a`` when it is a bare ``allOf`` (merges that meet one key
    many times build one flat conjunction, not one nested level per merge)."""
    if isinstance(a, dict) and set(a) == {"allOf"} and isinstance(a["allOf"], list):
        return {"allOf": [*a["allOf"], b]}
    return {"allOf": [a, b]}


def _both(a: Any, b: Any) -> Any:
    """``allOf: [a, b]``, or the one of them that says it all (equal, or the other true)."""
    if b is True or b == {} or a == b:
        return a
    if a is True or a == {}:
        return b
    return {"allOf": [a, b]}


def merge(a: Any, b: Any) -> Any:
    """One schema equivalent to ``allOf: [a, b]``, or ``None`` when that needs an automaton
    intersection. Exact: every keyword is combined by its meaning, never approximated."""
    if a is True or a == {}:
        return b
    if b is True or b == {}:
        return a
    if a is False or b is False:
        return False
    if not isinstance(a, dict) or not isinstance(b, dict):
        return None
    a = {k: v for k, v in a.items() if k in KEYWORDS or k in ("$defs", "definitions")}
    b = {k: v for k, v in b.items() if k in KEYWORDS}  # keys a validator ignores never conflict
    for x in (a, b):
        if "contains" not in x:  # minContains/maxContains without contains are no-ops: not carried over
            x.pop("minContains", None)
            x.pop("maxContains", None)
    if any(k in x for x in (a, b) for k in _REFERENCES):
        return None
    if any(k in x for x in (a, b) for k in ("unevaluatedProperties", "unevaluatedItems")):
        return None  # each side sees only what it (not the other) evaluates: compiled apart
    a, b = _active_conditional(a), _active_conditional(b)
    if all(any(k in x for k in ("if", "then", "else")) for x in (a, b)):
        return None  # one side's then/else answers its own if only
    array_keys = ("prefixItems", "items", "additionalItems")
    if _has_prefix(a) or _has_prefix(b):
        # index i is governed by a's prefix[i] or else a's items, and likewise for b: merge per
        # index, so the merged prefix is as long as the longer one
        length = max(len(_prefix(a) or []), len(_prefix(b) or []))
        prefix = [{"allOf": [_item_schema(a, i), _item_schema(b, i)]} for i in range(length)]
        rest = {"allOf": [_rest_schema(a), _rest_schema(b)]}
        a = {**{k: v for k, v in a.items() if k not in array_keys}, "prefixItems": prefix, "items": rest}
        b = {k: v for k, v in b.items() if k not in array_keys}
    for x, y in ((a, b), (b, a)):
        if x.get("patternProperties") and "additionalProperties" in y and (y.get("properties")
                                                                         or y.get("patternProperties")):
            return None  # y's additionalProperties would have to skip x's pattern keys
    # an additionalProperties beside no properties holds for every key: the other side's
    # pattern keys meet it too
    if a.get("patternProperties") and "additionalProperties" in b:
        a = {**a, "patternProperties": {p: _both(sub, b["additionalProperties"])
                                        for p, sub in a["patternProperties"].items()}}
    if b.get("patternProperties") and "additionalProperties" in a:
        b = {**b, "patternProperties": {p: _both(sub, a["additionalProperties"])
                                        for p, sub in b["patternProperties"].items()}}
    out = dict(a)
    for key, bv in b.items():
        if key not in out:
            out[key] = bv
            continue
        av = out[key]
        if av == bv and key not in ("properties", "const", "enum"):  # 1 == True in Python, not in JSON
            continue
        if key == "type":
            ta = {av} if isinstance(av, str) else set(av)
            tb = {bv} if isinstance(bv, str) else set(bv)
            for s in (ta, tb):
                if "number" in s:
                    s.add("integer")
            both = ta & tb
            out[key] = [t for t in TYPES if t in both and not (t == "integer" and "number" in both)]
        elif key == "properties":
            props = dict(av)
            for name, sub in bv.items():
                props[name] = sub if name not in props else _conjoined(props[name], sub)
            out[key] = props
        elif key == "required":
            out[key] = list(dict.fromkeys([*av, *bv]))
        elif key == "patternProperties":
            patterns = dict(av)
            for pattern, sub in bv.items():
                patterns[pattern] = sub if pattern not in patterns else {"allOf": [patterns[pattern], sub]}
            out[key] = patterns
        elif key == "propertyNames":
            out[key] = {"allOf": [av, bv]}
        elif key in ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"):
            out[key] = max(av, bv)
        elif key in ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"):
            out[key] = min(av, bv)
        elif key in ("items", "additionalProperties", "additionalItems") and not isinstance(av, list) \
                and not isinstance(bv, list):
            out[key] = {"allOf": [av, bv]}
        elif key in ("prefixItems", "items") and isinstance(av, list) and isinstance(bv, list) and len(av) == len(bv):
            out[key] = [{"allOf": [x, y]} for x, y in zip(av, bv)]
        elif key == "enum":  # a const beside it stays: the compiler admits the members meeting both
            bvals = {_json_key(v) for v in bv}
            out[key] = [v for v in av if _json_key(v) in bvals]
        elif key == "const":
            if _json_key(av) != _json_key(bv):
                return False
        elif key in ("dependentRequired",):
            merged = {k: list(v) for k, v in av.items()}
            for k, v in bv.items():
                merged[k] = list(dict.fromkeys([*merged.get(k, []), *v]))
            out[key] = merged
        elif key == "nullable":
            out[key] = bool(av) and bool(bv)
        elif key == "not" and _excluded_constants(av) is not None and _excluded_constants(bv) is not None:
            out[key] = {"enum": [*_excluded_constants(av), *_excluded_constants(bv)]}  # neither: not either
        else:
            return None
    # additionalProperties of one side governs the other side's extra property names
    for x, y in ((a, b), (b, a)):
        if "additionalProperties" in x:
            xp = x.get("properties", {})
            for name in y.get("properties", {}):
                if name not in xp:
                    props = out["properties"] = dict(out["properties"])  # may still be a's or b's own
                    props[name] = {"allOf": [props[name], x["additionalProperties"]]}
    return out
