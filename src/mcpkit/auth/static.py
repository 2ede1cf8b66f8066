"""Fixed bearer tokens for simple deployments: a small table of token hashes → principals.

Good for a team server, a CI bot, or a container behind a gateway, where running an
authorization server is overkill. Such tokens are issued by the operator for this server only,
so the audience rule (AU-05, SEC-01) holds by construction; they never leave it (AU-07).

Only SHA-256 hashes are kept (AU-14): entries may be given as ``sha256:<hex>`` (preferred, see
:func:`hash_token`) or as plain tokens, which are hashed at load and dropped. Verification
hashes the presented token and compares it with *every* stored hash using
``hmac.compare_digest``. A dict keyed by the hash would also be safe (lookup timing depends on
the hash, not on the secret), but the full scan keeps timing independent of which entry matched
and costs nothing for the handful of tokens such a table holds.

Sources: a mapping, a file (JSON or lines), or an environment variable (lines)::

    # <token or sha256:hex>  <subject>  [scope ...]
    sha256:9f86d08...  alice  files:read files:write
    3f5b8a...long-random-token...  ci-bot  files:read
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .tokens import AccessToken, InvalidToken, parse_scopes

__all__ = ["MIN_TOKEN_LENGTH", "StaticTokens", "hash_token"]

log = logging.getLogger("mcpkit.auth")

#: Plain tokens shorter than this are refused at load: a bearer token is a password nobody types.
MIN_TOKEN_LENGTH = 16

_HASHED = re.compile(r"sha256:([0-9a-fA-F]{64})")
_NAME = re.compile(r"[A-Za-z0-9_.@:+-][A-Za-z0-9_.@:+/-]{0,127}")


def hash_token(token: str) -> str:
    """``"sha256:<hex>"`` of ``token`` (UTF-8): what to put in a tokens file instead of the token."""
    return "sha256:" + hashlib.sha256(token.encode("utf-8")).hexdigest()


class _Entry:
    __slots__ = ("client_id", "digest", "expires_at", "scopes", "subject")

    def __init__(self, digest: bytes, subject: str, scopes: frozenset[str], client_id: str | None,
                 expires_at: float | None) -> None:
        self.digest = digest
        self.subject = subject
        self.scopes = scopes
        self.client_id = client_id
        self.expires_at = expires_at


class StaticTokens:
    """A :class:`~mcpkit.auth.tokens.TokenVerifier` over a fixed table of tokens.

    ``entries`` maps a token (or ``sha256:<hex>``) to ``{"subject": str, "scopes": str | list,
    "client_id": str (optional), "expires_at": epoch seconds (optional)}``. Configuration errors
    raise ``ValueError`` naming the entry by position, never by its token.
    """

    def __init__(self, entries: Mapping[str, Mapping[str, Any]], *, clock: Callable[[], float] = time.time,
                 source: str = "entries", _labels: list[str] | None = None) -> None:
        self._clock = clock
        self._entries: list[_Entry] = []
        self.plain_count = 0  # how many entries were given as plain tokens (hashed at load)
        seen: set[bytes] = set()
        for position, (key, spec) in enumerate(entries.items(), 1):
            where = f"{source}: {_labels[position - 1] if _labels else f'entry {position}'}"
            if not isinstance(spec, Mapping):
                raise ValueError(f"{where}: expected an object with 'subject' and 'scopes'")  # noqa: TRY004 - config content
            digest = self._digest_of(key, where)
            if digest in seen:
                raise ValueError(f"{where}: the same token appears twice")
            seen.add(digest)
            subject = spec.get("subject")
            if not isinstance(subject, str) or not _NAME.fullmatch(subject):
                raise ValueError(f"{where}: 'subject' must be a name of letters, digits and _.@:+-/")
            try:
                scopes = parse_scopes(spec.get("scopes"))
            except TypeError as exc:
                raise ValueError(f"{where}: {exc}") from None
            client_id = spec.get("client_id")
            if client_id is not None and not isinstance(client_id, str):
                raise ValueError(f"{where}: 'client_id' must be a string")
            expires_at = spec.get("expires_at")
            if expires_at is not None and (isinstance(expires_at, bool) or not isinstance(expires_at, (int, float))):
                raise ValueError(f"{where}: 'expires_at' must be epoch seconds")
            unknown = set(spec) - {"subject", "scopes", "client_id", "expires_at"}
            if unknown:
                raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
            self._entries.append(_Entry(digest, subject, scopes, client_id,
                                        None if expires_at is None else float(expires_at)))

    def _digest_of(self, key: str, where: str) -> bytes:
        if not isinstance(key, str):
            raise ValueError(f"{where}: the token must be a string")  # noqa: TRY004 - config content
        hashed = _HASHED.fullmatch(key)
        if hashed:
            return bytes.fromhex(hashed.group(1))
        if key.startswith("sha256:"):
            raise ValueError(f"{where}: 'sha256:' must be followed by 64 hex digits")
        if len(key) < MIN_TOKEN_LENGTH:
            raise ValueError(f"{where}: token shorter than {MIN_TOKEN_LENGTH} characters; "
                             "use a long random one, e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`")
        if any(c.isspace() for c in key):
            raise ValueError(f"{where}: tokens cannot contain whitespace")
        self.plain_count += 1
        return hashlib.sha256(key.encode("utf-8")).digest()

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:  # a verifier is truthy even when it holds no token
        return True

    def __repr__(self) -> str:
        return f"StaticTokens({len(self._entries)} tokens)"

    # -- loading -------------------------------------------------------------------------------

    @classmethod
    def from_lines(cls, text: str, *, source: str = "lines", clock: Callable[[], float] = time.time) -> StaticTokens:
        """Entries from ``<token or sha256:hex> <subject> [scope ...]`` lines; ``#`` starts a comment.

        Lines may also be separated by ``;`` (handy in an environment variable).
        """
        entries: dict[str, dict[str, Any]] = {}
        labels: list[str] = []
        for number, raw in enumerate(re.split(r"[;\n]", text), 1):
            fields = raw.split()
            for i, item in enumerate(fields):
                if item.startswith("#"):
                    fields = fields[:i]
                    break
            if not fields:
                continue
            if len(fields) < 2:
                raise ValueError(f"{source}: line {number}: expected '<token> <subject> [scope ...]'")
            token = fields[0]
            if token in entries:
                raise ValueError(f"{source}: line {number}: the same token appears twice")
            entries[token] = {"subject": fields[1], "scopes": fields[2:]}
            labels.append(f"line {number}")
        return cls(entries, clock=clock, source=source, _labels=labels)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, allow_insecure_permissions: bool = False,
                  clock: Callable[[], float] = time.time) -> StaticTokens:
        """Entries from a JSON object (as for the constructor) or a lines file.

        Like ssh with a private key, a file that group or others may read or write is refused
        (AU-14) unless ``allow_insecure_permissions``; plain tokens in it are logged as a warning.
        """
        path = Path(path)
        with open(path, "rb") as f:
            if os.name == "posix":
                mode = os.fstat(f.fileno()).st_mode & 0o777
                if mode & 0o077 and not allow_insecure_permissions:
                    raise PermissionError(
                        f"{path}: tokens file permissions {mode:04o} are too open (group/others can access "
                        f"it); run `chmod 600 {path}`"
                    )
            text = f.read().decode("utf-8")
        if text.lstrip().startswith("{"):
            import json

            try:
                data = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"{path}: invalid JSON: {exc.msg} (line {exc.lineno})") from None
            if not isinstance(data, dict):
                raise ValueError(f"{path}: expected a JSON object of token → entry")
            tokens = cls(data, clock=clock, source=str(path))
        else:
            tokens = cls.from_lines(text, source=str(path), clock=clock)
        if len(tokens) == 0:
            raise ValueError(f"{path}: no tokens in the file")
        if tokens.plain_count:
            log.warning("%s holds %d plain token(s); store hashes instead (see mcpkit.auth.hash_token)",
                        path, tokens.plain_count)
        return tokens

    @classmethod
    def from_env(cls, name: str = "MCPKIT_AUTH_TOKENS", *, environ: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.time) -> StaticTokens:
        """Entries from the lines format in the environment variable ``name`` (``;`` or newlines)."""
        value = (os.environ if environ is None else environ).get(name)
        if not value or not value.strip():
            raise ValueError(f"environment variable {name} is not set or empty")
        tokens = cls.from_lines(value, source=f"${name}", clock=clock)
        if len(tokens) == 0:
            raise ValueError(f"environment variable {name} holds no tokens")
        return tokens

    # -- verification --------------------------------------------------------------------------

    async def verify(self, token: str) -> AccessToken:
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        found: _Entry | None = None
        for entry in self._entries:  # every entry, no early exit (see the module docstring)
            if hmac.compare_digest(digest, entry.digest) and found is None:
                found = entry
        if found is None:
            raise InvalidToken("unknown token")
        if found.expires_at is not None and self._clock() >= found.expires_at:
            raise InvalidToken("token expired")
        return AccessToken(subject=found.subject, client_id=found.client_id, scopes=found.scopes,
                           expires_at=found.expires_at)
