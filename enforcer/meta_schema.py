"""A dialect's meta-schema compiled once into a fast validity predicate.

:func:`certainly_valid` answers "does this schema document satisfy its dialect's meta-schema?"
with True only when it does; False means "not shown valid here", and the caller then asks
jsonschema, which finds the first violation and its JSON pointer. So the verdicts and the
error messages are jsonschema's own, and a document that is valid (nearly every one) costs one
walk over its keys instead of a jsonschema validation (2020-12's dynamic references: ~25 ms
per tool schema against ~0.2 ms here).

The predicate is compiled from the meta-schema documents jsonschema ships (the same files it
validates against), not written by hand: each meta-schema object becomes a :class:`_Check`
(allowed types, the checks of each keyword, and the other constraints), ``allOf`` branches and
``$ref``/``$dynamicRef``/``$recursiveRef`` targets merged in at compile time. Only the keywords
the meta-schemas use are understood, and only combinators that keep "True means valid" sound
(``allOf``, ``anyOf``); a meta-schema needing anything else (draft 3's ``extends``, say) is not
compiled and every document of that dialect goes to jsonschema. Formats are not asserted
(as in the jsonschema check this stands in front of). Lifetime: one compiled predicate per
dialect per process.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable
from urllib.parse import urldefrag, urljoin

import jsonschema
from jsonschema_specifications import REGISTRY

_ANNOTATIONS = frozenset({
    "$schema", "$id", "id", "$vocabulary", "$dynamicAnchor", "$recursiveAnchor", "$comment", "title",
    "description", "default", "deprecated", "format", "$defs", "definitions", "examples", "readOnly", "writeOnly",
})
"""Meta-schema keywords that constrain nothing (``format`` is not asserted)."""

_LEGACY = (jsonschema.Draft3Validator, jsonschema.Draft4Validator, jsonschema.Draft6Validator,
           jsonschema.Draft7Validator)
"""Dialects in which ``$ref`` overrides its sibling keywords."""


class _Unsupported(Exception):
    """The meta-schema uses something this compiler does not model (the dialect falls back)."""


class _CheckReference:
    """One meta-schema object: the Python types a value may have, the checks of each object
    key, and any other constraints (each a callable returning True only when satisfied), walked
    in Python: the checks' class without the compiled :class:`enforcer._kernels.MetaCheck` (which
    walks a document in C), and the oracle of its differential test."""

    __slots__ = ("types", "float_integers", "by_key", "rest")

    def __init__(self) -> None:
        self.types: frozenset[type] | None = None
        self.float_integers = False  # a float with an integral value counts as an "integer"
        self.by_key: dict[str, list[_CheckReference]] = {}
        self.rest: list[Callable[[Any], bool]] = []

    def ok(self, value: Any) -> bool:
        types = self.types
        if types is not None and type(value) not in types:
            if not (self.float_integers and type(value) is float and value.is_integer()):
                return False
        by_key = self.by_key
        if by_key and type(value) is dict:
            for key, item in value.items():
                checks = by_key.get(key)
                if checks is not None:
                    for check in checks:
                        if not check.ok(item):
                            return False
        for constraint in self.rest:
            if not constraint(value):
                return False
        return True


try:
    from ._kernels import MetaCheck as _Check
except ImportError:  # a source tree without the built extension: checks walk in Python
    _Check = _CheckReference  # type: ignore[assignment,misc]


def _merge(check: Any, other: Any) -> None:
    """Add ``other``'s constraints to ``check``'s (both must hold: ``allOf``)."""
    if other.types is not None:
        if check.types is None:
            check.types, check.float_integers = other.types, other.float_integers
        else:
            floats = (float in check.types or check.float_integers) and (float in other.types or other.float_integers)
            check.types = check.types & other.types
            check.float_integers = floats and float not in check.types
    for key, checks in other.by_key.items():
        check.by_key.setdefault(key, []).extend(checks)
    check.rest.extend(other.rest)


_PY_TYPES = {"object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,), "null": (type(None),),
             "number": (int, float), "integer": (int,)}


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


def _distinct_scalars(items: list) -> bool:
    """True when ``items`` are scalars no two of which are equal in JSON (``1`` equals ``1.0``,
    ``true`` does not equal ``1``); False when two are equal or an item is an array or an object
    (not shown distinct here: jsonschema decides)."""
    keys = set()
    for x in items:
        t = type(x)
        if t is str or t is bool or x is None:
            keys.add((t, x))
        elif t is int or t is float:
            keys.add((int, x))
        else:
            return False
    return len(keys) == len(items)


@lru_cache(maxsize=None)
def _join(base: str, ref: str) -> str:
    """``urljoin``, cached for the process: the meta-schemas repeat a few dozen (base,
    reference) pairs."""
    return urljoin(base, ref)


@lru_cache(maxsize=None)
def _resolve(base: str, ref: str) -> tuple[str, str]:
    """``ref`` resolved against ``base`` as (document URI, fragment); cached like :func:`_join`."""
    return urldefrag(_join(base, ref))


class _Compiler:
    """Compiles the meta-schema of one jsonschema validator class (its resources come from
    jsonschema's registry of specifications)."""

    def __init__(self, cls: type, new_check: type = _Check) -> None:
        """``new_check``: the class of the checks built (the compiled one when built; the
        differential test builds the reference too)."""
        self.new_check = new_check
        self.legacy = cls in _LEGACY
        self.float_integers = cls.TYPE_CHECKER.is_type(1.0, "integer")
        self.root_uri = urldefrag(cls.META_SCHEMA.get("$id", cls.META_SCHEMA.get("id", "")))[0]
        self.root_doc = cls.META_SCHEMA
        self.done: dict[tuple[str, str], _Check] = {}
        self.building: set[tuple[str, str]] = set()

    def resource(self, uri: str) -> Any:
        if uri == self.root_uri:
            return self.root_doc
        try:
            return REGISTRY[uri].contents
        except LookupError:
            raise _Unsupported(f"no resource {uri}") from None

    def reference(self, key: tuple[str, str]) -> _Check:
        """The check of the schema at ``key`` (document URI, JSON pointer fragment)."""
        uri, fragment = key
        if fragment and not fragment.startswith("/"):
            raise _Unsupported(f"anchor reference #{fragment}")
        hit = self.done.get(key)
        if hit is not None:
            return hit
        node: Any = self.resource(uri)
        for part in fragment.split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            node = node[int(part)] if isinstance(node, list) else node[part]
        check = self.done[key] = self.new_check()  # registered first: references may come back here
        self.building.add(key)
        _merge(check, self.compile(node, uri))
        self.building.discard(key)
        return check

    def refer(self, check: _Check, target: _Check, key: tuple[str, str]) -> None:
        """Add ``target``'s constraints to ``check``: merged in (one pass over an object's
        keys for all the vocabularies) when complete, by a call when still being built."""
        if key in self.building:
            check.rest.append(target.ok)
        else:
            _merge(check, target)

    def dynamic_root(self, keyword: str, value: Any) -> _Check:
        """``$dynamicRef: "#meta"`` / ``$recursiveRef: "#"`` as the meta-schemas use them: the
        outermost schema of the dynamic scope, which is the dialect's meta-schema when it
        carries the matching anchor (a validation always starts there)."""
        anchored = (self.root_doc.get("$dynamicAnchor") == value[1:] if keyword == "$dynamicRef"
                    else value == "#" and self.root_doc.get("$recursiveAnchor") is True)
        if not anchored:
            raise _Unsupported(f"{keyword} {value!r}")
        return self.reference((self.root_uri, ""))

    def compile(self, schema: Any, base: str) -> _Check:
        check = self.new_check()
        if schema is True:
            return check
        if not isinstance(schema, dict):
            raise _Unsupported(f"schema {schema!r}")
        base = _join(base, schema["$id"]) if isinstance(schema.get("$id"), str) else base
        keywords = {"$ref": schema["$ref"]} if self.legacy and "$ref" in schema else schema
        for keyword, value in keywords.items():
            if keyword in _ANNOTATIONS:
                continue
            handler = _KEYWORDS.get(keyword)
            if handler is None:
                raise _Unsupported(f"meta-schema keyword {keyword}")
            handler(self, check, value, schema, base)
        return check

    # ---- keywords (each adds its constraint to ``check``) ----------------------------------

    def _ref(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        key = _resolve(base, value)
        self.refer(check, self.reference(key), key)

    def _dynamicRef(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        self.refer(check, self.dynamic_root("$dynamicRef", value), (self.root_uri, ""))

    def _recursiveRef(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        self.refer(check, self.dynamic_root("$recursiveRef", value), (self.root_uri, ""))

    def _type(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        names = [value] if isinstance(value, str) else value
        types = {t for name in names for t in _PY_TYPES[name]}
        sub = self.new_check()
        sub.types = frozenset(types)
        sub.float_integers = "integer" in names and "number" not in names and self.float_integers
        _merge(check, sub)

    def _allOf(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        for branch in value:
            _merge(check, self.compile(branch, base))

    def _anyOf(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        branches = tuple(self.compile(branch, base).ok for branch in value)
        check.rest.append(lambda v: any(ok(v) for ok in branches))

    def _properties(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        for key, sub in value.items():
            check.by_key.setdefault(key, []).append(self.compile(sub, base))

    def _additionalProperties(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        if "patternProperties" in schema:
            raise _Unsupported("additionalProperties beside patternProperties")
        declared = frozenset(schema.get("properties", ()))
        ok = self.compile(value, base).ok
        check.rest.append(lambda v: type(v) is not dict or all(ok(item) for key, item in v.items()
                                                                if key not in declared))

    def _propertyNames(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        ok = self.compile(value, base).ok
        check.rest.append(lambda v: type(v) is not dict or all(ok(key) for key in v))

    def _items(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        if isinstance(value, list):
            raise _Unsupported("items as an array")
        ok = self.compile(value, base).ok
        check.rest.append(lambda v: type(v) is not list or all(ok(item) for item in v))

    def _minItems(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        check.rest.append(lambda v: type(v) is not list or len(v) >= value)

    def _uniqueItems(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        if value:
            check.rest.append(lambda v: type(v) is not list or _distinct_scalars(v))

    def _enum(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        if not all(isinstance(x, str) for x in value):
            raise _Unsupported("enum of non-strings")
        names = frozenset(value)
        check.rest.append(lambda v: type(v) is str and v in names)

    def _pattern(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        search = re.compile(value).search
        check.rest.append(lambda v: type(v) is not str or search(v) is not None)

    def _minimum(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        if schema.get("exclusiveMinimum") is True:  # draft 4: a boolean modifier of minimum
            check.rest.append(lambda v: not _is_number(v) or v > value)
        else:
            check.rest.append(lambda v: not _is_number(v) or v >= value)

    def _exclusiveMinimum(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        if isinstance(value, bool):
            if "minimum" not in schema:
                raise _Unsupported("exclusiveMinimum without minimum")
            return  # read by _minimum
        check.rest.append(lambda v: not _is_number(v) or v > value)

    def _dependencies(self, check: _Check, value: Any, schema: dict, base: str) -> None:
        for key, need in value.items():
            if not isinstance(need, list):
                raise _Unsupported("dependencies with a schema")
            check.rest.append(lambda v, key=key, need=tuple(need):
                              type(v) is not dict or key not in v or all(n in v for n in need))


_KEYWORDS: dict[str, Callable[..., None]] = {
    "$ref": _Compiler._ref, "$dynamicRef": _Compiler._dynamicRef, "$recursiveRef": _Compiler._recursiveRef,
    "type": _Compiler._type, "allOf": _Compiler._allOf, "anyOf": _Compiler._anyOf,
    "properties": _Compiler._properties, "additionalProperties": _Compiler._additionalProperties,
    "propertyNames": _Compiler._propertyNames, "items": _Compiler._items, "minItems": _Compiler._minItems,
    "uniqueItems": _Compiler._uniqueItems, "enum": _Compiler._enum, "pattern": _Compiler._pattern,
    "minimum": _Compiler._minimum, "exclusiveMinimum": _Compiler._exclusiveMinimum,
    "dependencies": _Compiler._dependencies,
}
"""The meta-schema keywords understood, each adding its constraint to the check being built."""


@lru_cache(maxsize=None)
def _predicate(cls: type) -> Callable[[Any], bool] | None:
    """The compiled predicate of ``cls``'s meta-schema (None: not compilable, use jsonschema)."""
    try:
        compiler = _Compiler(cls)
        return compiler.reference((compiler.root_uri, "")).ok
    except (_Unsupported, KeyError, IndexError, ValueError, TypeError, re.error):
        return None


def certainly_valid(cls: type, schema: Any) -> bool:
    """True only when ``schema`` (a document read from JSON) satisfies the meta-schema of
    validator class ``cls``; False when it does not or when this check cannot tell. Cost: one
    walk over the document's keys."""
    predicate = _predicate(cls)
    if predicate is None:
        return False
    try:
        return predicate(schema)
    except RecursionError:  # nesting the caller's depth check allows but this walk cannot take
        return False
