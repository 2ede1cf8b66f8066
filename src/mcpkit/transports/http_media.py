"""Media types on the HTTP transport: Content-Type checked and Accept negotiated by the RFC.

RFC 9110 §8.3.1: a media type is ``type "/" subtype *( OWS ";" OWS parameter )``, whose type
and subtype compare case-insensitively; so ``Application/JSON; charset=UTF-8`` is JSON, and
``application/jsonp`` or ``application/json-seq`` is not. A JSON body is UTF-8 (RFC 8259 §8.1):
a ``charset`` parameter naming anything else is refused.

RFC 9110 §12.5.1: Accept is a list of media ranges (``*/*``, ``type/*``, ``type/subtype``), each
with an optional weight ``q``; the most specific range that matches a type gives its weight,
and a weight of 0 means "not acceptable". A missing Accept accepts anything.

Both headers repeat from one request to the next (a client sends the same ones every time), so
their verdicts are kept in small bounded caches: the common case costs one dict lookup.
"""

from __future__ import annotations

__all__ = ["is_json_content_type", "acceptable", "JSON_TYPE", "SSE_TYPE"]

JSON_TYPE = ("application", "json")
SSE_TYPE = ("text", "event-stream")
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_CACHE_SIZE = 256
_content_types: dict[bytes, bool] = {}
_accepts: dict[bytes, tuple[float, float]] = {}


def _is_token(text: str) -> bool:
    return bool(text) and all(c in _TOKEN for c in text)


def _split_params(text: str) -> list[str]:
    """Split on ';' and ',' outside quoted strings (RFC 9110 §5.6.4), keeping the separators' kinds
    apart: returns the pieces of one list element; the caller splits elements first."""
    out, current, quoted, escaped = [], [], False, False
    for c in text:
        if escaped:
            current.append(c)
            escaped = False
        elif quoted and c == "\\":
            current.append(c)
            escaped = True
        elif c == '"':
            current.append(c)
            quoted = not quoted
        elif c == ";" and not quoted:
            out.append("".join(current))
            current = []
        else:
            current.append(c)
    out.append("".join(current))
    return out


def _elements(text: str) -> list[str]:
    """The comma-separated elements of a list header, commas inside quoted strings kept."""
    out, current, quoted, escaped = [], [], False, False
    for c in text:
        if escaped:
            escaped = False
        elif quoted and c == "\\":
            escaped = True
        elif c == '"':
            quoted = not quoted
        elif c == "," and not quoted:
            out.append("".join(current))
            current = []
            continue
        current.append(c)
    out.append("".join(current))
    return [e.strip(" \t") for e in out if e.strip(" \t")]


def _media(text: str) -> tuple[str, str, dict[str, str]] | None:
    """(type, subtype, parameters), lower-cased except parameter values; None when malformed."""
    pieces = _split_params(text)
    kind, slash, sub = pieces[0].strip(" \t").partition("/")
    if not slash or not _is_token(kind) or not _is_token(sub):
        return None
    params: dict[str, str] = {}
    for piece in pieces[1:]:
        piece = piece.strip(" \t")
        if not piece:
            continue  # RFC 9110 §5.6.6 allows empty parameters (";;")
        name, eq, value = piece.partition("=")
        name = name.strip(" \t").lower()
        value = value.strip(" \t")
        if not eq or not _is_token(name):
            return None
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        elif not _is_token(value):
            return None
        params[name] = value
    return kind.lower(), sub.lower(), params


def _remember(cache: dict[bytes, object], raw: bytes, verdict: object) -> None:
    if len(cache) >= _CACHE_SIZE:
        cache.clear()  # bounded: odd headers sent on purpose cannot grow it
    cache[raw] = verdict


def is_json_content_type(raw: bytes) -> bool:
    """Whether a Content-Type header says ``application/json`` (UTF-8, if it names a charset)."""
    verdict = _content_types.get(raw)
    if verdict is None:
        media = _media(raw.decode("latin-1"))
        verdict = (
            media is not None
            and media[:2] == JSON_TYPE
            and media[2].get("charset", "utf-8").lower() in ("utf-8", "utf8")
        )
        _remember(_content_types, raw, verdict)  # type: ignore[arg-type]
    return verdict


def _weight(value: str) -> float | None:
    """RFC 9110 §12.4.2: qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )."""
    head, _, tail = value.partition(".")
    if head not in ("0", "1") or len(tail) > 3 or (tail and not tail.isdigit()):
        return None
    if head == "1" and tail.strip("0"):
        return None
    return float(f"{head}.{tail or '0'}")


def _accept_weights(raw: bytes) -> tuple[float, float]:
    """(weight of application/json, weight of text/event-stream) under this Accept header."""
    best = {JSON_TYPE: (-1, 0.0), SSE_TYPE: (-1, 0.0)}  # type -> (specificity, weight)
    for element in _elements(raw.decode("latin-1")):
        media = _media(element)
        if media is None:
            continue  # a malformed range accepts nothing
        kind, sub, params = media
        weight = 1.0
        if "q" in params:
            parsed = _weight(params["q"])
            if parsed is None:
                continue
            weight = parsed
        for target in best:
            if kind == "*" and sub == "*":
                specificity = 0
            elif kind == target[0] and sub == "*":
                specificity = 1
            elif (kind, sub) == target:
                specificity = 2
            else:
                continue
            if specificity > best[target][0]:
                best[target] = (specificity, weight)
    return best[JSON_TYPE][1], best[SSE_TYPE][1]


def acceptable(raw: bytes | None) -> tuple[bool, bool]:
    """(JSON acceptable, SSE acceptable) for a request's Accept header (None: no header)."""
    if raw is None:
        return True, True
    weights = _accepts.get(raw)
    if weights is None:
        weights = _accept_weights(raw)
        _remember(_accepts, raw, weights)  # type: ignore[arg-type]
    return weights[0] > 0, weights[1] > 0
