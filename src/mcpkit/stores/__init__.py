"""State stores: memory (the embedded default) and Redis (several processes sharing state).

One small interface per kind of state: SSE events (resumption), rate-limit buckets, tasks,
HTTP sessions, and a notification bus. ``from_env()`` picks the bundle ``MCPKIT_STORE``
names: unset (or ``memory``) keeps everything in this process; ``redis://host:port/db``
(``rediss://`` for TLS, ``?prefix=app:`` for the key prefix, ``&task_lease=5&task_renew=1``
for the lease on running tasks, docs/deployment.md) shares it through Redis.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["from_env"]


def from_env(environ: Mapping[str, str] | None = None) -> Any:
    """The Stores bundle of ``MCPKIT_STORE`` (see the module docstring)."""
    from ..switches import read
    from .redis import Stores, from_url

    url = read("MCPKIT_STORE", environ, "memory")  # memory, or a redis URL (a bad value is refused)
    return Stores.memory() if url == "memory" else from_url(url)
