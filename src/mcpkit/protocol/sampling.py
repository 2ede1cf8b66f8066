"""The tool_use / tool_result pairing of sampling messages (SA-05).

In a ``sampling/createMessage`` request with tools (2025-11-25+), the messages replay a tool
loop, and the specification constrains them (client/sampling, "Message content constraints"):

* a user message holding ``tool_result`` blocks holds **only** tool_result blocks;
* every assistant message with ``tool_use`` blocks is followed, before any other message, by a
  user message whose tool_result blocks answer each of them (``toolUseId`` equal to the
  ``id``), and every tool_result answers a tool_use of the assistant message just before it.

:func:`pairing_problem` says what is wrong, in one sentence naming the messages by index, or
None. The server checks the messages a handler passes to ``Context.sample`` before anything is
sent (server/context.py); mcpkit's client checks a request it is asked to answer
(client/client.py). Only the pairing is checked here: the shape of each block is the schema's.
"""

from __future__ import annotations

from typing import Any

__all__ = ["pairing_problem"]


#: what the JSON encoder writes as an array: a tuple is sent as a list, so it is checked as one
_ARRAYS = (list, tuple)


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, _ARRAYS):
        return list(content)
    return [content]


def _kind(block: Any) -> Any:
    return block.get("type") if isinstance(block, dict) else None


def _ids(values: list[Any]) -> str:
    return ", ".join(repr(v) for v in values)


def pairing_problem(messages: Any) -> str | None:
    """What breaks SA-05 in ``messages`` (a list of SamplingMessage dicts), or None."""
    if not isinstance(messages, _ARRAYS):
        return None
    pending: list[Any] = []  # the tool_use ids of the assistant message just before
    asked_at = -1
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            continue  # not a message: the schema's concern, not the pairing's
        role = message.get("role")
        blocks = _blocks(message.get("content"))
        uses = [b for b in blocks if _kind(b) == "tool_use"]
        results = [b for b in blocks if _kind(b) == "tool_result"]
        if pending and not results:
            return (f"messages[{asked_at}] asks for tool use {_ids(pending)}, but messages[{i}] follows it without "
                    "the tool_result blocks that answer it; reply to every tool_use before any other message.")
        if results:
            if role != "user":
                return (f"messages[{i}] holds tool_result blocks but its role is {role!r}; tool results go in a "
                        "user message.")
            if len(results) != len(blocks):
                return (f"messages[{i}] mixes tool_result blocks with other content; a user message with tool "
                        "results holds only tool_result blocks.")
            answered = [b.get("toolUseId") for b in results]
            unknown = [a for a in answered if a not in pending]
            if unknown:
                where = (f"any tool_use of messages[{asked_at}]" if pending
                         else "a tool_use of an assistant message just before it")
                return f"messages[{i}] has a tool_result for toolUseId {_ids(unknown)}, which does not answer {where}."
            repeated = [a for n, a in enumerate(answered) if a in answered[:n]]
            if repeated:
                return f"messages[{i}] answers tool use {_ids(repeated)} more than once."
            missing = [p for p in pending if p not in answered]
            if missing:
                return (f"messages[{i}] answers messages[{asked_at}] but not its tool use {_ids(missing)}; "
                        "every tool_use needs its tool_result.")
            pending = []
        if uses:
            if role != "assistant":
                return (f"messages[{i}] holds tool_use blocks but its role is {role!r}; only assistant messages "
                        "use tools.")
            ids = [b.get("id") for b in uses]
            repeated = [a for n, a in enumerate(ids) if a in ids[:n]]
            if repeated:
                return f"messages[{i}] uses the tool use id {_ids(repeated)} more than once."
            pending, asked_at = ids, i
    if pending:
        return (f"messages[{asked_at}] asks for tool use {_ids(pending)}, but no user message with the "
                "matching tool_result blocks follows it.")
    return None
