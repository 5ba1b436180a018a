"""The compiled meta-schema predicate (enforcer/meta_schema.py) against jsonschema, its oracle:
it may clear a document only when jsonschema finds no violation (sound), and it clears the
well-formed documents it is there to speed up (useful)."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import pytest

from enforcer.meta_schema import certainly_valid
from enforcer.schema_check import validator_class

DIALECTS = {
    "draft-04": ("http://json-schema.org/draft-04/schema#", jsonschema.Draft4Validator),
    "draft-06": ("http://json-schema.org/draft-06/schema#", jsonschema.Draft6Validator),
    "draft-07": ("http://json-schema.org/draft-07/schema#", jsonschema.Draft7Validator),
    "2019-09": ("https://json-schema.org/draft/2019-09/schema", jsonschema.Draft201909Validator),
    "2020-12": ("https://json-schema.org/draft/2020-12/schema", jsonschema.Draft202012Validator),
}
SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
KEYWORDS = ("type", "required", "enum", "minLength", "maxItems", "items", "additionalProperties", "properties",
            "$ref", "allOf", "anyOf", "oneOf", "not", "multipleOf", "exclusiveMinimum", "exclusiveMaximum",
            "minimum", "pattern", "$id", "$anchor", "dependencies", "dependentRequired", "dependentSchemas",
            "prefixItems", "const", "$defs", "definitions", "format", "uniqueItems", "contains", "propertyNames",
            "if", "then", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$vocabulary", "minContains",
            "unevaluatedProperties", "patternProperties", "additionalItems", "title", "$comment", "default")
VALUES = (5, -1, 1.5, 0, 2.0, -0.5, "x", "", "^a", "#/a", "a#b", [], ["a", "a"], ["string", "string"], ["a"],
          [1, "a"], [1, True], [1, 1.0], [[1], [1]], [{}], {}, {"a": "b"}, {"a": ["b"]}, {"a": 5}, {"type": 5},
          None, True, False)


def oracle(cls: type, schema: Any) -> bool:
    """jsonschema's verdict (formats not asserted, as in schema_check)."""
    return next(iter(cls(cls.META_SCHEMA).iter_errors(schema)), None) is None


def sub_schemas(schema: Any) -> Iterator[dict]:
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def mutants(schema: Any, count: int, rng: random.Random) -> Iterator[Any]:
    """``schema`` with one keyword of one of its objects replaced by a (often malformed) value."""
    for _ in range(count):
        doc = copy.deepcopy(schema)
        nodes = list(sub_schemas(doc))
        node = rng.choice(nodes)
        key = rng.choice(list(node)) if node and rng.random() < 0.6 else rng.choice(KEYWORDS)
        node[key] = copy.deepcopy(rng.choice(VALUES))
        yield doc


def check_agrees(schema: Any) -> bool:
    """Assert soundness on ``schema``; returns the predicate's verdict."""
    schema = json.loads(json.dumps(schema))  # what the schema check reads: a document from JSON
    cls = validator_class(schema)
    fast = certainly_valid(cls, schema)
    if fast:
        assert oracle(cls, schema), f"cleared a document jsonschema rejects: {json.dumps(schema)[:300]}"
    return fast


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
@pytest.mark.parametrize("keyword,value", [
    ("type", 5), ("type", "strnig"), ("type", ["string", "string"]), ("type", []), ("required", "ab"),
    ("required", ["a", "a"]), ("required", [1]), ("minLength", -1), ("minLength", 1.5), ("minLength", True),
    ("maxItems", "3"), ("multipleOf", 0), ("multipleOf", -2), ("properties", {"a": 5}), ("properties", []),
    ("items", 5), ("allOf", []), ("anyOf", {}), ("not", "x"), ("$ref", 5), ("pattern", 5), ("enum", 5),
    ("uniqueItems", "yes"), ("additionalProperties", 5), ("definitions", {"a": 5}), ("dependencies", {"a": 5}),
    ("minimum", "0"), ("title", 5), ("format", 5),
])
def test_malformed_keywords_are_never_cleared(dialect: str, keyword: str, value: Any) -> None:
    uri, cls = DIALECTS[dialect]
    for schema in ({keyword: value}, {"type": "object", "properties": {"a": {keyword: value}}},
                   {"anyOf": [{"type": "string"}, {"items": {keyword: value}}]}):
        schema = {"$schema": uri, **schema}
        if not oracle(cls, schema):
            assert not certainly_valid(cls, schema), schema


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_dialect_specific_forms(dialect: str) -> None:
    uri, cls = DIALECTS[dialect]
    cases = [
        {"type": "integer", "minimum": 0, "exclusiveMinimum": True},  # draft 4 only
        {"exclusiveMinimum": 0},  # draft 6 on
        {"exclusiveMaximum": True},  # draft 4: needs maximum
        {"minLength": 2.0},  # an integer from draft 6 on
        {"required": []},  # draft 4: at least one name
        {"enum": []},
        {"$defs": {"a": {"type": 5}}},  # a schema only from 2019-09 on
        {"$anchor": "1bad"}, {"$id": "x#frag"}, {"$dynamicAnchor": "ok"},
        {"items": [{"type": "string"}]}, {"prefixItems": []},
        {"dependentRequired": {"a": ["b", "b"]}}, {"$vocabulary": {"x": 1}},
        True, False, {"$ref": "#", "type": 5},  # $ref hides its siblings up to draft 7
    ]
    cleared = 0
    for case in cases:
        schema = {"$schema": uri, **case} if isinstance(case, dict) else case
        fast = certainly_valid(cls, schema)
        assert not fast or oracle(cls, schema), schema
        cleared += fast
    assert cleared >= 4, f"{dialect}: the predicate cleared only {cleared} well-formed documents"


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_mutated_project_schemas_agree(dialect: str) -> None:
    """Seeded mutations of the project's example schemas (tool parameters), in every dialect."""
    uri, _ = DIALECTS[dialect]
    rng = random.Random(dialect)
    cleared = total = 0
    for path in sorted(SCHEMAS.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        schema = {"$schema": uri, "anyOf": [tool["function"]["parameters"] for tool in doc]} if isinstance(doc, list) \
            else {**doc, "$schema": uri}
        fast = check_agrees(schema)
        if oracle(validator_class(schema), schema):  # travel.json's exclusiveMinimum: 0 is not draft 4
            total += 1
            cleared += fast
        for mutant in mutants(schema, 60, rng):
            check_agrees(mutant)
    assert cleared == total, f"the predicate cleared {cleared} of the {total} well-formed example schemas"


def test_draft3_goes_to_jsonschema() -> None:
    """Draft 3's meta-schema uses keywords the compiler does not model: nothing is cleared."""
    schema = {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object"}
    assert validator_class(schema) is jsonschema.Draft3Validator
    assert not certainly_valid(jsonschema.Draft3Validator, schema)


def test_deep_document_is_not_cleared_by_a_recursion_error() -> None:
    schema: Any = {"type": "string"}
    for _ in range(6000):  # past Python's recursion limit and the compiled check's depth limit
        schema = {"items": schema}
    assert not certainly_valid(jsonschema.Draft202012Validator, schema)


@pytest.mark.corpus
def test_corpus_schemas_and_mutants_agree(corpus_dir: Path) -> None:
    """A seeded sample of 600 JSONSchemaBench and MaskBench schemas, plus one mutant of each
    (the oracle costs ~25 ms a document): never a document cleared that jsonschema rejects, and
    at least 99% of the valid originals cleared."""
    rng = random.Random(0)
    valid = cleared = 0
    paths = sorted((corpus_dir / "jsonschemabench").glob("*.json")) + sorted((corpus_dir / "maskbench").glob("*.json"))
    for path in rng.sample(paths, min(600, len(paths))):
        schema = json.loads(path.read_text(encoding="utf-8")).get("schema")
        if not isinstance(schema, (dict, bool)):
            continue
        schema = json.loads(json.dumps(schema))
        cls = validator_class(schema)
        fast, right = certainly_valid(cls, schema), oracle(cls, schema)
        assert right or not fast, f"{path.name}: cleared a document jsonschema rejects"
        valid += right
        cleared += fast
        if isinstance(schema, dict) and schema:
            for mutant in mutants(schema, 1, rng):
                check_agrees(mutant)
    assert valid and cleared >= 0.99 * valid, f"cleared {cleared} of {valid} valid corpus schemas"


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_compiled_checks_are_the_reference(dialect: str) -> None:
    """The predicate built on the compiled MetaCheck gives the verdict of the one built on the
    Python reference check, on the project's schemas, their seeded mutants and every malformed
    keyword value above."""
    from enforcer import meta_schema
    if meta_schema._Check is meta_schema._CheckReference:
        pytest.skip("the compiled kernels are not built")
    uri, cls = DIALECTS[dialect]
    compilers = [meta_schema._Compiler(cls, kind) for kind in (meta_schema._Check, meta_schema._CheckReference)]
    compiled, reference = (c.reference((c.root_uri, "")).ok for c in compilers)
    rng = random.Random(f"compiled {dialect}")
    documents = [{"$schema": uri, keyword: value} for keyword in KEYWORDS for value in VALUES]
    for path in sorted(SCHEMAS.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        schema = {"$schema": uri, "anyOf": [tool["function"]["parameters"] for tool in doc]} if isinstance(doc, list) \
            else {**doc, "$schema": uri}
        documents += [schema, *mutants(schema, 40, rng)]
    documents = [json.loads(json.dumps(d)) for d in documents]
    verdicts = [(compiled(d), reference(d)) for d in documents]
    assert all(a == b for a, b in verdicts)
    assert 0 < sum(a for a, _ in verdicts) < len(verdicts)  # both verdicts occur
