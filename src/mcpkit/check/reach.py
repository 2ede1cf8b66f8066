"""Why an HTTP handshake got no MCP answer when the cause is how the checker reaches the server
(the URL, the Host header, credentials, TLS, a proxy) rather than the server's compliance.

Each is one line naming what to try; the runner turns it into exit code 2 (docs/check.md, "Exit
codes"), never a ``lifecycle.handshake`` finding: a 404 for a wrong path or a 403 from a server
that rightly refuses ``Host: 127.0.0.1`` (HS-01's DNS-rebinding defence) says nothing about the
server's MCP. Only ``initialize`` is judged this way: no revision answers initialize with these
statuses, whereas 2026-07-28's ``server/discover`` may get a 400 or 404 from a server that does not
serve that revision, which lifecycle.handshake reads as such.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

__all__ = ["NotJsonRpc", "http_unreachable"]

_REDIRECTS = (301, 302, 303, 307, 308)


class NotJsonRpc(Exception):
    """The HTTP answer to the handshake was not JSON-RPC (an HTML page, a plain-text error)."""

    def __init__(self, body: bytes) -> None:
        super().__init__(body[:120].decode("utf-8", errors="replace").strip())


def _excerpt(body: bytes) -> str:
    text = " ".join(body[:200].decode("utf-8", errors="replace").split())
    return f": {text[:120]}" if text else ""


def _refusal(status: int, headers: dict[str, str], body: bytes, url: str, transport: str) -> str | None:
    parts = urlsplit(url)
    path = parts.path or "/"
    host = parts.netloc
    lower = {k.lower(): v for k, v in headers.items()}
    said = _excerpt(body)
    if status in _REDIRECTS:
        where = lower.get("location", "")
        return f"{url} redirects (HTTP {status}) to {where or 'another URL'}: check that URL instead"
    if status == 401:
        scheme = lower.get("www-authenticate", "").split(" ", 1)[0] or "Bearer"
        return (f"the server asks for credentials (HTTP 401 at {url}{said}): pass them with "
                f"--header 'Authorization: {scheme} ...'")
    if status == 407:
        return ("a proxy between the checker and the server asks for credentials (HTTP 407): put them in "
                "HTTPS_PROXY/HTTP_PROXY (http://user:password@proxy:port), or unset those for a local server")
    if status == 421 or (status == 403 and "host" in body[:500].decode("utf-8", "replace").lower()):
        return (f"the server refused the Host header {host} (HTTP {status}{said}): try --header 'Host: NAME' "
                "with the name it serves, or the URL the server binds to")
    if status == 403:
        return (f"the server refused the request (HTTP 403 at {url}{said}): if it guards the Host header, "
                f"try --header 'Host: NAME' or the URL it binds to ({host} was sent); if it wants "
                "credentials, --header 'Authorization: ...'")
    if status == 404:
        return f"HTTP 404 at {path}: is the path right? servers often serve /mcp, or /sse (with --sse)"
    if status == 405:
        if transport == "sse":
            return (f"HTTP 405: {path} does not take GET, so it is no HTTP+SSE endpoint: for Streamable HTTP "
                    "drop --sse")
        return (f"HTTP 405: {path} does not take POST: for a legacy HTTP+SSE endpoint add --sse; the "
                "Streamable HTTP endpoint is often /mcp")
    return None


def http_unreachable(exc: BaseException, url: str, transport: str, *, initialize: bool = True) -> str | None:
    """What to try when a handshake failed for a reason of reach, or None when the server's answer
    is what failed. ``initialize``: the handshake was initialize (statuses and a body that is not
    JSON-RPC are judged only then); otherwise only a connection that could not be made counts."""
    from .._extras import needs

    with needs("client", "mcpkit check of a URL"):  # the client reached the URL with it: already imported
        import httpx

    cause: Any = exc.__cause__
    if not initialize:
        if isinstance(cause, (httpx.ConnectError, httpx.ConnectTimeout)):
            return f"could not connect to {url}: {cause}"
        return None
    if isinstance(exc, NotJsonRpc):
        return (f"{url} answered the handshake with something that is not JSON-RPC ({exc}): is it the "
                "MCP endpoint? servers often serve /mcp, or /sse (with --sse)")
    status = getattr(exc, "status", None)
    if isinstance(status, int):
        return _refusal(status, getattr(exc, "headers", {}) or {}, getattr(exc, "body", b"") or b"", url, transport)
    if isinstance(cause, (httpx.ConnectError, httpx.ConnectTimeout)):
        if _tls(cause):
            return (f"TLS with {url} failed ({cause}): check the certificate, or use http:// if the server does "
                    "not speak TLS")
        return f"could not connect to {url}: {cause}"
    if isinstance(cause, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return (f"the connection to {url} was closed without an HTTP answer ({cause!r}): is an HTTP server "
                "listening there, and does it want https://?")
    return None


def _tls(error: BaseException) -> bool:
    import ssl

    seen: BaseException | None = error
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError) or "SSL" in str(seen) or "CERTIFICATE" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
