"""A Unity editor plugin that speaks its own protocol, bridged as it is: nothing rewritten on its side.

    UNITY_PLUGIN_TOKEN=... mcpkit serve examples/unity_plugin_bridge.py

The plugin (a C# TCP server in the editor) listens on 127.0.0.1 (``UNITY_PLUGIN_PORT``, 6401).
Its frames are a 4-byte little-endian length (C#'s BinaryWriter) and UTF-8 JSON; its messages
are its own, not JSON-RPC:

    -> {"type": "request", "id": "7", "command": "create_gameobject", "parameters": {"name": "Player"}}
    <- {"type": "response", "id": "7", "status": "success", "result": {"created": "Player"}}
    <- {"type": "response", "id": "7", "status": "error", "error": {"code": "exists", "message": "..."}}
    <- {"type": "event", "event": "commandsChanged"}

A session opens with ``authenticate`` (the token), ``ping`` tells it is alive, and
``list_commands`` answers with the commands it offers (``name``, ``description``,
``parameters`` as a JSON Schema, ``readOnly``, ``destructive``). This server lists exactly those
as tools, re-reads them on ``commandsChanged``, hides them while the editor is closed, and maps
the plugin's error codes onto the tool contract's.
"""

from __future__ import annotations

import os
from typing import Any

from mcpkit import Server
from mcpkit.bridge import Fields, LengthPrefixed, RpcBridge, Tcp
from mcpkit.policy import Policy
from mcpkit.protocol.errors import E_NOT_FOUND, E_PERMISSION_DENIED, E_SCHEMA_VALIDATION

# The plugin's message shape, field by field; its one event re-reads the tool list.
plugin_protocol = Fields(method="command", params="parameters", id="id", result="result", error="error",
                         event="event", events={"commandsChanged": "notifications/tools/list_changed"},
                         constant={"type": "request"}, string_ids=True)

unity = RpcBridge(
    "Unity editor", Tcp("127.0.0.1", int(os.environ.get("UNITY_PLUGIN_PORT", "6401"))),
    framing=LengthPrefixed(header="<I"), codec=plugin_protocol,
    hello="authenticate", protocol_version=None, token=os.environ.get("UNITY_PLUGIN_TOKEN"),
    errors={"not_found": E_NOT_FOUND, "exists": E_PERMISSION_DENIED, "invalid": E_SCHEMA_VALIDATION},
    probe_interval=float(os.environ.get("UNITY_PROBE_INTERVAL", "2")), backoff_max=5.0,
)
server = Server("unity-plugin", "1.0.0", policy=Policy.secure(audit=False),
                instructions="Drive the open Unity editor through its plugin.")


def unity_command(d: dict[str, Any]) -> dict[str, Any] | None:
    """A plugin command as an MCP tool, its annotations read from the plugin's flags."""
    if not isinstance(d.get("name"), str):
        return None
    return {"name": d["name"], "description": d.get("description"),
            "inputSchema": d.get("parameters") or {"type": "object"},
            "annotations": {"readOnlyHint": bool(d.get("readOnly")), "destructiveHint": bool(d.get("destructive")),
                            "openWorldHint": False}}


mirror = server.mirror(unity, list_method="list_commands", resources=False, adapt=unity_command,
                       first_sync_timeout=10, timeout=60)
unity.start()  # here, not under __main__: `mcpkit serve` and `mcpkit check` import this file

if __name__ == "__main__":
    server.run()
