"""examples/design_api.py against a fake design API on a local port: API keys passed through,
the API's 429s waited out, its 404/403 mapped, per-caller rate limits, resources and prompts."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

import mcpkit
from mcpkit.protocol.errors import E_NOT_FOUND, E_PERMISSION_DENIED, E_RATE_LIMITED
from tests.test_http import clients, jsonrpc  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "design_api.py"
ALICE, BOB = "dk_alice_0123456789abcdef", "dk_bob_0123456789abcdef0"
_modules = itertools.count()


class FakeDesignApi:
    """The upstream: designs per key, a plan that cannot delete, exports that are rate limited."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str | None]] = []  # method, path, key
        self.designs = {ALICE: {"d1": {"id": "d1", "title": "Launch"}}, BOB: {}}
        self.limited = 0  # how many 429s the next export answers first
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str) -> None:
                key = self.headers.get("x-api-key")
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                api.requests.append((method, self.path, key))
                if key not in api.designs:
                    return self._reply(401, {"message": "invalid API key"})
                mine = api.designs[key]
                path = self.path.split("?")[0]
                if method == "GET" and path == "/v1/designs":
                    return self._reply(200, {"designs": list(mine.values())})
                if method == "GET" and path == "/v1/templates":
                    return self._reply(200, {"templates": [{"id": "t1", "name": "Square post"}]})
                if method == "POST" and path == "/v1/designs":
                    design = {"id": f"d{len(mine) + 1}", **body}
                    mine[design["id"]] = design
                    return self._reply(201, design)
                found = re.fullmatch(r"/v1/designs/(\w+)(/export)?", path)
                if found is None or found.group(1) not in mine:
                    return self._reply(404, {"message": "design not found"})
                if method == "DELETE":
                    return self._reply(403, {"message": "your plan does not allow deleting designs"})
                if found.group(2):
                    if api.limited:
                        api.limited -= 1
                        return self._reply(429, {"message": "slow down"}, {"retry-after": "1"})
                    return self._reply(200, {"url": f"https://cdn.example/{found.group(1)}.{body['format']}"})
                return self._reply(200, mine[found.group(1)])

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def do_DELETE(self) -> None:
                self._route("DELETE")

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def upstream() -> Iterator[FakeDesignApi]:
    api = FakeDesignApi()
    yield api
    api.stop()


def load(monkeypatch: pytest.MonkeyPatch, api: FakeDesignApi, **env: str) -> Any:
    monkeypatch.setenv("DESIGN_API_URL", api.url)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    spec = importlib.util.spec_from_file_location(f"design_example_{next(_modules)}", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def keyed(client: Any, key: str) -> Any:
    base = client.headers

    def headers(**extra: str | None) -> dict[str, str]:
        extra.setdefault("x_api_key", key)
        return base(**extra)

    client.headers = headers
    return client


async def envelope(client: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    return (await client.tool(tool, arguments))["structuredContent"]


@pytest.mark.asyncio
async def test_each_caller_uses_their_own_key_upstream(monkeypatch: pytest.MonkeyPatch, upstream: FakeDesignApi,
                                                       clients: Any) -> None:
    example = load(monkeypatch, upstream)
    app = clients.app(example.server, auth=example.auth)
    anonymous = clients.asgi(app)
    reply = await anonymous.post(jsonrpc("initialize", {}, 1))
    assert reply.status == 401 and "resource_metadata" not in reply.headers["www-authenticate"]
    alice = keyed(clients.asgi(app), ALICE)
    await alice.initialize()
    listed = await envelope(alice, "list_designs")
    assert listed["ok"] and listed["result"] == {"designs": [{"id": "d1", "title": "Launch"}]}
    bob = keyed(clients.asgi(app), BOB)
    await bob.initialize()
    assert (await envelope(bob, "list_designs"))["result"] == {"designs": []}
    assert {key for _, path, key in upstream.requests if path.startswith("/v1/designs")} == {ALICE, BOB}
    stranger = keyed(clients.asgi(app), "dk_nobody_0123456789abcd")
    await stranger.initialize()  # the server does not know keys; the API refuses this one
    refused = await envelope(stranger, "list_designs")
    assert refused["ok"] is False and refused["error"]["code"] == E_PERMISSION_DENIED
    assert "invalid API key" in refused["error"]["message"]


@pytest.mark.asyncio
async def test_upstream_statuses_become_contract_codes(monkeypatch: pytest.MonkeyPatch, upstream: FakeDesignApi,
                                                       clients: Any) -> None:
    example = load(monkeypatch, upstream)  # no gates in its policy: delete_design is listed as it is
    alice = keyed(clients.asgi(clients.app(example.server, auth=example.auth)), ALICE)
    await alice.initialize()
    missing = await envelope(alice, "get_design", design_id="nope")
    assert missing["error"]["code"] == E_NOT_FOUND and "design not found" in missing["error"]["message"]
    forbidden = await envelope(alice, "delete_design", design_id="d1")
    assert forbidden["error"]["code"] == E_PERMISSION_DENIED and "plan" in forbidden["error"]["message"]
    upstream.limited = 1
    started = time.monotonic()
    exported = await envelope(alice, "export_design", design_id="d1", format="pdf")
    assert exported["ok"] and exported["result"] == {"url": "https://cdn.example/d1.pdf"}
    assert time.monotonic() - started >= 0.9  # it waited out the API's Retry-After
    upstream.limited = 10  # more 429s than retries: the caller is told when to come back
    limited = await envelope(alice, "export_design", design_id="d1")
    assert limited["error"]["code"] == E_RATE_LIMITED and limited["error"]["retryable"] is True
    assert limited["error"]["details"]["retryAfterMs"] == 1000


@pytest.mark.asyncio
async def test_rate_limits_are_per_caller(monkeypatch: pytest.MonkeyPatch, upstream: FakeDesignApi,
                                          clients: Any) -> None:
    example = load(monkeypatch, upstream, DESIGN_RATE_LIMIT="3/min")
    app = clients.app(example.server, auth=example.auth)
    alice, bob = keyed(clients.asgi(app), ALICE), keyed(clients.asgi(app), BOB)
    await alice.initialize()
    await bob.initialize()
    outcomes = [(await envelope(alice, "list_designs"))["ok"] for _ in range(4)]
    assert outcomes == [True, True, True, False]
    assert (await envelope(alice, "list_designs"))["error"]["code"] == E_RATE_LIMITED
    assert (await envelope(bob, "list_designs"))["ok"] is True  # another caller, another bucket


@pytest.mark.asyncio
async def test_resources_and_prompts(monkeypatch: pytest.MonkeyPatch, upstream: FakeDesignApi, clients: Any) -> None:
    example = load(monkeypatch, upstream)
    alice = keyed(clients.asgi(clients.app(example.server, auth=example.auth)), ALICE)
    await alice.initialize()
    read = await alice.result("resources/read", {"uri": "design://templates"})
    assert json.loads(read["contents"][0]["text"]) == {"templates": [{"id": "t1", "name": "Square post"}]}
    one = await alice.result("resources/read", {"uri": "design://designs/d1"})
    assert json.loads(one["contents"][0]["text"])["title"] == "Launch"
    gone = await alice.call("resources/read", {"uri": "design://designs/zzz"})
    assert gone["error"]["code"] == -32002 and gone["error"]["data"] == {"uri": "design://designs/zzz"}
    prompt = await alice.result("prompts/get", {"name": "social_post", "arguments": {"topic": "our launch"}})
    assert "our launch" in prompt["messages"][0]["content"]["text"]


def test_the_example_serves_http(upstream: FakeDesignApi) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "DESIGN_API_URL": upstream.url, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, str(EXAMPLE), "--port", str(port)], env=env, cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        deadline = time.monotonic() + 60
        while True:  # bounded wait for uvicorn to listen
            try:
                reply = httpx.post(url, json=init, headers=headers, timeout=10)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "the example did not start listening"
                time.sleep(0.1)
        assert reply.status_code == 401
        assert reply.headers["www-authenticate"] == 'ApiKey realm="mcp", header="X-API-Key"'
        reply = httpx.post(url, json=init, headers={**headers, "x-api-key": ALICE}, timeout=10)
        assert reply.status_code == 200
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.asyncio
async def test_sizes_and_exports_in_the_legacy_envelope(monkeypatch: pytest.MonkeyPatch, upstream: FakeDesignApi,
                                                        clients: Any) -> None:
    example = load(monkeypatch, upstream)
    alice = keyed(clients.asgi(clients.app(example.server, auth=example.auth)), ALICE)
    await alice.initialize()
    half = await alice.tool("create_design", {"title": "Poster", "width": 800})
    assert half["isError"] is True and "width requires height" in half["content"][0]["text"]
    both = await alice.tool("create_design", {"title": "Poster", "template_id": "t1", "height": 800})
    assert both["isError"] is True and "template_id and height are mutually exclusive" in both["content"][0]["text"]
    made = await envelope(alice, "create_design", title="Poster", width=800, height=600)
    assert made["ok"] and made["result"]["width"] == 800 and made["errors"] == []
    exported = await envelope(alice, "export_design", design_id="d1", format="pdf")
    assert exported["files"] == ["https://cdn.example/d1.pdf"] and exported["result"]["url"] == exported["files"][0]
    assert [p for m, p, _ in upstream.requests if m == "POST"] == ["/v1/designs", "/v1/designs/d1/export"]


@pytest.mark.asyncio
async def test_the_example_takes_the_key_from_its_environment_on_stdio(upstream: FakeDesignApi) -> None:
    env = {"DESIGN_API_URL": upstream.url, "PYTHONPATH": str(Path(mcpkit.__file__).parents[1]),
           "DESIGN_API_KEY": ALICE}
    async with mcpkit.Client([sys.executable, str(EXAMPLE)], env=env) as client:
        listed = (await client.call_tool("list_designs", {}))["structuredContent"]
    assert listed["ok"] and listed["result"] == {"designs": [{"id": "d1", "title": "Launch"}]}
    assert [key for _, _, key in upstream.requests] == [ALICE]
    del env["DESIGN_API_KEY"]
    done = subprocess.run([sys.executable, str(EXAMPLE)], env={**env, "PATH": os.environ["PATH"]}, input=b"",
                          capture_output=True, timeout=60)
    assert done.returncode == 2 and "DESIGN_API_KEY is not set" in done.stderr.decode() and done.stdout == b""
