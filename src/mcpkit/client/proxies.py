"""Tool proxies: a server's tools as Python callables.

    await client.tools.load()             # tools/list (also refreshed by client.list_tools())
    await client.tools.add(a=1, b=2)      # {"result": 3}: the structuredContent
    client.tools["my.tool"]               # names that are not identifiers (or that clash with
                                          # load, names: the only attributes of ToolProxies)
    help(client.tools.add)                # the signature and doc built from the tool's schema

A proxy validates its keyword arguments against the tool's inputSchema before sending
(ValueError listing the errors), returns the structuredContent when there is one, else the
text of a lone text block, else the whole result, and raises :class:`ToolCallError` for a
result with ``isError: true``.
"""

from __future__ import annotations

import inspect
import keyword
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .errors import ToolCallError

if TYPE_CHECKING:
    from .client import Client

__all__ = ["ToolProxies", "ToolProxy"]

log = logging.getLogger("mcpkit.client")

_JSON_TYPES: dict[str, Any] = {
    "string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict, "null": type(None),
}


def _annotation(prop: Any) -> Any:
    kind = prop.get("type") if isinstance(prop, dict) else None
    if isinstance(kind, str):
        return _JSON_TYPES.get(kind, inspect.Parameter.empty)
    return inspect.Parameter.empty


class ToolProxy:
    """One tool: ``await proxy(**arguments)``; ``name``, ``schema`` (the inputSchema), ``tool``
    (the whole definition), ``__signature__`` and ``__doc__`` built from them."""

    def __init__(self, client: Client, tool: dict[str, Any]) -> None:
        self._client = client
        self.tool = tool
        self.name: str = tool["name"]
        schema = tool.get("inputSchema")
        self.schema: dict[str, Any] = schema if isinstance(schema, dict) else {"type": "object"}
        self.__name__ = self.name
        self.__qualname__ = self.name
        self.__signature__ = self._signature()
        self.__doc__ = self._doc()
        self._validator: Any = None

    def _properties(self) -> dict[str, Any]:
        props = self.schema.get("properties")
        return props if isinstance(props, dict) else {}

    def _signature(self) -> inspect.Signature:
        required = self.schema.get("required")
        required = set(required) if isinstance(required, list) else set()
        params = []
        for name, prop in self._properties().items():
            if not name.isidentifier() or keyword.iskeyword(name):
                continue  # still accepted through **kwargs-style calls: proxy(**{"a-b": 1})
            if name in required:
                default: Any = inspect.Parameter.empty
            elif isinstance(prop, dict) and "default" in prop:
                default = prop["default"]
            else:
                default = None
            params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=_annotation(prop)))
        # required parameters first keeps the signature readable; keyword-only allows any order
        params.sort(key=lambda p: p.default is not inspect.Parameter.empty)
        return inspect.Signature(params)

    def _doc(self) -> str:
        lines = [self.tool.get("description") or self.tool.get("title") or self.name]
        described = [(n, p.get("description")) for n, p in self._properties().items()
                     if isinstance(p, dict) and p.get("description")]
        if described:
            lines += ["", "Args:"] + [f"    {n}: {d}" for n, d in described]
        return "\n".join(lines)

    def validate(self, arguments: dict[str, Any]) -> None:
        """ValueError listing what the arguments break in the inputSchema."""
        from ..server.validation import compile_schema, describe_errors, format_errors

        if self._validator is None:
            try:
                self._validator = compile_schema(self.schema, f"the inputSchema of tool {self.name!r}")
            except ValueError as exc:  # a schema we cannot compile: the server judges the arguments
                log.warning("not validating arguments locally: %s", exc)
                self._validator = False
        if self._validator is False:
            return
        errors = describe_errors(self._validator, arguments)
        if errors:
            raise ValueError(f"invalid arguments for tool {self.name!r}: {format_errors(errors)}")

    async def __call__(self, **arguments: Any) -> Any:
        # None stands for "not given" (the signature's default) unless the schema allows null
        arguments = {k: v for k, v in arguments.items() if v is not None or self._allows_null(k)}
        self.validate(arguments)
        result = await self._client.call_tool(self.name, arguments)
        if not isinstance(result, dict):
            return result
        if result.get("isError"):
            raise ToolCallError(result)
        if "structuredContent" in result:
            return result["structuredContent"]
        content = result.get("content")
        if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict) \
                and content[0].get("type") == "text":
            return content[0].get("text")
        return result

    def _allows_null(self, name: str) -> bool:
        prop = self._properties().get(name)
        if not isinstance(prop, dict):
            return True  # not described: send what was given
        kind = prop.get("type")
        if kind == "null" or isinstance(kind, list) and "null" in kind:
            return True
        options = prop.get("anyOf") or prop.get("oneOf") or []
        return any(isinstance(o, dict) and o.get("type") == "null" for o in options)

    def __repr__(self) -> str:
        return f"<tool {self.name}{self.__signature__}>"


class ToolProxies:
    """The server's tools by name, as loaded by :meth:`load` or the last ``client.list_tools()``."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._proxies: dict[str, ToolProxy] = {}
        self._loaded = False

    async def load(self) -> ToolProxies:
        """(Re)load the tools (tools/list, every page)."""
        await self._client.list_tools()
        return self

    def _set(self, tools: list[dict[str, Any]]) -> None:
        self._proxies = {t["name"]: ToolProxy(self._client, t) for t in tools
                         if isinstance(t, dict) and isinstance(t.get("name"), str)}
        self._loaded = True

    def __getitem__(self, name: str) -> ToolProxy:
        if not self._loaded:
            raise LookupError("tools are not loaded yet: await client.tools.load() (or client.list_tools())")
        try:
            return self._proxies[name]
        except KeyError:
            raise KeyError(f"no tool {name!r}; the server has {sorted(self._proxies)}") from None

    def __getattr__(self, name: str) -> ToolProxy:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except (LookupError, KeyError) as exc:
            raise AttributeError(exc.args[0]) from None

    def __contains__(self, name: object) -> bool:
        return name in self._proxies

    def __iter__(self) -> Iterator[ToolProxy]:
        return iter(list(self._proxies.values()))

    def __len__(self) -> int:
        return len(self._proxies)

    def names(self) -> list[str]:
        return list(self._proxies)

    def __dir__(self) -> list[str]:
        return [*super().__dir__(), *(n for n in self._proxies if n.isidentifier())]

    def __repr__(self) -> str:
        return f"<tools {', '.join(self._proxies) or '(not loaded)'}>"


