"""The HTTP side of authorization: which scopes a request body needs, and the refusals.

transports/http.py asks the ResourceServer (mcpkit.auth.resource) to verify each request's
bearer token and calls :func:`scopes_needed` on each JSON-RPC body, so a tool, resource or
prompt declared with ``scopes=`` is refused with 403 before anything of it runs (AU-08, AU-09).
Imported only by servers built with ``auth=``.
"""

from __future__ import annotations

import contextvars
import re
from typing import Any

from ..protocol.errors import INVALID_REQUEST, McpError
from .http_quotas import client_address, peer_address

__all__ = ["ACCESS", "AuthRoutes", "scopes_needed"]

#: the AccessToken of the HTTP request being handled (set around each authenticated request)
ACCESS: contextvars.ContextVar[Any] = contextvars.ContextVar("mcpkit_access", default=None)
#: the error a refusal's challenge names (RFC 6750 §3); a bare challenge names none
_CHALLENGE_ERROR = re.compile(r'\berror="([A-Za-z_]{1,40})"')


def _needed_by(server: Any, message: Any) -> tuple[str, ...]:
    if type(message) is not dict:
        return ()
    params = message.get("params")
    if type(params) is not dict:
        return ()
    method = message.get("method")
    if method == "tools/call":
        name = params.get("name")
        search = server._tool_search
        inner = search.named(params.get("arguments")) if search is not None and name == search.call_name else None
        if inner is not None:  # tool search's call tool is read as a call of the tool it names (server/toolsearch.py)
            params, name = inner, inner["name"]
        # a name that is no string names nothing: the session answers it with -32602
        item: Any = server._tools.get(name) if isinstance(name, str) else None
        if item is not None and (item.actions is not None or item.action_scopes):
            return _call_scopes(server, item, params.get("arguments"))
    elif method == "prompts/get":
        name = params.get("name")
        item = server._prompts.get(name) if isinstance(name, str) else None
    elif method in ("resources/read", "resources/subscribe"):
        item = _resource(server, params.get("uri"))
    elif method == "subscriptions/listen":  # each URI watched is a subscription (server/listen.py)
        asked = params.get("notifications")
        uris = asked.get("resourceSubscriptions") if type(asked) is dict else None
        needed: dict[str, None] = {}
        for uri in uris if type(uris) is list else ():
            needed.update(dict.fromkeys(_scopes_of(_resource(server, uri))))
        return tuple(needed)
    elif method == "completion/complete":  # CP-05: completing an item needs what using it needs
        ref = params.get("ref")
        try:
            item = server.completion_target(ref) if type(ref) is dict else None
        except McpError:
            item = None  # an unknown ref: the session answers -32602 (CP-03)
    else:
        return ()
    return _scopes_of(item)


def _scopes_of(item: Any) -> tuple[str, ...]:
    """The scopes a request naming ``item`` needs before anything runs. A file of a skill needs
    none here: a skill hidden by its scopes is invisible on every route (server/skills.py), so
    the pipeline answers it as a resource that does not exist, where a 403 would name the scope
    and say that it does."""
    if getattr(item, "skill", None) is not None:
        return ()
    return tuple(getattr(item, "scopes", ()) or ())


def _resource(server: Any, uri: Any) -> Any:
    """The resource or template ``uri`` names, or None (also for a URI that is no string: the
    session answers that with -32602)."""
    found = server.find_resource(uri) if isinstance(uri, str) else None
    return found[0] if found is not None else None


def _call_scopes(server: Any, tool: Any, arguments: Any) -> tuple[str, ...]:
    """A manager tool's (or its mirror's) scopes for the action ``arguments`` name, as the call
    path checks them (CallContext.scopes, the action step)."""
    from ..server.pipeline import policy_layer, scopes_for

    per_action = tool.action_scopes or policy_layer().action_scopes(server, tool)
    return tuple(scopes_for(tool, arguments, per_action))


def scopes_needed(server: Any, payload: Any) -> tuple[str, ...]:
    """Every scope the requests in ``payload`` (one message or a batch) need, in order."""
    messages = payload if type(payload) is list else [payload]
    needed: dict[str, None] = {}
    for message in messages:
        for scope in _needed_by(server, message):
            needed[scope] = None
    return tuple(needed)


class AuthRoutes:
    """The authorization steps of McpHttpApp (transports/http.py), kept here with the rest of
    the HTTP side of auth. They use the app's ``auth``, ``server``, ``path``, ``_plain`` and
    ``_route``."""

    auth: Any
    server: Any
    guard: Any
    path: str
    _metadata_paths: frozenset[str]

    async def _plain(self, send: Any, status: int, body: bytes, headers: dict[bytes, bytes],
                     extra: list[tuple[bytes, bytes]] | None = None) -> None:
        raise NotImplementedError

    async def _route(self, scope: dict[str, Any], receive: Any, send: Any, headers: dict[bytes, bytes], path: str,
                     method: str) -> None:
        raise NotImplementedError

    async def _authenticated(
        self, scope: dict[str, Any], receive: Any, send: Any, headers: dict[bytes, bytes], path: str, method: str
    ) -> None:
        """With auth: the RFC 9728 metadata is public (AU-02, AU-03); everything else needs a
        valid bearer token, checked on every request (AU-13, SEC-03)."""
        auth = self.auth
        resource = auth.resource_for(scope.get("scheme", "http"), headers.get(b"host", b"").decode("latin-1"),
                                     self.path)
        if path in self._metadata_paths:
            if method != "GET":
                await self._plain(send, 405, _error_body(INVALID_REQUEST, "Method not allowed."), headers,
                                  [(b"allow", b"GET")])
                return
            # the resource URI comes from the Host when none is configured: cacheable only when
            # that Host is one the server names (transports/discovery.py says why)
            host = headers.get(b"host", b"").decode("latin-1")
            cacheable = getattr(auth, "resource", None) is not None or self.guard.host_named(host)
            await self._plain(send, 200, auth.metadata_body(resource), headers,
                              [(b"access-control-allow-origin", b"*"),
                               (b"cache-control", b"max-age=3600" if cacheable else b"no-store")])
            return
        access = await self._access(scope, send, headers, path, method, resource)
        if access is None:
            return
        token = ACCESS.set((access, resource))
        try:
            await self._route(scope, receive, send, headers, path, method)
        finally:
            ACCESS.reset(token)

    async def _access(self, scope: dict[str, Any], send: Any, headers: dict[bytes, bytes], path: str, method: str,
                      resource: Any = None) -> Any:
        """The request's verified access, or None once it has been refused (401/403, audited)."""
        from ..auth.resource import AuthFailure

        auth = self.auth
        if resource is None:
            resource = auth.resource_for(scope.get("scheme", "http"), headers.get(b"host", b"").decode("latin-1"),
                                         self.path)
        try:
            # an API-key scheme (mcpkit.auth.ApiKeyAuth) names its own header
            return await auth.authenticate(headers.get(getattr(auth, "header", b"authorization")), resource)
        except AuthFailure as refusal:
            self._audit_unauthenticated(scope, method, path, refusal)
            await self._refuse_auth(send, headers, refusal)
            return None

    async def _refuse_auth(self, send: Any, headers: dict[bytes, bytes], refusal: Any) -> None:
        await self._plain(send, refusal.status, _error_body(INVALID_REQUEST, refusal.message), headers,
                          [(b"www-authenticate", refusal.challenge.encode("latin-1"))])

    async def _scopes_refused(self, send: Any, headers: dict[bytes, bytes], payload: Any) -> bool:
        """AU-09: a request for an item declared with ``scopes=`` the token lacks gets 403."""
        if self.auth is None:
            return False
        from ..auth.resource import AuthFailure

        access, resource = ACCESS.get()
        try:
            self.auth.require(access, scopes_needed(self.server, payload), resource)
        except AuthFailure as refusal:
            self._audit_refused(access, payload)
            await self._refuse_auth(send, headers, refusal)
            return True
        return False

    def _audit_refused(self, access: Any, payload: Any) -> None:
        """Under a policy with an audit log, one line per message the 403 refused: the calls a
        token tried beyond its scopes are on record, as those refused in the call path are."""
        server = self.server
        policy = getattr(server, "_policy", None)
        if policy is None or policy.audit is None:
            return
        from ..server.pipeline import policy_layer

        for message in payload if type(payload) is list else [payload]:
            missing = self.auth.missing(access, _needed_by(server, message))
            if missing:
                policy_layer().audit_refused(server, access, message, missing)

    def _audit_unauthenticated(self, scope: dict[str, Any], method: str, path: str, refusal: Any) -> None:
        """Under a policy with an audit log, one line per request refused before its body was
        read: credentials that do not verify (401) or a token without the server-wide scopes
        (403). A request with none at all is how a client finds where to get a token (AU-06),
        not an attempt: its challenge names no error, and it writes nothing."""
        server = self.server
        policy = getattr(server, "_policy", None)
        if policy is None or policy.audit is None:
            return
        found = _CHALLENGE_ERROR.search(refusal.challenge)
        if found is None:
            return
        client = scope.get("client")
        from ..server.pipeline import policy_layer

        # a 403 for the server-wide scopes carries the token and what it lacked (auth.require)
        policy_layer().audit_unauthenticated(server, found.group(1), refusal.message, f"{method} {path}",
                                             str(client[0]) if client else None, client_address(scope),
                                             getattr(refusal, "access", None), getattr(refusal, "missing", None))

    def _bind(self, hs: Any, scope: dict[str, Any]) -> Any:
        """The session serves the caller of this request: its principal keys rate limits and
        audit lines, and a session belongs to the user who opened it (SEC-03). Returns this
        request's verified token (None without auth), for the session to judge this request's
        messages by: the same user may step up to another token within one session while an
        earlier call still runs (or is still being read off the loop), and that call keeps
        the scopes and ``ctx.access_token`` it was sent with. Without auth, the caller is named
        by the address that opened the session."""
        if self.auth is None:
            # nobody is named: each address is a caller of its own (its rate-limit buckets, its
            # audit lines), so one client cannot spend every other's budget. The name is the
            # session's first address, exact, and stays: a request from another address on the
            # same session id does not rename the calls in flight, and two hosts of one IPv6
            # /64 are not one name (the rate limiter still counts a /64 as one budget)
            if hs.session.anonymous == "anonymous":
                hs.session.anonymous = "anonymous@" + peer_address(scope)
            return None
        access = ACCESS.get()[0]
        if hs.owner is None:
            hs.owner = access.subject
        hs.session.principal = access.subject
        hs.session.worker_key = "principal:" + access.subject  # one share of the workers per principal
        hs.session.access_token = access
        return access

    def _owned(self, hs: Any) -> bool:
        current = ACCESS.get()
        return current is not None and current[0].subject == hs.owner


def _error_body(code: int, message: str) -> bytes:
    # as transports/http.py writes errors that answer no request id
    from .. import _json

    return _json.dumps({"jsonrpc": "2.0", "error": {"code": code, "message": message}})
