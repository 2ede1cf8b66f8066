"""mcpkit in front of MCP servers written elsewhere: mirror, forward, guard (docs/proxy.md).

    from mcpkit import Server

    server = Server.proxy("npx -y @modelcontextprotocol/server-filesystem /srv/files", policy=True)
    server.run("http", port=8000)

:class:`Upstream` mirrors one server into an mcpkit Server (``Server.mount`` and
``Server.proxy`` build one); :class:`ToolPolicy` overrides what an upstream's tools claim;
:func:`load_mcp_servers` reads a Claude Desktop / Cursor ``mcpServers`` file; :class:`Pin` and
:class:`Lockfile` withhold what changed since it was pinned (``pin=``, docs/security.md). The ``mcpkit proxy``
command (proxy/cli.py) puts them together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports

__all__ = ["Upstream", "ToolPolicy", "ToolPolicyError", "UpstreamSpec", "load_mcp_servers", "upstreams_of", "Pin",
           "Lockfile"]

_LAZY = {
    "Upstream": (".upstream", "Upstream"),
    "upstreams_of": (".upstream", "upstreams_of"),
    "ToolPolicy": (".toolpolicy", "ToolPolicy"),
    "ToolPolicyError": (".toolpolicy", "ToolPolicyError"),
    "UpstreamSpec": (".config", "UpstreamSpec"),
    "load_mcp_servers": (".config", "load_mcp_servers"),
    "Pin": (".pin", "Pin"),
    "Lockfile": (".pin", "Lockfile"),
}

if TYPE_CHECKING:
    from .config import UpstreamSpec, load_mcp_servers
    from .pin import Lockfile, Pin
    from .toolpolicy import ToolPolicy, ToolPolicyError
    from .upstream import Upstream, upstreams_of

__getattr__ = exports(__name__, _LAZY, globals())
