"""subscriptions/listen (2026-07-28, SB-01..SB-08): change notifications a client opts in to.

A listen request stays open: the server first acknowledges which of the requested
notification types it will honour (SB-02), then sends each matching change tagged with
the listen request's id as ``_meta.subscriptionId`` (SB-03, MT-09), on that request's own
stream. It ends when the client cancels it (stdio) or closes the stream (HTTP), or when the
session closes (SB-06). Request-scoped notifications never go there (HM-06).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..protocol.engine import RequestReceived
    from .session import ServerSession

__all__ = ["Listener", "listen", "SUBSCRIPTION_ID_KEY", "KIND_FILTERS"]

SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"
#: which filter flag asks for which change notification
KIND_FILTERS = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
}


class Listener:
    __slots__ = ("session", "request_id", "wants", "uris")

    def __init__(self, session: ServerSession, request_id: Any, wants: set[str], uris: set[str]) -> None:
        self.session = session
        self.request_id = request_id
        self.wants = wants
        self.uris = uris

    def _tag(self, params: dict[str, Any] | None) -> dict[str, Any]:
        out = dict(params or {})
        out["_meta"] = {**(out.get("_meta") or {}), SUBSCRIPTION_ID_KEY: self.request_id}
        return out

    def changed(self, method: str) -> None:
        if KIND_FILTERS.get(method) in self.wants:  # SB-01: nothing the client did not ask for
            self.session.notify_request(self.request_id, method, self._tag(None))

    def updated(self, uri: str) -> None:
        if any(uri == u or uri.startswith(u.rstrip("/") + "/") for u in self.uris):
            self.session.notify_request(self.request_id, "notifications/resources/updated", self._tag({"uri": uri}))


def listen(session: ServerSession, req: RequestReceived) -> Any:
    """Acknowledge, register, and stay open until cancelled."""
    params = req.params or {}
    asked = params.get("notifications")
    asked = asked if isinstance(asked, dict) else {}
    wants = {flag for flag in KIND_FILTERS.values() if asked.get(flag) is True}
    uris = {u for u in asked.get("resourceSubscriptions") or () if isinstance(u, str)}
    honoured: dict[str, Any] = {flag: True for flag in sorted(wants)}
    if uris:
        honoured["resourceSubscriptions"] = sorted(uris)
    listener = Listener(session, req.id, wants, uris)
    server = session.server
    # each URI is a subscription: refused as resources/subscribe would refuse it (scopes, the
    # policy's guards, an unknown URI), and then the request is answered with that error and
    # nothing listens; checks that must be awaited are, before anything is acknowledged
    checks = _checked(session, req, uris)

    def start() -> None:
        # SB-02: the acknowledgment is the first message that carries the subscription id
        session.notify_request(
            req.id, "notifications/subscriptions/acknowledged", listener._tag({"notifications": honoured})
        )
        server._listeners.add(listener)

    if not checks:
        start()

    async def stay_open() -> dict[str, Any]:
        import asyncio

        if checks:
            try:
                for check in checks:
                    await check
            finally:
                for check in checks:
                    check.close()  # those a refusal left unawaited
            start()
        try:
            await asyncio.Event().wait()  # until cancelled: by the client, or the session's end
        finally:
            server._listeners.discard(listener)
        return {}  # pragma: no cover - never reached

    return stay_open()


def _checked(session: ServerSession, req: RequestReceived, uris: set[str]) -> list[Any]:
    """The subscription check of each URI (server/dispatch.watch): those that ran here are done
    (a refusal is raised); the coroutines of those that must be awaited are returned."""
    from .dispatch import watch

    pending: list[Any] = []
    try:
        for uri in sorted(uris):
            out = watch(session, req, uri)
            if inspect.iscoroutine(out):
                pending.append(out)
            elif inspect.isawaitable(out):
                pending.append(_awaiting(out))
    except BaseException:
        for check in pending:
            check.close()
        raise
    return pending


async def _awaiting(awaitable: Any) -> Any:
    return await awaitable
