"""A Unity editor bridge: the tools are whatever the editor plugin publishes, mirrored live.

    UNITY_BRIDGE_TOKEN=... UNITY_PROJECT=~/MyGame python examples/unity_bridge.py

The editor plugin listens on 127.0.0.1 (``UNITY_BRIDGE_PORT``, 6400), speaks JSON-RPC in
length-prefixed frames, and publishes its commands with ``tools/list`` in its own format
(``command``, ``summary``, ``args``, ``readOnly``); installing a package or opening a window
adds commands, and the plugin says so with ``notifications/tools/list_changed`` or a new
``schemaVersion``. This server lists exactly those tools (schemas enforced), one
``list_changed`` per change, hides them while the editor is closed, and waits for the editor
before answering the first ``tools/list``. ``read_asset`` reads text assets by their
``Assets/`` path, confined to the project.
"""

from __future__ import annotations

import os
from typing import Any

from mcpkit import Server
from mcpkit.bridge import EnginePaths, LengthPrefixed, Project, RpcBridge, Tcp
from mcpkit.policy import Policy
from mcpkit.protocol.errors import E_NOT_FOUND, E_PERMISSION_DENIED, E_SCHEMA_VALIDATION

unity = RpcBridge(
    "Unity editor", Tcp("127.0.0.1", int(os.environ.get("UNITY_BRIDGE_PORT", "6400"))),
    framing=LengthPrefixed(), token=os.environ.get("UNITY_BRIDGE_TOKEN"),
    errors={"not_found": E_NOT_FOUND, "locked": E_PERMISSION_DENIED, "invalid": E_SCHEMA_VALIDATION},
    probe_interval=float(os.environ.get("UNITY_PROBE_INTERVAL", "2")), backoff_max=5.0,
)
server = Server("unity", "1.0.0", policy=Policy.secure(audit=False),
                instructions="Drive the open Unity editor. Asset paths start with Assets/.")


def unity_command(d: dict[str, Any]) -> dict[str, Any] | None:
    """The plugin's command descriptors as MCP tools (standard ones pass through)."""
    if "command" not in d:
        return d if "name" in d else None
    read_only = bool(d.get("readOnly"))
    return {"name": d["command"], "description": d.get("summary"),
            "inputSchema": {"type": "object", "properties": d.get("args", {}), "required": d.get("required", [])},
            "annotations": {"readOnlyHint": read_only, "destructiveHint": bool(d.get("destructive")),
                            "openWorldHint": False}}


mirror = server.mirror(unity, adapt=unity_command, first_sync_timeout=10, timeout=60)

if os.environ.get("UNITY_PROJECT"):
    project = Project(os.environ["UNITY_PROJECT"], EnginePaths.unity())

    @server.tool(read_only=True, open_world=False, max_result_bytes=200_000)
    def read_asset(path: str) -> str:
        """Read a text asset (a script, a .unity scene, a .prefab) by its Assets/ path."""
        return project.resolve(path, must_exist=True).read_text(encoding="utf-8", errors="replace")[:190_000]


if __name__ == "__main__":
    unity.start()
    server.run()
