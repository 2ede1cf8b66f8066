"""file:// resources of a sandboxed server are confined to the sandbox roots (RS-06).

RS-06: for ``file://`` resources a server MUST sanitize paths against directory traversal. With
a policy sandbox, a read of (or a subscription to) a ``file:`` resource, static or a template's
match, is checked against the roots on the URI the client sent, realpath and all, before the
handler runs; with no roots every file resource is refused (fail closed).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.policy import Policy
from mcpkit.policy.sandbox import Sandbox
from tests.harness import RpcError, connect

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def make_server(root: Path, outside: Path, sandbox: Any) -> tuple[Server, list[str]]:
    server = Server("files", policy=Policy(sandbox=sandbox))
    read: list[str] = []

    @server.resource_template("file:///{+path}")
    def any_file(path: str) -> str:
        read.append(path)
        with open("/" + path, encoding="utf-8") as f:  # what a naive handler does with the URI
            return f.read()

    @server.resource(f"file://{root}/inside.txt")
    def inside() -> str:
        read.append("inside")
        return "inside"

    @server.resource(f"file://{outside}/secret.txt")
    def secret() -> str:
        read.append("secret")
        return "TOPSECRET"

    @server.resource("notes://plain")
    def plain() -> str:
        return "not a file"

    return server, read


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("hello")
    (root / "inside.txt").write_text("inside")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOPSECRET")
    os.symlink(outside, root / "escape")
    return root, outside


async def _read(c: Any, uri: str, version: str) -> Any:
    params: dict[str, Any] = {"uri": uri}
    if version == MODERN:
        params["_meta"] = META
    return await c.request("resources/read", params)


@pytest.mark.req("RS-06")
@pytest.mark.asyncio
@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", MODERN])
async def test_file_resources_are_confined_to_the_sandbox_roots(wire, tree, version):
    root, outside = tree
    server, read = make_server(root, outside, Sandbox([root]))
    async with connect(server, wire, None if version == MODERN else version) as c:
        ok = await _read(c, f"file://{root}/docs/a.txt", version)
        assert ok["contents"][0]["text"] == "hello"
        assert (await _read(c, f"file://{root}/inside.txt", version))["contents"][0]["text"] == "inside"
        assert (await _read(c, "notes://plain", version))["contents"][0]["text"] == "not a file"
        assert read == [f"{str(root)[1:]}/docs/a.txt", "inside"]
        escapes = [
            f"file://{root}/../outside/secret.txt",  # dot-dot
            f"file://{root}/%2e%2e/outside/secret.txt",  # percent-encoded dot-dot
            f"file://{root}/docs/..%2F..%2Foutside/secret.txt",  # encoded separators
            f"file://{root}/escape/secret.txt",  # a symlink inside leading out
            "file:///etc/passwd",  # plainly outside
            f"file://{outside}/secret.txt",  # a static resource outside the roots
            # a query or fragment is not part of the path checked, yet a template hands it to
            # the handler as path text (which a normpath reads as ../../outside)
            f"file://{root}/docs?/../../outside/secret.txt",
            f"file://{root}/docs#/../../outside/secret.txt",
        ]
        for uri in escapes:
            with pytest.raises(RpcError) as refused:
                await _read(c, uri, version)
            error = refused.value
            assert error.code == -32602, uri
            assert error.message.startswith(f"File resource {uri!r} is refused: "), error.message
            assert error.data["code"] == "E_PERMISSION_DENIED" and error.data["uri"] == uri
            if "escape" in uri:  # the message names the path as given, never where the link leads
                assert str(outside) not in error.message
    assert read == [f"{str(root)[1:]}/docs/a.txt", "inside"]  # no refused read reached a handler


@pytest.mark.req("RS-06")
@pytest.mark.asyncio
async def test_subscriptions_to_file_resources_are_confined_too(wire, tree):
    root, outside = tree
    server, _ = make_server(root, outside, Sandbox([root]))
    async with connect(server, wire, "2025-11-25") as c:
        assert await c.request("resources/subscribe", {"uri": f"file://{root}/docs/a.txt"}) == {}
        with pytest.raises(RpcError) as refused:
            await c.request("resources/subscribe", {"uri": f"file://{root}/escape/secret.txt"})
        assert refused.value.code == -32602 and refused.value.data["code"] == "E_PERMISSION_DENIED"
        assert f"file://{root}/escape/secret.txt" not in c.session.subscriptions


@pytest.mark.req("RS-06")
@pytest.mark.asyncio
async def test_a_sandbox_without_roots_refuses_every_file_resource(wire, tree, monkeypatch):
    root, outside = tree
    monkeypatch.delenv("MCPKIT_ROOT", raising=False)
    server, read = make_server(root, outside, Sandbox())
    async with connect(server, wire, "2025-11-25") as c:
        for uri in (f"file://{root}/inside.txt", f"file://{root}/docs/a.txt"):
            with pytest.raises(RpcError) as refused:
                await c.request("resources/read", {"uri": uri})
            assert refused.value.code == -32602
            assert "no sandbox roots are configured" in refused.value.message
        assert (await c.request("resources/read", {"uri": "notes://plain"}))["contents"][0]["text"] == "not a file"
    assert read == []


@pytest.mark.asyncio
async def test_without_a_sandbox_file_resources_are_the_handlers_own(wire, tree):
    """No policy sandbox, no confinement: the server's author chose what to serve."""
    root, outside = tree
    server, read = make_server(root, outside, None)
    async with connect(server, wire, "2025-11-25") as c:
        secret = await c.request("resources/read", {"uri": f"file://{outside}/secret.txt"})
    assert secret["contents"][0]["text"] == "TOPSECRET" and read == ["secret"]
