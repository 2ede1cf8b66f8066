"""The compliance machinery: the ``req`` marker plugin, the checklist parser, the reason file and
``docs/compliance.md`` (written by ``tools/compliance.py``)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.plugins.compliance import REQUIREMENTS_PATH, load_checklist, parse_checklist

ROOT = Path(__file__).resolve().parent.parent


def _env() -> dict[str, str]:
    """The environment for a child Python: no PYTEST_* leaking in, the repo importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.pop("MCPKIT_COMPLIANCE_COLLECTING", None)
    paths = [str(ROOT), str(ROOT / "src")]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _load_tool():
    spec = importlib.util.spec_from_file_location("mcpkit_compliance_tool", ROOT / "tools" / "compliance.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while the class is built
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- docs/compliance.md


def test_compliance_doc_is_current_and_complete():
    """docs/compliance.md matches the markers and reasons, and every requirement is accounted for."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "compliance.py"), "--check"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (
        "python tools/compliance.py --check failed:\n" + proc.stdout + proc.stderr
    )


def test_generator_refuses_to_collect_inside_pytest():
    tool = _load_tool()
    with pytest.raises(RuntimeError, match="subprocess"):
        tool.collect_coverage()


# --------------------------------------------------------------------------- the req marker plugin


def _run_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.plugins.compliance", "-p", "no:cacheprovider",
         f"--rootdir={tmp_path}", "-q", *args],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "source, nodeid",
    [
        (
            """
            import pytest

            @pytest.mark.req("BP-05")
            def test_known():
                pass

            @pytest.mark.req("BP-05", "ZZ-99")
            def test_unknown():
                pass
            """,
            "test_markers.py::test_unknown",
        ),
        (
            """
            import pytest

            @pytest.mark.req("ZZ-99")
            class TestGroup:
                def test_in_class(self):
                    pass
            """,
            "test_markers.py::TestGroup::test_in_class",
        ),
        (
            """
            import pytest

            @pytest.mark.parametrize("x", [1, pytest.param(2, marks=pytest.mark.req("ZZ-99"))])
            def test_param(x):
                pass
            """,
            "test_markers.py::test_param[2]",
        ),
        (
            """
            import pytest

            pytestmark = pytest.mark.req("ZZ-99")

            def test_module_marked():
                pass
            """,
            "test_markers.py::test_module_marked",
        ),
    ],
    ids=["function", "class", "param", "module"],
)
def test_unknown_requirement_id_is_a_collection_error(tmp_path, source, nodeid):
    (tmp_path / "test_markers.py").write_text(textwrap.dedent(source))
    proc = _run_pytest(tmp_path, "test_markers.py")
    output = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "error during collection" in output, output
    assert f"{nodeid}: unknown requirement id 'ZZ-99'" in output, output
    assert "passed" not in output, output


def test_req_marker_without_ids_is_a_collection_error(tmp_path):
    (tmp_path / "test_markers.py").write_text(
        "import pytest\n\n@pytest.mark.req()\ndef test_nothing():\n    pass\n"
    )
    proc = _run_pytest(tmp_path, "test_markers.py")
    assert proc.returncode != 0
    assert "test_markers.py::test_nothing: @pytest.mark.req() names no requirement id" in proc.stdout + proc.stderr


def test_marker_added_after_collection_is_checked_too(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n"
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        item.add_marker(pytest.mark.req('ZZ-98'))\n"
    )
    (tmp_path / "test_markers.py").write_text("def test_plain():\n    pass\n")
    proc = _run_pytest(tmp_path, "test_markers.py")
    output = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert "test_markers.py::test_plain: unknown requirement id 'ZZ-98'" in output, output


def test_known_requirement_ids_collect_and_run(tmp_path):
    (tmp_path / "test_markers.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.req('BP-05', 'ST-02')\n"
        "def test_known():\n    pass\n"
    )
    proc = _run_pytest(tmp_path, "test_markers.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


# --------------------------------------------------------------------------- the checklist


def test_checklist_parses_every_item_once():
    checklist = load_checklist()
    text = REQUIREMENTS_PATH.read_text(encoding="utf-8")
    listed = re.findall(r"^- \*\*([A-Z]+-\d+)\*\*", text, flags=re.M)
    assert len(checklist.requirements) == len(listed) == len(set(listed)) == 295
    by_id = checklist.by_id()
    assert (by_id["BP-01"].level, by_id["BP-01"].revisions, by_id["BP-01"].section) == ("MUST", "all", "1")
    assert by_id["BP-04"].level == "MUST NOT"
    assert by_id["HL-21"].level == "SHOULD"
    assert by_id["ST-02"].section == "4.1"
    assert by_id["SEC-01"].revisions == "2025-06-18+"
    assert by_id["HL-04"].revisions == "2025-03-26, 2025-06-18, 2025-11-25"  # from its section
    assert by_id["BP-08"].summary == "`error.message` is a short, single sentence."
    assert [s.number for s in checklist.sections][:3] == ["1", "2", "2.1"]


def test_checklist_parser_rejects_duplicates():
    with pytest.raises(ValueError, match="defined twice"):
        parse_checklist("## 1. A\n\n- **AA-01** MUST. x · rev all.\n- **AA-01** MUST. y · rev all.\n")


def test_spec_copies_have_the_recorded_hashes():
    readme = (ROOT / "spec" / "README.md").read_text(encoding="utf-8")
    recorded = dict(
        (name, digest) for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", readme, flags=re.M)
    )
    expected = {"requirements.md"} | {
        f"{rev}/schema.json" for rev in ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
    }
    assert set(recorded) == expected
    for name, digest in recorded.items():
        assert hashlib.sha256((ROOT / "spec" / name).read_bytes()).hexdigest() == digest, name


# --------------------------------------------------------------------------- the reason file


def _reasons(tmp_path: Path, text: str, known=("AA-01", "AA-02", "AA-03", "BB-01", "BB-10")):
    tool = _load_tool()
    path = tmp_path / "not-covered.toml"
    path.write_text(textwrap.dedent(text))
    return tool, tool.load_reasons(path, known)


def test_reason_precedence_exact_then_range_then_longest_glob(tmp_path):
    _, (rules, problems) = _reasons(
        tmp_path,
        """
        "AA-*" = "glob"
        "AA-0*" = "longer glob"
        "AA-02..AA-03" = "range"
        "AA-03" = "exact"
        """,
    )
    assert problems == []
    assert [rules.lookup(i) for i in ("AA-01", "AA-02", "AA-03", "BB-01")] == [
        "longer glob", "range", "exact", None,
    ]


@pytest.mark.parametrize(
    "key, problem",
    [
        ('"*"', "catch-all"),
        ('"*-*"', "catch-all"),
        ('"ZZ-01"', "no requirement has this id"),
        ('"ZZ-*"', "matches no requirement"),
        ('"AA-01..BB-10"', "one prefix"),
        ('"AA-03..AA-01"', "reversed"),
    ],
)
def test_reason_file_problems_are_reported(tmp_path, key, problem):
    _, (_, problems) = _reasons(tmp_path, f'{key} = "some reason"\n')
    assert len(problems) == 1 and problem in problems[0], problems


def test_requirement_without_test_or_reason_is_reported(tmp_path):
    tool = _load_tool()
    checklist = parse_checklist(
        "## 1. One\n\n- **AA-01** MUST. First. · rev all.\n- **AA-02** SHOULD. Second. · rev L.\n"
        "\n### 1.1 Sub\n\n- **AA-03** MAY. Third | piped. · rev M.\n"
    )
    rules, problems = tool.load_reasons(tmp_path / "missing.toml", checklist.ids)
    assert problems and "does not exist" in problems[0]
    rules = tool.ReasonRules({"AA-03": "Not served yet."}, [], [])
    report = tool.build_report(checklist, {"AA-01": ["tests/test_a.py::test_b"]}, rules)
    assert report.missing == ["AA-02"]
    text = tool.render(report)
    assert "| AA-01 | MUST | First. | all | `tests/test_a.py::test_b` |" in text
    assert "| AA-02 | SHOULD | Second. | L | **NO TEST AND NO REASON** |" in text
    assert "| AA-03 | MAY | Third \\| piped. | M | not covered: Not served yet. |" in text
    assert "| 1. One | 3 | 1 | 1 | 1 |" in text
    assert tool.render(report) == text  # deterministic


def test_short_text_keeps_markdown_balanced():
    tool = _load_tool()
    long = "Use **bold** and `code spans` " * 10
    short = tool._short(long)
    assert len(short) <= tool.SUMMARY_CHARS + 2
    assert short.count("`") % 2 == 0 and "**" not in short and short.endswith("…")
