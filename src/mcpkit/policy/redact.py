"""Secret redaction for logs and the audit trail (LG-05, TL-11).

LG-05: log messages MUST NOT contain credentials or secrets. The same holds for the audit
trail, which records every tool call's arguments. Secrets leak in two shapes, and a
:class:`Redactor` catches both:

* **By key.** A value stored under a key that names a secret (``password``, ``github_token``,
  ``X-Api-Key``, ``credentials``) is replaced by the mask whatever its type. A key is
  normalized (lower case; ``_``, ``-``, ``.`` and spaces dropped) and is a secret when it
  equals or *ends with* a normalized secret word: ``dbPassword`` and ``x_auth_token`` match,
  ``max_tokens``, ``token_count`` and ``tokenizer`` do not. It is also split into words
  (``apiKeys2`` → api, keys, 2): trailing numbers and qualifiers (``password2``,
  ``password_confirmation``) are dropped, a plural is made singular (``tokens``, ``api_keys``),
  and the last word (or the last two, joined) is compared whole with the secret words, short
  ones included (``pwd``, ``pass``, ``pin``, ``otp``, ``jwt``, ``auth``, ``bearer``): whole
  words, so ``spinner``, ``passage``, ``author`` and ``bypass`` are not secrets, and a counting
  word (``max_tokens``, ``total_tokens``) says the value is a number, not a credential.
* **By shape.** Free text is scanned with one precompiled regex for well-known credential
  formats: ``Bearer``/``Basic`` credentials (the scheme word stays), PEM private key blocks,
  JWTs, AWS access key ids, GitHub, Slack, Stripe/OpenAI/Anthropic and Google API keys,
  ``password=...`` style assignments (the key stays; the short words only as whole words:
  ``pin=1234``, not ``spin=3``), URL userinfo passwords (``https://user:[REDACTED]@host``)
  and credentials on command lines: ``curl -u user:[REDACTED]``, ``--password [REDACTED]``
  (and ``--token``, ``--api-key``, ...), ``mysql -p[REDACTED]``, ``sshpass -p [REDACTED]``;
  ``user:[REDACTED]@host.example`` without a scheme, and payment card numbers (a network's
  prefix and length, and a valid Luhn digit). The shapes live in policy/detectors.py, which
  ``mcpkit proxy --redact`` shares (a Redactor with ``kinds`` and a ``marker``, proxy/redaction.py).

Redaction is on the hot path (every audited tool call), so clean data costs one regex scan per
string and no allocation: :meth:`Redactor.redact` returns the *same object* when nothing
changed, and copies only the containers on the path to a change. Input is never mutated.
Redaction is idempotent: redacting redacted data changes nothing.

Session ids are treated as secrets (``session_id``): whoever holds one can ride on the session
(SEC-03), so they are masked like tokens.

:class:`RedactingFilter` and :func:`install_log_redaction` apply the default redactor to the
standard ``logging`` records (message, arguments, traceback, stack).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

# the detectors are shared with the proxy's redaction in transit (proxy/redaction.py)
from .detectors import ASSIGNMENT_KINDS, KINDS, PII_SHAPES, SHAPES, Check, check_assigned, hint

_SHAPES = SHAPES
_Check = Check

__all__ = [
    "DEFAULT_MASK",
    "DEFAULT_PATTERNS",
    "DEFAULT_SECRET_KEYS",
    "DEFAULT_SECRET_WORDS",
    "RedactingFilter",
    "Redactor",
    "default_redactor",
    "install_log_redaction",
]

DEFAULT_MASK = "[REDACTED]"

#: Words naming a secret, in their usual spelling. Keys are matched on the normalized form
#: (``api_key`` → ``apikey``), free-text assignments allow ``_``, ``-``, ``.`` or a space
#: between the parts. A key *ending* with one of these is a secret too, so the compound forms
#: (``client_secret``, ``access_token``, ``aws_secret_access_key``) need no entry of their own.
DEFAULT_SECRET_KEYS: tuple[str, ...] = (
    "token",
    "secret",
    "secrets",
    "password",
    "passwords",
    "passwd",
    "passphrase",
    "api_key",
    "apikey",
    "access_key",
    "secret_key",
    "private_key",
    "signing_key",
    "authorization",
    "cookie",
    "cookies",
    "set_cookie",
    "credential",
    "credentials",
    "session_id",
    "passcode",
    "api_keys",
    "ssh_key",
    # payment cards and identity numbers (PCI DSS, national ids): compounds, so that a
    # cardholder name or a card count stays
    "card_number",
    "card_num",
    "card_no",
    "credit_card",
    "debit_card",
    "cc_number",
    "cc_num",
    "cc_no",
    "card_pan",
    "pan_number",
    "card_code",
    "security_code",
    "card_verification",
    "iban",
    "ssn",
)

#: Short or common words naming a secret, matched only as whole words (a key's last word, or
#: a word standing alone before ``=``/``:`` in text): as suffixes they would catch ``spin``,
#: ``bypass`` or ``max_tokens``.
DEFAULT_SECRET_WORDS: tuple[str, ...] = ("pwd", "pass", "pin", "otp", "jwt", "auth", "bearer", "tokens",
                                          "cvv", "cvc", "cvv2", "cvc2", "ccn")

#: Trailing words that qualify a secret without changing what it is (password_confirmation).
_QUALIFIERS = frozenset({
    "confirmation", "confirm", "confirmed", "again", "repeat", "repeated", "retype", "verify",
    "verification", "current", "previous", "prev", "hash", "hashed", "value", "raw", "plain",
    "plaintext", "encrypted", "b64", "base64",
})
#: Words saying a value counts or measures something (max_tokens): then it is no secret.
_COUNTING = frozenset({
    "max", "min", "num", "number", "total", "count", "limit", "used", "remaining", "prompt",
    "completion", "input", "output", "estimated", "len", "length", "size",
})
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")

_NORMALIZE = str.maketrans("", "", "_-. ")
_CACHE_LIMIT = 4096  # distinct keys remembered; tool arguments are attacker-chosen
_MAX_DEPTH = 100  # deeper containers are masked whole: a walk must not blow the stack


def _normalize(key: str) -> str:
    return key.lower().translate(_NORMALIZE)


def _last_words(key: str) -> tuple[str, ...]:
    """What a key's last word (or last two words) may be, singular, with trailing numbers and
    qualifiers dropped; () when a counting word says the key holds a number."""
    words = [w.lower() for w in _WORD.findall(key)]
    while words and (words[-1].isdigit() or words[-1] in _QUALIFIERS):
        words.pop()
    if not words or not _COUNTING.isdisjoint(words):
        return ()
    last = words[-1]
    found = [last, last[:-1]] if last.endswith("s") else [last]
    if len(words) > 1:
        two = words[-2] + last
        found += [two, two[:-1]] if two.endswith("s") else [two]
    return tuple(found)


#: The credential shapes as stand-alone regex sources (what the default :class:`Redactor`
#: finds in text besides ``password=...`` assignments), e.g. to extend a custom pattern list.
DEFAULT_PATTERNS: tuple[str, ...] = tuple(
    (re.escape(first) if len(first) == 1 else f"[{first}]") + rest for first, rest, _, _ in _SHAPES
)

# A ``password=...`` assignment, anchored on the separator: the key words before it are
# checked with a trie of look-behinds (see _behind), so no position but a ':' or '=' costs
# anything. Keeps the key, the separator and an HTTP scheme word; masks the value, a quoted
# value whole. ``max_tokens=5`` does not match: the word must end right before the separator.
_VALUE = (
    r"\s*[\"']?(?:(?i:bearer|basic|token|digest)\s+)?"
    r"(?P<secret>(?<=\")[^\"\n]+(?=\")|(?<=')[^'\n]+(?=')|[^\s\"'`,;&]+)"
)


#: marks, in a reversed spelling, that the word must start at a word boundary
_BOUNDARY = "\0"


def _assignment(words: Iterable[str], whole: Iterable[str] = ()) -> str:
    spellings: set[str] = set()
    for word in words:
        parts = [p for p in re.split(r"[-_. ]+", word.lower()) if p]
        for join in ("",) if len(parts) == 1 else ("", "_", "-", ".", " "):
            spellings.update(join.join(parts) + tail for tail in ("", '"', "'", " "))
    for word in whole:
        spellings.update(_BOUNDARY + word.lower() + tail for tail in ("", '"', "'", " "))
    return f"(?i:{_behind(sorted(s[::-1] for s in spellings), 0)}){_VALUE}"


def _behind(items: list[str], depth: int) -> str:
    """A trie of look-behinds matching any of ``items`` (spellings reversed) written right
    before the character just consumed: one character tested per level, so a separator that
    follows no key word is rejected after a test or two."""
    if len(items) == 1:
        rest = items[0][depth:][::-1]
        edge = ""
        if rest.startswith(_BOUNDARY):  # a whole word: no word character right before it
            rest = rest[1:]
            edge = f"(?<![A-Za-z0-9_.\\-](?s:.){{{depth + len(rest) + 1}}})"
        return (f"(?<={re.escape(rest)}(?s:.){{{depth + 1}}})" if rest else "") + edge
    alts = [""] if any(len(item) == depth for item in items) else []
    children: dict[str, list[str]] = {}
    for item in items:
        if len(item) > depth:
            children.setdefault(item[depth], []).append(item)
    branches = []
    for char, sub in children.items():
        if char == _BOUNDARY:
            alts.append(f"(?<![A-Za-z0-9_.\\-](?s:.){{{depth + 1}}})")
            continue
        branches.append(f"(?<={re.escape(char)}(?s:.){{{depth + 1}}})" + _behind(sub, depth + 1))
    if len(branches) > 1:
        # one look-behind for every branch's character first: a position no key word ends at
        # (text full of '=' or ':') is rejected by one test instead of one per branch
        chars = "".join(re.escape(c) for c in sorted(children) if c != _BOUNDARY)
        alts.append(f"(?<=[{chars}](?s:.){{{depth + 1}}})(?:" + "|".join(branches) + ")")
    else:
        alts.extend(branches)
    return "(?:" + "|".join(alts) + ")"


class Redactor:
    """Masks secrets in JSON-like data (dicts, lists, tuples, strings) and in free text.

    ``keys`` are the secret words (see :data:`DEFAULT_SECRET_KEYS`); they name secret dict
    keys and ``word=value`` assignments in text. ``patterns`` are regex sources (or compiled
    patterns) for credential shapes in text; ``None`` means the built-in shapes
    (:data:`DEFAULT_PATTERNS`, on a faster path). A pattern may name the part to mask with a
    group ``secret``; the rest of its match is kept. ``extra_keys``/``extra_patterns`` add to
    ``keys``/``patterns`` instead of replacing them. Patterns that start with a literal
    character scan fastest.

    ``kinds`` (policy/detectors.KINDS) keeps only the built-in detectors of those kinds, the PII
    ones included when named; None: every credential shape and both assignment forms, no PII
    (the audit trail's set). Under ``kinds`` an assigned value that is plainly code or a
    placeholder (``password = getpass()``, ``${DB_PASSWORD}``) is spared. ``marker`` masks
    with ``marker.format(kind=...)`` (``"[redacted:{kind}]"``) instead of ``mask``.
    :meth:`scan_text` also says which kinds it masked.
    """

    def __init__(
        self,
        keys: Iterable[str] = DEFAULT_SECRET_KEYS,
        patterns: Iterable[str | re.Pattern[str]] | None = None,
        *,
        mask: str = DEFAULT_MASK,
        extra_keys: Iterable[str] = (),
        extra_patterns: Iterable[str | re.Pattern[str]] = (),
        whole_words: Iterable[str] | None = None,
        kinds: Iterable[str] | None = None,
        marker: str | None = None,
    ) -> None:
        if not mask:
            raise ValueError("the mask must be a non-empty string")
        self.mask = mask
        self.marker = marker
        #: what every mask begins with: a match that starts with it is masked already
        self._masked = mask if marker is None else marker.split("{kind}")[0] or mask
        wanted = None if kinds is None else frozenset(kinds)
        if whole_words is None:  # the default keys come with the default whole words
            whole_words = DEFAULT_SECRET_WORDS if keys is DEFAULT_SECRET_KEYS else ()
        whole = [w.lower() for w in whole_words if w.strip("-_. ")]
        words = [w for w in (*keys, *extra_keys) if w.strip("-_. ")]
        self._suffixes = tuple({_normalize(w) for w in words})
        #: what a key's last word(s) may be to name a secret (see _last_words)
        self._words = frozenset({*self._suffixes, *(_normalize(w) for w in whole)})
        self._cache: dict[str, bool] = {}
        #: the keys of _cache that name no secret: a dict of only these, holding only numbers,
        #: booleans and None, has nothing to mask (checked in C, without a loop in Python)
        self._plain_keys: set[str] = set()
        # rule number (group ``p<n>``) → (name of its secret group or None, check or None, kind)
        self._rules: list[tuple[str | None, _Check | None, str]] = []
        fast: list[tuple[str, str]] = []  # (kind, alternative), each starting with a literal character
        assigned = [c for c, kind in ASSIGNMENT_KINDS.items() if wanted is None or kind in wanted]
        if (words or whole) and assigned:
            body = _assignment(words, whole)
            check = None if wanted is None else check_assigned
            fast.extend((ASSIGNMENT_KINDS[c], self._rule(c, body, check, ASSIGNMENT_KINDS[c])) for c in assigned)
        if patterns is None:
            for first, rest, check, kind in _SHAPES:
                if wanted is None or kind in wanted:
                    fast.extend((kind, self._rule(re.escape(c), rest, check, kind)) for c in first)
        sources = [_source(p) for p in (*(patterns or ()), *extra_patterns)]
        slow = [("pattern", self._rule("", src, None, "pattern")) for src in sources]
        pii = [shape for shape in PII_SHAPES if wanted is not None and shape[3] in wanted]
        slow.extend((kind, self._rule(first, rest, check, kind)) for first, rest, check, kind in pii)
        if wanted is None:  # one alternation: the audit trail's short strings, one scan each
            groups = [[alt for _, alt in alts] for alts in (fast, slow) if alts]
            self._hints: tuple[Callable[[str], bool] | None, ...] = (None,) * len(groups)
        else:  # a regex per kind, skipped when its pre-filter says the text cannot hold one
            by_kind: dict[str, list[str]] = {kind: [] for kind in KINDS if kind in wanted}  # KINDS order:
            for kind, alt in (*fast, *slow):  # --password=x is a cli-password before it is an assignment
                by_kind.setdefault(kind, []).append(alt)
            by_kind = {kind: alts for kind, alts in by_kind.items() if alts}
            groups = list(by_kind.values())
            self._hints = tuple(hint(kind) for kind in by_kind)
        # compiled on first use: the default set takes tens of milliseconds to compile, which a
        # server should not spend before answering initialize when nothing has logged yet
        self._sources = tuple("|".join(alts) for alts in groups)
        self._hinted = any(h is not None for h in self._hints)
        self._compiled: tuple[re.Pattern[str], ...] | None = None
        for source in sources:
            re.compile(source)  # a bad pattern of the caller's is still reported here
        # Text shorter than any possible match skips the scan: most argument strings are short
        # (ids, names, enum values). A key word needs itself, a separator and one character.
        widths = [_min_width(src) for src in sources]
        if (words or whole) and assigned:
            widths.append(min(len(w) for w in (*self._suffixes, *whole)) + 2)
        if patterns is None:
            widths.append(_SHAPES_MIN_WIDTH)
        widths.extend(_min_width(first + rest) for first, rest, _, _ in pii)
        self._min_len = min(widths, default=0)

    def compile(self) -> None:
        """Compile the patterns now; otherwise the first text long enough to hold a secret does."""
        self._compile()

    def _compile(self) -> tuple[re.Pattern[str], ...]:
        with _compile_lock:
            if self._compiled is None:
                self._compiled = tuple(re.compile(source) for source in self._sources)
        return self._compiled

    def _rule(self, first: str, body: str, check: _Check | None, kind: str) -> str:
        """One alternative: ``first`` then ``body`` in group ``p<n>``, its ``secret`` group renamed
        ``s<n>`` (group names are unique across the alternatives of one regex)."""
        n = len(self._rules)
        secret = f"s{n}" if "(?P<secret>" in body else None
        self._rules.append((secret, check, kind))
        return f"{first}(?P<p{n}>{body.replace('(?P<secret>', f'(?P<s{n}>')})"

    # -- keys -----------------------------------------------------------------------------

    def is_secret_key(self, key: str) -> bool:
        """Whether a value under ``key`` is a secret (normalized key equals/ends with a word)."""
        hit = self._cache.get(key)
        if hit is None:
            hit = bool(self._suffixes) and _normalize(key).endswith(self._suffixes) or \
                not self._words.isdisjoint(_last_words(key))
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
                self._plain_keys.clear()
            self._cache[key] = hit
            if not hit and type(key) is str:
                self._plain_keys.add(key)
        return hit

    # -- text -----------------------------------------------------------------------------

    def redact_text(self, text: str) -> str:
        """``text`` with every credential-shaped part masked; ``text`` itself when clean."""
        if len(text) < self._min_len:
            return text
        if self._hinted:
            return self._text(text, None)
        # the audit trail's path (every string of every audited call): no pre-filters to ask
        out = text
        for pattern in self._compiled or self._compile():
            if pattern.search(out) is not None:
                out = pattern.sub(self._replace, out)
        return text if out == text else out

    def scan_text(self, text: str) -> tuple[str, list[str]]:
        """(:meth:`redact_text` of ``text``, the kind of each part masked, in order)."""
        found: list[str] = []
        return self._text(text, found), found

    def _text(self, text: str, found: list[str] | None) -> str:
        if len(text) < self._min_len:
            return text
        out = text
        replace = self._replace if found is None else functools.partial(self._replace, found=found)
        for pattern, hint in zip(self._compiled or self._compile(), self._hints):
            if (hint is None or hint(out)) and pattern.search(out) is not None:
                out = pattern.sub(replace, out)
        return text if out == text else out

    def _replace(self, m: re.Match[str], found: list[str] | None = None) -> str:
        whole = m.group(0)
        secret_group, check, kind = self._rules[int((m.lastgroup or "p0")[1:])]
        if secret_group is None:
            start, end = m.span()
            if whole.startswith(self._masked) or check is not None and not check(whole, whole):
                return whole
        else:
            start, end = m.span(secret_group)
            if m.string.startswith(self._masked, start):
                return whole  # already redacted: idempotence
        secret = m.string[start:end]
        offset = m.start()
        if check is not None and not check(whole, secret):
            # Not a credential after all; other shapes may still hide inside it.
            masked = self._text(secret, found)
        else:
            if kind in _ASSIGNED and _SCHEME.search(whole, 0, start - offset) is not None:
                kind = "http-auth"  # Authorization: Bearer ...: the key word's rule matched first
            masked = self.mask if self.marker is None else self.marker.format(kind=kind)
            if found is not None:
                found.append(kind)
        return whole[: start - offset] + masked + whole[end - offset:]

    # -- data -----------------------------------------------------------------------------

    def redact(self, value: Any) -> Any:
        """``value`` with secrets masked, deeply; the same object when nothing changed.

        Strings go through :meth:`redact_text`; a dict value under a secret key becomes the
        mask whatever its type; other objects pass through untouched. Dict keys are kept.
        """
        if type(value) is dict and value.keys() <= self._plain_keys and _LEAVES.issuperset(map(type, value.values())):
            return value  # the common audit line's arguments, without a call into _walk
        return self._walk(value, 0)

    def _walk(self, value: Any, depth: int) -> Any:
        # Hot path: scalars are skipped inline and strings scanned without a recursive call;
        # a container is copied only once one of its items actually changed.
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, dict):
            if depth >= _MAX_DEPTH:
                return self.mask
            if value.keys() <= self._plain_keys and _LEAVES.issuperset(map(type, value.values())):
                return value  # the common audit line's arguments: {"a": 1, "b": 2}
            cache, mask = self._cache, self.mask
            out: Any = None
            for k, v in value.items():
                secret = cache.get(k) if type(k) is str else False
                if secret is None:
                    secret = self.is_secret_key(k)
                if secret:
                    new = v if isinstance(v, str) and v == mask else mask
                elif type(v) in _LEAVES:
                    continue
                elif type(v) is str:
                    new = self.redact_text(v)
                else:
                    new = self._walk(v, depth + 1)
                if new is not v:
                    if out is None:
                        out = dict(value)
                    out[k] = new
            return value if out is None else out
        if isinstance(value, (list, tuple)):
            if depth >= _MAX_DEPTH:
                return self.mask
            items: list[Any] | None = None
            for i, v in enumerate(value):
                if type(v) in _LEAVES:
                    continue
                new = self.redact_text(v) if type(v) is str else self._walk(v, depth + 1)
                if new is not v:
                    if items is None:
                        items = list(value)
                    items[i] = new
            if items is None:
                return value
            return items if isinstance(value, list) else tuple(items)
        return value


_LEAVES = frozenset({int, float, bool, type(None)})
_ASSIGNED = frozenset(ASSIGNMENT_KINDS.values())
_SCHEME = re.compile(r"(?i:bearer|basic)\s")


def _min_width(source: str) -> int:
    """The fewest characters ``source`` can match (0 when unknown: never skip a scan)."""
    try:
        from re import _parser  # type: ignore[attr-defined]

        return max(0, min(int(_parser.parse(source).getwidth()[0]), 1 << 16))
    except Exception:  # noqa: BLE001 - an internal module; any trouble just disables the skip
        return 0


_SHAPES_MIN_WIDTH = min(_min_width(p) for p in DEFAULT_PATTERNS)

_FLAGS = (("i", re.IGNORECASE), ("m", re.MULTILINE), ("s", re.DOTALL), ("x", re.VERBOSE))


def _source(pattern: str | re.Pattern[str]) -> str:
    if isinstance(pattern, str):
        return pattern
    flags = "".join(f for f, bit in _FLAGS if pattern.flags & bit)
    return f"(?{flags}:{pattern.pattern})" if flags else pattern.pattern


_default: Redactor | None = None
_default_lock = threading.Lock()
_compile_lock = threading.Lock()


def default_redactor() -> Redactor:
    """The shared :class:`Redactor` with the default keys and patterns (built on first use)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Redactor()
    return _default


# -- logging --------------------------------------------------------------------------------


class RedactingFilter(logging.Filter):
    """Rewrites each record so that its message, traceback and stack carry no secret (LG-05).

    The message is formatted (``msg % args``) and redacted into ``record.msg`` with ``args``
    cleared, since a secret usually arrives as an argument. A traceback is formatted into
    ``exc_text`` and redacted, and ``exc_info`` cleared so that no handler formats it again
    from the live exception. The filter never drops a record.
    """

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self.redactor = redactor or default_redactor()
        self._formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        return self.redact(record, keep_exc_info=False)

    def redact(self, record: logging.LogRecord, *, keep_exc_info: bool) -> bool:
        """Rewrite ``record``; ``keep_exc_info``: leave the live exception for handlers that
        take it as an object (an error tracker), the formatted traceback redacted in
        ``exc_text``, which is what logging's formatters print."""
        redact = self.redactor.redact_text
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001
            return True  # a broken format string: logging reports it through handleError
        clean = redact(message)
        if record.args or clean is not message or not isinstance(record.msg, str):
            record.msg = clean
            record.args = None
        if record.exc_info:
            if not record.exc_text:
                record.exc_text = self._formatter.formatException(record.exc_info)
            if not keep_exc_info:
                record.exc_info = None
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def install_log_redaction(
    logger: str | logging.Logger = "mcpkit", redactor: Redactor | None = None
) -> RedactingFilter:
    """Redact the records of ``logger`` and its children, and everything its and the root
    logger's handlers emit.

    A filter on a logger does not see records propagated from its children, and a filter on a
    handler covers only that handler. So the records of ``logger``'s tree are redacted as they
    are made (a LogRecord factory wrapping the one in place), which every handler sees,
    including one configured later; and the filter also goes on the logger and on every handler
    of the logger and of the root logger present now, and on ``logging.lastResort``, for the
    other loggers' records they print. Idempotent: a second call reuses the installed filter
    (switching it to ``redactor`` when one is given). A record factory set after this call
    replaces the redacting one: set yours first.
    """
    target = logging.getLogger(logger) if isinstance(logger, str) else logger
    found = next((f for f in target.filters if isinstance(f, RedactingFilter)), None)
    if found is None:
        found = RedactingFilter(redactor)
        target.addFilter(found)
    elif redactor is not None:
        found.redactor = redactor
    # logging.lastResort prints records that found no handler at all (before any logging setup)
    last = [logging.lastResort] if logging.lastResort is not None else []
    for handler in (*target.handlers, *logging.getLogger().handlers, *last):
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(found)
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, _RedactingRecords):
        factory = _RedactingRecords(factory)
        logging.setLogRecordFactory(factory)
    # a new dict, not a change to the one another thread may be iterating as it logs
    factory.trees = {**factory.trees, "" if target is logging.getLogger() else target.name: found}
    return found


class _RedactingRecords:
    """A LogRecord factory: the records of the covered loggers' trees (``name`` and
    ``name.*``; "" is every logger) leave it redacted by their tree's filter, then go on to
    whatever handlers there are, now or later."""

    def __init__(self, previous: Callable[..., logging.LogRecord]) -> None:
        self.previous = previous
        #: tree -> its filter; replaced whole on each install, so read without a lock
        self.trees: dict[str, RedactingFilter] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self.previous(*args, **kwargs)
        name = record.name
        for tree, flt in self.trees.items():
            if not tree or name == tree or name.startswith(tree) and name[len(tree)] == ".":
                flt.redact(record, keep_exc_info=True)
                break
        return record
