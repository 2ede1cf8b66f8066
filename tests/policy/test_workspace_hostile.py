"""examples/workspace.py against what a hostile review tried: a catastrophic regex in ``search``
(item 2), glob patterns that climb out in ``list_files`` (item 8) and a hard link to an outside
file (item 19), each over stdio with the server as a subprocess."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tests.policy.test_workspace_example import call, env_of, project, start  # noqa: F401 - fixture
from tests.test_stdio import serve  # noqa: F401 - the fixture

STEP = 10.0  # a hang guard, never a performance assertion
CATASTROPHIC = r"(\w+\s?)*$"


def answer_while_pinging(proc: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool, ping while it runs (each ping must be answered), and return its result."""
    rid = proc.request("tools/call", {"name": name, "arguments": arguments})
    others: list[Any] = []
    for _ in range(3):
        ping = proc.request("ping")
        assert proc.answer(ping, timeout=STEP, others=others)["result"] == {}, "ping unanswered"
    done = [m for m in others if m.get("id") == rid]
    result: dict[str, Any] = done[0]["result"] if done else proc.answer(rid, timeout=STEP)["result"]
    return result


def test_a_catastrophic_regex_neither_hangs_the_search_nor_the_server(serve, project):  # noqa: F811
    (project / "long.py").write_text("x = 1\n" + "a_very_long_identifier" * 3 + "_" * 30 + "!\n")
    proc = start(serve, project)
    found = answer_while_pinging(proc, "search", {"query": CATASTROPHIC, "regex": True})
    assert env_of(found)["ok"] is True
    assert "long.py" in {m["path"] for m in env_of(found)["result"]}  # RE2 answers; re would not for hours
    via_manager = answer_while_pinging(proc, "files", {"action": "search", "query": CATASTROPHIC, "regex": True})
    assert env_of(via_manager)["ok"] is True
    refused = call(proc, "search", {"query": r"(a)\1", "regex": True})  # a backreference: not RE2
    assert env_of(refused)["error"]["code"] == "E_SCHEMA_VALIDATION"
    assert proc.finish() == 0


def test_without_re2_regex_search_is_refused_with_the_fix(serve, project, tmp_path, monkeypatch):  # noqa: F811
    (tmp_path / "re2.py").write_text("raise ImportError('google-re2 is not installed here')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    proc = start(serve, project)
    refused = call(proc, "search", {"query": CATASTROPHIC, "regex": True})
    error = env_of(refused)["error"]
    assert error["code"] == "E_UNSUPPORTED" and "mcpkit[regex]" in error["suggestedFix"]
    plain = call(proc, "search", {"query": "hello"})
    assert [m["path"] for m in env_of(plain)["result"]] == ["README.md", "src/main.py"]
    assert proc.finish() == 0


@pytest.mark.parametrize("pattern", ["../*", "../../../../etc/pass*", "src/../../*", "/etc/*", "**/../../*"])
def test_list_files_patterns_cannot_walk_out_of_the_root(serve, project, pattern):  # noqa: F811
    proc = start(serve, project)
    for name, args in (("list_files", {"pattern": pattern}), ("list_files", {"pattern": pattern, "recursive": True}),
                       ("files", {"action": "list", "pattern": pattern})):
        result = call(proc, name, args)
        text = json.dumps(result)
        assert "outside.txt" not in text and "passwd" not in text, (name, args, text[:500])
        assert env_of(result)["error"]["code"] == "E_PERMISSION_DENIED", (name, args)
    listed = env_of(call(proc, "list_files", {"pattern": "*.md", "recursive": True}))["result"]
    assert [e["path"] for e in listed] == ["README.md"]
    assert proc.finish() == 0


def test_a_hard_link_to_an_outside_file_is_not_read(serve, project):  # noqa: F811
    os.link(project.parent / "outside.txt", project / "linked.txt")
    proc = start(serve, project)
    refused = call(proc, "read_file", {"path": "linked.txt"})
    assert env_of(refused)["error"]["code"] == "E_PERMISSION_DENIED" and "hard link" in env_of(refused)["error"]["message"]
    found = env_of(call(proc, "search", {"query": "OUTSIDE"}))["result"]
    assert found == []
    assert (project.parent / "outside.txt").read_text() == "OUTSIDE-CONTENT"
    assert proc.finish() == 0
