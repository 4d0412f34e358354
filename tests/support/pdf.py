"""A tiny PDF writer for tests: real files pypdf reads, made in the test instead of stored as blobs.

Each page gets its lines in Helvetica (one of the 14 standard fonts every reader knows, so no
font is embedded). The file is assembled by hand, object by object, with a correct cross-reference
table: the structure PDF 1.4 (ISO 32000-1, section 7.5) asks for, nothing more.
"""

from __future__ import annotations

import io


def _escaped(line: str) -> str:
    # A PDF string literal: backslash and parentheses are escaped; Helvetica's encoding covers Latin-1.
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _page_stream(lines: list[str]) -> bytes:
    ops = ["BT", "/F1 12 Tf", "14 TL", "72 760 Td"]
    for line in lines:
        ops += [f"({_escaped(line)}) Tj", "T*"]
    ops.append("ET")
    return "\n".join(ops).encode("latin-1")


def pdf_with_pages(pages: list[list[str]]) -> bytes:
    """A PDF with one page per item of `pages`, each showing its lines of text."""
    objects: list[bytes] = []  # object n is objects[n - 1]
    catalog, tree, font = 1, 2, 3
    objects += [b"", b"", b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"]
    kids = []
    for lines in pages:
        stream = _page_stream(lines)
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        content = len(objects)
        objects.append(
            b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 %d 0 R >> >> "
            b"/Contents %d 0 R >>" % (tree, font, content)
        )
        kids.append(len(objects))
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % tree
    refs = " ".join(f"{kid} 0 R" for kid in kids).encode()
    objects[tree - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (refs, len(kids))
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, catalog, xref))
    return out.getvalue()


def encrypted(pdf: bytes, password: str) -> bytes:
    """The same PDF locked with a user password (pypdf's own encryption, AES-128)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def damaged(pdf: bytes) -> bytes:
    """The PDF's header followed by bytes that are no PDF: a file cut and overwritten in transit."""
    return pdf[:9] + b"\x00\x17garbage that was never a PDF object" * 20
