"""Serving the HTTP app under a path prefix: mounted in Starlette/FastAPI (``Mount("/api", app)``),
or behind a reverse proxy that passes the prefix as the ASGI ``root_path``.

Starlette keeps the full path in ``scope["path"]`` and puts the mount point in ``root_path``;
uvicorn's ``--root-path`` does the same. The app routes on the path below the prefix, and every
URL it hands a client (the legacy SSE ``endpoint`` event) carries the prefix again.
"""

from __future__ import annotations

from typing import Any

__all__ = ["route_path", "public_path"]


def route_path(scope: dict[str, Any]) -> str:
    """The request's path below the app's mount point."""
    path: str = scope["path"]
    root: str = scope.get("root_path") or ""
    if root and (path == root or path.startswith(root.rstrip("/") + "/")):
        return path[len(root.rstrip("/")):] or "/"
    return path


def public_path(scope: dict[str, Any], path: str) -> str:
    """``path`` (one of the app's own) as a client must request it: with the mount prefix."""
    return (scope.get("root_path") or "").rstrip("/") + path
