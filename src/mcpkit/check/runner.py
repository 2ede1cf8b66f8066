"""The runner: connect once per revision, run every rule, collect the findings.

Where the time goes, and what keeps a run short: every revision needs its own connection (a
stdio server serves one handshake per process), so a server's start-up is paid once per revision
and the rules themselves take milliseconds. The first connection (the latest handshake revision)
starts alone: when it gets no answer at all, or the server cannot be reached, the run stops there
(one launch, not six). As soon as its handshake has an answer, the others start side by side,
all at once by default (``jobs``): on two cores five start-ups cost about two and a half of wall
time, where one at a time cost five. Handshakes wait for a start-up slowed by the others (at least
STARTUP_TIMEOUT, and in proportion to the first's), and one that still got no answer is tried
again alone. Each process is closed in the background as soon as its rules are done: stdin closed,
a grace to exit (measured for ST-07), then terminated. A ``deadline`` cancels what is still
running, kills the processes at once, and keeps every finding made so far; the rules that did not
run are listed as skipped.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
import re
import sys
import time
from typing import Any

from .. import _json
from ..protocol import revisions as revision_table
from .framing import pretty_printed
from .context import RULE_TIMEOUT, CheckContext, Options, Probe, Skip, describe
from .model import Finding, Report, Rule
from .reach import NotJsonRpc, http_unreachable
from .registry import all_rules, resolve
from .render import Progress

__all__ = ["run_checks", "check", "UNKNOWN_VERSION", "EOF_GRACE"]

#: offered as a made-up revision: the answer must be one the server supports (LC-02)
UNKNOWN_VERSION = "2000-01-01"
#: how long a legacy-only server gets to answer the server/discover probe
MODERN_PROBE_TIMEOUT = 5.0
#: ST-07: how long a stdio server gets to exit once its stdin is closed before it is terminated
EOF_GRACE = 5.0
#: how long the first connection may take to start the server and answer its handshake (a big
#: import, a package manager fetching the server, a loaded machine); later ones scale from it
STARTUP_TIMEOUT = 30.0
#: how many connections run at once (a server that cannot run twice: jobs=1); more than the
#: revisions there are means all of them
JOBS = 8
#: with a deadline: how long the processes get to go once it has run out
KILL_GRACE = 1.0
#: the rules that run only when asked for: rule id -> the run_checks option
OPTIONAL = {"tools.read-only-output": "calls_tools", "conformance.suite": "conformance", "security.pin-drift": "pin"}

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


def _selected(options: Options, only: set[str] | None, skip: set[str]) -> list[Rule]:
    chosen = []
    for rule in all_rules().values():
        if (only is not None and rule.id not in only) or rule.id in skip:
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
    started = time.monotonic()
    try:
        found = await rule.check(ctx)
    except Skip as skip:
        found = [Finding(rule.id, rule.severity_at(ctx.revision), "skip", str(skip), ctx.revision)]
    except Exception as exc:  # noqa: BLE001 - a request that failed is a failure of the rule
        found = [ctx.fail(f"the check could not complete: {describe(exc)}")]
    found = found or [ctx.ok(rule.title)]
    took = time.monotonic() - started
    for f in found:
        f.duration = took
    return found


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


async def _unreachable(exc: BaseException, client: Any, kind: str, label: str, version: str = "") -> str | None:
    """Why the checker could not reach the server at all (an infrastructure failure, exit code
    2), or None when the server was reached and its answer is what failed."""
    from ..client import ClientError

    if kind in ("http", "sse") and isinstance(exc, (ClientError, NotJsonRpc)):
        return http_unreachable(exc, label, kind, initialize=version not in revision_table.MODERN_VERSIONS)
    if not isinstance(exc, ClientError):
        return None
    text = str(exc)
    if text.startswith("cannot start"):
        return f"could not start the server: {text[len('cannot start '):]}"
    proc = getattr(client.transport, "proc", None)
    if kind == "stdio" and proc is not None and not client.transport.stdout_noise:
        if proc.returncode is None and "closed its stdout" in text:
            with contextlib.suppress(asyncio.TimeoutError):  # it is exiting: a loaded machine is slow to tell
                await asyncio.wait_for(proc.wait(), 5.0)
            if proc.returncode is not None:
                text = f"the server exited with code {proc.returncode}" + (
                    f"; stderr: {client.stderr.strip()[-2000:]}" if client.stderr.strip() else "")
        if proc.returncode is not None:
            return f"the server exited before answering the handshake: {text}"
    return None


async def _handshake(client: Any, limit: Any) -> Any:
    """client.connect(), ended early when the answer arrives pretty-printed over several lines
    (it would never be read: wait no longer). ``limit()`` is read again as the wait goes on: it
    shrinks once another connection has answered and shown how long a start-up takes."""
    task = asyncio.ensure_future(client.connect())
    started = time.monotonic()
    try:
        while True:
            deadline = started + limit()
            done, _ = await asyncio.wait({task}, timeout=min(0.1, max(0.0, deadline - time.monotonic())))
            if done:
                return task.result()
            noise = client.stdout_noise if client.transport is not None else []
            if noise and getattr(client.transport, "kind", "") in ("http", "sse"):
                raise NotJsonRpc(noise[0])  # an HTTP answer that is not JSON-RPC: no answer will follow
            if noise and pretty_printed(list(noise)) is not None:
                raise asyncio.TimeoutError("pretty-printed")
            if time.monotonic() >= started + limit():
                raise asyncio.TimeoutError
    finally:
        if not task.done():
            task.cancel()
        with contextlib.suppress(BaseException):
            await task  # retrieved, whatever it ended with: nothing is left unread


def _calibrate(options: Options, version: str, handshake_time: float) -> None:
    """The first handshake answered: later ones get time in proportion to it (a big import, a
    loaded machine), and so does each process to exit at EOF."""
    if version == options.first_offered:
        options.handshake_floor = 3 * handshake_time
        options.eof_grace = max(EOF_GRACE, 2 * handshake_time * options.contention)


def _settle_first(options: Options, version: str, probe: Probe) -> None:
    if version == options.first_offered and options.first_answer is None:
        options.first_answer = probe.answered or ""
        if options.first_settled is not None:
            options.first_settled.set()


async def _connection(
    options: Options, version: str, rules: list[Rule], progress: Progress, closing: list[asyncio.Future[None]],
    probe: Probe, findings: list[Finding], patience: float = 1.0,
) -> dict[str, Any] | None:
    """One connection offering ``version``: its outcome goes into ``probe`` and each rule's
    findings into ``findings`` as they come (a deadline that cancels it keeps them); returns the
    server's serverInfo when the rules ran."""
    from ..client import Client, RpcError

    client = Client(options.target, transport=options.client_transport, protocol_version=version,
                    headers=options.headers or None, timeout=options.timeout, inherit_env=options.inherit_env,
                    env=options.env or None, on_message=probe.wire.observe)
    modern = version in revision_table.MODERN_VERSIONS

    def limit() -> float:
        # a legacy-only server may not answer a modern probe at all: while handshakes started
        # beside it are still waiting for their start-ups it waits too (its own start-up shares the
        # CPU with theirs); once they have answered, it waits in proportion to the first start-up,
        # never less than MODERN_PROBE_TIMEOUT. A handshake waits for the start-up at least
        # STARTUP_TIMEOUT, and longer when the first one showed it slow.
        floor = options.handshake_floor * options.contention
        if modern:
            if options.starting:
                return patience * max(STARTUP_TIMEOUT, floor)
            since_others = max(0.0, options.last_answer - started) + options.handshake_floor
            return patience * max(floor, since_others, MODERN_PROBE_TIMEOUT)
        return patience * max(STARTUP_TIMEOUT, options.timeout, floor)

    started = time.monotonic()
    if not modern:
        options.starting += 1
    try:
        try:
            # the handshake waits limit(), not one request's timeout: a start-up beside the others
            # (or on a loaded machine) may take longer than any request should
            client.timeout = max(options.timeout, STARTUP_TIMEOUT) * patience
            probe.result = await _handshake(client, limit)
            client.timeout = options.timeout
            probe.handshake_time = time.monotonic() - started
            probe.answered = client.protocol_version
            _calibrate(options, version, probe.handshake_time)
        except RpcError as exc:
            probe.error, probe.code, probe.exception = describe(exc), exc.code, exc
            # a JSON-RPC error carried by a refusal (a 401, a 403 from a Host guard) is about reach
            reason = await _unreachable(exc, client, options.transport, _label(options.target), version)
            if reason is not None:
                probe.error, probe.code, probe.unreachable = reason, None, True
            return None
        except (Exception, asyncio.TimeoutError) as exc:  # noqa: BLE001 - recorded for lifecycle.handshake
            probe.exception = exc
            if isinstance(exc, asyncio.TimeoutError):
                probe.error = f"no answer within {limit():g} s"
                if str(exc) == "pretty-printed":
                    probe.error = "the answer came pretty-printed over several lines, which no client can read"
            else:
                probe.error = describe(exc)
                reason = await _unreachable(exc, client, options.transport, _label(options.target), version)
                if reason is not None:
                    probe.error, probe.unreachable = reason, True
            probe.answered = _answered_in(exc)
            if client.transport is not None:
                probe.noise = list(client.stdout_noise)
            return None
        finally:
            if not modern:
                options.starting -= 1
                options.last_answer = time.monotonic()
            _settle_first(options, version, probe)
        if not probe.accepted:
            return None
        ctx = CheckContext(options, client=client, revision=version, wire=probe.wire)
        for rule in rules:
            if rule.applies_to(version):
                findings.extend(await _run_rule(rule, ctx, progress))
        return dict(client.server_info or {})
    finally:
        # closed in the background: a server slow to exit at EOF must not hold up the next connection
        closing.append(asyncio.ensure_future(_close(client, probe, options)))


async def _close(client: Any, probe: Probe, options: Options) -> None:
    """Close the connection. On stdio: close stdin and time how long the server takes to exit
    (ST-07), terminating it after the grace period (EOF_GRACE, more for a slow starter)."""
    transport = client.transport
    proc = getattr(transport, "proc", None)
    try:
        if proc is not None and proc.returncode is None and proc.stdin is not None:
            started = time.monotonic()
            grace = probe.eof_grace = options.eof_grace
            with contextlib.suppress(Exception):
                proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), grace)
                probe.eof_exit = time.monotonic() - started
            except asyncio.TimeoutError:
                probe.eof_exit = None
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 1.0)
                except asyncio.TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
        await client.close()
        probe.noise = list(client.stdout_noise)  # read after the exit: what it wrote at EOF counts too
    except BaseException:  # noqa: BLE001 - closing a broken connection may fail too; or a deadline cancelled it
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(client.close(), KILL_GRACE)


def _silent(probe: Probe) -> bool:
    """The handshake got no answer at all (not an error, not a counter-offer, not noise)."""
    return (probe.error is not None and probe.code is None and probe.answered is None and not probe.unreachable
            and not probe.noise and not probe.wire.answers)


def _plan(revisions: list[str] | tuple[str, ...] | None, quick: bool) -> list[str]:
    """The revisions to offer, the first one alone (the fail-fast probe)."""
    if revisions:
        for version in revisions:
            if version not in revision_table.SUPPORTED_VERSIONS:
                raise ValueError(f"unknown revision {version!r}; known: "
                                 f"{', '.join(revision_table.SUPPORTED_VERSIONS)}")
        return list(dict.fromkeys(revisions))
    if quick:
        return [revision_table.LATEST_HANDSHAKE]
    offered = [revision_table.LATEST_HANDSHAKE]
    offered += [v for v in revision_table.SUPPORTED_VERSIONS if v not in offered]
    return [*offered, UNKNOWN_VERSION]


def _not_run(why: str, per_connection: list[Rule], per_server: list[Rule], offered: list[str], late: set[str],
             found: list[Finding], options: Options) -> list[Finding]:
    """A skip for each rule that a deadline kept from running: at each revision whose connection
    was stopped, and each server rule, so that the report lists what ran and what did not."""
    ran = {(f.rule, f.revision) for f in found}
    out = []
    for version in [v for v in offered if v in late and v != UNKNOWN_VERSION]:
        for rule in per_connection:
            if rule.applies_to(version) and (rule.id, version) not in ran:
                out.append(Finding(rule.id, rule.severity_at(version), "skip", f"not run: {why}", version))
    ran_anywhere = {f.rule for f in found}
    for rule in per_server:
        if rule.id not in ran_anywhere:
            out.append(Finding(rule.id, rule.severity_at(None), "skip", f"not run: {why}", None))
    return out


def load_baseline(path: str) -> set[str]:
    """The fingerprints of the failures in a JSON report written earlier (``--format json``)."""
    from .model import Finding as _Finding

    try:
        with open(path, "rb") as fh:
            data = _json.loads(fh.read())
    except OSError as exc:
        raise ValueError(f"cannot read the baseline {path}: {exc.strerror or exc}") from None
    except _json.JSONDecodeError:
        raise ValueError(f"the baseline {path} is not JSON; write one with --format json") from None
    findings = data.get("findings") if isinstance(data, dict) else None
    if not isinstance(findings, list):
        raise ValueError(f"the baseline {path} has no findings list; write one with --format json")
    known = set()
    for item in findings:
        if isinstance(item, dict) and item.get("status") == "fail":
            known.add(_Finding(str(item.get("rule")), str(item.get("severity")), "fail", str(item.get("message")),
                               item.get("revision")).fingerprint)
    return known


async def run_checks(
    target: Any,
    *,
    transport: str = "auto",
    revisions: list[str] | tuple[str, ...] | None = None,
    call_read_only: bool = False,
    safe_tools: tuple[str, ...] | list[str] = (),
    conformance: bool = False,
    headers: dict[str, str] | None = None,
    timeout: float = RULE_TIMEOUT,
    rules: set[str] | list[str] | None = None,
    skip: set[str] | list[str] | None = None,
    quick: bool = False,
    deadline: float | None = None,
    fail_on: str = "error",
    baseline: set[str] | None = None,
    jobs: int = JOBS,
    progress: bool | None = None,
    hosts: str | list[str] | tuple[str, ...] | None = None,
    pin: str | None = None,
    pin_key: str = "default",
    inherit_env: bool | list[str] | None = None,
    env: dict[str, str] | None = None,
) -> Report:
    """Check the MCP server at ``target`` (a command line for stdio, a URL for HTTP, or an mcpkit
    Server in memory): connect once per revision in ``revisions`` (default: every revision, plus
    a made-up one for negotiation; ``quick``: the latest handshake revision only), run every rule
    on each connection the server accepts at the offered revision, then the server-wide rules.

    ``rules``/``skip`` take rule ids or families (an unknown one raises ValueError);
    ``call_read_only`` lets rules call the tools annotated readOnlyHint; ``safe_tools`` (name
    globs) the tools the user marks safe to call with made-up arguments (none other is called);
    ``deadline`` bounds the whole run in seconds (what ran is reported, the report says it is
    incomplete); ``baseline`` holds fingerprints of known failures, which do not fail the run;
    ``hosts`` ("claude,openai", or a list) picks the hosts.* rules (default claude, openai, gemini;
    mcpkit/hosts.py); ``pin`` (a lockfile, mcpkit pin) runs security.pin-drift against the entry
    ``pin_key``; ``inherit_env`` (True, or names) gives a command more of this process's
    environment than the allow-list of mcpkit.client.environment; ``env`` sets variables for it."""
    from ..hosts import parse_hosts

    kind = _transport_kind(target, transport)
    options = Options(target=target, transport=kind, headers=dict(headers or {}), call_read_only=call_read_only,
                      safe_tools=tuple(safe_tools),
                      conformance=conformance, timeout=timeout, client_transport=transport,
                      hosts=parse_hosts(hosts), pin=pin, pin_key=pin_key, inherit_env=inherit_env,
                      env=dict(env or {}))
    offered = _plan(revisions, quick)
    selected = _selected(options, resolve(rules), resolve(skip) or set())
    per_connection = sorted((r for r in selected if r.scope == "connection"), key=lambda r: r.order)
    per_server = [r for r in selected if r.scope == "server"]
    shown = sys.stderr.isatty() if progress is None else progress
    report = Report(target=_label(target), transport=kind, rules={r.id: r for r in selected}, fail_on=fail_on,
                    tools_called=options.tools_called)
    started = time.monotonic()
    ends = None if deadline is None else started + deadline
    #: offered revision -> (its probe, its findings so far, serverInfo once its rules ran)
    done: dict[str, tuple[Probe, list[Finding], dict[str, Any] | None]] = {}
    #: connections stopped before their end (the first one failed, or the deadline): not judged
    cut: set[str] = set()
    #: of those, the ones the deadline stopped (their rules are listed as not run)
    late: set[str] = set()
    closing: list[asyncio.Future[None]] = []
    gate = asyncio.Semaphore(max(1, jobs))
    first, rest = offered[0], offered[1:]
    options.first_offered, options.first_settled = first, asyncio.Event()
    options.handshake_floor = STARTUP_TIMEOUT  # until one handshake shows what a start-up takes here

    async def one(version: str, patience: float = 1.0) -> None:
        probe, findings = Probe(version), []
        done[version] = (probe, findings, None)
        async with gate:
            rules_here = [] if version == UNKNOWN_VERSION else per_connection
            info = await _connection(options, version, rules_here, bar, closing, probe, findings, patience)
        done[version] = (probe, findings, info)

    def left() -> float | None:
        return None if ends is None else max(0.0, ends - time.monotonic())

    async def stop(versions: list[str]) -> None:
        for version in versions:
            tasks[version].cancel()
            cut.add(version)
        await asyncio.gather(*(tasks[v] for v in versions), return_exceptions=True)

    tasks: dict[str, asyncio.Future[None]] = {}
    with Progress(shown) as bar:
        try:
            tasks[first] = asyncio.ensure_future(one(first))
            settled = asyncio.ensure_future(options.first_settled.wait())
            await asyncio.wait({settled, tasks[first]}, timeout=left(), return_when=asyncio.FIRST_COMPLETED)
            settled.cancel()
            probe = done[first][0] if first in done else None
            if probe is not None and probe.unreachable:
                report.error = probe.error
            elif probe is not None and probe.error is not None and probe.code is None and probe.answered is None \
                    and not probe.wire.answers and rest:
                report.notes.append(f"the handshake offering {first} got no answer ({probe.error}); the other "
                                    "revisions were not tried")
            elif probe is not None and (probe.error is not None or probe.answered is not None):
                # the first handshake has its outcome (its rules may still run): the others start
                # now, side by side, sharing the cores
                options.contention = max(1.0, min(len(rest), jobs) / (os.cpu_count() or 1))
                if probe.handshake_time is not None:  # the first exits at EOF while the others start
                    options.eof_grace = max(EOF_GRACE, 2 * probe.handshake_time * options.contention)
                for version in rest:
                    tasks[version] = asyncio.ensure_future(one(version))
                await asyncio.wait(list(tasks.values()), timeout=left())
                # a start-up slowed down by the others (a loaded machine) is not the server's fault:
                # a handshake that got no answer while the first one did is tried again, alone
                if probe.accepted:
                    for version in [v for v in rest if tasks[v].done() and _silent(done[v][0])]:
                        gate = asyncio.Semaphore(1)
                        options.contention = 1.0
                        tasks[version] = asyncio.ensure_future(one(version, patience=2.0))
                        await asyncio.wait([tasks[version]], timeout=left())
            late.update(v for v in rest if v not in tasks)  # the deadline came before they started
            pending = [v for v, t in tasks.items() if not t.done()]
            if pending or (late and report.error is None and not report.notes):
                report.incomplete = f"the --deadline of {deadline:g} s ran out"
                late.update(pending)
                cut.update(late)
                await stop(pending)
        finally:
            # the processes must go, whatever happened; once a deadline has run out, at once
            waited = asyncio.ensure_future(asyncio.gather(*closing, return_exceptions=True))
            await asyncio.wait({waited}, timeout=left())
            if not waited.done():
                for task in closing:
                    task.cancel()
                await asyncio.wait({waited}, timeout=KILL_GRACE)
        probes: dict[str, Probe] = {}
        for version in sorted(offered, key=lambda v: (v == UNKNOWN_VERSION, v)):
            if version not in done:
                continue
            probe, findings, info = done[version]
            if version in cut and version not in late:
                continue  # stopped because the first connection failed: not judged
            report.findings.extend(findings)  # what ran before a deadline is kept
            if version in late:
                continue
            probes["unknown" if version == UNKNOWN_VERSION else version] = probe
            if info and report.server_info is None:
                report.server_info = info
            if version != UNKNOWN_VERSION:
                report.negotiated[version] = probe.answered
        server_findings: list[Finding] = []
        if report.error is None:
            server_ctx = CheckContext(options, probes=probes)
            for rule in per_server:
                remaining = left()
                if remaining is not None and remaining <= 0:
                    report.incomplete = report.incomplete or f"the --deadline of {deadline:g} s ran out"
                    break
                try:
                    server_findings.extend(await asyncio.wait_for(_run_rule(rule, server_ctx, bar), remaining))
                except asyncio.TimeoutError:
                    report.incomplete = f"the --deadline of {deadline:g} s ran out"
                    break
            if report.incomplete is not None:
                server_findings += _not_run(report.incomplete, per_connection, per_server, offered, late,
                                            report.findings + server_findings, options)
    order = {v: i for i, v in enumerate(revision_table.SUPPORTED_VERSIONS)}
    report.findings.sort(key=lambda f: order.get(f.revision or "", -1))
    report.findings[:0] = server_findings
    if baseline:
        report.apply_baseline(baseline)
    report.duration = time.monotonic() - started
    return report


def check(target: Any, **options: Any) -> Report:
    """:func:`run_checks` for synchronous callers."""
    return asyncio.run(run_checks(target, **options))
