"""The one place that encodes and decodes JSON.

orjson works on bytes, which is what every transport moves; nothing else in
mcpkit imports a JSON library.
"""

from __future__ import annotations

from typing import Any

import orjson

JSONDecodeError = orjson.JSONDecodeError

#: bytes.translate table: every ASCII digit becomes 1, everything else 0, so that a run of
#: nineteen digits (possibly an integer beyond 64 bits) is a plain substring search; this scans
#: a MiB in well under a millisecond where a regex took tens
_DIGITS = bytes(1 if 0x30 <= i <= 0x39 else 0 for i in range(256))
_RUN = b"\x01" * 19
#: 2**63: the smallest magnitude orjson can have turned from an integer into a float
_HUGE = float(2**63)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode JSON; integers beyond 64 bits stay exact integers (orjson would read them as
    floats, so an id of 2**64 or an argument of 2**70 would silently change).

    The common message pays for one orjson decode and one C-speed scan of its bytes; only a
    message with nineteen digits in a row is walked, and only one whose decoded form really
    holds such a float is decoded again, by the standard library, which keeps integers exact."""
    obj = orjson.loads(data)
    raw = data if type(data) is bytes else data.encode() if isinstance(data, str) else bytes(data)
    if len(raw) >= 19 and _RUN in raw.translate(_DIGITS) and _has_huge_float(obj):
        import json

        try:
            return json.loads(raw)
        except (RecursionError, ValueError):  # stdlib json nests less deeply than orjson
            return obj
    return obj


def _has_huge_float(obj: Any) -> bool:
    """Whether a decoded value holds a float of at least 2**63 in magnitude anywhere (what
    orjson makes of an integer it cannot hold); iterative, so deep nesting costs no stack."""
    stack = [obj]
    pop, push = stack.pop, stack.extend
    while stack:
        value = pop()
        kind = type(value)
        if kind is float:
            if abs(value) >= _HUGE:
                return True
        elif kind is dict:
            push(value.values())
        elif kind is list:
            push(value)
    return False

_OPTIONS = orjson.OPT_NON_STR_KEYS
#: the options every encode here uses (for callers that call orjson directly on a hot path)
OPTIONS = _OPTIONS


def _default(obj: Any) -> Any:
    # Sets, tuples of odd types and objects with a to-JSON hook: the shapes a
    # handler plausibly returns; anything else is a programming error.
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    to_json = getattr(obj, "__json__", None)
    if to_json is not None:
        return to_json()
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes without newlines (ST-01)."""
    try:
        return orjson.dumps(obj, default=_default, option=_OPTIONS)
    except orjson.JSONEncodeError as exc:
        if "64-bit" not in str(exc):
            raise TypeError(str(exc)) from None
        # orjson stops at 64-bit integers; JSON (and a JSON-RPC id) does not
        import json

        return json.dumps(obj, default=_default, ensure_ascii=False, separators=(",", ":")).encode()


def kept(data: bytes) -> bytes:
    """``data`` as a copy of its own length, for bytes that stay in memory (a stored event, a
    backlog): orjson (3.12 and later) leaves its output in a buffer of at least 4 KiB, rounded up,
    never shrunk: a 1 KiB message held takes 8 KiB and a 40 KiB one 500 KiB. What is written
    out at once is not copied."""
    return bytes(memoryview(data))


def dumps_str(obj: Any) -> str:
    return dumps(obj).decode()
