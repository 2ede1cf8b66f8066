"""Arguments made from a tool's inputSchema: a plausible valid sample, and an invalid one."""

from __future__ import annotations

from typing import Any

__all__ = ["sample_arguments", "invalid_arguments", "required_of"]

_STRING_FORMATS = {
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "email": "user@example.com",
    "date-time": "2025-01-01T00:00:00Z",
    "date": "2025-01-01",
    "time": "00:00:00Z",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "hostname": "example.com",
    "ipv4": "127.0.0.1",
}


def required_of(schema: Any) -> list[str]:
    """The required property names of an object schema (an ill-formed ``required`` gives [])."""
    if not isinstance(schema, dict):
        return []
    required = schema.get("required")
    if not isinstance(required, list):
        return []
    return [r for r in required if isinstance(r, str)]


def _resolve(schema: Any, root: Any) -> Any:
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    node = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return {}
        node = node[part]
    return node


def _number(schema: dict[str, Any], integer: bool) -> int | float:
    low = schema.get("minimum")
    if isinstance(schema.get("exclusiveMinimum"), (int, float)) and not isinstance(schema["exclusiveMinimum"], bool):
        low = schema["exclusiveMinimum"] + 1
    high = schema.get("maximum")
    if isinstance(low, (int, float)) and not isinstance(low, bool):
        value: int | float = low
    elif isinstance(high, (int, float)) and not isinstance(high, bool) and high < 0:
        value = high
    else:
        value = 0
    if integer:
        return int(value) if float(value).is_integer() else int(value) + 1
    return value


def sample_value(schema: Any, root: Any = None, depth: int = 0) -> Any:
    """A value that ``schema`` plausibly accepts: const, enum, default, examples, or by type."""
    root = schema if root is None else root
    schema = _resolve(schema, root)
    if schema is True or not isinstance(schema, dict) or depth > 8:
        return "sample"
    if "const" in schema:
        return schema["const"]
    for key in ("enum", "examples"):
        values = schema.get(key)
        if isinstance(values, list) and values:
            return values[0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            usable = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            return sample_value((usable or options)[0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind is None:
        if "properties" in schema:
            kind = "object"
        elif isinstance(schema.get("allOf"), list) and schema["allOf"]:
            return sample_value(schema["allOf"][0], root, depth + 1)
    if kind == "object":
        return sample_arguments(schema, root, depth + 1)
    if kind == "array":
        count = schema.get("minItems") if isinstance(schema.get("minItems"), int) else 0
        return [sample_value(schema.get("items", {}), root, depth + 1) for _ in range(count)]
    if kind == "integer":
        return _number(schema, True)
    if kind == "number":
        return _number(schema, False)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    text = _STRING_FORMATS.get(str(schema.get("format")), "sample")
    least = schema.get("minLength")
    if isinstance(least, int) and len(text) < least:
        text = text + "x" * (least - len(text))
    return text


def sample_arguments(schema: Any, root: Any = None, depth: int = 0) -> dict[str, Any]:
    """Arguments for an object schema: its required properties, each with a sample value."""
    root = schema if root is None else root
    schema = _resolve(schema, root)
    if not isinstance(schema, dict):
        return {}
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    return {name: sample_value(props.get(name, {}), root, depth + 1) for name in required_of(schema)}


def invalid_arguments(schema: Any) -> tuple[dict[str, Any], str] | None:
    """Arguments the schema must refuse, and why; None when it requires nothing.

    The required properties are left out (``{}``): a server that fails to validate has nothing
    to act on, which keeps the probe harmless even for tools with side effects.
    """
    required = required_of(schema)
    if not required:
        return None
    return {}, "missing the required propert" + ("y " if len(required) == 1 else "ies ") + ", ".join(required)
