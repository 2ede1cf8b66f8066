"""Secure-by-default guard rails for tool calls, each a module usable on its own.

    from mcpkit import Server
    from mcpkit.policy import Policy, SandboxPath

    server = Server("workspace", policy=Policy.secure(root="/srv/project"))

``policy=True`` (or MCPKIT_POLICY=1) is ``Policy.secure()`` with the environment's switches.
Everything is enforced at call time in one place (chain.py); see docs/policy.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    "Policy": ("config", "Policy"),
    "Gates": ("gates", "Gates"),
    "Sandbox": ("sandbox", "Sandbox"),
    "SandboxPath": ("paths", "SandboxPath"),
    "ExistingSandboxPath": ("paths", "ExistingSandboxPath"),
    "SandboxUri": ("paths", "SandboxUri"),
    "confined": ("paths", "confined"),
    "AuditLog": ("audit", "AuditLog"),
    "Redactor": ("redact", "Redactor"),
    "install_log_redaction": ("redact", "install_log_redaction"),
    "RateLimiter": ("ratelimit", "RateLimiter"),
    "Rate": ("ratelimit", "Rate"),
    "Limits": ("limits", "Limits"),
    "Bridge": ("bridge", "Bridge"),
    "Outcome": ("envelope", "Outcome"),
    "SecretParameterWarning": ("hygiene", "SecretParameterWarning"),
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


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'mcpkit.policy' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{target[0]}"), target[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
