"""Conformance runner: compiles every corpus schema and teacher-forces its instances.

Corpus layout (read-only, passed explicitly): ``CORPUS/maskbench/*.json`` (one schema with
``tests``: ``[{"data", "valid"}]``) and ``CORPUS/json-schema-test-suite/draft2020-12/*.json``
(top-level files only; each a list of cases ``{"description", "schema", "tests"}``). The
Test-Suite's remote documents (``remotes/``, served at ``http://localhost:1234/`` by its
harness) are handed to the compiler as ``resources`` when present (``--remotes``, by default
``CORPUS/json-schema-test-suite/remotes``); nothing is fetched.

For each compiled schema, every instance is put in the schema's declared key order
(:class:`SchemaWalker`), serialised twice (``json.dumps`` default separators and compact,
``ensure_ascii=False``), tokenized with the tokenizer under test and fed token by token: each
token must be set in the ``fill_bitmask`` row AND ``accept_token`` must return True, and
``is_accepting()`` must hold at the end. Each invalid instance must be refused somewhere (or not
be accepting at the end); so must the optional *mutants* (small edits of valid instances that
jsonschema calls invalid). A token whose mask bit disagrees with ``accept_token`` is a failure
whatever the instance. A valid instance that is refused is excluded, not failed, when the
compile options rule it out on purpose: undeclared keys under ``strict=True`` ("strictX") or a
bad ``format`` while formats are asserted ("formatX", the Test-Suite's annotation-only cases).
An instance refused once the compiled automaton has passed its decode budget
(``max_automaton_bytes``) is counted apart ("DEC_BUD"), neither rejected nor accepted: the
refusal is no verdict on it (every later instance of that schema stops there too).

Run: ``python -m benchmarks.conformance --corpus ../shared/corpus [--tokenizer kimi|deepseek|both]
[--limit N] [--source maskbench|testsuite|both] [--strict|--spec] [--mutants N] [--jobs N]
[--remotes DIR] [--report PATH]``; prints a table per tokenizer and writes every failure (schema file,
instance, text, failing token and decoded prefix) to the JSON report.

Cost: one compile per schema (bounded by ``compile_budget_s``) plus one mask fill and one
``accept_token`` per instance token. Objects here live for one run.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import multiprocessing
import re
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple, Sequence

import numpy as np
from jsonschema.validators import Draft3Validator, Draft4Validator, Draft6Validator, Draft7Validator, validator_for
from referencing import Registry
from referencing.jsonschema import DRAFT202012, specification_with

from enforcer.errors import InvalidSchemaError, SchemaTooComplexError, UnsupportedSchemaError
from enforcer import clear_cache
from enforcer.matcher import compile_json_schema
from enforcer.vocabulary import Vocabulary

SLOW_COMPILE_S = 1.0
MASKBENCH_SUBSETS = ("BFCL", "MCPspec", "JME", "Handwritten")
JSONSCHEMABENCH_SUBSETS = ("Github_trivial", "Github_medium", "Github_hard", "Kubernetes", "Snowplow",
                           "WashingtonPost", "JsonSchemaStore", "Synthesized")
TEST_SUITE_DIR = Path("json-schema-test-suite") / "draft2020-12"
TEST_SUITE_REMOTES = Path("json-schema-test-suite") / "remotes"
REMOTES_BASE = "http://localhost:1234/"
"""Where the Test-Suite's harness serves ``remotes/`` (its cases' ``$ref``s name it)."""

Encoder = Callable[[str], list[int]]


# --------------------------------------------------------------------------------------------
# Corpus


@dataclass
class Instance:
    """One test instance of a schema."""

    description: str
    data: Any
    valid: bool
    mutant: bool = False  # made by ``mutants`` from a valid instance; invalid by jsonschema


@dataclass
class Case:
    """One schema with its instances; ``subset`` is BFCL/MCPspec/JME/Handwritten or
    ``TestSuite/<file stem>``; ``name`` identifies it in reports."""

    subset: str
    name: str
    schema: Any
    instances: list[Instance]
    resources: dict[str, Any] = field(default_factory=dict)
    """Documents its ``$ref``s may name outside the schema, by URI (the Test-Suite's remotes)."""


def maskbench_subset(file_name: str) -> str:
    """The MaskBench subset a file name belongs to (``BFCL_java_0.json`` -> ``BFCL``)."""
    for subset in MASKBENCH_SUBSETS:
        if file_name.startswith(subset):
            return subset
    raise ValueError(f"MaskBench file {file_name!r} belongs to no known subset {MASKBENCH_SUBSETS}")


def load_maskbench(corpus: Path) -> list[Case]:
    """Every schema file of ``corpus/maskbench`` (sorted by name)."""
    folder = Path(corpus) / "maskbench"
    if not folder.is_dir():
        raise FileNotFoundError(f"no MaskBench folder at {folder}")
    cases = []
    for path in sorted(folder.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        instances = [Instance(t.get("description", ""), t["data"], bool(t["valid"])) for t in doc["tests"]]
        cases.append(Case(maskbench_subset(path.name), path.name, doc["schema"], instances))
    return cases


def load_jsonschemabench(corpus: Path) -> list[Case]:
    """Every schema file of ``corpus/jsonschemabench`` (``<subset>---<id>.json``, MaskBench's file
    format), sorted by name."""
    folder = Path(corpus) / "jsonschemabench"
    if not folder.is_dir():
        raise FileNotFoundError(f"no jsonschemabench folder at {folder}")
    cases = []
    for path in sorted(folder.glob("*.json")):
        subset = path.name.split("---", 1)[0]
        if subset not in JSONSCHEMABENCH_SUBSETS:
            raise ValueError(f"jsonschemabench file {path.name!r} belongs to no known subset")
        doc = json.loads(path.read_text(encoding="utf-8"))
        instances = [Instance(t.get("description", ""), t["data"], bool(t["valid"])) for t in doc["tests"]]
        cases.append(Case(subset, path.name, doc["schema"], instances))
    return cases


def load_remotes(folder: Path) -> dict[str, Any]:
    """The Test-Suite's remote documents under ``folder`` (every ``*.json``, recursively) by the
    URI its harness serves them at; empty when the folder does not exist."""
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    return {REMOTES_BASE + path.relative_to(folder).as_posix(): json.loads(path.read_text(encoding="utf-8"))
            for path in sorted(folder.rglob("*.json"))}


def load_test_suite(corpus: Path, remotes: Path | None = None) -> list[Case]:
    """Every case of the top-level draft 2020-12 files of the JSON-Schema-Test-Suite, each with
    the remote documents (``remotes``, by default ``CORPUS/json-schema-test-suite/remotes``)."""
    folder = Path(corpus) / TEST_SUITE_DIR
    if not folder.is_dir():
        raise FileNotFoundError(f"no JSON-Schema-Test-Suite folder at {folder}")
    resources = load_remotes(Path(corpus) / TEST_SUITE_REMOTES if remotes is None else remotes)
    cases = []
    for path in sorted(folder.glob("*.json")):
        for number, doc in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            instances = [Instance(t["description"], t["data"], bool(t["valid"])) for t in doc["tests"]]
            name = f"{path.name}#{number} {doc['description']}"
            cases.append(Case(f"TestSuite/{path.stem}", name, doc["schema"], instances, resources))
    return cases


def registry_of(resources: dict[str, Any]) -> Registry:
    """A ``referencing`` registry holding ``resources`` (for jsonschema, as oracle and walker)."""
    return Registry().with_resources(
        (uri, specification_with(doc.get("$schema", "") if isinstance(doc, dict) else "", default=DRAFT202012)
         .create_resource(doc)) for uri, doc in resources.items()).crawl()


def load_corpus(corpus: Path, sources: Iterable[str] = ("maskbench", "testsuite"),
                remotes: Path | None = None) -> list[Case]:
    """MaskBench, jsonschemabench and/or Test-Suite cases, in a stable order."""
    loaders: dict[str, Callable[[Path], list[Case]]] = {
        "maskbench": load_maskbench, "jsonschemabench": load_jsonschemabench,
        "testsuite": lambda folder: load_test_suite(folder, remotes)}
    cases: list[Case] = []
    for source in sources:
        if source not in loaders:
            raise ValueError(f"unknown corpus source {source!r}; expected one of {sorted(loaders)}")
        cases.extend(loaders[source](Path(corpus)))
    return cases


def spread_sample(cases: Sequence[Case], limit: int | None) -> list[Case]:
    """At most ``limit`` cases taken at an even stride, so every subset stays represented."""
    if limit is None or limit >= len(cases):
        return list(cases)
    step = len(cases) / limit
    return [cases[int(i * step)] for i in range(limit)]


# --------------------------------------------------------------------------------------------
# Instances in declared key order


class SchemaWalker:
    """Follows ``$ref``/``allOf``/matching ``anyOf``-``oneOf`` branches/``if``-``then``-``else``
    of one root schema to put an instance's object keys in declared order and to tell whether
    it holds keys that no ``properties`` declare (extra keys a strict compiler refuses).

    Cost: one jsonschema validation per ``anyOf``/``oneOf``/``if`` met; lives for one case.
    """

    MAX_REF_DEPTH = 32
    MAX_LOOKAHEAD_DEPTH = 4

    def __init__(self, root: Any, registry: Registry | None = None) -> None:
        dialect = root.get("$schema", "") if isinstance(root, dict) else ""
        spec = specification_with(dialect, default=DRAFT202012)
        resource = spec.create_resource(root)
        self._spec = spec
        self._root_resolver = (registry or Registry()).resolver_with_root(resource)
        self._validator_cls = validator_for(root, default=validator_for({}))
        # drafts 3 to 7: the keywords beside a $ref are ignored
        self._ref_alone = self._validator_cls in (Draft3Validator, Draft4Validator, Draft6Validator, Draft7Validator)
        self._root = root

    def _is_valid(self, schema: Any, resolver: Any, data: Any) -> bool:
        try:
            return self._validator_cls(schema, _resolver=resolver).is_valid(data)
        except Exception:  # a schema jsonschema cannot evaluate: treat the branch as unknown
            return False

    def _expand(self, schema: Any, resolver: Any, data: Any, depth: int,
                deferred: list[tuple[dict, Any]] | None = None) -> list[tuple[dict, Any]]:
        """The schema objects that apply to ``data`` at this point, in declaration order; those
        of ``dependentSchemas``/``dependencies`` last (``deferred``), after every other, as the
        compiler writes their keys."""
        if not isinstance(schema, dict) or depth > self.MAX_REF_DEPTH:
            return []
        top = deferred is None
        deferred = [] if deferred is None else deferred
        if self._ref_alone and isinstance(schema.get("$ref"), str):  # draft 4-7: its siblings are ignored
            schema = {"$ref": schema["$ref"]}
        if "$id" in schema and depth > 0:
            resolver = resolver.in_subresource(self._spec.create_resource(schema))
        found = [(schema, resolver)]
        for ref_key in ("$ref", "$dynamicRef"):
            if isinstance(schema.get(ref_key), str):
                try:
                    resolved = resolver.lookup(schema[ref_key])
                except Exception:
                    continue
                found += self._expand(resolved.contents, resolved.resolver, data, depth + 1, deferred)
        for sub in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
            found += self._expand(sub, resolver, data, depth + 1, deferred)
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list):
                valid = [b for b in branches if self._is_valid(b, resolver, data)]
                # a strict compiler accepts the value if one branch declares all its keys: the
                # first valid branch that does, else the first valid one
                # (looked ahead only a few levels deep: each look is a walk of the value)
                declaring = (b for b in valid if not self._walk(data, [(b, resolver)], depth + 1)[1]) \
                    if len(valid) > 1 and depth < self.MAX_LOOKAHEAD_DEPTH else iter(())
                chosen = next(declaring, valid[0] if valid else None)
                if chosen is not None:
                    found += self._expand(chosen, resolver, data, depth + 1, deferred)
        if "if" in schema and "if" in self._validator_cls.VALIDATORS:  # draft 7 on
            chosen = "then" if self._is_valid(schema["if"], resolver, data) else "else"
            if chosen in schema:  # the condition's keys are declared after the branch's, met or not, as
                # the compiler writes them (with then; or with else, as one way the condition fails)
                found += self._expand(schema[chosen], resolver, data, depth + 1, deferred)
                found += self._expand(schema["if"], resolver, data, depth + 1, deferred)
        for keyword in ("dependentSchemas", "dependencies"):  # draft 4-7: schema-valued dependencies
            dependent = schema.get(keyword)
            if isinstance(dependent, dict) and isinstance(data, dict):
                for key, sub in dependent.items():
                    if key in data and isinstance(sub, dict):
                        nested: list[tuple[dict, Any]] = []  # its own dependents after it
                        deferred += self._expand(sub, resolver, data, depth + 1, nested) + nested
        return found + deferred if top else found

    @staticmethod
    def _pattern_matches(pattern: str, key: str) -> bool:
        try:
            return re.search(pattern, key) is not None
        except re.error:
            return False

    def _children_for_key(self, applicable: list[tuple[dict, Any]], data: dict, key: str) -> list[tuple[Any, Any]]:
        children = []
        for schema, resolver in applicable:
            children += [({"const": c[key]}, resolver) for c in self._constants(schema, data)]
            props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
            patterns = schema.get("patternProperties") if isinstance(schema.get("patternProperties"), dict) else {}
            matched = key in props
            if matched:
                children.append((props[key], resolver))
            for pattern, sub in patterns.items():
                if self._pattern_matches(pattern, key):
                    matched = True
                    children.append((sub, resolver))
            if not matched and isinstance(schema.get("additionalProperties"), dict):
                children.append((schema["additionalProperties"], resolver))
        return children

    def _children_for_item(self, applicable: list[tuple[dict, Any]], data: list, index: int) -> list[tuple[Any, Any]]:
        children = []
        for schema, resolver in applicable:
            children += [({"const": c[index]}, resolver) for c in self._constants(schema, data)]
            prefix = schema.get("prefixItems")
            items = schema.get("items")
            if isinstance(prefix, list) and index < len(prefix):
                children.append((prefix[index], resolver))
            elif isinstance(items, list):  # draft 7 tuple form
                if index < len(items):
                    children.append((items[index], resolver))
                elif isinstance(schema.get("additionalItems"), dict):
                    children.append((schema["additionalItems"], resolver))
            elif isinstance(items, dict):
                children.append((items, resolver))
        return children

    def _allows_key(self, applicable: list[tuple[dict, Any]], key: str) -> bool:
        """Whether a strict compiler may accept ``key``: declared somewhere, matched by a
        pattern, or extra keys allowed explicitly; objects with no ``properties`` at all
        are free-form."""
        if not any(isinstance(s.get("properties"), dict) for s, _ in applicable):
            return True
        for schema, _ in applicable:
            if key in (schema.get("properties") or {}) or key in _named_keys(schema):
                return True
            for pattern in schema.get("patternProperties") or {}:
                if self._pattern_matches(pattern, key):
                    return True
            for extra in ("additionalProperties", "unevaluatedProperties"):
                if extra in schema and schema[extra] is not False:
                    return True
        return False

    @staticmethod
    def _constants(schema: dict, data: Any) -> list[Any]:
        """The ``const`` / ``enum`` members of ``schema`` equal to ``data``: a constant object
        or array is written as the schema gives it, so its key order is declared too."""
        constants = ([schema["const"]] if "const" in schema else []) + (
            schema["enum"] if isinstance(schema.get("enum"), list) else []
        )
        return [c for c in constants if isinstance(c, (dict, list)) and type(c) is type(data) and c == data]

    def _declared_orders(self, applicable: list[tuple[dict, Any]], data: dict) -> list[Iterable[str]]:
        """Key orders the ``applicable`` schemas declare for the object ``data``: every
        ``properties`` first, then every key named elsewhere (``required``, ...), as the
        compiler writes the object they merge into; then any constant object equal to ``data``."""
        orders: list[Iterable[str]] = [s["properties"] for s, _ in applicable if isinstance(s.get("properties"), dict)]
        orders += [_named_keys(s) for s, _ in applicable]
        return orders + [c for s, _ in applicable for c in self._constants(s, data)]

    def walk(self, data: Any) -> tuple[Any, bool]:
        """``(data with keys in declared order, whether it holds undeclared keys)``."""
        return self._walk(data, [(self._root, self._root_resolver)])

    def _walk(self, data: Any, schemas: list[tuple[Any, Any]], depth: int = 0) -> tuple[Any, bool]:
        """:meth:`walk` from ``schemas``; ``depth``: the applicator nesting it was entered at
        (bounds the look-ahead of ``anyOf``/``oneOf``)."""
        applicable = [found for s, r in schemas for found in self._expand(s, r, data, depth)]
        if isinstance(data, dict):
            order: list[str] = []
            for declared in self._declared_orders(applicable, data):
                order += [k for k in declared if k in data and k not in order]
            order += [k for k in data if k not in order]
            undeclared = any(not self._allows_key(applicable, k) for k in data)
            out = {}
            for key in order:
                out[key], child_undeclared = self._walk(data[key], self._children_for_key(applicable, data, key))
                undeclared = undeclared or child_undeclared
            return out, undeclared
        if isinstance(data, list):
            items, undeclared = [], False
            for index, item in enumerate(data):
                value, child_undeclared = self._walk(item, self._children_for_item(applicable, data, index))
                items.append(value)
                undeclared = undeclared or child_undeclared
            return items, undeclared
        return data, False


def _named_keys(schema: dict) -> list[str]:
    """Keys a schema names outside ``properties`` (``required``, ``dependentRequired``,
    array-form ``dependencies``), in that order: the compiler writes them after the declared
    properties."""
    names: list[str] = list(schema.get("required") or []) if isinstance(schema.get("required"), list) else []
    for key in ("dependentRequired", "dependencies"):
        value = schema.get(key)
        if isinstance(value, dict):
            for trigger, deps in value.items():
                if isinstance(deps, list):
                    names += [trigger, *deps]
    return [n for n in dict.fromkeys(names) if isinstance(n, str)]


def serialisations(data: Any) -> list[tuple[str, str]]:
    """``[(style, text)]``: json.dumps default and compact, both ``ensure_ascii=False``; one
    entry when they coincide. Raises ValueError for data JSON cannot hold (NaN, lone
    surrogates)."""
    spaced = json.dumps(data, ensure_ascii=False, allow_nan=False)
    compact = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for text in (spaced, compact):
        text.encode("utf-8")  # lone surrogates raise UnicodeEncodeError (a ValueError)
    return [("spaced", spaced)] if spaced == compact else [("spaced", spaced), ("compact", compact)]


def _nodes(data: Any, path: tuple = ()) -> Iterable[tuple[tuple, Any]]:
    """Every (path, value) of ``data``, depth first, the root first."""
    yield path, data
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _nodes(value, path + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _nodes(value, path + (index,))


def _edited(data: Any, path: tuple, edit: Callable[[Any], Any]) -> Any:
    """A copy of ``data`` with the node at ``path`` replaced by ``edit(node)``."""
    if not path:
        return edit(data)
    head, rest = path[0], path[1:]
    if isinstance(data, dict):
        return {k: (_edited(v, rest, edit) if k == head else v) for k, v in data.items()}
    return [(_edited(v, rest, edit) if i == head else v) for i, v in enumerate(data)]


_TYPE_SWAP: dict[type, Any] = {str: 12345, int: "12345", float: "1.5", bool: "true", type(None): False,
                               list: {"mutant": 1}, dict: ["mutant"]}
MUTANT_KEY = "zz_mutant_key"


def mutants(data: Any, limit: int) -> list[tuple[str, Any]]:
    """Up to ``limit`` small edits of ``data`` as ``(description, value)``, spread over its
    nodes: drop an object key, give a node a value of another type, add an undeclared key to
    an object. Deterministic; the caller keeps those its validator calls invalid."""
    edits: list[tuple[str, Any]] = []
    for path, node in _nodes(data):
        where = "/" + "/".join(str(p) for p in path)
        if isinstance(node, dict):
            for key in node:
                edits.append((f"drop {where}/{key}", _edited(data, path, lambda n, k=key: {a: b for a, b in n.items() if a != k})))
            edits.append((f"add key at {where}", _edited(data, path, lambda n: {**n, MUTANT_KEY: 1})))
        edits.append((f"retype {where}", _edited(data, path, lambda n: _TYPE_SWAP[type(n)])))
    if len(edits) <= limit:
        return edits
    step = len(edits) / limit
    return [edits[int(i * step)] for i in range(limit)]


# --------------------------------------------------------------------------------------------
# Teacher forcing


@dataclass
class Feed:
    """Outcome of feeding one token sequence: ``accepted`` or where and why it stopped."""

    accepted: bool
    reason: str = ""  # "refused" | "not_accepting" | "mask_mismatch"
    index: int = -1
    token_id: int = -1


def bit_is_set(bitmask: np.ndarray, token_id: int) -> bool:
    """Whether id ``token_id`` is allowed in row 0 of a packed int32 bitmask."""
    return bool((int(bitmask[0, token_id >> 5]) >> (token_id & 31)) & 1)


def feed_tokens(matcher: Any, ids: Sequence[int], bitmask: np.ndarray) -> Feed:
    """Teacher-force ``ids``: mask bit and ``accept_token`` must agree on every token; stops at
    the first refused token. Cost: one mask fill per token."""
    for index, token_id in enumerate(ids):
        matcher.fill_bitmask(bitmask, 0)
        in_mask = bit_is_set(bitmask, token_id)
        accepted = bool(matcher.accept_token(token_id))
        if accepted != in_mask:
            return Feed(False, "mask_mismatch", index, token_id)
        if not accepted:
            return Feed(False, "refused", index, token_id)
    if not matcher.is_accepting():
        return Feed(False, "not_accepting", len(ids), -1)
    return Feed(True)


def make_encoder(tokenizer: Any) -> Encoder:
    """A text -> ids function for a ``transformers`` tokenizer (slow tiktoken-backed with
    ``allow_special_tokens``, or fast) or a ``tiktoken.Encoding``; text that spells a special
    token stays text."""
    encode = tokenizer.encode
    try:
        parameters = inspect.signature(encode).parameters
    except (TypeError, ValueError):
        parameters = {}
    if "allow_special_tokens" in parameters:
        kwargs: dict[str, Any] = {"allow_special_tokens": False}
    elif "disallowed_special" in parameters:
        kwargs = {"disallowed_special": ()}
    else:
        kwargs = {"add_special_tokens": False, "split_special_tokens": True}
    return lambda text: list(encode(text, **kwargs))


# --------------------------------------------------------------------------------------------
# Results


@dataclass
class CaseResult:
    """Everything one case contributed: status is compiled | unsupported | too_complex |
    timeout | invalid_schema | crash."""

    subset: str
    name: str
    status: str
    keyword: str = ""
    compile_s: float = 0.0
    valid_accepted: int = 0
    valid_rejected: int = 0
    valid_strict_excluded: int = 0
    valid_format_excluded: int = 0
    invalid_rejected: int = 0
    invalid_accepted: int = 0
    mutant_rejected: int = 0
    mutant_accepted: int = 0
    unserialisable: int = 0
    untokenizable: int = 0
    decode_budget: int = 0
    failures: list[dict] = field(default_factory=list)


class CompileTimeout(Exception):
    """The compile budget ran out."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise CompileTimeout()


class PeerRefused(Exception):
    """A peer library refused a schema (its own error text)."""


class _LLGuidanceCursor:
    """One llguidance matcher behind the runner's matcher interface."""

    __slots__ = ("_m", "_fill")

    def __init__(self, matcher: Any, fill: Callable[..., None]) -> None:
        self._m, self._fill = matcher, fill

    def fill_bitmask(self, bitmask: np.ndarray, index: int = 0) -> None:
        self._fill(self._m, bitmask, index)

    def accept_token(self, token_id: int) -> bool:
        return bool(self._m.consume_token(token_id))

    def is_accepting(self) -> bool:
        return bool(self._m.is_accepting())


class _LLGuidanceCompiled:
    __slots__ = ("_template", "_fill")

    def __init__(self, template: Any, fill: Callable[..., None]) -> None:
        self._template, self._fill = template, fill

    def matcher(self) -> _LLGuidanceCursor:
        return _LLGuidanceCursor(self._template.deep_copy(), self._fill)


class LLGuidanceEngine:
    """llguidance (the bench extra) compiling the same schemas for the same token ids, so that
    its counts sit beside ours from the same run: whitespace bounded as in
    :mod:`benchmarks.peers`; in strict mode every object lacking ``additionalProperties`` is
    closed (:func:`benchmarks.peers.close_objects`), in spec mode schemas are given as they are.
    A grammar llguidance reports as an error is counted as refused. Lives for one run."""

    name = "llguidance"

    def __init__(self, tokenizer: Any, vocabulary: Vocabulary) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.numpy

        from .peers import WHITESPACE_BOUND

        self._llg = llguidance
        self._fill = llguidance.numpy.fill_next_token_bitmask
        self._tokenizer = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocabulary.vocab_size)
        self._overrides = {"whitespace_flexible": True,
                           "whitespace_pattern": "[\\x20\\x0A\\x0D\\x09]{0,%d}" % WHITESPACE_BOUND}

    def compile(self, schema: Any, strict: bool) -> _LLGuidanceCompiled:
        from .peers import close_objects

        try:
            grammar = self._llg.LLMatcher.grammar_from_json_schema(
                close_objects(schema) if strict else schema, overrides=self._overrides)
            matcher = self._llg.LLMatcher(self._tokenizer, grammar, log_level=0)
        except (ValueError, TypeError, RuntimeError) as exc:
            raise PeerRefused(str(exc)) from None
        if matcher.is_error():
            raise PeerRefused(matcher.get_error())
        return _LLGuidanceCompiled(matcher, self._fill)


def _peer_keyword(message: str) -> str:
    """A short, countable reason from a peer's error text."""
    message = message.strip().splitlines()[0] if message.strip() else "error"
    found = re.search(r"[Uu]nimplemented keys?: \[?\"?([A-Za-z$]+)", message)
    if found:
        return found.group(1)
    return re.sub(r"\d+", "N", message)[:60]


class Runner:
    """Runs cases against one vocabulary. ``options`` go to ``compile_json_schema`` besides
    ``strict``; with ``mutants_per_instance`` each valid instance also yields that many edits
    (``mutants``) that jsonschema calls invalid, which must be refused too. With ``engine`` (an
    :class:`LLGuidanceEngine`) the same cases are compiled by that peer instead of ours. Lives for
    one run."""

    def __init__(
        self,
        vocabulary: Vocabulary,
        encode: Encoder,
        *,
        strict: bool = True,
        compile_budget_s: float = 20.0,
        mutants_per_instance: int = 0,
        engine: LLGuidanceEngine | None = None,
        check_budget_s: float = 120.0,
        **options: Any,
    ) -> None:
        self.vocabulary = vocabulary
        self.check_budget_s = check_budget_s
        self.mutants_per_instance = mutants_per_instance
        self.encode = encode
        self.strict = strict
        self.engine = engine
        self.options = dict(options, strict=strict)
        self.compile_budget_s = compile_budget_s
        self._bitmask = np.zeros((1, (vocabulary.vocab_size + 31) // 32), dtype=np.int32)

    def _compile_now(self, case: Case) -> Any:
        if self.engine is not None:
            return self.engine.compile(case.schema, self.strict)
        return compile_json_schema(case.schema, self.vocabulary, resources=case.resources, **self.options)

    def _compile(self, case: Case) -> Any:
        """Compile under a SIGALRM budget (main thread only; elsewhere without a budget)."""
        with self._budget(self.compile_budget_s):
            return self._compile_now(case)

    def run_case(self, case: Case) -> CaseResult:
        """Compile ``case.schema`` and check each instance (both serialisations)."""
        result = CaseResult(case.subset, case.name, "compiled")
        start = time.perf_counter()
        try:
            compiled = self._compile(case)
        except SchemaTooComplexError as exc:  # before its base class, UnsupportedSchemaError
            result.status, result.keyword = "too_complex", exc.keyword
        except UnsupportedSchemaError as exc:
            result.status, result.keyword = "unsupported", exc.keyword
        except PeerRefused as exc:
            result.status, result.keyword = "unsupported", _peer_keyword(str(exc))
        except CompileTimeout:
            result.status = "timeout"
        except MemoryError:  # the worker's memory cap (--memory-limit), not the library
            result.status = "check_memory"
        except InvalidSchemaError as exc:
            result.status, result.keyword = "invalid_schema", str(exc)
            if any(inst.valid for inst in case.instances):
                result.failures.append(self._failure(case, "invalid_schema_with_valid", None, str(exc)))
        except Exception:
            result.status = "crash"
            result.failures.append(self._failure(case, "compile_crash", None, traceback.format_exc(limit=6)))
        result.compile_s = time.perf_counter() - start
        if result.status != "compiled":
            return result
        registry = registry_of(case.resources)
        try:
            walker = SchemaWalker(case.schema, registry)
        except Exception:
            walker = None
        with self._budget(self.check_budget_s):
            try:
                for instance in case.instances + self._mutant_instances(case, walker, registry):
                    try:
                        self._check_instance(case, compiled, walker, registry, instance, result)
                    except (CompileTimeout, MemoryError):
                        raise
                    except Exception:
                        result.failures.append(
                            self._failure(case, "match_crash", instance, traceback.format_exc(limit=6))
                        )
            except CompileTimeout:
                result.status = "check_timeout"
            except MemoryError:
                result.status = "check_memory"
        if self.engine is None:
            clear_cache()  # every case is a new schema: nothing to share, memory to give back
        return result

    @contextlib.contextmanager
    def _budget(self, seconds: float) -> Iterable[None]:
        """Raise :class:`CompileTimeout` after ``seconds`` (SIGALRM; main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        old = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)

    def _mutant_instances(self, case: Case, walker: SchemaWalker | None, registry: Registry) -> list[Instance]:
        """Edits of the valid instances (``mutants``) that jsonschema finds invalid or, in
        strict mode, that hold a key no ``properties`` declare."""
        if not self.mutants_per_instance:
            return []
        cls = validator_for(case.schema, default=validator_for({}))
        validator = cls(case.schema, registry=registry)
        found = []
        for instance in case.instances:
            if not instance.valid:
                continue
            for description, value in mutants(instance.data, self.mutants_per_instance):
                try:
                    if validator.is_valid(value) and not (self.strict and walker and walker.walk(value)[1]):
                        continue
                except Exception:  # a pattern Python's re cannot read: no verdict
                    continue
                found.append(Instance(f"{instance.description}: {description}", value, False, mutant=True))
        return found

    def _check_instance(self, case: Case, compiled: Any, walker: Any, registry: Registry, instance: Instance,
                        result: CaseResult) -> None:
        data, undeclared = instance.data, False
        if walker is not None:
            try:
                data, undeclared = walker.walk(instance.data)
            except RecursionError:
                pass
        try:
            texts = serialisations(data)
        except ValueError:
            result.unserialisable += 1
            return
        outcomes = []
        for style, text in texts:
            ids = self.encode(text)
            pieces = [self.vocabulary.token_bytes(t) for t in ids]
            if any(p is None for p in pieces) or b"".join(pieces) != text.encode("utf-8"):
                result.untokenizable += 1
                return
            outcome = feed_tokens(compiled.matcher(), ids, self._bitmask)
            outcomes.append((style, text, ids, outcome))
        for style, text, ids, outcome in outcomes:
            if outcome.reason == "mask_mismatch":
                result.failures.append(self._failure(case, "mask_mismatch", instance, "", style, text, ids, outcome))
        exhausted = getattr(getattr(compiled, "dfa", None), "exhausted", None)
        if exhausted and not all(o[3].accepted for o in outcomes):  # a refusal that is no verdict
            result.decode_budget += 1
            result.failures.append(self._failure(case, "decode_budget", instance, exhausted))
            return
        if instance.valid:
            bad = [o for o in outcomes if not o[3].accepted]
            if not bad:
                result.valid_accepted += 1
            elif any(o[3].reason == "mask_mismatch" for o in bad):
                result.valid_rejected += 1
            elif self.strict and undeclared:
                result.valid_strict_excluded += 1
            elif self.options.get("assert_formats", True) and not _valid_with_formats(case.schema, instance.data,
                                                                                      registry):
                result.valid_format_excluded += 1
            else:
                result.valid_rejected += 1
                for style, text, ids, outcome in bad:
                    result.failures.append(
                        self._failure(case, "valid_rejected", instance, "", style, text, ids, outcome)
                    )
        else:
            good = [o for o in outcomes if o[3].accepted]
            prefix = "mutant" if instance.mutant else "invalid"
            if good:
                setattr(result, f"{prefix}_accepted", getattr(result, f"{prefix}_accepted") + 1)
                for style, text, ids, outcome in good:
                    result.failures.append(
                        self._failure(case, f"{prefix}_accepted", instance, "", style, text, ids, outcome)
                    )
            else:
                setattr(result, f"{prefix}_rejected", getattr(result, f"{prefix}_rejected") + 1)

    def _failure(
        self,
        case: Case,
        kind: str,
        instance: Instance | None,
        detail: str,
        style: str = "",
        text: str = "",
        ids: Sequence[int] = (),
        outcome: Feed | None = None,
    ) -> dict:
        entry: dict[str, Any] = {"kind": kind, "subset": case.subset, "schema_file": case.name}
        if detail:
            entry["detail"] = detail
        if instance is not None:
            entry["test"] = instance.description
            entry["instance"] = instance.data if _jsonable(instance.data) else repr(instance.data)
        if outcome is not None:
            entry.update(style=style, text=text, reason=outcome.reason, token_index=outcome.index)
            if 0 <= outcome.index < len(ids):
                token = ids[outcome.index]
                entry["token_id"] = token
                entry["token"] = repr(self.vocabulary.token_bytes(token))
                entry["prefix"] = self.vocabulary.decode_bytes(list(ids[: outcome.index])).decode("utf-8", "replace")
        return entry


def _valid_with_formats(schema: Any, data: Any, registry: Registry) -> bool:
    """Whether ``data`` is valid when ``format`` is asserted (jsonschema's format checker);
    the Test-Suite counts bad formats as valid because ``format`` is an annotation by default."""
    cls = validator_for(schema, default=validator_for({}))
    try:
        return cls(schema, format_checker=cls.FORMAT_CHECKER, registry=registry).is_valid(data)
    except Exception:  # a schema jsonschema cannot evaluate: no exclusion
        return True


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
        return True
    except ValueError:
        return False


# --------------------------------------------------------------------------------------------
# Running many cases (optionally in forked workers) and summarising


_WORKER: Runner | None = None
_WORKER_CASES: Sequence[Case] = ()


def _run_index(index: int) -> CaseResult:
    assert _WORKER is not None
    return _WORKER.run_case(_WORKER_CASES[index])


def _limit_memory(extra_mb: int | None) -> None:
    """Cap a worker's address space at its current size plus ``extra_mb`` (a case that blows up
    gets MemoryError instead of taking the machine)."""
    if not extra_mb:
        return
    import resource

    with open("/proc/self/statm") as f:
        current = int(f.read().split()[0]) * resource.getpagesize()
    limit = current + extra_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_cases(runner: Runner, cases: Sequence[Case], jobs: int = 1, progress: bool = False,
              memory_limit_mb: int | None = None) -> list[CaseResult]:
    """Run every case, in ``jobs`` forked worker processes when ``jobs > 1`` (the runner, its
    vocabulary and the cases are inherited, not pickled; each worker's memory capped at
    ``memory_limit_mb`` above its start). Results keep the order of ``cases``; ``progress``
    prints a line to stderr every 100 cases."""
    global _WORKER, _WORKER_CASES
    _WORKER, _WORKER_CASES = runner, cases
    start = time.perf_counter()
    results: list[CaseResult] = []
    try:
        with contextlib.ExitStack() as stack:
            if jobs <= 1:
                stream: Iterable[CaseResult] = map(runner.run_case, cases)
            else:
                pool = stack.enter_context(multiprocessing.get_context("fork").Pool(
                    jobs, initializer=_limit_memory, initargs=(memory_limit_mb,)))
                stream = pool.imap(_run_index, range(len(cases)), chunksize=2)
            for result in stream:
                results.append(result)
                if progress and len(results) % 100 == 0:
                    print(f"  {len(results)}/{len(cases)} cases, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    finally:
        _WORKER, _WORKER_CASES = None, ()
    return results


COUNTERS = (
    "valid_accepted",
    "valid_rejected",
    "valid_strict_excluded",
    "valid_format_excluded",
    "invalid_rejected",
    "invalid_accepted",
    "mutant_rejected",
    "mutant_accepted",
    "unserialisable",
    "untokenizable",
    "decode_budget",
)


@dataclass
class Summary:
    """Totals per subset and overall, failures, unsupported keywords and slow compiles."""

    rows: dict[str, dict[str, int]]
    unsupported: dict[str, int]
    unsupported_by_subset: dict[str, dict[str, int]]
    failures: list[dict]
    slow_compiles: list[tuple[str, float]]
    passing_test_suite_files: list[str]
    seconds: float = 0.0

    def row(self, name: str) -> dict[str, int]:
        return self.rows.get(name, _empty_row())

    @property
    def mismatches(self) -> int:
        return sum(1 for f in self.failures if f["kind"] == "mask_mismatch")

    @property
    def crashes(self) -> int:
        return sum(1 for f in self.failures if f["kind"].endswith("crash") or f["kind"] == "invalid_schema_with_valid")


def _empty_row() -> dict[str, int]:
    keys = ("schemas", "compiled", "unsupported", "too_complex", "timeout", "invalid_schema", "crash", "check_timeout",
            "check_memory")
    return {k: 0 for k in keys + COUNTERS}


def summarise(results: Sequence[CaseResult], seconds: float = 0.0) -> Summary:
    """Fold case results into rows: each MaskBench subset, ``TestSuite``, each
    ``TestSuite/<file>``, and ``ALL``."""
    rows: dict[str, dict[str, int]] = {}
    unsupported: Counter[str] = Counter()
    by_subset: dict[str, Counter[str]] = {}
    failures, slow = [], []
    file_ok: dict[str, bool] = {}
    for res in results:
        groups = ["ALL", res.subset]
        if res.subset.startswith("TestSuite/"):
            groups.append("TestSuite")
        for group in groups:
            row = rows.setdefault(group, _empty_row())
            row["schemas"] += 1
            row[res.status] += 1
            for key in COUNTERS:
                row[key] += getattr(res, key)
        if res.status == "unsupported":
            unsupported[res.keyword] += 1
            by_subset.setdefault(res.subset.split("/")[0], Counter())[res.keyword] += 1
        if res.compile_s > SLOW_COMPILE_S:
            slow.append((res.name, round(res.compile_s, 3)))
        failures.extend(res.failures)
        if res.subset.startswith("TestSuite/"):
            previous = file_ok.get(res.subset)
            if res.failures:
                file_ok[res.subset] = False
            elif res.status == "compiled" and previous is None:
                file_ok[res.subset] = True
    passing = sorted(name.split("/", 1)[1] for name, ok in file_ok.items() if ok)
    return Summary(
        rows,
        dict(unsupported.most_common()),
        {k: dict(v.most_common()) for k, v in by_subset.items()},
        failures,
        sorted(slow, key=lambda item: -item[1]),
        passing,
        seconds,
    )


def format_table(summary: Summary, title: str) -> str:
    """A plain-text table: one line per subset (Test-Suite files indented)."""
    columns = [
        ("schemas", "schemas"), ("compiled", "compiled"), ("unsupp", "unsupported"),
        ("complex", "too_complex"), ("timeout", "timeout"), ("invalid", "invalid_schema"), ("crash", "crash"),
        ("CHK_TO", "check_timeout"), ("CHK_MEM", "check_memory"),
        ("val_ok", "valid_accepted"), ("VAL_REJ", "valid_rejected"), ("strictX", "valid_strict_excluded"),
        ("formatX", "valid_format_excluded"),
        ("inv_rej", "invalid_rejected"), ("INV_ACC", "invalid_accepted"),
        ("mut_rej", "mutant_rejected"), ("MUT_ACC", "mutant_accepted"), ("skip", "unserialisable"),
        ("DEC_BUD", "decode_budget"),
    ]
    order = [s for s in (*MASKBENCH_SUBSETS, *JSONSCHEMABENCH_SUBSETS) if s in summary.rows]
    order += ["TestSuite"] if "TestSuite" in summary.rows else []
    order += sorted(k for k in summary.rows if k.startswith("TestSuite/"))
    order.append("ALL")
    lines = [title, f"{'subset':<34}" + "".join(f"{h:>9}" for h, _ in columns)]
    for name in order:
        row = summary.rows[name]
        label = ("  " + name.split("/", 1)[1]) if name.startswith("TestSuite/") else name
        lines.append(f"{label:<34}" + "".join(f"{row[key]:>9}" for _, key in columns))
    lines.append("unsupported by keyword: " + json.dumps(summary.unsupported))
    lines.append(
        f"mask/accept mismatches: {summary.mismatches}; crashes: {summary.crashes}; "
        f"untokenizable instances: {summary.rows['ALL']['untokenizable'] if summary.rows else 0}"
    )
    lines.append("Test-Suite files where every compiled case passes: " + ", ".join(summary.passing_test_suite_files))
    lines.append(f"slow compiles (> {SLOW_COMPILE_S:g} s): {len(summary.slow_compiles)} "
                 + ", ".join(f"{n} {s}s" for n, s in summary.slow_compiles[:15]))
    lines.append(f"time: {summary.seconds:.1f} s")
    return "\n".join(lines)


def unsupported_share(summary: Summary, subsets: Sequence[str] = ("BFCL", "MCPspec")) -> float:
    """Fraction of the schemas of ``subsets`` that did not compile as unsupported."""
    total = sum(summary.row(s)["schemas"] for s in subsets)
    bad = sum(summary.row(s)["unsupported"] for s in subsets)
    return bad / total if total else 0.0


class TestTokenizer(NamedTuple):
    """A test tokenizer, its vocabulary and its text encoder."""

    tokenizer: Any
    vocabulary: Vocabulary
    encode: Encoder


def load_tokenizer(name: str) -> TestTokenizer:
    """The ``kimi`` or ``deepseek`` test tokenizer with its vocabulary and encoder."""
    from enforcer.testing import tokenizers

    if name == "kimi":
        tokenizer, vocab_size = tokenizers.kimi_k2_tokenizer(), None
    elif name == "deepseek":
        tokenizer, vocab_size = tokenizers.deepseek_v3_tokenizer(), tokenizers.DEEPSEEK_V3_VOCAB_SIZE
    else:
        raise ValueError(f"unknown tokenizer {name!r}; expected 'kimi' or 'deepseek'")
    return TestTokenizer(tokenizer, Vocabulary.from_tokenizer(tokenizer, vocab_size=vocab_size), make_encoder(tokenizer))


def run_conformance(
    cases: Sequence[Case],
    vocabulary: Vocabulary,
    encode: Encoder,
    *,
    strict: bool = True,
    jobs: int = 1,
    compile_budget_s: float = 20.0,
    progress: bool = False,
    mutants_per_instance: int = 0,
    engine: LLGuidanceEngine | None = None,
    memory_limit_mb: int | None = None,
    **options: Any,
) -> Summary:
    """Run ``cases`` against one vocabulary and summarise (``options`` go to our compiler;
    ``engine``: a peer compiles instead)."""
    runner = Runner(
        vocabulary, encode, strict=strict, compile_budget_s=compile_budget_s,
        mutants_per_instance=mutants_per_instance, engine=engine, **options,
    )
    start = time.perf_counter()
    results = run_cases(runner, cases, jobs, progress, memory_limit_mb)
    return summarise(results, time.perf_counter() - start)


REFUSED = ("unsupported", "too_complex", "timeout", "invalid_schema", "crash", "check_timeout", "check_memory")
"""Statuses that count as a refused schema in the side-by-side table."""


def side_by_side(summaries: dict[str, Summary], subsets: Sequence[str]) -> str:
    """One line per subset: each engine's valid rejected / invalid accepted (corpus instances and
    mutants) / refused schemas (count and share)."""
    names = list(summaries)
    header = f"{'subset':<18}{'schemas':>8}" + "".join(f"{n + ' VR/IA/refused':>34}" for n in names)
    lines = [header]
    for subset in [*subsets, "ALL"]:
        rows = {n: summaries[n].row(subset) for n in names}
        total = next(iter(rows.values()))["schemas"]
        if not total:
            continue
        cells = []
        for n in names:
            r = rows[n]
            refused = sum(r[k] for k in REFUSED)
            cells.append(f"{r['valid_rejected']} / {r['invalid_accepted'] + r['mutant_accepted']} / "
                         f"{refused} ({refused / total:.1%})")
        lines.append(f"{subset:<18}{total:>8}" + "".join(f"{c:>34}" for c in cells))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.conformance", description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", required=True, type=Path,
                        help="folder holding maskbench/, jsonschemabench/ and json-schema-test-suite/")
    parser.add_argument("--tokenizer", choices=("kimi", "deepseek", "both"), default="both")
    parser.add_argument("--limit", type=int, default=None, help="at most N schemas, spread over the corpus")
    parser.add_argument("--source", choices=("maskbench", "jsonschemabench", "testsuite", "both", "all"),
                        default="both", help="both: maskbench + testsuite; all: the three")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--strict", dest="strict", action="store_true", default=True, help="no undeclared keys (default)")
    mode.add_argument("--spec", dest="strict", action="store_false", help="extra keys as the spec allows")
    parser.add_argument("--peer", choices=("none", "llguidance"), default="none",
                        help="also run the same cases through this peer, same tokenizer, same run")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--mutants", type=int, default=0, help="invalid edits checked per valid instance")
    parser.add_argument("--compile-budget", type=float, default=20.0, help="seconds per compile")
    parser.add_argument("--memory-limit", type=int, default=3000, help="MB per worker above its start (jobs > 1)")
    parser.add_argument("--remotes", type=Path, default=None,
                        help="the Test-Suite's remotes/ folder (default: CORPUS/json-schema-test-suite/remotes)")
    parser.add_argument("--report", type=Path, default=Path("conformance_report.json"))
    args = parser.parse_args(argv)

    sources = {"both": ("maskbench", "testsuite"), "all": ("maskbench", "jsonschemabench", "testsuite")}
    cases = spread_sample(load_corpus(args.corpus, sources.get(args.source, (args.source,)), args.remotes), args.limit)
    names = ("kimi", "deepseek") if args.tokenizer == "both" else (args.tokenizer,)
    mode_name = "strict" if args.strict else "spec"
    report: dict[str, Any] = {"strict": args.strict, "schemas": len(cases), "tokenizers": {}}
    for name in names:
        test_tokenizer = load_tokenizer(name)
        vocabulary = test_tokenizer.vocabulary
        engines: dict[str, LLGuidanceEngine | None] = {"enforcer": None}
        if args.peer == "llguidance":
            engines["llguidance"] = LLGuidanceEngine(test_tokenizer.tokenizer, vocabulary)
        summaries = {}
        for engine_name, engine in engines.items():
            summary = run_conformance(
                cases, vocabulary, test_tokenizer.encode, strict=args.strict, jobs=args.jobs,
                compile_budget_s=args.compile_budget, progress=True, mutants_per_instance=args.mutants, engine=engine,
                memory_limit_mb=args.memory_limit,
            )
            summaries[engine_name] = summary
            print(format_table(summary, f"== {engine_name}, {name} ({mode_name}), vocab {vocabulary.vocab_size} =="))
            print(f"unsupported share of BFCL+MCPspec: {unsupported_share(summary):.2%}\n")
            report["tokenizers"][f"{name}/{engine_name}" if engine is not None else name] = asdict(summary)
        if len(summaries) > 1:
            subsets = [s for s in (*MASKBENCH_SUBSETS, *JSONSCHEMABENCH_SUBSETS, "TestSuite")
                       if s in summaries["enforcer"].rows]
            print(f"== side by side, {name} ({mode_name}): valid rejected / invalid accepted / refused ==")
            print(side_by_side(summaries, subsets) + "\n")
    args.report.write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")
    print(f"report: {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
