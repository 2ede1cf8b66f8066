"""The audit trail inside the project each call works on (``<project>/.godot_mcp/audit.log``).

    policy = Policy.secure(audit=ProjectAudit(projects, ".godot_mcp/audit.log"))

A server that edits several projects keeps each project's history with the project: whoever
opens it later sees what was done to it. The policy chain hands every call's entry (tool,
action, arguments, ``outcome``, ``code``, ``durationMs``; secrets redacted by
:class:`mcpkit.policy.AuditLog`) to :meth:`ProjectAudit.record`, which picks the file:

1. the project the :class:`Projects` middleware picked for the call (the line's ``project``),
   else the one named by the call's project argument (``Projects.argument``; the same lookup
   tools use);
2. else the project the call picked (:meth:`Projects.pick` remembers it for the call);
3. else ``default`` (e.g. the project an editor bridge is attached to), else the only project
   of the allowed roots;
4. else ``fallback`` (an AuditLog, e.g. the server's own), or the line is logged as lost.

An entry of a call whose ``project`` argument names no valid project (refused calls) goes to the
fallback: a refused path must not choose where lines are written.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

from ..policy.audit import AuditLog
from ..protocol.errors import ToolError
from .paths import CURRENT_PROJECT, Project, Projects

__all__ = ["ProjectAudit"]

log = logging.getLogger("mcpkit.audit")


class ProjectAudit:
    """An audit sink writing each call's line into its project; see the module docstring.

    ``path`` is relative to the project root; further keyword arguments go to each
    :class:`AuditLog` (``max_bytes``, ``backups``, ``fsync``...).
    """

    def __init__(self, projects: Projects, path: str = ".mcpkit/audit.log", *, fallback: AuditLog | None = None,
                 default: Project | None = None, argument: str | None = None, **options: Any) -> None:
        if os.path.isabs(path) or ".." in path.replace("\\", "/").split("/"):
            raise ValueError(f"audit path {path!r} must be relative to the project and stay inside it")
        self.projects = projects
        self.path = path
        self.fallback = fallback
        self.default = default
        self.argument = argument or projects.argument
        self._options = options
        self._logs: dict[str, AuditLog] = {}
        self._lock = threading.Lock()

    def log_for(self, project: Project) -> AuditLog:
        """The AuditLog of ``project`` (one per project, opened on first use)."""
        key = str(project.root)
        with self._lock:
            audit = self._logs.get(key)
            if audit is None:
                audit = self._logs[key] = AuditLog(project.root / self.path, **self._options)
            return audit

    def _project_of(self, entry: Mapping[str, Any]) -> Project | None:
        picked = entry.get("project")  # the project the Projects middleware picked for the call
        if isinstance(picked, str) and picked:
            try:  # set by the middleware, not by the client: already checked when picked
                return Project(picked, self.projects.paths)
            except ValueError:
                return None  # gone since
        arguments = entry.get("arguments")
        named = arguments.get(self.argument) if isinstance(arguments, dict) else None
        if isinstance(named, str) and named:
            try:
                return self.projects.find(named)
            except ToolError:
                return None
        return CURRENT_PROJECT.get() or self.default or self.projects.default()

    def record(self, entry: Mapping[str, Any]) -> None:
        project = self._project_of(entry)
        if project is not None:
            self.log_for(project).record(entry)
        elif self.fallback is not None:
            self.fallback.record(entry)
        else:
            log.warning("audit line of tool %r has no project to go to [correlation id %s]",
                        entry.get("tool"), entry.get("correlationId"))

    def close(self) -> None:
        with self._lock:
            logs, self._logs = list(self._logs.values()), {}
        for audit in logs:
            audit.close()
        if self.fallback is not None:
            self.fallback.close()
