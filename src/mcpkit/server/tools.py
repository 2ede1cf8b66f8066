"""Tool: one type whether built from a Python function or from a raw JSON Schema.

The inputSchema a Tool advertises is the schema its validator was compiled
from: there is no second, looser validation path.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

from .. import _json
from ..protocol.meta import check_icons, check_meta
from ..protocol.revisions import Revision
from .content import ToolResult
from .validation import compile_schema, describe_errors

__all__ = [
    "Tool", "OutputSchemaError", "validate_tool_name", "annotations_from_hints", "shape_for_revision",
    "downgrade_block",
]

#: TL-06 (SEP-986): 1-128 characters of A-Z a-z 0-9 _ - .
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")


def validate_tool_name(name: str) -> str:
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        raise ValueError(
            f"invalid tool name {name!r}: use 1-128 characters from A-Z, a-z, 0-9, '_', '-' and '.' (TL-06)"
        )
    return name


def annotations_from_hints(
    annotations: dict[str, Any] | None,
    *,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
) -> dict[str, Any] | None:
    """TL-14: the keyword flags become ToolAnnotations hints; explicit annotations win."""
    out: dict[str, Any] = {}
    for key, value in (
        ("readOnlyHint", read_only),
        ("destructiveHint", destructive),
        ("idempotentHint", idempotent),
        ("openWorldHint", open_world),
    ):
        if value is not None:
            out[key] = bool(value)
    if annotations:
        out.update(annotations)
    return out or None


def _as_is(value: Any) -> Any:
    return value


#: values that are neither content blocks, Outcomes, ToolResults nor lists (to_result's fast path)
_SCALARS = frozenset({int, float, str, bool, type(None)})


def _is_content(value: Any) -> bool:
    return getattr(type(value), "__mcp_content__", False) is True


def _content_list(values: list[Any]) -> bool:
    """Content blocks, maybe with strings among them: content, not data (a list of strings alone
    is data for a tool that declared one)."""
    blocks = False
    for v in values:
        if _is_content(v):
            blocks = True
        elif not isinstance(v, str):
            return False
    return blocks


class Tool:
    """A registered tool: its wire description, compiled validators and handler."""

    __slots__ = (
        "name",
        "title",
        "description",
        "input_schema",
        "relations",
        "output_schema",
        "annotations",
        "icons",
        "meta",
        "handler",
        "is_async",
        "bind",
        "dump",
        "context_param",
        "raw",
        "coerce",
        "task",
        "task_after_input",
        "options",
        "actions",
        "result_schema",
        "result_dump",
        "base_output_schema",
        "resolved",
        "scopes",
        "action_scopes",
        "call_names",
        "enforced_schema",
        "_validator",
        "_result_validator",
        "_out_validator",
    )

    def __init__(
        self,
        name: str,
        handler: Callable[..., Any],
        *,
        input_schema: dict[str, Any],
        output_schema: dict[str, Any] | None = None,
        description: str | None = None,
        title: str | None = None,
        annotations: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        bind: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        dump: Callable[[Any], Any] | None = None,
        context_param: str | None = None,
        coerce: bool = False,
        trusted_schemas: bool = False,
        task: str | None = None,
        task_after_input: bool = False,
        options: Any = None,
        result_schema: dict[str, Any] | None = None,
        result_dump: Callable[[Any], Any] | None = None,
        enforced_schema: dict[str, Any] | None = None,
    ) -> None:
        self.name = validate_tool_name(name)
        if task not in (None, "optional", "required"):
            raise ValueError(f"tool {name!r}: task must be None, \"optional\" or \"required\"")
        if not isinstance(input_schema, dict) or input_schema.get("type") != "object":
            raise ValueError(f"tool {name!r}: inputSchema must be a JSON Schema object with \"type\": \"object\" (TL-05)")
        if output_schema is not None and (not isinstance(output_schema, dict) or output_schema.get("type") != "object"):
            raise ValueError(f"tool {name!r}: outputSchema must have \"type\": \"object\" at its root (TL-07)")
        self.title = title
        self.description = description
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.annotations = annotations
        self.icons = check_icons(icons, f"tool {name!r}")
        self.meta = check_meta(meta, f"tool {name!r}")
        self.handler = handler
        self.is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            getattr(handler, "__call__", None)
        )
        # raw tools receive the arguments dict itself; function tools receive keyword arguments
        self.raw = bind is None
        self.bind = bind
        self.dump = dump
        self.context_param = context_param
        self.coerce = coerce
        #: 2026-07-28 tasks extension: None (never a task), "optional" or "required" (TX-01)
        self.task = task
        #: inputs first as multi-round-trip rounds; the task starts at ``ctx.start_task()`` (TX-03)
        self.task_after_input = task_after_input
        if task_after_input and (task is None or not self.is_async or context_param is None):
            raise ValueError(f"tool {name!r}: task_after_input needs a task mode, an async handler and a Context")
        #: per-tool policy settings (mcpkit.policy.ToolOptions), or None for the server's
        self.options = options
        #: the actions of a manager tool (policy/manager.py); None for a plain tool
        self.actions: dict[str, Any] | None = None
        #: the outputSchema the tool was declared with; the advertised one may be the envelope's
        self.base_output_schema = output_schema
        #: what the tool's own value looks like inside a contract envelope, and how to dump it
        #: (a function tool's are resolved from its return annotation when a contract applies)
        self.result_schema = result_schema if result_schema is not None else output_schema
        self.result_dump: Callable[[Any], Any] | None = result_dump if result_dump is not None else (dump or _as_is)
        #: what the server's policy means for this tool, resolved once (policy/chain.py)
        self.resolved: Any = None
        #: OAuth scopes a token needs to call it over authenticated HTTP (mcpkit.auth)
        self.scopes: tuple[str, ...] = ()
        #: the scopes each value of its ``action`` argument needs on top of ``scopes``, for a tool
        #: that stands for a manager tool served elsewhere (a mount's mirror); None: none
        self.action_scopes: dict[str, tuple[str, ...]] | None = None
        #: how a tool name given to ``ctx.call_tool`` in its handler reads in this server: the
        #: prefixing of the ``include`` that copied it here (compose.Names.name); None: as given
        self.call_names: Callable[[str], str] | None = None
        #: what calls are validated against when it is not the advertised schema: the original
        #: of a flattened one (``add_tool(..., flatten=True)``); None: the advertised one
        self.enforced_schema = enforced_schema
        #: parameters that exclude or need each other (validation.Relations), checked after the
        #: schema on every call; None: none declared
        self.relations: Any = None
        self._validator: Any = None
        self._out_validator: Any = None
        self._result_validator: Any = None
        if not trusted_schemas:
            # A schema from the user is checked now (JS-02, JS-04); one generated from a
            # signature is valid by construction and compiles on first use (start-up time).
            self.compile()

    @property
    def bridges(self) -> tuple[Any, ...]:
        """Every bridge the tool needs to be listed and called (``requires=``); a manager tool
        adds its actions' own (TL-13): one set, watched once per server, however many need it."""
        return self.options.requires if self.options is not None else ()

    def set_output_schema(self, schema: dict[str, Any] | None) -> None:
        """Advertise (and enforce) another outputSchema, e.g. the tool contract's envelope."""
        self.output_schema = schema
        self._out_validator = None

    def compile(self) -> None:
        """Compile the validators (once); what is advertised is exactly what is compiled."""
        if self._validator is None:
            enforced = self.enforced_schema if self.enforced_schema is not None else self.input_schema
            self._validator = compile_schema(enforced, f"tool {self.name!r} inputSchema")
        if self.output_schema is not None and self._out_validator is None:
            self._out_validator = compile_schema(self.output_schema, f"tool {self.name!r} outputSchema")

    # ---------------------------------------------------------------- listing

    def describe(self) -> dict[str, Any]:
        """The Tool as the newest handshake revision sees it; older ones get a filtered copy."""
        out: dict[str, Any] = {"name": self.name}
        if self.title is not None:
            out["title"] = self.title
        if self.description is not None:
            out["description"] = self.description
        out["inputSchema"] = self.input_schema
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        if self.annotations:
            out["annotations"] = self.annotations
        if self.icons:
            out["icons"] = self.icons
        if self.meta:
            out["_meta"] = self.meta
        return out

    # ---------------------------------------------------------------- calling

    def check_arguments(self, arguments: Any) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
        """Validate against the advertised inputSchema: (arguments, None) or (None, errors)."""
        if self._validator is None:
            self.compile()
        if self._validator.is_valid(arguments):
            if self.relations is not None:
                return self._related(arguments)
            return arguments, None
        if self.coerce and isinstance(arguments, dict):
            coerced = _coerce(arguments, self.input_schema)
            if self._validator.is_valid(coerced):
                return (coerced, None) if self.relations is None else self._related(coerced)
        return None, describe_errors(self._validator, arguments)

    def _related(self, arguments: dict[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
        errors = self.relations.errors(arguments)
        return (arguments, None) if errors is None else (None, errors)

    def call_args(self, arguments: dict[str, Any], ctx: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if self.raw:
            if self.context_param is not None:
                return (arguments, ctx), {}
            return (arguments,), {}
        kwargs = self.bind(arguments)  # type: ignore[misc]
        if self.context_param is not None:
            # bind may hand back the request's own dict: never write into it
            kwargs = {**kwargs, self.context_param: ctx}
        return (), kwargs

    def to_result(self, value: Any) -> dict[str, Any]:
        """Shape whatever the handler returned into a CallToolResult (TL-07..TL-09)."""
        if type(value) in _SCALARS and self.output_schema is not None:
            # the common case, first: a plain value of a tool with an output schema (what the
            # general path below does with it, without asking what else it might be)
            structured = self.dump(value) if self.dump is not None else value
            self.check_output(structured)
            return {"content": [{"type": "text", "text": _json.dumps_str(structured)}], "structuredContent": structured}
        if getattr(type(value), "__mcp_outcome__", False):
            value = value.result  # mcpkit.policy.Outcome: the summary is the envelope's business
        if self.raw and isinstance(value, dict) and value.get("resultType") == "task":
            return value  # a CreateTaskResult a raw tool passes on (a proxy's upstream made the task)
        if isinstance(value, ToolResult):
            if value.structured is not None:
                self.check_output(value.structured)  # TL-07: a ToolResult is no way around the outputSchema
            return value.to_result()
        if type(value) is list and value and _content_list(value):
            # content blocks are content, whatever the return annotation said (a bare `-> list`
            # gave an outputSchema), with the strings among them as text blocks, as below
            return {"content": [{"type": "text", "text": v} if isinstance(v, str) else v for v in value]}
        if self.output_schema is not None and not _is_content(value):
            if self.raw and isinstance(value, dict) and "content" in value and isinstance(value["content"], list):
                structured = value.get("structuredContent")
                if structured is not None:
                    self.check_output(structured)
                return value
            structured = self.dump(value) if self.dump is not None else value
            self.check_output(structured)
            # TL-08: the serialized JSON rides along as text for clients without structured output.
            return {"content": [{"type": "text", "text": _json.dumps_str(structured)}], "structuredContent": structured}
        if value is None:
            return {"content": []}
        if isinstance(value, str):
            return {"content": [{"type": "text", "text": value}]}
        if _is_content(value):
            return {"content": [value]}
        if isinstance(value, dict) and self.raw and isinstance(value.get("content"), list):
            return value
        if isinstance(value, (list, tuple)) and value and all(_is_content(v) or isinstance(v, str) for v in value):
            return {"content": [{"type": "text", "text": v} if isinstance(v, str) else v for v in value]}
        if isinstance(value, (bytes, bytearray)):
            raise TypeError(f"tool {self.name!r} returned bytes: wrap them in mcpkit.image(), audio() or resource()")
        dumped = self.dump(value) if self.dump is not None else value
        return {"content": [{"type": "text", "text": _json.dumps_str(dumped)}]}

    def check_result(self, value: Any) -> None:
        """TL-07 for a contract tool: its own value against the result schema the envelope's
        outputSchema embeds (the envelope around it is built by mcpkit)."""
        schema = self.result_schema
        if schema is None:
            return
        if self._result_validator is None:
            self._result_validator = compile_schema(schema, f"tool {self.name!r} result schema")
        if not self._result_validator.is_valid(value):
            raise OutputSchemaError(self.name, describe_errors(self._result_validator, value))

    def check_output(self, structured: Any) -> None:
        if self.output_schema is None:
            return
        if self._out_validator is None:
            self.compile()
        if not self._out_validator.is_valid(structured):
            errors = describe_errors(self._out_validator, structured)
            raise OutputSchemaError(self.name, errors)


class OutputSchemaError(Exception):
    """The tool's structured output does not match its own outputSchema (a server bug, TL-07)."""

    def __init__(self, tool: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(f"tool {tool!r} returned structuredContent that does not match its outputSchema: {errors}")
        self.errors = errors


def _coerce(arguments: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Opt-in leniency: top-level strings that spell a number or boolean become one."""
    props = schema.get("properties") or {}
    out = dict(arguments)
    for key, value in arguments.items():
        if not isinstance(value, str):
            continue
        want = (props.get(key) or {}).get("type")
        types = want if isinstance(want, list) else [want]
        try:
            if "integer" in types and value.strip().lstrip("-").isdigit():
                out[key] = int(value)
            elif "number" in types:
                out[key] = float(value)
            elif "boolean" in types and value.lower() in ("true", "false"):
                out[key] = value.lower() == "true"
        except ValueError:
            pass
    return out


def shape_for_revision(result: dict[str, Any], rev: Revision) -> dict[str, Any]:
    """Leave out what the negotiated revision does not define (TL-05, TL-09 per revision)."""
    if not rev.structured_content and "structuredContent" in result:
        result = {k: v for k, v in result.items() if k != "structuredContent"}
    content = result.get("content")
    if content and any(_needs_downgrade(b, rev) for b in content):
        result = dict(result)
        result["content"] = [downgrade_block(b, rev) for b in content]
    return result


def _needs_downgrade(block: dict[str, Any], rev: Revision) -> bool:
    if block.get("type") not in rev.content_types:
        return True
    if "_meta" in block and not rev.item_meta:
        return True
    ann = block.get("annotations")
    return isinstance(ann, dict) and not rev.annotation_keys.issuperset(ann)


def downgrade_block(block: dict[str, Any], rev: Revision) -> dict[str, Any]:
    """One content block as ``rev`` can carry it: unknown types become a text notice,
    unknown annotation keys and ``_meta`` are left out."""
    if not _needs_downgrade(block, rev):
        return block
    kind = block.get("type")
    if kind not in rev.content_types:
        if kind == "resource_link":
            label = block.get("title") or block.get("name") or block.get("uri")
            return {"type": "text", "text": f"Resource link: {label} <{block.get('uri')}>"}
        mime = block.get("mimeType", "unknown type")
        return {"type": "text", "text": f"[{kind} content ({mime}) omitted: not supported by protocol {rev.version}]"}
    out = {k: v for k, v in block.items() if k != "_meta" or rev.item_meta}
    ann = out.get("annotations")
    if isinstance(ann, dict):
        out["annotations"] = {k: v for k, v in ann.items() if k in rev.annotation_keys}
    return out

