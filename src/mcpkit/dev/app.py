"""The ASGI app of ``mcpkit dev``: the inspector page (static files shipped in this package) at
``/``, a small JSON description of the server at ``/dev/info.json`` (its name, the revisions, and
the tools its gates hide), the state of the server behind the page as a stream of events at
``/dev/events`` (restarting, up, or why it did not load: dev/attach.py), and the server's own MCP
app (Streamable HTTP at ``/mcp``, legacy SSE at ``/sse``) for everything else.

The page speaks MCP to ``/mcp`` from the browser like any client does, on the same origin, so the
server's Host and Origin checks (HS-01/HS-02) stay on as they are in production. The page and
``/dev/info.json`` pass the same checks first: a page on another site that rebinds its DNS name
to 127.0.0.1 must not read the server's name and version, nor what its policy hides, either.
"""

from __future__ import annotations

import asyncio
import json
from importlib import resources
from typing import Any

__all__ = ["DevApp", "STATIC_FILES"]

#: file name -> content type; nothing else is served from the package
STATIC_FILES = {
    "index.html": "text/html; charset=utf-8",
    "client.js": "text/javascript; charset=utf-8",
    "forms.js": "text/javascript; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
_HEADERS = [(b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff"),
            (b"content-security-policy",
             b"default-src 'self'; img-src 'self' data:; media-src 'self' data:; style-src 'self'; "
             b"script-src 'self'; connect-src 'self'; frame-ancestors 'none'")]


#: the paths this app answers itself (and /static/...), before the MCP app
_OWN = frozenset({"/", "/index.html", "/dev/info.json", "/dev/events", "/favicon.ico"})
#: how often an open event stream looks whether the server is shutting down (it then ends, so
#: that the shutdown does not wait for it)
_SHUTDOWN_CHECK = 0.25


def _gated(server: Any) -> dict[str, Any]:
    """What the gates hide (TL-14: listed nowhere, so the page cannot learn it over MCP), told the
    way ``mcpkit docs`` tells it: each hidden tool with its description, schema and the reason, and
    a manager's hidden actions by tool. Served only behind the Host/Origin guard, as the page is."""
    from ..reference_docs import server_listing

    _, listing = server_listing(server)
    gated, actions = [], {}
    for tool in listing["tools"]:
        if tool.get("x-mcpkit-hidden"):
            gated.append({"name": tool["name"], "description": tool.get("description", ""),
                          "annotations": tool.get("annotations", {}), "inputSchema": tool.get("inputSchema", {}),
                          "reason": tool["x-mcpkit-hidden"]})
        hidden = [{"name": a["name"], "reason": a["x-mcpkit-hidden"]} for a in tool.get("x-mcpkit-actions") or ()
                  if a.get("x-mcpkit-hidden")]
        if hidden:
            actions[tool["name"]] = hidden
    return {"gated": gated, "gated_actions": actions}


def _static(name: str) -> bytes:
    return resources.files("mcpkit.dev").joinpath("static", name).read_bytes()


class DevApp:
    """The inspector page around ``mcp_app`` (from ``server.http_app()``)."""

    def __init__(self, server: Any, mcp_app: Any, *, reload: bool = False, events: Any = None,
                 attached: str | None = None) -> None:
        from .attach import DevEvents

        self.server = server
        self.mcp_app = mcp_app
        self.reload = reload
        #: what the page is attached to when it is not a server loaded here (a command or a URL)
        self.attached = attached
        if events is None:
            events = DevEvents()
            events.publish(state="up", error=None)
        self.events = events

    @property
    def info(self) -> bytes:
        """Read at each request: the server's name may change at a restart."""
        from ..protocol.revisions import HANDSHAKE_VERSIONS, MODERN_VERSIONS

        server = self.server
        return json.dumps({
            "name": server.name, "version": server.version, "title": server.title,
            "endpoint": getattr(self.mcp_app, "path", "/mcp"),
            "revisions": [*HANDSHAKE_VERSIONS, *MODERN_VERSIONS], "modern": list(MODERN_VERSIONS),
            "latest": HANDSHAKE_VERSIONS[-1], "reload": self.reload, "attached": self.attached, **_gated(server),
        }).encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            path = scope["path"]
            if path in _OWN or path.startswith("/static/"):
                refused = self.mcp_app.guard.refusal(dict(scope["headers"]))
                if refused is not None:  # the /mcp app's own Host/Origin verdict (HS-01, HS-02)
                    await self._send(send, 403, "text/plain; charset=utf-8", refused.encode())
                    return
            if path in ("/", "/index.html"):
                await self._send(send, 200, STATIC_FILES["index.html"], _static("index.html"))
                return
            if path.startswith("/static/") and path[len("/static/"):] in STATIC_FILES:
                name = path[len("/static/"):]
                await self._send(send, 200, STATIC_FILES[name], _static(name))
                return
            if path == "/dev/info.json":
                await self._send(send, 200, "application/json", self.info)
                return
            if path == "/dev/events":
                await self._stream(receive, send)
                return
            if path == "/favicon.ico":
                await self._send(send, 204, "text/plain", b"")
                return
        await self.mcp_app(scope, receive, send)

    async def _stream(self, receive: Any, send: Any) -> None:
        """Server-sent events, one per state of the server behind the page, until the page goes
        or this server shuts down."""
        headers = [(b"content-type", b"text/event-stream"), *_HEADERS]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            with self.events.listening() as queue:
                while not gone.done() and not getattr(self.mcp_app, "draining", False):
                    try:
                        state = await asyncio.wait_for(queue.get(), _SHUTDOWN_CHECK)
                    except asyncio.TimeoutError:
                        continue
                    data = json.dumps(state).encode()
                    await send({"type": "http.response.body", "body": b"data: " + data + b"\n\n", "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        except OSError:  # the page went while an event was written
            pass
        finally:
            gone.cancel()

    @staticmethod
    async def _send(send: Any, status: int, content_type: str, body: bytes) -> None:
        headers = [(b"content-type", content_type.encode()), *_HEADERS]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
