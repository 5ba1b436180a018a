"""Valid values that the strict compiler used to reject, each reduced from a jsonschemabench
schema (issue 12): one test per root cause, each failing on the code before its fix."""

import json

from enforcer.json_schema import SchemaOptions
from enforcer.matcher import compile_schema_dfa


def accepts(schema, value, **options) -> bool:
    return compile_schema_dfa(schema, SchemaOptions(**options)).matches(json.dumps(value))


def test_keys_a_validator_ignores_do_not_stop_a_merge():
    """Two ``allOf`` parts whose only conflict is a key no validator reads (jsonschemabench's
    ``_id``, Github_hard o81160) merge into one object: every part's properties are declared."""
    schema = {"allOf": [
        {"_id": "#/definitions/service", "type": "object", "properties": {"build": {"type": "string"}}},
        {"_id": "#/definitions/constraints", "properties": {"image": {"type": "string"}}, "required": ["build"]}]}
    assert accepts(schema, {"build": "a", "image": "b"})
    assert not accepts(schema, {"image": "b"})
    assert not accepts(schema, {"build": "a", "other": 1})
    assert not accepts(schema, {"build": 1})
