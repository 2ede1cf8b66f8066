"""An HTTP handshake that fails for a reason of reach (the path, the Host header, credentials,
TLS, a proxy, a redirect, an answer that is not MCP at all) exits 2 with one line saying what to
try: it is no compliance finding, and the server is not started once per revision for it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mcpkit.check import run_checks
from mcpkit.check.cli import main
from mcpkit.check.model import EXIT_INFRASTRUCTURE

#: path -> (status, headers, body): what the SDKs and the proxies in front of them answer
_ANSWERS: dict[str, tuple[int, dict[str, str], bytes]] = {
    # the official Python SDK's DNS-rebinding guard: plain text 421
    "/sdk-host": (421, {"Content-Type": "text/plain"}, b"Invalid Host header"),
    # the TypeScript SDK's guard: 403 with a JSON-RPC error body
    "/ts-host": (403, {"Content-Type": "application/json"},
                 json.dumps({"jsonrpc": "2.0", "id": None,
                             "error": {"code": -32000, "message": "Invalid Host header: 127.0.0.1"}}).encode()),
    "/forbidden": (403, {"Content-Type": "text/plain"}, b"Forbidden"),
    "/auth": (401, {"WWW-Authenticate": 'Bearer resource_metadata="x"', "Content-Type": "application/json"},
              json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "Unauthorized"}}).encode()),
    "/proxy": (407, {"Proxy-Authenticate": "Basic"}, b""),
    "/sse-only": (405, {"Allow": "GET"}, b"Method Not Allowed"),
    "/moved": (307, {"Location": "/mcp/"}, b""),
    "/page": (200, {"Content-Type": "text/html"}, b"<!doctype html><html><body>Welcome</body></html>"),
}


class _Handler(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/reset":
            self.close_connection = True
            self.connection.close()
            return
        status, headers, body = _ANSWERS.get(self.path, (404, {"Content-Type": "text/plain"}, b"Not Found"))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://{base}/sdk-host", "the server refused the Host header {base} (HTTP 421"),
        ("http://{base}/ts-host", "the server refused the Host header {base} (HTTP 403"),
        ("http://{base}/forbidden", "try --header 'Host: NAME' or the URL it binds to"),
        ("http://{base}/auth", "the server asks for credentials (HTTP 401 at http://{base}/auth: "),
        ("http://{base}/proxy", "a proxy between the checker and the server asks for credentials (HTTP 407)"),
        ("http://{base}/sse-only", "HTTP 405: /sse-only does not take POST: for a legacy HTTP+SSE endpoint add --sse"),
        ("http://{base}/moved", "http://{base}/moved redirects (HTTP 307) to /mcp/: check that URL instead"),
        ("http://{base}/nowhere", "HTTP 404 at /nowhere: is the path right? servers often serve /mcp"),
        ("http://{base}/page", "answered the handshake with something that is not JSON-RPC (<!doctype html>"),
        ("http://{base}/reset", "the connection to http://{base}/reset was closed without an HTTP answer"),
        ("https://{base}/mcp", "TLS with https://{base}/mcp failed"),
    ],
)
async def test_a_handshake_failing_for_reach_exits_2_with_what_to_try(base: str, url: str, expected: str) -> None:
    report = await run_checks(url.format(base=base), progress=False)
    assert report.exit_code == EXIT_INFRASTRUCTURE
    assert report.error is not None and expected.format(base=base) in report.error, report.error
    assert report.failed() == []  # not a lifecycle.handshake finding
    assert list(report.negotiated) == ["2025-11-25"]  # one handshake, not one per revision


def test_the_cli_says_it_in_one_line(base: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([f"http://{base}/nowhere"]) == EXIT_INFRASTRUCTURE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [
        "mcpkit check: HTTP 404 at /nowhere: is the path right? servers often serve /mcp, or /sse (with --sse)"]


@pytest.mark.asyncio
async def test_a_legacy_sse_url_refusing_get_says_to_drop_sse(base: str) -> None:
    report = await run_checks(f"http://{base}/sse-only", transport="sse", progress=False)
    assert report.exit_code == EXIT_INFRASTRUCTURE
    assert report.error is not None and "does not take GET" in report.error, report.error
