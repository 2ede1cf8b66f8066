"""Engine paths (res://, user://, Assets/), projects per call, the per-project audit, headless runs."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Context, Server
from mcpkit.bridge import EnginePaths, Project, ProjectAudit, Projects, run_tool
from mcpkit.policy import Policy
from mcpkit.policy.audit import AuditLog, read_lines
from mcpkit.protocol.errors import E_NOT_FOUND, E_PERMISSION_DENIED, E_SCHEMA_VALIDATION, ToolError
from tests.harness import connect


def godot_project(base: Path, name: str) -> Path:
    root = base / name
    (root / "scenes").mkdir(parents=True)
    (root / "project.godot").write_text("config_version=4\n")
    (root / "scenes" / "main.tscn").write_text("[gd_scene format=2]\n")
    return root


@pytest.mark.req("TL-11", "RT-03")
def test_res_and_user_paths_map_into_the_project_and_escapes_are_refused(tmp_path: Path) -> None:
    root = godot_project(tmp_path, "game")
    (tmp_path / "secret.txt").write_text("x")
    os.symlink(tmp_path / "secret.txt", root / "leak.txt")
    project = Project(root, EnginePaths.godot())
    assert project.resolve("res://scenes/main.tscn", must_exist=True) == root / "scenes" / "main.tscn"
    assert project.normalize("res://scenes/../scenes/./main.tscn") == "res://scenes/main.tscn"
    assert project.resolve("res://") == root
    assert project.uri(root / "scenes") == "res://scenes"
    assert project.resolve("user://save.json") == root / ".godot_mcp" / "user" / "save.json"
    assert project.uri(root / ".godot_mcp" / "user" / "save.json") == "user://save.json"
    for bad in ("res://../secret.txt", "res://scenes/../../secret.txt", "res://leak.txt", "res:///etc/passwd",
                "user://../audit.log", "res://.godot_mcp/audit.log"):
        with pytest.raises(ToolError) as info:
            project.resolve(bad)
        assert info.value.code == E_PERMISSION_DENIED, bad
        assert str(tmp_path) not in info.value.message  # never reveals where things are
    for bad in ("/etc/passwd", "scenes/main.tscn", "file:///etc/passwd", ""):
        with pytest.raises(ToolError) as info:
            project.resolve(bad)
        assert info.value.code == E_SCHEMA_VALIDATION, bad
    with pytest.raises(ToolError) as info:
        project.resolve("res://scenes/none.tscn", must_exist=True)
    assert info.value.code == E_NOT_FOUND


def test_unity_assets_paths(tmp_path: Path) -> None:
    root = tmp_path / "unity"
    (root / "Assets" / "Scenes").mkdir(parents=True)
    (root / "ProjectSettings").mkdir()
    (root / "ProjectSettings" / "ProjectVersion.txt").write_text("m_EditorVersion: 2022.3\n")
    project = Projects([tmp_path], EnginePaths.unity()).find("unity")
    assert project.resolve("Assets/Scenes/Main.unity") == root / "Assets" / "Scenes" / "Main.unity"
    assert project.uri(root / "Assets" / "Scenes") == "Assets/Scenes"
    for bad in ("Assets/../ProjectSettings/ProjectVersion.txt", "Assets/../../x"):
        with pytest.raises(ToolError) as info:
            project.resolve(bad)
        assert info.value.code == E_PERMISSION_DENIED
    with pytest.raises(ToolError) as info:
        project.resolve("Library/cache")
    assert info.value.code == E_SCHEMA_VALIDATION


@pytest.mark.req("RT-01", "RT-03")
@pytest.mark.asyncio
async def test_projects_are_picked_per_call_from_allowed_roots_or_the_clients_roots(tmp_path: Path, wire: Any) -> None:
    allowed = tmp_path / "games"
    one = godot_project(allowed, "one")
    godot_project(allowed, "two")
    outside = godot_project(tmp_path, "elsewhere")
    (allowed / "not-a-project").mkdir()
    projects = Projects([allowed], EnginePaths.godot())
    assert projects.find("one").root == one
    assert projects.find(str(one)).root == one
    with pytest.raises(ToolError) as info:
        projects.find(str(outside))
    assert info.value.code == E_PERMISSION_DENIED
    with pytest.raises(ToolError) as info:
        projects.find("not-a-project")
    assert info.value.code == E_NOT_FOUND
    assert projects.default() is None  # two projects: the caller must say which

    server = Server("games")

    @server.tool
    async def which(ctx: Context, project: str | None = None) -> str:
        return str((await projects.pick(ctx, project)).root)

    roots = {"roots": [{"uri": one.as_uri()}, {"uri": outside.as_uri()}]}
    async with connect(server, wire, capabilities={"roots": {}}, answers={"roots/list": lambda p: roots}) as h:
        result = await h.request("tools/call", {"name": "which", "arguments": {}})
        assert result["content"][0]["text"] == str(one)  # the client's root that is allowed
        result = await h.request("tools/call", {"name": "which", "arguments": {"project": "two"}})
        assert result["content"][0]["text"] == str(allowed / "two")
    async with connect(server, wire) as h:  # no roots capability, no project named
        result = await h.request("tools/call", {"name": "which", "arguments": {}})
        assert result["isError"] is True and "Which project?" in result["content"][0]["text"]


@pytest.mark.asyncio
async def test_a_root_holding_one_project_picks_it_as_the_docs_say(tmp_path: Path) -> None:
    """docs/bridge.md: "else the only project the roots hold", not only a root that is one."""
    allowed = tmp_path / "games"
    only = godot_project(allowed, "only")
    (allowed / "not-a-project").mkdir()
    projects = Projects([allowed], EnginePaths.godot())
    assert projects.default() == Project(only, EnginePaths.godot())
    assert (await projects.pick(None, None)).root == only
    godot_project(allowed, "second")
    assert projects.default() is None


@pytest.mark.asyncio
async def test_each_calls_audit_line_goes_into_its_project(tmp_path: Path, wire: Any) -> None:
    one = godot_project(tmp_path, "one")
    two = godot_project(tmp_path, "two")
    projects = Projects([tmp_path], EnginePaths.godot())
    fallback = AuditLog(tmp_path / "server-audit.log")
    audit = ProjectAudit(projects, ".godot_mcp/audit.log", fallback=fallback)
    server = Server("games", policy=Policy(audit=audit))

    @server.tool(read_only=True)
    async def touch(project: str, scene: str, ctx: Context) -> str:
        proj = await projects.pick(ctx, project)
        return proj.normalize(scene, must_exist=True)

    async with connect(server, wire) as h:
        ok = await h.request("tools/call", {"name": "touch", "arguments": {"project": "one", "scene": "res://scenes/main.tscn"}})
        assert ok["content"][0]["text"] == "res://scenes/main.tscn"
        bad = await h.request("tools/call", {"name": "touch", "arguments": {"project": "two", "scene": "res://../x"}})
        assert bad["isError"] is True
        await h.request("tools/call", {"name": "touch", "arguments": {"project": "../..", "scene": "res://x"}})
    audit.close()
    (line_one,) = read_lines(one / ".godot_mcp" / "audit.log")
    assert line_one["tool"] == "touch" and line_one["outcome"] == "ok" and line_one["durationMs"] >= 0
    assert line_one["arguments"]["project"] == "one"
    (line_two,) = read_lines(two / ".godot_mcp" / "audit.log")
    assert line_two["outcome"] == "error" and line_two["code"] == E_PERMISSION_DENIED
    (stray,) = read_lines(tmp_path / "server-audit.log")  # a refused project name chose no file
    assert stray["arguments"]["project"] == "../.."


def test_project_audit_paths_must_stay_in_the_project(tmp_path: Path) -> None:
    projects = Projects([tmp_path], EnginePaths(schemes={"res://": "."}))
    with pytest.raises(ValueError, match="stay inside"):
        ProjectAudit(projects, "../audit.log")


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_run_tool_is_gated(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as info:
        await run_tool([sys.executable, "-c", "print(1)"], environ={})
    assert info.value.code == E_PERMISSION_DENIED and "ALLOW_EXTERNAL_TOOLS=1" in info.value.suggested_fix
    with pytest.raises(ToolError) as info:
        await run_tool(["no-such-program-here"], environ={"ALLOW_EXTERNAL_TOOLS": "1"})
    assert info.value.code == E_NOT_FOUND


@pytest.mark.asyncio
async def test_run_tool_collects_json_lines_and_exit_code() -> None:
    code = textwrap.dedent("""
        import json, sys
        print("starting")
        print(json.dumps({"scene": "main", "nodes": 3}))
        print("{not json")
        print(json.dumps([1, 2]))
        sys.stderr.write("warn\\n")
        sys.exit(3)
    """)
    result = await run_tool([sys.executable, "-c", code], environ={"ALLOW_EXTERNAL_TOOLS": "1"})
    assert result.exit_code == 3 and not result.ok and not result.timed_out and not result.truncated
    assert result.json_lines == [{"scene": "main", "nodes": 3}, [1, 2]]
    assert "starting" in result.stdout and result.stderr == "warn\n"


@pytest.mark.asyncio
async def test_run_tool_caps_output_and_kills_the_whole_group_on_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    code = textwrap.dedent(f"""
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        sys.stdout.write("x" * 50000)
        sys.stdout.flush()
        import time; time.sleep(60)
    """)
    result = await run_tool([sys.executable, "-c", code], timeout=3, max_output=1000,
                            environ={"ALLOW_EXTERNAL_TOOLS": "1"})
    assert result.timed_out and result.exit_code is None
    assert result.truncated and len(result.stdout) == 1000
    grandchild = int(pidfile.read_text())
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        # a zombie is dead too: its parent (killed) no longer reaps it, init does
        try:
            state = Path(f"/proc/{grandchild}/stat").read_text().split()[2]
        except OSError:
            break
        if state == "Z":
            break
        assert asyncio.get_running_loop().time() < deadline, "the grandchild outlived the run"
        await asyncio.sleep(0.05)


