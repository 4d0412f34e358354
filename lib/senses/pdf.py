"""The text of a PDF (pypdf), page by page within a cap; encrypted or broken files get a clear reason.

Used for documents sent in chat and for PDFs that `web_fetch` downloads, always in the parser
process (lib/senses/parsing.py): a PDF can be built to take pypdf minutes a page. pypdf is
imported on first use.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass

log = logging.getLogger("ash.senses")


class UnreadableDocument(Exception):
    """A file whose text cannot be read; the message says why, in words for the person."""


DAMAGED = "it is not a PDF I can read (the file looks damaged)"


@dataclass(frozen=True)
class PdfText:
    text: str
    pages: int  # pages in the file
    pages_read: int  # pages whose text is in `text` (at most the cap)
    # (page number from 1, its text) for each page with text: memory names the page a fact is on.
    by_page: tuple[tuple[int, str], ...] = ()
    cut: bool = False  # reading stopped at max_chars: the file holds more text than `text`


def read_pdf(data: bytes, *, max_pages: int, max_chars: int | None = None) -> PdfText:
    """The text of the first `max_pages` pages, pages separated by a blank line; with `max_chars`,
    reading stops once that many characters are read (the last page's text cut to fit).

    Raises UnreadableDocument for an encrypted file (Ash has no password to open it) and for one
    pypdf cannot parse. A page whose text cannot be extracted is left out, and logged."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            # An empty user password opens many "protected" PDFs (printing/copying limits only).
            try:
                opened = reader.decrypt("")
            except (PyPdfError, NotImplementedError) as exc:
                raise UnreadableDocument("it is encrypted with a method I cannot open") from exc
            if not opened:
                raise UnreadableDocument("it is protected by a password; send a copy without one")
        total = len(reader.pages)
    except UnreadableDocument:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
        raise UnreadableDocument(DAMAGED) from exc
    if total == 0:  # pypdf's lenient parser makes an empty document of a file with no page tree
        raise UnreadableDocument(DAMAGED)
    pages: list[tuple[int, str]] = []
    used = 0  # characters of the text so far, blank lines between pages included
    read = 0
    cut = False
    for number in range(min(total, max_pages)):
        if max_chars is not None and used >= max_chars:
            cut = True
            break
        read += 1
        try:
            text = (reader.pages[number].extract_text() or "").strip()
        except Exception as exc:  # pypdf raises many kinds on odd pages; one page is not the file
            log.warning("could not read page %d of a PDF: %s", number + 1, exc)
            continue
        if not text:
            continue
        gap = 2 if pages else 0
        if max_chars is not None and used + gap + len(text) > max_chars:
            text = text[: max(max_chars - used - gap, 0)]
            cut = True
        if text:
            pages.append((number + 1, text))
            used += gap + len(text)
        if cut:
            break
    return PdfText("\n\n".join(text for _, text in pages), total, read, tuple(pages), cut)
