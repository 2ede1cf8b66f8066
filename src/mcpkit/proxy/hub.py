"""What the upstreams mirrored into one Server share: roots changes, subscriptions and tasks fan
out to them, and which of them a name belongs to.

Names are shared too. Every upstream's tool and prompt names begin with its prefix and
separator (its *head*), and an upstream chooses the rest. When one head begins with another
(upstream keys ``a`` and ``a_b``), the two upstreams can list the same name (``a``'s ``b_c`` and
``a_b``'s ``c`` are both ``a_b_c``); such a name is the upstream's with the longer head, whoever
lists it first (:meth:`Hub.owner`). A tool policy shared by several upstreams reads its rules
against the heads of the others (toolpolicy.py), so an upstream cannot pick up a rule written for
another by naming a tool after it.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .upstream import Upstream

__all__ = ["Hub", "batched", "changing", "hub_of", "upstreams_of"]


class Hub:
    """The upstreams of one Server, in the order they were added; see the module docstring."""

    def __init__(self, server: Any) -> None:
        self.upstreams: list[Upstream] = []
        #: held while an upstream's tools or prompts are matched and registered: they are matched
        #: against the other upstreams (their heads, a shared tool policy), which a mount or a
        #: close on another thread may change meanwhile
        self.lock = threading.RLock()
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
        """A task an upstream created for this client is followed there; any other is this
        server's own, or unknown: another client's is answered as an unknown id (TX-07, tasks.py)."""

        def handler(session: Any, req: Any) -> Any:
            task_id = (req.params or {}).get("taskId")
            for upstream in list(self.upstreams):
                if upstream._tasks.owns(task_id, session):
                    return upstream.forward_task(session, req)
            return local(session, req)

        return handler

    def owner(self, upstream: Upstream, name: str) -> Upstream | None:
        """The other upstream whose head begins ``name`` and is longer than ``upstream``'s: the
        name is that one's, not ``upstream``'s (None: it is ``upstream``'s to list)."""
        mine = len(upstream.head)
        return next((u for u in list(self.upstreams) if u is not upstream and u.names.prefix is not None
                     and len(u.head) > mine and name.startswith(u.head)), None)

    def sharing(self, upstream: Upstream) -> list[Upstream]:
        """The other upstreams with the same tool policy as ``upstream`` (one object, or equal
        rules: the same file or dict given to each)."""
        if upstream.tool_policy is None:
            return []
        return [u for u in list(self.upstreams) if u is not upstream and u.tool_policy == upstream.tool_policy]


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


@contextlib.contextmanager
def batched(server: Any) -> Iterator[None]:
    """``server.batch_changes()`` around what one listing of an upstream changes: its clients get
    one ``list_changed`` per kind, not one per tool (TL-13), however many tools an upstream lists
    or re-lists. Not while another thread's batch is open (that thread may be waiting for this
    one: a mount made inside ``batch_changes``): each change is then announced as it is made.
    Taken before :attr:`Hub.lock`, never inside it, so the two locks are always taken in one order."""
    batch = server._batch
    if batch is not None and batch[0] != threading.get_ident():
        yield
        return
    with server.batch_changes():
        yield


@contextlib.contextmanager
def changing(server: Any) -> Iterator[Hub]:
    """What an upstream's listing, withdrawal or mount changes, in one batch (:func:`batched`)
    and under the hub's lock: the two taken in the one order they are taken everywhere."""
    hub = hub_of(server)
    with batched(server), hub.lock:
        yield hub
