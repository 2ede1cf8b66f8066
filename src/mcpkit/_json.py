"""The one place that encodes and decodes JSON.

orjson works on bytes, which is what every transport moves; nothing else in
mcpkit imports a JSON library.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

JSONDecodeError = orjson.JSONDecodeError

#: nineteen digits in a row: possibly an integer beyond 64 bits, which orjson would turn into a float
_LONG_DIGITS = re.compile(rb"\d{19}")


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode JSON; integers beyond 64 bits stay exact integers (orjson would read them as
    floats, so an id of 2**64 or an argument of 2**70 would silently change)."""
    obj = orjson.loads(data)
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) >= 19 and _LONG_DIGITS.search(raw) is not None:
        import json

        try:
            return json.loads(raw)
        except (RecursionError, ValueError):  # stdlib json nests less deeply than orjson
            return obj
    return obj

_OPTIONS = orjson.OPT_NON_STR_KEYS


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


def dumps_str(obj: Any) -> str:
    return dumps(obj).decode()
