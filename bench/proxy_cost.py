#!/usr/bin/env python3
"""What `mcpkit proxy` adds to a call: the fixture server (servers/mcpkit_server.py) over stdio,
directly and behind `mcpkit proxy` (stdio in front, the fixture as its stdio upstream), with the
trust-layer features off and on, measured by mcp-bench in one run, interleaved round by round.

Each variant is one proxy command line; a variant whose flag this mcpkit does not have is reported
as such, not measured. Per variant: sequential `tools/call add` p50 / p99 (the round trip a host
waits for), pipelined calls/s (throughput), `tools/list` p50 (200 tools: where pinning and the scan
run) and the proxy process's CPU per call (the upstream's own CPU is not counted: it is the direct
row's). Medians over rounds, [min-max] in brackets, and the ratio of each median to the direct one.

    python bench/proxy_cost.py [--rounds 5] [--seq 2000] [--pipeline 5000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIXTURE = [sys.executable, os.path.join(HERE, "servers", "mcpkit_server.py")]
PROXY = [sys.executable, "-m", "mcpkit", "proxy"]

# name -> the proxy's flags ("{tmp}" is a fresh directory of the round), None for the direct row
VARIANTS: dict[str, list[str] | None] = {
    "direct": None,
    "proxy": [],
    "proxy --pin": ["--pin", "{tmp}/lock.json"],
    "proxy --scan block": ["--scan", "block"],
    "proxy --redact mask": ["--redact", "mask"],
    "proxy --pin --scan block --redact mask": ["--pin", "{tmp}/lock.json", "--scan", "block", "--redact", "mask"],
}
METRICS = (("seq_p50_us", "seq p50 us", "{:.0f}"), ("seq_p99_us", "seq p99 us", "{:.0f}"),
           ("pipe_cps", "pipelined calls/s", "{:,.0f}"), ("list_p50_ms", "tools/list p50 ms", "{:.2f}"),
           ("seq_server_cpu_us", "proxy CPU us/call (seq)", "{:.0f}"))


def supported(flags: list[str]) -> bool:
    """Whether this mcpkit's proxy knows every option in ``flags``."""
    text = subprocess.run([*PROXY, "--help"], capture_output=True, text=True, cwd=ROOT).stdout
    return all(f"{flag} " in text or f"{flag}\n" in text or f"{flag}=" in text
               for flag in flags if flag.startswith("--"))


def command(flags: list[str] | None, tmp: str) -> str:
    if flags is None:
        return shlex.join(FIXTURE)
    return shlex.join([*PROXY, *(f.replace("{tmp}", tmp) for f in flags), "--", *FIXTURE])


def measure(cmd: str, args: argparse.Namespace) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        path = out.name
    try:
        run = subprocess.run(
            [sys.executable, os.path.join(HERE, "mcp-bench"), "--stdio", cmd, "--phases", "seq,list,pipe",
             "--seq", str(args.seq), "--pipeline", str(args.pipeline), "--list-iters", "50",
             "--json", path, "--quiet"],
            capture_output=True, text=True, timeout=600, cwd=ROOT)
        if run.returncode != 0:
            raise SystemExit(f"mcp-bench failed on {cmd}:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
        with open(path) as f:
            res = json.load(f)
    finally:
        os.unlink(path)
    if res.get("seq_bad") or res.get("pipe_lost") or res.get("pipe_wrong") or res.get("pipe_errors"):
        raise SystemExit(f"wrong answers through {cmd}: {json.dumps(res)[:1000]}")
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seq", type=int, default=2000)
    ap.add_argument("--pipeline", type=int, default=5000)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    variants = {}
    for name, flags in VARIANTS.items():
        if flags is None or supported(flags):
            variants[name] = flags
        else:
            print(f"{name}: this mcpkit's proxy has no such option; not measured", file=sys.stderr)
    results: dict[str, list[dict]] = {name: [] for name in variants}
    for r in range(args.rounds):
        for name, flags in variants.items():
            with tempfile.TemporaryDirectory(prefix="mcpkit-proxy-cost-") as tmp:
                results[name].append(measure(command(flags, tmp), args))
            print(f"round {r + 1}/{args.rounds}: {name} done", file=sys.stderr)
    rows = ["| target | " + " | ".join(label for _, label, _ in METRICS) + " |",
            "|---|" + "---|" * len(METRICS)]
    direct = {key: statistics.median(run[key] for run in results["direct"]) for key, _, _ in METRICS}
    for name, runs in results.items():
        cells = []
        for key, _, fmt in METRICS:
            values = [run[key] for run in runs]
            med = statistics.median(values)
            cell = f"{fmt.format(med)} [{fmt.format(min(values))}–{fmt.format(max(values))}]"
            if name != "direct" and direct[key]:
                cell += f" ×{med / direct[key]:.2f}"
            cells.append(cell)
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    print("\n".join(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
