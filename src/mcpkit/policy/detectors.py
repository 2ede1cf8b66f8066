"""The one set of secret and PII detectors: what the audit redactor (policy/redact.py, LG-05)
masks in logs and audit lines, and what ``mcpkit proxy --redact`` masks or refuses in transit
(proxy/redaction.py).

Each detector is a *shape*: the characters a match may start with, the rest of its regex, an
optional plausibility check (a Luhn digit, an IBAN's mod-97, base64 that decodes to
``user:password``), and the **kind** it reports (``aws-access-key``, ``payment-card``...). A
group ``secret`` marks the part to mask; the rest of the match is kept (a URL's scheme and user,
``Bearer``). Every credential shape starts with a literal character, so one compiled
alternation skips, with one character-set test, every position where no secret can start: clean
text costs well under a microsecond per short string, a few microseconds per KiB.

The PII shapes (e-mail addresses, phone numbers, IBANs, US social security numbers) cannot start
with one literal character; they are compiled into a second, slower regex, and only when a kind
of theirs is asked for (never by the audit redactor's defaults).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable

__all__ = ["ALL_KINDS", "ASSIGNMENT_KINDS", "Check", "DEFAULT_KINDS", "KIND_GROUPS", "KINDS", "PII_KINDS", "PII_SHAPES",
           "SHAPES", "Shape", "check_assigned", "expand_kinds", "hint", "luhn"]

#: a plausibility check: (the whole match, the part to mask) -> whether it is one
Check = Callable[[str, str], bool]
#: (possible first characters, the rest of the regex, plausibility check or None, kind)
Shape = tuple[str, str, "Check | None", str]


def _check_auth(whole: str, secret: str) -> bool:
    """Whether a ``Bearer``/``Basic`` match is a credential and not prose ("basic information")."""
    if whole[:5].lower() == "basic":
        # Basic credentials are base64("user:password"): decode to make sure.
        try:
            return b":" in base64.b64decode(secret, validate=True)
        except (binascii.Error, ValueError):
            return False
    return not (secret.isalpha() and secret.islower())  # "bearer authentication"


#: issuer prefixes (IIN) and lengths of the card networks: Visa, Mastercard (51-55, 2221-2720),
#: American Express, Diners Club, Discover, JCB, UnionPay, Maestro
_CARD = re.compile(r"4\d{12}(?:\d{3}){0,2}|5[1-5]\d{14}|2(?:2[2-9]|[3-6]\d|7[01])\d{13}|2720\d{12}|3[47]\d{13}"
                   r"|3(?:0[0-5]|[689]\d)\d{11,16}|6(?:011|5\d\d|4[4-9]\d|2\d\d)\d{12,15}|35\d{14,17}"
                   r"|6[37]\d{10,17}")


def luhn(digits: str) -> bool:
    """Whether a string of digits ends with a valid Luhn check digit."""
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _check_card(whole: str, secret: str) -> bool:
    """A run of digits is a payment card number only with a network's prefix and length and a
    valid Luhn check digit: order numbers, timestamps and phone numbers mostly fail one."""
    digits = "".join(c for c in whole if c.isdigit())
    return _CARD.fullmatch(digits) is not None and luhn(digits)


def _start(width: int) -> str:
    """Placed after a shape's literal prefix of ``width`` characters: the character before the
    prefix is not a letter, digit or ``_`` (a word merely containing a key prefix is safe).
    Checking it after the literals, not before, keeps failed positions cheap."""
    return f"(?<![A-Za-z0-9_].{{{width}}})"


_END = r"(?![A-Za-z0-9_\-])"

# Credential shapes in free text. Every alternative of the compiled regex starts with one
# literal character (see the module docstring).
SHAPES: tuple[Shape, ...] = (
    # PEM private key (RSA, EC, OPENSSH, PGP ... BLOCK); a truncated block is masked to the end.
    ("-", r"----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
     None, "private-key"),
    # URL userinfo (anchored on "://"): keep the scheme and user, mask the password.
    (":", r"//[^\s/:@]*:(?P<secret>[^\s/@]+)(?=@)", None, "url-password"),
    # HTTP authorization schemes, the scheme word kept; _check_auth spares plain prose.
    ("Bb", r"(?:(?i:earer)" + _start(6) + r"|(?i:asic)" + _start(5) + r")"
           r"\s+(?P<secret>[A-Za-z0-9._~+/\-]{8,}=*)", _check_auth, "http-auth"),
    # JWT: header.payload.signature, both JSON parts start with '{"' → "eyJ".
    ("e", r"yJ" + _start(3) + r"[A-Za-z0-9_\-]+\.eyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*", None, "jwt"),
    # AWS access key ids (long-term AKIA, temporary ASIA) and Google API keys (AIza).
    ("A", r"(?:KIA|SIA)" + _start(4) + r"[A-Z0-9]{16}" + _END, None, "aws-access-key"),
    ("A", r"Iza" + _start(4) + r"[A-Za-z0-9_\-]{35}" + _END, None, "google-api-key"),
    # GitHub personal/OAuth/user/server/refresh tokens and fine-grained PATs.
    ("g", r"(?:h[pousr]_" + _start(4) + r"[A-Za-z0-9]{30,}|ithub_pat_" + _start(11) + r"[A-Za-z0-9_]{22,})"
          + _END, None, "github-token"),
    # Slack bot/user/app/config tokens.
    ("x", r"ox[abposr]-" + _start(5) + r"[A-Za-z0-9\-]{10,}", None, "slack-token"),
    # Stripe secret/restricted keys; OpenAI (sk-, sk-proj-) and Anthropic (sk-ant-) keys.
    ("s", r"k" + _start(2) + r"_(?:live|test)_[A-Za-z0-9]{16,}", None, "stripe-key"),
    ("r", r"k_(?:live|test)_" + _start(8) + r"[A-Za-z0-9]{16,}", None, "stripe-key"),
    ("s", r"k" + _start(2) + r"-[A-Za-z0-9_\-]{20,}", None, "ai-api-key"),
    # Command lines: curl -u/--user user:password (the user kept), a password-like long option
    # followed by its value (a case-blind alternation is slow to fail: the first letters are
    # tested first), mysql's -pPASSWORD (no space), sshpass -p PASSWORD.
    # (-uuser:password needs no space; a quoted pair is masked to its closing quote)
    ("-", r"(?:u" + _start(2) + r"|-user" + _start(6) + r")(?:\s+|=|(?<=-u))(?P<cq>[\"'])?[^\s:\"'\-][^\s:\"']*:"
          r"(?P<secret>(?(cq)[^\"'\n]+|[^\s\"']+))", None, "cli-password"),
    ("-", r"-(?=[PpTtSsAaCc])(?i:password|passwd|pass|pwd|passphrase|token|secret|api-key|apikey|auth-token|access-token"
          r"|client-secret)(?:\s+|=)[\"']?(?P<secret>[^\s\"'\-][^\s\"']*)", None, "cli-password"),
    # (the scan for -p stops at the next mysql/mariadb, so a text full of them stays linear)
    ("m", r"(?:ysql" + _start(5) + r"(?:dump|admin|import|show|check)?|ariadb" + _start(7) + r"(?:-dump|-admin)?)"
          + r"(?=\s)(?:(?!m(?:ysql|ariadb))[^\n|;&]){0,200}?\s-p[\"']?(?P<secret>[^\s\"']+)", None, "cli-password"),
    ("s", r"shpass" + _start(7) + r"\s+-p\s*[\"']?(?P<secret>[^\s\"']+)", None, "cli-password"),
    # user:password@host without a scheme (scp, git, connection strings): anchored on the ':'
    # after a user name character, the password masked up to an '@' followed by a dotted host
    # name or address (a bare word after '@' is too often prose: "10:30@cafe"); not after the
    # schemes whose URIs are user@host with no password (mailto:alice@example.com)
    (":", r"(?<=[A-Za-z0-9._%+\-]:)(?<!(?i:mailto):)(?<!(?i:sips):)(?<!(?i:sip):)(?<!(?i:xmpp):)(?P<secret>[^\s/@:\"'<>]{1,256})(?=@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+)",
     None, "url-password"),
    # payment card numbers: 13 to 19 digits, grouped by spaces or dashes or not, starting with
    # a network's digit; _check_card keeps only a known prefix and length with a valid Luhn digit
    # (the first digit is kept, like the masked forms cards are printed in)
    ("23456", _start(1) + r"(?P<secret>(?:[ \-]?\d){12,18})(?![\d])", _check_card, "payment-card"),
)

#: IBAN length per country (the SWIFT IBAN registry)
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29, "BY": 28,
    "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
    "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
    "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20,
    "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15,
    "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19,
    "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}


def _check_iban(whole: str, secret: str) -> bool:
    """ISO 13616: the country's length, and the number mod 97 is 1 (one random string in 97
    passes, so with the length and the country a hex id or an order number practically never does)."""
    iban = whole.replace(" ", "")
    if _IBAN_LENGTHS.get(iban[:2]) != len(iban):
        return False
    moved = iban[4:] + iban[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _check_phone(whole: str, secret: str) -> bool:
    """E.164 numbers have at most 15 digits; fewer than 8 is an extension or a count."""
    return 8 <= sum(c.isdigit() for c in whole) <= 15


# PII shapes: regexes of their own (no literal first character), compiled only when asked for.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?"
def _check_ssn(whole: str, secret: str) -> bool:
    """The SSA never issues area 000, 666 or 9xx, group 00 or serial 0000."""
    area, group, serial = whole.split("-")
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


# PII shapes: their first element is a regex (a character class) rather than literal characters,
# kept outside the rule's group so that re skips, with one character-set test, every position
# where none can start; the character before it is checked right after it (as _start does).
_LOCAL = r"[A-Za-z0-9._%+\-]"
PII_SHAPES: tuple[Shape, ...] = (
    (_LOCAL, r"(?<!" + _LOCAL + r".)" + _LOCAL + r"{0,63}@" + _LABEL + r"(?:\." + _LABEL + r")*\.[A-Za-z]{2,24}"
             r"(?![A-Za-z0-9\-:])", None, "email"),
    # international (+CC ...) and North American ((555) 010-0199, 555-010-0199) numbers
    (r"\+", r"(?<![\w+]\+)\d{1,3}(?:[ .\-]?\(?\d{1,4}\)?){2,5}(?![\w\-])", _check_phone, "phone"),
    (r"\(", r"(?<![\w.+\-]\()[2-9]\d{2}\)[ .\-]?\d{3}[ .\-]\d{4}(?![\w\-])", None, "phone"),
    (r"[2-9]", r"(?<![\w.+\-].)\d{2}[ .\-]\d{3}[ .\-]\d{4}(?![\w\-])", None, "phone"),
    (r"[A-Z]", r"(?<![A-Za-z0-9].)[A-Z]\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])", _check_iban,
     "iban"),
    # dashes required: nine bare digits are too often something else
    (r"[0-9]", r"(?<![\d\-].)\d{2}-\d{2}-\d{4}(?![\d\-])", _check_ssn, "us-ssn"),
)

_NO_DIGITS = str.maketrans("", "", "0123456789")
_ZEROS = bytes.maketrans(b"0123456789", b"0000000000")


def _digits(least: int) -> Callable[[str], bool]:
    """A text with at least ``least`` digits (counted at C speed)."""
    return lambda text: len(text) - len(text.translate(_NO_DIGITS)) >= least


def _digit_run(least: int) -> Callable[[str], bool]:
    """A text with ``least`` digits in a row once spaces and dashes are dropped, as a grouped
    card number has (bytes.translate at C speed: 3 µs for 4 KiB where a regex takes 40). Text
    that is not ASCII is always scanned: ``\\d`` also matches other scripts' digits."""
    run = b"0" * least
    return lambda text: not text.isascii() or run in text.encode().translate(_ZEROS, b" -")


#: per kind, what a text must contain for a secret of that kind to be in it: literals (any of
#: them, found at C speed with ``in``) or a test of its digits. A text without them skips that
#: kind's regex, which would otherwise test every position: a 4 KiB result of prose is scanned
#: only for the kinds it might hold.
HINTS: dict[str, tuple[str, ...] | Callable[[str], bool]] = {
    # (a kind whose regex starts with one rare literal, AKIA or ghp_, needs none: re finds
    # that character faster than ``in`` finds a word)
    "url-password": ("@",),
    "http-auth": ("earer", "asic", "EARER", "ASIC"),
    "stripe-key": ("k_live_", "k_test_"),
    "cli-password": ("-u", "--", "-p"),
    "payment-card": _digit_run(13),
    "password-assignment": ("=",),
    "password-label": (":",),
    "email": ("@",),
    "phone": _digits(8),
    "iban": _digits(10),
    "us-ssn": _digits(9),
}


def hint(kind: str) -> Callable[[str], bool] | None:
    """The pre-filter of ``kind`` (HINTS) as a test of a text; None: always scan."""
    found = HINTS.get(kind)
    if found is None or callable(found):
        return found
    if len(found) == 1:
        literal = found[0]
        return lambda text: literal in text
    return lambda text: any(literal in text for literal in found)


#: values that are plainly code or a placeholder, not a secret: a call or an index, a variable
#: (``$X``, ``${X}``, ``%s``, ``${X:?unset}``), a comparison (``==``), an attribute (``settings.API_KEY``), ``<yours>``
_NOT_A_VALUE = re.compile(r"[()\[\]{}]|\A[$=<%?]|\A[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\Z"
                          r"|\A(?:\*+|x+|none|null|nil|true|false|changeme|redacted|secret|password)\Z", re.IGNORECASE)


def check_assigned(whole: str, secret: str) -> bool:
    """In transit, ``password = getpass()``, ``token=${TOKEN}`` or ``password=<your password>``
    in a file a tool writes is code, not a credential leaving (the audit trail masks them all)."""
    return _NOT_A_VALUE.search(secret) is None


#: ``password=value`` in text (key words of the redactor, then ``=``) and ``password: value``
#: (then ``:``, in prose as often "Password: choose a long one" as a credential)
ASSIGNMENT_KINDS = {"=": "password-assignment", ":": "password-label"}

#: every kind, and what it finds (docs/security.md has the table)
KINDS: dict[str, str] = {
    "private-key": "PEM private key blocks (RSA, EC, OpenSSH, PGP)",
    "url-password": "the password of user:password@ in a URL or a connection string",
    "http-auth": "Bearer and Basic credentials (Basic: base64 of user:password)",
    "jwt": "JSON Web Tokens",
    "aws-access-key": "AWS access key ids (AKIA, ASIA)",
    "google-api-key": "Google API keys (AIza)",
    "github-token": "GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_)",
    "slack-token": "Slack tokens (xoxb-, xoxp-, xoxa-, ...)",
    "stripe-key": "Stripe secret and restricted keys (sk_live_, rk_live_, _test_)",
    "ai-api-key": "OpenAI and Anthropic API keys (sk-, sk-proj-, sk-ant-)",
    "cli-password": "passwords on command lines (curl -u, --password, mysql -p, sshpass -p)",
    "payment-card": "payment card numbers (network prefix and length, Luhn digit)",
    "password-assignment": "password=..., api_key=..., DB_TOKEN=... (a secret word, then =)",
    "password-label": "password: ..., token: ... (a secret word, then :)",
    "email": "e-mail addresses",
    "phone": "phone numbers (+CC international, North American)",
    "iban": "IBANs (country length and mod-97 checked)",
    "us-ssn": "US social security numbers (123-45-6789 with the SSA's rules)",
}
PII_KINDS: tuple[str, ...] = ("email", "phone", "iban", "us-ssn")
ALL_KINDS: tuple[str, ...] = tuple(KINDS)
#: on unless a configuration names its kinds: the secrets and payment cards; the PII kinds and
#: password-label (too common in prose) are asked for by name, or by group
DEFAULT_KINDS: tuple[str, ...] = tuple(k for k in KINDS if k not in PII_KINDS and k != "password-label")
KIND_GROUPS: dict[str, tuple[str, ...]] = {"secrets": DEFAULT_KINDS, "pii": PII_KINDS, "all": ALL_KINDS}


def expand_kinds(names: Iterable[str]) -> tuple[str, ...]:
    """The kinds that kind and group names (``secrets``, ``pii``, ``all``) stand for, in KINDS
    order; ValueError naming an unknown one and the known ones."""
    wanted: set[str] = set()
    names = list(names)
    if not names:
        raise ValueError(f"no kind named; name kinds ({', '.join(KINDS)}) or groups ({', '.join(KIND_GROUPS)})")
    for name in names:
        if name in KIND_GROUPS:
            wanted.update(KIND_GROUPS[name])
        elif name in KINDS:
            wanted.add(name)
        else:
            raise ValueError(f"unknown kind {name!r}; the kinds are {', '.join(KINDS)}, "
                             f"and the groups {', '.join(KIND_GROUPS)}")
    return tuple(k for k in KINDS if k in wanted)
