"""The reference server as an ASGI app, for uvicorn's own command line (test_conformance.py)."""

from mcpkit.reference import server

app = server.http_app()
