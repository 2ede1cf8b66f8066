"""stdio: nothing but JSON-RPC messages on stdout."""

from __future__ import annotations

from ..context import CheckContext
from ..model import Finding
from ..registry import rule


@rule(
    "stdio.stdout-clean", severity="error", requirements=("ST-01", "ST-02"), transports=("stdio",), order=100,
    title="stdout carries only JSON-RPC messages, one per line (no banners, prints or logs)",
    fix="write logs and banners to stderr; on stdout write only compact JSON-RPC messages, one per line",
)
async def check_stdout_clean(ctx: CheckContext) -> list[Finding]:
    noise = list(ctx.client.stdout_noise)
    if not noise:
        return []
    shown = [line.decode("utf-8", "replace").rstrip("\r\n")[:120] for line in noise[:5]]
    return [ctx.fail(
        f"{len(noise)} line(s) on stdout that are not JSON-RPC messages, first: {shown[0]!r}", lines=shown,
    )]
