"""Validate what the server writes against the official MCP JSON schemas (``spec/<rev>/schema.json``).

API:

* ``validate_server_message(message, revision, request_method=None)`` raises ``AssertionError``
  with a readable explanation when *message* (a dict, or a list for a 2025-03-26 batch) is not
  something a server may send in *revision*.
* ``WireLog`` reads a traffic log written by ``tests/tap.py`` (one JSON object per line:
  ``{"dir": "c2s" | "s2c", "line": "<raw line>"}``).
* ``check_wire_log(path)`` validates every server→client message of such a log against the
  revision negotiated in it, and returns how many it checked.

How a message is classified and which schema definitions it must satisfy (all of them):

==========================================  ==================================================
message                                     definitions
==========================================  ==================================================
``{"method", "id"}`` (request)              ``JSONRPCRequest`` + ``ServerRequest`` + the method's
                                            request type (e.g. ``CreateMessageRequest``)
``{"method"}`` (notification)               ``JSONRPCNotification`` + ``ServerNotification`` +
                                            the method's notification type
``{"result"}`` answering method M           ``JSONRPCResponse`` (≤2025-06-18) or
                                            ``JSONRPCResultResponse`` (2025-11-25+) + M's result
                                            type (``XRequest`` → ``XResult``, or ``EmptyResult``
                                            for ping, resources/(un)subscribe, logging/setLevel);
                                            in 2026-07-28 the schema's ``XResultResponse``, which
                                            also admits ``InputRequiredResult`` where allowed
``{"result"}``, method unknown              the envelope + ``ServerResult``
``{"error"}``                               ``JSONRPCError`` (≤2025-06-18) or
                                            ``JSONRPCErrorResponse`` (2025-11-25+); an error
                                            without ``id``: see ``_ID_LESS_ERROR``
``[...]`` (batch)                           only in 2025-03-26; every element as above
==========================================  ==================================================

Besides the schemas: a response must not carry both ``result`` and ``error`` (BP-07; the legacy
schemas do not forbid extra members), and the formats the schemas use are asserted: ``byte``
(strict base64), ``uri`` (an absolute URI: a scheme, no whitespace or control characters).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError, best_match

__all__ = [
    "REVISIONS",
    "PRE_NEGOTIATION_REVISION",
    "WireLog",
    "WireRecord",
    "check_wire_log",
    "result_definition",
    "validate_server_message",
]

SPEC_DIR = Path(__file__).resolve().parent.parent / "spec"
REVISIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
MODERN_REVISIONS = frozenset({"2026-07-28"})
#: Server messages written before the ``initialize`` result (parse errors, an error answering a
#: bad ``initialize``) are validated as this revision: the last legacy one, whose schema allows
#: an error without ``id``.
PRE_NEGOTIATION_REVISION = "2025-11-25"

# The error-`id` trap. JSON-RPC 2.0 answers a parse error or an invalid request whose id could
# not be read with `"id": null`, but `null` is not a valid RequestId in any MCP schema. The
# 2024-11-05, 2025-03-26 and 2025-06-18 schemas even *require* `id` in `JSONRPCError`, so no
# schema-valid answer exists in those revisions. From 2025-11-25 on, `id` is optional and the
# spec text says to omit it when it could not be read. mcpkit omits it in every revision, so an
# error response without `id` is validated against the 2025-11-25 `JSONRPCErrorResponse` (the
# earliest schema that describes it), whatever the revision. `"id": null` always fails.
_ID_LESS_ERROR = ("2025-11-25", "JSONRPCErrorResponse")

# Methods whose result type the schemas name `EmptyResult` (their request types have no
# `XResult` counterpart).
_EMPTY_RESULT_METHODS = frozenset({"ping", "resources/subscribe", "resources/unsubscribe", "logging/setLevel"})

_MAX_REPORTED_ERRORS = 6
_MAX_SHOWN_CHARS = 600


# --------------------------------------------------------------------------- formats

_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_BAD_URI_CHARS = re.compile(r"[\x00-\x20\x7f]")


def _is_uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    return bool(_URI_SCHEME.match(value)) and not _BAD_URI_CHARS.search(value)


def _is_base64(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


_FORMATS = jsonschema.FormatChecker(formats=())
_FORMATS.checks("uri")(_is_uri)
_FORMATS.checks("byte")(_is_base64)


# --------------------------------------------------------------------------- schemas


@dataclass(frozen=True)
class _RevisionSchema:
    revision: str
    document: dict[str, Any]
    defs_key: str  # "definitions" (draft-07) or "$defs" (2020-12)
    validator_class: type
    client_requests: dict[str, str]  # method -> request definition
    server_requests: dict[str, str]  # method -> request definition
    server_notifications: dict[str, str]  # method -> notification definition

    @property
    def defs(self) -> dict[str, Any]:
        return self.document[self.defs_key]

    def has(self, name: str) -> bool:
        return name in self.defs

    def ref(self, name: str) -> dict[str, str]:
        return {"$ref": f"#/{self.defs_key}/{name}"}

    @property
    def result_envelope(self) -> str:
        return "JSONRPCResultResponse" if self.has("JSONRPCResultResponse") else "JSONRPCResponse"

    @property
    def error_envelope(self) -> str:
        return "JSONRPCErrorResponse" if self.has("JSONRPCErrorResponse") else "JSONRPCError"

    @property
    def batching(self) -> bool:
        return self.has("JSONRPCBatchResponse")


def _union_members(defs: dict[str, Any], union: str) -> list[str]:
    if union not in defs:
        return []
    return [alt["$ref"].rsplit("/", 1)[-1] for alt in defs[union].get("anyOf", [])]


def _method_of(defs: dict[str, Any], name: str) -> str:
    method = defs[name].get("properties", {}).get("method", {}).get("const")
    if not isinstance(method, str):
        raise RuntimeError(f"schema definition {name} has no constant method")
    return method


# The io.modelcontextprotocol/tasks extension of 2026-07-28 (spec/requirements.md §10.2; its schema
# lives outside the core one, in github.com/modelcontextprotocol/ext-tasks). Its results, added to
# the 2026-07-28 definitions: a tools/call answered with resultType "task" must be a flat
# CreateTaskResult; tasks/get a DetailedTask; tasks/update and tasks/cancel an empty ack.
_ISO_TIME = {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}"}
_TASK_FIELDS = {
    "_meta": {"$ref": "#/$defs/ResultMetaObject"},
    "taskId": {"type": "string", "minLength": 1},
    "status": {"enum": ["working", "input_required", "completed", "failed", "cancelled"]},
    "statusMessage": {"type": "string"},
    "createdAt": _ISO_TIME,
    "lastUpdatedAt": _ISO_TIME,
    "ttlMs": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},
    "pollIntervalMs": {"type": "integer", "minimum": 1},
}
_TASKS_EXTENSION_DEFS: dict[str, Any] = {
    "CreateTaskResult": {
        "type": "object",
        "properties": {**_TASK_FIELDS, "resultType": {"const": "task"}},
        "required": ["resultType", "taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"],
        "not": {"anyOf": [{"required": [k]} for k in (
            "task", "result", "error", "inputRequests", "requestState", "ttl", "pollInterval")]},
    },
    "DetailedTask": {
        "type": "object",
        "properties": {
            **_TASK_FIELDS,
            "resultType": {"const": "complete"},
            "result": {"$ref": "#/$defs/CallToolResult"},
            "error": {"$ref": "#/$defs/Error"},
            "inputRequests": {"$ref": "#/$defs/InputRequests"},
        },
        "required": ["resultType", "taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"],
        "not": {"required": ["requestState"]},
        "allOf": [
            {"if": {"properties": {"status": {"const": "completed"}}},
             "then": {"required": ["result"], "not": {"anyOf": [{"required": ["error"]}, {"required": ["inputRequests"]}]}}},
            {"if": {"properties": {"status": {"const": "failed"}}},
             "then": {"required": ["error"], "not": {"anyOf": [{"required": ["result"]}, {"required": ["inputRequests"]}]}}},
            {"if": {"properties": {"status": {"const": "input_required"}}},
             "then": {"required": ["inputRequests"], "not": {"anyOf": [{"required": ["result"]}, {"required": ["error"]}]}}},
            {"if": {"properties": {"status": {"enum": ["working", "cancelled"]}}},
             "then": {"not": {"anyOf": [{"required": [k]} for k in ("result", "error", "inputRequests")]}}},
        ],
    },
    "TaskAckResult": {
        "type": "object",
        "properties": {"_meta": {"$ref": "#/$defs/ResultMetaObject"}, "resultType": {"const": "complete"}},
        "required": ["resultType"],
        "not": {"anyOf": [{"required": [k]} for k in ("taskId", "status", "result", "error", "inputRequests")]},
    },
}
_TASKS_EXTENSION_RESULTS = {"tasks/get": "DetailedTask", "tasks/update": "TaskAckResult", "tasks/cancel": "TaskAckResult"}


def _skills_extension_defs(ref: str, modern: bool) -> dict[str, Any]:
    """The results of the Skills extension (SEP-2640; the stable specification's Skill,
    SkillResource, ListSkillsResult, GetSkillResult and the directory read's result), for every
    revision: the extension travels in capabilities.extensions of any of them. ``ref`` is the
    schema's definitions prefix; from 2026-07-28 on the results are cacheable (SEP-2549)."""
    base = {"_meta": {"type": "object"}, "resultType": {"const": "complete"},
            "ttlMs": {"type": "integer", "minimum": 0}, "cacheScope": {"enum": ["public", "private"]}}
    required = ["resultType", "ttlMs", "cacheScope"] if modern else []
    skill = {
        "type": "object",
        "properties": {
            "uri": {"type": "string", "minLength": 1},
            "frontmatter": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1},
                                                             "description": {"type": "string", "minLength": 1}},
                            "required": ["name", "description"]},
            "resources": {"anyOf": [{"const": "dynamic"}, {"type": "array", "items": {
                "type": "object",
                "properties": {"uri": {"type": "string"}, "digest": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
                               "size": {"type": "integer", "minimum": 0}},
                "required": ["uri", "digest", "size"]}}]},
        },
        "required": ["uri", "frontmatter", "resources"],
    }
    return {
        "SkillsExtSkill": skill,
        "SkillsExtListResult": {"type": "object", "properties": {
            **base, "skills": {"type": "array", "items": {"$ref": ref + "SkillsExtSkill"}},
            "nextCursor": {"type": "string"}}, "required": ["skills", *required]},
        "SkillsExtGetResult": {"type": "object", "properties": {**base, "skill": {"$ref": ref + "SkillsExtSkill"}},
                               "required": ["skill", *required], "not": {"required": ["nextCursor"]}},
        "SkillsExtDirectoryResult": {"type": "object", "properties": {
            **base, "resources": {"type": "array", "items": {"$ref": ref + "Resource"}},
            "nextCursor": {"type": "string"}}, "required": ["resources", *required]},
    }


_SKILLS_EXTENSION_RESULTS = {"skills/list": "SkillsExtListResult", "skills/get": "SkillsExtGetResult",
                             "resources/directory/read": "SkillsExtDirectoryResult"}


@lru_cache(maxsize=None)
def _schema(revision: str) -> _RevisionSchema:
    if revision not in REVISIONS:
        raise ValueError(f"unknown MCP revision {revision!r}; known: {', '.join(REVISIONS)}")
    path = SPEC_DIR / revision / "schema.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    draft07 = revision <= "2025-06-18"
    defs_key = "definitions" if draft07 else "$defs"
    validator_class = jsonschema.Draft7Validator if draft07 else jsonschema.Draft202012Validator
    if jsonschema.validators.validator_for(document) is not validator_class or defs_key not in document:
        raise RuntimeError(f"{path} is not the expected {'draft-07' if draft07 else '2020-12'} schema")
    defs = document[defs_key]
    if revision in MODERN_REVISIONS:
        defs.update(_TASKS_EXTENSION_DEFS)
    defs.update(_skills_extension_defs(f"#/{defs_key}/", revision in MODERN_REVISIONS))

    def by_method(union: str) -> dict[str, str]:
        return {_method_of(defs, name): name for name in _union_members(defs, union)}

    return _RevisionSchema(
        revision=revision,
        document=document,
        defs_key=defs_key,
        validator_class=validator_class,
        client_requests=by_method("ClientRequest"),
        server_requests=by_method("ServerRequest"),
        server_notifications=by_method("ServerNotification"),
    )


def result_definition(revision: str, method: str) -> str:
    """The schema definition of the result of the client request *method* in *revision*."""
    schema = _schema(revision)
    request = schema.client_requests.get(method)
    if request is None:
        raise KeyError(method)
    if request.endswith("Request") and schema.has(request[: -len("Request")] + "Result"):
        return request[: -len("Request")] + "Result"
    if method in _EMPTY_RESULT_METHODS and schema.has("EmptyResult"):
        return "EmptyResult"
    raise RuntimeError(f"no result type for {method} ({request}) in the {revision} schema")


@lru_cache(maxsize=None)
def _validator(revision: str, parts: tuple[tuple[str, str], ...]) -> Any:
    """A validator for "the message satisfies every (member, definition) of *parts*".

    ``member`` "" means the whole message; otherwise the definition applies to that member
    (e.g. ``("result", "CallToolResult")``). Compiled once per (revision, parts).
    """
    schema = _schema(revision)
    all_of: list[dict[str, Any]] = []
    for member, name in parts:
        if not schema.has(name):
            raise RuntimeError(f"the {revision} schema has no definition {name}")
        all_of.append(schema.ref(name) if not member else {"properties": {member: schema.ref(name)}})
    root = {**schema.document, "allOf": all_of}
    return schema.validator_class(root, format_checker=_FORMATS)


# --------------------------------------------------------------------------- explanation


def _shorten(value: Any, limit: int = _MAX_SHOWN_CHARS) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=False, default=repr)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_DISCRIMINATORS = ("type", "method")


def _rules_out(errors: list[ValidationError]) -> bool:
    """Whether an anyOf alternative failed on its discriminator (``type``/``method`` const)."""
    return any(
        e.validator == "const" and len(e.relative_path) == 1 and e.relative_path[0] in _DISCRIMINATORS
        for e in errors
    )


def _path(error: ValidationError) -> str:
    return error.json_path


def _describe(error: ValidationError) -> Iterator[str]:
    """Readable lines for one error; anyOf/oneOf failures are narrowed to the likely alternative."""
    if not error.context:
        yield f"at {_path(error)}: {_shorten_msg(error.message)}"
        return
    by_alternative: dict[Any, list[ValidationError]] = {}
    for sub in error.context:
        by_alternative.setdefault(sub.relative_schema_path[0], []).append(sub)
    candidates = {k: v for k, v in by_alternative.items() if not _rules_out(v)}
    if not candidates:
        # Every alternative rejected the discriminator: say which values would have been valid.
        allowed: list[str] = []
        field = None
        for errors in by_alternative.values():
            for e in errors:
                if e.validator == "const" and len(e.relative_path) == 1 and e.relative_path[0] in _DISCRIMINATORS:
                    field = e.relative_path[0]
                    if e.validator_value not in allowed:
                        allowed.append(e.validator_value)
        instance = error.instance.get(field) if isinstance(error.instance, dict) else None
        yield (
            f"at {_path(error)}.{field}: {instance!r} is none of "
            + ", ".join(repr(v) for v in allowed)
        )
        return
    # The alternative with the fewest (then the deepest) errors is the one that was meant.
    _, chosen = min(
        candidates.items(),
        key=lambda kv: (len(kv[1]), -max(len(e.relative_path) for e in kv[1]), str(kv[0])),
    )
    for sub in chosen:
        yield from _describe(sub)


def _explain(
    errors: list[ValidationError], message: Any, revision: str, what: str
) -> str:
    errors = sorted(errors, key=lambda e: (list(map(str, e.absolute_path)), e.message))
    lines = [f"server message is not a valid {what} in MCP {revision}:"]
    best = best_match(errors)
    shown: list[str] = []
    for err in ([best] if best is not None else []) + errors:
        for text in _describe(err):
            if "  " + text not in shown:
                shown.append("  " + text)
    lines.extend(shown[:_MAX_REPORTED_ERRORS])
    if len(shown) > _MAX_REPORTED_ERRORS:
        lines.append(f"  … and {len(shown) - _MAX_REPORTED_ERRORS} more")
    lines.append(f"  message: {_shorten(message)}")
    return "\n".join(lines)


def _shorten_msg(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _check(revision: str, parts: tuple[tuple[str, str], ...], message: Any, what: str) -> None:
    validator = _validator(revision, parts)
    errors = list(validator.iter_errors(message))
    if errors:
        raise AssertionError(_explain(errors, message, revision, what))


# --------------------------------------------------------------------------- validation


def _valid_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _id_key(value: object) -> str:
    return json.dumps(value, sort_keys=True)


def validate_server_message(
    message: Any,
    revision: str,
    request_method: str | None = None,
    *,
    request_methods: Mapping[Any, str] | None = None,
) -> None:
    """Assert that *message*, written by our server, is valid in MCP *revision*.

    *request_method* is the method of the client request a response answers (``"tools/call"``);
    without it a result is checked against the ``ServerResult`` union only. For a batch (a list,
    2025-03-26 only) pass *request_methods*, a mapping from request id to method.
    Raises ``AssertionError`` with an explanation; returns ``None`` when the message is valid.
    """
    schema = _schema(revision)
    if isinstance(message, list):
        if not schema.batching:
            raise AssertionError(
                f"server sent a JSON-RPC batch, but batches exist only in MCP 2025-03-26, not in {revision} "
                f"(BP-13): {_shorten(message)}"
            )
        if not message:
            raise AssertionError("server sent an empty JSON-RPC batch ([]), which JSON-RPC 2.0 forbids")
        for index, element in enumerate(message):
            method = None
            if isinstance(element, dict) and _valid_id(element.get("id")) and request_methods:
                method = request_methods.get(element["id"])
            try:
                validate_server_message(element, revision, method)
            except AssertionError as exc:
                raise AssertionError(f"batch element {index}: {exc}") from None
        return
    if not isinstance(message, dict):
        raise AssertionError(
            f"server message is a JSON {type(message).__name__}, not an object: {_shorten(message)}"
        )

    if "method" in message:
        method = message["method"]
        if "id" in message:
            _validate_request(schema, message, method)
        else:
            _validate_notification(schema, message, method)
        return

    has_result, has_error = "result" in message, "error" in message
    if has_result and has_error:
        raise AssertionError(
            f"server response carries both `result` and `error` (BP-07): {_shorten(message)}"
        )
    if not has_result and not has_error:
        raise AssertionError(
            "server message is neither a request, a notification, a result nor an error "
            f"(no `method`, `result` or `error`): {_shorten(message)}"
        )
    if has_error:
        _validate_error(schema, message)
    else:
        _validate_result(schema, message, request_method)


def _validate_request(schema: _RevisionSchema, message: dict[str, Any], method: Any) -> None:
    rev = schema.revision
    if not schema.has("ServerRequest"):
        raise AssertionError(
            f"server sent a request ({method!r}), but in MCP {rev} servers send no requests (BP-11): "
            f"{_shorten(message)}"
        )
    definition = schema.server_requests.get(method) if isinstance(method, str) else None
    if definition is None:
        raise AssertionError(
            f"server sent a request with method {method!r}, which is not a server request in MCP {rev} "
            f"(server requests: {', '.join(sorted(schema.server_requests))}): {_shorten(message)}"
        )
    parts = (("", "JSONRPCRequest"), ("", definition))
    _check(rev, parts, message, f"{definition} request")


def _validate_notification(schema: _RevisionSchema, message: dict[str, Any], method: Any) -> None:
    rev = schema.revision
    definition = schema.server_notifications.get(method) if isinstance(method, str) else None
    if definition is None:
        raise AssertionError(
            f"server sent a notification with method {method!r}, which is not a server notification in "
            f"MCP {rev} (server notifications: {', '.join(sorted(schema.server_notifications))}): "
            f"{_shorten(message)}"
        )
    parts = (("", "JSONRPCNotification"), ("", definition))
    _check(rev, parts, message, f"{definition}")


def _validate_error(schema: _RevisionSchema, message: dict[str, Any]) -> None:
    rev = schema.revision
    if "id" not in message:
        if _requires_id(schema, schema.error_envelope):
            target_rev, definition = _ID_LESS_ERROR
        else:
            target_rev, definition = rev, schema.error_envelope
        what = f"{definition} (an error without `id`, judged by the {target_rev} schema)"
        _check(target_rev, (("", definition),), message, what)
        return
    if message["id"] is None:
        raise AssertionError(
            "server error response has `\"id\": null`, which no MCP schema allows (RequestId is a string "
            "or an integer); omit `id` when the request id could not be read (BP-06): "
            f"{_shorten(message)}"
        )
    _check(rev, (("", schema.error_envelope),), message, schema.error_envelope)


def _requires_id(schema: _RevisionSchema, definition: str) -> bool:
    return "id" in schema.defs[definition].get("required", [])


def _validate_result(schema: _RevisionSchema, message: dict[str, Any], request_method: str | None) -> None:
    rev = schema.revision
    if request_method is None:
        parts = (("", schema.result_envelope), ("result", "ServerResult"))
        _check(rev, parts, message, f"{schema.result_envelope} (result of an unknown request)")
        return
    skills = _SKILLS_EXTENSION_RESULTS.get(request_method)
    if skills is not None:  # the Skills extension, on every revision
        parts = (("", schema.result_envelope), ("result", skills))
        _check(rev, parts, message, f"{schema.result_envelope} + {skills} (answer to {request_method}, skills extension)")
        return
    if rev in MODERN_REVISIONS:  # the tasks extension (see _TASKS_EXTENSION_DEFS)
        result_value = message.get("result")
        ext = _TASKS_EXTENSION_RESULTS.get(request_method)
        if request_method == "tools/call" and isinstance(result_value, dict) and result_value.get("resultType") == "task":
            ext = "CreateTaskResult"
        if ext is not None:
            parts = (("", schema.result_envelope), ("result", ext))
            _check(rev, parts, message, f"{schema.result_envelope} + {ext} (answer to {request_method}, tasks extension)")
            return
    try:
        result = result_definition(rev, request_method)
    except KeyError:
        raise AssertionError(
            f"server answered a {request_method!r} request with a result, but {request_method!r} is not a "
            f"client request in MCP {rev}; the answer must be an error (-32601): {_shorten(message)}"
        ) from None
    if schema.has(result + "Response"):
        # 2026-07-28: the schema names the response type, which also lists the alternatives
        # (e.g. InputRequiredResult for tools/call).
        parts: tuple[tuple[str, str], ...] = (("", result + "Response"),)
        what = f"{result}Response (answer to {request_method})"
    else:
        parts = (("", schema.result_envelope), ("result", result))
        what = f"{schema.result_envelope} + {result} (answer to {request_method})"
    _check(rev, parts, message, what)


# --------------------------------------------------------------------------- traffic logs


@dataclass(frozen=True, slots=True)
class WireRecord:
    #: 1-based line number in the log file.
    lineno: int
    #: "c2s" (client to server) or "s2c" (server to client).
    direction: str
    #: the raw line as relayed (without its line terminator).
    line: str

    def decode(self) -> Any:
        """The JSON value of the line; raises ``ValueError`` when it is not JSON."""
        return json.loads(self.line)


class WireLog:
    """A traffic log written by ``tests/tap.py``: one ``{"dir", "line"}`` JSON object per line."""

    def __init__(self, records: list[WireRecord], path: Path | None = None) -> None:
        self.records = records
        self.path = path

    @classmethod
    def parse(cls, text: str, path: Path | None = None) -> WireLog:
        records: list[WireRecord] = []
        for lineno, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw)
            except ValueError as exc:
                raise ValueError(f"{path or '<log>'}:{lineno}: not a JSON log record: {exc}") from None
            if (
                not isinstance(entry, dict)
                or entry.get("dir") not in ("c2s", "s2c")
                or not isinstance(entry.get("line"), str)
            ):
                raise ValueError(f"{path or '<log>'}:{lineno}: not a {{dir, line}} log record: {raw[:200]}")
            line = entry["line"]
            if line.endswith("\n"):
                line = line[:-1]
            records.append(WireRecord(lineno, entry["dir"], line))
        return cls(records, path)

    @classmethod
    def read(cls, path: str | Path) -> WireLog:
        path = Path(path)
        return cls.parse(path.read_text(encoding="utf-8"), path)

    def __iter__(self) -> Iterator[WireRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def lines(self, direction: str) -> list[str]:
        return [r.line for r in self.records if r.direction == direction]

    def messages(self, direction: str) -> list[Any]:
        """The decoded messages sent in *direction* (lines that are not JSON are skipped)."""
        out: list[Any] = []
        for record in self.records:
            if record.direction == direction:
                try:
                    out.append(record.decode())
                except ValueError:
                    continue
        return out


def _modern_version(message: dict[str, Any]) -> str | None:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get("io.modelcontextprotocol/protocolVersion") if isinstance(meta, dict) else None
    return version if version in MODERN_REVISIONS else None


def check_wire_log(path: str | Path) -> int:
    """Validate every server→client message of the traffic log at *path*; return how many.

    The revision of a stream is the ``protocolVersion`` of the server's ``initialize`` result;
    messages before it are judged as ``PRE_NEGOTIATION_REVISION`` (2025-11-25), and the
    ``initialize`` result itself as the revision it announces. A later ``initialize`` (a log
    holding several runs one after another) starts over. When no ``initialize`` was answered and
    the client speaks 2026-07-28 (``_meta["io.modelcontextprotocol/protocolVersion"]``), its
    requests' answers and the messages after them are judged as that revision.

    Responses are paired with the client's requests by id, so each result is checked against its
    method's result type; a response whose id answers no pending client request is an error.
    Raises ``AssertionError`` listing every invalid message.
    """
    log = WireLog.read(path)
    where = str(path)
    negotiated: str | None = None
    modern: str | None = None
    # id -> the open client requests with that id (a list: a duplicated in-flight id is
    # answered twice, once with the duplicate's error, and both answers are legitimate)
    pending: dict[str, list[tuple[str | None, str | None]]] = {}
    failures: list[str] = []
    checked = 0

    def stream_revision() -> str:
        return negotiated or modern or PRE_NEGOTIATION_REVISION

    for record in log:
        if record.direction == "c2s":
            try:
                value = record.decode()
            except (ValueError, RecursionError):
                continue  # the server's answer to garbage is checked when it comes
            for message in value if isinstance(value, list) else [value]:
                if not isinstance(message, dict) or "result" in message or "error" in message:
                    continue
                method = message.get("method") if isinstance(message.get("method"), str) else None
                hint = _modern_version(message) if method else None
                if hint and negotiated is None:
                    modern = hint
                if method == "initialize":
                    negotiated = None
                    modern = None
                if "id" in message and _valid_id(message["id"]):
                    # an invalid request with a readable id is answered too, with an error (BP-06)
                    pending.setdefault(_id_key(message["id"]), []).append((method, hint))
            continue

        try:
            value = record.decode()
        except (ValueError, RecursionError):
            failures.append(
                f"{where}:{record.lineno}: server wrote a line that is not JSON (ST-02): {record.line[:200]!r}"
            )
            checked += 1
            continue
        elements = value if isinstance(value, list) else [value]
        revision = stream_revision()
        methods: dict[Any, str] = {}
        for element in elements:
            if not isinstance(element, dict) or "method" in element or "id" not in element:
                continue
            if not _valid_id(element["id"]):
                continue  # validation reports the bad id
            waiting = pending.get(_id_key(element["id"]))
            entry = waiting.pop(0) if waiting else None
            if waiting is not None and not waiting:
                del pending[_id_key(element["id"])]
            if entry is None:
                failures.append(
                    f"{where}:{record.lineno}: server response id {element['id']!r} answers no pending "
                    f"client request (BP-05)"
                )
                continue
            method, hint = entry
            if method is None:
                continue  # the answer to an invalid message: an error, checked as one below
            methods[element["id"]] = method
            if hint and negotiated is None:
                revision = hint
            if method == "initialize" and isinstance(element.get("result"), dict):
                announced = element["result"].get("protocolVersion")
                if announced in REVISIONS:
                    negotiated = announced
                    revision = announced
                else:
                    failures.append(
                        f"{where}:{record.lineno}: initialize result announces protocolVersion "
                        f"{announced!r}, which is not a known MCP revision ({', '.join(REVISIONS)})"
                    )
        checked += len(elements) if isinstance(value, list) and value else 1
        try:
            if isinstance(value, list):
                validate_server_message(value, revision, request_methods=methods)
            else:
                method = methods.get(value.get("id")) if isinstance(value, dict) and _valid_id(value.get("id")) else None
                validate_server_message(value, revision, method)
        except AssertionError as exc:
            failures.append(f"{where}:{record.lineno}: {exc}")

    if failures:
        shown = failures[:20]
        more = f"\n… and {len(failures) - 20} more" if len(failures) > 20 else ""
        raise AssertionError(
            f"{len(failures)} problem(s) in the server messages of {where} ({checked} checked):\n"
            + "\n".join(shown)
            + more
        )
    return checked
