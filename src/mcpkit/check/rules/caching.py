"""Caching hints (2026-07-28): ttlMs is not negative, and one list keeps one cacheScope."""

from __future__ import annotations

from typing import Any

from ..context import LISTS, CheckContext
from ..model import Finding
from ..registry import MODERN, rule

_FIXES = {
    "mcpkit": "built in: Server(cache_ttl_ms=, cache_scope=) and per-item ttl_ms/cache_scope are checked at "
    "registration",
    "sdk": "set ttlMs and cacheScope on every cacheable result of a 2026-07-28 handler",
    "fastmcp": "set ttlMs and cacheScope on every cacheable result",
    "ts": "set ttlMs and cacheScope on every cacheable result",
}


async def _results(ctx: CheckContext) -> list[tuple[str, Any]]:
    """(what, result) for the server/discover answer and every page of every declared list."""
    out: list[tuple[str, Any]] = [("server/discover", ctx.client.connect_result)]
    for method in LISTS:
        for number, page in enumerate(await ctx.all_pages(method), 1):
            out.append((f"{method} page {number}", page))
    return out


@rule(
    "caching.ttl", keyword="MUST", requirements=("CA-02",), revisions=MODERN,
    title="ttlMs, where a result carries it, is a whole number of milliseconds, 0 or more",
    fix="send ttlMs as an integer >= 0 (0: stale at once); never a negative or fractional value",
    quote="(spec/requirements.md CA-02:) MUST. ttlMs >= 0 (0 means stale at once). (schema: ttlMs: integer, "
    "minimum 0)",
    source="2026-07-28 schema CacheableResult.ttlMs; server/utilities/caching#time-to-live-ttl-field",
    fixes=_FIXES,
    reproduce="reads the server/discover result and every page of every declared list (the pages the other "
    "rules read, walked once); ttlMs -1 on any fails",
)
async def check_ttl(ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    seen = 0
    for what, result in await _results(ctx):
        if not isinstance(result, dict) or "ttlMs" not in result:
            continue
        seen += 1
        ttl = result["ttlMs"]
        if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0:
            out.append(ctx.fail(f"{what} carries ttlMs {ttl!r}; it is an integer of 0 or more", where=what))
    if not seen:
        raise ctx.skip("no result carried ttlMs")
    return out or [ctx.ok(f"{seen} result(s) with a valid ttlMs")]


@rule(
    "caching.scope", keyword="MUST", requirements=("CA-04",), revisions=MODERN,
    title="every page of one list carries the same cacheScope",
    fix="give every page of a list the cacheScope of the list (the scope of the whole list, not of its page)",
    quote="(spec/requirements.md CA-04, MUST:) Use the same cacheScope on every page of a list (PA-04). "
    "Different ttlMs per page is allowed (MAY).",
    source="2026-07-28/server/utilities/caching#interaction-with-pagination",
    fixes=_FIXES | {"mcpkit": "built in: every page carries the server's cacheScope"},
    reproduce="walks every page of every declared list (once per connection, shared with caching.ttl); a list "
    "whose pages say \"public\" and \"private\" fails",
)
async def check_scope(ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    compared = 0
    for method in LISTS:
        pages = await ctx.all_pages(method)
        scopes = [p.get("cacheScope") for p in pages if isinstance(p, dict) and "cacheScope" in p]
        if len(pages) < 2:
            continue
        compared += 1
        if len(set(map(repr, scopes))) > 1 or 0 < len(scopes) < len(pages):
            shown = ", ".join(f"page {i}: {p.get('cacheScope', '(none)')!r}" for i, p in enumerate(pages, 1)
                              if isinstance(p, dict))
            out.append(ctx.fail(f"{method} changes its cacheScope between pages ({shown})", method=method))
    if not compared:
        raise ctx.skip("no declared list has more than one page")
    return out or [ctx.ok(f"{compared} paginated list(s) keep one cacheScope")]
