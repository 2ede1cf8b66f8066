"""Tool contract v1: every result in one envelope a model and a program can both rely on.

    {"ok": true, "summary": "3 files", "result": ..., "error": null,
     "meta": {"tool": "files", "action": "list", "correlationId": "…", "durationMs": 0.41}}

The envelope is the result's ``structuredContent``, the tool advertises the matching
``outputSchema`` (so TL-07 holds and clients can validate), the summary is the text content,
and ``isError`` is ``not ok`` (TL-10). Failures carry ``error: {code, message, details,
retryable, suggestedFix}`` with one of the codes of protocol/errors.py.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from .. import _json
from ..protocol.errors import TOOL_ERROR_CODES, ToolError

__all__ = ["Outcome", "envelope_schema", "success", "failure", "default_summary"]

_SUMMARY_MAX = 200


T = TypeVar("T")


class Outcome(Generic[T]):
    """Return this from a tool to choose the envelope's summary yourself; annotate the tool
    ``-> Outcome[T]`` and its result schema is T's. Without the contract, only ``result`` is sent."""

    __slots__ = ("result", "summary")
    __mcp_outcome__ = True

    def __init__(self, result: T = None, summary: str | None = None) -> None:  # type: ignore[assignment]
        self.result = result
        self.summary = summary


def envelope_schema(result_schema: dict[str, Any] | None) -> dict[str, Any]:
    """The outputSchema of a contract tool whose own result follows ``result_schema``."""
    result: dict[str, Any] = {}
    if result_schema is not None:
        inner = {k: v for k, v in result_schema.items() if k not in ("$schema", "$defs")}
        result = {"anyOf": [inner, {"type": "null"}]}
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "summary": {"type": "string"},
            "result": result,
            "error": {
                "anyOf": [
                    {"type": "null"},
                    {
                        "type": "object",
                        "properties": {
                            "code": {"enum": sorted(TOOL_ERROR_CODES)},
                            "message": {"type": "string"},
                            "details": {},
                            "retryable": {"type": "boolean"},
                            "suggestedFix": {"type": ["string", "null"]},
                        },
                        "required": ["code", "message", "retryable"],
                    },
                ]
            },
            "meta": {
                "type": "object",
                "properties": {
                    "tool": {"type": "string"},
                    "action": {"type": ["string", "null"]},
                    "correlationId": {"type": "string"},
                    "durationMs": {"type": "number", "minimum": 0},
                },
                "required": ["tool", "action", "correlationId", "durationMs"],
            },
        },
        "required": ["ok", "summary", "result", "error", "meta"],
    }
    if result_schema is not None and "$defs" in result_schema:
        # the result's own $refs point at the root ("#/$defs/..."): keep them resolvable there
        schema["$defs"] = result_schema["$defs"]
    return schema


def default_summary(tool: str, action: str | None, result: Any) -> str:
    """A short line for the text content when the tool chose none."""
    label = f"{tool}.{action}" if action else tool
    if result is None:
        return f"{label}: done"
    kind = type(result)
    if kind is bool:
        return f"{label}: {'true' if result else 'false'}"
    if kind is int or kind is float:
        return f"{label}: {result!r}"
    if isinstance(result, str):
        text = result.strip().splitlines()[0] if result.strip() else ""
    elif isinstance(result, list):
        return f"{label}: {len(result)} item{'s' if len(result) != 1 else ''}"
    else:
        text = _json.dumps_str(result)
    if len(text) > _SUMMARY_MAX:
        text = text[: _SUMMARY_MAX - 1] + "…"
    return f"{label}: {text}" if text else f"{label}: done"


def _meta(tool: str, action: str | None, cid: str, duration_ms: float) -> dict[str, Any]:
    return {"tool": tool, "action": action, "correlationId": cid, "durationMs": round(duration_ms, 3)}


def success(
    tool: str, action: str | None, cid: str, duration_ms: float, result: Any, summary: str | None,
    content: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A CallToolResult carrying an ok envelope; ``content`` are blocks the tool returned
    itself (an image, a resource link), kept after the summary."""
    text = summary if summary is not None else default_summary(tool, action, result)
    env = {"ok": True, "summary": text, "result": result, "error": None,
           "meta": _meta(tool, action, cid, duration_ms)}
    return {"content": [{"type": "text", "text": text}, *(content or ())], "structuredContent": env}


def failure(tool: str, action: str | None, cid: str, duration_ms: float, error: ToolError) -> dict[str, Any]:
    """A CallToolResult with ``isError: true`` carrying the error envelope."""
    label = f"{tool}.{action}" if action else tool
    text = f"{label} failed ({error.code}): {error.message}"
    if error.suggested_fix:
        text += f" Fix: {error.suggested_fix}"
    env = {"ok": False, "summary": text, "result": None, "error": error.to_error(),
           "meta": _meta(tool, action, cid, duration_ms)}
    return {"content": [{"type": "text", "text": text}], "structuredContent": env, "isError": True}
