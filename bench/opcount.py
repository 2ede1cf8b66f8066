#!/usr/bin/env python3
"""Bytecode instructions per tools/call, plain and with every policy on: a cost that does not drift.

Timings on a shared machine drift by tens of percent from one minute to the next; the number
of Python bytecode instructions a request executes does not. This feeds 100 ``tools/call add``
frames to a stdio-style session (as policy_overhead.py does: no transport, sync handlers
inline), counts every instruction executed with an opcode tracer, and prints the count per call
for a plain server and for the same server with every policy on, then the functions that
account for the difference. What it cannot see is work done in C (orjson, regular
expressions, locks, allocation), so it complements the timings; it does not replace them.

    python bench/opcount.py [--top 25] [--src PATH]   # --src: another tree's src/, to compare
    python bench/opcount.py --plain                   # where the plain call's instructions go
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))


def count(session: object, frames: list[bytes]) -> tuple[float, Counter[str]]:
    """Instructions per frame fed, and per function (``module:function``)."""
    per: Counter[str] = Counter()
    total = [0]

    def tracer(frame, event, arg):  # noqa: ANN001, ANN202 - sys.settrace's signature
        if event == "call":
            frame.f_trace_opcodes = True
            return tracer
        if event == "opcode":
            total[0] += 1
            code = frame.f_code
            per[f"{code.co_filename.rpartition('/src/')[2] or code.co_filename}:{code.co_name}"] += 1
        return tracer

    sys.settrace(tracer)
    try:
        for frame in frames:
            session.feed(frame)  # type: ignore[attr-defined]
            session.flush()  # type: ignore[attr-defined]
    finally:
        sys.settrace(None)
    return total[0] / len(frames), per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=25, help="functions to list by added instructions")
    parser.add_argument("--src", default=os.path.join(HERE, "..", "src"), help="the src/ to measure")
    parser.add_argument("--plain", action="store_true", help="also list the plain call's functions")
    args = parser.parse_args()
    sys.path.insert(0, os.path.abspath(args.src))
    import mcpkit  # noqa: F401 - imported from --src before policy_overhead puts its own first

    sys.path.insert(1, HERE)
    import policy_overhead as po

    calls = 100
    results = {}
    with tempfile.TemporaryDirectory(prefix="mcpkit-opcount-") as workdir:
        for name, policy in (("plain", None), ("policy", po.secure_policy(workdir))):
            session, _ = po.session_for(po.build(policy))
            batch = po.frames(calls + 200)
            po.run_round(session, _, batch[:200])  # warm: validators compiled, caches filled
            results[name] = count(session, batch[200:])
            if policy is not None:
                policy.audit.close()
    plain, policed = results["plain"], results["policy"]
    print(f"bytecode instructions per tools/call ({mcpkit.__file__.rpartition('/mcpkit/')[0]}):")
    print(f"  plain   {plain[0]:6.0f}")
    print(f"  policy  {policed[0]:6.0f}  ({policed[0] / plain[0]:.2f}x)")
    if args.plain:
        print(f"\nthe plain call, by function (top {args.top}):")
        for key, n in plain[1].most_common(args.top):
            print(f"  {n / calls:6.1f}  {key}")
    added = Counter({k: (policed[1][k] - plain[1].get(k, 0)) / calls for k in policed[1]})
    print(f"\nadded by the policy, by function (top {args.top}):")
    for key, n in added.most_common(args.top):
        if n > 0:
            print(f"  {n:6.1f}  {key}")


if __name__ == "__main__":
    main()
