"""What the upstreams mirrored into one Server share: roots changes, subscriptions and tasks fan
out to them.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .upstream import Upstream

__all__ = ["Hub", "hub_of", "upstreams_of"]


class Hub:
    """The upstreams of one Server, in the order they were added."""

    def __init__(self, server: Any) -> None:
        self.upstreams: list[Upstream] = []
        method = "notifications/roots/list_changed"
        before = server._notification_handlers.get(method)

        def roots_changed(params: dict[str, Any]) -> Any:
            for upstream in list(self.upstreams):
                upstream.roots_changed()
            return before(params) if before is not None else None

        server._notification_handlers[method] = roots_changed
        subscribe = server._methods["resources/subscribe"]

        def subscribe_upstream(session: Any, req: Any) -> Any:
            result = subscribe(session, req)
            uri = (req.params or {}).get("uri")
            for upstream in list(self.upstreams):
                upstream.subscribe(uri)
            return result

        server._methods["resources/subscribe"] = subscribe_upstream
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            if method in server._methods:
                server._methods[method] = self._task_method(server._methods[method])

    def _task_method(self, local: Callable[..., Any]) -> Callable[..., Any]:
        """A task an upstream created is followed there; any other is this server's own."""

        def handler(session: Any, req: Any) -> Any:
            task_id = (req.params or {}).get("taskId")
            for upstream in list(self.upstreams):
                if task_id in upstream._tasks:
                    return upstream.forward_task(session, req)
            return local(session, req)

        return handler

_HUBS: weakref.WeakKeyDictionary[Any, Hub] = weakref.WeakKeyDictionary()


def hub_of(server: Any) -> Hub:
    hub = _HUBS.get(server)
    if hub is None:
        hub = _HUBS[server] = Hub(server)
    return hub


def upstreams_of(server: Any) -> list[Upstream]:
    """The upstreams mirrored into ``server`` (mounted or proxied), in the order they were added."""
    hub = _HUBS.get(server)
    return list(hub.upstreams) if hub is not None else []
