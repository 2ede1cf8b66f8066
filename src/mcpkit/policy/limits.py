"""Size limits on tool arguments and results, and sanitizing of tool output (TL-11).

TL-11 asks servers to validate tool inputs and sanitize tool outputs. Three guards live here:

* **Argument size** (:func:`check_argument_size`): a call whose arguments encode to more than
  ``max_argument_bytes`` is refused before the handler sees it.
* **Output sanitizing** (:func:`strip_control`, :func:`sanitize_result`): tool output is
  often shown in a terminal or a chat window. Terminal escape sequences in it can recolour,
  hide or rewrite text, set the window title, plant hyperlinks or write the clipboard
  (OSC 52); Unicode bidi overrides can make text read differently from what it is. They are
  removed from text content before it leaves the server.
* **Result size** (:func:`truncate_result`): a result over ``max_result_bytes`` is cut down to
  fit, with a notice saying so, rather than sent whole or dropped.

:class:`Limits` holds the numbers (including the call timeout, which the dispatcher enforces by
cancelling the handler's task; nothing here reads a clock).

Hot path: each guard does one cheap check and returns its input object untouched when there is
nothing to do (a precompiled character-class search for sanitizing, one encode for sizes).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from mcpkit._json import JSONDecodeError, dumps, loads
from mcpkit.protocol.errors import E_SCHEMA_VALIDATION, ToolError

__all__ = [
    "INHERIT",
    "MIN_RESULT_BYTES",
    "Limits",
    "check_argument_size",
    "check_limit",
    "strip_structured",
    "json_size",
    "sanitize_result",
    "strip_control",
    "truncate_result",
]

# --------------------------------------------------------------------------------------------
# Sanitizing

# Every character strip_control removes on its own: C0 controls but TAB, LF and CR; DEL and the
# C1 controls; the bidi embeddings/overrides (U+202A-E) and isolates (U+2066-9).
_CONTROL_CLASS = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
_ANY_CONTROL = re.compile(f"[{_CONTROL_CLASS}]")
# Whole sequences first, so their parameters go with them (``\x1b[31m`` leaves no ``[31m``);
# then any control character left on its own. Strings (OSC, DCS, SOS, PM, APC) run to their
# terminator (BEL, ESC \ or the 8-bit ST) or, unterminated, to the next ESC or the end, as a
# terminal would swallow them.
_SEQUENCE = re.compile(
    "(?:\x1b\\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI: ESC [ or 8-bit CSI, params, intermediates, final
    "|(?:\x1b[\\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\\\|\x9c)?"  # strings
    "|\x1b[ -/]*[0-~]"  # other escape sequences: ESC, intermediates, final (ESC 7, ESC ( B, ESC c)
    f"|[{_CONTROL_CLASS}]"
)


def strip_control(text: str) -> str:
    """``text`` without terminal control sequences, control characters or bidi controls.

    Keeps TAB, LF and CR. Returns ``text`` itself (the same object) when there is nothing to
    remove; the result never contains a character :func:`strip_control` would remove, so
    applying it twice changes nothing.
    """
    if _ANY_CONTROL.search(text) is None:
        return text
    return _SEQUENCE.sub("", text)


def strip_structured(value: Any) -> Any:
    """``value`` (JSON) with :func:`strip_control` applied to every string in it, keys included;
    ``value`` itself (the same object) when nothing changed, so a clean result costs no copy."""
    if isinstance(value, str):
        return strip_control(value)
    if isinstance(value, dict):
        out = None
        for key, item in value.items():
            clean_key = strip_control(key) if isinstance(key, str) else key
            clean = strip_structured(item)
            if out is None and (clean is not item or clean_key is not key):
                out = {}
                for k, v in value.items():
                    if k == key:
                        break
                    out[k] = v
            if out is not None:
                out[clean_key] = clean
        return value if out is None else out
    if isinstance(value, list):
        items = [strip_structured(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    if value is None or type(value) in (int, float, bool):
        return value
    # Not plain JSON (a tuple, a set, an object with __json__): its JSON, made once and walked,
    # so what is checked is what is sent, whatever such an object would say next time
    try:
        plain = loads(dumps(value))
    except (TypeError, ValueError):
        return value  # not JSON at all: the encoder refuses it when the answer is made
    return strip_structured(plain)


def _clean_fields(d: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any] | None:
    """A copy of ``d`` with the string values at ``keys`` stripped, or None if none changed."""
    out = None
    for key in keys:
        value = d.get(key)
        if isinstance(value, str):
            clean = strip_control(value)
            if clean is not value:
                if out is None:
                    out = dict(d)
                out[key] = clean
    return out


_TEXT_KEYS = ("text",)
_LINK_KEYS = ("name", "title", "description")


def sanitize_result(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` (a CallToolResult) with control sequences removed from what a user may see.

    Covers text blocks, text embedded resources, and the name/title/description of resource
    links. Returns ``result`` itself when nothing changed, else a shallow copy with new blocks;
    the input and its blocks are never modified (a handler may return a shared constant).

    ``structuredContent`` is not touched here: the call chain strips its strings with
    :func:`strip_structured` (policy/envelope.py ``sanitized``), since hosts print structured
    values too, and rebuilds its text mirror from the clean value.
    """
    content = result.get("content")
    if not content or not isinstance(content, list):
        return result
    new_blocks: list[Any] | None = None
    for i, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        new_block = None
        if kind == "text":
            new_block = _clean_fields(block, _TEXT_KEYS)
        elif kind == "resource":
            resource = block.get("resource")
            if isinstance(resource, dict):
                new_resource = _clean_fields(resource, _TEXT_KEYS)
                if new_resource is not None:
                    new_block = dict(block)
                    new_block["resource"] = new_resource
        elif kind == "resource_link":
            new_block = _clean_fields(block, _LINK_KEYS)
        if new_block is not None:
            if new_blocks is None:
                new_blocks = list(content)
            new_blocks[i] = new_block
    if new_blocks is None:
        return result
    out = dict(result)
    out["content"] = new_blocks
    return out


# --------------------------------------------------------------------------------------------
# Sizes

#: The smallest ``max_result_bytes`` accepted: room for the notice that replaces a result.
MIN_RESULT_BYTES: Final = 200


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON, as it goes on the wire."""
    return len(dumps(value))


def check_limit(max_bytes: int) -> int:
    """``max_bytes`` if it is usable as a result size limit, else ValueError (at configuration time)."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int):
        raise TypeError(f"a result size limit must be an integer number of bytes, got {max_bytes!r}")
    if max_bytes < MIN_RESULT_BYTES:
        raise ValueError(
            f"a result size limit of {max_bytes} bytes is too small: "
            f"use at least {MIN_RESULT_BYTES} so a truncation notice fits"
        )
    return max_bytes


def check_argument_size(arguments: Any, max_bytes: int, tool: str) -> None:
    """Raise E_SCHEMA_VALIDATION if ``arguments`` encode to more than ``max_bytes`` bytes."""
    size = len(dumps(arguments))
    if size > max_bytes:
        raise ToolError(
            f"The arguments to tool {tool!r} are {size} bytes, over the {max_bytes}-byte limit.",
            code=E_SCHEMA_VALIDATION,
            details={"size": size, "limit": max_bytes},
            suggested_fix=(
                f"Call {tool} with smaller arguments (at most {max_bytes} bytes of JSON), "
                "for example by splitting the input across several calls."
            ),
        )


def _truncation_notice(over: int, max_bytes: int) -> str:
    return f"[result truncated: {over} bytes over the {max_bytes}-byte limit]"


def _too_large(size: int, max_bytes: int, structured: bool) -> dict[str, Any]:
    why = (
        "its structured content cannot be shortened without breaking its schema"
        if structured
        else "it cannot be shortened to fit"
    )
    # < 170 bytes of JSON even with 12-digit sizes, so it fits any limit check_limit accepts
    text = f"Result too large: {size} bytes, limit {max_bytes}; {why}."
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _cut_text(text: str, budget: int) -> str:
    """The longest prefix of ``text`` whose JSON string (quotes included) is at most ``budget`` bytes."""
    encoded = dumps(text)
    if len(encoded) <= budget:
        return text
    end = max(budget - 1, 1)  # keep encoded[:end], then close the quote
    # not inside a UTF-8 sequence: the first byte dropped must not be a continuation byte
    while end > 1 and (encoded[end] & 0xC0) == 0x80:
        end -= 1
    # not inside an escape (\n, \\, \u001b): such a cut leaves invalid JSON, so step back
    for _ in range(6):
        try:
            prefix: str = loads(encoded[:end] + b'"')
            return prefix
        except JSONDecodeError:
            end -= 1
    return ""  # unreachable: no JSON escape is longer than 6 bytes


def _text_slot(block: Any) -> tuple[dict[str, Any], str] | None:
    """The dict holding a shrinkable ``text`` in ``block`` (a text block or text resource)."""
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    holder = block if kind == "text" else block.get("resource") if kind == "resource" else None
    if isinstance(holder, dict):
        text = holder.get("text")
        if isinstance(text, str):
            return holder, text
    return None


def _with_text(block: dict[str, Any], text: str) -> dict[str, Any]:
    if block.get("type") == "text":
        return {**block, "text": text}
    return {**block, "resource": {**block["resource"], "text": text}}


_OMITTED_KINDS = frozenset({"image", "audio", "resource", "resource_link"})


def truncate_result(result: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """``result`` cut down so that its compact JSON is at most ``max_bytes`` bytes.

    Returns ``result`` itself when it fits. Otherwise, largest blocks first: a text block (or a
    text resource) is shortened at a character boundary, or removed if it would be emptied; any
    other block (image, audio, blob) is replaced by a short text notice, and removed if even that
    is too much; room a removal freed beyond the need goes back to the texts removed. One text
    block ``"[result truncated: N bytes over the M-byte limit]"`` is appended. If what is not
    content (``structuredContent``, ``_meta``) cannot fit with the notice, the result becomes an
    ``isError`` result with a notice only: a truncated structured value would no longer match
    the tool's outputSchema. ``max_bytes`` must pass :func:`check_limit`. The input is never
    modified.
    """
    size = json_size(result)
    if size <= max_bytes:
        return result
    notice = {"type": "text", "text": _truncation_notice(size - max_bytes, max_bytes)}
    content = result.get("content")
    blocks: list[Any] = list(content) if isinstance(content, list) else []
    out = dict(result)
    out["content"] = [notice]
    if json_size(out) > max_bytes:
        return _too_large(size, max_bytes, "structuredContent" in result)
    if not isinstance(content, list):
        return out  # malformed content: the rest of the result and the notice are what fits
    # Bytes to remove from the full list plus notice. Every edit has an exact cost in compact
    # JSON: removing a block takes it and one comma (the notice always follows it).
    need = size + json_size(notice) + (1 if blocks else 0) - max_bytes
    out["content"] = _shrink_blocks(blocks, need)
    out["content"].append(notice)
    if json_size(out) > max_bytes:  # defensive: the arithmetic is exact
        out["content"] = [notice]
    return out


def _shrink_blocks(blocks: list[Any], need: int) -> list[Any]:
    """``blocks`` (a copy, edited) made at least ``need`` bytes smaller, taking largest first."""
    sizes = [json_size(block) for block in blocks]
    order = sorted(range(len(blocks)), key=sizes.__getitem__, reverse=True)
    removed = [False] * len(blocks)
    for i in order:
        if need <= 0:
            break
        block = blocks[i]
        slot = _text_slot(block)
        if slot is not None:
            encoded_len = json_size(slot[1])
            if encoded_len - 2 > need:  # shortening this text is enough
                text = _cut_text(slot[1], encoded_len - need)
                blocks[i] = _with_text(block, text)
                need -= encoded_len - json_size(text)
                break
        else:
            kind = block.get("type") if isinstance(block, dict) else None
            kind = kind if kind in _OMITTED_KINDS else "non-text"
            replacement = {"type": "text", "text": f"[{kind} content omitted: {sizes[i]} bytes]"}
            saved = sizes[i] - json_size(replacement)
            if saved > 0:  # (a block smaller than its notice is dropped instead)
                blocks[i] = replacement
                sizes[i] -= saved
                need -= saved
                continue
        removed[i] = True  # a text that would be emptied, or a tiny non-text block
        need -= sizes[i] + 1
    for i in order:  # still over with every text gone: drop the omission notices too
        if need <= 0:
            break
        if not removed[i]:
            removed[i] = True
            need -= sizes[i] + 1
    for i in order:
        # A later, larger saving may have overshot: give the room back to removed texts.
        if need >= 0:
            break
        slot = _text_slot(blocks[i]) if removed[i] else None
        if slot is not None:
            encoded_len = json_size(slot[1])
            skeleton = sizes[i] + 1 - (encoded_len - 2)  # the block back, with an empty text
            if -need - skeleton > 0:
                text = _cut_text(slot[1], -need - skeleton + 2)
                if text:
                    blocks[i] = _with_text(blocks[i], text)
                    removed[i] = False
                    need += skeleton + json_size(text) - 2
    return [block for i, block in enumerate(blocks) if not removed[i]]


# --------------------------------------------------------------------------------------------
# Configuration


class _Inherit:
    __slots__ = ()

    def __repr__(self) -> str:
        return "INHERIT"

    def __reduce__(self) -> str:
        return "INHERIT"


#: In a per-tool override, "use the server's value". (None means "no limit", as everywhere.)
INHERIT: Final = _Inherit()


@dataclass(frozen=True, slots=True)
class Limits:
    """The size, time and sanitizing limits for tool calls.

    ``None`` turns a limit off. ``timeout`` is in seconds; the dispatcher enforces it by
    cancelling the handler's task and answering E_TIMEOUT. Server-wide limits are a plain
    ``Limits()``; a tool's own limits are an override merged onto them::

        server_limits = Limits(max_result_bytes=1_000_000)
        tool_limits = server_limits.merge({"timeout": 5.0})         # keys left out inherit
        tool_limits = server_limits.merge(Limits.override(timeout=None))  # this tool: no timeout

    In an override, :data:`INHERIT` (the default of :meth:`override`, and any key missing
    from a mapping) means "the server's value" and None still means "no limit", so a tool can
    lift a server limit as well as tighten it.
    """

    max_argument_bytes: int | None = 1_000_000
    max_result_bytes: int | None = 4_000_000
    timeout: float | None = 60.0
    sanitize: bool = True

    def __post_init__(self) -> None:
        arg = self.max_argument_bytes
        if arg is not None and arg is not INHERIT and (isinstance(arg, bool) or not isinstance(arg, int) or arg < 1):
            raise ValueError(f"max_argument_bytes must be a positive integer or None, got {arg!r}")
        if self.max_result_bytes is not None and self.max_result_bytes is not INHERIT:
            check_limit(self.max_result_bytes)
        timeout = self.timeout
        if timeout is not None and timeout is not INHERIT:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
                raise ValueError(f"timeout must be a number of seconds or None, got {timeout!r}")
            if not (math.isfinite(timeout) and timeout > 0):
                raise ValueError(f"timeout must be a positive, finite number of seconds, got {timeout!r}")
            object.__setattr__(self, "timeout", float(timeout))
        if self.sanitize is not INHERIT and not isinstance(self.sanitize, bool):
            raise ValueError(f"sanitize must be True or False, got {self.sanitize!r}")

    @classmethod
    def override(cls, **values: Any) -> Limits:
        """A per-tool override: the fields given, every other one :data:`INHERIT`."""
        base = {f.name: INHERIT for f in fields(cls)}
        unknown = set(values) - set(base)
        if unknown:
            raise TypeError(f"unknown limit(s): {', '.join(sorted(unknown))}")
        base.update(values)
        return cls(**base)

    def merge(self, override: Limits | Mapping[str, Any] | None) -> Limits:
        """These limits with ``override``'s values on top (INHERIT or a missing key keeps ours)."""
        if override is None:
            return self
        if isinstance(override, Limits):
            values = {f.name: getattr(override, f.name) for f in fields(self)}
        else:
            unknown = set(override) - {f.name for f in fields(self)}
            if unknown:
                raise TypeError(f"unknown limit(s): {', '.join(sorted(unknown))}")
            values = dict(override)
        changes = {k: v for k, v in values.items() if v is not INHERIT and v != getattr(self, k)}
        if not changes:
            return self
        return Limits(**{f.name: changes.get(f.name, getattr(self, f.name)) for f in fields(self)})
