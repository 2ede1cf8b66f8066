"""The one validation path: JSON Schema compiled once with jsonschema-rs.

A schema without ``$schema`` is JSON Schema 2020-12 (JS-01). Remote ``$ref``s are
never fetched (JS-05): the validator runs offline and a schema whose reference
cannot be resolved is refused at registration rather than treated as permissive.
"""

from __future__ import annotations

from typing import Any

__all__ = ["compile_schema", "describe_errors", "format_errors", "SUPPORTED_DIALECTS"]

#: JS-03: the dialects mcpkit validates.
SUPPORTED_DIALECTS = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema",
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-04/schema",
    }
)


def _refuse_remote(uri: str) -> Any:
    raise ValueError(f"remote $ref {uri!r} is not fetched (JS-05)")


def compile_schema(schema: dict[str, Any], label: str) -> Any:
    """Compile ``schema``; ValueError naming ``label`` when it is not a usable schema (JS-02, JS-04)."""
    import jsonschema_rs  # imported on first use: start-up time

    if not isinstance(schema, dict):
        raise ValueError(f"{label}: a schema must be a JSON object")
    dialect = schema.get("$schema")
    if dialect is not None:
        if not isinstance(dialect, str) or dialect.rstrip("#") not in SUPPORTED_DIALECTS:
            raise ValueError(
                f"{label}: unsupported JSON Schema dialect {dialect!r}; supported: "
                + ", ".join(sorted(SUPPORTED_DIALECTS))
            )
    try:
        jsonschema_rs.meta.validate(schema)
    except AttributeError:  # older jsonschema-rs without the meta module
        pass
    except Exception as exc:  # noqa: BLE001 - the library raises its own error types
        raise ValueError(f"{label}: not a valid JSON Schema: {exc}") from None
    try:
        if dialect is None:  # JS-01: no $schema means 2020-12
            return jsonschema_rs.Draft202012Validator(schema, retriever=_refuse_remote)
        return jsonschema_rs.validator_for(schema, retriever=_refuse_remote)
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"{label}: cannot compile schema: {exc}") from None


def _pointer(path: Any) -> str:
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts) if parts else ""


def describe_errors(validator: Any, instance: Any, limit: int = 10) -> list[dict[str, Any]]:
    """Readable validation errors: where (a JSON pointer) and what was expected."""
    out: list[dict[str, Any]] = []
    for err in validator.iter_errors(instance):
        out.append({"path": _pointer(err.instance_path), "message": err.message})
        if len(out) >= limit:
            break
    return out


def format_errors(errors: list[dict[str, Any]]) -> str:
    parts = []
    for e in errors:
        where = e["path"] or "(root)"
        parts.append(f"{where}: {e['message']}")
    return "; ".join(parts)
