"""The text of a PDF (pypdf), page by page within a cap; encrypted or broken files get a clear reason.

Used for documents sent in chat and for PDFs that `web_fetch` downloads. pypdf is imported on
first use: most turns never see a PDF.
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


def read_pdf(data: bytes, *, max_pages: int) -> PdfText:
    """The text of the first `max_pages` pages, pages separated by a blank line.

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
    pages = []
    for number in range(min(total, max_pages)):
        try:
            text = reader.pages[number].extract_text() or ""
        except Exception as exc:  # pypdf raises many kinds on odd pages; one page is not the file
            log.warning("could not read page %d of a PDF: %s", number + 1, exc)
            continue
        if text.strip():
            pages.append((number + 1, text.strip()))
    return PdfText("\n\n".join(text for _, text in pages), total, min(total, max_pages), tuple(pages))
