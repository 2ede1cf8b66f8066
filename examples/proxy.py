"""A proxy: mcpkit's guard rails in front of a server written elsewhere (docs/proxy.md).

    python examples/proxy.py                 # serves on stdio
    mcpkit list "python examples/proxy.py"

The upstream here is mcpkit's own reference server started as a command (any command line or
URL works the same: ``npx -y @modelcontextprotocol/server-filesystem /srv``, an https URL ...).
Its tools are mirrored; the tool policy says what to believe about them (``add`` is made a
writer, so the read-only gates hide and refuse it; ``test_*`` tools are left out). Schemas
written elsewhere may use what some hosts refuse (a ``$ref``, a 2020-12 ``$schema``, a dotted
name): ``host_schemas="auto"`` lists each client a copy its host accepts (docs/hosts.md).
"""

from __future__ import annotations

import sys

from mcpkit import Server
from mcpkit.policy import Gates, Policy

TOOL_POLICY = {"tools": {
    "add": {"read_only": False, "destructive": True},      # whatever the upstream says
    "test_*": {"hidden": True},                            # not mirrored at all
}}

server = Server.proxy(
    [sys.executable, "-m", "mcpkit", "serve"],
    name="guarded-reference",
    policy=Policy(gates=Gates(read_only=True, allow_open_world=True)),
    tool_policy=TOOL_POLICY,
    host_schemas="auto",
)

if __name__ == "__main__":
    server.run()
