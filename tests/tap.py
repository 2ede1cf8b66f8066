#!/usr/bin/env python3
"""Relay a stdio program's traffic unchanged and record every line of it.

    python tests/tap.py LOGFILE -- CMD [ARGS...]

Spawns CMD and relays, line by line and byte for byte, this process's stdin to CMD's stdin and
CMD's stdout to this process's stdout, flushing after every line. CMD's stderr is inherited.
Every relayed line is appended to LOGFILE as one JSON object per line::

    {"dir": "c2s", "line": "<the line, without its \\n, decoded as UTF-8 with errors=replace>"}
    {"dir": "s2c", "line": "..."}

A line is logged before it is passed on, so the log never shows an answer before its request.
When this process's stdin reaches EOF it closes CMD's stdin (it does not kill CMD), so CMD can
finish; when CMD exits, this process exits with CMD's exit code (128+N if CMD died of signal N).
SIGTERM, SIGINT and SIGHUP are forwarded to CMD. ``tests/wire.py`` reads the log
(``WireLog``, ``check_wire_log``). Standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from typing import BinaryIO

USAGE = "usage: python tests/tap.py LOGFILE -- CMD [ARGS...]"


class _Log:
    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()

    def write(self, direction: str, line: bytes) -> None:
        if line.endswith(b"\n"):
            line = line[:-1]
        record = json.dumps(
            {"dir": direction, "line": line.decode("utf-8", errors="replace")}, ensure_ascii=False
        )
        data = (record + "\n").encode("utf-8")
        with self._lock:
            while data:
                written = os.write(self._fd, data)
                data = data[written:]


def _pump_stdin(source: BinaryIO, child_stdin: BinaryIO, log: _Log) -> None:
    try:
        while True:
            line = source.readline()
            if not line:
                break
            log.write("c2s", line)
            try:
                child_stdin.write(line)
                child_stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                break  # the child closed its stdin or exited
    finally:
        try:
            child_stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass


def _pump_stdout(child_stdout: BinaryIO, sink: BinaryIO, log: _Log) -> None:
    sink_ok = True
    while True:
        line = child_stdout.readline()
        if not line:
            break
        log.write("s2c", line)
        if sink_ok:
            try:
                sink.write(line)
                sink.flush()
            except (BrokenPipeError, OSError, ValueError):
                sink_ok = False  # nobody reads us any more; keep draining the child


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(USAGE, file=sys.stderr)
        return 2
    logfile, rest = argv[0], argv[1:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    if not rest:
        print(USAGE, file=sys.stderr)
        return 2
    log = _Log(logfile)
    try:
        proc = subprocess.Popen(rest, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)
    except OSError as exc:
        print(f"tap: cannot start {rest[0]!r}: {exc}", file=sys.stderr)
        return 127

    def forward(signum: int, _frame: object) -> None:
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass

    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), forward)

    assert proc.stdin is not None and proc.stdout is not None
    threading.Thread(
        target=_pump_stdin, args=(sys.stdin.buffer, proc.stdin, log), name="tap-c2s", daemon=True
    ).start()
    out = threading.Thread(
        target=_pump_stdout, args=(proc.stdout, sys.stdout.buffer, log), name="tap-s2c", daemon=True
    )
    out.start()
    code = proc.wait()
    # The child is gone; take what is left in the pipe (a grandchild holding it open is not
    # waited for long).
    out.join(timeout=5.0)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    status = main(sys.argv[1:])
    try:
        sys.stdout.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass
    # os._exit: the stdin thread may still be blocked reading our stdin; a normal interpreter
    # shutdown could then abort on the stdin buffer's lock.
    os._exit(status)
