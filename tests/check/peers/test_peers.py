"""``mcpkit check`` against real servers nobody here wrote: the official Python SDK (stdio, HTTP),
the TypeScript SDK (stdio, HTTP), @modelcontextprotocol/server-everything (stdio, HTTP),
-filesystem and -memory. Each run must report exactly the findings of the peer's reviewed
expectation file (expected/<peer>.toml: rule, severity, revisions, why, spec quote) with its exit
code, and every finding there is verified again by sending the same request raw (raw.py).

The Node peers come from tools/install-mcp-servers.sh (pinned versions, cached); the Python SDK is
the `mcp` pin of the dev extra. Without node, npm or the installed peers, a Node peer's test fails
in CI (.ci/run installs them) and skips elsewhere (tests/conftest.py ``component_missing``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mcpkit.check import run_checks
from mcpkit.protocol.revisions import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY
from tests.check.peers.raw import RawHttp, RawStdio, initialize
from tests.conftest import component_missing
from tests.test_http import free_port, stop_server, wait_listening

#: each test starts what it needs: a parallel run spreads them over its workers (tests/conftest.py)
SPLIT_ACROSS_WORKERS = True
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
EXPECTED = HERE / "expected"
EVIL_ORIGIN = "https://evil.example"


def peers_dir() -> Path:
    """The install of tools/install-mcp-servers.sh (installing it when needed)."""
    node()
    done = subprocess.run(["bash", str(ROOT / "tools" / "install-mcp-servers.sh")], capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0 or not done.stdout.strip():
        component_missing(f"the Node peers are not installed: tools/install-mcp-servers.sh failed "
                          f"(exit {done.returncode}): {done.stderr[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def node() -> str:
    found = shutil.which("node")
    if found is None:
        component_missing("node is not installed (apt-get install nodejs npm); the Node peers need it")
    return found


@dataclass
class Peer:
    name: str
    #: the stdio command line, or the command that serves HTTP on {port}
    argv: list[str]
    http: bool = False
    env: dict[str, str] = field(default_factory=dict)


def _peer(name: str, tmp: Path) -> Peer:
    if name.startswith("sdk-"):
        script = str(HERE / "servers" / "sdk_server.py")
        return Peer(name, [sys.executable, script, *(["--http", "{port}"] if name == "sdk-http" else [])],
                    http=name == "sdk-http")
    base = peers_dir()
    modules = base / "node_modules" / "@modelcontextprotocol"
    if name.startswith("ts-"):
        script = str(HERE / "servers" / "ts_server.mjs")
        return Peer(name, [node(), script, *(["--http", "{port}"] if name == "ts-http" else [])],
                    http=name == "ts-http", env={"MCP_TS_DIR": str(base)})
    if name == "everything-stdio":
        return Peer(name, [node(), str(modules / "server-everything" / "dist" / "index.js"), "stdio"])
    if name == "everything-http":
        return Peer(name, [node(), str(modules / "server-everything" / "dist" / "index.js"), "streamableHttp"],
                    http=True, env={"PORT": "{port}"})
    if name == "filesystem-stdio":
        (tmp / "notes.txt").write_text("hello\n")
        return Peer(name, [node(), str(modules / "server-filesystem" / "dist" / "index.js"), str(tmp)])
    if name == "memory-stdio":
        return Peer(name, [node(), str(modules / "server-memory" / "dist" / "index.js")],
                    env={"MEMORY_FILE_PATH": str(tmp / "memory.jsonl")})
    raise AssertionError(name)


@contextmanager
def serving(peer: Peer) -> Iterator[Any]:
    """The check target: a command line for stdio, or a URL of the started HTTP peer."""
    saved = dict(os.environ)
    if not peer.http:
        os.environ.update(peer.env)  # the checker passes these to its child by name (inherit_env)
        try:
            yield peer.argv
        finally:
            os.environ.clear()
            os.environ.update(saved)
        return
    port = free_port()
    argv = [a.replace("{port}", str(port)) for a in peer.argv]
    env = {**os.environ, **{k: v.replace("{port}", str(port)) for k, v in peer.env.items()}}
    errlog = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog, env=env)
    proc.errlog = errlog  # type: ignore[attr-defined]  # what stop_server reads
    try:
        wait_listening(proc, port, timeout=60.0)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_server(proc)


def _expectations(name: str) -> dict[str, Any]:
    return tomllib.loads((EXPECTED / f"{name}.toml").read_text(encoding="utf-8"))


def _expected_failures(spec: dict[str, Any]) -> set[tuple[str, str, str | None]]:
    out = set()
    for item in spec.get("finding", []):
        for revision in item.get("revisions") or [None]:
            out.add((item["rule"], item["severity"], revision))
    return out


# ------------------------------------------------------------------ raw verification of each finding


def _modern(method: str, params: dict[str, Any], rid: int) -> dict[str, Any]:
    meta = {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta}}


async def _stdio_answer(peer: Peer, revision: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    async with RawStdio(peer.argv, env={**os.environ, **peer.env}) as raw:
        if revision == "2026-07-28":
            await raw.send(_modern(method, params, 7))
            return await raw.answer(7)
        opened = await raw.open(revision)
        assert opened["result"]["protocolVersion"] == revision
        return await raw.request(7, method, params)


async def _http_answer(url: str, revision: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    async with RawHttp(url) as raw:
        if revision == "2026-07-28":
            status, _, message = await raw.post(_modern(method, params, 7), **{
                "MCP-Protocol-Version": revision, "Mcp-Method": method, **(
                    {"Mcp-Name": params["name"]} if "name" in params else {})})
            assert status == 200, status
            return message
        opened = await raw.open(revision)
        assert opened["result"]["protocolVersion"] == revision
        return await raw.request(7, method, params)


async def _answer(peer: Peer, target: Any, revision: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    if peer.http:
        return await _http_answer(target, revision, method, params)
    return await _stdio_answer(peer, revision, method, params)


async def _verify(peer: Peer, target: Any, item: dict[str, Any]) -> None:
    """Send the request behind ``item`` raw and see the behaviour the finding describes."""
    probe = item["probe"]
    if probe == "unknown-tool":
        for revision in item["revisions"]:
            answer = await _answer(peer, target, revision, "tools/call",
                                   {"name": "raw-probe-no-such-tool", "arguments": {}})
            assert "error" not in answer and answer["result"].get("isError") is True, (revision, answer)
    elif probe == "resource-not-found":
        for revision in item["revisions"]:
            answer = await _answer(peer, target, revision, "resources/read", {"uri": item["uri"]})
            assert answer.get("error", {}).get("code") == -32602, (revision, answer)  # not the -32002 asked for
    elif probe in ("origin", "host"):
        async with RawHttp(target) as raw:
            extra = {"Origin": EVIL_ORIGIN} if probe == "origin" else {"Host": "evil.example"}
            status, headers, message = await raw.post(initialize("2025-11-25"), **extra)
            raw.session = headers.get("mcp-session-id")  # closed on exit
        assert status == 200 and message["result"]["protocolVersion"] == "2025-11-25", (status, message)
    elif probe in ("session-ended", "session-unknown"):
        async with RawHttp(target) as raw:
            await raw.open("2025-11-25")
            if probe == "session-ended":
                ended = await raw.http.delete(raw.url, headers=raw.headers())
                assert 200 <= ended.status_code < 300, ended.status_code
            else:
                raw.session = "raw-probe-" + uuid.uuid4().hex
            status, _, _ = await raw.post({"jsonrpc": "2.0", "id": 9, "method": "ping"})
            raw.session = None
        assert status == 400, status  # 404 is what the spec asks for
    else:
        raise AssertionError(f"no raw probe {probe!r}")


PEERS = ["sdk-stdio", "sdk-http", "ts-stdio", "ts-http", "everything-stdio", "everything-http", "filesystem-stdio",
         "memory-stdio"]


@pytest.mark.asyncio
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", PEERS)
async def test_a_peer_gets_exactly_its_reviewed_findings(name: str, tmp_path: Path) -> None:
    spec = _expectations(name)
    peer = _peer(name, tmp_path)
    with serving(peer) as target:
        report = await run_checks(target, progress=False, inherit_env=list(peer.env))
        got = {(f.rule, f.severity, f.revision) for f in report.failed()}
        assert got == _expected_failures(spec), [f.to_dict() for f in report.failed()]
        assert report.error is None and report.incomplete is None
        assert report.exit_code == spec["exit_code"]
        assert report.tools_called == []  # the default calls no tool
        for item in spec.get("finding", []):
            await _verify(peer, target, item)


def test_every_expectation_file_is_reviewed() -> None:
    """Each finding says why it is right and quotes the spec; each file belongs to a peer."""
    assert sorted(p.stem for p in EXPECTED.glob("*.toml")) == sorted(PEERS)
    for name in PEERS:
        spec = _expectations(name)
        assert spec["peer"] and spec["exit_code"] in (0, 1)
        must = any(item["severity"] == "error" for item in spec.get("finding", []))
        assert spec["exit_code"] == (1 if must else 0), name  # a MUST-clean server exits 0
        for item in spec.get("finding", []):
            assert item["why"].strip() and item["quote"].strip() and item["probe"], (name, item["rule"])
