"""OAuth 2.1 resource-server side of mcpkit: verifying the bearer tokens of HTTP requests.

    from mcpkit.auth import JWTVerifier

    verifier = JWTVerifier("https://login.example.com/", "https://mcp.example.com/mcp",
                           jwks_uri="https://login.example.com/.well-known/jwks.json")
    token = await verifier.verify(bearer)        # AccessToken, or raises InvalidToken

Verifiers: :class:`StaticTokens` (fixed tokens, stored as hashes), :class:`JWTVerifier` (JWT
checked against a JWKS), :class:`IntrospectionVerifier` (RFC 7662). Every one checks that the
token was issued for this server (AU-05, SEC-01). Names are imported lazily, so importing this
package pulls in neither PyJWT, cryptography, asyncio nor urllib.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports

__all__ = [
    "AccessToken",
    "ApiKeyAuth",
    "api_key",
    "IntrospectionVerifier",
    "InvalidToken",
    "JWTVerifier",
    "ResourceServer",
    "StaticTokens",
    "TokenVerifier",
    "hash_token",
    "parse_scopes",
]

_LAZY = {
    "AccessToken": (".tokens", "AccessToken"),
    "ApiKeyAuth": (".apikey", "ApiKeyAuth"),
    "api_key": (".apikey", "api_key"),
    "InvalidToken": (".tokens", "InvalidToken"),
    "TokenVerifier": (".tokens", "TokenVerifier"),
    "parse_scopes": (".tokens", "parse_scopes"),
    "StaticTokens": (".static", "StaticTokens"),
    "hash_token": (".static", "hash_token"),
    "JWTVerifier": (".jwt", "JWTVerifier"),
    "IntrospectionVerifier": (".introspection", "IntrospectionVerifier"),
    "ResourceServer": (".resource", "ResourceServer"),
}

if TYPE_CHECKING:
    from .apikey import ApiKeyAuth, api_key
    from .introspection import IntrospectionVerifier
    from .jwt import JWTVerifier
    from .resource import ResourceServer
    from .static import StaticTokens, hash_token
    from .tokens import AccessToken, InvalidToken, TokenVerifier, parse_scopes


__getattr__ = exports(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
