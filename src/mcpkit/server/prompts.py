"""Prompts: arguments from a function's signature, messages from what it returns.

Prompt arguments are strings on the wire (PM-03). A parameter declared ``int``, ``float``,
``bool``, ``Literal[...]``, an Enum or a list/dict (sent as JSON text) is converted from that
string and validated against the signature's schema before the handler runs; a value that does
not fit is answered -32602 naming the argument and what it accepts (PM-06).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol.errors import INVALID_PARAMS, McpError
from ..protocol.meta import check_icons, check_meta
from .content import text as text_block

if TYPE_CHECKING:
    from .registration import Completer

__all__ = ["Prompt", "messages_from"]


class Prompt:
    __slots__ = (
        "name", "title", "description", "arguments", "icons", "meta", "handler", "is_async",
        "context_param", "completions", "scopes", "bind", "call_names", "_required", "_known", "_schema", "_bind", "_checks",
    )

    def __init__(
        self,
        name: str,
        handler: Callable[..., Any],
        *,
        arguments: list[dict[str, Any]],
        title: str | None = None,
        description: str | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        context_param: str | None = None,
        completions: dict[str, Completer] | None = None,
        schema: dict[str, Any] | None = None,
        bind: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a prompt needs a non-empty name")
        self.name = name
        self.title = title
        self.description = description
        self.arguments = arguments
        self.icons = check_icons(icons, f"prompt {name!r}")
        self.meta = check_meta(meta, f"prompt {name!r}")
        self.handler = handler
        self.is_async = inspect.iscoroutinefunction(handler)
        self.context_param = context_param
        #: argument name -> its completer, as registration prepared it
        self.completions = completions or {}
        #: OAuth scopes a token needs to get it over authenticated HTTP (mcpkit.auth)
        self.scopes: tuple[str, ...] = ()
        #: converts the arguments whose type checks itself (a SandboxPath), as for tools; None: none
        self.bind: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        #: how a tool name given to ``ctx.call_tool`` in its handler reads in this server: the
        #: prefixing of the ``include`` that copied it here (compose.Names.name); None: as given
        self.call_names: Callable[[str], str] | None = None
        self._required = [a["name"] for a in arguments if a.get("required")]
        self._known = {a["name"] for a in arguments}
        #: the signature's JSON Schema and binder (typed arguments); None: strings as given
        self._schema = schema
        self._bind = bind
        self._checks: dict[str, Any] = {}

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.title is not None:
            out["title"] = self.title
        if self.description is not None:
            out["description"] = self.description
        if self.arguments:
            out["arguments"] = self.arguments
        if self.icons:
            out["icons"] = self.icons
        if self.meta:
            out["_meta"] = self.meta
        return out

    def check_arguments(self, arguments: Any) -> dict[str, str]:
        """PM-05/PM-06: string values, every required one present, no unknown ones."""
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise McpError(INVALID_PARAMS, "prompts/get arguments must be an object of strings.")
        bad = [k for k, v in arguments.items() if not isinstance(v, str)]
        if bad:
            raise McpError(INVALID_PARAMS, f"Prompt arguments must be strings: {', '.join(sorted(bad))}.")
        unknown = [k for k in arguments if k not in self._known]
        if unknown:
            raise McpError(
                INVALID_PARAMS,
                f"Unknown argument(s) for prompt {self.name!r}: {', '.join(sorted(unknown))}.",
                {"known": sorted(self._known)},
            )
        missing = [k for k in self._required if k not in arguments]
        if missing:
            raise McpError(
                INVALID_PARAMS,
                f"Missing required argument(s) for prompt {self.name!r}: {', '.join(missing)}.",
                {"missing": missing},
            )
        return arguments


    def convert(self, arguments: dict[str, str]) -> dict[str, Any]:
        """The handler's keyword arguments from the wire's strings: each converted to its
        declared type and validated; McpError -32602 naming the argument when one does not fit."""
        if self._schema is None:
            return dict(arguments)
        props = self._schema.get("properties") or {}
        defs = self._schema.get("$defs")
        values: dict[str, Any] = {}
        for key, raw in arguments.items():
            prop = props.get(key)
            if prop is None:
                values[key] = raw
                continue
            check = self._checks.get(key)
            if check is None:
                from .validation import compile_schema

                sub = {**prop, "$defs": defs} if defs else prop
                check = self._checks[key] = compile_schema(sub, f"prompt {self.name!r} argument {key!r}")
            for candidate in _candidates(raw):
                if check.is_valid(candidate):
                    values[key] = candidate
                    break
            else:
                raise McpError(
                    INVALID_PARAMS,
                    f"Invalid value for argument {key!r} of prompt {self.name!r}: {raw!r} is not {_expected(prop)}.",
                    {"argument": key, "value": raw},
                )
        if self._bind is None:
            return values
        try:
            return self._bind(values)
        except (TypeError, ValueError) as exc:
            raise McpError(INVALID_PARAMS, f"Invalid arguments for prompt {self.name!r}: {exc}") from None


def _candidates(raw: str) -> list[Any]:
    """What a wire string may stand for, the string itself first (a str parameter keeps "42")."""
    out: list[Any] = [raw]
    text = raw.strip()
    low = text.lower()
    if low in ("true", "false"):
        out.append(low == "true")
    elif low in ("null", "none", ""):
        out.append(None)
    try:
        out.append(int(text))
    except ValueError:
        try:
            out.append(float(text))
        except ValueError:
            pass
    if text[:1] in ("[", "{"):
        try:
            out.append(json.loads(text))
        except ValueError:
            pass
    return out


def _expected(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return f"{json.dumps(prop['const'])}"
    kind = prop.get("type")
    if isinstance(kind, list):
        return " or ".join(f"a{'n' if k[0] in 'aeiou' else ''} {k}" for k in kind)
    if isinstance(kind, str):
        return f"a{'n' if kind[0] in 'aeiou' else ''} {kind}"
    if "anyOf" in prop:
        return " or ".join(_expected(b) for b in prop["anyOf"] if isinstance(b, dict))
    return "a valid value"


def _message(item: Any) -> dict[str, Any]:
    if isinstance(item, str):
        return {"role": "user", "content": text_block(item)}
    if isinstance(item, dict):
        if "role" in item and "content" in item:
            content = item["content"]
            if isinstance(content, str):
                return {"role": item["role"], "content": text_block(content)}
            return item
        if "type" in item:  # a bare content block is a user message
            return {"role": "user", "content": item}
    raise TypeError(
        f"a prompt returned {type(item).__name__}: return str, a content block, a message dict or a list of them"
    )


def messages_from(value: Any, description: str | None) -> dict[str, Any]:
    """Shape a prompt handler's return value into a GetPromptResult (PM-03)."""
    if isinstance(value, dict) and "messages" in value:
        return value
    items = value if isinstance(value, (list, tuple)) else [value]
    out: dict[str, Any] = {"messages": [_message(i) for i in items]}
    if description:
        out["description"] = description
    return out
