"""Fixture server on mcpkit: the same 200 tools as the peers (see common.py)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

from mcpkit import Server  # noqa: E402

server = Server("bench-mcpkit")


@server.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


for _i in range(common.N_DUMMY):
    server.tool(common.make_dummy(_i), name=common.dummy_name(_i), description=common.dummy_doc(_i))


if __name__ == "__main__":
    args = common.parse_args()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        app = server.http_app(
            json_response=args.http_mode.endswith("json"),
            stateless=args.http_mode.startswith("stateless"),
        )
        common.run_uvicorn(app, args.host, args.port)
