"""API keys: the way SaaS APIs authenticate, for HTTP MCP servers in front of them.

    auth = ApiKeyAuth(header="X-API-Key", passthrough=True)     # the upstream checks the key
    auth = ApiKeyAuth(keys={"sha256:9f86...": {"subject": "ci-bot", "scopes": "designs:read"}})
    app = server.http_app(auth=auth)

    @server.tool
    async def list_designs(ctx: Context) -> list[dict]:
        return await api.get("/designs", key=api_key(ctx))

An :class:`ApiKeyAuth` takes the place of :class:`~mcpkit.auth.ResourceServer` in
``http_app(auth=...)``: every request must carry a key (in ``header``, or as
``Authorization: Bearer <key>`` when ``header="Authorization"``), checked on every request
(SEC-03). It is not OAuth, so it does not pretend to be: no protected-resource metadata is
served and its 401 challenge names the header, not a metadata document a client would try to
discover an authorization server from.

Keys are checked against a table of hashes (:class:`StaticTokens`, AU-14), by an async
``verify(key)`` of your own, or — ``passthrough=True`` — not here at all, when the upstream API
is the authority and every call forwards the caller's key. The handler gets the key with
:func:`api_key` (``ctx.access_token.key``): the caller's own credential for the upstream, held
outside ``repr`` and never written to logs or audit lines; nothing else reaches it.

Over stdio there is no header: the one user who launched the server gives the key in its
environment (``env=``, ``MCPKIT_API_KEY`` by default; the ``env`` of the client's configuration
entry). It is read once when stdio serving starts, checked as a header's key is, and becomes the
session's principal and ``ctx.access_token``: handlers read it the same way on both transports.
A missing or refused key stops the server with one line naming the variable (AU-01: stdio
servers take their credentials from the environment).
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .resource import AuthFailure
from .static import StaticTokens
from .tokens import AccessToken, InvalidToken

__all__ = ["ApiKeyAccess", "ApiKeyAuth", "api_key"]

_MAX_KEY = 4096


@dataclass(frozen=True, slots=True)
class ApiKeyAccess(AccessToken):
    """An AccessToken that also carries the key it was verified from (for the upstream)."""

    key: str = field(default="", repr=False, compare=False, hash=False)


def api_key(ctx: Any) -> str:
    """The caller's API key inside a tool, resource or prompt handler; ToolError if none."""
    access = getattr(ctx, "access_token", None)
    key = getattr(access, "key", None)
    if not key:
        from ..protocol.errors import E_PERMISSION_DENIED, ToolError

        raise ToolError("This call carries no API key.", code=E_PERMISSION_DENIED,
                        suggested_fix="Serve with ApiKeyAuth: over HTTP send the key with each request; over "
                        "stdio set it in the server's environment (MCPKIT_API_KEY, or ApiKeyAuth(env=...)).")
    return str(key)


class ApiKeyAuth:
    """Checks each HTTP request's API key; see the module docstring.

    ``keys``: a StaticTokens, or its mapping form (key or ``sha256:<hex>`` -> subject and scopes).
    ``verify``: ``[async] verify(key) -> AccessToken | str | None`` (a str is the subject; None
    refuses). ``passthrough=True``: any well-formed key is accepted and identified by a hash
    prefix. ``required_scopes``: needed for every request (keys from ``keys`` carry scopes).
    """

    def __init__(
        self,
        keys: StaticTokens | Mapping[str, Mapping[str, Any]] | None = None,
        *,
        verify: Callable[[str], Any] | None = None,
        passthrough: bool = False,
        header: str = "X-API-Key",
        realm: str = "mcp",
        required_scopes: Sequence[str] = (),
        env: str = "MCPKIT_API_KEY",
    ) -> None:
        if not env or any(c in env for c in "= \0"):
            raise ValueError(f"env {env!r} is not an environment variable name")
        if sum(x is not None and x is not False for x in (keys, verify, passthrough or None)) != 1:
            raise ValueError("ApiKeyAuth needs exactly one of keys=, verify= or passthrough=True")
        if not header or any(c in header for c in " :\r\n"):
            raise ValueError(f"header {header!r} is not an HTTP header name")
        self._table = StaticTokens(keys) if isinstance(keys, Mapping) else keys
        self._verify = verify
        self.passthrough = passthrough
        self.header_name = header
        #: the (lower-case) request header transports/http_auth.py reads the credential from
        self.header = header.lower().encode("latin-1")
        self.bearer = self.header == b"authorization"
        self.realm = realm.replace('"', "'")
        self.required_scopes = tuple(required_scopes)
        #: the environment variable that holds the key over stdio
        self.env = env

    # ------------------------------------------------------------------ what stdio serving calls

    def stdio_access(self, environ: Mapping[str, str] | None = None) -> ApiKeyAccess:
        """The key in the environment, checked as a request's would be: the access of every
        call of a stdio session. A SwitchError of one line (exit 2) when it is missing or
        refused; the message names the variable, never the key."""
        import asyncio
        import os

        from ..switches import SwitchError

        env = os.environ if environ is None else environ
        where = (f"set {self.env} in the server's environment (the \"env\" of its entry in the client's "
                 f"configuration: mcpkit install CLIENT SERVER --env {self.env}=...)")
        text = env.get(self.env, "").strip()
        if not text:
            raise SwitchError(f"this server needs an API key on stdio, and {self.env} is not set: {where}")
        if len(text) > _MAX_KEY or any(ord(c) < 33 or ord(c) > 126 for c in text):
            raise SwitchError(f"the API key in {self.env} is malformed (printable ASCII without spaces, "
                              f"{_MAX_KEY} characters at most): {where}")
        access = asyncio.run(self._check(text))
        if access is None:
            raise SwitchError(f"the API key in {self.env} is not valid: {where}")
        missing = self.missing(access, self.required_scopes)
        if missing:
            raise SwitchError(f"the API key in {self.env} lacks {' '.join(missing)}: {where}")
        return access

    # ------------------------------------------------------------------ what http_auth.py calls

    def resource_for(self, scheme: str, host: str, path: str) -> str:
        return f"{scheme}://{host}{path}"

    def metadata_paths(self, endpoint_path: str) -> frozenset[str]:
        return frozenset()  # not an OAuth resource server: no RFC 9728 document to serve

    def metadata_body(self, resource: str) -> bytes:  # pragma: no cover - no metadata paths
        raise LookupError("API-key servers publish no OAuth metadata")

    def challenge(self, error: str | None = None) -> str:
        scheme = "Bearer" if self.bearer else "ApiKey"
        params = [f'realm="{self.realm}"']
        if not self.bearer:
            params.append(f'header="{self.header_name}"')
        if error:
            params.append(f'error="{error}"')
        return f"{scheme} " + ", ".join(params)

    async def authenticate(self, value: bytes | None, resource: str) -> ApiKeyAccess:
        where = "an Authorization: Bearer header" if self.bearer else f"the {self.header_name} header"
        if value is None or not value.strip():
            raise AuthFailure(401, self.challenge(), f"An API key is required: send it in {where}.")
        text = value.decode("latin-1").strip()
        if self.bearer:
            scheme, _, text = text.partition(" ")
            if scheme.lower() != "bearer":
                raise AuthFailure(401, self.challenge("invalid_request"), "Send the API key as 'Bearer <key>'.")
            text = text.strip()
        if not text or len(text) > _MAX_KEY or any(ord(c) < 33 or ord(c) > 126 for c in text):
            raise AuthFailure(401, self.challenge("invalid_token"), f"The API key in {where} is malformed.")
        access = await self._check(text)
        if access is None:
            raise AuthFailure(401, self.challenge("invalid_token"), "The API key is not valid.")
        self.require(access, self.required_scopes, resource)
        return access

    async def _check(self, key: str) -> ApiKeyAccess | None:
        if self.passthrough:
            digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
            return ApiKeyAccess(subject=f"key:{digest}", key=key)
        if self._table is not None:
            try:
                token = await self._table.verify(key)
            except InvalidToken:
                return None
        else:
            assert self._verify is not None
            answer = self._verify(key)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is None or answer is False:
                return None
            token = AccessToken(subject=answer) if isinstance(answer, str) else answer
        return ApiKeyAccess(subject=token.subject, client_id=token.client_id, scopes=token.scopes,
                            expires_at=token.expires_at, claims=token.claims, key=key)

    def require(self, access: Any, required: Iterable[str], resource: str) -> None:
        missing = sorted(set(required) - set(access.scopes))
        if missing:
            raise AuthFailure(403, self.challenge("insufficient_scope"),
                              f"This API key lacks {' '.join(missing)}.", access, missing)

    # a ResourceServer-shaped object for code that asks
    def basic_scopes(self) -> list[str]:
        return list(self.required_scopes)

    def missing(self, access: Any, required: Iterable[str]) -> list[str]:
        return sorted(set(required) - set(access.scopes))

