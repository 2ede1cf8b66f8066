#!/usr/bin/env python3
"""Wall time per tools/call of a tool with isolation="process" against the same tool in-process.

Both servers run in this process on a stdio-style ServerSession (sync handlers inline, as the
stdio transport runs them), fed the same pre-encoded `tools/call add` frames one at a time; the
wall time of each call (route, validate, pickle the call, a pipe round trip to the worker
process, unpickle the result, answer) is divided by the number of calls. Wall time, not CPU:
the isolated call's work is split between two processes. Rounds alternate between the two
servers; medians reported. The workers are started (and warmed) before the first round.

    python bench/isolation_overhead.py [--calls 2000] [--rounds 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from policy_overhead import frames, session_for  # noqa: E402
from policy_overhead import run_round as _run_round  # noqa: E402

from mcpkit import Server  # noqa: E402


def run_round(session: object, sent: list[int], batch: list[bytes]) -> float:
    return _run_round(session, sent, batch, clock=time.perf_counter)  # type: ignore[arg-type]


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def build(isolation: str | None) -> Server:
    server = Server("bench")
    server.tool(isolation=isolation, timeout=60.0)(add)
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", help="write the numbers here too")
    args = parser.parse_args()
    sessions = {"in-process": session_for(build(None)), "process": session_for(build("process"))}
    batch = frames(args.calls)
    for session, sent in sessions.values():
        run_round(session, sent, batch[:200])  # warm: validators compiled, the worker started
    results: dict[str, list[float]] = {name: [] for name in sessions}
    for r in range(args.rounds):
        order = list(sessions.items())
        for name, (session, sent) in order if r % 2 == 0 else reversed(order):
            results[name].append(run_round(session, sent, batch))
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"wall time per tools/call (no transport), {args.rounds} rounds x {args.calls} calls, medians [min-max]:")
    for name, values in results.items():
        print(f"  {name:10s} {med[name]:8.1f} us  [{min(values):.1f}-{max(values):.1f}]")
    print(f"  isolation adds {med['process'] - med['in-process']:.1f} us per call")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"calls": args.calls, "rounds": args.rounds, "us_per_call": results, "median_us": med},
                      fh, indent=2)


if __name__ == "__main__":
    main()
