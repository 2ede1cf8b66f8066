"""Resources and resource templates (RFC 6570), and how read results are shaped."""

from __future__ import annotations

import base64
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol.meta import check_icons, check_meta, check_uri_scheme

if TYPE_CHECKING:
    from .registration import Completer


__all__ = ["Resource", "ResourceTemplate", "contents_from"]


class _Readable:
    """What resources and templates share: display metadata and the read handler."""

    __slots__ = (
        "name", "title", "description", "mime_type", "annotations", "icons", "meta",
        "handler", "is_async", "context_param", "ttl_ms", "cache_scope", "scopes", "bind",
        "call_names",
    )

    def _init(
        self,
        where: str,
        handler: Callable[..., Any],
        name: str,
        title: str | None,
        description: str | None,
        mime_type: str | None,
        annotations: dict[str, Any] | None,
        icons: list[dict[str, Any]] | None,
        meta: dict[str, Any] | None,
        context_param: str | None,
    ) -> None:
        self.name = name
        self.title = title
        self.description = description
        self.mime_type = mime_type
        self.annotations = annotations
        self.icons = check_icons(icons, where)
        self.meta = check_meta(meta, where)
        self.handler = handler
        self.is_async = inspect.iscoroutinefunction(handler)
        self.context_param = context_param
        self.ttl_ms: int | None = None  # cache hints of reads (2026-07-28); None: the server's
        self.cache_scope: str | None = None
        #: OAuth scopes a token needs to read it over authenticated HTTP (mcpkit.auth)
        self.scopes: tuple[str, ...] = ()
        #: converts the variables whose type checks itself (a SandboxPath), as for tools; None: none
        self.bind: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        #: how a tool name given to ``ctx.call_tool`` in its handler reads in this server: the
        #: prefixing of the ``include`` that copied it here (compose.Names.name); None: as given
        self.call_names: Callable[[str], str] | None = None

    def _describe(self, out: dict[str, Any], size: int | None = None) -> dict[str, Any]:
        for key, value in (
            ("title", self.title),
            ("description", self.description),
            ("mimeType", self.mime_type),
            ("size", size),
            ("annotations", self.annotations),
            ("icons", self.icons),
            ("_meta", self.meta),
        ):
            if value is not None:
                out[key] = value
        return out


class Resource(_Readable):
    __slots__ = ("uri", "size", "skill")

    def __init__(
        self,
        uri: str,
        handler: Callable[..., Any],
        *,
        name: str,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        context_param: str | None = None,
    ) -> None:
        self.uri = check_uri_scheme(uri, "resource")
        self.size = size
        #: the SKILL.md URI of the skill this file belongs to (server/skills.py), or None
        self.skill: str | None = None
        self._init(f"resource {uri!r}", handler, name, title, description, mime_type, annotations, icons, meta,
                   context_param)

    def describe(self) -> dict[str, Any]:
        return self._describe({"uri": self.uri, "name": self.name}, self.size)


class ResourceTemplate(_Readable):
    __slots__ = ("template", "converters", "completions", "_segments")

    def __init__(
        self,
        uri_template: str,
        handler: Callable[..., Any],
        *,
        name: str,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        annotations: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        context_param: str | None = None,
        completions: dict[str, Completer] | None = None,
    ) -> None:
        from .uritemplate import UriTemplate  # only servers with templates pay for it

        check_uri_scheme(uri_template, "resource template")
        self.template = UriTemplate(uri_template)
        self._segments = self.template.segment_names
        self._init(f"resource template {uri_template!r}", handler, name, title, description, mime_type,
                   annotations, icons, meta, context_param)
        #: variable name -> its completer, as registration prepared it
        self.completions = completions or {}
        from .schema import checking_bind

        self.bind = checking_bind(handler)
        # template variables arrive as text; int/float/bool hints convert them
        self.converters: dict[str, Callable[[Any], Any]] = {}
        try:
            hints = inspect.get_annotations(handler, eval_str=True)
        except Exception:  # noqa: BLE001
            hints = {}
        params = inspect.signature(handler).parameters
        for var in self.template.variables:
            if var not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
                raise ValueError(
                    f"resource template {uri_template!r}: the handler has no parameter for variable {var!r}"
                )
            hint = hints.get(var)
            if hint in (int, float):
                self.converters[var] = hint
            elif hint is bool:
                self.converters[var] = lambda v: str(v).lower() in ("1", "true", "yes")

    @property
    def uri_template(self) -> str:
        return self.template.template

    def match(self, uri: str) -> dict[str, Any] | None:
        found = self.template.match(uri)
        if found is None:
            return None
        if any(found.get(name) == "" for name in self._segments):
            # RFC 6570 lets x://{id} match x:// with id "": it names no resource, and a handler
            # asked for id "" could read what sits at the empty name (a folder, the first row)
            return None
        try:
            return {k: (self.converters[k](v) if k in self.converters else v) for k, v in found.items()}
        except (TypeError, ValueError):
            return None  # "abc" for an int variable: this template does not name that resource

    def describe(self) -> dict[str, Any]:
        return self._describe({"uriTemplate": self.template.template, "name": self.name})


def _one(uri: str, mime_type: str | None, value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        if "uri" not in value:
            value = {"uri": uri, **value}
        if "text" not in value and "blob" not in value:
            # a dict is the contents object itself (RS-03), not data to serialise: data sent as
            # JSON is a string the handler makes, with the media type it declares
            raise TypeError("a resource handler returned a dict without 'text' or 'blob': a dict is read as the "
                            "contents ({'text': ...} or {'blob': ...}); for JSON data return json.dumps(value) "
                            "and register the resource with mime_type='application/json'")
        if isinstance(value.get("blob"), (bytes, bytearray, memoryview)):
            value = {**value, "blob": base64.b64encode(bytes(value["blob"])).decode("ascii")}  # RS-04
        if mime_type and "mimeType" not in value:
            value = {**value, "mimeType": mime_type}
        return value
    out: dict[str, Any] = {"uri": uri}
    if mime_type:
        out["mimeType"] = mime_type
    if isinstance(value, str):
        out["text"] = value
    elif isinstance(value, (bytes, bytearray, memoryview)):
        out["blob"] = base64.b64encode(bytes(value)).decode("ascii")  # RS-04
    else:
        raise TypeError(
            f"a resource handler returned {type(value).__name__}: return str, bytes, a contents dict or a list of them"
        )
    return out


def contents_from(uri: str, mime_type: str | None, value: Any) -> list[dict[str, Any]]:
    """Shape a read handler's return value into ReadResourceResult.contents (RS-03)."""
    if isinstance(value, list):
        return [_one(uri, mime_type, v) for v in value]
    return [_one(uri, mime_type, value)]
