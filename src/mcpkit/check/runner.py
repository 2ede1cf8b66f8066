"""The runner: connect once per revision, run every rule, collect the findings."""

from __future__ import annotations

import ast
import asyncio
import re
import sys
import time
from typing import Any

from ..protocol import revisions as revision_table
from .context import RULE_TIMEOUT, CheckContext, Options, Probe, Skip, describe
from .model import Finding, Report, Rule
from .registry import all_rules
from .render import Progress

__all__ = ["run_checks", "check", "UNKNOWN_VERSION"]

#: offered as a made-up revision: the answer must be one the server supports (LC-02)
UNKNOWN_VERSION = "2000-01-01"
#: how long a legacy-only server gets to answer the server/discover probe
MODERN_PROBE_TIMEOUT = 5.0
#: the rules that run only when asked for: rule id -> the run_checks option
OPTIONAL = {"tools.read-only-output": "call_read_only", "conformance.suite": "conformance"}

_ANSWERED = re.compile(r"answered protocol version (.+), which")


def _transport_kind(target: Any, transport: str) -> str:
    if transport != "auto":
        return transport
    if isinstance(target, str) and target.startswith(("http://", "https://")):
        return "http"
    if isinstance(target, (str, list, tuple)):
        return "stdio"
    return "memory"


def _label(target: Any) -> str:
    if isinstance(target, str):
        return target
    if isinstance(target, (list, tuple)):
        return " ".join(map(str, target))
    return f"{getattr(target, 'name', type(target).__name__)} (in memory)"


def _selected(options: Options, only: set[str] | None) -> list[Rule]:
    chosen = []
    for rule in all_rules().values():
        if only is not None and rule.id not in only:
            continue
        if not rule.default and not getattr(options, OPTIONAL.get(rule.id, ""), False):
            continue
        if rule.transports and options.transport not in rule.transports:
            continue
        if rule.family == "hosts" and rule.id.split(".", 1)[1] not in options.hosts:
            continue  # --hosts: only the hosts asked for
        chosen.append(rule)
    return chosen


async def _run_rule(rule: Rule, ctx: CheckContext, progress: Progress) -> list[Finding]:
    ctx.rule = rule
    progress.step(rule.id, ctx.revision)
    try:
        found = await rule.check(ctx)
    except Skip as skip:
        return [Finding(rule.id, rule.severity, "skip", str(skip), ctx.revision)]
    except Exception as exc:  # noqa: BLE001 - a request that failed is a failure of the rule
        return [Finding(rule.id, rule.severity, "fail", f"the check could not complete: {describe(exc)}", ctx.revision)]
    return found or [ctx.ok(rule.title)]


def _answered_in(error: BaseException) -> str | None:
    """The version a client refused (an answer that is not a published revision)."""
    match = _ANSWERED.search(str(error))
    if match is None:
        return None
    try:
        value = ast.literal_eval(match.group(1))
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


async def _connection(
    options: Options, version: str, rules: list[Rule], progress: Progress, closing: list[asyncio.Future[None]],
) -> tuple[Probe, list[Finding], dict[str, Any] | None]:
    from ..client import Client, RpcError

    probe = Probe(version)
    findings: list[Finding] = []
    client = Client(options.target, transport=options.client_transport, protocol_version=version,
                    headers=options.headers or None, timeout=options.timeout)
    limit = MODERN_PROBE_TIMEOUT if version in revision_table.MODERN_VERSIONS else options.timeout
    try:
        try:
            probe.result = await asyncio.wait_for(client.connect(), min(limit, options.timeout))
        except RpcError as exc:
            probe.error, probe.code, probe.exception = describe(exc), exc.code, exc
            return probe, findings, None
        except (Exception, asyncio.TimeoutError) as exc:  # noqa: BLE001 - recorded for lifecycle.handshake
            probe.error = describe(exc) if not isinstance(exc, asyncio.TimeoutError) else f"no answer within {limit} s"
            probe.exception = exc
            probe.answered = _answered_in(exc)
            return probe, findings, None
        probe.answered = client.protocol_version
        if not probe.accepted:
            return probe, findings, None
        ctx = CheckContext(options, client=client, revision=version)
        for rule in rules:
            findings.extend(await _run_rule(rule, ctx, progress))
        return probe, findings, dict(client.server_info or {})
    finally:
        # closed in the background: a server slow to exit at EOF must not hold up the next connection
        closing.append(asyncio.ensure_future(_close(client)))


async def _close(client: Any) -> None:
    try:
        await client.close()
    except Exception:  # noqa: BLE001 - closing a broken connection may fail too
        pass


async def run_checks(
    target: Any,
    *,
    transport: str = "auto",
    revisions: list[str] | tuple[str, ...] | None = None,
    call_read_only: bool = False,
    conformance: bool = False,
    headers: dict[str, str] | None = None,
    timeout: float = RULE_TIMEOUT,
    rules: set[str] | None = None,
    progress: bool | None = None,
    hosts: str | list[str] | tuple[str, ...] | None = None,
) -> Report:
    """Check the MCP server at ``target`` (a command line for stdio, a URL for HTTP, or an mcpkit
    Server in memory): connect once per revision in ``revisions`` (default: the four handshake
    revisions and 2026-07-28; plus a made-up one for negotiation), run every rule on each
    connection the server accepts at the offered revision, then the server-wide rules.
    ``rules`` restricts the run to those rule ids; ``hosts`` ("claude,openai", or a list) picks
    the hosts.* rules (default claude, openai, gemini; mcpkit/hosts.py)."""
    from ..hosts import parse_hosts

    kind = _transport_kind(target, transport)
    options = Options(target=target, transport=kind, headers=dict(headers or {}), call_read_only=call_read_only,
                      conformance=conformance, timeout=timeout, client_transport=transport,
                      hosts=parse_hosts(hosts))
    offered = list(revisions) if revisions else list(revision_table.SUPPORTED_VERSIONS)
    for version in offered:
        if version not in revision_table.SUPPORTED_VERSIONS:
            raise ValueError(f"unknown revision {version!r}; known: {', '.join(revision_table.SUPPORTED_VERSIONS)}")
    if not revisions:
        offered.append(UNKNOWN_VERSION)
    selected = _selected(options, rules)
    per_connection = sorted((r for r in selected if r.scope == "connection"), key=lambda r: r.order)
    per_server = [r for r in selected if r.scope == "server"]
    shown = sys.stderr.isatty() if progress is None else progress
    report = Report(target=_label(target), transport=kind, rules={r.id: r for r in selected})
    started = time.monotonic()
    with Progress(shown) as bar:
        # one connection after the other: some servers cannot run twice at once (a lock, a port)
        closing: list[asyncio.Future[None]] = []
        done = []
        try:
            for version in offered:
                rules_here = [] if version == UNKNOWN_VERSION else per_connection
                done.append(await _connection(options, version, rules_here, bar, closing))
        finally:
            await asyncio.gather(*closing)
        probes: dict[str, Probe] = {}
        for version, (probe, findings, info) in zip(offered, done, strict=True):
            probes["unknown" if version == UNKNOWN_VERSION else version] = probe
            report.findings.extend(findings)
            if info and report.server_info is None:
                report.server_info = info
            if version != UNKNOWN_VERSION:
                report.negotiated[version] = probe.answered
        server_ctx = CheckContext(options, probes=probes)
        server_findings: list[Finding] = []
        for rule in per_server:
            server_findings.extend(await _run_rule(rule, server_ctx, bar))
    report.findings[:0] = server_findings
    report.duration = time.monotonic() - started
    return report


def check(target: Any, **options: Any) -> Report:
    """:func:`run_checks` for synchronous callers."""
    return asyncio.run(run_checks(target, **options))
