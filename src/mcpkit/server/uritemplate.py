"""RFC 6570 URI templates for MCP resource templates.

MCP ``resources/templates/list`` advertises ``uriTemplate`` strings, which are
RFC 6570 URI templates.  This module provides :class:`UriTemplate`, which

* **parses and validates** a template at construction (``UriTemplateError``
  carries the position and the reason of the first syntax error),
* **expands** a template (RFC 6570 levels 1-4: all operators, several
  variables per expression, prefix modifiers ``{var:3}`` and explode
  ``{var*}``; ``str``/``int``/``float``/``bool``, list and dict values), and
* **matches** a concrete URI (e.g. from ``resources/read``) against the
  template and extracts the percent-decoded variable values.

Matching
========

RFC 6570 only defines expansion; matching is its (generally ambiguous)
inverse.  The rules implemented here:

* The whole URI must match (``re.fullmatch``).  Literal template text must
  appear verbatim (percent-encoded triplets compare hex-case-insensitively,
  non-ASCII literal characters match raw or percent-encoded).
* Values are percent-decoded (UTF-8, strict: malformed percent-encoding or
  invalid UTF-8 means *no match*).  ``+`` is **not** turned into a space.
* A value of ``{var}``, ``{.var}``, ``{/var}`` or ``{;var}`` (and each item of
  their exploded lists) is one path segment (RFC 6570 level 1): when it
  decodes to text with ``/`` or ``\\``, or to a dot segment (``.``, ``..``),
  the URI does not match, so ``%2F`` and ``%2e%2e`` cannot carry a path into
  a handler.  ``{+var}`` and ``{#var}`` take paths, by the template's choice.
  (The matching compiler lives in :mod:`mcpkit.server.uritemplate_match`.)
* Characters a value may contain, per operator (a raw character outside the
  set must be percent-encoded by the client, otherwise the URI does not
  match; percent-encoded triplets and raw non-ASCII characters (IRIs) are
  always accepted):

  - ``{var}``, ``{.var}``, ``{/var}``: unreserved characters, sub-delims
    (``!$&'()*+,;=``), ``:`` and ``@``, i.e. never ``/``, ``?``, ``#``, ``[``,
    ``]``.  ``,`` is excluded when it separates values (``{x,y}``,
    ``{list*}``); ``;`` is excluded for ``{;var}``.
  - ``{+var}``, ``{#var}``: any unreserved or reserved character, so the value
    can span ``/``, ``?`` and ``#``.
  - ``{?var}``/``{&var}``: see query matching below.

* Variables that do not occur in the URI are **absent** from the result (RFC
  6570 expands undefined variables to nothing).  ``{var}``/``{+var}``: the
  first variable of such an expression is always present (possibly ``""``).
  ``{;var}`` present without ``=value`` yields ``""``.
* Variables of one expression are filled left to right: ``{/a,b}`` matching
  ``/x`` gives ``{"a": "x"}``.
* Explode ``{var*}`` matches a **list** for every operator: ``{/list*}`` and
  ``{.list*}`` split on the separator, ``{list*}``/``{+list*}``/``{#list*}``
  split on ``,``, ``{;list*}`` takes ``;list=a;list=b``, and ``{?list*}``
  collects the repeated ``list=`` query parameters.  Dict (associative array)
  values cannot be recovered: an exploded dict's keys are not variable names,
  so such URIs do not match; a non-exploded list or dict comes back as the
  single string it expanded to (e.g. ``"red,green,blue"``).
* Prefix modifiers ``{var:N}`` limit the matched value to ``N`` characters
  (a percent-encoded UTF-8 sequence counts as one character).
* Query expressions: ``{?x,y}`` together with any directly following
  ``{&...}`` expressions match the query string as a whole: parameters in any
  order, absent ones tolerated, a parameter without ``=`` is ``""``; an
  unknown parameter, an empty parameter (``a&&b``) or a repeated
  non-exploded parameter means *no match*.  Query values may contain raw
  ``/``, ``?``, ``:``, ``@`` and sub-delims other than ``&``.  A prefix
  modifier bounds the value length.

Ambiguity and speed
-------------------

The template compiles once, at construction, to a single ``re`` pattern;
matching is one ``fullmatch`` plus decoding.  The pattern never nests
quantifiers over the same characters, and where two variables could trade
characters the pattern is made deterministic so that matching stays linear in
the URI length (there is no catastrophic backtracking on adversarial URIs):

* When two variables are separated by literal text ``S`` (a literal, an
  operator prefix or separator) that the earlier variable may contain, and
  the later variable's characters are a subset of the earlier one's, the
  earlier variable takes as much as possible and the later one cannot
  contain ``S``: ``{+path}/{file}`` on ``a/b/c`` gives ``path="a/b"``,
  ``file="c"``; ``{name}.{ext}`` on ``a.tar.gz`` gives ``name="a.tar"``,
  ``ext="gz"``; ``{+path}{.ext}`` and ``{+path}{?q}`` prefer a present
  extension/query.
* Otherwise (the later variable allows characters the earlier one does not,
  or the earlier one has a prefix modifier) the earlier variable ends at the
  first occurrence of ``S``: ``{a}.{+b}`` on ``x.y.z`` gives ``a="x"``.
* Two expressions with nothing between them where the second has no prefix
  (``{+path}{var}``) are inherently ambiguous: the earlier variable ends at
  the first occurrence of the next literal and the later one gets the rest
  (often ``""``).

* A variable that follows an ambiguous separator ``S`` (first bullet) may not
  contain ``S`` even when the earlier variable is absent, and neither may the
  variables after it up to the next literal the earlier variable cannot
  contain.

So for an ambiguous template (the values contain the text separating them, a
prefix-limited variable is followed by a wider one, two ``{?...}``
expressions in a row, ...) ``match`` returns one of the possible splits, and may
return ``None`` even for a URI the template can produce.  Templates whose
variables are separated by characters they cannot contain (``/`` for
``{var}``, ``?`` before a query, ...) always match their own expansions.

Every syntactically valid template can be matched: no construct is rejected
for matching (what cannot be recovered, like dict values, is listed above).
If a template has so many optional expressions that analysing it would blow
up, the affected variable simply ends at the first literal that can follow.

Specificity
-----------

When several templates match a URI, pick ``min(candidates,
key=lambda t: t.specificity)``: more literal characters first, then fewer
reserved-expansion (``{+x}``/``{#x}``) variables, fewer exploded variables,
fewer variables, and finally the template text (so the order is total).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from .uritemplate_match import (
    _ALNUM,
    _HEX,
    _RESERVED,
    _SUB_DELIMS,
    _UNRESERVED,
    _Builder,
    _literal_atoms,
    _NoMatch,
    _analyse,
    _regex,
)

__all__ = ["UriTemplate", "UriTemplateError"]


class UriTemplateError(ValueError):
    """Invalid URI template (or a value that cannot be expanded).

    ``template``, ``position`` (0-based index into the template, or ``None``)
    and ``reason`` are available as attributes.
    """

    def __init__(self, reason: str, template: str | None = None, position: int | None = None) -> None:
        self.reason = reason
        self.template = template
        self.position = position
        if template is not None and position is not None:
            message = f"{reason} at position {position} of URI template {template!r}"
        elif template is not None:
            message = f"{reason} (URI template {template!r})"
        else:
            message = reason
        super().__init__(message)


# ---------------------------------------------------------------------------
# Character sets (RFC 3986 / RFC 6570)
# ---------------------------------------------------------------------------


# Literal characters that RFC 6570 section 2.1 forbids (besides CTLs, "{" and "}").
_BAD_LITERAL = frozenset(" \"'<>\\^`|")

_VARSPEC_RE = re.compile(
    r"((?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*)"
    r"(?::([1-9][0-9]{0,3})|(\*))?"
)
_PCT_SPLIT_RE = re.compile(r"(%[0-9A-Fa-f]{2})")
_PCT_TOKEN_RE = re.compile(r"%[0-9A-Fa-f]{2}|.", re.DOTALL)

_OPERATORS = "+#./;?&"
_RESERVED_OPERATORS = "=,!@|"


class _Op:
    __slots__ = ("char", "first", "sep", "named", "ifemp", "reserved")

    def __init__(self, char: str, first: str, sep: str, named: bool, ifemp: str, reserved: bool) -> None:
        self.char = char
        self.first = first
        self.sep = sep
        self.named = named
        self.ifemp = ifemp
        self.reserved = reserved


# RFC 6570 Appendix A table.
_OPS: dict[str, _Op] = {
    "": _Op("", "", ",", False, "", False),
    "+": _Op("+", "", ",", False, "", True),
    "#": _Op("#", "#", ",", False, "", True),
    ".": _Op(".", ".", ".", False, "", False),
    "/": _Op("/", "/", "/", False, "", False),
    ";": _Op(";", ";", ";", True, "", False),
    "?": _Op("?", "?", "&", True, "=", False),
    "&": _Op("&", "&", "&", True, "=", False),
}


class _VarSpec:
    __slots__ = ("name", "prefix", "explode", "position")

    def __init__(self, name: str, prefix: int | None, explode: bool, position: int) -> None:
        self.name = name
        self.prefix = prefix
        self.explode = explode
        self.position = position


class _Expr:
    __slots__ = ("op", "varspecs", "position")

    def __init__(self, op: _Op, varspecs: tuple[_VarSpec, ...], position: int) -> None:
        self.op = op
        self.varspecs = varspecs
        self.position = position


# ---------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------


def _parse(template: str) -> list[str | _Expr]:
    items: list[str | _Expr] = []
    seen: set[str] = set()
    lit: list[str] = []
    i = 0
    n = len(template)
    while i < n:
        c = template[i]
        if c == "{":
            close = template.find("}", i + 1)
            nested = template.find("{", i + 1)
            if close == -1:
                if nested != -1:
                    raise UriTemplateError("'{' inside an expression", template, nested)
                raise UriTemplateError("unclosed expression (missing '}')", template, i)
            if nested != -1 and nested < close:
                raise UriTemplateError("'{' inside an expression", template, nested)
            if lit:
                items.append("".join(lit))
                lit = []
            expr = _parse_expression(template, i, close)
            for vs in expr.varspecs:
                if vs.name in seen:
                    raise UriTemplateError(f"duplicate variable {vs.name!r}", template, vs.position)
                seen.add(vs.name)
            items.append(expr)
            i = close + 1
            continue
        if c == "}":
            raise UriTemplateError("unmatched '}'", template, i)
        if c == "%":
            if i + 2 < n and template[i + 1] in _HEX and template[i + 2] in _HEX:
                lit.append(template[i : i + 3])
                i += 3
                continue
            raise UriTemplateError("'%' in a literal must start a percent-encoded triplet", template, i)
        o = ord(c)
        if o < 0x20 or o == 0x7F or 0x80 <= o < 0xA0 or 0xD800 <= o <= 0xDFFF or c in _BAD_LITERAL:
            raise UriTemplateError(f"character {c!r} is not allowed in a URI template literal", template, i)
        lit.append(c)
        i += 1
    if lit:
        items.append("".join(lit))
    return items


def _parse_expression(template: str, start: int, close: int) -> _Expr:
    body = template[start + 1 : close]
    if not body:
        raise UriTemplateError("empty expression", template, start)
    pos = start + 1
    c = body[0]
    if c in _OPERATORS:
        op = _OPS[c]
        body = body[1:]
        pos += 1
    elif c in _RESERVED_OPERATORS:
        raise UriTemplateError(f"operator {c!r} is reserved for future extensions", template, pos)
    elif c in _ALNUM or c in "_%":
        op = _OPS[""]
    else:
        raise UriTemplateError(f"invalid operator {c!r}", template, pos)
    if not body:
        raise UriTemplateError("expression has no variable", template, pos)
    specs: list[_VarSpec] = []
    for raw in body.split(","):
        if not raw:
            raise UriTemplateError("empty variable name", template, pos)
        m = _VARSPEC_RE.fullmatch(raw)
        if m is None:
            prefix_m = _VARSPEC_RE.match(raw)
            if prefix_m is None:
                raise UriTemplateError(
                    f"invalid character {raw[0]!r} at the start of variable name {raw!r}", template, pos
                )
            bad = pos + prefix_m.end()
            rest = raw[prefix_m.end() :]
            if rest.startswith(":") or (prefix_m.group(2) and rest[0].isdigit()):
                reason = f"invalid prefix modifier in {raw!r} (expected ':' and a length of 1-9999)"
            elif prefix_m.group(3) or prefix_m.group(2):
                reason = f"unexpected {rest[0]!r} after the modifier in {raw!r}"
            else:
                reason = f"invalid character {rest[0]!r} in variable name {raw!r}"
            raise UriTemplateError(reason, template, bad)
        prefix = int(m.group(2)) if m.group(2) else None
        specs.append(_VarSpec(m.group(1), prefix, bool(m.group(3)), pos))
        pos += len(raw) + 1
    return _Expr(op, tuple(specs), start)


# ---------------------------------------------------------------------------
# Expansion helpers
# ---------------------------------------------------------------------------

_SAFE_RESERVED = "".join(sorted(_RESERVED))


def _encode(value: str, allow_reserved: bool) -> str:
    if not allow_reserved:
        return quote(value, safe="")
    parts = _PCT_SPLIT_RE.split(value)
    # odd indices are existing pct-encoded triplets, which reserved expansion keeps
    for k in range(0, len(parts), 2):
        parts[k] = quote(parts[k], safe=_SAFE_RESERVED)
    return "".join(parts)


def _truncate(value: str, length: int, allow_reserved: bool) -> str:
    if len(value) <= length:
        return value
    if not allow_reserved:
        return value[:length]
    # For reserved expansion a pct-encoded triplet already in the value counts
    # as one character, so that it is never split.
    tokens = _PCT_TOKEN_RE.findall(value)
    return "".join(tokens[:length])


def _scalar(value: Any, name: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    raise TypeError(f"URI template variable {name!r}: unsupported value type {type(value).__name__}")


def _normalize(value: Any, name: str) -> tuple[str, Any] | None:
    """Returns None when undefined, else (kind, value) with kind in s/l/d."""
    if value is None:
        return None
    if isinstance(value, (str, int, float)):
        return ("s", _scalar(value, name))
    if isinstance(value, Mapping):
        pairs = [(_scalar(k, name), _scalar(v, name)) for k, v in value.items() if v is not None]
        return ("d", pairs) if pairs else None
    if isinstance(value, (list, tuple)):
        items = [_scalar(v, name) for v in value if v is not None]
        return ("l", items) if items else None
    raise TypeError(f"URI template variable {name!r}: unsupported value type {type(value).__name__}")


def _expand_expression(expr: _Expr, values: Mapping[str, Any], template: str) -> str:
    op = expr.op
    res = op.reserved
    out: list[str] = []
    for vs in expr.varspecs:
        norm = _normalize(values.get(vs.name), vs.name)
        if norm is None:
            continue
        kind, v = norm
        name = vs.name
        if kind == "s":
            if vs.prefix is not None:
                v = _truncate(v, vs.prefix, res)
            if op.named:
                out.append(name + (op.ifemp if v == "" else "=" + _encode(v, res)))
            else:
                out.append(_encode(v, res))
            continue
        if vs.prefix is not None:
            raise UriTemplateError(
                f"prefix modifier ':{vs.prefix}' cannot be applied to the composite value of {name!r}",
                template,
                vs.position,
            )
        if not vs.explode:
            if kind == "l":
                joined = ",".join(_encode(item, res) for item in v)
            else:
                joined = ",".join(_encode(k, res) + "," + _encode(val, res) for k, val in v)
            if op.named:
                out.append(name + (op.ifemp if joined == "" else "=" + joined))
            else:
                out.append(joined)
        elif kind == "l":
            if op.named:
                out.append(
                    op.sep.join(name + (op.ifemp if item == "" else "=" + _encode(item, res)) for item in v)
                )
            else:
                out.append(op.sep.join(_encode(item, res) for item in v))
        else:
            if op.named:
                out.append(
                    op.sep.join(
                        _encode(k, res) + (op.ifemp if val == "" else "=" + _encode(val, res)) for k, val in v
                    )
                )
            else:
                out.append(op.sep.join(_encode(k, res) + "=" + _encode(val, res) for k, val in v))
    if not out:
        return ""
    return op.first + op.sep.join(out)


# ---------------------------------------------------------------------------
# Public class
# ---------------------------------------------------------------------------


class UriTemplate:
    """An RFC 6570 URI template: validate, expand, match (see module docs)."""

    __slots__ = ("template", "variables", "specificity", "_items", "_regex", "_decoders")

    template: str
    variables: tuple[str, ...]
    specificity: tuple[Any, ...]

    def __init__(self, template: str) -> None:
        if not isinstance(template, str):
            raise TypeError(f"URI template must be a str, not {type(template).__name__}")
        items = _parse(template)
        self.template = template
        self._items = items
        exprs = [it for it in items if isinstance(it, _Expr)]
        self.variables = tuple(vs.name for e in exprs for vs in e.varspecs)
        literal_chars = sum(len(_literal_atoms(it)) for it in items if isinstance(it, str))
        reserved = sum(len(e.varspecs) for e in exprs if e.op.reserved)
        exploded = sum(1 for e in exprs for vs in e.varspecs if vs.explode)
        self.specificity = (-literal_chars, reserved, exploded, len(self.variables), template)

        builder = _Builder()
        seq = builder.build(items)
        _analyse(seq)
        self._regex = re.compile(_regex(seq), re.DOTALL)
        self._decoders = tuple(builder.decoders)

    # -- expansion ---------------------------------------------------------

    def expand(self, values: Mapping[str, Any]) -> str:
        """RFC 6570 expansion.  Missing or ``None`` variables are undefined.

        Values may be ``str``, ``int``, ``float``, ``bool`` (``true``/``false``),
        a list/tuple of those, or a mapping of those; ``None`` members are
        skipped and an empty list/mapping is undefined.  A prefix modifier on
        a list/mapping value raises ``UriTemplateError``; other value types
        raise ``TypeError``.
        """
        out: list[str] = []
        for item in self._items:
            if isinstance(item, str):
                # literals: allowed ASCII and pct-triplets verbatim, others encoded
                out.append(item if item.isascii() else _encode(item, True))
            else:
                out.append(_expand_expression(item, values, self.template))
        return "".join(out)

    # -- matching ----------------------------------------------------------

    @property
    def segment_names(self) -> frozenset[str]:
        """The variables that stand for a part of the path (``{id}``, ``{+path}``, ``{#frag}``,
        ``{/seg}``, ``{.ext}``), where an empty value names nothing; the named forms
        (``{;x}``, ``{?x}``, ``{&x}``) say ``x`` is present and empty on purpose."""
        return frozenset(spec.name for item in self._items if isinstance(item, _Expr)
                         and item.op.char in ("", "+", "#", "/", ".") for spec in item.varspecs)

    def match(self, uri: str) -> dict[str, str | list[str]] | None:
        """Match a concrete URI; returns percent-decoded values or ``None``."""
        if not isinstance(uri, str):
            return None
        m = self._regex.fullmatch(uri)
        if m is None:
            return None
        groups = m.groupdict()
        result: dict[str, str | list[str]] = {}
        try:
            for decoder in self._decoders:
                decoder.apply(groups, result)
        except _NoMatch:
            return None
        return result

    # -- dunder ------------------------------------------------------------

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"

    def __str__(self) -> str:
        return self.template

    def __eq__(self, other: object) -> bool:
        if isinstance(other, UriTemplate):
            return self.template == other.template
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.template)
