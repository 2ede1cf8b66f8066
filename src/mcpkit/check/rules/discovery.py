"""Discovery before connecting: the Server Card (SEP-2127) an HTTP server may publish at
``<endpoint>/server-card``, checked for shape and against the live server when present."""

from __future__ import annotations

from typing import Any

from ..._extras import needs
from ..context import CheckContext
from ..model import Finding
from ..registry import rule

_FIXES = {
    "mcpkit": "built in: http_app() serves the card from the Server's own fields (card_name= sets its name)",
    "sdk": "serve a static JSON document at <endpoint>/server-card with the Server Card schema's fields",
    "fastmcp": "add a custom route at <endpoint>/server-card returning the card",
    "ts": "add an Express route at <endpoint>/server-card returning the card",
}


@rule(
    "discovery.server-card", keyword="SHOULD", requirements=("VN-03",), scope="server", transports=("http",),
    title="a published Server Card is well formed and agrees with the live server",
    fix="publish the card with the draft schema's fields ($schema, a reverse-DNS name, version, a description "
    "of at most 100 characters, remotes) and keep its version and endpoint equal to what the server answers",
    quote="A Server Card SHOULD accurately reflect the server's runtime behavior: the values a client observes "
    "once connected — the serverInfo (name, version) and supportedVersions from server/discover, the transport "
    "served at each remotes[] endpoint ... — SHOULD NOT contradict the equivalent values declared in the "
    "Server Card.",
    source="experimental-ext-server-card docs/discovery.md (SEP-2127), Consistency with Runtime Behavior",
    fixes=_FIXES,
)
async def check_server_card(ctx: CheckContext) -> list[Finding]:
    with needs("client", "mcpkit check of a URL"):
        import httpx

    from ... import _json
    from ...transports.discovery import CARD_MEDIA_TYPE, validate_card

    url = str(ctx.options.target).rstrip("/") + "/server-card"
    async with httpx.AsyncClient(timeout=ctx.timeout) as client:
        response = await client.get(url, headers={"Accept": CARD_MEDIA_TYPE, **ctx.options.headers})
    if response.status_code == 404:
        raise ctx.skip(f"no Server Card at {url} (publishing one is optional)")
    if response.status_code != 200:
        raise ctx.skip(f"GET {url} got HTTP {response.status_code}")
    try:
        card: Any = _json.loads(response.content)
    except _json.JSONDecodeError:
        return [ctx.fail(f"the Server Card at {url} is not JSON")]
    findings = [ctx.fail(f"Server Card: {problem}") for problem in validate_card(card)]
    if isinstance(card, dict):
        results = [p.result for p in ctx.probes.values() if p.accepted and isinstance(p.result, dict)]
        info = next((r.get("serverInfo") for r in results if isinstance(r.get("serverInfo"), dict)), None) or {}
        if info.get("version") and card.get("version") not in (None, info.get("version")):
            findings.append(ctx.fail(f"the card says version {card.get('version')!r}, the server "
                                     f"{info.get('version')!r}"))
        remotes = card.get("remotes") if isinstance(card.get("remotes"), list) else []
        target = str(ctx.options.target).rstrip("/")
        if remotes and not any(isinstance(r, dict) and str(r.get("url", "")).rstrip("/") == target for r in remotes):
            findings.append(ctx.fail(f"no remote of the card is the endpoint checked ({target})"))
    return findings or [ctx.ok(f"the Server Card at {url} is well formed and agrees with the server")]
