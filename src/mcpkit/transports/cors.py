"""CORS for browser clients of the HTTP app (``http_app(cors_origins=[...])``, ``--cors-origin``).

A page on another origin may call the server only when its origin is listed. The preflight
(``OPTIONS`` with ``Access-Control-Request-Method``) is answered here, before authorization (a
browser sends no credentials on it), and every answer to a listed origin exposes the headers a
client must read: ``Mcp-Session-Id`` (HL-15: the session), ``Mcp-Protocol-Version`` and
``WWW-Authenticate`` (the 401 challenge that starts authorization, AU-03). A listed origin is
also accepted by the Origin check against DNS rebinding (HS-02); an unlisted one stays refused.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CorsMiddleware", "EXPOSED_HEADERS", "ALLOWED_METHODS"]

EXPOSED_HEADERS = b"Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate"
ALLOWED_METHODS = b"GET, POST, DELETE, OPTIONS"
#: request headers a browser client of MCP sends (plus the 2026-07-28 Mcp-Param-* family)
_ALLOWED_HEADERS = frozenset({
    "content-type", "accept", "authorization", "mcp-session-id", "mcp-protocol-version", "last-event-id",
    "mcp-method", "mcp-name",
})
_MAX_AGE = b"600"


def _allowed_header(name: str) -> bool:
    return name in _ALLOWED_HEADERS or name.startswith("mcp-param-")


class CorsMiddleware:
    """Wraps the MCP ASGI app; attribute access reaches the wrapped app."""

    def __init__(self, app: Any, origins: list[str]) -> None:
        self.app = app
        self.origins = frozenset(o.rstrip("/").lower() for o in origins)
        self.any_origin = "*" in self.origins

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("app", "origins", "any_origin"):  # its own; the rest is the MCP app's (as read)
            object.__setattr__(self, name, value)
        else:
            setattr(self.app, name, value)

    def _listed(self, origin: str) -> bool:
        return self.any_origin or origin in self.origins

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        raw_origin = headers.get(b"origin")
        origin = raw_origin.decode("latin-1").rstrip("/").lower() if raw_origin is not None else ""
        if scope["method"] == "OPTIONS" and raw_origin is not None and b"access-control-request-method" in headers:
            await self._preflight(send, origin, headers)
            return
        if not origin or not self._listed(origin):
            await self.app(scope, receive, send)
            return
        extra = [(b"access-control-allow-origin", raw_origin.rstrip(b"/")),
                 (b"access-control-expose-headers", EXPOSED_HEADERS), (b"vary", b"Origin")]

        async def send_with_cors(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", ()) if not k.lower().startswith(b"access-control-")]
                message = {**message, "headers": kept + extra}
            await send(message)

        await self.app(scope, receive, send_with_cors)

    async def _preflight(self, send: Any, origin: str, headers: dict[bytes, bytes]) -> None:
        method = headers.get(b"access-control-request-method", b"").decode("latin-1").upper()
        asked = [h.strip().lower() for h in headers.get(b"access-control-request-headers", b"").decode("latin-1")
                 .split(",") if h.strip()]
        ok = self._listed(origin) and method.encode() in ALLOWED_METHODS.split(b", ") and all(
            _allowed_header(h) for h in asked)
        if not ok:
            await send({"type": "http.response.start", "status": 403, "headers": [(b"vary", b"Origin")]})
            await send({"type": "http.response.body", "body": b""})
            return
        out = [
            (b"access-control-allow-origin", headers[b"origin"].rstrip(b"/")),
            (b"access-control-allow-methods", ALLOWED_METHODS),
            (b"access-control-allow-headers", ", ".join(asked).encode("latin-1") if asked else b"content-type"),
            (b"access-control-expose-headers", EXPOSED_HEADERS),
            (b"access-control-max-age", _MAX_AGE),
            (b"vary", b"Origin"),
        ]
        await send({"type": "http.response.start", "status": 204, "headers": out})
        await send({"type": "http.response.body", "body": b""})
