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
