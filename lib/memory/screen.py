"""Every write to memory is screened before it is stored, whatever its origin.

- Invisible and direction-control characters are removed (zero-width spaces and joiners, bidi
  overrides and isolates, the byte-order mark, soft hyphens, Unicode tag characters): they can
  hide words from the person reading a memory while the model still reads them.
- Secrets are refused with a short note: API keys and tokens of the common services, private
  keys, JWTs, passwords and PINs said as such, card numbers (13 to 19 digits passing the Luhn
  check) and IBAN-like account numbers (passing the mod-97 check). Memory is read back into
  prompts and shown on screens; a password manager is the place for these.
- Instructions aimed at the assistant ("from now on", "always reply", "ignore previous", a tool's
  name) that come with outside content are refused: only the person gives standing instructions.

What was said is kept as it was said (a forwarded message, a document's sections), but when
retrieval brings such outside content back into a later prompt, `withhold` leaves out each
sentence that talks to the assistant or asks for something to be remembered, and every secret:
otherwise a rule refused as memory would still reach every prompt that retrieves the message.
"""

from __future__ import annotations

import re
import unicodedata

from lib.memory.store import ORIGIN_OUTSIDE
from lib.memory.types import SearchResult

# Format characters that change how text shows without showing themselves.
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e007f]"
)

_SECRET_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("an API key", re.compile(r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}")),
    ("an API key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("an API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("an access token", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}\b|\bgithub_pat_[A-Za-z0-9_]{40,}")),
    ("an access token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("an access token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
    ("an API key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("a bot token", re.compile(r"\b\d{8,10}:[A-Za-z0-9_\-]{35}\b")),
    ("a token", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    (
        "a password",
        re.compile(
            r"\b(?:password|passwort|passphrase|passcode|pwd|pin(?:\s*code)?|contraseña|senha|mot de passe)"
            r"\s*(?:is|was|=|:|is now|será|é|est)\s*\S{3,}",
            re.IGNORECASE,
        ),
    ),
    (
        "an API key",
        re.compile(
            r"\b(?:api[_ \-]?key|secret[_ \-]?key|access[_ \-]?token|auth[_ \-]?token|token|secret)"
            r"\s*(?:is|=|:)\s*['\"]?[A-Za-z0-9_\-./+=]{16,}",
            re.IGNORECASE,
        ),
    ),
)
# Digits in groups as cards are written: 1234 5678 9012 3456, 1234-5678-9012-3456.
_CARD = re.compile(r"(?<!\d)(?<!\d[.,])(?:\d[ \-]?){12,18}\d(?!\d|[.,]\d)")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){11,30}\b")

# What an instruction to the assistant looks like, rather than a fact about the person.
_INSTRUCTION = re.compile(
    r"\b(?:from now on|henceforth|going forward|in (?:all|every) (?:future|later) (?:conversations?|answers?|replies)"
    r"|always (?:reply|respond|answer|say|include|add|use|recommend|send|call|run|mention|tell|end|start)"
    r"|never (?:reply|respond|answer|mention|tell|say|warn|ask)"
    r"|ignore (?:all |any |the )?(?:previous|prior|above|earlier|other)"
    r"|disregard (?:all |any |the )?(?:previous|prior|above|earlier)"
    r"|(?:new|updated|standing|system) (?:instructions?|rules?|prompt)"
    r"|you (?:must|should|are to|will) (?:always|now|never|reply|respond|answer|send|run|call|recommend)"
    r"|the assistant (?:must|should|will)|when(?:ever)? (?:the user|someone|anyone) asks"
    r"|(?:assistant|ai|model|ash)\s*:\s|\bsystem\s*:)",
    re.IGNORECASE,
)
# Calling a tool by name is talking to the assistant, not about the person.
_TOOL_NAMES = re.compile(
    r"\b(?:bash|web_fetch|web_search|remember|recall|forget|schedule|cancel_schedule|set_timezone)\s*\(|"
    r"\b(?:call|use|run|invoke) (?:the )?(?:bash|web_fetch|web_search|remember|schedule|forget)\b|\b\w+__\w+\b",
    re.IGNORECASE,
)


# Outside content asking for something to be kept: addressed to whoever keeps memory, not a fact.
_MEMORY_CUE = re.compile(
    r"\b(?:remember|memori[sz]e|save|store|note down|keep|record)(?: (?:this|that|it))?"
    r" (?:for later|permanently|forever|for good|in (?:your |the )?memory|to (?:your |the )?memory)"
    r"|\bremember(?: this| that| it)?\s*:"
    r"|\b(?:save|store|add|write|put)(?: it| this| that)? (?:to|in|into) (?:your |the )?memory"
    r"|\bfor (?:your|the assistant'?s?|the ai'?s?) (?:memory|records|notes)\b"
    r"|\b(?:preference|profile|memory) update\b|\bnote to (?:the )?(?:assistant|ai|bot|model|ash)\b"
    r"|\bto the (?:assistant|ai|bot|model)\s*:",
    re.IGNORECASE,
)
# Sentence ends and line breaks, kept by re.split so the text is put back together as it was.
_SENTENCE_END = re.compile(r"((?<=[.!?])(?<!\b(?:Dr|Mr|Ms|St)\.)(?<!\bMrs\.)\s+|\n)")
_PARAGRAPH_END = re.compile(r"(\n\s*\n)")
WITHHELD = "[left out: {what}, in outside content]"


class Refused(ValueError):
    """A write screening refused; the message is the short note the person is given."""


def clean(text: str) -> str:
    """`text` without invisible and direction-control characters, in NFC."""
    return unicodedata.normalize("NFC", _INVISIBLE.sub("", text))


def _luhn(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _iban_ok(candidate: str) -> bool:
    text = candidate.replace(" ", "")
    if not 15 <= len(text) <= 34:
        return False
    moved = text[4:] + text[:4]
    try:
        number = int("".join(str(int(c, 36)) for c in moved))
    except ValueError:
        return False
    return number % 97 == 1


def secret_in(text: str) -> str | None:
    """What kind of secret `text` holds ("an API key", "a card number", ...), or None."""
    for kind, pattern in _SECRET_PATTERNS:
        if pattern.search(text):
            return kind
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group(0))
        if 13 <= len(digits) <= 19 and len(set(digits)) > 1 and _luhn(digits):
            return "a card number"
    for match in _IBAN.finditer(text.upper()):
        if _iban_ok(match.group(0)):
            return "a bank account number"
    return None


def is_instruction(text: str) -> bool:
    """Whether `text` reads as an instruction to the assistant rather than a fact."""
    return bool(_INSTRUCTION.search(text) or _TOOL_NAMES.search(text))


def secret_note(kind: str) -> str:
    """The note a refused secret gets."""
    return (
        f"Not saved: that looks like {kind}, and I don't keep secrets in memory (they would be shown "
        "in prompts and on screens). A password manager is the place for it."
    )


INSTRUCTION_NOTE = (
    "Not saved: it reads as an instruction to me, and it came with outside content (a page, a file, a "
    "forward or someone else's words). Only you can give me standing instructions: say it in your own words."
)


def vet(text: str, *, outside: bool) -> str:
    """The text to store: cleaned; raises Refused for a secret, or for an instruction that came with
    outside content."""
    cleaned = clean(text)
    kind = secret_in(cleaned)
    if kind is not None:
        raise Refused(secret_note(kind))
    if outside and is_instruction(cleaned):
        raise Refused(INSTRUCTION_NOTE)
    return cleaned


def withhold(text: str) -> str:
    """Outside content as a later prompt may carry it: invisible characters removed, each secret
    replaced by a marker, and from the first sentence that reads as an instruction to the assistant
    or a request to remember something, the rest of its paragraph (what such a sentence introduces;
    the next paragraph too when it ends in a colon) replaced by another."""
    kept: list[str] = []
    carry = False  # the paragraph before ended withheld, on a colon: this one is what it introduced
    for paragraph in _PARAGRAPH_END.split(clean(text)):
        if _PARAGRAPH_END.fullmatch(paragraph):
            kept.append(paragraph)
            continue
        withholding, last = carry, ""
        if carry:
            kept.append(WITHHELD.format(what="an instruction to the assistant"))
        for piece in _SENTENCE_END.split(paragraph):
            if not piece or piece.isspace():
                if not withholding:
                    kept.append(piece)
            elif withholding or is_instruction(piece) or _MEMORY_CUE.search(piece):
                if not withholding:
                    kept.append(WITHHELD.format(what="an instruction to the assistant"))
                withholding, last = True, piece
            elif (kind := secret_in(piece)) is not None:
                kept.append(WITHHELD.format(what=kind))
            else:
                kept.append(piece)
        carry = withholding and last.rstrip().endswith(":")
    return "".join(kept)


def held_outside(item: SearchResult, speaker: str | None) -> bool:
    """Whether a retrieved item holds someone else's words: a forward, a quote or a file sent with
    a message, a document's section, or (in a group, `speaker` being the asker's name there)
    another member's message. The same rule as the outside content a turn starts with
    (lib/agent/turn.py)."""
    if item.metadata.get(ORIGIN_OUTSIDE) or item.metadata.get("untrusted"):
        return True
    if item.metadata.get("source") == "document":
        return True
    return item.source_type == "message" and item.metadata.get("speaker") not in (None, speaker)


def as_retrieved(item: SearchResult, speaker: str | None) -> str:
    """A retrieved item's text as a prompt or `recall` shows it: outside content withheld where it
    tries to plant a rule or carries a secret; the person's own words as they were."""
    return withhold(item.content) if held_outside(item, speaker) else item.content
