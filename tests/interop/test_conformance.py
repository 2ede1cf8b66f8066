"""The official MCP conformance suite (0.1.16, every server scenario) against the reference server."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import component_missing

#: each test starts what it needs: a parallel run spreads them over its workers (tests/conftest.py)
SPLIT_ACROSS_WORKERS = True
ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "tools" / "conformance"

pytestmark = pytest.mark.interop


SERVE = [sys.executable, "-m", "mcpkit", "serve", "--http", "127.0.0.1:{port}"]
#: the reference server's app on uvicorn's own command line with what uvicorn[standard] installs
#: (uvloop and httptools), as an ASGI deployment runs ``server.http_app()``
UVICORN_STANDARD = [sys.executable, "-m", "uvicorn", "tests.interop.reference_app:app", "--host", "127.0.0.1",
                    "--port", "{port}", "--loop", "uvloop", "--http", "httptools", "--log-level", "warning"]


def _run(*args: str, env: dict[str, str] | None = None, serve: list[str] = SERVE) -> subprocess.CompletedProcess[str]:
    if shutil.which("npm") is None:
        component_missing("npm is needed to install the conformance suite (apt-get install npm)")
    return subprocess.run(
        [str(RUNNER), *args, "--", *serve],
        capture_output=True, text=True, timeout=900, env={**os.environ, **(env or {})}, cwd=ROOT,
    )


@pytest.mark.req("BP-17", "LC-01", "LC-02", "PG-01", "TL-09", "TL-10", "RS-03", "PM-03", "CP-02", "LG-02", "PR-01",
                 "SA-01", "EL-02", "JS-01", "HS-01", "HS-02", "HL-01", "HL-06", "HL-07", "HL-15")
@pytest.mark.usefixtures("serving_loop")
def test_conformance_suite_passes_every_scenario() -> None:
    done = _run("--suite", "all")
    summary = re.findall(r"^conformance: (\d+) passed, (\d+) failed$", done.stdout, re.M)
    assert summary, f"no summary line; output:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    passed, failed = map(int, summary[-1])
    assert (passed, failed) == (32, 0), done.stdout[-4000:]
    assert done.returncode == 0


@pytest.mark.req("VN-01", "VN-02", "VN-03", "MT-05", "MT-08", "BP-10", "CA-01", "HM-11", "HM-12", "HM-13",
                 "HM-15", "HM-16", "HM-19", "HM-20", "MR-03", "MR-06", "RS-08", "SB-02", "TX-01", "TX-02",
                 "TX-03", "TX-04", "TX-05", "TX-07")
@pytest.mark.usefixtures("serving_loop")
def test_the_2026_07_28_conformance_suite_passes_every_scenario() -> None:
    """Suite 0.2.0-alpha.12 (pinned): both eras on one endpoint, the tasks extension included."""
    done = _run("--suite", "all", env={"CONFORMANCE_VERSION": "0.2.0-alpha.12"})
    summary = re.findall(r"^conformance: (\d+) passed, (\d+) failed$", done.stdout, re.M)
    assert summary, f"no summary line; output:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    passed, failed = map(int, summary[-1])
    assert (passed, failed) == (65, 0), done.stdout[-4000:]
    assert done.returncode == 0


@pytest.mark.parametrize(("version", "scenarios"), [("0.1.16", 32), ("0.2.0-alpha.12", 65)])
def test_both_suites_pass_against_the_app_on_uvicorn_standard(version: str, scenarios: int) -> None:
    """``server.http_app()`` served by uvicorn itself on uvloop and httptools: server requests
    (sampling, elicitation) hand off between the handlers' threads and a loop that is not
    asyncio's, and every scenario after them is still answered."""
    for module in ("uvloop", "httptools"):
        try:
            __import__(module)
        except ImportError:
            component_missing(f"{module} is not installed: pip install -e '.[dev]' installs it")
    done = _run("--suite", "all", env={"CONFORMANCE_VERSION": version}, serve=UVICORN_STANDARD)
    summary = re.findall(r"^conformance: (\d+) passed, (\d+) failed$", done.stdout, re.M)
    assert summary, f"no summary line; output:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert tuple(map(int, summary[-1])) == (scenarios, 0), done.stdout[-4000:]
    assert done.returncode == 0


SKILL_SCENARIOS = ("sep-2640-skills-enumeration", "sep-2640-skills-manifest", "sep-2640-skills-directory")


@pytest.mark.usefixtures("serving_loop")
def test_every_check_of_the_skills_scenarios_succeeds(tmp_path: Path) -> None:
    """SEP-2640 (suite 0.2.0-alpha.12): a scenario passes with SKIPPED checks (an undeclared
    extension skips them all), so each check of the three is read: every one SUCCESS."""
    done = _run(*SKILL_ARGS, "--output-dir", str(tmp_path), env={"CONFORMANCE_VERSION": "0.2.0-alpha.12"})
    assert done.returncode == 0, done.stdout[-4000:]
    assert_every_skill_check_succeeds(tmp_path)


SKILL_ARGS = [a for s in SKILL_SCENARIOS for a in ("--scenario", s)]


def assert_every_skill_check_succeeds(out: Path) -> None:
    """Every check of the three SEP-2640 scenarios, as the runner wrote them under ``out``, ran
    and is a SUCCESS (tests/interop/test_proxy_interop.py reads the proxy's the same way)."""
    import json

    statuses: dict[str, dict[str, str]] = {}
    for checks in out.glob("*/checks.json"):
        scenario = next(s for s in SKILL_SCENARIOS if checks.parent.name.startswith(f"server-{s}-"))
        statuses[scenario] = {c["id"]: c["status"] for c in json.loads(checks.read_text())}
    assert set(statuses) == set(SKILL_SCENARIOS)
    assert {s: len(c) for s, c in statuses.items()} == {
        "sep-2640-skills-enumeration": 32, "sep-2640-skills-manifest": 6, "sep-2640-skills-directory": 7}
    failed = {s: {i: v for i, v in c.items() if v != "SUCCESS"} for s, c in statuses.items()}
    assert failed == {s: {} for s in SKILL_SCENARIOS}
    # the checks that need the 2026-07-28 cache hints ran (they are SKIPPED on older revisions)
    assert statuses["sep-2640-skills-enumeration"]["sep-2640-skills-list-cache-attributes"] == "SUCCESS"
    assert statuses["sep-2640-skills-enumeration"]["sep-2640-skills-get-cache-attributes"] == "SUCCESS"
