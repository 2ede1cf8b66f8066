"""A draft of a setup's expectation file from one run of ``mcpkit check``: its [[finding]] lines
(rule, severity, revisions), each rule's why and quote left to expected/findings.toml when it has
them and marked for review when not. A reviewer reads the draft against the server, adds a
finding's own parameters (a probe's uri, tool, code...) and the note, and only then saves it as
expected/<name>.toml: test_peers.py verifies every finding raw.

    python -m tests.check.peers.draft NAME [NAME ...]      (NAME: a setup of corpus.py)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import tomllib
from pathlib import Path

from mcpkit.check import run_checks
from tests.check.peers.corpus import NAMES, describe, peer, serving

CATALOGUE = tomllib.loads((Path(__file__).with_name("expected") / "findings.toml").read_text(encoding="utf-8"))


async def draft(name: str) -> str:
    with tempfile.TemporaryDirectory() as tmp, serving(peer(name, Path(tmp))) as (target, env):
        report = await run_checks(target, progress=False, env=env)
    rows: dict[tuple[str, str], list[str | None]] = {}
    for f in report.failed():
        rows.setdefault((f.rule, f.severity), [])
        if f.revision not in rows[(f.rule, f.severity)]:
            rows[(f.rule, f.severity)].append(f.revision)
    lines = [f'peer = "{describe(name)}"', f"exit_code = {report.exit_code}", 'note = """REVIEW"""']
    for (rule, severity), revisions in rows.items():
        lines += ["", "[[finding]]", f'rule = "{rule}"', f'severity = "{severity}"']
        if revisions != [None]:
            lines.append("revisions = [" + ", ".join(f'"{r}"' for r in revisions) + "]")
        if rule not in CATALOGUE:
            lines += ['probe = "REVIEW"', 'why = """REVIEW"""', 'quote = "REVIEW"']
        example = next(f for f in report.failed() if f.rule == rule)
        lines.append(f"# {example.message[:300]}")
    return "\n".join(lines) + "\n"


def main(names: list[str]) -> int:
    unknown = sorted(set(names) - set(NAMES))
    if unknown or not names:
        print(f"give setups of corpus.py: {', '.join(NAMES)}", file=sys.stderr)
        return 2
    for name in names:
        print(f"# expected/{name}.toml\n" + asyncio.run(draft(name)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
