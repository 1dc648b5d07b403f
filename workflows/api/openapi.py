"""The OpenAPI document states the rules the body parser enforces on every request (workflows/api/json_body.py).

Any string or object key anywhere in a request body is refused when it holds NUL (PostgreSQL cannot store
it), whatever field it is in, unknown fields included. pydantic's schemas say nothing of that, so a client
or a fuzzer that trusts the document would send bodies the server refuses. This pass adds the rule to every
schema a request body uses: a pattern on each string, ``propertyNames`` on each object, and
``StorableJSON`` (any JSON value without NUL, defined recursively) wherever a field takes any JSON,
unknown fields included.
"""

from __future__ import annotations

from typing import Any

# ECMA-262 and Python both read \u0000 in a character class; the document's JSON holds "^[^\\u0000]*$".
NO_NUL = r"^[^\u0000]*$"
STORABLE_JSON = "StorableJSON"
_REF = f"#/components/schemas/{STORABLE_JSON}"
_ANNOTATIONS = {"title", "description", "default", "examples"}


def storable_json_schema() -> dict[str, Any]:
    any_value = {"$ref": _REF}
    return {
        "title": STORABLE_JSON,
        "description": "Any JSON value the console can store: no NUL (\\u0000) in any string or object key, "
        "nested at most 64 levels, integers of at most 64 digits (docs/API.md, Errors).",
        "anyOf": [
            {"type": "null"},
            {"type": "boolean"},
            {"type": "number"},
            {"type": "string", "pattern": NO_NUL},
            {"type": "array", "items": any_value},
            {"type": "object", "propertyNames": {"pattern": NO_NUL}, "additionalProperties": any_value},
        ],
    }


def _takes_any_json(node: Any) -> bool:
    return node is True or (isinstance(node, dict) and set(node) <= _ANNOTATIONS)


def _storable(node: Any) -> Any:
    """The schema ``node`` with the NUL rule added to every string, object and any-JSON value in it."""
    if _takes_any_json(node):
        return {**(node if isinstance(node, dict) else {}), "$ref": _REF}
    if not isinstance(node, dict):
        return node
    node = dict(node)
    for key in ("items", "not", "if", "then", "else"):
        if key in node:
            node[key] = _storable(node[key])
    for key in ("anyOf", "allOf", "oneOf"):
        if key in node:
            node[key] = [_storable(branch) for branch in node[key]]
    if "properties" in node:
        node["properties"] = {name: _storable(schema) for name, schema in node["properties"].items()}
    kind = node.get("type")
    if kind == "string" and not {"pattern", "enum", "const"} & set(node):
        node["pattern"] = NO_NUL
    if kind == "object":
        node["propertyNames"] = {"pattern": NO_NUL}
        # Unknown fields are ignored, but they are parsed: the same rule holds for them.
        extra = node.get("additionalProperties", True)
        node["additionalProperties"] = _storable(extra) if extra is not False else False
    return node


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"].rsplit("/", 1)[-1]} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(_refs(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(value) for value in node))
    return set()


def with_storage_rules(document: dict[str, Any]) -> dict[str, Any]:
    """Add the NUL rule to the request bodies' schemas of ``document`` (in place; answers it)."""
    schemas: dict[str, Any] = document.setdefault("components", {}).setdefault("schemas", {})
    bodies = [
        op["requestBody"]
        for path in document.get("paths", {}).values()
        for op in path.values()
        if isinstance(op, dict) and "requestBody" in op
    ]
    pending, seen = set().union(*(_refs(body) for body in bodies)), set()
    while pending:  # every schema a request body reaches, through any depth of $ref
        name = pending.pop()
        if name in seen or name not in schemas:
            continue
        seen.add(name)
        pending |= _refs(schemas[name])
    for name in seen:
        schemas[name] = _storable(schemas[name])
    schemas[STORABLE_JSON] = storable_json_schema()
    return document
