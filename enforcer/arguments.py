"""Arguments split one level deep: each declared key with the JSON types its schema admits and
one value automaton per (key, type), for formats that write every argument separately with its
key and type (Kimi K3).

A string value is raw text (no quotes, no escapes) under the string keywords of its schema
(``enum``, ``const``, ``minLength``/``maxLength``, ``pattern``, ``format``); any other value is
its JSON literal under the schema restricted to that type. Keys come from ``properties``
(required ones always, declared order unless the format allows any order), then, where the
schema allows them, undeclared keys with values under ``additionalProperties`` (with the JSON
policy: ``strict=True`` closes objects that declare properties unless ``additionalProperties``
says otherwise). Undeclared keys are never a declared name; they may repeat, as in free-form
JSON objects.
Top-level keywords that constrain keys together (``minProperties``, ``patternProperties``,
``dependentRequired``, combinators, ...) raise :class:`UnsupportedSchemaError` with their
pointer. Cost: one compile per (key, candidate type); cached like JSON schemas.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from .automaton import LazyDFA, eager_budget
from .formats.kimi_k3 import VALUE_TYPES, arguments_json
from .errors import InvalidSchemaError, UnsupportedSchemaError
from .json_schema import SchemaCompiler, SchemaOptions, merge
from .lru import COMPILED, LRU
from .matcher import CompiledSchema, canonical_json
from .vocabulary import Vocabulary

_RELATING = frozenset({"minProperties", "maxProperties", "patternProperties", "propertyNames", "dependentRequired",
                       "dependencies", "dependentSchemas", "if", "anyOf", "oneOf", "not", "enum", "const",
                       "unevaluatedProperties", "$dynamicRef", "$recursiveRef"})
"""Top-level keywords that constrain keys together (or the whole object): not enforceable when
each argument is written on its own. Other keywords either are handled (``properties``,
``required``, ``additionalProperties``) or do not apply to objects."""


@dataclass(frozen=True)
class ArgumentKey:
    """One declared key: whether it is required, the types its schema admits (in
    :data:`VALUE_TYPES` order) and a compiled value per type."""

    name: str
    required: bool
    types: tuple[str, ...]
    values: tuple[CompiledSchema, ...]


@dataclass(frozen=True)
class SplitArguments:
    """The keys of one tool's arguments, and ``extra``: the values of undeclared keys (name
    ``""``; its index in bitmasks is ``len(keys)``) where the schema allows them. Immutable;
    shared by every matcher."""

    keys: tuple[ArgumentKey, ...]
    extra: ArgumentKey | None = None
    declared: tuple[str, ...] = ()
    """Every name in ``properties`` (an undeclared key is none of them)."""

    def extra_allowed(self, written: int, any_order: bool) -> bool:
        """An undeclared key may come next: in declared order only once every required key is
        written (after an undeclared key no declared one may follow)."""
        return self.extra is not None and (any_order or self.complete(written))

    def next_keys(self, written: int, any_order: bool) -> list[int]:
        """Keys that may come next after the keys in the bitmask ``written``: in declared order,
        any later key up to and including the first required one; in any order, every key not
        written yet."""
        if any_order:
            return [j for j in range(len(self.keys)) if not written >> j & 1]
        out = []
        for j in range(written.bit_length(), len(self.keys)):
            out.append(j)
            if self.keys[j].required:
                break
        return out

    def complete(self, written: int) -> bool:
        """Every required key is in the bitmask ``written``."""
        return all(written >> j & 1 for j, key in enumerate(self.keys) if key.required)


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _top_level(params: dict, compiler: SchemaCompiler) -> dict:
    """The arguments schema as one object schema (top-level ``$ref`` followed and ``allOf``
    merged, keyword by keyword)."""
    schema: Any = params
    for _ in range(32):
        if not isinstance(schema, dict) or not ("$ref" in schema or "allOf" in schema):
            break
        rest: Any = {k: v for k, v in schema.items() if k not in ("$ref", "allOf")}
        parts = [compiler.resolve(schema["$ref"], "", schema)[0]] if "$ref" in schema else []
        parts += list(schema.get("allOf", []))
        for part in parts:
            rest = merge(rest, part)
            if rest is None:
                keyword = "allOf" if "allOf" in schema else "$ref"
                raise UnsupportedSchemaError(keyword, "", "arguments split one level deep need a top level that "
                                             "merges into one object schema")
        schema = rest
    if schema is True:
        return {"type": "object"}
    if not isinstance(schema, dict):
        raise InvalidSchemaError("", "the arguments schema admits no object")
    for key, value in schema.items():
        if key not in _RELATING or (key == "minProperties" and value == 0) or \
                (key == "unevaluatedProperties" and value is False):
            continue
        raise UnsupportedSchemaError(key, "", "arguments are split one level deep, so keywords that "
                                     "relate keys to each other cannot be enforced")
    types = schema.get("type", "object")
    if "object" not in ([types] if isinstance(types, str) else types):
        raise InvalidSchemaError("", "the arguments schema admits no object")
    return schema


def _candidate_types(schema: Any, compiler: SchemaCompiler, pointer: str) -> list[str]:
    schema = compiler.deref(schema, pointer)
    if not isinstance(schema, dict):
        return [] if schema is False else list(VALUE_TYPES)
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema.get("enum", [])
        found = set()
        for v in values if isinstance(values, list) else []:
            found.add("number" if isinstance(v, (int, float)) and not isinstance(v, bool) else
                      "boolean" if isinstance(v, bool) else "null" if v is None else
                      "string" if isinstance(v, str) else "array" if isinstance(v, list) else "object")
        return [t for t in VALUE_TYPES if t in found]
    declared = schema.get("type")
    if declared is None or any(k in schema for k in ("anyOf", "oneOf", "allOf", "not", "$ref")):
        return list(VALUE_TYPES)
    names = {declared} if isinstance(declared, str) else set(declared)
    names = {"number" if n == "integer" else n for n in names}
    if schema.get("nullable") is True:
        names.add("null")
    return [t for t in VALUE_TYPES if t in names]


def _key(name: str, required: bool, schema: Any, pointer: str, compiler: SchemaCompiler, vocabulary: Vocabulary,
         options: SchemaOptions) -> ArgumentKey:
    """One key: the types its schema admits and a compiled value per type. A value schema that
    refers to nothing outside itself is shared by every key and tool that declares it (its
    automaton and masks are built once)."""
    types, values = [], []
    for json_type in _candidate_types(schema, compiler, pointer):
        restricted = {"allOf": [schema, {"type": json_type}]}
        text = canonical_json(restricted)
        shared = "$ref" not in text
        cache_key = (text, options, vocabulary.fingerprint)
        compiled = _VALUES.get(cache_key) if shared else None
        if compiled is None:
            dfa = LazyDFA(compiler.value(restricted, pointer, 0, ()), options.max_states, options.max_automaton_bytes)
            if not dfa.is_empty:
                dfa.build_nfa()  # now, warm, not cold when a call first writes this key mid-stream
            compiled = None if dfa.is_empty else CompiledSchema(restricted, dfa, vocabulary, options)
            if compiled is not None and shared:
                compiled = _VALUES.put(cache_key, compiled)
        if compiled is not None:
            types.append(json_type)
            values.append(compiled)
    return ArgumentKey(name, required, tuple(types), tuple(values))


def split_arguments(params: dict, vocabulary: Vocabulary, options: SchemaOptions) -> SplitArguments:
    """Split the arguments schema ``params`` (an object schema) by key. Pointers in errors are
    relative to ``params``. Cached per (schema, options, vocabulary)."""
    cache_key = (canonical_json(params), options, vocabulary.fingerprint)
    hit = _CACHE.get(cache_key)
    if hit is not None:
        return hit
    with eager_budget(options.max_eager_states):  # one compile: every key's automata together
        split = _split(params, vocabulary, options)
    return _CACHE.put(cache_key, split)


def _split(params: dict, vocabulary: Vocabulary, options: SchemaOptions) -> SplitArguments:
    compiler = SchemaCompiler(params, options, raw_strings=True)
    top = _top_level(params, compiler)
    properties = top.get("properties", {})
    if not isinstance(properties, dict):
        raise InvalidSchemaError("", "'properties' must be an object")
    required = list(dict.fromkeys(top.get("required", [])))
    for name in required:
        if name not in properties:
            raise InvalidSchemaError("/required", f"required property {name!r} is not declared in 'properties'")
    keys = []
    for name, sub in properties.items():
        key = _key(name, name in required, sub, f"/properties/{_escape(name)}", compiler, vocabulary, options)
        if not key.types and key.required:
            raise InvalidSchemaError(f"/properties/{_escape(name)}",
                                     f"no value satisfies the schema of required property {name!r}")
        keys.append(key)
    additional = top.get("additionalProperties")
    if additional is None:
        additional = not (options.strict and "properties" in top)
    extra = None
    if additional is not False:
        extra = _key("", False, {} if additional is True else additional, "/additionalProperties", compiler,
                     vocabulary, options)
    return SplitArguments(tuple(k for k in keys if k.types), extra if extra is not None and extra.types else None,
                          tuple(properties))


_CACHE: LRU[SplitArguments] = LRU(512)
_VALUES: LRU[CompiledSchema] = LRU(4096, COMPILED, CompiledSchema.memory_size_bytes)


def clear_cache() -> None:
    """Forget every cached :class:`SplitArguments` and shared value automaton."""
    _CACHE.clear()
    _VALUES.clear()
