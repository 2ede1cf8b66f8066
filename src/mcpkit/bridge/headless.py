"""Headless runs: a tool binary (``godot --headless``, a linter, a build) run for one tool call.

    result = await run_tool(["godot3-server", "--path", str(project.root), "-s", "res://check.gd"],
                            timeout=60, gate="ALLOW_EXTERNAL_TOOLS")
    result.exit_code, result.json_lines, result.stdout, result.truncated

Running programs on a model's behalf is powerful, so it is off unless the operator turns it on
(the ``gate`` environment variable, ``ALLOW_EXTERNAL_TOOLS=1`` by default; TL-11). The argv is a
list (no shell, so no injection through arguments); stdin is empty; the child runs in its own
process group, killed whole on timeout and after exit (so a grandchild cannot linger holding
the pipes); stdout and stderr are each kept up to ``max_output`` bytes (the rest is read and
dropped, the child is never blocked on a full pipe); stdout lines that are JSON objects or
arrays are parsed into ``json_lines``, which is how engines report structured results.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..policy.gates import env_flag
from ..protocol.errors import E_NOT_FOUND, E_PERMISSION_DENIED, E_SCHEMA_VALIDATION, ToolError

__all__ = ["RunResult", "run_tool"]

_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
_DRAIN = 5.0  # seconds to read what is left once the group is gone


@dataclass
class RunResult:
    """What a run produced. ``exit_code`` is None when it was killed for its timeout."""

    argv: list[str]
    exit_code: int | None
    timed_out: bool
    duration_ms: float
    stdout: str
    stderr: str
    truncated: bool
    json_lines: list[Any] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class _Capped:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            room = self.limit - len(self.data)
            if room > 0:
                self.data += chunk[:room]
            self.dropped += max(0, len(chunk) - max(room, 0))


async def run_tool(
    argv: Sequence[str],
    *,
    timeout: float = 60.0,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    max_output: int = 1_000_000,
    gate: str | None = "ALLOW_EXTERNAL_TOOLS",
    environ: Mapping[str, str] | None = None,
) -> RunResult:
    """Run ``argv`` and collect its output; see the module docstring. ToolError when the gate is
    closed (E_PERMISSION_DENIED) or the program does not exist (E_NOT_FOUND)."""
    if isinstance(argv, str) or not argv or not all(isinstance(a, str) for a in argv):
        raise ToolError("The command must be a non-empty list of strings.", code=E_SCHEMA_VALIDATION)
    if timeout <= 0 or max_output < 0:
        raise ValueError("timeout must be > 0 seconds and max_output >= 0 bytes")
    if gate is not None and not env_flag(gate, False, environ):
        raise ToolError(f"Running external programs is disabled on this server ({argv[0]!r} was not run).",
                        code=E_PERMISSION_DENIED, details={"gate": gate},
                        suggested_fix=f"The operator can allow it by starting the server with {gate}=1.")
    program = shutil.which(argv[0], path=(env or os.environ).get("PATH")) if os.sep not in argv[0] else argv[0]
    if program is None or not os.path.exists(program):
        raise ToolError(f"Program {argv[0]!r} is not installed or not on PATH.", code=E_NOT_FOUND,
                        details={"program": argv[0]},
                        suggested_fix=f"Install {argv[0]} on the server, or configure its full path.")
    start = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        program, *argv[1:], stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, cwd=cwd, env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Capped(max_output), _Capped(max_output)
    readers = [asyncio.ensure_future(out.drain(proc.stdout)), asyncio.ensure_future(err.drain(proc.stderr))]
    timed_out = False
    try:
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            timed_out = True
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), _GRACE)
            except TimeoutError:
                _signal_group(proc.pid, signal.SIGKILL)
                await proc.wait()
    finally:
        _signal_group(proc.pid, signal.SIGKILL)  # whatever it left behind in its group
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*readers, return_exceptions=True), _DRAIN)
        for reader in readers:
            reader.cancel()
        if proc.returncode is None:  # cancelled from outside: do not leave it running
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    stdout = out.data.decode("utf-8", errors="replace")
    return RunResult(
        argv=[program, *argv[1:]],
        exit_code=None if timed_out else proc.returncode,
        timed_out=timed_out,
        duration_ms=round((time.monotonic() - start) * 1000.0, 3),
        stdout=stdout,
        stderr=err.data.decode("utf-8", errors="replace"),
        truncated=bool(out.dropped or err.dropped),
        json_lines=_json_lines(stdout),
    )


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _json_lines(text: str) -> list[Any]:
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line[:1] in ("{", "["):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue  # a log line that happens to start with a brace
    return found
