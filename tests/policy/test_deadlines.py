"""The timer behind sync tool timeouts, and the audit log's write-behind mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from mcpkit.policy.audit import AuditLog, read_lines
from mcpkit.policy.deadlines import Deadlines


def test_a_deadline_fires_once_and_a_cancelled_one_never():
    timer = Deadlines(tick=0.01)
    fired: list[str] = []
    done = threading.Event()
    timer.add(0.05, lambda: (fired.append("late"), done.set()))
    kept = timer.add(0.02, lambda: fired.append("cancelled"))
    assert timer.cancel(kept) is True  # it was armed: the canceller won
    assert timer.cancel(kept) is False
    assert done.wait(5)
    time.sleep(0.05)
    assert fired == ["late"]
    assert timer.pending() == 0


def test_exactly_one_of_handler_and_timer_wins_the_race():
    timer = Deadlines(tick=0.001)
    outcomes: list[str] = []
    lock = threading.Lock()
    entries = []
    for _ in range(200):
        entries.append(timer.add(0.002, lambda: (lock.acquire(), outcomes.append("timer"), lock.release())))
    time.sleep(0.0025)
    for entry in entries:
        if timer.cancel(entry):
            with lock:
                outcomes.append("handler")
    deadline = time.monotonic() + 5
    while len(outcomes) < 200 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(outcomes) == 200  # never both, never neither


def test_the_timer_parks_when_idle_and_wakes_for_a_new_deadline():
    timer = Deadlines(tick=0.01)
    first = threading.Event()
    timer.add(0.01, first.set)
    assert first.wait(5)
    time.sleep(0.1)  # idle for several ticks: parked
    assert timer._parked is True
    second = threading.Event()
    timer.add(0.01, second.set)
    assert second.wait(5)


def test_buffered_audit_lines_keep_their_time_and_reach_the_file_on_close(tmp_path):
    now = [1_700_000_000.25]
    log = AuditLog(tmp_path / "audit.log", flush_interval=60.0, clock=lambda: now[0])
    log.record_call("c1", "alice", "add", None, {"a": 1, "token": "secret-value"}, "ok", None, 0.5)
    now[0] += 10
    log.record({"correlationId": "c2", "tool": "add", "outcome": "ok"})
    assert not (tmp_path / "audit.log").exists() or (tmp_path / "audit.log").read_text() == ""
    log.close()
    lines = read_lines(tmp_path / "audit.log")
    assert [line["time"] for line in lines] == ["2023-11-14T22:13:20.250Z", "2023-11-14T22:13:30.250Z"]
    assert lines[0]["arguments"] == {"a": 1, "token": "[REDACTED]"}
    assert lines[0]["principal"] == "alice" and lines[0]["durationMs"] == 0.5


def test_buffered_audit_lines_are_written_at_interpreter_exit(tmp_path):
    path = tmp_path / "audit.log"
    code = (
        "from mcpkit.policy.audit import AuditLog\n"
        f"log = AuditLog({str(path)!r}, flush_interval=3600)\n"
        "for i in range(3):\n"
        "    log.record_call(f'c{i}', 'p', 'add', None, {'i': i}, 'ok', None, 0.1)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env={**os.environ})
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["correlationId"] for line in lines] == ["c0", "c1", "c2"]


def test_buffered_audit_rotates_between_whole_lines(tmp_path):
    log = AuditLog(tmp_path / "audit.log", flush_interval=60.0, max_bytes=600, backups=2, keep_recent=0)
    for i in range(20):
        log.record_call(f"id{i:02d}", "p", "add", None, {"i": i}, "ok", None, 0.1)
    log.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["audit.log", "audit.log.1", "audit.log.2"]
    kept = [line["correlationId"] for name in reversed(files) for line in read_lines(tmp_path / name)]
    assert kept == [f"id{i:02d}" for i in range(20 - len(kept), 20)]  # the newest, in order
    assert all(os.path.getsize(tmp_path / name) <= 600 for name in files)
