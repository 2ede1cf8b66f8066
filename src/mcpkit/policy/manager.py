"""Manager tools: one tool, several actions, each with its own parameters.

    files = server.manager("files", description="Work with the project's files.")

    @files.action(read_only=True)
    def read(path: SandboxPath) -> str: ...

    @files.action(destructive=True)
    def delete(path: SandboxPath) -> None: ...

What hosts see (the advertised inputSchema) is one flat object: ``action`` (an enum, required)
plus the union of the actions' parameters, each described with the actions it belongs to, and
no ``oneOf``/``anyOf``/``allOf`` at the root. The Anthropic API, OpenAI and Gemini refuse a root
combinator and fail the whole session (mcpkit/hosts.py has the sources), so the closed
``oneOf`` form (one branch per action) is only advertised with ``server.manager(...,
schema="oneOf")``. Either way each call is validated strictly against its own action's closed
branch, compiled once: a missing parameter or one that belongs to another action is refused
with E_SCHEMA_VALIDATION naming the action and the field.

Each action carries its own read-only/destructive/open-world declaration, bridges
(``requires=``), timeout and rate limit: actions the server's gates do not permit, or whose
bridge is down, are left out of the schema, and the tool's annotations summarise the actions
that remain (TL-14). A call of an action the gates refuse is E_PERMISSION_DENIED; one whose
bridge is down gets the bridge's retryable E_NOT_CONNECTED, as with ``requires=`` on the whole
tool, even when no action is left to offer. The server watches each bridge its tools and
actions need once (Server._watch_bridges): a transition rebuilds every manager that needs the
bridge, then sends one ``list_changed``. The action that ran is reported in the envelope's
``meta.action``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol.errors import clipped
from ..server.tools import Tool, annotations_from_hints
from ..server.validation import Relations, compile_schema, describe_errors

if TYPE_CHECKING:
    from .gates import Gates

__all__ = ["Action", "ManagerTool", "SCHEMA_STYLES"]

_PLACEHOLDER = {"type": "object", "properties": {"action": {"type": "string", "enum": []}}, "required": ["action"]}
#: how a manager tool advertises its inputSchema: "flat" (every host) or "oneOf" (closed branches)
SCHEMA_STYLES = ("flat", "oneOf")


class Action:
    """One action of a manager tool: a function called with its own validated parameters."""

    __slots__ = (
        "name", "handler", "description", "annotations", "schema", "defs", "bind", "context_param",
        "is_async", "raw", "options", "relations", "_validator", "_params", "_required",
    )

    def __init__(self, name: str, fn: Callable[..., Any], description: str | None,
                 annotations: dict[str, Any] | None, options: Any = None, relations: Relations | None = None) -> None:
        from ..server.context import Context
        from ..server.schema import function_description, input_spec

        if name == "action":
            raise ValueError("an action cannot be called 'action'")
        spec = input_spec(fn, context_type=Context)
        if "action" in spec.schema.get("properties", {}):
            raise ValueError(f"action {name!r}: a parameter named 'action' would clash with the action selector")
        self.name = name
        self.handler = fn
        self.description = description if description is not None else function_description(fn)
        #: its parameters that exclude or need each other (server/validation.py), held to after
        #: its closed branch and said in its description (the selector's) and its parameters'
        self.relations = relations if relations else None
        schema = spec.schema
        if self.relations is not None:
            self.relations.check_schema(schema, f"action {name!r}")
            schema = self.relations.advertise(schema)
            said = self.relations.sentence()
            self.description = f"{self.description.rstrip()} {said}" if self.description else said
        self.annotations = annotations
        #: the action's own ToolOptions (requires=, timeout=, rate_limit=), or None
        self.options = options
        body = {k: v for k, v in schema.items() if k != "$defs"}
        props = {"action": {"const": name}, **body.get("properties", {})}
        self.schema: dict[str, Any] = {
            "type": "object",
            **({"description": self.description} if self.description else {}),
            "properties": props,
            "required": ["action", *body.get("required", [])],
            "additionalProperties": False,
        }
        self._params = frozenset(body.get("properties", {}))
        self._required = tuple(body.get("required", []))
        self.defs: dict[str, Any] = spec.schema.get("$defs", {})
        self.bind = spec.bind
        self.context_param = spec.context_param
        self.is_async = inspect.iscoroutinefunction(fn)
        self.raw = False
        self._validator: Any = None

    @property
    def requires(self) -> tuple[Any, ...]:
        return self.options.requires if self.options is not None else ()

    def call_args(self, arguments: dict[str, Any], ctx: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        kwargs = self.bind({k: v for k, v in arguments.items() if k != "action"})
        if self.context_param is not None:
            kwargs = {**kwargs, self.context_param: ctx}
        return (), kwargs

    def errors(self, arguments: dict[str, Any], defs: dict[str, Any],
               owners: dict[str, list[str]] | None = None) -> list[dict[str, Any]]:
        """Why ``arguments`` fail this action's closed branch, naming the action and the field:
        parameters of other actions, missing required ones, then anything else the branch says."""
        out: list[dict[str, Any]] = []
        for key in arguments:
            if key != "action" and key not in self._params:
                elsewhere = [a for a in (owners or {}).get(key, ()) if a != self.name]
                where = f" (it is a parameter of {', '.join(repr(a) for a in elsewhere)})" if elsewhere else ""
                takes = ", ".join(sorted(self._params)) or "no parameters"
                out.append({"path": f"/{key}",
                            "message": f"action {self.name!r} does not take {key!r}{where}; it takes: {takes}"})
        for key in self._required:
            if key not in arguments:
                out.append({"path": f"/{key}", "message": f"action {self.name!r} requires {key!r}"})
        if out:
            return out
        validator = self.validator(defs)
        if validator.is_valid(arguments):
            broken = self.relations.errors(arguments) if self.relations is not None else None
            return [{"path": e["path"], "message": f"action {self.name!r}: {e['message']}"} for e in broken or ()]
        return [{"path": e["path"], "message": f"action {self.name!r}: {e['message']}"}
                for e in describe_errors(validator, arguments)]

    def validator(self, defs: dict[str, Any]) -> Any:
        """This action's closed branch, compiled once (again only when the shared $defs change)."""
        if self._validator is None:
            schema = {**self.schema, "$defs": defs} if defs else self.schema
            self._validator = compile_schema(schema, f"action {self.name!r}")
        return self._validator


class ManagerTool(Tool):
    """A Tool whose inputSchema is generated from its actions."""

    __slots__ = ("actions", "permitted", "visible", "style", "_server", "_gates", "_defs", "_base_annotations",
                 "_owners")

    def __init__(self, server: Any, name: str, *, description: str | None = None, title: str | None = None,
                 annotations: dict[str, Any] | None = None, icons: list[dict[str, Any]] | None = None,
                 meta: dict[str, Any] | None = None, schema: str = "flat") -> None:
        if schema not in SCHEMA_STYLES:
            raise ValueError(f"manager tool {name!r}: schema must be one of {SCHEMA_STYLES}, not {schema!r}")
        super().__init__(name, self._not_called, input_schema=_PLACEHOLDER, description=description,
                         title=title, icons=icons, meta=meta, trusted_schemas=True)
        self.actions: dict[str, Action] = {}
        #: the actions the gates permit; a call of any other is refused for good
        self.permitted: dict[str, Action] = {}
        #: the permitted actions whose bridges are up: what the schema offers now
        self.visible: dict[str, Action] = {}
        #: "flat" (the default: every host takes it) or "oneOf" (closed branches at the root)
        self.style = schema
        self._server = server
        self._gates: Gates | None = None
        self._defs: dict[str, Any] = {}
        self._base_annotations = annotations
        self._owners: dict[str, list[str]] = {}

    @staticmethod
    def _not_called(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a manager tool runs its actions, never itself")

    def action(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
        requires: Any = None,
        timeout: Any = None,
        rate_limit: Any = None,
        exclusive: Any = (),
        depends_on: Any = None,
    ) -> Any:
        """Register an action: ``@tool.action`` or ``@tool.action(read_only=True)``.

        ``requires`` (a Bridge, or several): the action is offered only while they are up;
        ``timeout`` (seconds) and ``rate_limit`` ("10/min") override the tool's for this action;
        ``exclusive`` and ``depends_on``: its parameters that exclude or need each other, as on
        ``@server.tool``."""
        from .config import INHERIT, ToolOptions

        values = {k: v for k, v in (("timeout", timeout), ("rate_limit", rate_limit)) if v is not None}
        options = ToolOptions.build(requires=requires, **{k: values.get(k, INHERIT) for k in ("timeout", "rate_limit")})

        def deco(func: Callable[..., Any]) -> Callable[..., Any]:
            act_name = name or func.__name__
            if act_name in self.actions:
                raise ValueError(f"manager tool {self.name!r} already has an action {act_name!r}")
            ann = annotations_from_hints(None, read_only=read_only, destructive=destructive,
                                         idempotent=idempotent, open_world=open_world)
            relations = Relations(exclusive, depends_on) if exclusive or depends_on else None
            self.actions[act_name] = Action(act_name, func, description, ann, options, relations)
            self.rebuild(self._gates)
            if self._server is not None:
                self._server._watch_bridges(self)
                self._server._changed("tools")
            return func

        if fn is not None:
            return deco(fn)
        return deco

    @property
    def bridges(self) -> tuple[Any, ...]:
        """The tool's own bridges and every action's, each once."""
        own = self.options.requires if self.options is not None else ()
        return tuple({id(b): b for b in (*own, *(b for a in self.actions.values() for b in a.requires))}.values())

    def refresh(self) -> None:
        """Rebuild after a bridge changed, under the gates of the last rebuild."""
        self.rebuild(self._gates)

    def down_bridge(self) -> Any:
        """A bridge that is down and that a permitted action needs (None if none): why the
        schema offers nothing while the gates permit something."""
        for act in self.permitted.values():
            for bridge in act.requires:
                if not bridge.up:
                    return bridge
        return None

    def rebuild(self, gates: Gates | None) -> None:
        """Regenerate the advertised schema from the actions ``gates`` permit and whose bridges are up."""
        self._gates = gates
        self.permitted = {n: a for n, a in self.actions.items() if gates is None or gates.permits(a.annotations)}
        # TL-13: an action whose bridge went down leaves the schema, and comes back with it
        self.visible = {n: a for n, a in self.permitted.items() if all(b.up for b in a.requires)}
        defs: dict[str, Any] = {}
        for act in self.visible.values():
            for key, value in act.defs.items():
                if key in defs and defs[key] != value:
                    raise ValueError(f"manager tool {self.name!r}: two actions define different types named {key!r}")
                defs[key] = value
        names = list(self.visible)
        selector = {"type": "string", "enum": names,
                    "description": "What to do: " + "; ".join(
                        f"{n}: {a.description.splitlines()[0].rstrip().rstrip('.')}" if a.description else n
                        for n, a in self.visible.items()) + "."}
        owners: dict[str, list[str]] = {}
        for act in self.actions.values():
            for param in act.schema["properties"]:
                if param != "action":
                    owners.setdefault(param, []).append(act.name)
        self._owners = owners
        if self.style == "oneOf":
            schema: dict[str, Any] = {"type": "object", "properties": {"action": selector}, "required": ["action"]}
            if names:
                schema["oneOf"] = [a.schema for a in self.visible.values()]
        else:
            schema = {"type": "object", "properties": {"action": selector, **_union(self.visible)},
                      "required": ["action"], "additionalProperties": False}
        if defs:
            schema["$defs"] = defs
        if defs != self._defs:
            for act in self.actions.values():
                act._validator = None  # compiled against the old $defs
        self._defs = defs
        self.input_schema = schema
        self.annotations = _summarise([a.annotations for a in self.visible.values()], self._base_annotations)
        self._validator = None

    def compile(self) -> None:
        """At warm-up: the advertised schema (a valid schema, checked once) and every offered
        action's closed branch, so no call pays for compiling the one it is validated against."""
        super().compile()
        for act in self.visible.values():
            act.validator(self._defs)

    def check_arguments(self, arguments: Any) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
        """The selector first, then the chosen action's closed branch (never the advertised union)."""
        if not isinstance(arguments, dict):
            return None, [{"path": "", "message": f"arguments must be an object, not {type(arguments).__name__}"}]
        got = arguments.get("action")
        act = self.visible.get(got) if isinstance(got, str) else None
        if act is None:
            if got is None:
                return None, [{"path": "/action", "message": f"'action' is required: one of {list(self.visible)}"}]
            return None, [{"path": "/action", "message": f"{clipped(repr(got))} is not one of {list(self.visible)}"}]
        errors = act.errors(arguments, self._defs, self._owners)
        return (arguments, None) if not errors else (None, errors)

    def target(self, arguments: dict[str, Any]) -> Action | None:
        action = arguments.get("action")
        # an action that is no string selects nothing: the input schema then refuses it
        return self.actions.get(action) if isinstance(action, str) else None


#: what may differ between two actions' schemas of one parameter and still leave it one schema
_NOTES = ("description", "default", "title", "examples")


def _union(actions: dict[str, Action]) -> dict[str, Any]:
    """Every action's parameters in one properties object. A parameter several actions share
    with one schema appears once; with different schemas, as an anyOf of them. Each says which
    actions take it (and which require it), so a model reading only the flat schema knows.
    What only describes a value (its description, default, title, examples) does not make two
    schemas different: a default that not every action has is told per action instead, and so
    is a description that differs."""
    seen: dict[str, list[tuple[str, dict[str, Any], bool]]] = {}
    for act in actions.values():
        required = set(act.schema["required"])
        for param, sub in act.schema["properties"].items():
            if param != "action":
                seen.setdefault(param, []).append((act.name, sub, param in required))
    out: dict[str, Any] = {}
    for param, uses in seen.items():
        variants: list[dict[str, Any]] = []
        for _, sub, _ in uses:
            plain = {k: v for k, v in sub.items() if k not in _NOTES}
            if plain not in variants:
                variants.append(plain)
        prop: dict[str, Any] = dict(variants[0]) if len(variants) == 1 else {"anyOf": variants}
        names = [n for n, _, _ in uses]
        needed = [n for n, _, req in uses if req]
        parts: list[str] = []
        descriptions = {n: sub["description"].rstrip().rstrip(".") for n, sub, _ in uses if sub.get("description")}
        if len(set(descriptions.values())) == 1:
            parts.append(next(iter(descriptions.values())))
        elif descriptions:
            parts.append("; ".join(f"{n}: {text}" for n, text in descriptions.items()))
        if len(variants) == 1:
            for key in ("title", "examples"):
                values = [sub[key] for _, sub, _ in uses if key in sub]
                if values and all(v == values[0] for v in values):
                    prop[key] = values[0]
        defaults = {n: sub["default"] for n, sub, _ in uses if "default" in sub}
        if defaults and len(variants) == 1 and len(defaults) == len(uses) and all(
                v == next(iter(defaults.values())) for v in defaults.values()):
            prop["default"] = next(iter(defaults.values()))
        elif defaults:
            parts.append("Default " + ", ".join(f"for {n}: {_json(v)}" for n, v in defaults.items()))
        note = f"Used by action{'s' if len(names) > 1 else ''}: {', '.join(names)}"
        if needed:
            note += f" (required by {', '.join(needed)})"
        parts.append(note)
        prop["description"] = ". ".join(parts) + "."
        out[param] = prop
    return out


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _summarise(annotations: list[dict[str, Any] | None], base: dict[str, Any] | None) -> dict[str, Any] | None:
    """TL-14 hints for the whole tool: read-only only if every action is, destructive or open-world
    if any action is, idempotent only if every action is."""
    from .gates import tool_kinds

    if not annotations:
        return dict(base) if base else None
    kinds = [tool_kinds(a) for a in annotations]
    read_only = all(k[0] for k in kinds)
    out: dict[str, Any] = {"readOnlyHint": read_only}
    if not read_only:
        out["destructiveHint"] = any(k[1] for k in kinds)
        out["idempotentHint"] = all((a or {}).get("idempotentHint") is True for a in annotations)
    out["openWorldHint"] = any(k[2] for k in kinds)
    if base:
        out.update(base)
    return out
