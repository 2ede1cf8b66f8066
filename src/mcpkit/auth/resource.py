"""The MCP server as an OAuth 2.1 resource server: who may call, with which scopes.

    from mcpkit.auth import JWTVerifier, ResourceServer

    auth = ResourceServer(
        JWTVerifier("https://id.example.com", "https://mcp.example.com/mcp",
                    jwks_uri="https://id.example.com/jwks"),
        resource="https://mcp.example.com/mcp",
        authorization_servers=["https://id.example.com"],
        scopes_supported=["files:read", "files:write"],
    )
    app = server.http_app(auth=auth)

Every request to the MCP endpoints carries ``Authorization: Bearer <token>`` (AU-13) and is
verified on its own; sessions never stand in for authentication (SEC-03). A missing or invalid
token gets 401 with a challenge naming the RFC 9728 metadata document (AU-03, AU-06); a token
without the scopes an operation needs gets 403 ``insufficient_scope`` naming all of them at once,
so a client can step up (AU-09, AU-10). This module holds the decisions and the header texts;
transports/http.py calls it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .. import _json

__all__ = ["ResourceServer", "AuthFailure", "canonical_uri", "WELL_KNOWN"]

#: RFC 9728 §3: where protected resource metadata lives
WELL_KNOWN = "/.well-known/oauth-protected-resource"


def canonical_uri(uri: str) -> str:
    """AU-15: scheme and host lower-cased, no fragment, no trailing slash (a bare origin keeps
    no path at all)."""
    parts = urlsplit(uri.strip())
    if not parts.scheme or not parts.netloc:
        raise ValueError(f"resource {uri!r} must be an absolute URI such as https://mcp.example.com/mcp")
    if parts.fragment:
        raise ValueError(f"resource {uri!r} must not have a fragment (RFC 8707)")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), parts.query, ""))


class AuthFailure(Exception):
    """A request the resource server refuses: the HTTP status and the challenge to send."""

    def __init__(self, status: int, challenge: str, message: str, access: Any = None,
                 missing: list[str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.challenge = challenge
        self.message = message
        #: a 403 for scopes: the verified token refused, and the scopes it lacked (audit lines)
        self.access = access
        self.missing = missing


def _quote(value: str) -> str:
    # RFC 6750 §3: auth-param values are quoted strings; keep them free of quotes and backslashes
    return '"' + value.replace("\\", "").replace('"', "'") + '"'


class ResourceServer:
    """How an HTTP MCP server checks the bearer tokens of its callers.

    - ``verifier``: a TokenVerifier (StaticTokens, JWTVerifier, IntrospectionVerifier, or your own).
    - ``resource``: this server's canonical URI (the MCP endpoint's URL), which JWT audiences are
      checked against; when None it is taken from each request's Host and path.
    - ``authorization_servers``: the issuers clients get tokens from (AU-02: at least one).
    - ``scopes_supported``: advertised in the metadata; ``offline_access`` is never advertised
      (AU-12).
    - ``required_scopes``: needed for any request at all; items can require more with
      ``scopes=`` on ``@server.tool``, ``@server.resource`` or ``@server.prompt``.
    - ``scope_implies``: scope hierarchy (AU-11), e.g. ``{"files:admin": ["files:write"],
      "files:write": ["files:read"]}``: a broader scope satisfies the narrower ones.
    """

    def __init__(
        self,
        verifier: Any,
        *,
        resource: str | None = None,
        authorization_servers: Sequence[str] = (),
        scopes_supported: Sequence[str] = (),
        required_scopes: Sequence[str] = (),
        scope_implies: Mapping[str, Iterable[str]] | None = None,
        resource_name: str | None = None,
        resource_documentation: str | None = None,
    ) -> None:
        if not hasattr(verifier, "verify"):
            raise TypeError("verifier must have an async verify(token) method (mcpkit.auth.TokenVerifier)")
        self.verifier = verifier
        self.resource = canonical_uri(resource) if resource else None
        self.authorization_servers = [canonical_uri(a) for a in authorization_servers]
        self.scopes_supported = [s for s in scopes_supported if s != "offline_access"]
        self.required_scopes = tuple(required_scopes)
        self.resource_name = resource_name
        self.resource_documentation = resource_documentation
        self._implies = {k: frozenset(v) for k, v in (scope_implies or {}).items()}

    # ------------------------------------------------------------------ metadata (RFC 9728)

    def metadata(self, resource: str) -> dict[str, Any]:
        """The protected resource metadata document (AU-02)."""
        doc: dict[str, Any] = {"resource": resource, "bearer_methods_supported": ["header"]}
        if self.authorization_servers:
            doc["authorization_servers"] = self.authorization_servers
        if self.scopes_supported:
            doc["scopes_supported"] = self.scopes_supported
        if self.resource_name:
            doc["resource_name"] = self.resource_name
        if self.resource_documentation:
            doc["resource_documentation"] = self.resource_documentation
        return doc

    def metadata_body(self, resource: str) -> bytes:
        return _json.dumps(self.metadata(resource))

    def resource_for(self, scheme: str, host: str, path: str) -> str:
        """The canonical URI of the endpoint a request reached (the configured one if any)."""
        if self.resource is not None:
            return self.resource
        return canonical_uri(f"{scheme}://{host}{path}")

    @staticmethod
    def metadata_url(resource: str) -> str:
        """RFC 9728 §3.1: the path-aware well-known URL of ``resource`` (AU-03)."""
        parts = urlsplit(resource)
        return urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN + parts.path, "", ""))

    def metadata_paths(self, endpoint_path: str) -> frozenset[str]:
        """The well-known paths this server answers: the root one and the path-aware one, for
        the MCP endpoint and for the configured resource's path."""
        paths = {WELL_KNOWN, WELL_KNOWN + endpoint_path.rstrip("/")}
        if self.resource is not None:
            paths.add(WELL_KNOWN + urlsplit(self.resource).path)
        return frozenset(paths)

    # ------------------------------------------------------------------ challenges (RFC 6750 §3)

    def challenge(self, resource: str, *, error: str | None = None, description: str | None = None,
                  scope: Iterable[str] | None = None) -> str:
        params = []
        if error is not None:
            params.append(f"error={_quote(error)}")
        if description:
            params.append(f"error_description={_quote(description)}")
        scopes = [s for s in (scope or ()) if s != "offline_access"]
        if scopes:
            params.append(f"scope={_quote(' '.join(scopes))}")
        params.append(f"resource_metadata={_quote(self.metadata_url(resource))}")
        return "Bearer " + ", ".join(params)

    def basic_scopes(self) -> list[str]:
        """AU-04: what a client should ask for to use the server at all."""
        return list(self.required_scopes) or list(self.scopes_supported)

    # ------------------------------------------------------------------ verifying

    async def authenticate(self, authorization: bytes | None, resource: str) -> Any:
        """The AccessToken of a request's ``Authorization`` header, or AuthFailure."""
        from .tokens import InvalidToken

        if authorization is None:
            # AU-06, AU-03: no credentials at all: no error code, just where to get them
            raise AuthFailure(401, self.challenge(resource, scope=self.basic_scopes()),
                              "Authorization required: send an OAuth bearer token.")
        scheme, _, value = authorization.decode("latin-1").strip().partition(" ")
        token = value.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthFailure(401, self.challenge(resource, error="invalid_request",
                                                  description="expected the Bearer scheme",
                                                  scope=self.basic_scopes()),
                              "The Authorization header must be 'Bearer <token>'.")
        try:
            access = await self.verifier.verify(token)
        except InvalidToken as exc:
            raise AuthFailure(401, self.challenge(resource, error="invalid_token", description=exc.description,
                                                  scope=self.basic_scopes()),
                              f"Invalid access token: {exc.description}.") from None
        self.require(access, self.required_scopes, resource)
        return access

    def missing(self, access: Any, required: Iterable[str]) -> list[str]:
        """The required scopes ``access`` does not grant, directly or through a broader one (AU-11)."""
        granted = set(access.scopes)
        todo = list(granted)
        while todo:  # close the granted set over the hierarchy
            for narrower in self._implies.get(todo.pop(), ()):
                if narrower not in granted:
                    granted.add(narrower)
                    todo.append(narrower)
        return sorted({s for s in required if s not in granted})

    def require(self, access: Any, required: Iterable[str], resource: str) -> None:
        """403 insufficient_scope naming every scope the operation needs (AU-09, AU-10)."""
        required = tuple(required)
        if not required:
            return
        missing = self.missing(access, required)
        if missing:
            needed = list(dict.fromkeys([*self.required_scopes, *required]))
            raise AuthFailure(
                403,
                self.challenge(resource, error="insufficient_scope",
                               description=f"needs scope {' '.join(missing)}", scope=needed),
                f"Insufficient scope: this request needs {' '.join(needed)}.",
                access, missing,
            )
