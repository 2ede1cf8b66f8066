"""Reading what a stdio server wrote to stdout that was not a one-line JSON-RPC message (ST-01,
ST-02): JSON-RPC messages pretty-printed over several lines, and everything else (banners, logs)."""

from __future__ import annotations

from typing import Any

from .. import _json

__all__ = ["split_noise", "pretty_printed"]


def _is_message(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("jsonrpc") == "2.0"


def split_noise(noise: list[bytes]) -> tuple[list[tuple[dict[str, Any], int]], list[bytes]]:
    """(the JSON-RPC messages spread over several lines, each with its line count; the other
    lines). A message is found by joining the lines from one that starts with "{" until they
    parse."""
    messages: list[tuple[dict[str, Any], int]] = []
    other: list[bytes] = []
    i = 0
    while i < len(noise):
        found = _message_at(noise, i) if noise[i].lstrip().startswith(b"{") else None
        if found is None:
            other.append(noise[i])
            i += 1
        else:
            messages.append(found)
            i += found[1]
    return messages, other


def _message_at(noise: list[bytes], start: int) -> tuple[dict[str, Any], int] | None:
    """The JSON-RPC message whose lines begin at ``start``, and how many lines it spans."""
    for end in range(start + 2, len(noise) + 1):
        try:
            obj = _json.loads(b"\n".join(noise[start:end]))
        except _json.JSONDecodeError:
            continue
        return (obj, end - start) if _is_message(obj) else None
    return None


def pretty_printed(noise: list[bytes]) -> dict[str, Any] | None:
    """The first JSON-RPC message that ``noise`` spells over several lines, or None."""
    messages, _ = split_noise(noise)
    return messages[0][0] if messages else None
