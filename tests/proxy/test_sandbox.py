"""A command upstream in the sandbox (mcpkit.client.sandbox: bubblewrap and resource limits), behind
a real ``mcpkit proxy``: tests/proxy/servers/escape.py tries to reach the network, write outside
its writable paths, read a hidden key, take more memory, processes and CPU than it was given.
Each attempt fails in the sandbox and succeeds without it, and the proxy keeps serving: an
upstream killed by a limit is one clear error for the call, then started again."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mcpkit.client import Client
from mcpkit.client.sandbox import HIDDEN, Sandbox, SandboxError
from mcpkit.proxy import load_mcp_servers
from mcpkit.proxy.config import ConfigError
from tests.conftest import component_missing, mcpkit_command
from tests.interop.test_proxy_interop import node_servers  # noqa: F401 - the fixture
from tests.proxy.test_upstream_env import pythonpath

aio = pytest.mark.asyncio
PY = sys.executable
ESCAPE = str(Path(__file__).parent / "servers" / "escape.py")
#: the limits the sandboxed upstream gets, and what the attempts ask beyond them
LIMITS = {"cpu_seconds": 2, "memory_mb": 64, "processes": 8}
TOO_MUCH = {"allocate": {"mb": 256}, "fork": {"count": 24}, "spin": {"seconds": 3}}


def need_sandbox() -> None:
    problem = Sandbox(processes=8).problem()
    if problem is not None:
        component_missing(f"the sandbox cannot run here: {problem}")


@dataclass
class World:
    """What the upstream reaches for: a listener on this machine, a public address, a writable
    directory, a file outside it (in /var/tmp: the sandbox's /tmp is its own), a file in this
    machine's /tmp, and a key in a fake home inside the writable one (so only ``hide`` hides it)."""

    listener: socket.socket
    public: tuple[str, int] | None
    work: Path
    outside: Path
    in_tmp: Path
    key: Path

    def config(self, tmp_path: Path, sandbox: Any) -> Path:
        entry: dict[str, Any] = {"command": PY, "args": [ESCAPE]}
        if sandbox is not None:
            entry["sandbox"] = sandbox
        path = tmp_path / "mcp.json"
        path.write_text(json.dumps({"mcpServers": {"escape": entry}}))
        return path


def public_address() -> tuple[str, int] | None:
    """An address outside this machine that this process can reach (a package registry, as the
    network here may allow no other), or None when it reaches none."""
    for host in ("pypi.org", "registry.npmjs.org", "deb.debian.org"):
        try:
            address = socket.getaddrinfo(host, 443, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
            with socket.create_connection((address, 443), timeout=5):
                return address, 443
        except OSError:
            continue
    return None


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    listener = socket.create_server(("127.0.0.1", 0))  # connections complete in its backlog
    work = tmp_path / "work"
    (work / "home" / ".ssh").mkdir(parents=True)
    key = work / "home" / ".ssh" / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    try:
        with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="mcpkit-sandbox-") as elsewhere:
            yield World(listener, public_address(), work, Path(elsewhere) / "outside.txt", tmp_path / "in-tmp.txt", key)
    finally:
        listener.close()


def proxy(*args: str) -> Client:
    return Client(mcpkit_command("proxy", *args), env=pythonpath(), timeout=60)


async def attempt(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert result.get("isError") is not True, result
    return json.loads(result["content"][0]["text"])  # type: ignore[no-any-return]


async def escapes(client: Client, world: World) -> dict[str, dict[str, Any]]:
    """Every attempt but the CPU one, by name."""
    out = {
        "local network": await attempt(client, "connect", host="127.0.0.1", port=world.listener.getsockname()[1]),
        "write outside": await attempt(client, "write", path=str(world.outside)),
        "write /tmp": await attempt(client, "write", path=str(world.in_tmp)),
        "write inside": await attempt(client, "write", path=str(world.work / "inside.txt")),
        "read hidden": await attempt(client, "read", path=str(world.key)),
        "memory": await attempt(client, "allocate", **TOO_MUCH["allocate"]),
        "processes": await attempt(client, "fork", **TOO_MUCH["fork"]),
    }
    if world.public is not None:
        out["public network"] = await attempt(client, "connect", host=world.public[0], port=world.public[1])
    return out


@aio
async def test_each_escape_fails_in_the_sandbox_and_the_proxy_keeps_serving(tmp_path: Path, world: World) -> None:
    need_sandbox()
    sandbox = {"writable": [str(world.work)], "hide": [str(world.key.parent)], **LIMITS}
    config = world.config(tmp_path, sandbox)
    changed = asyncio.Event()

    def on_notification(message: dict[str, Any]) -> None:
        if message.get("method") == "notifications/tools/list_changed":
            changed.set()

    async with proxy("--config", str(config)) as client:
        client.on_notification = on_notification
        got = await escapes(client, world)
        failed = {name for name, answer in got.items() if not answer["ok"]}
        # a write to /tmp lands in the sandbox's own /tmp, an empty tmpfs gone with it
        assert failed == set(got) - {"write inside", "write /tmp"}, got
        assert not world.in_tmp.exists()
        assert "Network is unreachable" in got["local network"]["detail"] or "refused" in got["local network"]["detail"]
        assert "Read-only file system" in got["write outside"]["detail"]
        assert not world.outside.exists()
        assert (world.work / "inside.txt").read_text() == "written from the upstream\n"
        assert "MemoryError" in got["memory"]["detail"]
        assert world.key.read_text().startswith("-----BEGIN")  # hidden, not harmed
        # the proxy's config file (other upstreams' env and headers) is hidden from its upstreams
        assert not (await attempt(client, "read", path=str(config)))["ok"]

        # past its CPU seconds the upstream is killed: the call says so, and the upstream is
        # started again (tools withdrawn, then listed: list_changed)
        killed = await client.call_tool("spin", TOO_MUCH["spin"])
        assert killed.get("isError") is True, killed
        text = killed["content"][0]["text"]  # what a model reads: the reason, not only "not connected"
        assert "not connected" in text and "killed by SIGXCPU" in text and "cpu_seconds (2)" in text, text

        async def relisted() -> None:
            while True:
                changed.clear()  # before listing: a list_changed sent meanwhile is kept
                if "spin" in {tool["name"] for tool in await client.list_tools()}:
                    return
                await changed.wait()

        await asyncio.wait_for(relisted(), 60)
        again = await attempt(client, "write", path=str(world.work / "again.txt"))
        assert again["ok"], again


@aio
async def test_without_the_sandbox_the_same_attempts_succeed(tmp_path: Path, world: World) -> None:
    async with proxy("--config", str(world.config(tmp_path, None))) as client:
        got = await escapes(client, world)
        assert {name for name, answer in got.items() if not answer["ok"]} == set(), got
        assert (await attempt(client, "read", path=str(world.key)))["detail"].startswith("-----BEGIN")
        assert (await attempt(client, "spin", **TOO_MUCH["spin"]))["ok"]
    assert world.outside.exists() and world.in_tmp.exists()


@aio
async def test_the_command_line_sandboxes_the_single_upstream(tmp_path: Path, world: World) -> None:
    need_sandbox()
    async with proxy("--sandbox", "--writable", str(world.work), "--hide", str(world.key.parent),
                     "--", PY, ESCAPE) as client:
        assert not (await attempt(client, "write", path=str(world.outside)))["ok"]
        assert (await attempt(client, "write", path=str(world.work / "inside.txt")))["ok"]
        assert not (await attempt(client, "read", path=str(world.key)))["ok"]
        assert not (await attempt(client, "connect", host="127.0.0.1", port=world.listener.getsockname()[1]))["ok"]
        # no memory limit given: the allocation a limit stops goes through
        assert (await attempt(client, "allocate", **TOO_MUCH["allocate"]))["ok"]


@aio
@pytest.mark.interop
async def test_the_reference_filesystem_server_works_in_the_sandbox(node_servers: Path, tmp_path: Path) -> None:  # noqa: F811
    # a real server (node, npm's command shim) runs confined with its root directory writable
    need_sandbox()
    files = tmp_path / "files"
    files.mkdir()
    (files / "notes.txt").write_text("hello from the filesystem server\n")
    async with proxy("--sandbox", "--writable", str(files), "--processes", "64", "--memory-mb", "512",
                     "--", str(node_servers / "mcp-server-filesystem"), str(files)) as client:
        read = await client.call_tool("read_text_file", {"path": str(files / "notes.txt")})
        assert "hello from the filesystem server" in read["content"][0]["text"], read
        wrote = await client.call_tool("write_file", {"path": str(files / "new.txt"), "content": "made inside"})
        assert wrote.get("isError") is not True, wrote
        listing = await client.call_tool("list_directory", {"path": str(files)})
        assert "new.txt" in listing["content"][0]["text"], listing
    assert (files / "new.txt").read_text() == "made inside"


def run_proxy(*args: str, path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*mcpkit_command("proxy", *args)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env={**os.environ, "PATH": path})


def test_no_bubblewrap_is_one_line_and_exit_2_never_an_unconfined_upstream(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    argv = ["--sandbox", "--", PY, "-c", f"open({str(marker)!r}, 'w')"]
    done = run_proxy(*argv, path=str(tmp_path))  # a PATH without bwrap
    assert done.returncode == 2, done
    assert done.stderr.strip() == ("mcpkit proxy: cannot start the upstream: the sandbox needs 'bwrap', which is not "
                                   "on PATH; install bubblewrap (apt-get install bubblewrap)"), done.stderr
    assert not marker.exists()
    # a bwrap the kernel refuses its namespaces (no unprivileged user namespaces), as bwrap says it
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    done = run_proxy(*argv, path=f"{fake}:{os.environ['PATH']}")
    assert done.returncode == 2, done
    line = done.stderr.strip()
    assert "\n" not in line and "No permissions to creating new namespace" in line, line
    assert "enable unprivileged user namespaces" in line, line
    assert not marker.exists()


def test_the_sandbox_of_a_config_entry_is_checked_where_it_is_read(tmp_path: Path) -> None:
    def load(entry: dict[str, Any]) -> Any:
        path = tmp_path / "mcp.json"
        path.write_text(json.dumps({"mcpServers": {"s": entry}}))
        return load_mcp_servers(path)

    spec = load({"command": PY, "sandbox": {"writable": [str(tmp_path)], "memory_mb": 100}})[0]
    assert spec.sandbox.writable == (os.path.realpath(tmp_path),) and spec.sandbox.memory_mb == 100
    assert os.path.realpath(tmp_path / "mcp.json") in spec.sandbox.hide
    assert spec.options()["sandbox"] is spec.sandbox
    assert load({"command": PY, "sandbox": True})[0].sandbox == Sandbox(hide=(os.path.realpath(tmp_path / "mcp.json"),))
    assert load({"command": PY, "sandbox": False})[0].sandbox is None
    for entry, message in [
        ({"url": "https://x/mcp", "sandbox": True}, "a sandbox confines a command"),
        ({"command": PY, "sandbox": {"memory": 1}}, "unknown key(s) memory"),
        ({"command": PY, "sandbox": {"cpu_seconds": 0}}, "cpu_seconds must be a positive whole number"),
        ({"command": PY, "sandbox": {"writable": [str(tmp_path / "nope")]}}, "does not exist; create it"),
        ({"command": PY, "sandbox": {"writable": [str(tmp_path)], "hide": [str(tmp_path)]}}, "both writable and hidden"),
        ({"command": PY, "sandbox": "yes"}, "must be true, false or an object"),
    ]:
        with pytest.raises(ConfigError, match="mcpServers.s.sandbox") as caught:
            load(entry)
        assert message in str(caught.value)
    with pytest.raises(SandboxError):
        Sandbox.of({"network": "no"})


def test_hidden_paths_are_mounted_over_the_writable_ones_that_hold_them(tmp_path: Path) -> None:
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    box = Sandbox.of({"writable": [str(tmp_path / "home")], "hide": [str(tmp_path / "home" / ".ssh")]})
    assert box is not None
    argv, _ = box.wrap(["server"])
    home, ssh = str(tmp_path / "home"), str(tmp_path / "home" / ".ssh")
    assert argv.index("--bind") < argv.index(ssh) and argv[argv.index("--bind") + 1] == home
    assert argv[argv.index("--tmpfs", argv.index("--bind")) + 1] == ssh
    assert argv[-1] == "server" and "--share-net" not in argv


def test_the_docs_list_every_path_hidden_anyway() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "proxy.md").read_text()
    assert all(f"`{path}`" in docs for path in HIDDEN), [p for p in HIDDEN if f"`{p}`" not in docs]
