"""Checks a JSON Schema document before it is compiled: its shape (nesting depth, encodable
text) and its validity against its dialect's meta-schema.

Both front doors (``compile_json_schema`` and ``compile_tools``) call :func:`check_schema`, so a
malformed keyword (``"type": 5``, ``"required": "ab"``) is an :class:`InvalidSchemaError` with
its JSON pointer before any automaton is built, and nothing downstream meets a document that
would overflow Python's stack. Cost: one iterative walk over the document, plus one
meta-schema check: the dialect's meta-schema compiled to a predicate (:mod:`enforcer.meta_schema`,
~0.03 ms per tool schema) clears valid documents; jsonschema (~25 ms per tool schema in 2020-12)
runs only on the others, to name the first violation (cached by canonical JSON).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, NamedTuple

import jsonschema
from jsonschema.validators import validator_for

from .errors import InvalidSchemaError, SchemaTooComplexError
from .meta_schema import certainly_valid

try:
    from ._kernels import plain_document
except ImportError:  # a source tree without the built extension: the Python walk does the work
    plain_document = None

MAX_DOCUMENT_DEPTH = 128
"""Deepest nesting of JSON objects and arrays a schema document may have (the deepest of the
7,491 shared corpus schemas has 63). Deeper documents raise :class:`SchemaTooComplexError`."""


def pointer_of(path: Any) -> str:
    """A JSON pointer (RFC 6901) from a sequence of keys and indices."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def check_document(schema: Any) -> None:
    """Raise when ``schema`` nests deeper than :data:`MAX_DOCUMENT_DEPTH` or holds a string (key
    or value) that is not valid Unicode text (a lone surrogate cannot be written as UTF-8).
    Iterative: safe on any depth. Cost: one visit per value; a value's path is a link to its
    parent's (made whole only for an error), and ASCII text needs no encoding to be checked.
    The compiled :func:`enforcer._kernels.plain_document` clears a document first (a C step per
    value: 23 -> 2 us for a 2 KB schema); this walk then runs only to name a problem."""
    if plain_document is not None and plain_document(schema, MAX_DOCUMENT_DEPTH):
        return
    stack: list[tuple[Any, int, tuple | None]] = [(schema, 0, None)]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, str):
            if not value.isascii():
                _check_text(value, path)
        elif isinstance(value, dict):
            if depth >= MAX_DOCUMENT_DEPTH:
                raise SchemaTooComplexError(f"the schema document nests deeper than {MAX_DOCUMENT_DEPTH} "
                                            f"levels at {_pointer(path)}")
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidSchemaError(_pointer(path), f"object key {key!r} is not a string")
                if not key.isascii():
                    _check_text(key, path)
                stack.append((item, depth + 1, (path, key)))
        elif isinstance(value, (list, tuple)):
            if depth >= MAX_DOCUMENT_DEPTH:
                raise SchemaTooComplexError(f"the schema document nests deeper than {MAX_DOCUMENT_DEPTH} "
                                            f"levels at {_pointer(path)}")
            stack.extend((item, depth + 1, (path, i)) for i, item in enumerate(value))
        elif not (value is None or isinstance(value, (bool, int, float))):
            raise InvalidSchemaError(_pointer(path), f"not a JSON value: {type(value).__name__}")


def _pointer(path: tuple | None) -> str:
    """The JSON pointer of a linked path: (the parent's linked path or None, the key or index)."""
    parts = []
    while path is not None:
        path, step = path
        parts.append(step)
    return pointer_of(reversed(parts))


def _check_text(text: str, path: tuple | None) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidSchemaError(_pointer(path), f"text {text[:40]!r} holds a lone surrogate "
                                 f"(U+{ord(text[exc.start]):04X}), which is not Unicode text") from None


def validator_class(schema: Any) -> type:
    """The jsonschema validator of the schema's dialect (``$schema``; 2020-12 when absent or
    not a string: the meta-schema check then reports the malformed ``$schema``)."""
    if isinstance(schema, dict) and not isinstance(schema.get("$schema", ""), str):
        return jsonschema.Draft202012Validator
    return validator_for(schema, default=jsonschema.Draft202012Validator)


class MetaSchemaError(NamedTuple):
    """Where a document breaks its dialect's meta-schema, and how."""

    pointer: str
    message: str
    too_deep: bool = False
    """The check itself ran out of stack (the document nests too deeply to be checked)."""


@lru_cache(maxsize=4096)
def meta_schema_error(schema_json: str) -> MetaSchemaError | None:
    """jsonschema's first violation of the dialect's meta-schema by the schema in
    ``schema_json``, or None (~25 ms per tool schema in 2020-12: asked only about documents the
    compiled predicate does not clear). Cached: tool sets and requests share schemas."""
    schema = json.loads(schema_json)
    cls = validator_class(schema)
    try:
        # formats are not asserted here: the meta-schema's "format": "regex" would judge ECMA-262
        # patterns (\p{Letter}) by Python's re; patterns are checked when compiled
        error = next(iter(cls(cls.META_SCHEMA).iter_errors(schema)), None)
    except RecursionError:
        return MetaSchemaError("", "the document nests too deeply for its meta-schema check", too_deep=True)
    return None if error is None else MetaSchemaError(pointer_of(error.path), error.message)


def check_schema(schema: Any, schema_json: str | None = None, document_checked: bool = False) -> None:
    """Raise :class:`InvalidSchemaError` (with the pointer) unless ``schema`` is a well-formed
    schema document of its dialect; :class:`SchemaTooComplexError` when it nests too deeply to
    check. ``schema_json``: its canonical JSON when the caller has it already (the key of
    :func:`meta_schema_error`, written only for a document the predicate does not clear).
    ``document_checked``: the caller ran :func:`check_document` on it already (a walk of the
    whole document, not done twice)."""
    if not document_checked:
        check_document(schema)
    if certainly_valid(validator_class(schema), schema):
        return
    if schema_json is None:
        schema_json = json.dumps(schema, sort_keys=True, ensure_ascii=False)
    error = meta_schema_error(schema_json)
    if error is None:
        return
    if error.too_deep:
        raise SchemaTooComplexError(error.message)
    raise InvalidSchemaError(error.pointer, f"not a valid schema of its dialect: {error.message}")
