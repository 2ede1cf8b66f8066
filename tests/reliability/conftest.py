"""Figures the reliability tests measure (RSS, durations): written as JSON under pytest's
temporary directory (and to $MCPKIT_RELIABILITY_FIGURES when set), and printed at the end."""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from typing import Any

import pytest

_FIGURES: dict[str, dict[str, Any]] = {}
_WRITTEN: list[str] = []


class Figures:
    def record(self, name: str, **values: Any) -> None:
        _FIGURES.setdefault(name, {}).update(values)
        print(f"[reliability] {name}: {json.dumps(values, sort_keys=True)}")


def _environment() -> dict[str, Any]:
    return {
        "measured_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


@pytest.fixture(scope="session")
def figures(tmp_path_factory: pytest.TempPathFactory) -> Any:
    yield Figures()
    if not _FIGURES:
        return
    document = {"environment": _environment(), "figures": _FIGURES}
    targets = [str(tmp_path_factory.getbasetemp() / "reliability-figures.json")]
    if os.environ.get("MCPKIT_RELIABILITY_FIGURES"):
        targets.append(os.environ["MCPKIT_RELIABILITY_FIGURES"])
    for target in targets:
        with open(target, "w") as f:
            json.dump(document, f, indent=2, sort_keys=True)
            f.write("\n")
        _WRITTEN.append(target)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _FIGURES:
        return
    terminalreporter.section("reliability figures")
    for name, values in sorted(_FIGURES.items()):
        terminalreporter.write_line(f"{name}: {json.dumps(values, sort_keys=True)}")
    for target in _WRITTEN:
        terminalreporter.write_line(f"written to {target}")
    sys.stdout.flush()
