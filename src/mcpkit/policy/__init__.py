"""Secure-by-default guard rails for tool calls, each a module usable on its own.

    from mcpkit import Server
    from mcpkit.policy import Policy, SandboxPath

    server = Server("workspace", policy=Policy.secure(root="/srv/project"))

``policy=True`` (or MCPKIT_POLICY=1) is ``Policy.secure()`` with the environment's switches.
Everything is enforced at call time in one place (chain.py); see docs/policy.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports

__all__ = [
    "Policy",
    "Gates",
    "Sandbox",
    "SandboxPath",
    "ExistingSandboxPath",
    "SandboxUri",
    "confined",
    "AuditLog",
    "Redactor",
    "install_log_redaction",
    "RateLimiter",
    "Rate",
    "Limits",
    "Bridge",
    "Outcome",
    "SecretParameterWarning",
]

# lazily, so that importing one piece does not import the others
_LAZY = {
    "Policy": (".config", "Policy"),
    "Gates": (".gates", "Gates"),
    "Sandbox": (".sandbox", "Sandbox"),
    "SandboxPath": (".paths", "SandboxPath"),
    "ExistingSandboxPath": (".paths", "ExistingSandboxPath"),
    "SandboxUri": (".paths", "SandboxUri"),
    "confined": (".paths", "confined"),
    "AuditLog": (".audit", "AuditLog"),
    "Redactor": (".redact", "Redactor"),
    "install_log_redaction": (".redact", "install_log_redaction"),
    "RateLimiter": (".ratelimit", "RateLimiter"),
    "Rate": (".ratelimit", "Rate"),
    "Limits": (".limits", "Limits"),
    "Bridge": (".bridge", "Bridge"),
    "Outcome": (".envelope", "Outcome"),
    "SecretParameterWarning": (".hygiene", "SecretParameterWarning"),
}

if TYPE_CHECKING:
    from .audit import AuditLog
    from .bridge import Bridge
    from .config import Policy
    from .envelope import Outcome
    from .gates import Gates
    from .hygiene import SecretParameterWarning
    from .limits import Limits
    from .paths import ExistingSandboxPath, SandboxPath, SandboxUri, confined
    from .ratelimit import Rate, RateLimiter
    from .redact import Redactor, install_log_redaction
    from .sandbox import Sandbox


__getattr__ = exports(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
