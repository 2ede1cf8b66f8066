"""stdio: nothing but one-line JSON-RPC messages on stdout, and an exit once stdin closes.

These rules read what every connection of the run left behind (its Probe): the stdout lines that
were not messages, and how long the process took to exit after its stdin was closed."""

from __future__ import annotations

from ..context import CheckContext
from ..framing import split_noise
from ..model import Finding
from ..registry import rule
from ..runner import EOF_GRACE

_STDIO_FIXES = {
    "mcpkit": "built in: `mcpkit serve` writes only messages to stdout; print() in a tool goes to stderr",
    "sdk": "log to stderr (logging.basicConfig(stream=sys.stderr)); never print() in a stdio server",
    "fastmcp": "log to stderr; never print() in a stdio server; pass show_banner=False if a banner reaches stdout",
    "ts": "use console.error, never console.log, in a stdio server",
}


def _revision(key: str) -> str | None:
    return None if key == "unknown" else key


@rule(
    "stdio.stdout-clean", example="stdout_noise",
    keyword="MUST", requirements=("ST-01", "ST-02"), transports=("stdio",), scope="server",
    title="stdout carries only JSON-RPC messages (no banners, prints or logs)",
    fix="write logs and banners to stderr; on stdout write only compact JSON-RPC messages, one per line",
    quote="The server MUST NOT write anything to its stdout that is not a valid MCP message.",
    source="basic/transports#stdio",
    fixes=_STDIO_FIXES,
)
async def check_stdout_clean(ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    for key, probe in ctx.probes.items():
        _, other = split_noise(probe.noise)
        if other:
            shown = [line.decode("utf-8", "replace").rstrip("\r\n")[:120] for line in other[:5]]
            out.append(ctx.fail(
                f"{len(other)} line(s) on stdout that are not JSON-RPC messages, first: {shown[0]!r}",
                revision=_revision(key), lines=shown,
            ))
        elif probe.error is None:
            out.append(ctx.ok("nothing but JSON-RPC messages on stdout", revision=_revision(key)))
    return out


@rule(
    "stdio.framing", example="pretty_printed",
    keyword="MUST", requirements=("ST-01",), transports=("stdio",), scope="server",
    title="each JSON-RPC message is written on one line (no pretty-printed JSON)",
    fix="serialize each message compactly (json.dumps(message, separators=(',', ':')) or JSON.stringify(message)) "
    "followed by one newline; never indent",
    quote="Messages are delimited by newlines, and MUST NOT contain embedded newlines.",
    source="basic/transports#stdio",
    fixes={
        "mcpkit": "built in",
        "sdk": "built in: write messages through the SDK's stdio transport, not with your own print",
        "fastmcp": "built in: write messages through FastMCP's stdio transport",
        "ts": "built in: StdioServerTransport writes JSON.stringify(message) + '\\n'",
    },
)
async def check_framing(ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    for key, probe in ctx.probes.items():
        messages, _ = split_noise(probe.noise)
        if messages:
            first, lines = messages[0]
            what = f"id {first.get('id')!r}" if "id" in first else f"method {first.get('method')!r}"
            unread = "; the handshake answer was among them, so nothing could be checked" \
                if probe.error is not None else ""
            out.append(ctx.fail(
                f"{len(messages)} JSON-RPC message(s) pretty-printed over several lines (the first, {what}, over "
                f"{lines} lines): no client can read them{unread}", revision=_revision(key), messages=len(messages),
            ))
        elif probe.error is None:
            out.append(ctx.ok("one message per line", revision=_revision(key)))
    return out


@rule(
    "stdio.exit-on-eof", example="ignores_eof",
    keyword="SHOULD", requirements=("ST-07",), transports=("stdio",), scope="server",
    title=f"the server exits once its stdin is closed (within {EOF_GRACE:g} s, or twice its start-up time)",
    fix="end the process when reading stdin returns end-of-file: stop background threads and tasks "
    "(or make them daemons) so that nothing keeps it alive",
    quote="Servers SHOULD exit promptly when their standard input is closed or reads return end-of-file. "
    "This is the primary graceful-shutdown signal and the only portable one.",
    source="2026-07-28/basic/transports/stdio#shutdown (the client's shutdown sequence in every revision)",
    fixes={
        "mcpkit": "built in: `mcpkit serve` exits at EOF; do not start non-daemon threads in tools",
        "sdk": "built in: mcp.run('stdio') returns at EOF; make your own threads daemons and close them in a lifespan",
        "fastmcp": "built in: run() returns at EOF; end background tasks in the lifespan",
        "ts": "call process.exit() (or close open handles: timers, sockets) in transport.onclose / on stdin 'end'",
    },
)
async def check_exit_on_eof(ctx: CheckContext) -> list[Finding]:
    # only processes that answered their handshake: one still starting up cannot be judged
    answered = {k: p for k, p in ctx.probes.items() if p.error is None or p.code is not None}
    measured = {k: p.eof_exit for k, p in answered.items() if p.eof_exit is None or p.eof_exit >= 0}
    if not measured:
        raise ctx.skip("no server process was left to close")
    stuck = [k for k, took in measured.items() if took is None]
    if stuck:
        grace = max(ctx.probes[k].eof_grace for k in stuck)
        return [ctx.fail(f"the server was still running {grace:.3g} s after its stdin was closed "
                         f"({len(stuck)} of {len(measured)} processes) and had to be terminated")]
    return [ctx.ok(f"every process exited after EOF (slowest {max(t for t in measured.values() if t is not None):.2f} s)")]
