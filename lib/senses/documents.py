"""A document someone sent, read by type, and framed as data for the model.

- PDF: its text layer, page by page (lib/senses/pdf.py), read in a parser process that is killed
  at the read deadline (lib/senses/parsing.py);
- text of any kind (plain, Markdown, CSV, JSON, source code): UTF-8, else the encoding its
  bytes point to (charset_normalizer, which trafilatura already brings in);
- JPEG, PNG, WebP and GIF images, known by their first bytes rather than the name the sender
  gave them, are handed on for the model's vision (the four kinds both model APIs accept).

Anything else (a Word file, an archive, a program) is refused with UnreadableDocument, whose
message says why in words for the person. This part knows no Telegram, agent or memory.
"""

from __future__ import annotations

import asyncio
import html
import re
from dataclasses import dataclass

from lib.senses.parsing import ParseFailed, ParseTimeout, ParseTooLarge, parse_pdf
from lib.senses.pdf import PdfText, UnreadableDocument

__all__ = ["DocumentImage", "DocumentText", "Section", "UnreadableDocument", "framed", "read_document"]

BINARY = (
    "it is not a kind of file I can read. I read PDF, text, Markdown, CSV, JSON and source files, "
    "and JPEG, PNG, WebP or GIF images; save it in one of those, or paste the text into the chat"
)
OTHER_IMAGE = "I can see JPEG, PNG, WebP and GIF images; send this one as a photo instead (Telegram converts it)"
NO_TEXT = (
    "it has no text I can read: it looks like a scan (pictures of pages). Send the pages as photos, "
    "or a PDF with a text layer"
)
EMPTY = "it is empty"
SLOW = (
    "the PDF took too long to read (more than {seconds:g} s); it may be built to be slow to read. "
    "Send only the pages you need, or paste the text into the chat"
)
BUSY = "other files were being read and none finished within {seconds:g} s; please send it again in a minute"
TOO_COMPLEX = (
    "reading it needs more memory than I allow ({limit}); it may be built to be hard to read. "
    "Send only the pages you need, or paste the text into the chat"
)
READER_FAILED = "it made my reader fail; it may be damaged"
# A text file has tabs and line breaks, not other control characters; more than this share of
# them means bytes that only decode by accident (a Latin-1 reading of a program, say).
CONTROL_SHARE = 0.01
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
# (magic bytes, media type); WebP is RIFF....WEBP and is checked apart.
_IMAGE_MAGIC = (
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


@dataclass(frozen=True)
class Section:
    """A part of a document's text: one page of a PDF ("page 3"), or a whole text file (label None)."""

    label: str | None
    text: str


@dataclass(frozen=True)
class DocumentText:
    """A document read as text."""

    name: str
    sections: tuple[Section, ...]
    pages: int | None = None  # a PDF's page count
    pages_read: int | None = None  # pages read (documents.max_pages)
    cut: bool = False  # reading stopped at its character cap: the file holds more text

    @property
    def text(self) -> str:
        """The whole text, sections separated by a blank line."""
        return "\n\n".join(section.text for section in self.sections)


@dataclass(frozen=True)
class DocumentImage:
    """An image sent as a file: for the model's vision, not for reading."""

    name: str
    data: bytes
    media_type: str


async def read_document(
    data: bytes, *, name: str, mime_type: str | None, max_pages: int, max_chars: int, timeout: float
) -> DocumentText | DocumentImage:
    """The document's text (at most `max_chars` of it) or image, read within `timeout` seconds.
    Raises UnreadableDocument (encrypted, damaged, a scan with no text layer, empty, an image kind
    the models cannot see, not text at all, or too slow or too large to read)."""
    mime = (mime_type or "").lower()
    if _is_pdf(data, name, mime):
        pdf = await _read_pdf(data, max_pages=max_pages, max_chars=max_chars, timeout=timeout)
        if not pdf.text.strip():
            raise UnreadableDocument(NO_TEXT)
        sections = tuple(Section(f"page {number}", text) for number, text in pdf.by_page)
        return DocumentText(name, sections, pdf.pages, pdf.pages_read, cut=pdf.cut)
    media_type = image_type(data)
    if media_type is not None:
        return DocumentImage(name, data, media_type)
    if mime.startswith("image/") and mime != "image/svg+xml":  # SVG is XML: text, read below
        raise UnreadableDocument(OTHER_IMAGE)
    # Decoding (and, for a file that is not UTF-8, guessing its encoding) takes a moment on 10 MB.
    text = await asyncio.to_thread(decode_text, data)
    if not text.strip():
        raise UnreadableDocument(EMPTY)
    return DocumentText(name, (Section(None, text.strip()),))


async def _read_pdf(data: bytes, *, max_pages: int, max_chars: int, timeout: float) -> PdfText:
    try:
        return await parse_pdf(data, max_pages=max_pages, max_chars=max_chars, timeout=timeout)
    except ParseTimeout as exc:
        raise UnreadableDocument((SLOW if exc.started else BUSY).format(seconds=timeout)) from None
    except ParseTooLarge as exc:
        raise UnreadableDocument(TOO_COMPLEX.format(limit=exc)) from None
    except ParseFailed:
        raise UnreadableDocument(READER_FAILED) from None


def _is_pdf(data: bytes, name: str, mime: str) -> bool:
    # The header may follow a little junk (readers accept it within the first 1 KB).
    return b"%PDF-" in data[:1024] or mime == "application/pdf" or name.lower().endswith(".pdf")


def image_type(data: bytes) -> str | None:
    """The media type of a JPEG, PNG, GIF or WebP image by its first bytes, else None."""
    for magic, media_type in _IMAGE_MAGIC:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def decode_text(data: bytes) -> str:
    """Text from bytes: by a byte-order mark, else UTF-8, else the encoding charset_normalizer
    finds; line endings made \\n. Raises UnreadableDocument for bytes that are not text."""
    text = None
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            text = _decoded(data[len(bom) :], encoding)
            break
    else:
        if b"\x00" in data[:8192]:  # no text encoding but UTF-16/32 (BOM handled above) has NULs
            raise UnreadableDocument(BINARY)
        text = _decoded(data, "utf-8-sig")
        if text is None:
            text = _guessed(data)
    if text is None or len(_CONTROL.findall(text[:100_000])) > CONTROL_SHARE * min(len(text), 100_000):
        raise UnreadableDocument(BINARY)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _decoded(data: bytes, encoding: str) -> str | None:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        return None


def _guessed(data: bytes) -> str | None:
    from charset_normalizer import from_bytes  # loaded only for the rare file that is not UTF-8

    best = from_bytes(data).best()
    return None if best is None else str(best)


# Opening or closing tags of every frame the prompt treats as data, however spelled (any case,
# spaces, attributes): a document cannot close its own frame early or open another.
_FRAME_TAG = re.compile(r"<\s*/?\s*(?:document|tool_output|memory|notes|summary)\b[^>]*>", re.IGNORECASE)
_NAME_NOISE = re.compile(r"[\x00-\x1f\x7f]+")
NAME_LIMIT = 120


def clean_name(name: str | None) -> str:
    """A file name fit to show and to quote: no control characters, at most NAME_LIMIT characters."""
    name = " ".join(_NAME_NOISE.sub(" ", name or "").split())
    return name[:NAME_LIMIT] or "unnamed file"


def neutralised(text: str) -> str:
    """`text` with every frame tag inside it made inert (its `<` written as `&lt;`)."""
    return _FRAME_TAG.sub(lambda tag: "&lt;" + tag.group(0)[1:], text)


def framed(document: DocumentText, max_chars: int, *, kept_chars: int | None = None) -> str:
    """The document as the model reads it: `<document name=... pages=...>` around at most
    `max_chars` of its text, then a note of what was cut and where the rest is (memory keeps
    `kept_chars` of it, when given)."""
    text = document.text
    shown = text[:max_chars]
    pages = f' pages="{document.pages}"' if document.pages is not None else ""
    head = f'<document name="{html.escape(document.name)}"{pages}>'
    notes = []
    if document.pages is not None and document.pages_read is not None and document.pages_read < document.pages:
        notes.append(f"[…only the first {document.pages_read} of {document.pages} pages were read]")
    if len(shown) < len(text):
        kept = ""
        if kept_chars is not None and (kept_chars < len(text) or document.cut):
            kept = f"; the first {kept_chars:,} are kept in memory"
        total = f"more than {len(text):,}" if document.cut else f"{len(text):,}"
        notes.append(
            f"[…cut: the first {len(shown):,} of {total} characters are shown{kept}; "
            "ask about a part and I'll look it up]"
        )
    return "\n".join([head, neutralised(shown), "</document>", *notes])
