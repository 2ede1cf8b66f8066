"""Tools made from a design API's OpenAPI document: one per operation, behind the guard rails.

    DESIGN_API_URL=http://127.0.0.1:8000 DESIGN_API_KEY=dk_... mcpkit serve examples/openapi_example.py
    mcpkit list examples/openapi_example.py

The document is read from ``$DESIGN_API_URL/openapi.json`` (``DESIGN_OPENAPI`` names another
file or URL) when the server starts. The admin operations are left out, the export gets a
friendlier name and is declared not destructive (it only renders a file). Reads (GET) are
read-only; creating and deleting designs are destructive, so the policy keeps them off until
``MCPKIT_ALLOW_DESTRUCTIVE=1``; everything calls an API, so open-world tools are allowed here in
code. The key is ``DESIGN_API_KEY``; over HTTP with ``ApiKeyAuth(passthrough=True)``, pass
``auth=mcpkit.auth.api_key`` instead and each caller's own key is sent (examples/design_api.py).
"""

from __future__ import annotations

import os

from mcpkit import Server
from mcpkit.policy import Policy

API_URL = os.environ.get("DESIGN_API_URL", "http://127.0.0.1:8000")

server = Server("design-openapi", "1.0.0", instructions="Create, inspect and export designs of the Design API.",
                policy=Policy.secure(allow_open_world=True))
server.openapi(
    os.environ.get("DESIGN_OPENAPI", f"{API_URL}/openapi.json"),
    base_url=API_URL,
    auth=os.environ.get("DESIGN_API_KEY"),
    exclude=["tag:admin"],
    rename={"designs.export": "export_design"},
    annotations={"designs.export": {"destructive": False}},
)

if __name__ == "__main__":
    server.run()
