"""What ``/readyz`` of ``mcpkit proxy --http`` says of its upstreams (transports/health.py).

Ready when every required upstream is connected (an entry of ``--config`` with ``"required": false``
is listed but not waited for). The body lists each upstream by its key (``NAME=`` or the
``--config`` key; ``default`` for one unnamed): ``connected``, ``connecting`` (no attempt has
failed yet) or ``failed`` (the last attempt failed; it is retried with backoff) with that error,
and with ``--pin`` (or ``--scan block``) how many of its tools are withheld. The page needs no credential (a load
balancer has none), so the error is redacted (policy/redact.py: tokens, passwords, URL userinfo),
URLs lose their query strings, and it is cut short: it names what failed, not what the upstream's
environment or command line hold.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["readiness"]

#: a query string may carry a key (``?api_key=...``) under a name no redaction rule knows
_QUERY = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s?#'\"]*)\?[^\s'\"]*", re.IGNORECASE)
_MAX_ERROR = 300


def readiness(upstreams: dict[str, Any], optional: frozenset[str] = frozenset()
              ) -> Callable[[], tuple[bool, dict[str, Any]]]:
    """The readiness check of the proxy whose upstreams are ``{key: Upstream}``; those named in
    ``optional`` (``"required": false`` in --config) are listed but not waited for."""
    from ..policy.redact import default_redactor

    redactor = default_redactor()

    def check() -> tuple[bool, dict[str, Any]]:
        states = {}
        for key, upstream in upstreams.items():
            entry: dict[str, Any]
            if upstream.up:
                entry = {"state": "connected"}
            else:
                error = upstream.connect_error or upstream.last_error
                entry = {"state": "failed" if error else "connecting"}
                if error:
                    text = redactor.redact_text(_QUERY.sub(r"\1?[REDACTED]", str(error)))
                    entry["error"] = text if len(text) <= _MAX_ERROR else text[:_MAX_ERROR] + "..."
            if key in optional:
                entry["required"] = False
            if upstream.pin is not None and getattr(upstream.pin, "withholds", True):
                # a withheld tool is registered behind its pin's Hold, the last item of its spec (upstream.py)
                entry["withheld"] = sum(1 for spec in list(upstream._tools.values()) if spec[-1] is not None)
            states[key] = entry
        return all(u.up for key, u in upstreams.items() if key not in optional), {"upstreams": states}

    return check
