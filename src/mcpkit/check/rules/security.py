"""Security: what a server offers still matches what was pinned (``--pin FILE``; proxy/pin.py)."""

from __future__ import annotations

from ...proxy.pin import SINGULAR, PinError, describe_drift, drift
from ...proxy.pincli import listed, usable_lockfile
from ..context import CheckContext, Skip
from ..model import Finding
from ..registry import rule


@rule(
    "security.pin-drift", keyword="MUST", requirements=("TL-14", "TL-11"), revisions=("2025-11-25",),
    title="the tools, prompts and resource templates match the lockfile given with --pin (no rug pull)",
    fix="review what changed; if you trust it, pin it again with `mcpkit pin FILE TARGET`, else stop using "
    "the server",
    quote="For trust & safety and security, clients MUST consider tool annotations to be untrusted unless they "
    "come from trusted servers. [...] Clients SHOULD prompt for user confirmation on sensitive operations "
    "[...] show tool inputs to the user",
    source="2025-11-25/server/tools#security-considerations",
    fixes={
        "mcpkit": "a change you made on purpose: run `mcpkit pin FILE TARGET` and commit the lockfile",
        "sdk": "a change you made on purpose: run `mcpkit pin FILE TARGET` and commit the lockfile",
        "fastmcp": "a change you made on purpose: run `mcpkit pin FILE TARGET` and commit the lockfile",
        "ts": "a change you made on purpose: run `mcpkit pin FILE TARGET` and commit the lockfile",
    },
    default=False,
)
async def check_pin_drift(ctx: CheckContext) -> list[Finding]:
    path = ctx.options.pin
    try:
        lock = usable_lockfile(path)
    except PinError as exc:  # run_checks called without the command's check of it
        raise Skip(str(exc)) from None
    key = ctx.options.pin_key
    pinned = lock.upstream(key)
    if not any(pinned.values()):
        raise Skip(f"the lockfile {path} pins nothing for {key!r}")
    now = await listed(ctx.client)
    found = drift(pinned, now)
    out = [ctx.fail(describe_drift(kind, name, pinned[kind][name], now[kind][name]), item=name, kind=kind)
           for kind, name in found["changed"]]
    out += [ctx.fail(f"{SINGULAR[kind]} {name!r} is not in the lockfile {path}", item=name, kind=kind)
            for kind, name in found["added"]]
    out += [ctx.fail(f"pinned {SINGULAR[kind]} {name!r} is no longer listed", item=name, kind=kind)
            for kind, name in found["removed"]]
    if not out:
        out.append(ctx.ok(f"{sum(len(v) for v in now.values())} item(s) match {path}"))
    return out
