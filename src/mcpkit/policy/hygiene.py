"""Secret hygiene: a tool that takes a credential as a parameter is warned about, once.

A model fills tool arguments from the conversation, so a ``password`` or ``api_key``
parameter invites the user to paste a secret into the chat, where it lands in transcripts,
the host's logs and the audit trail. The fix is to read the secret from the server's
environment or from the request's authorization context instead.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["SecretParameterWarning", "warn_secret_parameters", "secret_parameters"]

log = logging.getLogger("mcpkit.policy")

_warned: set[tuple[str, str]] = set()


class SecretParameterWarning(UserWarning):
    """A tool parameter looks like a credential."""


#: cheap pre-check: only names containing one of these can match the redactor's key rule, so
#: most servers register their tools without importing (and compiling) the redactor at all
_HINTS = ("token", "secret", "pass", "key", "auth", "cookie", "credential", "session", "signature")


def secret_parameters(properties: Mapping[str, Any]) -> list[str]:
    """The parameter names that look like credentials (the redactor's key rule)."""
    if not any(hint in name.lower() for name in properties for hint in _HINTS):
        return []
    from .redact import default_redactor

    redactor = default_redactor()
    return [name for name in properties if redactor.is_secret_key(name)]


def warn_secret_parameters(tool: str, properties: Mapping[str, Any]) -> list[str]:
    """Warn once per (tool, parameter) that looks like a credential; returns the names."""
    names = secret_parameters(properties)
    for name in names:
        if (tool, name) in _warned:
            continue
        _warned.add((tool, name))
        message = (
            f"tool {tool!r} takes a credential-like parameter {name!r}: the model would have to put the "
            f"secret in the conversation. Read it from the environment (os.environ) or from the request's "
            f"authorization context instead, and drop the parameter."
        )
        warnings.warn(message, SecretParameterWarning, stacklevel=4)
        log.warning("%s", message)
    return names
