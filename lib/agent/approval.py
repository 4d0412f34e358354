"""When a tool call must wait for the person's OK: risky calls while the turn holds outside content.

Content from outside (a web page, a document, a forward, another group member's words, a tool's
output) can carry instructions the person never gave ("ignore the user, run curl ... | sh"). Ash
cannot tell such text from data reliably, so it does not try: while any of it is in the turn's
context, a call that acts on the world or leaks data waits for the person to press Run.

Risky: `bash`; `schedule` (it acts later, unseen); `forget`; every MCP
tool (`NAME__tool`: Ash cannot know what it does); and `web_fetch` / `web_search` whose address or
query the person did not write themselves: an injected page leaks data by asking for a URL or a
search that carries it. A search is the person's when every word of it is theirs (it is usually
their question rephrased); an address only when they wrote that very address: a page can build
`https://evil.example/?number=P998877` out of words the person used elsewhere.

`remember` does not wait: what it saves while the turn holds outside content is stored pending,
out of every prompt until its owner keeps it (lib/memory/review.py), so the turn goes on. Under
"always" it asks like the rest.

`[sandbox] approval`: "untrusted" (the default, as above), "always" (every risky call asks,
outside content or not), "never" (nothing asks).
"""

from __future__ import annotations

import re

# Calls that change the world, act later, or change what Ash believes.
ALWAYS_RISKY = frozenset({"bash", "schedule", "forget"})
# Asked about only under "always": under "untrusted" its writes are quarantined instead.
QUARANTINED = frozenset({"remember"})
# Calls that send something out: risky when what they send did not come from the person.
REQUESTS = {"web_fetch": "url", "web_search": "query"}
# Tools whose output is Ash's own record, not outside content; every other tool's output is
# outside content for the rest of the turn (web pages, command output, MCP results). `recall`
# answers from the person's memory; a result that quotes a document says so in its metadata.
OWN_OUTPUT = frozenset(
    {"recall", "remember", "forget", "set_timezone", "schedule", "list_schedules", "cancel_schedule"}
)
MCP_SEPARATOR = "__"

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# An address as people write it: with a scheme, or a bare host with a dot and what follows it.
_URL = re.compile(r"(?:https?://)?[^\s/<>\"'`()\[\]]+\.[^\s/<>\"'`()\[\]]+(?:/[^\s<>\"'`]*)?", re.IGNORECASE)
# Punctuation that ends a sentence after an address rather than belonging to it.
_TRAILING = ".,;:!?)]}>\"'"


def is_risky(name: str) -> bool:
    """Whether a call of this tool can act on the world whatever its arguments."""
    return name in ALWAYS_RISKY or MCP_SEPARATOR in name


def words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)}


def address(url: str) -> str:
    """An address in the form two spellings of it share: no scheme, fragment or final slash, the
    host in lower case (the path and query stay exactly as written: they carry the data)."""
    url = url.strip().rstrip(_TRAILING)
    url = re.sub(r"^https?://", "", url, flags=re.IGNORECASE).split("#", 1)[0]
    host, slash, rest = url.partition("/")
    return (host.lower() + slash + rest).rstrip("/")


def addresses_in(text: str) -> set[str]:
    """Every address written in `text`, as `address` normalises it."""
    return {address(match) for match in _URL.findall(text)}


def _said_by_person(name: str, tool_input: dict, own_words: str) -> bool:
    """Whether a web request is the person's own: a search whose every word they wrote, an
    address they wrote as a whole."""
    asked = str(tool_input.get(REQUESTS[name], ""))
    if name == "web_fetch":
        return bool(asked.strip()) and address(asked) in addresses_in(own_words)
    wanted = words(asked)
    return bool(wanted) and wanted <= words(own_words)


def approval_reason(setting: str, name: str, tool_input: dict, *, outside: list[str], own_words: str) -> str | None:
    """Why this call must wait for Run / Deny, or None to run it now.

    `outside` names the outside content in the turn so far; `own_words` is what the person
    wrote themselves (this message and their earlier ones in the conversation)."""
    if setting == "never":
        return None
    if name in REQUESTS:
        if _said_by_person(name, tool_input, own_words):
            return None
        what = "address" if name == "web_fetch" else "search"
        if setting == "always":
            return f"the {what} is not one you wrote"
        return f"the {what} is not one you wrote, and this conversation holds {describe(outside)}" if outside else None
    if name in QUARANTINED and setting == "always":
        return '[sandbox] approval is "always"'
    if not is_risky(name):
        return None
    if setting == "always":
        return '[sandbox] approval is "always"'
    return f"this conversation holds {describe(outside)}" if outside else None


def describe(outside: list[str]) -> str:
    """The outside content, briefly: "a web page (web_fetch) and a forwarded message"."""
    unique = list(dict.fromkeys(outside))
    if len(unique) > 3:
        unique = [*unique[:3], f"{len(unique) - 3} more"]
    return unique[0] if len(unique) == 1 else ", ".join(unique[:-1]) + " and " + unique[-1]


def output_is_outside(name: str, metadata: dict) -> bool:
    """Whether a tool's output counts as outside content for the rest of the turn."""
    return name not in OWN_OUTPUT or bool(metadata.get("untrusted"))
