"""Upstream HTTP APIs: retries that respect the API, a breaker, and its statuses as contract codes.

    api = Upstream("https://api.example.com/v1", name="Example API")

    @server.tool(read_only=True)
    async def get_design(design_id: str, ctx: Context) -> dict:
        return await api.get(f"/designs/{design_id}", key=api_key(ctx))

* **429** waits ``Retry-After`` (seconds or an HTTP date, capped by ``max_retry_after``) and
  tries again, up to ``retries`` times; still limited: ``E_RATE_LIMITED`` with ``retryAfterMs``.
* **5xx**, timeouts and connection errors back off exponentially with jitter and try again —
  for idempotent methods only (GET, HEAD, PUT, DELETE, OPTIONS), unless ``retry_unsafe=True``:
  a POST that reached the API must not be sent twice. Still failing: ``E_NOT_CONNECTED``,
  retryable.
* **A breaker** counts consecutive failed requests (after their retries); at
  ``failure_threshold`` it opens and calls fail fast with ``E_NOT_CONNECTED`` for
  ``reset_timeout`` seconds, then one trial request closes or re-opens it. The error names the
  breaker state and the last failure.
* **Statuses**: 400/422 -> E_SCHEMA_VALIDATION, 401/403 -> E_PERMISSION_DENIED, 404/410 ->
  E_NOT_FOUND, 408 -> E_TIMEOUT, 429 -> E_RATE_LIMITED, 501 -> E_UNSUPPORTED; the API's own
  error message (JSON ``message``/``error``/``detail``) is quoted, cut short.
* **Keys**: ``key=`` per request (the caller's, see :func:`mcpkit.auth.api_key`) goes in
  ``auth_header`` (``Authorization: Bearer <key>`` by default); it is never logged.

httpx is imported on first use (``pip install mcpkit[bridge]``).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .._extras import needs
from ..protocol.errors import (
    E_INTERNAL,
    E_NOT_CONNECTED,
    E_NOT_FOUND,
    E_PERMISSION_DENIED,
    E_RATE_LIMITED,
    E_SCHEMA_VALIDATION,
    E_TIMEOUT,
    E_UNSUPPORTED,
    ToolError,
)

__all__ = ["STATUS_CODES", "Upstream"]

log = logging.getLogger("mcpkit.bridge")

#: upstream HTTP status -> tool contract code (the rest: 4xx E_INTERNAL, 5xx E_NOT_CONNECTED)
STATUS_CODES: dict[int, str] = {
    400: E_SCHEMA_VALIDATION,
    401: E_PERMISSION_DENIED,
    403: E_PERMISSION_DENIED,
    404: E_NOT_FOUND,
    408: E_TIMEOUT,
    410: E_NOT_FOUND,
    422: E_SCHEMA_VALIDATION,
    429: E_RATE_LIMITED,
    501: E_UNSUPPORTED,
}
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
_FIXES = {
    E_PERMISSION_DENIED: "Check that the API key is valid and allowed to do this.",
    E_NOT_FOUND: "Check the id; list the items to see which exist.",
    E_SCHEMA_VALIDATION: "Fix the arguments as the message says.",
}


class _Failure(Exception):
    """A retryable failure of one attempt (5xx, timeout, connection)."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


class Upstream:
    """An HTTP API client for tools; see the module docstring."""

    def __init__(
        self,
        base_url: str,
        *,
        name: str = "upstream API",
        headers: Mapping[str, str] | None = None,
        auth_header: str = "Authorization",
        auth_scheme: str | None = "Bearer",
        timeout: float = 30.0,
        retries: int = 3,
        backoff_initial: float = 0.5,
        backoff_max: float = 10.0,
        max_retry_after: float = 30.0,
        retry_unsafe: bool = False,
        failure_threshold: int = 5,
        reset_timeout: float = 30.0,
        transport: Any = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if retries < 0 or timeout <= 0 or backoff_initial <= 0 or failure_threshold < 1 or reset_timeout < 0:
            raise ValueError("need retries >= 0, timeout > 0, backoff_initial > 0, failure_threshold >= 1 "
                             "and reset_timeout >= 0")
        self.base_url = base_url.rstrip("/")
        self.name = name
        self.headers = dict(headers or {})
        self.auth_header = auth_header
        self.auth_scheme = auth_scheme
        self.timeout = float(timeout)
        self.retries = retries
        self.backoff_initial = float(backoff_initial)
        self.backoff_max = float(backoff_max)
        self.max_retry_after = float(max_retry_after)
        self.retry_unsafe = retry_unsafe
        self.failure_threshold = failure_threshold
        self.reset_timeout = float(reset_timeout)
        self._transport = transport
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._client: Any = None
        self._lock = threading.Lock()
        self._consecutive = 0
        self._open_until: float | None = None
        self._trial = False
        #: the most recent failure, kept after recovery (for E_NOT_CONNECTED details)
        self.last_error: str | None = None

    @property
    def breaker(self) -> str:
        if self._open_until is None:
            return "closed"
        return "open" if self._clock() < self._open_until else "half_open"

    # ------------------------------------------------------------------ requests

    async def get(self, path: str, **kw: Any) -> Any:
        return await self.request("GET", path, **kw)

    async def post(self, path: str, **kw: Any) -> Any:
        return await self.request("POST", path, **kw)

    async def put(self, path: str, **kw: Any) -> Any:
        return await self.request("PUT", path, **kw)

    async def delete(self, path: str, **kw: Any) -> Any:
        return await self.request("DELETE", path, **kw)

    async def request(self, method: str, path: str, *, key: str | None = None, json: Any = None,
                      params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None) -> Any:
        """The response body (JSON decoded, else text; None for 204), or a ToolError."""
        method = method.upper()
        self._admit()
        sent = {**self.headers, **(headers or {})}
        if key is not None:
            sent[self.auth_header] = f"{self.auth_scheme} {key}" if self.auth_scheme else key
        retry_failures = self.retry_unsafe or method in _IDEMPOTENT
        attempt = 0
        while True:
            try:
                response = await self._send(method, path, sent, json, params)
            except _Failure as failure:
                if retry_failures and attempt < self.retries:
                    attempt += 1
                    await self._sleep(self._backoff(attempt))
                    continue
                self._failed(failure.reason)
                raise self._unavailable(method, path, failure) from None
            status = response.status_code
            if status == 429:
                wait = _retry_after(response.headers.get("retry-after"), self._backoff(attempt + 1))
                if attempt < self.retries and wait <= self.max_retry_after:
                    attempt += 1
                    await self._sleep(wait)
                    continue
                self._succeeded()  # the API answered: it is up, only busy
                raise self._status_error(method, path, response, retry_after=wait)
            if status >= 500 and status != 501:
                failure = _Failure(f"HTTP {status}", status)
                if retry_failures and attempt < self.retries:
                    attempt += 1
                    await self._sleep(self._backoff(attempt))
                    continue
                self._failed(failure.reason)
                raise self._unavailable(method, path, failure, response) from None
            self._succeeded()
            if status >= 400:
                raise self._status_error(method, path, response)
            return _body(response)

    async def _send(self, method: str, path: str, headers: dict[str, str], json: Any,
                    params: Mapping[str, Any] | None) -> Any:
        with needs("bridge", "mcpkit.bridge.Upstream"):
            import httpx

        client = self._client
        if client is None:
            client = self._client = httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout,
                                                      transport=self._transport, follow_redirects=False)
        try:
            return await client.request(method, path, headers=headers, json=json, params=params)
        except httpx.TimeoutException:
            raise _Failure(f"no answer within {self.timeout:g} s") from None
        except httpx.TransportError as exc:
            raise _Failure(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from None

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    # ------------------------------------------------------------------ the breaker

    def _admit(self) -> None:
        with self._lock:
            if self._open_until is None:
                return
            now = self._clock()
            if now < self._open_until:
                wait = self._open_until - now
            elif not self._trial:
                self._trial = True  # half-open: this request is the trial
                return
            else:
                wait = self.backoff_initial  # another request is the trial; try after it
        # rounded first: (t + 30) - t can come out as 30.000000000004, which is not 30001 ms
        ms = max(1, math.ceil(round(wait * 1000, 6)))
        raise ToolError(f"{self.name} is unavailable (too many failures; paused before trying again).",
                        code=E_NOT_CONNECTED, retryable=True,
                        details={"upstream": self.name, "retryAfterMs": ms, "breaker": self.breaker,
                                 "lastError": self.last_error},
                        suggested_fix=f"Retry after {ms / 1000:g} s.")

    def _failed(self, reason: str) -> None:
        with self._lock:
            self.last_error = reason
            self._consecutive += 1
            if self._trial or self._consecutive >= self.failure_threshold:
                if self._open_until is None or self._trial:
                    log.warning("%s: circuit breaker open after %d consecutive failures (%s)",
                                self.name, self._consecutive, reason)
                self._open_until = self._clock() + self.reset_timeout
            self._trial = False

    def _succeeded(self) -> None:
        with self._lock:
            self._consecutive = 0
            self._open_until = None
            self._trial = False

    def _backoff(self, attempt: int) -> float:
        delay = min(self.backoff_initial * 2 ** (attempt - 1), self.backoff_max)
        return delay * (1.0 + self._rng.uniform(-0.1, 0.1))

    # ------------------------------------------------------------------ errors

    def _unavailable(self, method: str, path: str, failure: _Failure, response: Any = None) -> ToolError:
        details: dict[str, Any] = {"upstream": self.name, "method": method, "path": path,
                                   "breaker": self.breaker, "lastError": failure.reason,
                                   "retryAfterMs": max(1, math.ceil(self.backoff_initial * 1000))}
        if failure.status is not None:
            details["status"] = failure.status
        said = f": {_message(response)}" if response is not None and _message(response) else ""
        return ToolError(f"{self.name} is unavailable ({failure.reason}){said}.", code=E_NOT_CONNECTED,
                         retryable=True, details=details, suggested_fix="Retry in a little while.")

    def _status_error(self, method: str, path: str, response: Any, retry_after: float | None = None) -> ToolError:
        status = response.status_code
        code = STATUS_CODES.get(status, E_INTERNAL)
        said = _message(response)
        details: dict[str, Any] = {"upstream": self.name, "method": method, "path": path, "status": status}
        fix = _FIXES.get(code)
        if retry_after is not None:
            details["retryAfterMs"] = max(1, math.ceil(retry_after * 1000))
            fix = f"Retry after {retry_after:g} s."
        return ToolError(f"{self.name} answered {status}" + (f": {said}" if said else "."), code=code,
                         details=details, suggested_fix=fix)


def _retry_after(value: str | None, default: float) -> float:
    """Seconds to wait per a Retry-After header (delta-seconds or an HTTP date, RFC 9110 §10.2.3)."""
    if not value:
        return default
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return default
    return max(0.0, when.timestamp() - time.time())


def _body(response: Any) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    if "json" in response.headers.get("content-type", ""):
        try:
            return response.json()
        except ValueError:
            pass
    return response.text


def _message(response: Any) -> str:
    """The API's own one-line explanation, if it gave one (cut short: it reaches a model)."""
    try:
        data = response.json()
    except ValueError:
        text = response.text.strip()
        return text[:300] if text and "<" not in text[:1] else ""
    if isinstance(data, dict):
        for key in ("message", "error_description", "detail", "error"):
            value = data.get(key)
            if isinstance(value, dict):
                value = value.get("message")
            if isinstance(value, str) and value:
                return value[:300]
    return ""
