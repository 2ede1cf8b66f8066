"""``mcpkit skills TARGET``: the skills a server serves (SEP-2640), one skill's entry and
SKILL.md, or a skill's files fetched into a directory, each file verified against its entry
(listed, size, digest, and for SKILL.md the frontmatter) before anything is written.

NAME is a skill's name or the URI of its SKILL.md; a name two skills share is refused with
their URIs, since names are labels and not identifiers (SEP-2640 "Names"). A URI reaches a
skill the listing leaves out, through ``skills/get``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .cli_target import add_target, client_for, print_log, run

__all__ = ["register"]


async def _entry(client: Any, name: str) -> dict[str, Any]:
    if "://" in name:
        return await client.get_skill(name)  # type: ignore[no-any-return]
    entries = await client.list_skills()
    found = [e for e in entries if (e.get("frontmatter") or {}).get("name") == name]
    if not found:
        known = ", ".join(sorted({str((e.get("frontmatter") or {}).get("name")) for e in entries})) or "none"
        raise SystemExit(f"mcpkit: no skill named {name!r} (listed: {known}); give its name or its SKILL.md URI")
    if len(found) > 1:
        raise SystemExit(f"mcpkit: {len(found)} skills are named {name!r}: "
                         f"{', '.join(e['uri'] for e in found)}; give the URI of the one you mean")
    from .client.skills import check_entry

    return check_entry(found[0])


def _files(entry: dict[str, Any]) -> tuple[int, int]:
    resources = entry.get("resources")
    if not isinstance(resources, list):
        return 0, 0
    return len(resources), sum(int(r.get("size") or 0) for r in resources if isinstance(r, dict))


async def _skills(args: argparse.Namespace) -> int:
    if args.action == "list" and args.name is not None:
        raise SystemExit("mcpkit: `mcpkit skills TARGET` lists; use `show NAME` or `fetch NAME DIR` for one skill")
    if args.action in ("show", "fetch") and args.name is None:
        raise SystemExit(f"mcpkit: `mcpkit skills TARGET {args.action}` needs a skill NAME (or its SKILL.md URI)")
    if args.action == "fetch" and args.directory is None:
        raise SystemExit("mcpkit: `mcpkit skills TARGET fetch NAME DIR` needs the DIR to write the skill's files to")
    if args.action != "fetch" and args.directory is not None:
        raise SystemExit(f"mcpkit: DIR is for fetch only; `{args.action}` writes nothing")
    async with client_for(args, on_log=print_log) as client:
        if args.action == "list":
            entries = await client.list_skills()
            if args.json:
                print(json.dumps(entries, indent=2, ensure_ascii=False))
                return 0
            if not entries:
                print("no skills listed (a server may still serve skills it does not list)", file=sys.stderr)
            for entry in entries:
                front = entry.get("frontmatter") or {}
                count, size = _files(entry)
                files = f"{count} files, {size} bytes" if isinstance(entry.get("resources"), list) else "dynamic"
                print(f"{front.get('name')}  {entry.get('uri')}  ({files})")
                print(f"    {front.get('description', '')}")
            return 0
        entry = await _entry(client, args.name)
        if args.action == "show":
            text = (await client.read_skill_file(entry, allow_dynamic=True)).decode("utf-8")
            if args.json:
                print(json.dumps({"skill": entry, "text": text}, indent=2, ensure_ascii=False))
                return 0
            if entry["resources"] == "dynamic":
                print("note: this skill's resources are \"dynamic\": its files cannot be verified", file=sys.stderr)
            else:
                for item in entry["resources"]:
                    print(f"{item['uri']}  {item['size']} bytes  {item['digest']}")
                print()
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            return 0
        directory = Path(args.directory)
        written = await client.fetch_skill(entry, directory)
        print(f"wrote {len(written)} files of {entry['uri']} to {directory}, each matching its digest",
              file=sys.stderr)
        return 0


def register(sub: Any) -> None:
    p = sub.add_parser("skills", help="a server's skills (SEP-2640): list, show NAME, fetch NAME DIR")
    add_target(p)
    p.add_argument("action", nargs="?", choices=["list", "show", "fetch"], default="list",
                   help="list the skills (default), show one (its files and SKILL.md), or fetch one into DIR")
    p.add_argument("name", nargs="?", metavar="NAME", help="the skill's name, or the URI of its SKILL.md")
    p.add_argument("directory", nargs="?", metavar="DIR", help="fetch: where the skill's files are written")
    p.add_argument("--json", action="store_true", help="print the skill entries (list) or the entry and SKILL.md "
                   "(show) as JSON")
    p.set_defaults(func=lambda a: run(_skills(a)))
