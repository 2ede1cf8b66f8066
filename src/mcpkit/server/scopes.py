"""Scopes in the call path: an item declared with ``scopes=`` runs only for a token that has them.

The HTTP transport refuses a request body that names such an item with 403 before anything
runs (AU-09); this step enforces the same rule where every route to a handler passes, so a
tool reached through a batch or meta tool (``ctx.call_tool``), a manager's action, a task, a
completion of a scoped prompt or template (CP-05) or a subscription gets the same answer.
An authenticated transport installs it (``Server._install_step``); a session without a token
(stdio, HTTP without auth) has no scopes to check. It is the server's, not the policy's: it needs
no Policy, only the token and the items' declared scopes (pipeline.py scopes_for).
"""

from __future__ import annotations

from typing import Any

from ..protocol.errors import E_PERMISSION_DENIED, INVALID_PARAMS, McpError, ToolError

__all__ = ["ScopeStep"]

_KINDS = frozenset({"call_tool", "read_resource", "subscribe", "get_prompt", "complete"})


class ScopeStep:
    """Refuses a call whose item (or manager action) needs scopes the caller's token lacks."""

    order = 10

    def __init__(self, auth: Any) -> None:
        #: the mcpkit.auth.ResourceServer: its ``missing`` knows which scopes imply which (AU-11)
        self.auth = auth

    def applies(self, kind: str, item: Any) -> bool:
        return kind in _KINDS and (bool(getattr(item, "scopes", ())) or getattr(item, "actions", None) is not None
                                   or bool(getattr(item, "action_scopes", None)))

    def check(self, cc: Any) -> None:
        """A guard (server/pipeline.py): refuses, or lets the call pass."""
        needed = cc.scopes
        if needed:
            token = cc.access_token  # the request's: the session may have seen others since
            if token is not None:
                missing = self.auth.missing(token, needed)
                if missing:
                    self.refuse(cc, missing)

    @staticmethod
    def refuse(cc: Any, missing: list[str]) -> None:
        what = {"call_tool": "Tool", "get_prompt": "Prompt"}.get(cc.kind, "Resource")
        name = cc.name if cc.action is None else f"{cc.name}.{cc.action}"
        message = f"Insufficient scope: {what} {name!r} needs scope {' '.join(missing)}."
        fix = "Ask for a token with these scopes."
        if cc.kind == "call_tool":
            raise ToolError(message, code=E_PERMISSION_DENIED, details={"requiredScopes": missing},
                            suggested_fix=fix)
        raise McpError(INVALID_PARAMS, f"{message} {fix}", {"requiredScopes": missing})
