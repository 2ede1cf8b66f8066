"""``GET /healthz`` and ``GET /readyz``: what a load balancer or an orchestrator asks of the process.

- ``/healthz``: the process serves. 200 while it is up, whatever its upstreams do: a liveness
  probe that failed with an upstream would have a healthy proxy restarted for another's outage.
- ``/readyz``: it should be sent traffic. 503 once its graceful shutdown began (transports/
  http_drain.py: a balancer stops sending new requests while those in flight finish) and, with a
  ``readiness`` callable (``mcpkit proxy``: every upstream connected), while that says no. The
  JSON body says why.

Both are answered before any credential is asked for, as a load balancer has none, so they say
nothing a stranger should not read: states and counts, never a URL, a variable or an upstream's
error text unredacted (the ``readiness`` callable's job). The Host and Origin checks (HS-01,
HS-02) apply as to every other route.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .. import _json
from .http_drain import apps_on
from .http_guard import HostGuard
from .mount import route_path

__all__ = ["HealthRoutes", "PATHS"]

PATHS = ("/healthz", "/readyz")
_HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]

#: () -> (ready, details): details is merged into the /readyz body
Readiness = Callable[[], tuple[bool, dict[str, Any]]]


class HealthRoutes:
    """An ASGI app answering :data:`PATHS` (below its mount point) and passing the rest to ``app``."""

    def __init__(self, app: Any, guard: HostGuard, readiness: Readiness | None = None) -> None:
        self.app = app
        self.guard = guard
        self.readiness = readiness

    _OWN = frozenset({"app", "guard", "readiness"})

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)  # as CorsMiddleware: the MCP app's sessions, path, ... stay reachable

    def __setattr__(self, name: str, value: Any) -> None:
        # ... and settable: a setting written on the app (its timeouts, say) reaches the MCP app,
        # not a shadow copy on this wrapper that nothing reads
        if name in self._OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.app, name, value)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD") or route_path(scope) not in PATHS:
            await self.app(scope, receive, send)
            return
        refused = self.guard.refusal(dict(scope["headers"]))
        if refused is not None:
            await _answer(send, scope, 403, {"status": "refused", "error": refused})
            return
        if route_path(scope) == "/healthz":
            await _answer(send, scope, 200, {"status": "ok"})
            return
        if any(app.draining for app in apps_on(asyncio.get_running_loop())):
            await _answer(send, scope, 503, {"status": "draining"})
            return
        ready, details = self.readiness() if self.readiness is not None else (True, {})
        await _answer(send, scope, 200 if ready else 503, {"status": "ready" if ready else "not ready", **details})


async def _answer(send: Any, scope: dict[str, Any], status: int, body: dict[str, Any]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else _json.dumps(body)})
