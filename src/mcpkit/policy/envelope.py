"""Tool contract v1: every result in one envelope a model and a program can both rely on.

    {"ok": true, "summary": "3 files", "result": ..., "error": null,
     "meta": {"tool": "files", "action": "list", "correlationId": "…", "durationMs": 0.41}}

The envelope is the result's ``structuredContent``, the tool advertises the matching
``outputSchema`` (so TL-07 holds and clients can validate), and ``isError`` is ``not ok``
(TL-10). The text content is the serialized envelope itself, as the spec recommends when
``structuredContent`` is sent (TL-08): a host that reads only ``content`` (many do) loses
nothing, not even the error code. Images, audio, embedded resources and resource links a tool
returns stay real content blocks after it, never base64 inside the JSON. Failures carry
``error: {code, message, details, retryable, suggestedFix}`` with a code of
protocol/errors.py or the tool's own ``E_...`` code.
"""

from __future__ import annotations

import re
from typing import Any, Generic, TypeVar

from orjson import dumps as _orjson_dumps

from .. import _json
from ..protocol.errors import TOOL_ERROR_CODES, ToolError
from ..server.content import ToolResult
from .limits import _CONTROL_CLASS, strip_structured

__all__ = ["Outcome", "Report", "envelope_schema", "success", "failure", "default_summary", "split", "sanitized",
           "shape_of", "E_TOOL_FAILED", "SHAPES", "LEGACY_FIELDS"]

#: the code of a ``ToolResult(is_error=True)`` under the contract (the tool said it failed)
E_TOOL_FAILED = "E_TOOL_FAILED"

_SUMMARY_MAX = 200

#: the envelope shapes a contract takes: ``True`` is "v1"
SHAPES = ("v1", "legacy")
#: what the legacy shape adds at the top level, as earlier tool contracts had them
#: (godot-mcp-omni, the Canvelete design API): clients written for those read them there
LEGACY_FIELDS = ("details", "logs", "warnings", "errors", "files")


def shape_of(contract: Any) -> str | None:
    """The envelope shape a ``contract=`` value asks for: None (no envelope), "v1" or "legacy"."""
    if contract is None or contract is False:
        return None
    if contract is True:
        return "v1"
    if contract in SHAPES:
        return contract
    raise ValueError(f"contract={contract!r}: use True (or \"v1\"), \"legacy\", or False")


class Report:
    """What a handler adds to a legacy-shape envelope through its Context while it runs:
    ``ctx.info()``/``ctx.debug()`` lines as ``logs``, ``ctx.warning()`` as ``warnings``,
    ``ctx.error()`` and worse as ``errors``, ``ctx.add_file()`` as ``files``,
    ``ctx.add_details()`` as ``details``. One per call; the contract step makes it."""

    __slots__ = ("logs", "warnings", "errors", "files", "details", "redact")

    def __init__(self, redact: bool = False) -> None:
        #: LG-05: under ``Policy(redact_logs=True)`` the lines are redacted as the log
        #: messages sent to the client are, or the envelope would carry what those hide
        self.redact = redact
        self.logs: list[str] = []
        self.warnings: list[str] = []
        self.errors: list[str] = []
        self.files: list[str] = []
        self.details: dict[str, Any] = {}

    def log(self, level: str, data: Any) -> None:
        if self.redact:
            from .redact import default_redactor

            data = default_redactor().redact(data)
        text = data if isinstance(data, str) else _json.dumps_str(data)
        if level == "warning":
            self.warnings.append(text)
        elif level in ("error", "critical", "alert", "emergency"):
            self.errors.append(text)
        else:
            self.logs.append(text)

    def fields(self, error: ToolError | None = None) -> dict[str, Any]:
        """The legacy top-level fields; a failure's message joins ``errors`` and its details
        ``details``, so a client reading only those still learns why."""
        details = dict(self.details)
        errors = list(self.errors)
        if error is not None:
            errors.append(error.message)
            if isinstance(error.details, dict):
                details.update(error.details)
        return {"details": details or None, "logs": list(self.logs), "warnings": list(self.warnings),
                "errors": errors, "files": list(self.files)}


T = TypeVar("T")


class Outcome(Generic[T]):
    """Return this from a tool to choose the envelope's summary yourself; annotate the tool
    ``-> Outcome[T]`` and its result schema is T's. Without the contract, only ``result`` is sent."""

    __slots__ = ("result", "summary")
    __mcp_outcome__ = True

    def __init__(self, result: T = None, summary: str | None = None) -> None:  # type: ignore[assignment]
        self.result = result
        self.summary = summary


def envelope_schema(result_schema: dict[str, Any] | None, shape: str = "v1") -> dict[str, Any]:
    """The outputSchema of a contract tool whose own result follows ``result_schema``; the
    legacy shape adds its top-level fields, required as the v1 ones are (TL-07)."""
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
                            # the standard codes, or a tool's own (ToolError(code="E_CONFLICT"))
                            "code": {"type": "string", "pattern": "^E_[A-Z][A-Z_]*$",
                                     "description": "One of " + ", ".join(sorted(TOOL_ERROR_CODES))
                                     + ", or a code of the tool's own."},
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
    if shape == "legacy":
        strings = {"type": "array", "items": {"type": "string"}}
        schema["properties"].update({
            "details": {"type": ["object", "null"], "description": "What the tool adds about the call."},
            "logs": {**strings, "description": "What the tool logged while it ran."},
            "warnings": {**strings, "description": "What the tool warned of; the call still succeeded."},
            "errors": {**strings, "description": "What went wrong; on failure, error.message too."},
            "files": {**strings, "description": "Files or URIs the tool wrote or produced."},
        })
        schema["required"] = [*schema["required"], *LEGACY_FIELDS]
    if result_schema is not None and "$defs" in result_schema:
        # the result's own $refs point at the root ("#/$defs/..."): keep them resolvable there
        schema["$defs"] = result_schema["$defs"]
    return schema


def default_summary(tool: str, action: str | None, result: Any) -> str:
    """A short line for the text content when the tool chose none."""
    label = f"{tool}.{action}" if action else tool
    kind = type(result)
    if kind is int or kind is float:
        return f"{label}: {result!r}"
    if result is None:
        return f"{label}: done"
    if kind is bool:
        return f"{label}: {'true' if result else 'false'}"
    if isinstance(result, str):
        text = result.strip().splitlines()[0] if result.strip() else ""
    elif isinstance(result, list):
        return f"{label}: {len(result)} item{'s' if len(result) != 1 else ''}"
    else:
        # a summary is display text: no control character survives as a JSON \u001b escape
        text = _json.dumps_str(strip_structured(result))
    if len(text) > _SUMMARY_MAX:
        text = text[: _SUMMARY_MAX - 1] + "…"
    return f"{label}: {text}" if text else f"{label}: done"


def _meta(tool: str, action: str | None, cid: str, duration_ms: float) -> dict[str, Any]:
    return {"tool": tool, "action": action, "correlationId": cid, "durationMs": round(duration_ms, 3)}


def success(
    tool: str, action: str | None, cid: str, duration_ms: float, result: Any, summary: str | None,
    content: list[dict[str, Any]] | None = None, report: Report | None = None,
) -> dict[str, Any]:
    """A CallToolResult carrying an ok envelope; ``content`` are blocks the tool returned
    itself (an image, a resource link), kept after the summary; ``report``: the legacy shape's
    fields (None: the v1 shape)."""
    text = summary if summary is not None else default_summary(tool, action, result)
    # round(x, 3) goes through decimal digits; this is the same to a microsecond, ten times faster
    env = {"ok": True, "summary": text, "result": result, "error": None,
           "meta": {"tool": tool, "action": action, "correlationId": cid, "durationMs": round(duration_ms * 1000) / 1000}}
    if report is not None:
        env.update(report.fields())
    try:
        mirror = _orjson_dumps(env, option=_json.OPTIONS).decode()
    except TypeError:
        # Not plain JSON (a set, an object with __json__, a 2**64 integer): made plain once, so
        # the text and structuredContent say the same, whatever such an object says next time.
        env["result"] = _json.loads(_json.dumps(result))
        mirror = _json.dumps_str(env)
    if content:
        return {"content": [{"type": "text", "text": mirror}, *content], "structuredContent": env}
    return {"content": [{"type": "text", "text": mirror}], "structuredContent": env}


def failure(tool: str, action: str | None, cid: str, duration_ms: float, error: ToolError,
            report: Report | None = None) -> dict[str, Any]:
    """A CallToolResult with ``isError: true`` carrying the error envelope (``report``: the
    legacy shape's fields, as :func:`success`)."""
    label = f"{tool}.{action}" if action else tool
    text = f"{label} failed ({error.code}): {error.message}"
    if error.suggested_fix:
        text += f" Fix: {error.suggested_fix}"
    env = {"ok": False, "summary": text, "result": None, "error": error.to_error(),
           "meta": _meta(tool, action, cid, duration_ms)}
    if report is not None:
        env.update(report.fields(error))
    return {"content": [{"type": "text", "text": _json.dumps_str(env)}], "structuredContent": env, "isError": True}


#: types whose values are never content blocks (a list may hold some; a dict is JSON)
PLAIN = frozenset({int, float, str, bool, type(None), dict})


def _is_block(value: Any) -> bool:
    return getattr(type(value), "__mcp_content__", False) is True


def split(value: Any) -> tuple[bool, Any, list[dict[str, Any]], dict[str, Any] | None, str | None]:
    """What a tool returned, taken apart for the envelope: (was content, the value for
    ``result``, content blocks to keep beside the envelope, the result's ``_meta``, the error
    text when it is a ``ToolResult(is_error=True)``). Text blocks become the result (joined);
    images, audio, resources and links stay blocks."""
    kind = type(value)
    if kind in PLAIN:  # the common case: a JSON value, no content block in it
        return False, value, [], None, None
    if isinstance(value, ToolResult):
        texts, blocks = _partition(value.content)
        text = "\n".join(texts) if texts else None
        if value.is_error:
            return True, None, blocks, value.meta, text or "The tool reported a failure."
        return True, value.structured if value.structured is not None else text, blocks, value.meta, None
    if _is_block(value):
        value = [value]
    if type(value) is list and value and all(_is_block(v) for v in value):
        texts, blocks = _partition(value)
        return True, "\n".join(texts) if texts else None, blocks, None, None
    return False, value, [], None, None


def _partition(blocks: list[Any]) -> tuple[list[str], list[dict[str, Any]]]:
    texts: list[str] = []
    others: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "text" and set(block) <= {"type", "text"}:
            texts.append(block.get("text", ""))
        else:
            others.append(block)
    return texts, others


#: what, in a JSON text as orjson writes it, may stand for a character strip_control removes:
#: C0 controls other than TAB, LF and CR are escaped as ``\\u00XX``, ``\\b`` or ``\\f``; DEL, the
#: C1 controls and the bidi controls stay raw. A false alarm (a literal backslash before
#: ``u00``) only costs the full walk.
_DIRTY_JSON = re.compile(r"\\u00|\\[bf]|[" + _CONTROL_CLASS + "]")


def clean_json(text: str) -> bool:
    """Whether a JSON text (as orjson writes it) holds no character strip_control removes.
    Most texts have no escape and no character past ASCII: two memchr and a flag."""
    if "\\" in text and _DIRTY_JSON.search(text) is not None:
        return False
    if text.isascii():
        return "\x7f" not in text
    return _DIRTY_JSON.search(text) is None


def sanitized(result: dict[str, Any], contract: bool) -> dict[str, Any]:
    """``result`` with terminal control sequences stripped from the strings of its
    ``structuredContent`` too (a host may print any of them), and the text mirror of the
    structured value rebuilt from the clean one. ``result`` itself when nothing changed."""
    structured = result.get("structuredContent")
    if structured is None:
        return result
    # the text is not taken to vouch for structuredContent here: something may have changed
    # either since it was made (the policy's own envelope is trusted by its caller, _finish)
    clean = strip_structured(structured)
    if clean is structured:
        return result
    out = {**result, "structuredContent": clean}
    content = result.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict) and content[0].get("type") == "text" \
            and (contract or content[0].get("text") == _json.dumps_str(structured)):
        out["content"] = [{**content[0], "text": _json.dumps_str(clean)}, *content[1:]]
    return out
