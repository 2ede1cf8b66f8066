"""The audit trail: line format, redaction, rotation, permissions, stdout refusal, threads."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from mcpkit.policy.audit import STDOUT_NAMES, AuditLog, read_lines
from mcpkit.policy.redact import Redactor

GHP = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"
T0 = 1_700_000_000.25  # 2023-11-14T22:13:20.250Z


def entry(n: int = 0, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "correlationId": f"c-{n}",
        "principal": "alice",
        "tool": "files.read",
        "action": None,
        "arguments": {"path": "/tmp/a", "n": n},
        "outcome": "ok",
        "code": None,
        "durationMs": 1.234,
    }
    base.update(extra)
    return base


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.req("TL-11", "LG-05")
def test_line_format_and_redaction(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path, clock=lambda: T0) as log:
        log.record(entry(1, arguments={"path": Path("/srv/x"), "api_key": "k-123", "q": f"use {GHP}"}))
        log.record(entry(2, outcome="error", code="E_INTERNAL",
                         message="upstream said: password=hunter2", principal={"sub": "bob", "token": "t"}))
        log.record({"time": "2020-01-01T00:00:00.000Z", "tool": "x"})
    raw = path.read_bytes()
    assert GHP.encode() not in raw and b"hunter2" not in raw and b"k-123" not in raw
    lines = raw.decode().splitlines()
    assert lines[0] == (
        '{"time":"2023-11-14T22:13:20.250Z","correlationId":"c-1","principal":"alice","tool":"files.read",'
        '"action":null,"arguments":{"path":"/srv/x","api_key":"[REDACTED]","q":"use [REDACTED]"},'
        '"outcome":"ok","code":null,"durationMs":1.234}'
    )
    second, third = read_lines(path)[1:]
    assert list(second) == ["time", "correlationId", "principal", "tool", "action", "arguments", "outcome", "code",
                            "durationMs", "message"]
    assert second["message"] == "upstream said: password=[REDACTED]"
    assert second["principal"] == {"sub": "bob", "token": "[REDACTED]"}
    assert third == {"time": "2020-01-01T00:00:00.000Z", "tool": "x"}


def test_one_line_per_record_whatever_the_text(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    with AuditLog(path) as log:
        log.record(entry(arguments={"text": "line1\nline2\r\n\u2028é", "big": 2**70, "s": {1, 2}}))
    (line,) = path.read_bytes().splitlines()
    assert read_lines(path)[0]["arguments"] == {"text": "line1\nline2\r\n\u2028é", "big": 2**70, "s": [1, 2]}
    assert line.endswith(b"}")


def test_timestamp_milliseconds() -> None:
    log = AuditLog("/nonexistent-dir-never-opened/x.log", clock=lambda: 0.9999)
    assert log._now() == "1970-01-01T00:00:00.999Z"
    log._clock = lambda: 86_400 * 366 + 0.004
    assert log._now() == "1971-01-02T00:00:00.004Z"


@pytest.mark.req("TL-11")
def test_custom_redactor(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    with AuditLog(path, redactor=Redactor(keys=("pin",), mask="<x>")) as log:
        log.record({"arguments": {"pin": 1234, "password": "visible"}})
    assert read_lines(path)[0]["arguments"] == {"pin": "<x>", "password": "visible"}


# -- files ------------------------------------------------------------------------------------


@pytest.mark.req("TL-11")
def test_permissions(tmp_path: Path) -> None:
    directory = tmp_path / "state" / "audit"
    path = directory / "audit.jsonl"
    log = AuditLog(path, max_bytes=300, backups=2, keep_recent=0)  # drop backups however recent
    assert not directory.exists()  # opened lazily
    for n in range(10):
        log.record(entry(n))
    log.close()
    assert mode(directory) == 0o700
    files = sorted(directory.iterdir())
    assert [f.name for f in files] == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    assert {mode(f) for f in files} == {0o600}


def test_existing_file_is_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_bytes(b'{"old":1}\n')
    with AuditLog(path) as log:
        log.record({"new": 2})
    log.record({"again": 3})  # reopened after close
    log.close()
    assert [list(e)[1] for e in read_lines(path)[1:]] == ["new", "again"]
    assert read_lines(path)[0] == {"old": 1}


@pytest.mark.req("TL-11")
def test_rotation(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    probe = tmp_path / "probe.jsonl"
    with AuditLog(probe, clock=lambda: T0) as log:
        log.record(entry(100))
    size = probe.stat().st_size  # every record below has this size (ids 100..199)
    with AuditLog(path, max_bytes=3 * size + size // 2, backups=3, clock=lambda: T0, keep_recent=0) as log:
        for n in range(100, 200):
            log.record(entry(n))
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("audit"))
    assert names == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2", "audit.jsonl.3"]
    ids: list[int] = []
    for name in ["audit.jsonl.3", "audit.jsonl.2", "audit.jsonl.1", "audit.jsonl"]:
        data = (tmp_path / name).read_bytes()
        assert data.endswith(b"\n") and len(data) <= 3 * size + size // 2
        ids += [e["arguments"]["n"] for e in read_lines(tmp_path / name)]
    # 3 records a file; 100 records → 34 files written, the newest 4 kept, the oldest dropped
    assert ids == list(range(190, 200))
    assert [len(read_lines(tmp_path / n)) for n in names] == [1, 3, 3, 3]


def test_rotation_without_backups_truncates(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    with AuditLog(path, max_bytes=500, backups=0) as log:
        for n in range(20):
            log.record(entry(n))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.log"]
    kept = [e["arguments"]["n"] for e in read_lines(path)]
    assert kept and kept == list(range(20 - len(kept), 20))
    assert path.stat().st_size <= 500


def test_rotation_of_an_existing_full_file_and_oversized_lines(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_bytes(b'{"old":1}\n' * 10)
    with AuditLog(path, max_bytes=50, backups=1) as log:
        log.record({"big": "x" * 200})  # larger than max_bytes: alone in a fresh file
        log.record({"next": 1})
    assert [e["big"] for e in read_lines(str(path) + ".1")] == ["x" * 200]
    assert [list(e)[1] for e in read_lines(path)] == ["next"]


def test_max_bytes_zero_never_rotates(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    with AuditLog(path, max_bytes=0) as log:
        for n in range(50):
            log.record(entry(n))
    assert len(read_lines(path)) == 50 and sorted(p.name for p in tmp_path.iterdir()) == ["a.log"]
    with pytest.raises(ValueError, match=">= 0"):
        AuditLog(path, backups=-1)


def test_fsync(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "a.log", fsync=True) as log:
        log.record(entry())
    assert len(read_lines(tmp_path / "a.log")) == 1


@pytest.mark.req("TL-11")
@pytest.mark.parametrize("max_bytes", [0, 40_000])
def test_threads(tmp_path: Path, max_bytes: int) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, max_bytes=max_bytes, backups=100)

    def work(t: int) -> None:
        for i in range(500):
            log.record(entry(arguments={"t": t, "i": i, "pad": "x" * (i % 7)}))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log.close()
    files = sorted(tmp_path.iterdir())
    if max_bytes:
        assert len(files) > 5 and all(f.stat().st_size <= max_bytes for f in files)
    seen = [(e["arguments"]["t"], e["arguments"]["i"]) for f in files for e in read_lines(f)]
    assert len(seen) == 4000
    assert set(seen) == {(t, i) for t in range(8) for i in range(500)}


# -- never stdout -----------------------------------------------------------------------------


@pytest.mark.req("ST-02")
@pytest.mark.parametrize("name", sorted(STDOUT_NAMES))
def test_stdout_names_refused(name: str) -> None:
    with pytest.raises(ValueError, match="ST-02"):
        AuditLog(name)


@pytest.mark.req("ST-02")
def test_wire_descriptor_refused(tmp_path: Path) -> None:
    path = tmp_path / "wire"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with pytest.raises(ValueError, match="stdout"):
            AuditLog(path, wire_fds=(1, fd))
        os.unlink(path)  # created again at open: caught there too
        late = AuditLog(path, wire_fds=(fd,))
        os.close(fd)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        late._wire_fds = (fd,)
        with pytest.raises(ValueError, match="ST-02"):
            late.record(entry())
        assert path.read_bytes() == b""
    finally:
        os.close(fd)


_CHILD = textwrap.dedent("""
    import os, sys
    from mcpkit.policy.audit import AuditLog
    target, other, both = sys.argv[1:4]
    fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o600)
    os.dup2(fd, 1)                       # stdout is now the file `target`
    results = []
    for path in (target, "/dev/stdout", "/proc/self/fd/1", other):
        try:
            AuditLog(path).record({"tool": "t"})
            results.append("ok")
        except ValueError as exc:
            results.append("refused" if "ST-02" in str(exc) else repr(exc))
    # a stdio transport moves stdout onto stderr: that file is then the log's to use (ST-03)
    fd = os.open(both, os.O_WRONLY | os.O_CREAT, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    try:
        AuditLog(both).record({"tool": "t"})
        results.append("ok")
    except ValueError:
        results.append("refused")
    with open(other + ".result", "w") as f:
        f.write(",".join(results))
    """)


@pytest.mark.req("ST-02")
def test_stdout_file_refused_in_a_child(tmp_path: Path) -> None:
    target, other, both = tmp_path / "stdout.txt", tmp_path / "audit.jsonl", tmp_path / "both.txt"
    subprocess.run([sys.executable, "-c", _CHILD, str(target), str(other), str(both)], check=True, timeout=30,
                   capture_output=True)
    assert (tmp_path / "audit.jsonl.result").read_text() == "refused,refused,refused,ok,ok"
    assert target.read_bytes() == b""
    assert len(read_lines(other)) == 1 and len(read_lines(both)) == 1


def test_devnull_allowed() -> None:
    with AuditLog(os.devnull) as log:
        log.record(entry())


# -- configuration ----------------------------------------------------------------------------


def test_from_env(tmp_path: Path) -> None:
    assert AuditLog.from_env(environ={}) is None
    assert AuditLog.from_env(environ={"MCPKIT_AUDIT_LOG": ""}) is None
    fallback = AuditLog.from_env(tmp_path / "d.log", environ={})
    assert fallback is not None and fallback.path == str(tmp_path / "d.log")
    assert (fallback.max_bytes, fallback.backups) == (10 * 1024 * 1024, 5)
    env = {"MCPKIT_AUDIT_LOG": str(tmp_path / "e.log"), "MCPKIT_AUDIT_MAX_BYTES": "1_000", "MCPKIT_AUDIT_BACKUPS": "2"}
    log = AuditLog.from_env(tmp_path / "d.log", environ=env, fsync=True)
    assert log is not None
    assert (log.path, log.max_bytes, log.backups, log.fsync) == (str(tmp_path / "e.log"), 1000, 2, True)
    with pytest.raises(ValueError, match="MCPKIT_AUDIT_BACKUPS='many' is not a whole number"):
        AuditLog.from_env(environ={**env, "MCPKIT_AUDIT_BACKUPS": "many"})
    with pytest.raises(ValueError, match="ST-02"):
        AuditLog.from_env(environ={"MCPKIT_AUDIT_LOG": "-"})
    with pytest.raises(ValueError, match="empty"):
        AuditLog("")


def test_from_env_reads_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPKIT_AUDIT_LOG", str(tmp_path / "x.log"))
    monkeypatch.delenv("MCPKIT_AUDIT_MAX_BYTES", raising=False)
    log = AuditLog.from_env()
    assert log is not None and log.path == str(tmp_path / "x.log")


class _Secretive:
    def __json__(self) -> dict[str, str]:
        return {"password": "hunter2-in-json"}


@pytest.mark.req("TL-11")
@pytest.mark.parametrize("flush_interval", [0.0, 60.0])
def test_secrets_inside_sets_and_json_objects_are_redacted(tmp_path: Path, flush_interval: float) -> None:
    # A set or an object with __json__ is made plain JSON before it is redacted: written as it
    # came, its contents would escape the redactor, which walks dicts, lists and strings.
    path = tmp_path / "a.log"
    with AuditLog(path, flush_interval=flush_interval) as log:
        log.record_call("c-1", "alice", "t", None, {"s": {f"Bearer {GHP}"}, "o": _Secretive(), "n": 2**70},
                        "ok", None, 1.0)
        log.record(entry(2, arguments={"s": frozenset([f"token {GHP}"]), "o": _Secretive()}))
    raw = path.read_bytes()
    assert GHP.encode() not in raw and b"hunter2" not in raw, raw
    first, second = read_lines(path)
    assert first["arguments"]["n"] == 2**70  # exact, not a float
    assert first["arguments"]["o"] == {"password": "[REDACTED]"}
    assert second["arguments"]["o"] == {"password": "[REDACTED]"}


@pytest.mark.req("TL-11")
def test_a_call_line_that_cannot_be_made_does_not_take_its_batch_along(tmp_path: Path) -> None:
    # Buffered lines are made by the flusher in bulk: one unwritable entry (a lone surrogate, as
    # os.fsdecode makes of a file name that is not UTF-8) must not lose the others queued with it.
    path = tmp_path / "a.log"
    with AuditLog(path, flush_interval=60.0) as log:
        for n in range(3):
            log.record_call(f"c-{n}", "alice", "add", None, {"a": n}, "ok", None, 1.0)
        log.record_call("c-bad", "alice", "show", None, {"name": "caf\udcff"}, "ok", None, 1.0)
        for n in range(3, 6):
            log.record_call(f"c-{n}", "alice", "add", None, {"a": n}, "ok", None, float("nan"))
    ids = [line["correlationId"] for line in read_lines(path)]
    assert ids == ["c-0", "c-1", "c-2", "c-bad", "c-3", "c-4", "c-5"]


def test_a_caller_chosen_name_of_megabytes_is_cut_in_the_line_and_not_cached(tmp_path: Path) -> None:
    """An unknown tool's name is the caller's: a line keeps its start (redacted), not 500 KB, and
    the names cache does not hold it (4,096 such names would be 2 GB)."""
    log = AuditLog(tmp_path / "a.log")
    name = "ghp_" + "A" * 36 + "z" * 500_000
    log.record_call("c1", "anonymous", name, None, {}, "denied", "E_NOT_FOUND", 0.1)
    log.flush()
    (line,) = read_lines(tmp_path / "a.log")
    assert line["tool"].endswith(f"…[{len(name)} characters]") and len(line["tool"]) < 400
    assert "ghp_AAAA" not in line["tool"] and "[REDACTED]" in line["tool"]
    assert name not in log._names and len((tmp_path / "a.log").read_bytes()) < 2_000
