"""Hostile inputs made in the test: compression bombs, a PDF that is slow to read, a page of tables.

The compression bombs are valid streams of zeros, built without ever holding the zeros: zlib
compresses 1 MiB of zeros once, then after a full flush (which resets its state) the same MiB
compresses to the same bytes every time, so the stream is that block repeated. The trailer's
CRC-32 is computed the same way, as a power of the linear map one block applies to the CRC
register, so a reader that inflates the whole thing finds a correct file.
"""

from __future__ import annotations

import gzip
import io
import struct
import zlib

MiB = 1 << 20
GiB = 1 << 30
_MASK = 0xFFFFFFFF
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "zlib": zlib.MAX_WBITS, "raw": -zlib.MAX_WBITS}


def zeros(size: int, wrapper: str = "gzip") -> bytes:
    """A compressed stream of `size` zero bytes (a whole number of MiB, at least 2): `wrapper`
    "gzip" (Content-Encoding gzip), "zlib" or "raw" (the two forms servers send as deflate)."""
    blocks = size // MiB
    assert blocks * MiB == size and blocks >= 2
    compressor = zlib.compressobj(9, zlib.DEFLATED, _WBITS[wrapper])
    zero = bytes(MiB)
    head = compressor.compress(zero) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(zero) + compressor.flush(zlib.Z_FULL_FLUSH)
    end = compressor.flush()  # the last (empty) block, then a trailer that counts 2 MiB only
    if wrapper == "gzip":
        end = end[:-8] + struct.pack("<II", _crc32_of_zeros(blocks, zero), size & _MASK)
    elif wrapper == "zlib":
        end = end[:-4] + struct.pack(">I", ((size % 65521) << 16) | 1)  # Adler-32 of zeros: a = 1, b = size
    return head + block * (blocks - 1) + end


def gzipped(data: bytes) -> bytes:
    """`data` compressed once more (a second Content-Encoding layer)."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def _apply(matrix: list[int], vector: int) -> int:
    result, bit = 0, 0
    while vector:
        if vector & 1:
            result ^= matrix[bit]
        vector >>= 1
        bit += 1
    return result


def _crc32_of_zeros(blocks: int, block: bytes) -> int:
    """zlib.crc32 of `blocks` copies of the zero `block`. Over zeros the CRC register moves by a
    linear map A (zlib.crc32(zeros, v) == A(v ^ ~0) ^ ~0); A for one block is read off zlib one
    bit at a time, then raised to the power `blocks` by squaring."""
    step = [zlib.crc32(block, (1 << bit) ^ _MASK) ^ _MASK for bit in range(32)]
    power = [1 << bit for bit in range(32)]
    while blocks:
        if blocks & 1:
            power = [_apply(step, column) for column in power]
        step = [_apply(step, column) for column in step]
        blocks >>= 1
    return _apply(power, _MASK) ^ _MASK


def slow_pdf(pages: int = 100, stream_bytes: int = 2_000_000, operator: bytes = b"() Tj ") -> bytes:
    """A PDF of a few KB whose `pages` all draw one FlateDecode content stream of `stream_bytes`
    of text-showing operators (the shape of the 20 KB PDF that took 17 minutes to read).

    pypdf's text extraction handles each operator in Python, about 10 s for one page of 2 MB
    here; "() Tj" shows an empty string, so the work yields no text to stop on."""
    content = b"BT /F1 12 Tf 72 720 Td " + operator * (stream_bytes // len(operator)) + b"ET"
    stream = zlib.compress(content, 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, written once the pages are numbered
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(stream), stream),
    ]
    kids = []
    for _ in range(pages):
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            b"/Contents 4 0 R >>"
        )
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), pages)
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.writelines(b"%010d 00000 n \n" % offset for offset in offsets)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def table_page(tables: int = 30_000) -> str:
    """An HTML article of `tables` small tables (two cells each): trafilatura needs about 25 s per
    MB of them here; 30,000 make 1.3 MB, well over a minute."""
    table = "<table><tr><td>a</td><td>b</td></tr></table>"
    head = "<!doctype html><html><head><title>Tables</title></head>"
    return f"{head}<body><article>{table * tables}</article></body></html>"
