"""MCP Apps (SEP-1865, the ext-apps specification of 2026-01-26): HTML views a host renders for
a tool's results.

An app is a resource with a ``ui://`` URI and the MIME type ``text/html;profile=mcp-app``; a
tool names it in ``_meta.ui.resourceUri``; server and host agree on the extension through
``capabilities.extensions["io.modelcontextprotocol/ui"]``. The host fetches the view with
``resources/read`` and hands it the tool's input and result over postMessage
(``ui/notifications/tool-input``, ``ui/notifications/tool-result``). Hosts that do not render
apps still get the tool's ordinary content, which is why a linked tool keeps a text block.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import Context

__all__ = ["APP_MIME_TYPE", "UI_EXTENSION", "client_supports_apps", "tool_ui_meta", "ui_resource_meta"]

#: the extension's identifier in capabilities.extensions (ext-apps 2026-01-26, "Extension Identifier")
UI_EXTENSION = "io.modelcontextprotocol/ui"
#: the one content type the 2026-01-26 specification defines for views
APP_MIME_TYPE = "text/html;profile=mcp-app"
_VISIBILITY = ("model", "app")
_PERMISSIONS = {"camera": "camera", "microphone": "microphone", "geolocation": "geolocation",
                "clipboard_write": "clipboardWrite"}


def check_ui_uri(uri: str, what: str) -> str:
    """A view's URI "MUST use the ui:// URI scheme"."""
    if not isinstance(uri, str) or not uri.startswith("ui://") or len(uri) <= len("ui://"):
        raise ValueError(f"{what}: an MCP App's URI must start with ui:// (got {uri!r})")
    return uri


def _domains(value: Sequence[str] | None, name: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{name} must be a list of origins such as ['https://api.example.com']")
    return list(value)


def ui_resource_meta(
    *,
    connect_domains: Sequence[str] | None = None,
    resource_domains: Sequence[str] | None = None,
    frame_domains: Sequence[str] | None = None,
    base_uri_domains: Sequence[str] | None = None,
    permissions: Sequence[str] = (),
    domain: str | None = None,
    prefers_border: bool | None = None,
) -> dict[str, Any]:
    """The ``_meta.ui`` of a view (UIResourceMeta): the origins its CSP may allow, the sandbox
    permissions it asks for, a dedicated origin and a border preference. Every origin left out
    stays blocked: the host's restrictive default applies."""
    csp = {key: value for key, value in (
        ("connectDomains", _domains(connect_domains, "connect_domains")),
        ("resourceDomains", _domains(resource_domains, "resource_domains")),
        ("frameDomains", _domains(frame_domains, "frame_domains")),
        ("baseUriDomains", _domains(base_uri_domains, "base_uri_domains")),
    ) if value is not None}
    meta: dict[str, Any] = {}
    if csp:
        meta["csp"] = csp
    if permissions:
        unknown = [p for p in permissions if p not in _PERMISSIONS]
        if unknown:
            raise ValueError(f"unknown app permission {unknown[0]!r}; use {', '.join(_PERMISSIONS)}")
        meta["permissions"] = {_PERMISSIONS[p]: {} for p in permissions}
    if domain is not None:
        meta["domain"] = domain
    if prefers_border is not None:
        meta["prefersBorder"] = bool(prefers_border)
    return meta


def tool_ui_meta(uri: str, visibility: Sequence[str] | None, tool: str) -> dict[str, Any]:
    """A tool's ``_meta.ui`` (McpUiToolMeta): which view renders its results, and who may call
    it (``["model", "app"]`` by default; ``["app"]`` hides it from the model)."""
    meta: dict[str, Any] = {"resourceUri": check_ui_uri(uri, f"tool {tool!r}")}
    if visibility is not None:
        chosen = list(visibility)
        if not chosen or any(v not in _VISIBILITY for v in chosen):
            raise ValueError(f"tool {tool!r}: ui_visibility is a non-empty list of 'model' and 'app'")
        meta["visibility"] = chosen
    return meta


def app_reader(html: str | Callable[..., Any], ui_meta: dict[str, Any]) -> Callable[..., Any]:
    """The read handler of a view: its HTML, with the view's ``_meta.ui`` on the contents too
    (hosts read the CSP from what ``resources/read`` returns)."""
    meta = {"ui": ui_meta} if ui_meta else None

    def shape(value: Any) -> Any:
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        if not isinstance(value, str):
            raise TypeError("an MCP App handler returns its HTML document as str")
        out: dict[str, Any] = {"text": value, "mimeType": APP_MIME_TYPE}
        if meta is not None:
            out["_meta"] = meta
        return out

    if isinstance(html, str):
        document = shape(html)
        return lambda: document
    import inspect

    if inspect.iscoroutinefunction(html):

        async def read_async(**kwargs: Any) -> Any:
            return shape(await html(**kwargs))

        read_async.__wrapped__ = html  # type: ignore[attr-defined]  # a Context parameter is seen
        return read_async

    def read(**kwargs: Any) -> Any:
        return shape(html(**kwargs))

    read.__wrapped__ = html  # type: ignore[attr-defined]
    return read


def client_supports_apps(ctx: Context) -> bool:
    """Whether the client declared the Apps extension with the HTML view type (ext-apps
    "Client (Host) Capabilities"): a handler may then lean on the view, while the text content
    still has to stand on its own for every other host."""
    caps = ctx.client_capabilities or {}
    ext = (caps.get("extensions") or {}).get(UI_EXTENSION)
    if not isinstance(ext, dict):
        return False
    types = ext.get("mimeTypes")
    return isinstance(types, list) and APP_MIME_TYPE in types
