"""EnginePath: a declared engine path parameter, resolved in the call's project, confined, audited;
the project picked once per call by the Projects middleware, as docs/bridge.md says."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.bridge import EngineFile, EnginePath, EnginePaths, Project, ProjectAudit, Projects, engine_path
from mcpkit.policy import Policy
from mcpkit.policy.audit import read_lines
from mcpkit.protocol.errors import E_PERMISSION_DENIED, E_SCHEMA_VALIDATION
from tests.bridge.test_paths_audit_headless import godot_project
from tests.harness import connect


async def call(h: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    return await h.request("tools/call", {"name": tool, "arguments": arguments})  # type: ignore[no-any-return]


def games(tmp_path: Path, *names: str) -> Path:
    allowed = tmp_path / "games"
    allowed.mkdir(parents=True)
    for name in names:
        godot_project(allowed, name)
    return allowed


def served(projects: Projects, ran: list[Any], **policy: Any) -> Server:
    server = Server("games", policy=Policy(contract=True, **policy), middleware=[projects])

    @server.tool
    def scene(path: engine_path(scheme="res://", suffix=".tscn"), projectPath: str | None = None) -> str:  # noqa: N803
        ran.append(path)
        return f"{path.uri} {path}"

    @server.tool
    def where(projectPath: str | None = None) -> str:  # noqa: N803
        return str(projects.current().root)

    return server


@pytest.mark.req("TL-11", "RT-03")
@pytest.mark.asyncio
async def test_an_engine_path_parameter_is_resolved_in_the_project_and_escapes_never_reach_the_handler(
        tmp_path: Path, wire: Any) -> None:
    allowed = games(tmp_path, "one")
    root = allowed / "one"
    (tmp_path / "secret.tscn").write_text("x")
    os.symlink(tmp_path / "secret.tscn", root / "leak.tscn")
    os.symlink(tmp_path, root / "out")
    ran: list[Any] = []
    server = served(Projects([allowed], EnginePaths.godot(), argument="projectPath"), ran)
    async with connect(server, wire) as h:
        ok = await call(h, "scene", path="res://scenes/../scenes/main.tscn")
        assert ok["structuredContent"]["result"] == f"res://scenes/main.tscn {root / 'scenes' / 'main.tscn'}"
        assert ran[0].read_text() == "[gd_scene format=2]\n"  # a confined path: its reads go through the sandbox
        for bad in ("res://../secret.tscn", "res://scenes/../../secret.tscn", "res://leak.tscn",
                    "res://out/secret.tscn", "res:///etc/x.tscn", "res://.godot_mcp/x.tscn"):
            refused = await call(h, "scene", path=bad)
            assert refused["isError"] is True, bad
            assert refused["structuredContent"]["error"]["code"] == E_PERMISSION_DENIED, bad
            assert str(tmp_path) not in refused["content"][0]["text"]
        for bad in ("user://save.tscn", "res://scenes/main.gd", "scenes/main.tscn"):
            refused = await call(h, "scene", path=bad)
            assert refused["structuredContent"]["error"]["code"] == E_SCHEMA_VALIDATION, bad
    assert len(ran) == 1  # nothing refused reached the handler


@pytest.mark.asyncio
async def test_the_project_is_the_named_one_else_the_open_one_else_the_only_one_else_the_clients(
        tmp_path: Path, wire: Any) -> None:
    # docs/bridge.md: "else the only project the roots hold": a root holding one project picks it
    alone = games(tmp_path / "a", "only")
    server = served(Projects([alone], EnginePaths.godot(), argument="projectPath"), [])
    async with connect(server, wire) as h:
        assert (await call(h, "where"))["structuredContent"]["result"] == str(alone / "only")

    allowed = games(tmp_path / "b", "one", "two")
    projects = Projects([allowed], EnginePaths.godot(), argument="projectPath")
    server = served(projects, [])
    roots = {"roots": [{"uri": (allowed / "two").as_uri()}]}
    async with connect(server, wire, capabilities={"roots": {}}, answers={"roots/list": lambda p: roots}) as h:
        assert (await call(h, "where", projectPath="one"))["structuredContent"]["result"] == str(allowed / "one")
        assert (await call(h, "where"))["structuredContent"]["result"] == str(allowed / "two")  # the client's root
    async with connect(server, wire) as h:  # two projects, none named, no roots: the argument to send
        refused = await call(h, "scene", path="res://scenes/main.tscn")
        error = refused["structuredContent"]["error"]
        assert error["code"] == E_SCHEMA_VALIDATION
        assert "'projectPath'" in error["message"] and "projectPath=" in error["suggestedFix"]
        assert "'project'" not in error["message"]
        assert (await call(h, "where", projectPath="../..")).get("isError") is True

    opened = Project(allowed / "one", EnginePaths.godot())  # the project an editor has open
    server = served(Projects([allowed], EnginePaths.godot(), argument="projectPath", default=opened), [])
    async with connect(server, wire) as h:
        assert (await call(h, "where"))["structuredContent"]["result"] == str(allowed / "one")
        assert (await call(h, "where", projectPath="two"))["structuredContent"]["result"] == str(allowed / "two")


@pytest.mark.asyncio
async def test_the_audit_line_shows_the_engine_path_and_the_real_one_in_the_calls_project(
        tmp_path: Path, wire: Any) -> None:
    allowed = games(tmp_path, "one", "two")
    projects = Projects([allowed], EnginePaths.godot(), argument="projectPath")
    audit = ProjectAudit(projects, ".godot_mcp/audit.log")
    async with connect(served(projects, [], audit=audit), wire) as h:
        await call(h, "scene", path="res://scenes/./main.tscn", projectPath="two")
        await call(h, "scene", path="res://../one/scenes/main.tscn", projectPath="two")
    audit.close()
    ok, refused = read_lines(allowed / "two" / ".godot_mcp" / "audit.log")
    assert ok["outcome"] == "ok" and ok["project"] == str(allowed / "two")
    assert ok["paths"] == [{"engine": "res://scenes/./main.tscn",
                            "resolved": str(allowed / "two" / "scenes" / "main.tscn")}]
    assert refused["outcome"] == "denied" and refused["code"] == E_PERMISSION_DENIED
    assert refused["paths"] == [{"engine": "res://../one/scenes/main.tscn", "resolved": None}]
    assert not (allowed / "one" / ".godot_mcp" / "audit.log").exists()


def test_glob_leaves_out_the_servers_folders_and_dot_folders_unless_asked(tmp_path: Path) -> None:
    root = godot_project(tmp_path, "game")
    for hidden in (".godot_mcp/user", ".import", ".git"):
        (root / hidden).mkdir(parents=True)
        (root / hidden / "x.tscn").write_text("x")
    (root / ".godot_mcp" / "audit.log").write_text("{}\n")
    os.symlink(tmp_path, root / "out")
    project = Project(root, EnginePaths.godot())
    assert project.glob("**/*.tscn") == ["res://scenes/main.tscn"]
    assert project.glob("*") == ["res://project.godot", "res://scenes"]  # 'out' leads outside: not named
    assert project.glob("**/*.tscn", hidden=True) == ["res://.git/x.tscn", "res://scenes/main.tscn"]
    assert not any(".godot_mcp" in uri or "audit" in uri for uri in project.glob("**/*", hidden=True))
    assert project.glob("*.tscn", "user://") == ["user://x.tscn"]  # user:// is judged from its own root
    top = EngineFile._make(project.resolve("res://"), project._box("res://"))
    assert [p.uri for p in top.rglob("*.tscn")] == ["res://scenes/main.tscn"]


def test_engine_path_is_a_string_in_the_schema() -> None:
    server = Server("s")

    @server.tool
    def f(path: EnginePath) -> str:
        return str(path)

    assert server._tools["f"].input_schema["properties"]["path"]["type"] == "string"


@pytest.mark.asyncio
async def test_a_nested_call_picks_its_own_project_and_leaves_its_callers(tmp_path: Path, wire: Any) -> None:
    from mcpkit import Context  # imported here on purpose: hints that do not resolve still declare projectPath

    allowed = games(tmp_path, "one", "two")
    projects = Projects([allowed], EnginePaths.godot(), argument="projectPath")
    server = served(projects, [])

    @server.tool
    async def both(ctx: Context, projectPath: str | None = None) -> list[str]:  # noqa: N803
        inner = await ctx.call_tool_async("where", {"projectPath": "two"})
        return [inner["structuredContent"]["result"], str(projects.current().root)]

    async with connect(server, wire) as h:
        answer = await call(h, "both", projectPath="one")
    assert answer["structuredContent"]["ok"] is True, answer
    assert answer["structuredContent"]["result"] == [str(allowed / "two"), str(allowed / "one")]
