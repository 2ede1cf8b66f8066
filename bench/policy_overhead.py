#!/usr/bin/env python3
"""Dispatch CPU per tools/call with every policy on, against the same call on a plain server.

This isolates what the policy adds: no transport, no system calls. The end-to-end figure,
server CPU per call over stdio as the README reports it, comes from run-matrix's
``mcpkit-policy`` target. Both servers run in this process on a stdio-style ServerSession (sync handlers inline, as the
stdio transport runs them), fed the same pre-encoded `tools/call` frames; the CPU time of the
feed loop (encode, route, validate, run, answer, and for the policy: gates, rate limit, sizes,
timeout, sanitizing, envelope, audit line written to a file) is divided by the number of calls.
Rounds alternate between the two servers so machine drift spreads over both; medians reported.

    python bench/policy_overhead.py [--calls 20000] [--rounds 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from mcpkit import Server  # noqa: E402
from mcpkit.policy import AuditLog, Gates, Policy, RateLimiter  # noqa: E402
from mcpkit.policy.limits import Limits  # noqa: E402
from mcpkit.policy.sandbox import Sandbox  # noqa: E402
from mcpkit.server.session import ServerSession  # noqa: E402

VERSION = "2025-11-25"


def build(policy: Policy | None) -> Server:
    server = Server("bench", policy=policy)

    @server.tool(read_only=True, open_world=False)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return server


def secure_policy(workdir: str) -> Policy:
    """Every piece on: gates, contract envelope, audit file, rate limit (high enough never to
    refuse, so every call still pays for its bucket), sizes, sanitizing, a timeout, a sandbox."""
    return Policy(
        gates=Gates(),
        contract=True,
        # as Policy.secure() configures it: lines buffered for at most 0.1 s
        audit=AuditLog(os.path.join(workdir, "audit.log"), max_bytes=256 * 1024 * 1024, backups=1,
                       flush_interval=0.1),
        rate_limiter=RateLimiter("100000000/min"),
        limits=Limits(max_argument_bytes=1_000_000, max_result_bytes=4_000_000, timeout=60.0, sanitize=True),
        sandbox=Sandbox([workdir]),
        redact_logs=True,
    )


def session_for(server: Server) -> tuple[ServerSession, list[int]]:
    sent = [0]

    def send(batch: list) -> None:
        sent[0] += len(batch)

    session = ServerSession(server, send, inline_sync=True)
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}}
    session.feed(json.dumps(init).encode())
    session.feed(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    session.flush()
    return session, sent


def frames(n: int) -> list[bytes]:
    return [json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                        "params": {"name": "add", "arguments": {"a": i, "b": 1}}}).encode() for i in range(n)]


def run_round(session: ServerSession, sent: list[int], batch: list[bytes], clock=time.process_time) -> float:
    """µs per call of feeding ``batch``, by ``clock`` (CPU time by default; wall time where the
    work is split between processes)."""
    before = sent[0]
    start = clock()
    for frame in batch:
        session.feed(frame)
        session.flush()
    spent = clock() - start
    assert sent[0] - before == len(batch), "every call must be answered"
    return spent / len(batch) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", help="write the numbers here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcpkit-policy-bench-") as workdir:
        plain, plain_sent = session_for(build(None))
        policed_server = build(secure_policy(workdir))
        policed, policed_sent = session_for(policed_server)
        batch = frames(args.calls)
        run_round(plain, plain_sent, batch[:2000])  # warm both (validators compiled, caches filled)
        run_round(policed, policed_sent, batch[:2000])
        results: dict[str, list[float]] = {"plain": [], "policy": []}
        for r in range(args.rounds):
            order = [("plain", plain, plain_sent), ("policy", policed, policed_sent)]
            for name, session, sent in order if r % 2 == 0 else reversed(order):
                results[name].append(run_round(session, sent, batch))
        policed_server.policy.audit.flush()
        audit_lines = sum(1 for _ in open(os.path.join(workdir, "audit.log")))
    med = {k: statistics.median(v) for k, v in results.items()}
    ratio = med["policy"] / med["plain"]
    print(f"dispatch CPU per tools/call (no transport), {args.rounds} rounds x {args.calls} calls, medians [min-max]:")
    for name, values in results.items():
        print(f"  {name:7s} {med[name]:6.1f} us  [{min(values):.1f}-{max(values):.1f}]")
    print(f"  ratio   {ratio:.2f}x  (audit lines written: {audit_lines})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"calls": args.calls, "rounds": args.rounds, "us_per_call": results,
                       "median_us": med, "ratio": ratio, "audit_lines": audit_lines}, fh, indent=2)


if __name__ == "__main__":
    main()
