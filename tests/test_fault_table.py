"""docs/deployment.md's fault table (tools/fault_table.py) has a row for every fault the fault
suite runs, and the tool renders a run's results as that table."""

from __future__ import annotations

import re
from pathlib import Path

from tools import fault_table

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "tests" / "chaos" / "test_faults.py"


def recorded() -> set[tuple[str, str]]:
    """(fault, setup) of every test of the suite, as it records them."""
    text = SUITE.read_text()
    return set(re.findall(r'name="([^"]+)",\s*setup="([^"]+)"', text))


def test_the_table_has_a_row_for_every_fault_of_the_suite() -> None:
    text = fault_table.DOC.read_text()
    assert fault_table.START in text and fault_table.END in text
    block = text.split(fault_table.START, 1)[1].split(fault_table.END, 1)[0]
    assert re.search(r"Measured on \d{4}-\d\d-\d\d at commit `[0-9a-f]{7,}`", block), "the table names its run"
    rows = {tuple(cell.strip() for cell in line.split("|")[1:3]) for line in block.splitlines() if line.startswith("| ")}
    faults = recorded()
    assert len(faults) >= 6
    assert faults <= rows, f"faults without a row (run python tools/fault_table.py): {sorted(faults - rows)}"
    assert "**" not in block, "a row records problems: the table was written from a failing run"


def test_a_result_is_rendered_with_every_count(tmp_path) -> None:
    result = {"fault": "kill -9 of a server process", "setup": "Redis, AOF",
              "requests": {"ok": 300, "retryable": 2}, "sessions": {"kept": 3, "ended by DELETE": 17},
              "tasks": {"started": 6, "completed": 5, "failed (retryable)": 1},
              "notifications": {"delivered": 40, "missed, covered by a later update of note://shared": 3},
              "quotas": ["kept", "per client"], "problems": []}
    line = fault_table.row(result)
    assert line.startswith("| kill -9 of a server process | Redis, AOF | 300 answered, 2 failed retryably")
    assert "0 lost, answered twice or wrong" in line
    assert "6 started: 5 completed, 1 failed, retryable (E_INTERRUPTED)" in line
    assert "40 delivered once, 3 missed while a bus was away" in line
    assert line.endswith("| kept; per client |")
    doc = tmp_path / "doc.md"
    doc.write_text(f"before\n{fault_table.START}\nold\n{fault_table.END}\nafter\n")
    fault_table.write([result], doc)
    written = doc.read_text()
    assert written.startswith("before\n" + fault_table.START) and written.endswith(fault_table.END + "\nafter\n")
    assert "old" not in written and line in written
