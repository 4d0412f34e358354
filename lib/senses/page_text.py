"""The readable text of a fetched page: HTML's main text (trafilatura), plain text, or a PDF's.

HTML and PDF are read in a parser process (lib/senses/parsing.py) that is killed at the fetch's
deadline; plain text is only decoded.
"""

from __future__ import annotations

import asyncio
import codecs
from dataclasses import dataclass
from typing import Literal

from lib.senses.addresses import PageRefused
from lib.senses.parsing import parse_html, parse_pdf
from lib.senses.pdf import UnreadableDocument

type Kind = Literal["html", "text", "pdf"]

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
# Structured text the model reads well as it is.
TEXT_TYPES = frozenset({"application/json", "application/ld+json", "application/xml", "application/x-yaml"})
PDF_TYPES = frozenset({"application/pdf", "application/x-pdf"})
# Pages of a PDF read: 50 pages hold far more than the [web_fetch] max_chars the model gets.
PDF_MAX_PAGES = 50
# How far into the body to look for a sign of HTML when the server names no type.
SNIFF_BYTES = 1024


@dataclass(frozen=True)
class PageText:
    title: str
    text: str  # may stop a character past the fetch's max_chars: the reader stops there
    chars: int  # characters in the whole text, as far as it was read
    more: bool = False  # reading stopped before the end: the page holds more than `chars`


def media_type(content_type: str | None) -> str:
    """The bare media type of a Content-Type header, lower-case ("" when there is none)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def kind_of(content_type: str | None) -> Kind | None:
    """How to read a response of this Content-Type; None when it names no type (sniff the body).

    Raises PageRefused for anything that is not a page, before its body is downloaded."""
    media = media_type(content_type)
    if not media:
        return None
    if media in HTML_TYPES:
        return "html"
    if media in PDF_TYPES:
        return "pdf"
    if media.startswith("text/") or media in TEXT_TYPES or media.endswith("+json"):
        return "text"
    raise PageRefused(
        f"the address serves {media}, which web_fetch does not read (it reads HTML pages, "
        "plain text, Markdown, JSON and PDF)"
    )


def sniff(data: bytes) -> Kind:
    """The kind of a body whose server named no type: a PDF, HTML, or else plain text."""
    head = data[:SNIFF_BYTES].lstrip().lower()
    if head.startswith(b"%pdf-"):
        return "pdf"
    if head.startswith((b"<!doctype html", b"<html")) or b"<body" in head:
        return "html"
    if b"\x00" in head:
        raise PageRefused("the address serves binary data without a content type; web_fetch reads pages only")
    return "text"


def charset_of(content_type: str | None) -> str | None:
    """The charset a Content-Type header declares, if Python knows it."""
    for param in (content_type or "").split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            name = value.strip().strip("\"'")
            try:
                return codecs.lookup(name).name
            except LookupError:
                return None
    return None


def decode(data: bytes, charset: str | None) -> str:
    """Bytes as text in the declared charset, else UTF-8; undecodable bytes become U+FFFD."""
    return data.decode(charset or "utf-8", errors="replace")


def plain_text(data: bytes, *, charset: str | None) -> PageText:
    """Plain text, Markdown or JSON as it is; the fetcher names it after its URL."""
    text = decode(data, charset).strip()
    return PageText("", text, len(text))


async def html_text(data: bytes, *, url: str, charset: str | None, max_chars: int, timeout: float) -> PageText:
    """The title and main text of an HTML page, as Markdown (lib/senses/article.py)."""
    try:
        article = await parse_html(data, url=url, charset=charset, max_chars=max_chars, timeout=timeout)
    except UnreadableDocument as exc:
        raise PageRefused(str(exc)) from None
    return PageText(article.title.strip(), article.text, article.chars)


async def pdf_text(data: bytes, *, max_chars: int, timeout: float) -> PageText:
    """The text of a PDF's first pages; a PDF without extractable text is refused."""
    try:
        pdf = await parse_pdf(data, max_pages=PDF_MAX_PAGES, max_chars=max_chars + 1, timeout=timeout)
    except UnreadableDocument as exc:
        raise PageRefused(f"the PDF cannot be read: {exc}") from None
    if not pdf.text.strip():
        raise PageRefused("the PDF has no text layer (a scan without text cannot be read)")
    note = ""
    if pdf.pages_read < pdf.pages:
        note = f"\n\n[Only the first {pdf.pages_read} of {pdf.pages} pages were read.]"
    return PageText("", pdf.text + note, len(pdf.text), more=pdf.cut)


async def page_text(
    kind: Kind, data: bytes, *, url: str, charset: str | None, max_chars: int, timeout: float
) -> PageText:
    """Title and text of a body of this kind, read within `timeout` seconds.

    HTML and PDF may raise lib.senses.parsing's ParseTimeout, ParseTooLarge or ParseFailed."""
    if kind == "html":
        return await html_text(data, url=url, charset=charset, max_chars=max_chars, timeout=timeout)
    if kind == "pdf":
        return await pdf_text(data, max_chars=max_chars, timeout=timeout)
    # Decoding 3 MB takes a few milliseconds: not on the event loop.
    return await asyncio.to_thread(plain_text, data, charset=charset)
