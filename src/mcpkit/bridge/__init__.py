"""The bridge kit: MCP servers in front of something else (an editor plugin, an engine, an API).

- :class:`RpcBridge` — a supervised link over :class:`Tcp`, :class:`Unix`, a
  :class:`Subprocess`' stdio (framed as :class:`NdJson` or :class:`LengthPrefixed`) or a
  :class:`WebSocket`, speaking JSON-RPC or the plugin's own shape (:class:`Fields`,
  :class:`Custom`): handshake
  with a token, request ids, timeouts, cancellation, errors mapped to contract codes, reconnects
  and a breaker (supervision is :class:`mcpkit.policy.Bridge`'s).
- :class:`Mirror` (``server.mirror(bridge)``) — the server's tools and resources kept equal to
  the backend's.
- :class:`EnginePaths` / :class:`Projects` — ``res://``, ``user://`` and ``Assets/`` paths
  mapped into a project root, projects picked per call from allowed roots or the client's roots;
  :data:`EnginePath` / :func:`engine_path` declare such a parameter, bound to the real path.
- :class:`ProjectAudit` — the audit trail written inside the project each call works on.
- :class:`Upstream` — an HTTP API client (httpx) with retries on 429/5xx, Retry-After, a breaker
  and upstream statuses mapped to contract codes.
- :func:`tools_from` (``server.openapi(document)``) — a tool for each operation of an OpenAPI
  document, called through an :class:`Upstream`.
- :func:`run_tool` — run a tool binary headless with a timeout, output limits and JSON lines.

Names are imported lazily: importing this package costs nothing until one is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports

__all__ = [
    "Answer",
    "Call",
    "Custom",
    "EngineFile",
    "EnginePath",
    "EnginePaths",
    "Event",
    "Fields",
    "JsonRpc",
    "LengthPrefixed",
    "Mirror",
    "NdJson",
    "Project",
    "ProjectAudit",
    "Projects",
    "RpcBridge",
    "RunResult",
    "Subprocess",
    "Tcp",
    "Unix",
    "Upstream",
    "WebSocket",
    "OpenApiError",
    "engine_path",
    "run_tool",
    "tools_from",
]

_LAZY = {
    "NdJson": (".framing", "NdJson"),
    "LengthPrefixed": (".framing", "LengthPrefixed"),
    "Answer": (".codecs", "Answer"),
    "Call": (".codecs", "Call"),
    "Custom": (".codecs", "Custom"),
    "Event": (".codecs", "Event"),
    "Fields": (".codecs", "Fields"),
    "JsonRpc": (".codecs", "JsonRpc"),
    "WebSocket": (".websocket", "WebSocket"),
    "Tcp": (".transports", "Tcp"),
    "Unix": (".transports", "Unix"),
    "Subprocess": (".transports", "Subprocess"),
    "RpcBridge": (".client", "RpcBridge"),
    "Mirror": (".mirror", "Mirror"),
    "EngineFile": (".enginepath", "EngineFile"),
    "EnginePath": (".enginepath", "EnginePath"),
    "engine_path": (".enginepath", "engine_path"),
    "EnginePaths": (".paths", "EnginePaths"),
    "Project": (".paths", "Project"),
    "Projects": (".paths", "Projects"),
    "ProjectAudit": (".audit", "ProjectAudit"),
    "Upstream": (".upstream", "Upstream"),
    "run_tool": (".headless", "run_tool"),
    "tools_from": (".openapi", "tools_from"),
    "OpenApiError": (".openapi", "OpenApiError"),
    "RunResult": (".headless", "RunResult"),
}

if TYPE_CHECKING:
    from .audit import ProjectAudit
    from .client import RpcBridge
    from .codecs import Answer, Call, Custom, Event, Fields, JsonRpc
    from .enginepath import EngineFile, EnginePath, engine_path
    from .framing import LengthPrefixed, NdJson
    from .headless import RunResult, run_tool
    from .openapi import OpenApiError, tools_from
    from .mirror import Mirror
    from .paths import EnginePaths, Project, Projects
    from .transports import Subprocess, Tcp, Unix
    from .upstream import Upstream
    from .websocket import WebSocket


__getattr__ = exports(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
