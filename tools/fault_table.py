"""Run the fault suite (tests/chaos) and write its table into docs/deployment.md.

    python tools/fault_table.py                 # run the suite, then write the table
    python tools/fault_table.py --from FILE     # write the table from a run's results (JSON lines)

Each test of the suite appends its row (what the fault did to requests, sessions, tasks,
notifications and rate limits) to the file ``MCPKIT_FAULT_RESULTS`` names; the table goes
between the ``fault-table`` markers of docs/deployment.md, with the run's date and commit. The
suite needs redis-server, redis-cli and haproxy (as .ci/run installs them).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "deployment.md"
START, END = "<!-- fault-table:start -->", "<!-- fault-table:end -->"


def _phrase(counts: dict[str, int], order: list[tuple[str, str]]) -> str:
    """``counts`` as "n what, ..." in ``order`` (key, words), then any other key as it is."""
    parts = [f"{counts[key]} {words}" for key, words in order if counts.get(key)]
    known = {key for key, _ in order}
    parts += [f"{n} {key}" for key, n in sorted(counts.items()) if key not in known and n]
    return ", ".join(parts) or "-"


def row(result: dict) -> str:
    requests = result["requests"]
    broken = sum(requests.get(k, 0) for k in ("lost", "twice", "wrong"))
    answered = _phrase(requests, [("ok", "answered"), ("retryable", "failed retryably (503, 502, or a retryable error)"),
                                  ("gone", "404: their session was lost with the store")])
    answered += f"; {broken} lost, answered twice or wrong"
    ms = result.get("call_ms") or {}
    if ms.get("p50") is not None:
        answered += f"; a call of a held session took {ms['p50']} ms (median), {ms['p99']} ms (p99), {ms['max']} ms at most"
    sessions = _phrase(result["sessions"], [
        ("kept", "of 3 held before the fault served after it by every process"),
        ("lost with the store, 404 everywhere", "of 3 lost with the store, 404 on every process alike"),
        ("ended by DELETE", "ended by DELETE"), ("DELETE refused retryably", "DELETEs refused retryably (503)"),
        ("ended by the fault (404)", "requests answered 404 for a lost session"),
        ("ended, then served again", "ENDED SESSIONS SERVED AGAIN"), ("split", "SPLIT BETWEEN PROCESSES")])
    tasks = dict(result["tasks"])
    started = tasks.pop("started", 0)
    tasks_text = f"{started} started: " + _phrase(tasks, [
        ("completed", "completed"), ("failed (retryable)", "failed, retryable (E_INTERRUPTED)"),
        ("forgotten with the store", "unknown (lost with the store)"), ("never final", "NEVER FINAL")])
    notes = _phrase(result["notifications"], [
        ("delivered", "delivered once"),
        ("missed, covered by a later update of note://shared",
         "missed while a bus was away, then covered by the update of the whole subscription sent when it was back"),
        ("published while no stream was open, delivered", "published while the stream was reconnecting, delivered"),
        ("published while no stream was open", "published while the stream was reconnecting, not delivered"),
        ("stream resumed", "stream resumptions"), ("missed", "MISSED"), ("delivered twice", "DELIVERED TWICE")])
    quotas = "; ".join(result["quotas"]) or "-"
    if result["problems"]:
        quotas += f" (**{len(result['problems'])} problems**)"
    return f"| {result['fault']} | {result['setup']} | {answered} | {sessions} | {tasks_text} | {notes} | {quotas} |"


def table(results: list[dict], commit: str, date: str) -> str:
    lines = [
        START,
        f"Measured on {date} at commit `{commit}` by `python tools/fault_table.py` (the fault suite, "
        "tests/chaos: three processes behind HAProxy, about 15 s of load through each fault).",
        "",
        "| fault | setup | requests | sessions | tasks | notifications | rate limits (3 an hour per client) |",
        "|---|---|---|---|---|---|---|",
        *(row(r) for r in results),
        END,
    ]
    return "\n".join(lines)


def write(results: list[dict], doc: Path = DOC) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    if dirty:
        commit += " with uncommitted changes"
    text = doc.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{doc} has no {START} ... {END} markers")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(head + table(results, commit, datetime.date.today().isoformat()) + tail)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", help="a run's results (JSON lines) instead of a new run")
    args = parser.parse_args()
    if args.source:
        path = args.source
    else:
        with tempfile.NamedTemporaryFile(prefix="mcpkit-faults-", suffix=".jsonl", delete=False) as made:
            path = made.name  # the suite appends its rows to it
        env = {**os.environ, "MCPKIT_FAULT_RESULTS": path}
        run = subprocess.run([sys.executable, "-m", "pytest", "tests/chaos", "-q", "-p", "no:cacheprovider"],
                             cwd=ROOT, env=env)
        if run.returncode != 0:
            print("the fault suite failed: the table was not written", file=sys.stderr)
            return run.returncode
    results = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    write(results)
    print(f"wrote {len(results)} rows to {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
