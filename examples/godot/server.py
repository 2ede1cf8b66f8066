"""A Godot project server: scenes and nodes edited in a running Godot, over the bridge kit.

    GODOT_BRIDGE_PORT=6505 GODOT_BRIDGE_TOKEN=$(openssl rand -hex 16) \\
        godot3-server --path my_game -s examples/godot/bridge.gd &
    GODOT_PROJECT=my_game GODOT_BRIDGE_PORT=6505 GODOT_BRIDGE_TOKEN=... python examples/godot/server.py

Tools: ``scene`` (create, open, tree, save, close) and ``node`` (add, move, set, delete), manager
tools whose actions declare what they do, so ``MCPKIT_READ_ONLY=1`` keeps ``tree`` only and
``node.delete`` needs ``MCPKIT_ALLOW_DESTRUCTIVE=1``; they are listed only while Godot is
connected. ``engine`` (info, wait); ``run_project`` runs a project headless and returns its
output and JSON lines (needs ``ALLOW_EXTERNAL_TOOLS=1``). Paths are declared ``EnginePath``
parameters: ``res://`` paths resolved and confined to the project (``..``, symlinks out and
``.godot_mcp`` refused) before a handler runs. The project is the one Godot has open
(``GODOT_PROJECT``); ``run_project`` may name another with ``projectPath``, one inside
``GODOT_PROJECT_ROOTS``. Results are contract envelopes; each call is audited in
``<project>/.godot_mcp/audit.log``, its engine paths beside the real ones.
"""

from __future__ import annotations

import os
import sys

from mcpkit import Server
from mcpkit.bridge import EnginePaths, Project, ProjectAudit, Projects, RpcBridge, Tcp, engine_path, run_tool
from mcpkit.policy import Policy
from mcpkit.protocol.errors import E_NOT_FOUND, E_PERMISSION_DENIED, E_SCHEMA_VALIDATION

env = os.environ
if not env.get("GODOT_PROJECT") or len(env.get("GODOT_BRIDGE_TOKEN", "")) < 16:
    sys.exit("godot: set GODOT_PROJECT (the project directory) and GODOT_BRIDGE_TOKEN (16+ characters)")

PROJECT = Project(env["GODOT_PROJECT"], EnginePaths.godot())
PROJECTS = Projects(env.get("GODOT_PROJECT_ROOTS", str(PROJECT.root)).split(os.pathsep), EnginePaths.godot(),
                    argument="projectPath", default=PROJECT)
GODOT_BIN = env.get("GODOT_BIN", "godot3-server")

godot = RpcBridge(
    "Godot editor", Tcp("127.0.0.1", int(env.get("GODOT_BRIDGE_PORT", "6505"))), token=env["GODOT_BRIDGE_TOKEN"],
    errors={-32004: E_NOT_FOUND, -32009: E_PERMISSION_DENIED, -32010: E_SCHEMA_VALIDATION},
    probe_interval=float(env.get("GODOT_PROBE_INTERVAL", "2")), backoff_max=5.0,
)
server = Server(
    "godot", "1.0.0", instructions="Edit the scenes of a Godot project. Paths are res:// paths.",
    policy=Policy.secure(contract=True, audit=ProjectAudit(PROJECTS, ".godot_mcp/audit.log")), middleware=[PROJECTS],
)
Scene = engine_path(scheme="res://", suffix=".tscn")  # resolved in PROJECT, the one Godot has open
Script = engine_path(scheme="res://", must_exist=True)  # in the project run_project's projectPath names

scene = server.manager("scene", description="Godot scenes: create, open, inspect, save.", requires=godot)
node = server.manager("node", description="Nodes of an open scene.", requires=godot)
engine = server.manager("engine", description="The running Godot.", requires=godot)


@scene.action(destructive=False, open_world=False)
async def create(path: Scene, root_type: str = "Node2D") -> dict:
    """Create a scene in memory, with a root node of ``root_type``; save it with scene.save."""
    return await godot.request("scene.create", {"path": path.uri, "rootType": root_type})


@scene.action(name="open", read_only=True, open_world=False)
async def open_scene(path: Scene) -> dict:
    """Open a saved scene for editing; returns its node tree."""
    return await godot.request("scene.open", {"path": path.uri})


@scene.action(read_only=True, open_world=False)
async def tree(path: Scene) -> dict:
    """The node tree of an open scene."""
    return await godot.request("scene.tree", {"path": path.uri})


@scene.action(destructive=False, idempotent=True, open_world=False)
async def save(path: Scene) -> dict:
    """Write an open scene to its .tscn file."""
    return await godot.request("scene.save", {"path": path.uri})


@scene.action(destructive=True, open_world=False)
async def close(path: Scene) -> dict:
    """Close an open scene, discarding its unsaved changes."""
    return await godot.request("scene.close", {"path": path.uri})


@node.action(destructive=False, open_world=False)
async def add(scene: Scene, name: str, type: str = "Node", parent: str = ".") -> dict:  # noqa: A002
    """Add a node of ``type`` (a Godot class) under ``parent`` (a node path, "." for the root)."""
    return await godot.request("node.add", {"scene": scene.uri, "name": name, "type": type, "parent": parent})


@node.action(destructive=False, open_world=False)
async def move(scene: Scene, node: str, new_parent: str) -> dict:
    """Move a node (with its children) under another node."""
    return await godot.request("node.move", {"scene": scene.uri, "node": node, "newParent": new_parent})


@node.action(name="set", destructive=False, idempotent=True, open_world=False)
async def set_property(scene: Scene, node: str, property: str, value: str | float | bool | list | dict) -> dict:
    """Set a property: numbers, strings, [x, y] for Vector2, "#rrggbb" for Color, res:// for resources."""
    if isinstance(value, str) and value.startswith(("res://", "user://")):
        value = PROJECT.normalize(value)
    return await godot.request("node.set", {"scene": scene.uri, "node": node, "property": property,
                                            "value": value})


@node.action(destructive=True, open_world=False)
async def delete(scene: Scene, node: str) -> dict:
    """Delete a node and its children."""
    return await godot.request("node.delete", {"scene": scene.uri, "node": node})


@engine.action(read_only=True, open_world=False)
async def info() -> dict:
    """Godot's version and the scenes open in it."""
    return await godot.request("engine.info")


@engine.action(read_only=True, open_world=False)
async def wait(ms: int = 100) -> dict:
    """Let the engine run for ``ms`` milliseconds (physics, timers) before the next call."""
    return await godot.request("engine.wait", {"ms": max(0, min(ms, 60_000))}, timeout=ms / 1000 + 10)


@server.tool(destructive=False, open_world=False, timeout=320)
async def run_project(projectPath: str | None = None, script: Script | None = None,  # noqa: N803 - the contract's name
                      timeout_seconds: float = 60) -> dict:
    """Run a project headless: its main scene for one frame, or ``script`` (a res:// SceneTree
    script), and return the exit code, the output and the JSON lines it printed."""
    argv = [GODOT_BIN, "--path", str(PROJECTS.current().root)]
    argv += ["-s", script.uri] if script else ["--quit"]
    result = await run_tool(argv, timeout=max(1.0, min(timeout_seconds, 300.0)), max_output=200_000)
    return {"exitCode": result.exit_code, "timedOut": result.timed_out, "jsonLines": result.json_lines,
            "output": result.stdout[-8000:], "errors": result.stderr[-4000:], "truncated": result.truncated}


if __name__ == "__main__":
    godot.start()
    server.run()
