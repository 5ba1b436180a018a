"""A compiled schema checked against jsonschema (the oracle) on a pool of values, shared by the
keyword tests that compare in both modes."""

import json

import jsonschema

from enforcer.json_schema import SchemaOptions
from enforcer.matcher import compile_schema_dfa


def check_against_jsonschema(schema, pool):
    """In both modes nothing invalid is accepted; in spec mode exactly the valid values are
    (strict mode only refuses more: undeclared keys). Free-form values nest 3 deep."""
    validator = jsonschema.Draft202012Validator(schema)
    for strict in (False, True):
        dfa = compile_schema_dfa(schema, SchemaOptions(strict=strict, free_form_depth=3))
        for value in pool:
            valid = validator.is_valid(value)
            accepted = dfa.matches(json.dumps(value))
            assert not (accepted and not valid), ("accepted invalid", strict, value)
            if not strict:
                assert accepted == valid, ("rejected valid", value)


_ECMA_CLASSES = {"d": "0-9", "w": "A-Za-z0-9_"}
"""ECMA-262's ASCII classes: Python's ``re`` reads ``\\d`` and ``\\w`` as Unicode classes."""
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


def ecma_pattern(pattern: str) -> str:
    """``pattern`` for Python's ``re`` with ECMA-262's ``\\d``, ``\\D``, ``\\w`` and ``\\W``
    (ASCII: ``"۶"`` is no digit there, as in the compiler), in and out of classes (``\\D`` and
    ``\\W`` inside a class are left as they are)."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            escaped = pattern[i + 1]
            lower = escaped.lower()
            if lower in _ECMA_CLASSES and (escaped == lower or not in_class):
                ranges = _ECMA_CLASSES[lower]
                out.append(ranges if in_class else f"[{'' if escaped == lower else '^'}{ranges}]")
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        out.append(char)
        i += 1
    return "".join(out)


def ecma_patterns(schema):
    """``schema`` with every ``pattern`` and ``patternProperties`` key read as ECMA-262 reads it
    (:func:`ecma_pattern`), for validating with jsonschema; data keywords are left alone."""
    if isinstance(schema, list):
        return [ecma_patterns(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in _DATA_KEYWORDS:
            out[key] = value
        elif key == "pattern" and isinstance(value, str):
            out[key] = ecma_pattern(value)
        elif key == "patternProperties" and isinstance(value, dict):
            out[key] = {ecma_pattern(p): ecma_patterns(sub) for p, sub in value.items()}
        else:
            out[key] = ecma_patterns(value)
    return out
