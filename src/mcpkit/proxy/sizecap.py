"""The proxy's cap on what one upstream answer may weigh (``--max-response-bytes``).

An upstream we did not write can answer a tool call with a gigabyte: held whole, it would take the
proxy's memory, and passed on, the client's and the model's context. The upstream's Client reads
past anything larger than the cap without holding it (client/oversize.py: a stdio line, an HTTP
body, an SSE event), and the call it answered fails here with a typed error naming the size, the
cap and the fix; the connection and every other call carry on. The default, 16 MiB, is four times
the largest request the HTTP transport accepts by default and far beyond any model's context.
"""

from __future__ import annotations

from typing import Any

from ..protocol.errors import INTERNAL_ERROR, McpError, ToolError

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "E_TOO_LARGE", "too_large"]

DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
#: the tool error code (protocol/errors.py's E_... shape): the answer was over the proxy's cap
E_TOO_LARGE = "E_TOO_LARGE"


def too_large(upstream: str, size: int, limit: int, tool: bool) -> Exception:
    """The error a call gets when ``upstream``'s answer (``size`` bytes) was over ``limit``: an
    ``isError`` result for a tool call (ToolError), a JSON-RPC error for anything else."""
    message = f"the answer of upstream {upstream} is {size} bytes, over the proxy's limit of {limit} bytes"
    fix = (f"Ask for less (a narrower query, a page of the results), or raise the proxy's limit with "
           f"--max-response-bytes (\"max_response_bytes\" in its config) above {size}.")
    details: dict[str, Any] = {"upstream": upstream, "size": size, "limit": limit}
    if tool:
        return ToolError(message + ".", code=E_TOO_LARGE, details=details, retryable=False, suggested_fix=fix)
    return McpError(INTERNAL_ERROR, f"{message}. {fix}", details)


def max_response_bytes(given: int | None, config: str | None) -> int:
    """The cap: ``--max-response-bytes``, else the --config file's ``"max_response_bytes"``, else
    the default. Raises ConfigError for a value in the file that is not a positive integer."""
    if given is not None:
        return given
    if config:
        import json

        from .config import ConfigError

        try:
            with open(config, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            data = None  # load_mcp_servers has said what is wrong with the file already
        value = data.get("max_response_bytes") if isinstance(data, dict) else None
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f'{config}: "max_response_bytes" must be a positive number of bytes, got {value!r}')
            return value
    return DEFAULT_MAX_RESPONSE_BYTES
