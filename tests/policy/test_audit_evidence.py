"""A caller cannot wipe the audit record of what it did (hostile review item 11): ~75 calls of
~950 KB each, within the rate limit, used to rotate the earlier lines out of the log and all its
backups. Arguments are now capped per line (size, sha256, preview kept) and rotation keeps
recent backups through a burst."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from mcpkit import Server, _json
from mcpkit.policy import AuditLog, Policy
from mcpkit.policy.audit import read_lines
from tests.harness import connect

LARGE = 950_000


def all_lines(path: Path) -> list[dict]:
    files = sorted(path.parent.glob(path.name + "*"), key=lambda p: int(p.suffix[1:]) if p.suffix[1:].isdigit()
                   else 0, reverse=True)
    return [line for f in files for line in read_lines(f)]


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_a_burst_of_large_calls_does_not_rotate_the_evidence_away(wire, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    policy = Policy.secure(root=root, environ={})
    server = Server("audited", policy=policy)

    @server.tool(read_only=True, open_world=False)
    def note(text: str) -> int:
        return len(text)

    async with connect(server, wire, "2025-11-25") as client:
        first = await client.request("tools/call", {"name": "note", "arguments": {"text": "the act to hide"}})
        assert not first.get("isError")
        for i in range(75):
            result = await client.request("tools/call", {"name": "note", "arguments": {"text": str(i % 10) * LARGE}})
            assert not result.get("isError"), result
    policy.audit.close()
    log = root / ".mcpkit" / "audit.log"
    lines = all_lines(log)
    assert lines[0]["arguments"] == {"text": "the act to hide"}  # still there, first
    assert len(lines) == 76
    big = lines[1]
    assert big["arguments"] is None
    original = _json.dumps({"text": "0" * LARGE})
    assert big["argumentsTruncated"]["bytes"] == len(original)
    assert big["argumentsTruncated"]["sha256"] == hashlib.sha256(original).hexdigest()
    assert big["argumentsTruncated"]["preview"].startswith('{"text":"000')
    total = sum(f.stat().st_size for f in log.parent.iterdir() if f.name.startswith("audit.log"))
    assert total < 76 * 8192  # a line costs kilobytes, whatever the arguments


def test_rotation_keeps_recent_backups_beyond_the_count_then_drops_old_ones(tmp_path):
    path = tmp_path / "audit.log"
    with AuditLog(path, max_bytes=200, backups=2, max_backups=6) as log:
        for n in range(12):
            log.record({"n": n, "pad": "x" * 150})
    kept = [line["n"] for line in all_lines(path)]
    assert len(kept) == 7 and kept == list(range(5, 12))  # 6 backups and the live file: the cap
    old = time.time() - 7200
    for f in tmp_path.iterdir():
        if f.name != "audit.log":
            os.utime(f, (old, old))  # two hours later: those backups are no longer recent
    with AuditLog(path, max_bytes=200, backups=2, max_backups=6) as log:
        log.record({"n": 12, "pad": "x" * 150})
    assert sorted(f.name for f in tmp_path.iterdir()) == ["audit.log", "audit.log.1", "audit.log.2"]
    assert [line["n"] for line in all_lines(path)] == [10, 11, 12]


def test_small_arguments_are_kept_whole_and_the_cap_is_configurable(tmp_path):
    path = tmp_path / "audit.log"
    with AuditLog(path, max_argument_bytes=64) as log:
        log.record_call("c1", "p", "t", None, {"a": 1}, "ok", None, 0.1)
        log.record_call("c2", "p", "t", None, {"a": "y" * 100, "password": "hunter2hunter2"}, "ok", None, 0.1)
        log.record({"tool": "t", "arguments": {"b": "z" * 100}})
    first, second, third = read_lines(path)
    assert first["arguments"] == {"a": 1} and "argumentsTruncated" not in first
    assert second["arguments"] is None and second["argumentsTruncated"]["bytes"] > 64
    assert "hunter2" not in path.read_text()  # the preview and the hash are of the redacted form
    assert third["arguments"] is None and third["argumentsTruncated"]["bytes"] == len('{"b":"' + "z" * 100 + '"}')
    env = AuditLog.from_env(environ={"MCPKIT_AUDIT_LOG": str(path), "MCPKIT_AUDIT_MAX_ARGUMENT_BYTES": "10",
                                     "MCPKIT_AUDIT_KEEP_RECENT": "60", "MCPKIT_AUDIT_MAX_BACKUPS": "9"})
    assert env is not None and (env.max_argument_bytes, env.keep_recent, env.max_backups) == (10, 60, 9)
