"""The schema resources of one JSON Schema document: base URIs, ``$id``s and anchors.

A ``$ref`` is resolved against the base URI of the schema that holds it: the nearest enclosing
``$id`` (draft-04: ``id``), resolved against its own enclosing base, down from the root's (or a
placeholder when the root has none). A target is a resource of the document (an ``$id``), then
a JSON pointer or a plain-name anchor (``$anchor``, or a draft 4-7 ``$id`` of ``#name``) inside
it. References outside the document resolve only to the resources the caller hands in
(:func:`resource_documents`, like ``referencing.Registry``): nothing is ever fetched. Cost: one
iterative walk of the document through the keywords that hold schemas, and of the given
resources the first time a reference leaves the document; lifetime: one compile.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, NamedTuple
from urllib.parse import unquote, urljoin, urlsplit

from .errors import InvalidSchemaError

try:
    from ._kernels import keys_present as _keys_present_kernel
except ImportError:  # a source tree without the built extension: the Python walk does the work
    _keys_present_kernel = None

DEFAULT_BASE = "https://enforcer.invalid/schema.json"
"""Base URI of a document whose root has no ``$id`` (relative references resolve against it)."""

SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
SCHEMA_VALUES = frozenset({"items", "additionalItems", "additionalProperties", "not", "if", "then", "else",
                           "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties"})
"""Keywords whose values are sub-schemas (maps of them, lists of them, or one)."""


class Target(NamedTuple):
    """What a reference names: the sub-schema and its JSON pointer from the document root
    (``None`` when the reference does not resolve, with the reason)."""

    schema: Any
    pointer: str | None
    reason: str = ""
    malformed: bool = False  # the document itself is wrong (a pointer to nothing), not a limit


def _split(uri: str) -> tuple[str, str]:
    base, _, fragment = uri.partition("#")
    return base, unquote(fragment)


def join(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` (a fragment-only ``ref`` keeps ``base``, whatever its
    scheme: ``urljoin`` leaves ``urn:`` bases alone)."""
    if ref.startswith("#"):
        return _split(base)[0] + ref
    return urljoin(base, ref)


def normalise_resources(resources: Any) -> tuple[tuple[str, str], ...]:
    """``{uri: schema}`` (a mapping, or pairs) as sorted ``(uri, canonical JSON)`` pairs, the
    hashable form ``SchemaOptions.resources`` keeps. Raises ``ValueError`` naming the entry: a
    URI must be absolute, without a fragment; a schema must be an object or a boolean."""
    if not resources:
        return ()
    items = resources.items() if isinstance(resources, Mapping) else resources
    out: dict[str, str] = {}
    for entry in items:
        if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], str) and not isinstance(resources, Mapping):
            uri, text = entry  # already normalised
        else:
            uri, schema = entry
            if not isinstance(schema, (dict, bool)):
                raise ValueError(f"resources[{uri!r}] must be a schema (an object or a boolean), "
                                 f"not {type(schema).__name__}")
            try:
                text = json.dumps(schema, sort_keys=True, ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"resources[{uri!r}] is not a JSON document: {exc}") from None
        if not isinstance(uri, str) or not urlsplit(uri).scheme or _split(uri)[1] or uri.endswith("#"):
            raise ValueError(f"resources: {uri!r} must be an absolute URI without a fragment")
        out[uri] = text
    return tuple(sorted(out.items()))


@lru_cache(maxsize=64)
def resource_documents(resources: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """The parsed resources (``uri -> schema``) of :func:`normalise_resources`' pairs. Cached per
    resource set: the documents are shared, never modified. Each is checked as a schema only
    when a reference first leads into it (:func:`check_resource`)."""
    documents = {}
    for uri, text in resources:
        try:
            documents[uri] = json.loads(text)
        except ValueError as exc:
            raise InvalidSchemaError(f"{uri}#", f"the resource is not JSON: {exc}") from None
    return documents


def check_resource(uri: str, document: Any, dialect_uri: str | None) -> None:
    """Check a given resource like a schema document (shape, meta-schema): under its own
    ``$schema``, else under ``dialect_uri`` (the referencing schema's). An error names the
    resource's URI in its pointer."""
    from .schema_check import check_schema  # schema_check sits above this module

    if isinstance(document, dict) and "$schema" not in document and dialect_uri:
        document = {**document, "$schema": dialect_uri}
    try:
        check_schema(document)
    except InvalidSchemaError as exc:
        raise InvalidSchemaError(f"{uri}#{exc.pointer}", exc.reason) from None


class ResourceIndex:
    """Resources (absolute URI without fragment -> (schema, pointer)), anchors ((resource URI,
    name) -> (schema, pointer)) and the base URI of every schema object met by the walk. The
    pointers of schemas in a given resource are ``<uri>#<pointer>``."""

    def __init__(self, root: Any, id_keyword: str, ref_siblings_ignored: bool,
                 external: Mapping[str, Any] | None = None) -> None:
        """``id_keyword``: ``"$id"`` (draft-06 on) or ``"id"`` (draft-04); with
        ``ref_siblings_ignored`` (drafts 4-7) an ``$id`` beside ``$ref`` is ignored too.
        ``external``: the documents given beside the schema, by URI (walked on first need)."""
        self.root = root
        self.resources: dict[str, tuple[Any, str]] = {}
        self.anchors: dict[tuple[str, str], tuple[Any, str]] = {}
        self.dynamic_anchors: dict[tuple[str, str], tuple[Any, str]] = {}
        """``(resource base, name) -> (schema, pointer)`` of every ``$dynamicAnchor`` (each is a
        plain-name anchor too)."""
        self._bases: dict[int, str] = {}
        self._pointers: dict[int, str] = {}
        self._targets: dict[tuple[str, str], Target] = {}
        """(reference, base URI) -> what :meth:`resolve` found: the same ``$ref`` of a definition
        is met at every depth and path it is built at (35,838 resolutions in JSON Schema Store's
        web-types)."""
        self._keep: list[Any] = []  # the objects whose ids key _bases stay alive
        self._id_keyword, self._ref_siblings_ignored = id_keyword, ref_siblings_ignored
        self._external = dict(external or {})
        root_id = root.get(id_keyword) if isinstance(root, dict) and not (ref_siblings_ignored and "$ref" in root) \
            else None
        self.root_base = _split(join(DEFAULT_BASE, root_id))[0] if isinstance(root_id, str) else DEFAULT_BASE
        self.resources[self.root_base] = (root, "")
        self._walk(root, "", DEFAULT_BASE)

    def _walk_external(self) -> None:
        """Index every given document (once), each under its URI and its own ``$id``s."""
        external, self._external = self._external, {}
        for uri, document in external.items():
            self.resources.setdefault(uri, (document, f"{uri}#"))
            self._walk(document, f"{uri}#", uri)

    def _walk(self, root: Any, prefix: str, root_base: str) -> None:
        id_keyword, ref_siblings_ignored = self._id_keyword, self._ref_siblings_ignored
        stack: list[tuple[Any, str, str]] = [(root, prefix, root_base)]
        while stack:
            node, pointer, base = stack.pop()
            if not isinstance(node, dict):
                continue
            own = node.get(id_keyword)
            if isinstance(own, str) and not (ref_siblings_ignored and "$ref" in node):
                if own.startswith("#"):
                    if own[1:]:
                        self.anchors[(_split(base)[0], own[1:])] = (node, pointer)
                else:
                    base = _split(join(base, own))[0]
                    self.resources.setdefault(base, (node, pointer))
            anchor = node.get("$anchor")
            if isinstance(anchor, str):
                self.anchors[(_split(base)[0], anchor)] = (node, pointer)
            dynamic = node.get("$dynamicAnchor")
            if isinstance(dynamic, str):
                self.dynamic_anchors[(_split(base)[0], dynamic)] = (node, pointer)
                self.anchors.setdefault((_split(base)[0], dynamic), (node, pointer))
            self._bases[id(node)] = base
            self._pointers[id(node)] = pointer
            self._keep.append(node)
            for key, sub in node.items():  # (a pointer is written only for a schema keyword's values)
                if key in SCHEMA_MAPS and isinstance(sub, dict):
                    where = f"{pointer}/{escape(key)}"
                    stack.extend((v, f"{where}/{escape(k)}", base) for k, v in sub.items() if isinstance(v, dict))
                elif key in SCHEMA_LISTS and isinstance(sub, list):
                    where = f"{pointer}/{escape(key)}"
                    stack.extend((v, f"{where}/{i}", base) for i, v in enumerate(sub) if isinstance(v, dict))
                elif key in SCHEMA_VALUES and isinstance(sub, dict):
                    stack.append((sub, f"{pointer}/{escape(key)}", base))

    def holds(self, schema: Any) -> bool:
        """Whether the walk met ``schema``: one of the documents' own schema objects (their ids
        stay theirs: the walk keeps them alive), not one the compiler made."""
        return id(schema) in self._bases

    def base_of(self, holder: Any) -> str:
        """The base URI a ``$ref`` in ``holder`` resolves against (the root's for schemas the
        walk did not meet: compiler-made combinations of the document's schemas)."""
        return self._bases.get(id(holder), self.root_base)

    def entered(self, start: str, holder: Any) -> list[str] | None:
        """The bases of the resources a value enters walking down from the schema at pointer
        ``start`` to ``holder`` (the resources rooted strictly below ``start``, on the way, in
        order; None when ``holder`` is a schema the walk did not meet)."""
        end = self._pointers.get(id(holder))
        if end is None:
            return None
        inside = [(pointer, base) for base, (_, pointer) in self.resources.items()
                  if _within(pointer, end) and _within(start, pointer) and pointer != start]
        return [base for _, base in sorted(inside, key=lambda entry: len(entry[0]))]

    def resolve(self, ref: str, holder: Any) -> Target:
        """The sub-schema ``ref`` (in the schema object ``holder``) names (remembered by reference
        and base: the resources do not change once the given documents are walked)."""
        key = (ref, self.base_of(holder))
        hit = self._targets.get(key)
        if hit is None:
            hit = self._targets[key] = self._resolve(ref, key[1])
        return hit

    def _resolve(self, ref: str, base: str) -> Target:
        uri, fragment = _split(join(base, ref))
        resource = self.resources.get(uri)
        if resource is None and self._external:
            self._walk_external()
            resource = self.resources.get(uri)
        if resource is None:
            return Target(None, None, f"{ref!r} names {uri!r}, which is neither a resource of this document "
                                      "nor one of the given resources (nothing is fetched: pass it in resources)")
        node, pointer = resource
        if fragment and not fragment.startswith("/"):
            found = self.anchors.get((uri, fragment))
            if found is None:
                return Target(None, None, f"anchor {fragment!r} is not defined in {uri!r}")
            return Target(*found)
        found = follow_pointer(node, fragment)
        if found is None:
            return Target(None, None, f"$ref {ref!r} does not resolve", malformed=True)
        node, parts = found
        return Target(node, pointer + "".join(f"/{escape(part)}" for part in parts))


def _within(outer: str, inner: str) -> bool:
    """Whether the schema at pointer ``inner`` lies in (or is) the one at ``outer``."""
    return inner == outer or inner.startswith(outer.rstrip("/") + "/") or (outer.endswith("#") and
                                                                        inner.startswith(outer))


_REFERENCE_KEYWORDS = frozenset({"$ref", "$dynamicRef", "$recursiveRef"})


def holds_reference(schema: Any) -> bool:
    """Whether a reference appears anywhere in ``schema`` (a key named like one counts too): what
    it names depends on where the schema stands; without one, base URIs and anchors inside it
    change nothing, so it means the same wherever it stands. Cost: one walk over the schema."""
    return holds_key(schema, _REFERENCE_KEYWORDS)


def holds_key(value: Any, keys: frozenset[str]) -> bool:
    """Whether an object with one of ``keys`` appears anywhere in the JSON ``value`` (the walk
    stops at the first)."""
    return bool(keys_present(value, keys, enough=1))


def keys_present(value: Any, keys: frozenset[str], enough: int | None = None) -> frozenset[str]:
    """Those of ``keys`` that some object anywhere in the JSON ``value`` has. Cost: one walk
    over ``value``, stopping once every key (or ``enough`` of them) was found: by the compiled
    :func:`enforcer._kernels.keys_present` when built (a C step per value: 13 -> 4.5 us for a
    2 KB schema), else (and for a document holding a subclass of dict) by
    :func:`_keys_present_reference`."""
    wanted = len(keys) if enough is None else enough
    found = _keys_present_kernel(value, keys, wanted) if _keys_present_kernel is not None else None
    return found if found is not None else _keys_present_reference(value, keys, wanted)


def _keys_present_reference(value: Any, keys: frozenset[str], wanted: int) -> frozenset[str]:
    """:func:`keys_present` in Python: the fallback without the compiled kernels and the oracle
    of their differential test."""
    found: set[str] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if not keys.isdisjoint(v.keys()):
                found |= keys & v.keys()
                if len(found) >= wanted:
                    break
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return frozenset(found)


def follow_pointer(node: Any, pointer: str) -> tuple[Any, list[str]] | None:
    """The value the JSON pointer ``pointer`` (``""`` or ``"/a/0/b~1c"``) names in ``node``,
    with its unescaped tokens; None when it names nothing. Cost: one step per token."""
    parts = []
    for raw in pointer.split("/")[1:] if pointer else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
        parts.append(part)
    return node, parts


def escape(name: str) -> str:
    """One JSON-pointer token."""
    return name.replace("~", "~0").replace("/", "~1")
