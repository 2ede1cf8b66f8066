"""Audit lines for resource reads and prompt gets: what a model was shown, and to whom.

Tools are audited by the policy's outcome step (policy/chain.py). A resource or a prompt
reaches data too (a template over files or records, a prompt that embeds them), so under a
policy with an audit log each ``resources/read`` and ``prompts/get`` writes one line as well,
whatever route it took and however it ended:

    {"time": ..., "correlationId": ..., "principal": ..., "resource": "notes://2026/q3",
     "arguments": {"year": "2026", "name": "q3"}, "outcome": "ok", "code": null, "durationMs": 0.4}

``prompt`` instead of ``resource`` for a prompt; ``arguments`` are the template's variables or
the prompt's arguments, redacted as a tool's are. ``outcome`` is ``ok``, ``denied`` (refused
before the handler ran: a scope, a confined path, nothing registered under that URI or name),
``error`` or ``cancelled``; ``code`` is the JSON-RPC error code of a refusal or failure. The
step runs outermost, so a refusal by any other step is recorded too. Reads are not rate-limited here: hosts read resources in bulk (a listing, then
each item), and a bucket per template would refuse that; a middleware can limit them.
"""

from __future__ import annotations

import inspect
import logging
import time
from typing import Any

from ..protocol.errors import INTERNAL_ERROR, McpError
from .audit import shortened
from .redact import default_redactor

__all__ = ["READ_AUDIT", "ReadAudit"]

log = logging.getLogger("mcpkit.policy")

class ReadAudit:
    """One audit line per resources/read and prompts/get (see the module's text)."""

    order = 0  # outermost, as the tools' outcome step: every refusal below it is recorded
    passes_through = True

    def on_read_resource(self, cc: Any, call_next: Any) -> Any:
        return self._sync(cc, call_next, "resource")

    async def on_read_resource_async(self, cc: Any, call_next: Any) -> Any:
        return await self._async(cc, call_next, "resource")

    def on_get_prompt(self, cc: Any, call_next: Any) -> Any:
        return self._sync(cc, call_next, "prompt")

    async def on_get_prompt_async(self, cc: Any, call_next: Any) -> Any:
        return await self._async(cc, call_next, "prompt")

    def _sync(self, cc: Any, call_next: Any, what: str) -> Any:
        start = time.perf_counter()
        try:
            result = call_next(cc)
        except BaseException as exc:
            _record(cc, what, start, exc)
            raise
        _record(cc, what, start, None)
        return result

    async def _async(self, cc: Any, call_next: Any, what: str) -> Any:
        start = time.perf_counter()
        try:
            result = call_next(cc)
            if inspect.isawaitable(result):
                result = await result
        except BaseException as exc:
            _record(cc, what, start, exc)
            raise
        _record(cc, what, start, None)
        return result


READ_AUDIT = ReadAudit()


def _record(cc: Any, what: str, start: float, exc: BaseException | None) -> None:
    session = cc.session
    policy = session.server._policy
    audit = policy.audit if policy is not None else None
    if audit is None:
        return
    if exc is None:
        outcome, code = "ok", None
    elif not isinstance(exc, Exception):  # the request was cancelled while it ran
        outcome, code = "cancelled", None
    else:
        outcome = "error" if cc.ran else "denied"
        code = exc.code if isinstance(exc, McpError) else INTERNAL_ERROR
    redactor = getattr(audit, "redactor", None) or default_redactor()
    name = shortened(cc.name, redactor.redact_text)  # a URI can be megabytes (a template variable)
    try:
        audit.record({
            "correlationId": cc.correlation_id,
            "principal": policy.principal_of(session, cc.request),
            what: name,
            "arguments": cc.arguments,
            "outcome": outcome,
            "code": code,
            "durationMs": round((time.perf_counter() - start) * 1000.0, 3),
        })
    except Exception:  # noqa: BLE001 - a full disk must not fail the read
        log.exception("could not write the audit line of %s %r", what, name)
