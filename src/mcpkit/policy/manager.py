"""Manager tools: one tool, several actions, each with its own parameters.

    files = server.manager("files", description="Work with the project's files.")

    @files.action(read_only=True)
    def read(path: SandboxPath) -> str: ...

    @files.action(destructive=True)
    def delete(path: SandboxPath) -> None: ...

The advertised inputSchema has an ``action`` enum and one ``oneOf`` branch per action, each
closed with ``additionalProperties: false``; that schema is the one enforced (one validation
path). Each action carries its own read-only/destructive/open-world declaration: actions the
server's gates do not permit are left out of the schema and refused by name, and the tool's
annotations summarise the actions that remain (TL-14). The action that ran is reported in the
envelope's ``meta.action``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..server.tools import Tool, annotations_from_hints
from ..server.validation import compile_schema, describe_errors

if TYPE_CHECKING:
    from .gates import Gates

__all__ = ["Action", "ManagerTool"]

_PLACEHOLDER = {"type": "object", "properties": {"action": {"type": "string", "enum": []}}, "required": ["action"]}


class Action:
    """One action of a manager tool: a function called with its own validated parameters."""

    __slots__ = (
        "name", "handler", "description", "annotations", "schema", "defs", "bind", "context_param",
        "is_async", "raw", "_validator",
    )

    def __init__(self, name: str, fn: Callable[..., Any], description: str | None,
                 annotations: dict[str, Any] | None) -> None:
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
        self.annotations = annotations
        body = {k: v for k, v in spec.schema.items() if k != "$defs"}
        props = {"action": {"const": name}, **body.get("properties", {})}
        self.schema: dict[str, Any] = {
            "type": "object",
            **({"description": self.description} if self.description else {}),
            "properties": props,
            "required": ["action", *body.get("required", [])],
            "additionalProperties": False,
        }
        self.defs: dict[str, Any] = spec.schema.get("$defs", {})
        self.bind = spec.bind
        self.context_param = spec.context_param
        self.is_async = inspect.iscoroutinefunction(fn)
        self.raw = False
        self._validator: Any = None

    def call_args(self, arguments: dict[str, Any], ctx: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        kwargs = self.bind({k: v for k, v in arguments.items() if k != "action"})
        if self.context_param is not None:
            kwargs = {**kwargs, self.context_param: ctx}
        return (), kwargs

    def errors(self, arguments: Any, defs: dict[str, Any]) -> list[dict[str, Any]]:
        """Why ``arguments`` fail this action's branch, in the words of that branch alone."""
        if self._validator is None:
            schema = {**self.schema, "$defs": defs} if defs else self.schema
            self._validator = compile_schema(schema, f"action {self.name!r}")
        return describe_errors(self._validator, arguments)


class ManagerTool(Tool):
    """A Tool whose inputSchema is generated from its actions."""

    __slots__ = ("actions", "visible", "_server", "_gates", "_defs", "_base_annotations")

    def __init__(self, server: Any, name: str, *, description: str | None = None, title: str | None = None,
                 annotations: dict[str, Any] | None = None, icons: list[dict[str, Any]] | None = None,
                 meta: dict[str, Any] | None = None) -> None:
        super().__init__(name, self._not_called, input_schema=_PLACEHOLDER, description=description,
                         title=title, icons=icons, meta=meta, trusted_schemas=True)
        self.actions: dict[str, Action] = {}
        self.visible: dict[str, Action] = {}
        self._server = server
        self._gates: Gates | None = None
        self._defs: dict[str, Any] = {}
        self._base_annotations = annotations

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
    ) -> Any:
        """Register an action: ``@tool.action`` or ``@tool.action(read_only=True)``."""

        def deco(func: Callable[..., Any]) -> Callable[..., Any]:
            act_name = name or func.__name__
            if act_name in self.actions:
                raise ValueError(f"manager tool {self.name!r} already has an action {act_name!r}")
            ann = annotations_from_hints(None, read_only=read_only, destructive=destructive,
                                         idempotent=idempotent, open_world=open_world)
            self.actions[act_name] = Action(act_name, func, description, ann)
            self.rebuild(self._gates)
            if self._server is not None:
                self._server._changed("tools")
            return func

        if fn is not None:
            return deco(fn)
        return deco

    def rebuild(self, gates: Gates | None) -> None:
        """Regenerate the advertised (and enforced) schema from the actions ``gates`` permit."""
        self._gates = gates
        self.visible = {n: a for n, a in self.actions.items() if gates is None or gates.permits(a.annotations)}
        defs: dict[str, Any] = {}
        for act in self.visible.values():
            for key, value in act.defs.items():
                if key in defs and defs[key] != value:
                    raise ValueError(f"manager tool {self.name!r}: two actions define different types named {key!r}")
                defs[key] = value
        names = list(self.visible)
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {"action": {"type": "string", "enum": names,
                                      "description": "What to do: " + "; ".join(
                                          f"{n}: {a.description.splitlines()[0]}" if a.description else n
                                          for n, a in self.visible.items())}},
            "required": ["action"],
        }
        if names:
            schema["oneOf"] = [a.schema for a in self.visible.values()]
        if defs:
            schema["$defs"] = defs
        self._defs = defs
        self.input_schema = schema
        self.annotations = _summarise([a.annotations for a in self.visible.values()], self._base_annotations)
        self._validator = None
        for act in self.actions.values():
            act._validator = None

    def check_arguments(self, arguments: Any) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
        if self._validator is None:
            self.compile()
        if self._validator.is_valid(arguments):
            return arguments, None
        act = self.visible.get(arguments.get("action")) if isinstance(arguments, dict) else None
        if act is None:
            # the selector itself is wrong: say so plainly instead of one error per branch
            got = arguments.get("action") if isinstance(arguments, dict) else None
            return None, [{"path": "/action", "message": f"{got!r} is not one of {list(self.visible)}"}]
        return None, act.errors(arguments, self._defs)

    def target(self, arguments: dict[str, Any]) -> Action | None:
        return self.actions.get(arguments.get("action"))  # type: ignore[arg-type]


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
