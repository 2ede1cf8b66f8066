"""Content helpers: what a tool, resource or prompt hands back.

Each helper returns a :class:`Content` (a dict of the wire shape, TL-09) so it
can be returned as-is, put in a list, or embedded in a prompt message.
"""

from __future__ import annotations

import base64
from typing import Any, Literal

__all__ = [
    "Content",
    "ToolResult",
    "text",
    "image",
    "audio",
    "resource",
    "resource_link",
    "user",
    "assistant",
]


class Content(dict):  # type: ignore[type-arg]
    """A content block (text, image, audio, resource, resource_link)."""

    __mcp_content__ = True
    __slots__ = ()


def _b64(data: bytes | str) -> str:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(data)).decode("ascii")
    return data  # already base64 text


def _common(block: Content, annotations: dict[str, Any] | None, meta: dict[str, Any] | None) -> Content:
    if annotations:
        block["annotations"] = annotations
    if meta:
        block["_meta"] = meta
    return block


def text(value: str, *, annotations: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> Content:
    return _common(Content(type="text", text=value), annotations, meta)


def image(
    data: bytes | str, mime_type: str = "image/png", *, annotations: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> Content:
    """Image content; ``data`` is raw bytes (encoded here) or base64 text (PM-04)."""
    return _common(Content(type="image", data=_b64(data), mimeType=mime_type), annotations, meta)


def audio(
    data: bytes | str, mime_type: str = "audio/wav", *, annotations: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> Content:
    return _common(Content(type="audio", data=_b64(data), mimeType=mime_type), annotations, meta)


def resource(
    uri: str,
    *,
    text: str | None = None,
    blob: bytes | str | None = None,
    mime_type: str | None = None,
    annotations: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> Content:
    """An embedded resource: exactly one of ``text`` or ``blob`` (RS-04: blobs are base64)."""
    if (text is None) == (blob is None):
        raise ValueError("resource() takes exactly one of text= or blob=")
    contents: dict[str, Any] = {"uri": uri}
    if mime_type:
        contents["mimeType"] = mime_type
    if text is not None:
        contents["text"] = text
    else:
        contents["blob"] = _b64(blob)  # type: ignore[arg-type]
    return _common(Content(type="resource", resource=contents), annotations, meta)


def resource_link(
    uri: str,
    name: str,
    *,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    size: int | None = None,
    annotations: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> Content:
    block = Content(type="resource_link", uri=uri, name=name)
    if title is not None:
        block["title"] = title
    if description is not None:
        block["description"] = description
    if mime_type is not None:
        block["mimeType"] = mime_type
    if size is not None:
        block["size"] = size
    return _common(block, annotations, meta)


def _message(role: Literal["user", "assistant"], content: Any) -> dict[str, Any]:
    if isinstance(content, str):
        content = text(content)
    return {"role": role, "content": content}


def user(content: Any) -> dict[str, Any]:
    """A prompt message from the user (text or any content block)."""
    return _message("user", content)


def assistant(content: Any) -> dict[str, Any]:
    return _message("assistant", content)


class ToolResult:
    """A complete tool result, sent as given (content, structured output, error flag, _meta)."""

    __slots__ = ("content", "structured", "is_error", "meta")

    def __init__(
        self,
        content: list[Any] | Any = None,
        *,
        structured: Any = None,
        is_error: bool = False,
        meta: dict[str, Any] | None = None,
    ) -> None:
        if content is None:
            content = []
        elif not isinstance(content, list):
            content = [content]
        self.content = [text(c) if isinstance(c, str) else c for c in content]
        self.structured = structured
        self.is_error = is_error
        self.meta = meta

    def to_result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"content": self.content}
        if self.structured is not None:
            out["structuredContent"] = self.structured
        if self.is_error:
            out["isError"] = True
        if self.meta:
            out["_meta"] = self.meta
        return out
