"""The 2026-07-28 binding of Streamable HTTP: one POST, one request, no session.

Used by the HTTP app for a POST whose ``MCP-Protocol-Version`` (or body ``_meta``) names a
modern revision. What this revision adds on the wire lives here: the standard request
headers (``Mcp-Method``, ``Mcp-Name``) and the headers mirrored from tool parameters
(``Mcp-Param-*``, from ``x-mcp-header``), each checked against the body (HM-11, HM-15..HM-20,
-32020 with HTTP 400); HTTP statuses that pair with errors (HM-12, HM-13, HM-22); and
closing the response stream as cancellation (HM-10).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from ..protocol import revisions
from ..protocol.errors import HEADER_MISMATCH, INVALID_REQUEST, McpError

__all__ = ["modern_version", "check_headers", "status_for", "NAME_PARAM"]

#: HM-15: which body field Mcp-Name must equal, per method
NAME_PARAM = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
_SENTINEL = re.compile(r"=\?base64\?(.*)\?=", re.S)
_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
#: RFC 9110 field-value: visible ASCII, space and tab (no CR, LF or other controls)
_FIELD_VALUE = re.compile(r"[\x20-\x7e\t]*")


def modern_version(headers: dict[bytes, bytes], payload: Any) -> str | None:
    """The version a POST of the modern envelope names, or None for the handshake era.

    A POST is modern when its header names a modern revision, or when its body carries the
    per-request ``_meta`` version (even an unknown one: it then gets -32022, VN-02, rather than
    the session errors of the handshake era).
    """
    header = headers.get(b"mcp-protocol-version")
    version = header.decode("latin-1").strip() if header is not None else None
    if version in revisions.MODERN_VERSIONS:
        return version
    if type(payload) is dict:
        params = payload.get("params")
        meta = params.get("_meta") if type(params) is dict else None
        if type(meta) is dict and revisions.PROTOCOL_VERSION_KEY in meta:
            return version if version is not None else str(meta[revisions.PROTOCOL_VERSION_KEY])
    return None


def _mismatch(message: str, data: dict[str, Any] | None = None) -> McpError:
    return McpError(HEADER_MISMATCH, message, data)


def decode_value(raw: bytes, header: str) -> str:
    """HM-16: ``=?base64?...?=`` carries UTF-8 as Base64; anything else is literal."""
    text = raw.decode("latin-1")
    if not _FIELD_VALUE.fullmatch(text):
        raise _mismatch(f"The {header} header has invalid characters.", {"header": header})
    text = text.strip(" \t")
    found = _SENTINEL.fullmatch(text)
    if found is None:
        try:
            return raw.decode("utf-8").strip(" \t")
        except UnicodeDecodeError:
            return text
    encoded = found.group(1)
    if not _B64.fullmatch(encoded) or len(encoded) % 4:
        raise _mismatch(f"The {header} header is not valid Base64.", {"header": header})
    try:
        return base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise _mismatch(f"The {header} header is not valid Base64 of UTF-8 text.", {"header": header}) from None


def _same(header_value: str, body_value: Any) -> bool:
    if isinstance(body_value, bool):
        return header_value == ("true" if body_value else "false")
    if isinstance(body_value, int):
        try:
            return float(header_value) == body_value  # HM-17: 42.0 equals 42
        except ValueError:
            return False
    return header_value == body_value


def _mirrored(schema: Any) -> list[tuple[str, str]]:
    """(property, header name) for every x-mcp-header property reachable through properties only (HM-19)."""
    out: list[tuple[str, str]] = []
    props = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(props, dict):
        for name, prop in props.items():
            if isinstance(prop, dict) and isinstance(prop.get("x-mcp-header"), str):
                out.append((name, prop["x-mcp-header"]))
    return out


def check_headers(headers: dict[bytes, bytes], payload: dict[str, Any], version: str, server: Any) -> None:
    """HM-11, HM-15..HM-20: the headers must be present and say what the body says."""
    params = payload.get("params") if type(payload.get("params")) is dict else {}
    meta = params.get("_meta") if type(params.get("_meta")) is dict else {}
    header_version = headers.get(b"mcp-protocol-version")
    if header_version is None:
        raise _mismatch("The MCP-Protocol-Version header is required.", {"header": "MCP-Protocol-Version"})
    body_version = meta.get(revisions.PROTOCOL_VERSION_KEY)
    if body_version is not None and body_version != version:
        raise _mismatch(
            "The MCP-Protocol-Version header does not match _meta.",
            {"header": "MCP-Protocol-Version", "body": body_version},
        )
    method = payload.get("method")
    raw_method = headers.get(b"mcp-method")
    if raw_method is None:
        raise _mismatch("The Mcp-Method header is required.", {"header": "Mcp-Method"})
    if decode_value(raw_method, "Mcp-Method") != method:  # HM-18: values are case-sensitive
        raise _mismatch("The Mcp-Method header does not match the body's method.", {"header": "Mcp-Method"})
    field = NAME_PARAM.get(method) if isinstance(method, str) else None
    if field is not None:
        raw_name = headers.get(b"mcp-name")
        if raw_name is None:
            raise _mismatch(f"The Mcp-Name header is required for {method}.", {"header": "Mcp-Name"})
        if decode_value(raw_name, "Mcp-Name") != params.get(field):
            raise _mismatch(f"The Mcp-Name header does not match params.{field}.", {"header": "Mcp-Name"})
    if method == "tools/call":
        tool = server._tools.get(params.get("name"))
        arguments = params.get("arguments") if type(params.get("arguments")) is dict else {}
        if tool is not None:
            for prop, name in _mirrored(tool.input_schema):
                header = f"Mcp-Param-{name}"
                raw = headers.get(header.lower().encode("latin-1"))
                value = arguments.get(prop)
                if value is None:
                    continue  # HM-20: an absent or null argument expects no header
                if raw is None:
                    raise _mismatch(f"The {header} header is required when {prop!r} is given.", {"header": header})
                if not _same(decode_value(raw, header), value):
                    raise _mismatch(f"The {header} header does not match the argument {prop!r}.", {"header": header})


def status_for(code: int) -> int:
    """HM-12, HM-13, HM-22: the HTTP status that goes with a modern error."""
    if code == -32601:
        return 404
    if code in (-32602, -32020, -32021, -32022, INVALID_REQUEST, -32700):
        return 400
    return 200
