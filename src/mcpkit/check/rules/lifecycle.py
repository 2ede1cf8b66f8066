"""Lifecycle: the handshake of each revision, version negotiation, ping."""

from __future__ import annotations

from typing import Any

from ...protocol import revisions
from ..context import CheckContext, describe
from ..framing import pretty_printed
from ..model import Finding
from ..registry import LEGACY, rule

UNKNOWN = "unknown"


def _initialize_shape(result: Any) -> list[str]:
    """LC-01: what an InitializeResult lacks."""
    if not isinstance(result, dict):
        return ["the result is not an object"]
    problems = []
    if not isinstance(result.get("protocolVersion"), str):
        problems.append("protocolVersion is missing or not a string")
    if not isinstance(result.get("capabilities"), dict):
        problems.append("capabilities is missing or not an object")
    info = result.get("serverInfo")
    if not isinstance(info, dict):
        problems.append("serverInfo is missing or not an object")
    else:
        for key in ("name", "version"):
            if not isinstance(info.get(key), str):
                problems.append(f"serverInfo.{key} is missing or not a string")
    return problems


def _discover_shape(result: Any, offered: str) -> list[str]:
    """VN-03: what a DiscoverResult lacks."""
    if not isinstance(result, dict):
        return ["the result is not an object"]
    problems = []
    versions = result.get("supportedVersions")
    if not (isinstance(versions, list) and all(isinstance(v, str) for v in versions)):
        problems.append("supportedVersions is missing or not a list of strings")
    elif offered not in versions:
        problems.append(f"supportedVersions does not list {offered}")
    if not isinstance(result.get("capabilities"), dict):
        problems.append("capabilities is missing or not an object")
    return problems


def _misnumbered(probe: Any) -> bool:
    """The handshake's answer carried the id in another JSON type (protocol.response-id names it)."""
    from ...client.errors import MismatchedId

    return isinstance(probe.exception, MismatchedId)


@rule(
    "lifecycle.handshake", example="bad_server_info",
    keyword="MUST", requirements=("LC-01", "VN-03"), scope="server",
    title="initialize (server/discover for 2026-07-28) answers with a well-formed result",
    fix="answer initialize with protocolVersion, capabilities and serverInfo {name, version}; "
    "answer server/discover with supportedVersions and capabilities",
    quote="The server MUST respond with its own capabilities and information",
    source="basic/lifecycle#initialization (2026-07-28: server/discover)",
    fixes={
        "mcpkit": "built in: Server answers initialize and server/discover itself",
        "sdk": "built in: MCPServer answers initialize; give MCPServer(name, version=...) a version",
        "fastmcp": "built in: FastMCP(name, version=...) answers initialize",
        "ts": "built in: new McpServer({name, version}) answers initialize",
    },
)
async def check_handshake(ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    offers = {v: p for v, p in ctx.probes.items() if v != UNKNOWN}
    for version, probe in offers.items():
        modern = version in revisions.MODERN_VERSIONS
        if probe.error is not None:
            if probe.unreachable or pretty_printed(probe.noise) is not None or _misnumbered(probe):
                continue  # not the server's answer (exit code 2), or stdio.framing/protocol.response-id report it
            if probe.code is not None or modern:
                continue  # an error response (or no modern era): the revision is not served
            out.append(ctx.fail(f"the connection offering {version} failed: {probe.error}", revision=version))
            continue
        problems = _discover_shape(probe.result, version) if modern else _initialize_shape(probe.result)
        if problems:
            out.append(ctx.fail("; ".join(problems), revision=version, result=probe.result))
        elif probe.accepted:
            out.append(ctx.ok("well-formed " + ("discover" if modern else "initialize") + " result", revision=version))
    # a server misnumbering its answers accepts nothing: protocol.response-id names why
    explained = any(_misnumbered(p) for p in offers.values()) or all(
        p.unreachable or pretty_printed(p.noise) is not None for p in offers.values() if not p.accepted)
    if offers and not any(p.accepted for p in offers.values()) and not out and not explained:
        answered = {v: (p.answered or p.error) for v, p in offers.items()}
        out.append(ctx.fail(f"no offered revision was accepted: {answered}"))
    return out


@rule(
    "lifecycle.negotiation", example="echo_version",
    keyword="MUST", requirements=("LC-02",), scope="server", revisions=LEGACY,
    title="an offered revision the server supports is answered with that revision; others get a supported one",
    fix="answer initialize with the client's protocolVersion when you support it, otherwise with your latest",
    quote="If the server supports the requested protocol version, it MUST respond with the same version. "
    "Otherwise, the server MUST respond with another protocol version it supports.",
    source="basic/lifecycle#version-negotiation",
    fixes={
        "mcpkit": "built in",
        "sdk": "built in: upgrade mcp if an older release echoes unknown versions",
        "fastmcp": "built in (from the official SDK)",
        "ts": "built in: LATEST_PROTOCOL_VERSION is answered for an unsupported one",
    },
)
async def check_negotiation(ctx: CheckContext) -> list[Finding]:
    offers = {v: p for v, p in ctx.probes.items() if v in revisions.HANDSHAKE_VERSIONS}
    supported = {v for v, p in offers.items() if p.accepted}
    claimed: set[str] = set()
    for version in revisions.MODERN_VERSIONS:
        probe = ctx.probes.get(version)
        if probe is not None and probe.accepted and isinstance(probe.result, dict):
            listed = probe.result.get("supportedVersions")
            if isinstance(listed, list):
                claimed.update(v for v in listed if v in revisions.HANDSHAKE_VERSIONS)
    out: list[Finding] = []
    for version, probe in offers.items():
        answer = probe.answered
        if probe.accepted:
            continue
        if version in claimed:
            out.append(ctx.fail(
                f"server/discover lists {version}, but initialize offering it got "
                + (f"{answer}" if answer else f"an error ({probe.error})"), revision=version,
            ))
        elif answer is not None and answer in offers and answer not in supported:
            out.append(ctx.fail(
                f"offered {version}, the server answered {answer}, but offered {answer} it answered "
                f"{offers[answer].answered or offers[answer].error}", revision=version,
            ))
        elif answer is not None and answer not in revisions.HANDSHAKE_VERSIONS:
            out.append(ctx.fail(f"offered {version}, the server answered {answer!r}, not a published revision",
                                revision=version))
    unknown = ctx.probes.get(UNKNOWN)
    if unknown is not None and unknown.answered is not None:
        if unknown.answered == unknown.offered:
            out.append(ctx.fail(f"offered the made-up revision {unknown.offered}, the server echoed it back "
                                "instead of answering a revision it supports"))
        elif supported and unknown.answered not in supported:
            out.append(ctx.fail(f"offered the made-up revision {unknown.offered}, the server answered "
                                f"{unknown.answered}, which it does not accept when offered"))
    if not out:
        if not supported:
            raise ctx.skip("no handshake revision was accepted" if offers else "no handshake revision was offered")
        modern = [v for v in revisions.MODERN_VERSIONS if v in ctx.probes and ctx.probes[v].accepted]
        text = f"handshake revisions {', '.join(sorted(supported))}"
        out.append(ctx.ok(text + (f"; {', '.join(modern)} through server/discover" if modern else "")))
    return out


@rule(
    "lifecycle.ping", example="no_ping",
    keyword="MUST", keywords={"2026-07-28": "advice"}, requirements=("PG-01", "PG-03"),
    title="ping answers an empty result (2026-07-28: ping is an unknown method)",
    fix="answer ping with {} (in 2026-07-28, with -32601 Method not found)",
    quote="The receiver MUST respond promptly with an empty response. (2026-07-28 removed ping: a request "
    "for it is an unknown method.)",
    source="basic/utilities/ping#behavior-requirements; 2026-07-28/changelog",
    fixes={
        "mcpkit": "built in",
        "sdk": "built in",
        "fastmcp": "built in",
        "ts": "built in (Protocol answers ping)",
    },
)
async def check_ping(ctx: CheckContext) -> list[Finding]:
    if ctx.modern:
        try:
            await ctx.request("ping")
        except Exception as exc:  # noqa: BLE001
            if getattr(exc, "code", None) == -32601:
                return [ctx.ok("ping is an unknown method in 2026-07-28")]
            return [ctx.fail(f"ping should get -32601 in 2026-07-28, got {describe(exc)}")]
        return [ctx.fail("ping got a result, but it does not exist in 2026-07-28 (PG-03)")]
    try:
        result = await ctx.request("ping")
    except Exception as exc:  # noqa: BLE001
        return [ctx.fail(f"ping failed: {describe(exc)}")]
    if not isinstance(result, dict) or set(result) - {"_meta"}:
        return [ctx.fail(f"ping answered {result!r}, not an empty result {{}}")]
    return []
