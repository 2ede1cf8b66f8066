"""The sans-IO protocol core: JSON-RPC framing, the revision table, the per-connection engine.

Nothing here imports asyncio, a socket library or anything from mcpkit.server.
"""
