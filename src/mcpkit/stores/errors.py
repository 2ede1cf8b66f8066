"""The one error every store raises when its backend cannot be reached.

A module of its own, importing nothing: the server catches it on paths that serving stdio takes,
and must not pull in the Redis stores' module (and its socket import) to do so.
"""

from __future__ import annotations

__all__ = ["StoreUnavailable"]


class StoreUnavailable(RuntimeError):
    """A shared store could not be reached: connection refused, timed out, or lost mid-command.

    Raised instead of redis-py's own errors so that callers handle one type whatever the store.
    It is deliberately not an ``OSError``: code that treats ``OSError`` as "the client went away"
    must not mistake an outage of the store for that.
    """
