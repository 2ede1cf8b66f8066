"""``mcpkit check`` over the corpus of real servers (tests/check/peers/corpus.py), one run each, as a
user runs it: ``python -m mcpkit check TARGET --format json``, wall time from launch to exit. Prints
a Markdown table and the median over the stdio servers (the goal: 3 s or less on this machine).

    python bench/check_corpus.py [--only NAME ...] [--json FILE]

The servers come from tools/install-mcp-servers.sh and tools/install-py-servers.sh (installed when
missing). One server at a time: the times are each server's alone, on a machine that may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.check.peers.corpus import NAMES, peer, serving  # noqa: E402


def one(name: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp, serving(peer(name, Path(tmp))) as (target, env):
        args = [sys.executable, "-m", "mcpkit", "check", "--format", "json", "--no-color"]
        for var in env:
            args += ["--pass-env", var]
        args += ["--", *target] if isinstance(target, list) else [target]
        started = time.monotonic()
        done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, **env}, timeout=300,
                              stdin=subprocess.DEVNULL)
        took = time.monotonic() - started
    try:
        report = json.loads(done.stdout)
    except ValueError:
        report = {"error": done.stderr.strip()[-300:], "findings": []}
    failed = sorted({f"{f['rule']} ({f['severity']})" for f in report.get("findings", []) if f["status"] == "fail"})
    return {"name": name, "http": target.startswith("http") if isinstance(target, str) else False,
            "seconds": round(took, 2), "exit_code": done.returncode, "failed": failed,
            "error": report.get("error")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="these setups only")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args()
    rows = []
    for name in args.only or NAMES:
        row = one(name)
        rows.append(row)
        print(f"{name}: {row['seconds']} s, exit {row['exit_code']}", file=sys.stderr, flush=True)
    print("| setup | transport | `mcpkit check` wall time | exit code |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['name']} | {'HTTP' if row['http'] else 'stdio'} | {row['seconds']:.1f} s | {row['exit_code']} |")
    stdio = [r["seconds"] for r in rows if not r["http"]]
    if stdio:
        print(f"\nmedian over {len(stdio)} stdio setups: {statistics.median(stdio):.1f} s "
              f"(min {min(stdio):.1f} s, max {max(stdio):.1f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
