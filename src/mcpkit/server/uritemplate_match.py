"""Matching URIs against RFC 6570 templates: a template compiles once to one regular expression.

The rules (what a variable may contain, how ambiguity is settled, why matching stays linear in
the URI's length) are documented in :mod:`mcpkit.server.uritemplate`, whose ``UriTemplate``
uses this module. Values are percent-decoded; a value of a single-segment variable (``{var}``,
``{.var}``, ``{/var}``, ``{;var}``, and each item of their exploded lists) is one path segment
(RFC 6570 level 1, RFC 3986 §3.3): a decoded ``/`` or ``\\`` in it, or a value that is a dot
segment (``.``, ``..``), means no match, so ``%2F`` and ``%2e%2e`` cannot smuggle a path into it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

if TYPE_CHECKING:
    from .uritemplate import _Expr, _VarSpec

# ---------------------------------------------------------------------------
# Character sets (RFC 3986 / RFC 6570)
# ---------------------------------------------------------------------------

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_UNRESERVED = frozenset(_ALNUM + "-._~")
_SUB_DELIMS = frozenset("!$&'()*+,;=")
_GEN_DELIMS = frozenset(":/?#[]@")
_RESERVED = _SUB_DELIMS | _GEN_DELIMS
_HEX = frozenset("0123456789abcdefABCDEF")


# ---------------------------------------------------------------------------
# Matching: compile to a single regular expression
# ---------------------------------------------------------------------------


class _Cls:
    """The characters a value may contain (besides pct-triplets and non-ASCII)."""

    __slots__ = ("chars",)

    def __init__(self, chars: Iterable[str]) -> None:
        self.chars = frozenset(chars)

    def __or__(self, extra: str) -> _Cls:
        return _Cls(self.chars | frozenset(extra))

    def __sub__(self, extra: str) -> _Cls:
        return _Cls(self.chars - frozenset(extra))

    def __le__(self, other: _Cls) -> bool:
        return self.chars <= other.chars

    def unit(self, counted: bool) -> str:
        cs = "".join(re.escape(c) for c in sorted(self.chars))
        # raw non-ASCII (IRI) characters, minus C1 controls and surrogates
        charset = "[" + cs + "\u00a0-\ud7ff\ue000-\U0010ffff]"
        if counted:
            # one *character*: a whole pct-encoded UTF-8 sequence counts once
            pct = (
                "%(?:[0-7][0-9A-Fa-f]"
                "|[CDcd][0-9A-Fa-f]%[89ABab][0-9A-Fa-f]"
                "|[Ee][0-9A-Fa-f](?:%[89ABab][0-9A-Fa-f]){2}"
                "|[Ff][0-7](?:%[89ABab][0-9A-Fa-f]){3})"
            )
        else:
            pct = "%[0-9A-Fa-f]{2}"
        return "(?:" + charset + "|" + pct + ")"


_LENIENT = _Cls(_UNRESERVED | _SUB_DELIMS | frozenset(":@"))
_RESERVED_CLS = _Cls(_UNRESERVED | _RESERVED)
_QUERY_CLS = _Cls(_UNRESERVED | _SUB_DELIMS | frozenset(":@/?"))

# An atom of literal text: (regex, kind, char); kind "a" = ASCII char,
# "p" = pct-triplet written in the template, "u" = non-ASCII char.
_Atom = tuple[str, str, str]


def _hex_ci(h: str) -> str:
    out = []
    for c in h:
        if c.isalpha():
            out.append("[" + c.upper() + c.lower() + "]")
        else:
            out.append(c)
    return "".join(out)


def _literal_atoms(text: str) -> tuple[_Atom, ...]:
    atoms: list[_Atom] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "%":
            atoms.append(("%" + _hex_ci(text[i + 1 : i + 3]), "p", text[i : i + 3]))
            i += 3
            continue
        if ord(c) < 0x80:
            atoms.append((re.escape(c), "a", c))
        else:
            enc = "".join("%" + _hex_ci(f"{b:02X}") for b in c.encode("utf-8"))
            atoms.append(("(?:" + re.escape(c) + "|" + enc + ")", "u", c))
        i += 1
    return tuple(atoms)


def _atoms_regex(atoms: Iterable[_Atom]) -> str:
    return "".join(a[0] for a in atoms)


def _atoms_text(atoms: Iterable[_Atom]) -> str:
    return "".join(a[2] for a in atoms)


def _soft(atoms: tuple[_Atom, ...], var: _Var) -> bool:
    """True if ``var`` could swallow the whole literal (so its end is ambiguous)."""
    for _, kind, c in atoms:
        if kind == "a" and c not in var.cls.chars:
            return False
    text = _atoms_text(atoms)
    return not any(t in text for _, t in var.temper)


class _Lit:
    __slots__ = ("atoms",)

    def __init__(self, atoms: tuple[_Atom, ...]) -> None:
        self.atoms = atoms


class _Opt:
    __slots__ = ("seq", "marker")

    def __init__(self, seq: list[Any], marker: str | None = None) -> None:
        self.seq = seq
        self.marker = marker


_GREEDY, _LAZY, _POSSESSIVE = "", "?", "+"


class _Var:
    __slots__ = ("group", "cls", "max_len", "temper", "mode")

    def __init__(self, group: str, cls: _Cls, max_len: int | None = None) -> None:
        self.group = group
        self.cls = cls
        self.max_len = max_len
        self.temper: set[tuple[str, str]] = set()  # (regex, text) it may not contain
        self.mode = _GREEDY


_Frames = tuple[tuple[list[Any], int], ...]
_PATH_LIMIT = 4096


class _TooComplex(Exception):
    pass


class _HardStop:
    """Path target: the path reached text the variable cannot contain."""


_HARD = _HardStop()
_Path = tuple[tuple[_Atom, ...], _Var | _HardStop | None, bool]


def _paths(frames: _Frames, out: list[_Path], v: _Var, atoms: tuple[_Atom, ...] = (),
           via_opt: bool = False) -> None:
    """All ways the pattern can continue after ``v`` (at ``frames``) up to the next variable.

    Appends (literal atoms consumed, next variable or None for the end of the
    pattern, whether the first literal came from an optional group).  A path
    stops early, with target ``_HARD``, at the first character ``v`` cannot
    contain: ``v`` cannot run past it, so what follows does not matter here.
    """
    chars = v.cls.chars
    while True:
        if len(out) > _PATH_LIMIT:
            raise _TooComplex
        if not frames:
            out.append((atoms, None, via_opt))
            return
        seq, idx = frames[0]
        if idx >= len(seq):
            frames = frames[1:]
            continue
        node = seq[idx]
        rest: _Frames = ((seq, idx + 1), *frames[1:])
        if isinstance(node, _Lit):
            for k, (_, kind, c) in enumerate(node.atoms):
                if kind == "a" and c not in chars:
                    out.append((atoms + node.atoms[: k + 1], _HARD, via_opt or not atoms))
                    return
            atoms = atoms + node.atoms
            frames = rest
        elif isinstance(node, _Opt):
            _paths(((node.seq, 0), *rest), out, v, atoms, via_opt or not atoms)
            frames = rest
        else:
            out.append((atoms, node, via_opt))
            return


def _first_literals(frames: _Frames, seen: set[tuple[Any, ...]] | None = None) -> set[tuple[str, str]]:
    """The first literal (node) that can follow, looking through variables; bounded work."""
    seen = set() if seen is None else seen
    texts: set[tuple[str, str]] = set()
    while frames:
        key = tuple((id(seq), idx) for seq, idx in frames)
        if key in seen:
            break
        seen.add(key)
        seq, idx = frames[0]
        if idx >= len(seq):
            frames = frames[1:]
            continue
        node = seq[idx]
        rest: _Frames = ((seq, idx + 1), *frames[1:])
        if isinstance(node, _Lit):
            texts.add((_atoms_regex(node.atoms), _atoms_text(node.atoms)))
            break
        if isinstance(node, _Opt):
            texts |= _first_literals(((node.seq, 0), *rest), seen)
        frames = rest
    return texts


def _iter_vars(seq: list[Any], after: _Frames) -> Iterable[tuple[_Var, _Frames]]:
    for idx, node in enumerate(seq):
        rest: _Frames = ((seq, idx + 1), *after)
        if isinstance(node, _Var):
            yield node, rest
        elif isinstance(node, _Opt):
            yield from _iter_vars(node.seq, rest)


def _stop_texts(frames: _Frames, v: _Var, var_frames: dict[int, _Frames], depth: int = 0) -> set[tuple[str, str]]:
    """First literal texts that can follow, looking through variables (taken as empty)."""
    paths: list[_Path] = []
    _paths(frames, paths, v)
    texts: set[tuple[str, str]] = set()
    for atoms, target, _ in paths:
        if atoms:
            texts.add((_atoms_regex(atoms), _atoms_text(atoms)))
        elif isinstance(target, _Var) and depth < 64:
            texts |= _stop_texts(var_frames[id(target)], v, var_frames, depth + 1)
    return texts


def _temper_downstream(frames: _Frames, v: _Var, sep: tuple[str, str], unbounded: bool,
                       seen: set[tuple[Any, ...]]) -> None:
    """Forbid ``sep`` in every variable reachable from ``frames`` before the
    pattern reaches literal text that ``v`` cannot contain (or anywhere after,
    once a variable allowing characters ``v`` does not allow was passed)."""
    while True:
        key = (tuple((id(seq), idx) for seq, idx in frames), unbounded)
        if key in seen:
            return
        seen.add(key)
        if not frames:
            return
        seq, idx = frames[0]
        if idx >= len(seq):
            frames = frames[1:]
            continue
        node = seq[idx]
        rest: _Frames = ((seq, idx + 1), *frames[1:])
        if isinstance(node, _Lit):
            if not unbounded and not all(kind != "a" or c in v.cls.chars for _, kind, c in node.atoms):
                return
        elif isinstance(node, _Opt):
            _temper_downstream(((node.seq, 0), *rest), v, sep, unbounded, seen)
        else:
            node.temper.add(sep)
            if not node.cls <= v.cls:
                unbounded = True
        frames = rest


def _analyse(seq: list[Any]) -> None:
    """Choose greedy/lazy/possessive + tempering per variable (see module doc).

    Invariant that keeps matching linear: a variable whose end is ambiguous
    (it may contain the separator ``S`` that follows it) has many candidate
    ends only at occurrences of ``S``, and everything matched after it up to
    the next unambiguous boundary may not contain ``S``; so the work done for
    different candidate ends covers disjoint stretches of the URI.
    """
    var_frames: dict[int, _Frames] = {}
    order: list[_Var] = []
    for v, frames in _iter_vars(seq, ()):
        var_frames[id(v)] = frames
        order.append(v)
    # Variables are processed in order of appearance: a variable's temper set
    # is only extended by earlier ones, so it is final when it is analysed.
    for v in order:
        frames = var_frames[id(v)]
        paths: list[_Path] = []
        try:
            _paths(frames, paths, v)
            adjacent = any(not atoms and isinstance(target, _Var) for atoms, target, _ in paths)
            stop_texts = _stop_texts(frames, v, var_frames) if adjacent else set()
        except _TooComplex:
            # Too many optional groups to enumerate the continuations: end the
            # value at the first literal that can follow (deterministic).
            v.mode = _POSSESSIVE
            v.temper |= _first_literals(frames)
            continue
        if adjacent:
            # Adjacent expression without any separator: inherently ambiguous;
            # end at the first occurrence of the next literal text.
            v.mode = _POSSESSIVE
            v.temper |= stop_texts
            continue
        soft = [p for p in paths if p[0] and _soft(p[0], v)]
        if not soft:
            # Every continuation starts with text the variable cannot swallow
            # entirely: at most a few viable ends.
            v.mode = _GREEDY
            continue
        first_occurrence = any(
            isinstance(target, _Var) and not (target.cls <= v.cls and v.max_len is None)
            for _, target, _ in soft
        )
        if first_occurrence:
            v.mode = _POSSESSIVE
            v.temper |= {(_atoms_regex(atoms), _atoms_text(atoms)) for atoms, _, _ in paths if atoms}
            continue
        v.mode = _LAZY if any(via for _, _, via in soft) else _GREEDY
        for atoms, target, _ in soft:
            if isinstance(target, _Var):
                _temper_downstream(
                    var_frames[id(target)], v, (_atoms_regex(atoms), _atoms_text(atoms)),
                    not target.cls <= v.cls, set(),
                )
                target.temper.add((_atoms_regex(atoms), _atoms_text(atoms)))


def _regex(seq: list[Any]) -> str:
    out: list[str] = []
    for node in seq:
        if isinstance(node, _Lit):
            out.append(_atoms_regex(node.atoms))
        elif isinstance(node, _Opt):
            marker = f"(?P<{node.marker}>)" if node.marker else ""
            out.append("(?:" + marker + _regex(node.seq) + ")?")
        else:
            unit = node.cls.unit(counted=node.max_len is not None)
            if node.temper:
                unit = "(?:(?!" + "|".join(sorted({r for r, _ in node.temper})) + ")" + unit + ")"
            quant = "*" if node.max_len is None else f"{{0,{node.max_len}}}"
            out.append(f"(?P<{node.group}>{unit}{quant}{node.mode})")
    return "".join(out)


class _NoMatch(Exception):
    pass


def _decode(text: str) -> str:
    try:
        return unquote(text, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        raise _NoMatch from None


def _segment(text: str) -> str:
    """The decoded value of a single-segment variable: one path segment, or no match. A raw
    ``/`` cannot get here (the pattern excludes it); ``%2F``, ``%5C`` and dot segments could."""
    value = _decode(text)
    if "/" in value or "\\" in value or value in (".", ".."):
        raise _NoMatch
    return value


class _Decoder:
    """Turns the groups of one regex match into variable values."""

    __slots__ = ("kind", "name", "group", "marker", "sep", "empty_absent", "query", "value")

    def __init__(self, kind: str, name: str = "", group: str = "", marker: str | None = None,
                 sep: str = "", empty_absent: bool = False,
                 query: dict[str, tuple[str, bool, int | None]] | None = None, segment: bool = False) -> None:
        #: how one value is decoded: a single-segment variable's value must stay one segment
        self.value = _segment if segment else _decode
        self.kind = kind
        self.name = name
        self.group = group
        self.marker = marker
        self.sep = sep
        self.empty_absent = empty_absent
        self.query = query

    def apply(self, groups: dict[str, str | None], result: dict[str, str | list[str]]) -> None:
        text = groups[self.group]
        kind = self.kind
        if kind == "str":
            if text is not None:
                result[self.name] = self.value(text)
            elif self.marker is not None and groups[self.marker] is not None:
                result[self.name] = ""
        elif kind == "list":
            if text is None or (self.empty_absent and text == ""):
                return
            result[self.name] = [self.value(item) for item in text.split(self.sep)]
        elif kind == "named_list":
            if text is None:
                return
            items: list[str] = []
            raw_name = _decode(self.name)
            for piece in (self.name + text).split(";"):
                pname, eq, pval = piece.partition("=")
                if _decode(pname) != raw_name:
                    raise _NoMatch
                items.append(self.value(pval) if eq else "")
            result[self.name] = items
        else:  # query
            if text is None or text == "":
                return
            spec = self.query
            assert spec is not None
            for piece in text.split("&"):
                if not piece:
                    raise _NoMatch
                pname, eq, pval = piece.partition("=")
                info = spec.get(_decode(pname))
                if info is None:
                    raise _NoMatch
                var, explode, max_len = info
                value = _decode(pval) if eq else ""
                if max_len is not None and len(value) > max_len:
                    raise _NoMatch
                if explode:
                    lst = result.setdefault(var, [])
                    assert isinstance(lst, list)
                    lst.append(value)
                elif var in result:
                    raise _NoMatch
                else:
                    result[var] = value


class _Builder:
    def __init__(self) -> None:
        self.count = 0
        self.decoders: list[_Decoder] = []

    def gid(self, prefix: str = "g") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def build(self, items: list[str | _Expr]) -> list[Any]:
        seq: list[Any] = []
        i = 0
        while i < len(items):
            item = items[i]
            if isinstance(item, str):
                seq.append(_Lit(_literal_atoms(item)))
                i += 1
                continue
            if item.op.char in ("?", "&"):
                group = [item]
                i += 1
                while i < len(items) and not isinstance(items[i], str) and items[i].op.char == "&":  # type: ignore[union-attr]
                    group.append(items[i])  # type: ignore[arg-type]
                    i += 1
                seq.append(self.query(group))
                continue
            seq.extend(self.expression(item))
            i += 1
        return seq

    def value_var(self, vs: _VarSpec, cls: _Cls, sep: str, *, empty_absent: bool = False,
                  segment: bool = False) -> _Var:
        g = self.gid()
        if vs.explode:
            self.decoders.append(_Decoder("list", vs.name, g, sep=sep, empty_absent=empty_absent, segment=segment))
            return _Var(g, cls | sep)
        self.decoders.append(_Decoder("str", vs.name, g, segment=segment))
        return _Var(g, cls, vs.prefix)

    def expression(self, expr: _Expr) -> list[Any]:
        op = expr.op
        specs = expr.varspecs
        c = op.char
        if c == ";":
            cls = _LENIENT - ";"
            nodes: list[Any] = []
            for vs in specs:
                marker = self.gid("m")
                name_lit = _Lit(_literal_atoms(vs.name))
                g = self.gid()
                if vs.explode:
                    self.decoders.append(_Decoder("named_list", vs.name, g, segment=True))
                    nodes.append(_Opt([_Lit(_literal_atoms(";")), name_lit, _Var(g, cls | ";")], marker))
                else:
                    self.decoders.append(_Decoder("str", vs.name, g, marker=marker, segment=True))
                    nodes.append(
                        _Opt(
                            [_Lit(_literal_atoms(";")), name_lit,
                             _Opt([_Lit(_literal_atoms("=")), _Var(g, cls, vs.prefix)])],
                            marker,
                        )
                    )
            return nodes
        if c in ("", "+"):
            cls = _RESERVED_CLS if op.reserved else _LENIENT
            if not op.reserved and (len(specs) > 1 or specs[0].explode):
                cls = cls - ","
            segment = not op.reserved  # {var}: one segment; {+var} may span several
            return [self.value_var(specs[0], cls, ",", empty_absent=True, segment=segment),
                    *self.chain(specs[1:], cls, ",", segment)]
        cls = _RESERVED_CLS if c == "#" else _LENIENT  # "#", "." or "/"
        segment = c != "#"
        first_var = self.value_var(specs[0], cls, op.sep, segment=segment)
        return [_Opt([_Lit(_literal_atoms(c)), first_var, *self.chain(specs[1:], cls, op.sep, segment)])]

    def chain(self, specs: tuple[_VarSpec, ...], cls: _Cls, sep: str, segment: bool) -> list[Any]:
        """Nested optional ``sep var`` groups: later values only after earlier ones."""
        if not specs:
            return []
        inner = [_Lit(_literal_atoms(sep)), self.value_var(specs[0], cls, sep, segment=segment),
                 *self.chain(specs[1:], cls, sep, segment)]
        return [_Opt(inner)]

    def query(self, exprs: list[_Expr]) -> _Opt:
        g = self.gid()
        spec: dict[str, tuple[str, bool, int | None]] = {}
        for expr in exprs:
            for vs in expr.varspecs:
                spec[unquote(vs.name)] = (vs.name, vs.explode, vs.prefix)
        self.decoders.append(_Decoder("query", group=g, query=spec))
        return _Opt([_Lit(_literal_atoms(exprs[0].op.char)), _Var(g, _QUERY_CLS)])
