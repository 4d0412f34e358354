"""A page's Content-Encoding undone by Ash within bounds: gzip and deflate, stacked at most twice.

httpx inflates each network chunk whole before the caller can count a byte: one 64 KiB chunk of
a gzip bomb is 64 MiB, and a 3,477-byte page sent as `Content-Encoding: gzip, gzip` became 4 GiB
in one call, with the event loop blocked for 20 s. So `web_fetch` reads the raw bytes and
decodes them here: every zlib call is given `max_length`, so no step makes more than STEP
bytes; the output of every layer, not only the last, counts against the page's limit; and the
caller gets one piece per step, to yield to the event loop between them.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

# What web_fetch asks servers for (Accept-Encoding): exactly what this module decodes. httpx
# would also offer br and zstd whenever brotli or zstandard happen to be installed.
ACCEPT_ENCODING = "gzip, deflate"
CODINGS = frozenset({"gzip", "x-gzip", "deflate"})
# Layers undone: servers apply one; two is already odd ("gzip, gzip" is how the bomb came).
MAX_LAYERS = 2
# Bytes of output one zlib call may make (and about the work it does) before the caller yields.
STEP = 64 * 1024
GZIP_MAGIC = b"\x1f\x8b"

__all__ = ["ACCEPT_ENCODING", "Decoder", "DecodingFailed", "Overflow", "UnsupportedEncoding", "layers"]


class UnsupportedEncoding(Exception):
    """A Content-Encoding this module does not undo; the message says which."""


class DecodingFailed(Exception):
    """A body whose encoding is damaged (it is not the gzip or deflate data it claims to be)."""


class Overflow(Exception):
    """A layer's output went past the limit: the page is larger than will be read."""


def layers(values: Iterable[str]) -> list[str]:
    """The codings of Content-Encoding header values, in the order to undo them (last applied first).

    Raises UnsupportedEncoding for one not in CODINGS (br, zstd, compress, a name nobody knows)
    and for more than MAX_LAYERS of them."""
    codings = [c.strip().lower() for value in values for c in value.split(",")]
    codings = [c for c in codings if c and c != "identity"]
    for coding in codings:
        if coding not in CODINGS:
            raise UnsupportedEncoding(
                f"the server sent the page compressed as {coding!r}, which web_fetch does not decode "
                "(it asks for gzip or deflate)"
            )
    if len(codings) > MAX_LAYERS:
        raise UnsupportedEncoding(
            f"the page is compressed {len(codings)} times over ({', '.join(codings)}); "
            f"web_fetch undoes at most {MAX_LAYERS} layers"
        )
    return codings[::-1]


class _Layer:
    """One coding undone in steps of at most STEP bytes of output."""

    def __init__(self, coding: str):
        self.coding = "gzip" if coding == "x-gzip" else coding
        self._zlib: zlib._Decompress | None = None
        self._held = b""  # bytes kept until there are enough to start a stream
        self._members = 0
        self._ended = False  # the stream ended; what follows is ignored, as browsers do

    def steps(self, data: bytes) -> Iterator[bytes]:
        """The output for `data`, at most STEP bytes a piece; b"" when a step made none."""
        pending = self._held + data
        self._held = b""
        while not self._ended:
            if self._zlib is None and not self._start(pending):
                return
            try:
                out = self._zlib.decompress(pending, STEP)
            except zlib.error as exc:
                raise DecodingFailed(f"its {self.coding} data is damaged ({exc})") from None
            pending = self._zlib.unconsumed_tail
            if self._zlib.eof:
                pending = self._zlib.unused_data + pending
                self._zlib = None
            yield out
            # A full step may leave output inside zlib even when all input is consumed.
            if not pending and (self._zlib is None or len(out) < STEP):
                return

    def _start(self, pending: bytes) -> bool:
        """Start the next stream when `pending` begins one; False to wait for more bytes."""
        if len(pending) < 2:
            self._held = pending
            return False
        if self.coding == "gzip":
            if self._members and not pending.startswith(GZIP_MAGIC):
                self._ended = True  # trailing bytes after the last member
                return False
            wbits = 16 + zlib.MAX_WBITS  # gzip; a file may hold several members, one after another
        elif self._members:
            self._ended = True  # deflate is one stream
            return False
        else:
            # "deflate" is meant to be zlib-wrapped (RFC 9110), but servers also send it raw.
            zlib_header = (pending[0] & 0x0F) == 8 and int.from_bytes(pending[:2]) % 31 == 0
            wbits = zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS
        self._zlib = zlib.decompressobj(wbits)
        self._members += 1
        return True


class Decoder:
    """Undoes `codings` (as `layers` returns them) over a body arriving in raw chunks.

    `feed` yields the decoded body piece by piece, one piece (perhaps b"") per bounded step; the
    caller stops taking pieces at its limit. A layer under the last one that makes more than
    `limit` bytes raises Overflow, so no layer grows past the limit however they are stacked
    (a page compressed twice holds its compressed form, which is no larger than the page)."""

    def __init__(self, codings: list[str], limit: int):
        self._layers = [_Layer(coding) for coding in codings]
        self._made = [0] * len(self._layers)
        self.limit = limit

    def feed(self, raw: bytes) -> Iterator[bytes]:
        """The decoded pieces for the next raw chunk."""
        return self._through(raw, 0)

    def _through(self, data: bytes, depth: int) -> Iterator[bytes]:
        if depth == len(self._layers):
            yield data
            return
        for out in self._layers[depth].steps(data):
            self._made[depth] += len(out)
            if self._made[depth] > self.limit and depth < len(self._layers) - 1:
                raise Overflow
            if out:
                yield from self._through(out, depth + 1)
            else:
                yield b""
