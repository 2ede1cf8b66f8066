"""``mcpkit proxy`` in front of real servers: the official conformance suite runs *through* the proxy
(in front of ``mcpkit serve`` over stdio and over HTTP), and the reference Node servers
``@modelcontextprotocol/server-filesystem`` and ``server-everything`` (pinned, installed by
``tools/install-mcp-servers.sh`` into a cache) are put behind its guard rails.

Without npm (or the installed Node servers) these tests fail in CI, where .ci/run installs them,
and skip elsewhere (tests/conftest.py ``component_missing``): in CI they are what shows the proxy
works with servers mcpkit did not write.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit.client import Client
from tests.conftest import component_missing

#: each test starts what it needs: a parallel run spreads them over its workers (tests/conftest.py)
SPLIT_ACROSS_WORKERS = True
ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "tools" / "conformance"
INSTALLER = ROOT / "tools" / "install-mcp-servers.sh"
PY = sys.executable
SERVE = [PY, "-m", "mcpkit", "serve"]
PROXY = [PY, "-m", "mcpkit", "proxy"]
MODERN = "2026-07-28"
pytestmark = [pytest.mark.interop, pytest.mark.timeout(1800), pytest.mark.usefixtures("serving_loop")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(proc: subprocess.Popen[Any], port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def need_npm() -> None:
    if shutil.which("npm") is None or shutil.which("node") is None:
        component_missing("node and npm are needed for the Node peers of these tests "
                          "(on Debian: apt-get install nodejs npm)")


# ------------------------------------------------------------------------------ conformance


def conformance(command: list[str], version: str | None = None) -> tuple[int, int, str, int]:
    need_npm()
    env = {**os.environ, **({"CONFORMANCE_VERSION": version} if version else {})}
    done = subprocess.run([str(RUNNER), "--suite", "all", "--", *command], capture_output=True, text=True,
                          timeout=1500, env=env, cwd=ROOT)
    summary = re.findall(r"^conformance: (\d+) passed, (\d+) failed$", done.stdout, re.M)
    assert summary, f"no summary line; output:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    passed, failed = map(int, summary[-1])
    return passed, failed, done.stdout[-4000:], done.returncode


@pytest.fixture
def http_upstream() -> Iterator[str]:
    """``mcpkit serve --http`` on a port of its own: the upstream the proxy reaches over HTTP."""
    port = free_port()
    proc = subprocess.Popen([*SERVE, "--http", f"127.0.0.1:{port}"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(proc, port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)


@pytest.mark.parametrize("upstream_revision", [None, MODERN], ids=["handshake-upstream", "modern-upstream"])
def test_the_conformance_suite_passes_through_the_proxy_over_stdio(upstream_revision: str | None) -> None:
    """Suite 0.1.16 (every scenario) through the proxy, the upstream reached over stdio in either era."""
    speak = ["--protocol-version", upstream_revision] if upstream_revision else []
    passed, failed, out, code = conformance([*PROXY, *speak, "--http", "127.0.0.1:{port}", "--", *SERVE])
    assert (passed, failed) == (32, 0), out
    assert code == 0


def test_the_conformance_suite_passes_through_the_proxy_over_http(http_upstream: str) -> None:
    passed, failed, out, code = conformance([*PROXY, "--http", "127.0.0.1:{port}", http_upstream])
    assert (passed, failed) == (32, 0), out
    assert code == 0


def test_the_2026_07_28_suite_passes_through_the_proxy_over_stdio() -> None:
    """Suite 0.2.0-alpha.12 (both eras, the tasks extension included) through the proxy: the
    upstream spoken to in 2026-07-28 carries the client's capabilities, named inputs and tasks."""
    passed, failed, out, code = conformance(
        [*PROXY, "--protocol-version", MODERN, "--http", "127.0.0.1:{port}", "--", *SERVE], "0.2.0-alpha.12")
    assert (passed, failed) == (65, 0), out
    assert code == 0


def test_the_2026_07_28_suite_passes_through_the_proxy_over_http(http_upstream: str) -> None:
    passed, failed, out, code = conformance(
        [*PROXY, "--protocol-version", MODERN, "--http", "127.0.0.1:{port}", http_upstream], "0.2.0-alpha.12")
    assert (passed, failed) == (65, 0), out
    assert code == 0


@pytest.mark.parametrize("upstream_revision", [None, MODERN], ids=["handshake-upstream", "modern-upstream"])
def test_every_check_of_the_skills_scenarios_succeeds_through_the_proxy(tmp_path: Path,
                                                                       upstream_revision: str | None) -> None:
    """SEP-2640 through the proxy (proxy/skills.py): the reference server's skills relayed, and
    every check of the three scenarios run and a SUCCESS (an undeclared extension would skip them)."""
    from tests.interop.test_conformance import SKILL_ARGS, assert_every_skill_check_succeeds

    need_npm()
    speak = ["--protocol-version", upstream_revision] if upstream_revision else []
    done = subprocess.run([str(RUNNER), *SKILL_ARGS, "--output-dir", str(tmp_path), "--", *PROXY, *speak, "--http",
                           "127.0.0.1:{port}", "--", *SERVE], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "CONFORMANCE_VERSION": "0.2.0-alpha.12"}, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-4000:]
    assert_every_skill_check_succeeds(tmp_path)


# ------------------------------------------------------------------------------ Node servers


@pytest.fixture(scope="module")
def node_servers() -> Path:
    need_npm()
    done = subprocess.run(["bash", str(INSTALLER)], capture_output=True, text=True, timeout=900)
    if done.returncode != 0 or not done.stdout.strip():
        component_missing(f"the Node servers are not installed: tools/install-mcp-servers.sh failed "
                          f"(exit {done.returncode}):\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1]) / "node_modules" / ".bin"


def start_proxy(*args: str) -> tuple[subprocess.Popen[Any], str]:
    port = free_port()
    proc = subprocess.Popen([*PROXY, "--http", f"127.0.0.1:{port}", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_listening(proc, port)
    except BaseException:
        stop(proc)
        raise AssertionError(f"mcpkit proxy did not start: {proc.stderr.read() if proc.stderr else ''}") from None
    return proc, f"http://127.0.0.1:{port}/mcp"


WRITE_TOOLS = {"write_file", "edit_file", "create_directory", "move_file"}


@pytest.mark.asyncio
async def test_server_filesystem_read_only_behind_the_proxy(node_servers: Path, tmp_path: Path) -> None:
    files = tmp_path / "files"
    files.mkdir()
    (files / "notes.txt").write_text("hello from the filesystem server\n")
    audit = tmp_path / "audit.log"
    proc, url = start_proxy("--read-only", "--audit", str(audit), "--", str(node_servers / "mcp-server-filesystem"),
                            str(files))
    try:
        async with Client(url) as client:
            names = {t["name"] for t in await client.list_tools()}
            assert {"read_text_file", "list_directory"} <= names
            assert not names & WRITE_TOOLS  # write tools hidden...
            refused = await client.call_tool("write_file", {"path": str(files / "new.txt"), "content": "x"})
            assert refused.get("isError") is True and "read-only" in refused["content"][0]["text"]  # ...refused
            assert not (files / "new.txt").exists()
            read = await client.call_tool("read_text_file", {"path": str(files / "notes.txt")})
            assert read.get("isError") is not True
            assert "hello from the filesystem server" in read["content"][0]["text"]
            listing = await client.call_tool("list_directory", {"path": str(files)})
            assert "notes.txt" in listing["content"][0]["text"]
    finally:
        stop(proc)
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(line["tool"], line["outcome"]) for line in lines] == [
        ("write_file", "denied"), ("read_text_file", "ok"), ("list_directory", "ok")]


@pytest.mark.asyncio
async def test_server_everything_relays_progress_sampling_and_elicitation(node_servers: Path) -> None:
    proc, url = start_proxy("--", str(node_servers / "mcp-server-everything"))
    asked: list[tuple[str, dict[str, Any]]] = []

    async def sample(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(("sampling", params))
        return {"role": "assistant", "content": {"type": "text", "text": "pong from the client"}, "model": "test"}

    async def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(("elicitation", params))
        return {"action": "accept", "content": {"name": "Zoe"}}

    try:
        async with Client(url, sampling_handler=sample, elicitation_handler=elicit) as client:
            names = {t["name"] for t in await client.list_tools()}
            assert {"trigger-long-running-operation", "trigger-sampling-request",
                    "trigger-elicitation-request"} <= names
            progress: list[tuple[Any, ...]] = []
            done = await client.call_tool("trigger-long-running-operation", {"duration": 1, "steps": 3},
                                          progress=lambda *p: progress.append(p))
            assert "completed" in done["content"][0]["text"]
            assert [p[:2] for p in progress] == [(1, 3), (2, 3), (3, 3)]
            sampled = await client.call_tool("trigger-sampling-request", {"prompt": "ping"})
            assert "pong from the client" in sampled["content"][0]["text"]
            elicited = await client.call_tool("trigger-elicitation-request", {})
            assert any("Zoe" in block.get("text", "") for block in elicited["content"])
    finally:
        stop(proc)
    assert [kind for kind, _ in asked] == ["sampling", "elicitation"]
    assert "ping" in asked[0][1]["messages"][0]["content"]["text"]
    assert asked[1][1]["requestedSchema"]["type"] == "object"
