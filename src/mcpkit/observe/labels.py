"""Metric labels from what a client sent, bounded.

A method, tool or prompt name is the client's text: used as a label as it came, every made-up
name (``tools/call`` of ``x1``, ``x2``... or a method ``zz1``...) would add a series that is
never dropped, so one client could grow ``/metrics`` and the server's memory without limit.
A name becomes a label only when the server knows it (a method it answers, a tool or prompt it
registered, a notification of the specification or one it handles); anything else is counted
under one label, :data:`OTHER`. The series are then bounded by what the server itself defines.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OTHER", "method_label", "notification_label", "prompt_label", "tool_label"]

#: the one label every name the server does not know is counted under
OTHER = "other"

#: the client-to-server notifications of the specification (every revision)
_CLIENT_NOTIFICATIONS = frozenset({
    "notifications/initialized", "notifications/cancelled", "notifications/progress",
    "notifications/roots/list_changed", "notifications/elicitation/complete",
    "notifications/tasks/status",
})


#: the methods the protocol engine answers itself, outside the server's method table
_ENGINE_METHODS = frozenset({"initialize", "ping"})


def method_label(session: Any, method: str, revision: Any = None) -> str:
    """``method`` when the server answers it (in this revision, when given), else :data:`OTHER`."""
    methods = getattr(getattr(session, "server", None), "_methods", None)
    if method not in _ENGINE_METHODS and (methods is None or method not in methods):
        return OTHER
    if revision is not None and method not in revision.methods:
        return OTHER
    return method


def notification_label(session: Any, method: str) -> str:
    """``method`` for a notification of the specification or one the server handles."""
    if method in _CLIENT_NOTIFICATIONS:
        return method
    handlers = getattr(getattr(session, "server", None), "_notification_handlers", None)
    return method if handlers is not None and method in handlers else OTHER


def tool_label(session: Any, name: Any) -> str:
    """``name`` when it is a tool the server has registered, else :data:`OTHER`."""
    tools = getattr(getattr(session, "server", None), "_tools", None)
    return name if isinstance(name, str) and tools is not None and name in tools else OTHER


def prompt_label(session: Any, name: Any) -> str:
    """``name`` when it is a prompt the server has registered, else :data:`OTHER`."""
    prompts = getattr(getattr(session, "server", None), "_prompts", None)
    return name if isinstance(name, str) and prompts is not None and name in prompts else OTHER
