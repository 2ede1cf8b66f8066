"""``mcpkit proxy`` profiles (proxy/profiles.py): curated endpoints at /p/NAME/mcp, each its own
subset, guard rails, credentials and sessions over one connection per upstream; /healthz and
/readyz (proxy/readiness.py)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpkit.client import Client, ClientError, RpcError
from tests.test_http import free_port, wait_listening

aio = pytest.mark.asyncio
PY = sys.executable
NOTES = str(Path(__file__).parent / "servers" / "notes.py")
SUPPORT_TOKEN = "support-token-0123456789abcdef"
ADMIN_TOKEN = "admin-token-0123456789abcdef"
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
ACCEPT = "application/json, text/event-stream"


def _tokens(path: Path, token: str, subject: str) -> str:
    path.write_text(f"{token} {subject}\n")
    os.chmod(path, 0o600)
    return str(path)


def _config(tmp_path: Path, servers: dict[str, Any], profiles: dict[str, Any] | None = None) -> str:
    config = tmp_path / "mcp.json"
    data: dict[str, Any] = {"mcpServers": servers}
    if profiles is not None:
        data["profiles"] = profiles
    config.write_text(json.dumps(data))
    return str(config)


REF = {"command": PY, "args": ["-m", "mcpkit", "serve"]}
NOTES_SERVER = {"command": PY, "args": ["-m", "mcpkit", "serve", NOTES]}


@contextlib.contextmanager
def proxy(*args: str, env: dict[str, str] | None = None) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    port = free_port()
    proc = subprocess.Popen([PY, "-m", "mcpkit", "proxy", "--http", f"127.0.0.1:{port}", *args], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        try:
            wait_listening(proc, port, timeout=60)
        except RuntimeError as exc:
            stderr = proc.stderr.read().decode() if proc.poll() is not None and proc.stderr else ""
            raise AssertionError(f"{exc}\n{stderr}") from None
        yield port, proc
    finally:
        proc.terminate()
        proc.wait(15)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@aio
async def test_two_profiles_serve_their_own_subsets_policies_credentials_and_sessions(tmp_path: Path) -> None:
    support = _tokens(tmp_path / "support.tokens", SUPPORT_TOKEN, "alice")
    admin = _tokens(tmp_path / "admin.tokens", ADMIN_TOKEN, "root")
    starts = tmp_path / "starts"
    notes = {**NOTES_SERVER, "env": {"NOTES_STARTS": str(starts)}}
    config = _config(tmp_path, {"ref": REF, "notes": notes}, {
        "support": {"tools": {"notes": ["*_note"], "ref": ["add"]}, "read_only": True, "tokens": support},
        "admin": {"tools": {"*": ["*"]}, "resources": {"notes": ["notes://*"]}, "prompts": {"*": ["*"]},
                  "tokens": admin},
    })
    with proxy("--config", config) as (port, proc):
        base = f"http://127.0.0.1:{port}"
        async with Client(f"{base}/p/support/mcp", headers=_bearer(SUPPORT_TOKEN)) as client:
            assert {t["name"] for t in await client.list_tools()} == {"notes_read_note", "ref_add"}
            offered = client.server_capabilities
            assert "prompts" not in offered and "resources" not in offered, offered  # none selected
            assert (await client.call_tool("ref_add", {"a": 2, "b": 3}))["structuredContent"] == {"result": 5}
            refused = await client.call_tool("notes_write_note", {"name": "n", "text": "t"})  # selected, read-only
            assert refused.get("isError") is True and "read-only" in refused["content"][0]["text"], refused
            with pytest.raises(RpcError, match="Unknown tool: ref_echo"):  # not in the profile at all
                await client.call_tool("ref_echo", {"text": "x"})
        async with Client(f"{base}/p/admin/mcp", headers=_bearer(ADMIN_TOKEN)) as client:
            names = {t["name"] for t in await client.list_tools()}
            assert {"notes_write_note", "notes_read_note", "ref_echo", "ref_add"} <= names
            assert (await client.call_tool("notes_write_note", {"name": "n", "text": "t"})).get("isError") is not True
            assert (await client.call_tool("notes_read_note", {"name": "n"}))["content"][0]["text"] == "t"
            assert [r["uri"] for r in await client.list_resources()] == ["notes://notes/welcome"]
            assert "notes_summarize" in {p["name"] for p in await client.list_prompts()}
        for path, token in (("support", ADMIN_TOKEN), ("admin", SUPPORT_TOKEN), ("admin", None)):
            with pytest.raises(ClientError) as refused_token:
                async with Client(f"{base}/p/{path}/mcp", headers=_bearer(token) if token else {}) as client:
                    await client.list_tools()
            assert refused_token.value.status == 401, (path, token)
        # a session of one profile is unknown to the other, even with that one's valid token
        with httpx.Client(timeout=30) as http:
            opened = http.post(f"{base}/p/support/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                               "params": INIT},
                               headers={"Accept": ACCEPT, **_bearer(SUPPORT_TOKEN)})
            session = opened.headers["mcp-session-id"]
            crossed = http.post(f"{base}/p/admin/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                                headers={"Accept": ACCEPT, "Mcp-Session-Id": session, "MCP-Protocol-Version":
                                         "2025-06-18", **_bearer(ADMIN_TOKEN)})
            assert crossed.status_code == 404, crossed.text
            assert http.get(f"{base}/mcp").status_code == 404  # with profiles, only they are served
            # each profile's OAuth metadata is at its own path-aware well-known URL, which its 401 names
            challenge = http.post(f"{base}/p/support/mcp", json={}, headers={"Accept": ACCEPT})
            metadata = f"{base}/.well-known/oauth-protected-resource/p/support/mcp"
            assert metadata in challenge.headers["www-authenticate"], challenge.headers
            assert http.get(metadata).json()["resource"] == f"{base}/p/support/mcp"
            assert http.get(f"{base}/healthz").json() == {"status": "ok"}
            ready = http.get(f"{base}/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json()["upstreams"] == {"ref": {"state": "connected"}, "notes": {"state": "connected"}}
            assert http.get(f"{base}/healthz", headers={"Host": "evil.example"}).status_code == 403
    # one connection per upstream, however many profiles and sessions: the upstream started once
    assert len(starts.read_text().split()) == 1
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert "Traceback" not in stderr, stderr


def test_readyz_is_503_while_an_upstream_is_down_and_200_once_it_is_up(tmp_path: Path) -> None:
    marker = tmp_path / "may-start"
    # exits at once (an upstream that fails) until the marker exists, then serves
    flaky = [PY, "-c", f"import os, sys; os.path.exists({str(marker)!r}) or sys.exit(3); "
             "os.execv(sys.executable, [sys.executable, '-m', 'mcpkit', 'serve'])"]
    config = _config(tmp_path, {"ref": REF, "flaky": {"command": flaky[0], "args": flaky[1:],
                                                      "env": {"SECRET_TOKEN": "hunter2-hunter2"}}})
    with proxy("--config", config) as (port, _):
        base = f"http://127.0.0.1:{port}"
        down = httpx.get(f"{base}/readyz", timeout=30)
        assert down.status_code == 503, down.text
        body = down.json()
        assert body["status"] == "not ready" and body["upstreams"]["ref"] == {"state": "connected"}
        flaky_state = body["upstreams"]["flaky"]
        assert flaky_state["state"] == "failed" and "code 3" in flaky_state["error"], body
        assert "hunter2" not in down.text
        assert httpx.get(f"{base}/healthz", timeout=30).status_code == 200  # alive: no restart for an upstream
        assert httpx.get(f"{base}/mcp", timeout=30).status_code != 404  # without profiles, /mcp as before
        marker.touch()
        deadline = time.monotonic() + 60  # the reconnection backoff is at most 10 s
        while (ready := httpx.get(f"{base}/readyz", timeout=30)).status_code != 200:
            assert time.monotonic() < deadline, ready.text
            time.sleep(0.2)
        assert ready.json()["upstreams"]["flaky"] == {"state": "connected"}


def test_an_upstream_not_required_is_listed_but_not_waited_for(tmp_path: Path) -> None:
    failing = {"command": PY, "args": ["-c", "import sys; sys.exit(3)"], "required": False}
    config = _config(tmp_path, {"ref": REF, "extra": failing})
    with proxy("--config", config) as (port, _):
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=30)
        assert ready.status_code == 200, ready.text
        extra = ready.json()["upstreams"]["extra"]
        assert extra["state"] == "failed" and extra["required"] is False, extra


@pytest.mark.parametrize(("profiles", "message"), [
    ({"p": {"tools": {"nope": ["*"]}}}, "profiles.p.tools names upstream(s) nope, which the proxy does not have"),
    ({"p": {"tool": {}}}, "profiles.p: unknown key(s) tool"),
    ({"bad name": {}}, "a profile name is 1-40 characters"),
    ({"p": {"read_only": "yes"}}, "profiles.p.read_only must be true or false"),
    ({"p": {"tools": {"ref": "*"}}}, "must map an upstream key"),
    ({"p": {"tokens": "/nonexistent/tokens"}}, "profile 'p': "),
])
def test_a_profile_mistake_is_one_line_and_exit_2(tmp_path: Path, profiles: dict[str, Any], message: str) -> None:
    config = _config(tmp_path, {"ref": REF}, profiles)
    port = free_port()
    done = subprocess.run([PY, "-m", "mcpkit", "proxy", "--http", f"127.0.0.1:{port}", "--config", config],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_profiles_need_http(tmp_path: Path) -> None:
    config = _config(tmp_path, {"ref": REF}, {"p": {"tools": {"*": ["*"]}}})
    done = subprocess.run([PY, "-m", "mcpkit", "proxy", "--config", config], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "add --http HOST:PORT" in done.stderr, done.stderr


def test_readyz_counts_the_tools_a_pin_withholds(tmp_path: Path) -> None:
    rugpull = [PY, str(Path(__file__).parent / "servers" / "rugpull.py")]
    lock, flag = tmp_path / "lock.json", tmp_path / "pulled"
    env = {**os.environ, "RUGPULL_AT": "1000", "RUGPULL_FLAG": str(flag)}
    passed = ["--pass-env", "RUGPULL_AT", "--pass-env", "RUGPULL_FLAG"]
    pinned = subprocess.run([PY, "-m", "mcpkit", "pin", str(lock), *passed, "--", *rugpull], env=env,
                            capture_output=True, text=True, timeout=120)
    assert pinned.returncode == 0, pinned.stderr
    flag.touch()  # fetch drifts from what was pinned
    with proxy("--pin", str(lock), *passed, "--", *rugpull, env=env) as (port, _):
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=30)
    assert ready.status_code == 200, ready.text  # connected: a withheld tool does not make it unready
    assert ready.json()["upstreams"] == {"default": {"state": "connected", "withheld": 1}}


class _Upstream:
    def __init__(self, up: bool, error: str | None = None, held: int = 0, pinned: bool = False) -> None:
        self.up = up
        self.connect_error = error
        self.last_error = None
        self.pin = object() if pinned else None
        self._tools = {f"t{i}": ("t", {}, {}, (), None, object()) for i in range(held)}
        self._tools["free"] = ("free", {}, {}, (), None, None)


def test_readiness_redacts_what_a_stranger_may_read() -> None:
    from mcpkit.proxy.readiness import readiness

    error = ("HTTP request to https://bot:s3cretpass@mcp.example.com/mcp?api_key=abcdef0123 failed; "
             "stderr: Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl " + "x" * 400)
    ready, details = readiness({"files": _Upstream(True, held=2, pinned=True), "web": _Upstream(False, error),
                                "new": _Upstream(False)})()
    assert ready is False
    states = details["upstreams"]
    assert states["files"] == {"state": "connected", "withheld": 2}
    assert states["new"] == {"state": "connecting"}
    web = states["web"]
    assert web["state"] == "failed" and "mcp.example.com" in web["error"] and len(web["error"]) <= 303
    for secret in ("s3cretpass", "abcdef0123", "eyJhbGciOiJIUzI1NiJ9"):
        assert secret not in web["error"], web["error"]
    assert readiness({"files": _Upstream(True)})() == (True, {"upstreams": {"files": {"state": "connected"}}})
