"""The tasks an upstream created for the proxy's clients, and whose each one is (TX-07).

Upstream, every task is the proxy's: one connection, one session, whoever asked. So the proxy
keeps what the server's own tasks keep (server/tasks.py): the principal and the session binding of
the client whose call created it. ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` are
forwarded only for that client; any other gets the answer an unknown id gets, so a leaked id
reveals nothing. The newest ``limit`` tasks are remembered (an upstream's tasks expire upstream).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ..server.tasks import _bound_to

__all__ = ["TaskOwners"]


class _Owner:
    __slots__ = ("principal", "binding")

    def __init__(self, session: Any) -> None:
        self.principal = session.principal
        self.binding = session.task_binding


class TaskOwners:
    """task id -> the client (principal, session binding) whose call created it."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._owners: OrderedDict[str, _Owner] = OrderedDict()

    def add(self, task_id: str, session: Any) -> None:
        self._owners[task_id] = _Owner(session)
        self._owners.move_to_end(task_id)
        while len(self._owners) > self.limit:
            self._owners.popitem(last=False)

    def owns(self, task_id: Any, session: Any) -> bool:
        """Whether ``task_id`` is a task of this upstream created for ``session``'s client."""
        owner = self._owners.get(task_id) if isinstance(task_id, str) else None
        return owner is not None and _bound_to(owner, session)

    def __contains__(self, task_id: Any) -> bool:
        return task_id in self._owners

    def __len__(self) -> int:
        return len(self._owners)
