"""The official MCP conformance suite (tools/conformance of the mcpkit repository), on request."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path

from ..context import CheckContext
from ..model import Finding
from ..registry import rule

#: the whole suite may take this long
SUITE_TIMEOUT = 900.0


def runner_path() -> Path | None:
    """``$MCPKIT_CONFORMANCE``, or tools/conformance next to an mcpkit source checkout."""
    from ...switches import read

    configured = read("MCPKIT_CONFORMANCE")
    candidates = [Path(configured)] if configured else []
    candidates.append(Path(__file__).resolve().parents[4] / "tools" / "conformance")
    return next((p for p in candidates if p.is_file() and os.access(p, os.X_OK)), None)


@rule(
    "conformance.suite", keyword="MUST", requirements=("LC-01", "LC-02", "HS-02", "HL-01", "HL-06"),
    quote="(the official conformance suite's server scenarios; each checks MUST-level behaviour)",
    source="@modelcontextprotocol/conformance",
    fixes={
        "mcpkit": "run tools/conformance --url URL --verbose",
        "sdk": "run the suite against your server and fix the scenarios it names",
        "fastmcp": "run the suite against your server and fix the scenarios it names",
        "ts": "run the suite against your server and fix the scenarios it names",
    },
    scope="server", transports=("http",), default=False,
    title="the official conformance suite (@modelcontextprotocol/conformance) passes every server scenario",
    fix="run tools/conformance --url URL --verbose and fix the failing scenarios it names",
)
async def check_conformance(ctx: CheckContext) -> list[Finding]:
    runner = runner_path()
    if runner is None:
        raise ctx.skip("tools/conformance is not available (an mcpkit source checkout, or set MCPKIT_CONFORMANCE)")
    if shutil.which("npm") is None:
        raise ctx.skip("npm is not installed; the conformance suite is a Node.js package")
    proc = await asyncio.create_subprocess_exec(
        str(runner), "--url", str(ctx.options.target), "--suite", "all",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), SUITE_TIMEOUT)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise ctx.skip(f"the conformance suite did not finish within {SUITE_TIMEOUT:.0f} s") from None
    text = out.decode("utf-8", "replace")
    summary = re.findall(r"^conformance: (\d+) passed, (\d+) failed$", text, re.M)
    if proc.returncode == 2 or not summary:
        tail = (err.decode("utf-8", "replace").strip().splitlines() or ["no output"])[-1]
        raise ctx.skip(f"the conformance suite could not run: {tail}")
    passed, failed = map(int, summary[-1])
    if failed:
        names = re.findall(r"^FAIL (\S+)", text, re.M)
        return [ctx.fail(f"{failed} of {passed + failed} scenarios failed: {', '.join(names)}", scenarios=names)]
    return [ctx.ok(f"{passed} scenarios passed")]
