"""Server Cards (SEP-2127; the experimental-ext-server-card draft): what an HTTP server is and
where to connect, readable before connecting.

The card is served at ``GET <streamable-http-url>/server-card`` (the location the draft reserves)
as ``application/mcp-server-card+json``, and listed in an MCP Catalog at
``/.well-known/mcp/catalog.json``. Both are public, read-only metadata: no token is needed, any
origin may read them (``Access-Control-Allow-Origin: *``, as the draft's CORS requirements say)
and they are cacheable for an hour, when the Host they were asked for (and name) is loopback
or listed in ``allowed_hosts``; one let in by ``'*'`` alone gets ``no-store``. The card is built from the Server's own fields, so it cannot
disagree with what ``initialize`` or ``server/discover`` later say ("Consistency with Runtime
Behavior").
"""

from __future__ import annotations

import re
from typing import Any

from .. import _json

__all__ = ["CARD_MEDIA_TYPE", "CARD_SCHEMA", "CATALOG_PATH", "build_card", "build_catalog", "cache_headers",
           "card_name", "validate_card"]

CARD_SCHEMA = "https://static.modelcontextprotocol.io/schemas/v2/server-card.schema.json"
CARD_MEDIA_TYPE = "application/mcp-server-card+json"
CATALOG_PATH = "/.well-known/mcp/catalog.json"
CARD_SUFFIX = "/server-card"

_NAME = re.compile(r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$")
_URL = re.compile(r"^(https?://[^\s]+|\{[a-zA-Z_][a-zA-Z0-9_]*\}[^\s]*)$")
_SAFE = re.compile(r"[^a-zA-Z0-9._-]+")
_VERSION_RANGE = re.compile(r"^[\^~<>=]|\.x$|\.\*$|\bx\b")


def card_name(server_name: str, host: str) -> str:
    """A reverse-DNS name for the card (``namespace/name``): the host the card is served from,
    reversed, then the server's name (``mcp.example.com`` + ``weather`` gives
    ``com.example.mcp/weather``)."""
    import ipaddress

    hostname = host.rsplit(":", 1)[0] if host.count(":") == 1 else host.rsplit("]", 1)[0].strip("[]")
    try:
        ip = ipaddress.ip_address(hostname)
    except ValueError:
        labels = [label for label in hostname.lower().split(".") if label]
        namespace = ".".join(reversed(labels)) or "localhost"
    else:  # an address has no domain to reverse
        namespace = "localhost" if ip.is_loopback else str(ip).replace(":", "-")
    namespace = re.sub(r"[^a-z0-9.-]+", "-", namespace)
    name = _SAFE.sub("-", server_name).strip("-") or "mcp"
    return f"{namespace}/{name}"


def build_card(server: Any, base_url: str, mcp_path: str, *, name: str | None = None,
               sse_path: str | None = None, auth: Any = None) -> dict[str, Any]:
    """The Server Card of ``server`` as reached at ``base_url`` (scheme and authority, with the
    ASGI root_path when mounted under a prefix)."""
    from ..protocol.revisions import SUPPORTED_VERSIONS

    host = base_url.split("://", 1)[-1].split("/", 1)[0]
    description = (server.description or (server.instructions or "").strip().split("\n", 1)[0]
                   or f"The {server.name} MCP server.")
    card: dict[str, Any] = {
        "$schema": CARD_SCHEMA,
        "name": name or card_name(server.name, host),
        "version": server.version,
        "description": description[:100],
    }
    if server.title:
        card["title"] = server.title[:100]
    if server.website_url:
        card["websiteUrl"] = server.website_url
    if server.icons:
        card["icons"] = list(server.icons)
    remote: dict[str, Any] = {"type": "streamable-http", "url": base_url + mcp_path,
                              "supportedProtocolVersions": list(SUPPORTED_VERSIONS)}
    if auth is not None:
        # AU-01: a bearer token on every request; the RFC 9728 metadata says where to get one
        remote["headers"] = [{"name": "Authorization", "description": "Bearer token (OAuth 2.1 access token)",
                              "isRequired": True, "isSecret": True}]
    remotes = [remote]
    if sse_path is not None:
        remotes.append({"type": "sse", "url": base_url + sse_path, "supportedProtocolVersions": ["2024-11-05"],
                        **({"headers": remote["headers"]} if "headers" in remote else {})})
    card["remotes"] = remotes
    return card


def build_catalog(card: dict[str, Any], card_url: str) -> dict[str, Any]:
    """An MCP Catalog with this server's one entry (identifier ``urn:air:{publisher}:{name}``)."""
    namespace, _, short = card["name"].partition("/")
    publisher = ".".join(reversed(namespace.split(".")))
    return {"specVersion": "draft", "entries": [{
        "identifier": f"urn:air:{publisher}:{short}",
        "displayName": card.get("title") or short,
        "type": CARD_MEDIA_TYPE,
        "url": card_url,
    }]}


def validate_card(card: Any) -> list[str]:
    """What is wrong with a Server Card, by the draft schema's rules (an empty list: nothing)."""
    if not isinstance(card, dict):
        return ["the card is not a JSON object"]
    problems = []
    if card.get("$schema") != CARD_SCHEMA:
        problems.append(f"$schema must be {CARD_SCHEMA} (got {card.get('$schema')!r})")
    name = card.get("name")
    if not isinstance(name, str) or not 3 <= len(name) <= 200 or not _NAME.match(name):
        problems.append(f"name must be reverse-DNS 'namespace/name' (got {name!r})")
    version = card.get("version")
    if not isinstance(version, str) or not version or len(version) > 255 or _VERSION_RANGE.search(version):
        problems.append(f"version must be one version, not a range (got {version!r})")
    description = card.get("description")
    if not isinstance(description, str) or not 1 <= len(description) <= 100:
        problems.append("description must be a string of 1 to 100 characters")
    title = card.get("title")
    if title is not None and (not isinstance(title, str) or not 1 <= len(title) <= 100):
        problems.append("title must be a string of 1 to 100 characters")
    remotes = card.get("remotes", [])
    if not isinstance(remotes, list):
        problems.append("remotes must be a list")
        remotes = []
    for i, remote in enumerate(remotes):
        if not isinstance(remote, dict):
            problems.append(f"remotes[{i}] must be an object")
            continue
        if remote.get("type") not in ("streamable-http", "sse"):
            problems.append(f"remotes[{i}].type must be 'streamable-http' or 'sse'")
        if not isinstance(remote.get("url"), str) or not _URL.match(remote["url"]):
            problems.append(f"remotes[{i}].url must be an http(s) URL or start with a {{variable}}")
        versions = remote.get("supportedProtocolVersions")
        if versions is not None and not (isinstance(versions, list) and all(isinstance(v, str) for v in versions)):
            problems.append(f"remotes[{i}].supportedProtocolVersions must be a list of strings")
    known = {"$schema", "name", "version", "description", "title", "websiteUrl", "repository", "icons", "remotes",
             "_meta"}
    extra = sorted(set(card) - known)
    if extra:
        problems.append(f"unknown member(s) {', '.join(extra)} (packages belong in the registry's server.json)")
    return problems


#: response headers of both documents: public, any origin, cacheable (draft "CORS Requirements", "Caching")
PUBLIC_HEADERS = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"GET"),
    (b"access-control-allow-headers", b"Content-Type"),
    (b"cache-control", b"public, max-age=3600"),
]
#: for a Host let in by ``--allow-host '*'`` alone: the URLs in the body are whatever the client
#: sent, so no cache may keep them for anyone else
UNCACHED = (b"cache-control", b"no-store")


def cache_headers(guard: Any, host: str) -> list[tuple[bytes, bytes]]:
    """PUBLIC_HEADERS, cacheable only when ``host`` (written into the body) is one the server
    names: loopback or listed in ``allowed_hosts``."""
    if guard.host_named(host):
        return PUBLIC_HEADERS
    return [*PUBLIC_HEADERS[:-1], UNCACHED]


async def serve(app: Any, scope: dict[str, Any], send: Any, headers: dict[bytes, bytes], which: str) -> None:
    """Answer a GET of the card (``which == "card"``) or the catalog."""
    scheme = scope.get("scheme") or "http"
    host = headers.get(b"host", b"localhost").decode("latin-1")
    base = f"{scheme}://{host}{scope.get('root_path', '')}"
    card = build_card(app.server, base, app.path, name=app.card_name,
                      sse_path=app.sse_path if app.legacy_sse else None, auth=app.auth)
    if which == "card":
        body = _json.dumps(card)
        content_type = CARD_MEDIA_TYPE.encode()
    else:
        body = _json.dumps(build_catalog(card, base + app.path.rstrip("/") + CARD_SUFFIX))
        content_type = b"application/json"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", content_type), *cache_headers(app.guard, host)]})
    await send({"type": "http.response.body", "body": body})
