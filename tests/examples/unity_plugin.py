"""A fake Unity editor plugin speaking its own protocol (examples/unity_plugin_bridge.py's
docstring): little-endian length-prefixed JSON on TCP, ``{"type": "request", "id", "command",
"parameters"}`` answered by ``{"type": "response", "id", "status", "result"|"error"}``, an
``authenticate`` command, ``ping``, ``list_commands`` and a ``commandsChanged`` event. Nothing in
it knows of JSON-RPC or of mcpkit."""

from __future__ import annotations

import threading
from typing import Any

from mcpkit.bridge import LengthPrefixed
from tests.bridge.plugins import Hangup, Plugin

TOKEN = "unity-plugin-token-0123456789"

COMMANDS: list[dict[str, Any]] = [
    {"name": "get_hierarchy", "description": "The open scene's GameObjects.", "readOnly": True,
     "parameters": {"type": "object", "properties": {"depth": {"type": "integer", "minimum": 1}}}},
    {"name": "create_gameobject", "description": "Create a GameObject in the open scene.",
     "parameters": {"type": "object", "properties": {"name": {"type": "string"}, "parent": {"type": "string"}},
                    "required": ["name"]}},
    {"name": "delete_gameobject", "description": "Delete a GameObject.", "destructive": True,
     "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
    {"name": "bake_lighting", "description": "Bake the scene's lightmaps (takes a while).",
     "parameters": {"type": "object", "properties": {"quality": {"enum": ["low", "high"]}}}},
]


class UnityPlugin:
    def __init__(self, port: int = 0, commands: list[dict[str, Any]] | None = None) -> None:
        self.commands = list(COMMANDS if commands is None else commands)
        self.objects = ["Main Camera"]
        self.crash_on_bake = False
        self.baking = threading.Event()  # set when a bake starts
        self.plugin = Plugin(self.serve, framing=LengthPrefixed(header="<I"), port=port)

    @property
    def port(self) -> int:
        return self.plugin.port

    @property
    def received(self) -> list[Any]:
        return self.plugin.received

    def start(self) -> UnityPlugin:
        self.plugin.start()
        return self

    def stop(self) -> None:
        self.plugin.stop()

    def commands_changed(self) -> None:
        self.plugin.send({"type": "event", "event": "commandsChanged"})

    async def serve(self, m: dict[str, Any]) -> list[Any]:
        assert m.get("type") == "request" and isinstance(m.get("id"), str), m  # its own shape, unchanged
        command, p = m["command"], m.get("parameters") or {}

        def ok(result: Any) -> list[Any]:
            return [{"type": "response", "id": m["id"], "status": "success", "result": result}]

        def error(code: str, message: str) -> list[Any]:
            return [{"type": "response", "id": m["id"], "status": "error", "error": {"code": code, "message": message}}]

        if command == "authenticate":
            return ok({"session": "s-1"}) if p.get("token") == TOKEN else error("unauthorized", "bad token")
        if command == "ping":
            return ok("pong")
        if command == "list_commands":
            return ok(self.commands)
        if command not in {c["name"] for c in self.commands}:
            return error("unknown_command", f"no command {command}")
        if command == "get_hierarchy":
            return ok({"objects": list(self.objects)})
        if command == "create_gameobject":
            if p["name"] in self.objects:
                return error("exists", f"a GameObject named {p['name']} exists")
            self.objects.append(p["name"])
            return ok({"created": p["name"]})
        if command == "delete_gameobject":
            if p["name"] not in self.objects:
                return error("not_found", f"no GameObject named {p['name']}")
            self.objects.remove(p["name"])
            return ok({"deleted": p["name"]})
        if command == "bake_lighting":
            self.baking.set()
            if self.crash_on_bake:
                raise Hangup  # the editor crashes in the middle of the bake
            return ok({"baked": p.get("quality", "low")})
        return error("unknown_command", command)
