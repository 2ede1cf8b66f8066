"""Pagination: cursors the server hands out work, and a made-up cursor is refused."""

from __future__ import annotations

import uuid

from ..context import LISTS, CheckContext, describe
from ..model import Finding
from ..registry import rule

MAX_PAGES = 100


@rule(
    "pagination.cursor", example="broken_pages",
    keyword="SHOULD", requirements=("PA-01", "PA-02", "PA-03"),
    title="following nextCursor works until a page without nextCursor",
    fix="return nextCursor only when more results exist, as an opaque string that the next request "
    "accepts; leave it out on the last page",
    quote="The server's response includes: The current page of results; An optional nextCursor field if "
    "more results exist. [...] Servers SHOULD: Provide stable cursors",
    source="server/utilities/pagination#response-format, #implementation-guidelines",
    fixes={
        "mcpkit": "built in",
        "sdk": "built in for MCPServer lists; in a low-level list handler return next_cursor only when more exist",
        "fastmcp": "built in",
        "ts": "in a low-level list handler return nextCursor only when more exist, and accept it back",
    },
)
async def check_cursor(ctx: CheckContext) -> list[Finding]:
    pages = await ctx.first_pages()
    if not pages:
        raise ctx.skip("the server declares no paginated list")
    out: list[Finding] = []
    followed = 0
    for method, first in pages.items():
        key = LISTS[method][0]
        if isinstance(first, Exception):
            continue  # capabilities.backed reports a list that fails
        page, seen, count = first, set(), 1
        while True:
            if not isinstance(page, dict) or not isinstance(page.get(key), list):
                out.append(ctx.fail(f"{method} page {count} has no {key!r} array", method=method))
                break
            cursor = page.get("nextCursor")
            if cursor is None:
                break
            if not isinstance(cursor, str):
                out.append(ctx.fail(f"{method}: nextCursor {cursor!r} is not a string", method=method))
                break
            if cursor in seen or count >= MAX_PAGES:
                out.append(ctx.fail(f"{method}: the cursors never end (cursor {cursor!r} after {count} pages)",
                                    method=method))
                break
            seen.add(cursor)
            followed += 1
            try:
                page = await ctx.request(method, {"cursor": cursor})
            except Exception as exc:  # noqa: BLE001
                out.append(ctx.fail(f"{method} with its own nextCursor {cursor!r} failed: {describe(exc)}",
                                    method=method))
                break
            count += 1
    return out or [ctx.ok(f"{followed} cursor(s) followed" if followed else "no list returned a nextCursor")]


@rule(
    "pagination.invalid-cursor", example="restarts_on_bad_cursor",
    keyword="SHOULD", requirements=("PA-02",),
    quote="Invalid cursors SHOULD result in an error with code -32602 (Invalid params).",
    source="server/utilities/pagination#error-handling",
    fixes={
        "mcpkit": "built in",
        "sdk": "raise MCPError(INVALID_PARAMS, 'Invalid cursor') for a cursor you did not issue",
        "fastmcp": "raise McpError(ErrorData(code=-32602, message='Invalid cursor'))",
        "ts": "throw new McpError(ErrorCode.InvalidParams, 'Invalid cursor')",
    },
    title="a list that paginates answers a made-up cursor with -32602",
    fix="answer a cursor you did not issue (or that expired) with -32602 Invalid params instead of "
    "restarting the list",
)
async def check_invalid_cursor(ctx: CheckContext) -> list[Finding]:
    pages = await ctx.first_pages()
    paginating = [m for m, p in pages.items() if isinstance(p, dict) and isinstance(p.get("nextCursor"), str)]
    if not paginating:
        raise ctx.skip("no list returned a nextCursor")
    out: list[Finding] = []
    bogus = "mcpkit-check-invalid-cursor-" + uuid.uuid4().hex[:8]
    for method in paginating:
        try:
            await ctx.request(method, {"cursor": bogus})
        except Exception as exc:  # noqa: BLE001
            if getattr(exc, "code", None) != -32602:
                out.append(ctx.fail(f"{method} with a made-up cursor got {describe(exc)}; expected -32602",
                                    method=method))
            continue
        out.append(ctx.fail(f"{method} with a made-up cursor returned a page; expected -32602", method=method))
    return out or [ctx.ok(f"{len(paginating)} list(s) refuse a made-up cursor")]
