"""The one validation path: JSON Schema compiled once with jsonschema-rs.

A schema without ``$schema`` is JSON Schema 2020-12 (JS-01). Remote ``$ref``s are
never fetched (JS-05): the validator runs offline and a schema whose reference
cannot be resolved is refused at registration rather than treated as permissive.
"""

from __future__ import annotations

from typing import Any

__all__ = ["compile_schema", "describe_errors", "format_errors", "Relations", "SUPPORTED_DIALECTS"]

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


class Relations:
    """Parameters that exclude each other, and parameters that need others, declared on a tool
    (``exclusive=[("path", "uid")]``, ``depends_on={"width": "height"}``) and enforced here,
    after the inputSchema, on every call.

    JSON Schema says this with ``oneOf``/``not`` or ``dependentRequired`` at the root, which the
    Anthropic API, OpenAI and Gemini refuse or drop (mcpkit/hosts.py): so the schema a host sees
    stays flat, the rule is written in the tool's description and the parameters' own, and the
    server holds every call to it. A parameter counts as given when its key is present with a
    value other than null (strict hosts send null for an optional parameter left out).
    """

    __slots__ = ("exclusive", "depends_on")

    def __init__(self, exclusive: Any = (), depends_on: Any = None) -> None:
        groups = []
        for group in exclusive or ():
            if isinstance(group, str) or len(tuple(group)) < 2 or not all(isinstance(p, str) for p in group):
                raise ValueError(f"exclusive: {group!r} is not a group of two or more parameter names")
            groups.append(tuple(group))
        needs: dict[str, tuple[str, ...]] = {}
        for name, others in (depends_on or {}).items():
            others = (others,) if isinstance(others, str) else tuple(others)
            if not isinstance(name, str) or not others or not all(isinstance(o, str) for o in others):
                raise ValueError(f"depends_on: {name!r} must map to a parameter name or a list of them")
            needs[name] = others
        self.exclusive: tuple[tuple[str, ...], ...] = tuple(groups)
        self.depends_on: dict[str, tuple[str, ...]] = needs

    def __bool__(self) -> bool:
        return bool(self.exclusive or self.depends_on)

    def check_schema(self, schema: dict[str, Any], label: str) -> None:
        """ValueError at registration for a relation the schema makes meaningless: an unknown
        parameter, or a required one in an exclusive group (no call could pass)."""
        props = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        names = [p for g in self.exclusive for p in g] + [p for n, o in self.depends_on.items() for p in (n, *o)]
        unknown = sorted({p for p in names if p not in props})
        if unknown:
            raise ValueError(f"{label}: exclusive/depends_on name unknown parameter(s) {', '.join(unknown)}")
        for group in self.exclusive:
            both = [p for p in group if p in required]
            if len(both) > 1:
                raise ValueError(f"{label}: {' and '.join(both)} are required and exclusive: no call could pass")

    def errors(self, arguments: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The relations ``arguments`` break, as describe_errors words them; None when none."""
        out: list[dict[str, Any]] = []
        for group in self.exclusive:
            given = [p for p in group if arguments.get(p) is not None]
            if len(given) > 1:
                message = f"{_names(given)} are mutually exclusive: give only one of {_names(group, 'or')}"
                out.append({"path": "/" + given[1], "message": message})
        for name, others in self.depends_on.items():
            if arguments.get(name) is None:
                continue
            missing = [o for o in others if arguments.get(o) is None]
            if missing:
                out.append({"path": "/" + name, "message": f"{name} requires {_names(missing)}: give "
                            f"{'it' if len(missing) == 1 else 'them'} too, or leave {name} out"})
        return out or None

    def sentence(self) -> str:
        """The relations in words, for the tool's description."""
        parts = [f"Give at most one of {_names(g, 'or')}." for g in self.exclusive]
        parts += [f"{n} requires {_names(o)}." for n, o in self.depends_on.items()]
        return " ".join(parts)

    def property_notes(self) -> dict[str, str]:
        """What each parameter's own description adds: hosts that show the model parameter
        descriptions, not the tool's, still say it."""
        notes: dict[str, list[str]] = {}
        for group in self.exclusive:
            for p in group:
                notes.setdefault(p, []).append(f"Not with {_names([o for o in group if o != p], 'or')}.")
        for name, others in self.depends_on.items():
            notes.setdefault(name, []).append(f"Requires {_names(others)}.")
        return {p: " ".join(n) for p, n in notes.items()}

    def advertise(self, schema: dict[str, Any]) -> dict[str, Any]:
        """A copy of a generated schema with each related parameter's description completed."""
        props = dict(schema.get("properties") or {})
        for name, note in self.property_notes().items():
            prop = dict(props[name])
            prop["description"] = f"{prop['description']} {note}" if prop.get("description") else note
            props[name] = prop
        return {**schema, "properties": props}


def _names(names: Any, word: str = "and") -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" {word} " + names[-1]
