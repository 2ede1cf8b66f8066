"""examples/workspace.py end to end: `mcpkit serve examples/workspace.py --root DIR` over stdio.

The server runs as a subprocess under the wire tap (its traffic is schema-checked), with a
real audit file, a real sandbox and a real editor bridge on a Unix socket.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_stdio import ServerProcess, serve  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "workspace.py")
SECRETS = ["ghp_" + "A" * 36, "hunter2-very-secret", "sk-ant-api03-" + "x" * 40, "AKIA" + "ABCDEFGHIJKLMNOP"]


@pytest.fixture
def project() -> Iterator[Path]:
    # short: a Unix socket path inside it must stay under ~100 characters
    base = Path(tempfile.mkdtemp(prefix="ws-", dir="/tmp"))
    root = base / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text("def main():\n    print('hello')\n")
    (root / "README.md").write_text("# demo\nhello world\n")
    (base / "outside.txt").write_text("OUTSIDE-CONTENT")
    os.symlink(base / "outside.txt", root / "escape.txt")
    os.symlink(base, root / "up")
    yield root
    shutil.rmtree(base, ignore_errors=True)


def start(serve: Any, root: Path, *extra: str) -> ServerProcess:  # noqa: F811
    proc: ServerProcess = serve(EXAMPLE, "--root", str(root), *extra)
    proc.initialize()
    return proc


def tools(proc: ServerProcess) -> dict[str, Any]:
    return {t["name"]: t for t in proc.call("tools/list")["result"]["tools"]}


def call(proc: ServerProcess, name: str, arguments: dict[str, Any], others: list[Any] | None = None) -> Any:
    rid = proc.request("tools/call", {"name": name, "arguments": arguments})
    return proc.answer(rid, others=others if others is not None else [])["result"]


def env_of(result: dict[str, Any]) -> dict[str, Any]:
    env: dict[str, Any] = result["structuredContent"]
    return env


def audit_lines(root: Path) -> list[dict[str, Any]]:
    path = root / ".mcpkit" / "audit.log"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.req("TL-11", "TL-14", "TL-07")
def test_the_workspace_lists_gates_and_serves_files(serve, project):  # noqa: F811
    proc = start(serve, project)
    listed = tools(proc)
    assert sorted(listed) == ["batch", "files", "list_files", "move", "read_file", "search", "write_file"]
    assert listed["files"]["inputSchema"]["properties"]["action"]["enum"] == ["list", "read", "search", "move"]
    assert listed["read_file"]["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    assert listed["read_file"]["outputSchema"]["required"] == ["ok", "summary", "result", "error", "meta"]

    listing = env_of(call(proc, "list_files", {"recursive": True}))
    assert [e["path"] for e in listing["result"]] == ["README.md", "src", "src/main.py"]  # escapes left out
    assert env_of(call(proc, "read_file", {"path": "README.md"}))["result"] == "# demo\nhello world\n"
    found = env_of(call(proc, "files", {"action": "search", "query": "hello"}))
    assert [(m["path"], m["line"]) for m in found["result"]] == [("README.md", 2), ("src/main.py", 2)]
    assert found["meta"]["action"] == "search"

    created = env_of(call(proc, "write_file", {"path": "notes/todo.txt", "content": "x"}))
    assert created["summary"] == "created notes/todo.txt" and (project / "notes" / "todo.txt").read_text() == "x"
    again = call(proc, "write_file", {"path": "notes/todo.txt", "content": "y"})
    assert again["isError"] is True and env_of(again)["error"]["code"] == "E_PERMISSION_DENIED"
    moved = env_of(call(proc, "move", {"source": "notes/todo.txt", "destination": "done.txt"}))
    assert moved["result"] == {"path": "done.txt", "kind": "file", "size": 1}

    for name, args in (("read_file", {"path": "../outside.txt"}), ("read_file", {"path": "escape.txt"}),
                       ("read_file", {"path": "up/outside.txt"}), ("list_files", {"path": "up"}),
                       ("write_file", {"path": "up/new.txt", "content": "z"}),
                       ("move", {"source": "done.txt", "destination": "../stolen.txt"}),
                       ("read_file", {"path": ".mcpkit/audit.log"})):
        result = call(proc, name, args)
        assert result["isError"] is True, (name, args)
        assert env_of(result)["error"]["code"] == "E_PERMISSION_DENIED", (name, args)
        assert "OUTSIDE-CONTENT" not in json.dumps(result)
    assert not (project.parent / "stolen.txt").exists() and not (project.parent / "new.txt").exists()

    # destructive operations are off by default: hidden above, refused by name and through batch
    (project / "victim.txt").write_text("keep me")
    for name, args in (("delete", {"path": "victim.txt"}),
                       ("files", {"action": "delete", "path": "victim.txt"}),
                       ("files", {"action": "write", "path": "victim.txt", "content": "", "overwrite": True}),
                       ("batch", {"calls": [{"name": "delete", "arguments": {"path": "victim.txt"}}]})):
        result = call(proc, name, args)
        inner = env_of(result)["result"][0] if name == "batch" else env_of(result)
        assert inner["ok"] is False and inner["error"]["code"] == "E_PERMISSION_DENIED", name
    assert (project / "victim.txt").read_text() == "keep me"
    assert proc.finish() == 0

    lines = audit_lines(project)
    assert all(set(line) >= {"time", "correlationId", "principal", "tool", "action", "arguments", "outcome",
                             "code", "durationMs"} for line in lines)
    batch_line = next(line for line in lines if line["tool"] == "batch")
    nested = [line for line in lines if line.get("parentCorrelationId") == batch_line["correlationId"]]
    assert [(n["tool"], n["outcome"], n["code"]) for n in nested] == [("delete", "denied", "E_PERMISSION_DENIED")]


@pytest.mark.req("TL-11")
def test_read_only_and_destructive_switches(serve, project):  # noqa: F811
    reader = start(serve, project, "--read-only")
    assert sorted(tools(reader)) == ["files", "list_files", "read_file", "search"]
    refused = call(reader, "write_file", {"path": "new.txt", "content": "x"})
    assert env_of(refused)["error"]["code"] == "E_PERMISSION_DENIED"
    assert "read-only mode" in env_of(refused)["error"]["message"]
    assert not (project / "new.txt").exists()
    reader.finish()

    os.environ["MCPKIT_ALLOW_DESTRUCTIVE"] = "1"
    try:
        writer = start(serve, project)
    finally:
        del os.environ["MCPKIT_ALLOW_DESTRUCTIVE"]
    assert "delete" in tools(writer)
    (project / "victim.txt").write_text("bye")
    assert env_of(call(writer, "delete", {"path": "victim.txt"}))["summary"] == "deleted victim.txt"
    assert not (project / "victim.txt").exists()
    writer.finish()


@pytest.mark.req("TL-11")
def test_secrets_in_arguments_reach_neither_the_audit_file_nor_stderr(serve, project):  # noqa: F811
    proc = start(serve, project)
    secret_text = (f"api_key={SECRETS[1]}\nAuthorization: Bearer {SECRETS[0]}\n"
                   f"key {SECRETS[2]} aws {SECRETS[3]}")
    call(proc, "write_file", {"path": "creds.txt", "content": secret_text})
    call(proc, "search", {"query": SECRETS[0]})
    call(proc, "batch", {"calls": [{"name": "write_file", "arguments": {"path": "x.txt", "password": SECRETS[1]}},
                                   {"name": "nope", "arguments": {"token": SECRETS[2]}}]})
    call(proc, "read_file", {"path": f"{SECRETS[3]}/../../../etc"})
    assert proc.finish() == 0
    audit = (project / ".mcpkit" / "audit.log").read_text()
    stderr = proc.stderr()
    assert len(audit.splitlines()) == 6  # write, search, batch and its two calls, read
    for secret in SECRETS:
        assert secret not in audit, secret
        assert secret not in stderr, secret
    assert "[REDACTED]" in audit


class FakeEditor:
    """An editor plugin on a Unix socket: answers ping and open, and can die and come back."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.opened: list[dict[str, Any]] = []
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []

    def start(self) -> None:
        if os.path.exists(self.path):
            os.unlink(self.path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        listener.listen()
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as stream:
            for line in stream:
                message = json.loads(line)
                if message["method"] == "open":
                    self.opened.append(message)
                stream.write(b'{"ok":true}\n')
                stream.flush()

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
        for conn in self._conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._conns.clear()
        os.unlink(self.path)


class BatchingEditor(FakeEditor):
    """An editor that answers what arrived together in one write, as a busy plugin's event loop
    does: two requests in flight on one connection get their replies in one chunk."""

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            pending = b""
            while True:
                try:
                    data = conn.recv(4096)
                except OSError:
                    return
                if not data:
                    return
                pending += data
                conn.settimeout(0.03)  # gather what else arrives at about the same time
                try:
                    while True:
                        more = conn.recv(4096)
                        if not more:
                            break
                        pending += more
                except (TimeoutError, OSError):
                    pass
                conn.settimeout(None)
                lines, newline, pending = pending.rpartition(b"\n")
                if not newline:  # no whole line yet
                    pending = lines + pending
                    continue
                for line in lines.split(b"\n"):
                    message = json.loads(line)
                    if message["method"] == "open":
                        self.opened.append(message)
                try:
                    conn.sendall(b'{"ok":true}\n' * len(lines.split(b"\n")))
                except OSError:  # stopped meanwhile
                    return


def wait_for_list_changed(proc: ServerProcess, timeout: float = 20.0) -> None:
    message = proc.recv(timeout)
    assert message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, message


@pytest.mark.req("TL-13")
def test_the_editor_bridge_dies_and_returns(serve, project, monkeypatch):  # noqa: F811
    sock = str(project.parent / "editor.sock")
    monkeypatch.setenv("MCPKIT_EDITOR_SOCKET", sock)
    monkeypatch.setenv("MCPKIT_EDITOR_PROBE_INTERVAL", "0.1")
    monkeypatch.setenv("MCPKIT_EDITOR_BACKOFF_MAX", "0.2")
    editor = FakeEditor(sock)
    proc = start(serve, project)
    assert "open_in_editor" not in tools(proc)
    early = call(proc, "open_in_editor", {"path": "README.md"})
    assert env_of(early)["error"]["code"] == "E_NOT_CONNECTED" and env_of(early)["error"]["retryable"] is True

    editor.start()
    wait_for_list_changed(proc)
    assert "open_in_editor" in tools(proc)
    assert env_of(call(proc, "open_in_editor", {"path": "src/main.py", "line": 2}))["ok"] is True
    assert editor.opened == [{"method": "open", "path": str((project / "src" / "main.py").resolve()), "line": 2}]

    editor.stop()
    wait_for_list_changed(proc)
    assert "open_in_editor" not in tools(proc)
    between = call(proc, "open_in_editor", {"path": "README.md"})
    assert env_of(between)["error"]["code"] == "E_NOT_CONNECTED"

    editor.start()
    wait_for_list_changed(proc)
    assert "open_in_editor" in tools(proc)
    assert env_of(call(proc, "open_in_editor", {"path": "README.md"}))["ok"] is True
    editor.stop()
    proc.finish()


def test_probes_and_calls_share_the_editor_connection_one_exchange_at_a_time(serve, project, monkeypatch):  # noqa: F811
    # the probe (bridge thread) and a call (worker thread) wrote on the one socket at once: one of
    # them read both replies, so the probe saw garbage (the bridge went down, tools hidden) or
    # the call did ("The editor refused to open the file"), and the other waited out its timeout
    sock = str(project.parent / "editor.sock")
    monkeypatch.setenv("MCPKIT_EDITOR_SOCKET", sock)
    monkeypatch.setenv("MCPKIT_EDITOR_PROBE_INTERVAL", "0.01")
    editor = BatchingEditor(sock)
    proc = start(serve, project)
    editor.start()
    try:
        wait_for_list_changed(proc)
        assert "open_in_editor" in tools(proc)
        others: list[Any] = []
        outcomes = [env_of(call(proc, "open_in_editor", {"path": "README.md"}, others)) for _ in range(40)]
        assert [o for o in outcomes if not o["ok"]] == []
        assert len(editor.opened) == 40
        # the bridge never went down meanwhile: no tools/list_changed
        assert [m for m in others if m.get("method") == "notifications/tools/list_changed"] == []
    finally:
        editor.stop()
        proc.finish()


@pytest.mark.req("TL-11", "TL-07")
def test_the_policy_serves_2026_07_28_requests_too(wire, project):
    import subprocess

    from tests.conftest import mcpkit_command

    version = "2026-07-28"
    meta = {"io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": {}}

    def req(rid: int, method: str, params: dict[str, Any]) -> str:
        return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta}})

    lines = [
        req(1, "tools/list", {}),
        req(2, "tools/call", {"name": "read_file", "arguments": {"path": "README.md"}}),
        req(3, "tools/call", {"name": "delete", "arguments": {"path": "README.md"}}),
        req(4, "tools/call", {"name": "files", "arguments": {"action": "read", "path": "../outside.txt"}}),
    ]
    argv = wire.command(mcpkit_command("serve", EXAMPLE, "--root", str(project)))
    done = subprocess.run(argv, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    out = {m["id"]: m["result"] for m in map(json.loads, done.stdout.splitlines()) if "id" in m}
    assert "delete" not in [t["name"] for t in out[1]["tools"]]
    assert out[2]["resultType"] == "complete" and env_of(out[2])["result"] == "# demo\nhello world\n"
    assert env_of(out[3])["error"]["code"] == "E_PERMISSION_DENIED"
    assert env_of(out[4])["error"]["code"] == "E_PERMISSION_DENIED" and env_of(out[4])["meta"]["action"] == "read"
    assert (project / "README.md").exists()
