"""The schema resources of one JSON Schema document: base URIs, ``$id``s and anchors.

A ``$ref`` is resolved against the base URI of the schema that holds it: the nearest enclosing
``$id`` (draft-04: ``id``), resolved against its own enclosing base, down from the root's (or a
placeholder when the root has none). A target is a resource of the document (an ``$id``), then
a JSON pointer or a plain-name anchor (``$anchor``, or a draft 4-7 ``$id`` of ``#name``) inside
it. References outside the document are not resolved. Cost: one iterative walk of the document
through the keywords that hold schemas; lifetime: one compile.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import unquote, urljoin

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


class ResourceIndex:
    """Resources (absolute URI without fragment -> (schema, pointer)), anchors ((resource URI,
    name) -> (schema, pointer)) and the base URI of every schema object met by the walk."""

    def __init__(self, root: Any, id_keyword: str, ref_siblings_ignored: bool) -> None:
        """``id_keyword``: ``"$id"`` (draft-06 on) or ``"id"`` (draft-04); with
        ``ref_siblings_ignored`` (drafts 4-7) an ``$id`` beside ``$ref`` is ignored too."""
        self.root = root
        self.resources: dict[str, tuple[Any, str]] = {}
        self.anchors: dict[tuple[str, str], tuple[Any, str]] = {}
        self._bases: dict[int, str] = {}
        self._keep: list[Any] = []  # the objects whose ids key _bases stay alive
        root_id = root.get(id_keyword) if isinstance(root, dict) else None
        self.root_base = _split(join(DEFAULT_BASE, root_id))[0] if isinstance(root_id, str) else DEFAULT_BASE
        self.resources[self.root_base] = (root, "")
        stack: list[tuple[Any, str, str]] = [(root, "", DEFAULT_BASE)]
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
            self._bases[id(node)] = base
            self._keep.append(node)
            for key, sub in node.items():
                where = f"{pointer}/{escape(key)}"
                if key in SCHEMA_MAPS and isinstance(sub, dict):
                    stack.extend((v, f"{where}/{escape(k)}", base) for k, v in sub.items())
                elif key in SCHEMA_LISTS and isinstance(sub, list):
                    stack.extend((v, f"{where}/{i}", base) for i, v in enumerate(sub))
                elif key in SCHEMA_VALUES:
                    stack.append((sub, where, base))

    def base_of(self, holder: Any) -> str:
        """The base URI a ``$ref`` in ``holder`` resolves against (the root's for schemas the
        walk did not meet: compiler-made combinations of the document's schemas)."""
        return self._bases.get(id(holder), self.root_base)

    def resolve(self, ref: str, holder: Any) -> Target:
        """The sub-schema ``ref`` (in the schema object ``holder``) names."""
        uri, fragment = _split(join(self.base_of(holder), ref))
        resource = self.resources.get(uri)
        if resource is None:
            return Target(None, None, f"{ref!r} names {uri!r}, which is not a resource of this document "
                                      "(only references within the document are resolved)")
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
