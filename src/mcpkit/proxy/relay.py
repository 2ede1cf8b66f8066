"""Relaying what an upstream asks of its client (sampling, elicitation, roots) to the real client.

The upstream's request is asked of the downstream session whose request it belongs to. Over
HTTP (the request comes on the response stream of our call) and in memory (it comes from the
handler our call started) that is known exactly: the call rides a context variable into the task
that answers. Over stdio nothing ties an upstream's request to one of ours: while every call in
flight through that upstream is one downstream session's, it goes to that session's newest; when
calls of several sessions are in flight it is refused (and an upstream's log line goes to the
proxy's own log), since a guess would show one client what another's call asked. It is asked in the downstream's own revision: a handshake-era client gets a request of
its own (SA-01, EL-01, RT-01); a 2026-07-28 client gets an ``InputRequiredResult`` (MR-01), so
the downstream request stops there and, when the client retries with the answers, runs again
and the relay answers the upstream's repeated question from them.

A request forwarded for a client the proxy cannot name (a completion: its handler gets no
context) is in flight too, as a call of a session no other call shares: what the upstream sends
meanwhile is never taken for another client's, and nothing is asked of anyone for it.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import Any

from ..client import RpcError
from ..protocol.errors import INTERNAL_ERROR, McpError
from ..protocol.revisions import get as get_revision
from ..server.context import ClientCapabilityError, ClientRequestError, ClientTimeoutError, Context
from ..server.rounds import InputRequired

__all__ = ["CURRENT_CALL", "Call", "ask_downstream", "inputs_of", "owner", "served"]

#: the downstream call an upstream request is made for; set in the task that sends it upstream
CURRENT_CALL: ContextVar[Call | None] = ContextVar("mcpkit_proxy_call", default=None)

_INTERNAL_ERROR = -32603
_INVALID_REQUEST = -32600
_CAPABILITY = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}


class Call:
    """A downstream request in flight through the proxy: its context, its loop, and the future
    that stops it when the downstream client has to answer first (2026-07-28). ``ctx`` None: a
    request of a client the proxy cannot name (a completion), whose ``session`` is its own."""

    __slots__ = ("ctx", "loop", "abort", "session", "upstream", "parent")

    def __init__(self, ctx: Context | None, upstream: Any = None) -> None:
        self.ctx = ctx
        #: the upstream (a mount) it goes through, and the call that the code making it served:
        #: a mount inside a mount finds, through it, the outer mount's call (:func:`served`)
        self.upstream = upstream
        self.parent = CURRENT_CALL.get()
        #: whose call this is; an unnamed client's is an object no other call has
        self.session: Any = ctx._session if ctx is not None else object()
        self.loop = asyncio.get_running_loop()
        self.abort: asyncio.Future[None] = self.loop.create_future()

    def log(self, level: str, data: Any, logger: str | None) -> bool:
        """Pass an upstream's log line to this call's client; False when there is none to name."""
        if self.ctx is None:
            return False
        try:
            self.ctx.log(level, data, logger)
        except Exception:  # noqa: BLE001 - a log line must not fail the call
            pass
        return True

    async def ask(self, method: str, params: dict[str, Any] | None) -> Any:
        """On the downstream loop: ask the downstream client, in its revision."""
        ctx = self.ctx
        if ctx is None:
            raise RpcError(_INTERNAL_ERROR, f"{method}: the request in flight through this proxy is not a call "
                                            "whose client can be asked (a completion); not asked")
        capability = _CAPABILITY[method]
        if capability not in (ctx.client_capabilities or {}):
            raise RpcError(_INVALID_REQUEST, f"the client did not declare the {capability!r} capability")
        if method == "elicitation/create" and params is not None:
            params = _elicitation_for(params, ctx.protocol_version)
        try:
            return await ctx._ask(method, params, None)
        except InputRequired:
            if not self.abort.done():
                self.abort.set_exception(InputRequired())
            raise RpcError(_INTERNAL_ERROR, "the client answers with its next request (multi-round trip)") from None
        except ClientRequestError as exc:
            raise RpcError(exc.code, exc.message, exc.data) from None
        except (ClientTimeoutError, ClientCapabilityError) as exc:
            raise RpcError(_INTERNAL_ERROR, str(exc)) from None


def _elicitation_for(params: dict[str, Any], version: str) -> dict[str, Any]:
    """An elicitation in a revision without modes is a form without ``mode`` (EL-04)."""
    try:
        rev = get_revision(version)
    except Exception:  # noqa: BLE001
        return params
    if rev.elicitation_url or "mode" not in params:
        return params
    if params.get("mode") not in (None, "form"):
        raise RpcError(_INVALID_REQUEST, f"URL elicitation does not exist in protocol {version}")
    return {k: v for k, v in params.items() if k != "mode"}


def served(upstream: Any) -> Call | None:
    """The call of ``upstream`` the running code serves, in flight or not (a task that outlived
    it): the one its transport named, or, in a mount inside a mount, the call of ``upstream``
    that the inner mount's call was made for."""
    call = CURRENT_CALL.get()
    while call is not None and call.upstream is not upstream:
        call = call.parent
    return call


def owner(calls: list[Call]) -> Call | None:
    """The downstream call an upstream's message belongs to: the one its transport names (or,
    in a mount inside a mount, the call that one serves); else, when every call in flight is one
    downstream session's, that session's newest; else None."""
    call = CURRENT_CALL.get()
    while call is not None and call not in calls:
        call = call.parent
    if call is not None:
        return call
    if not calls:
        return None
    newest = calls[-1]
    session = newest.session
    for other in calls:
        if other.session is not session:
            return None
    return newest


async def ask_downstream(calls: list[Call], method: str, params: dict[str, Any] | None) -> Any:
    """On the upstream loop: the downstream client's answer to an upstream's request."""
    call = owner(calls)
    if call is None:
        if not calls:
            raise RpcError(_INTERNAL_ERROR, f"{method}: no client request is in flight through this proxy to ask")
        raise RpcError(_INTERNAL_ERROR, f"{method}: calls of several clients are in flight through this proxy and "
                                        "the upstream's transport does not say which one this is for; not asked, "
                                        "so that no client sees what another's call asks")
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call.ask(method, params), call.loop))


async def inputs_of(ctx: Context, requests: dict[str, Any]) -> dict[str, Any]:
    """The client's answers to a 2026-07-28 upstream's input requests, keyed as the upstream keyed
    them. A 2026-07-28 client has not answered yet: every request is recorded first, so the
    InputRequiredResult lists all of them, and then this downstream request stops (MR-01)."""
    answers: dict[str, Any] = {}
    missing = False
    for key, request in requests.items():
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            raise McpError(INTERNAL_ERROR, f"the upstream sent a malformed input request {key!r}")
        got = ctx._ask(request["method"], request.get("params"), None, key)
        if hasattr(got, "ok") and hasattr(got, "answer"):  # a 2026-07-28 input (server/context.py)
            if got.ok:
                answers[key] = got.answer
            else:
                missing = True
        else:
            answers[key] = await got
    if missing:
        raise InputRequired()
    return answers
