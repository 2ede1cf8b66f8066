"""Fixture server on mcpkit: the same 200 tools as the peers (see common.py)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

from mcpkit import Server  # noqa: E402

# MCPKIT_BENCH_POLICY=1: the same server with every policy on (bench/policy_overhead.py has
# the in-process version): gates, contract envelope, audit file, rate limit, sizes, sanitizing,
# timeout. The measured tools then declare themselves read-only and closed-world, as tools
# under gates must.
POLICY = os.environ.get("MCPKIT_BENCH_POLICY") == "1"


def _policy():
    import tempfile

    from mcpkit.policy import Policy

    workdir = tempfile.mkdtemp(prefix="mcpkit-bench-policy-")
    # limits high enough for the 1 MiB echo and the call rates measured: each call still pays
    # for its bucket and its size checks
    env = {"MCPKIT_RATE_LIMIT": "100000000/min", "MCPKIT_MAX_ARGUMENT_BYTES": "4000000"}
    return Policy.secure(root=workdir, contract=True, environ=env)


server = Server("bench-mcpkit", policy=_policy() if POLICY else None)
HINTS = {"read_only": True, "open_world": False} if POLICY else {}


@server.tool(**HINTS)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(**HINTS)
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
