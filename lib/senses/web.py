"""Reading a public web page safely: the fetch behind the `web_fetch` tool.

Each hop (the first URL and every redirect) is judged by the same rules (lib/senses/addresses.py):
the URL, then every address its name resolves to; the request then goes to a judged address,
with the name in the Host header and, over https, as the TLS server name, so the certificate is
still verified against the name and no second lookup can answer differently. Redirects are
followed here, not by httpx, so that each one is judged. The client reads no proxy settings from
the environment (trust_env=False): a proxy would do its own lookup, past the check.

The body is read raw and its Content-Encoding undone here, in bounded steps (lib/senses/inflate.py):
httpx would inflate each network chunk whole, and a decompression bomb took gigabytes that way.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx

from lib.config import WebFetchConfig
from lib.senses.addresses import (
    IPAddress,
    IPNetwork,
    PageRefused,
    Resolver,
    Target,
    judge,
    system_resolver,
    target,
)
from lib.senses.inflate import ACCEPT_ENCODING, Decoder, DecodingFailed, Overflow, UnsupportedEncoding, layers
from lib.senses.page_text import charset_of, kind_of, media_type, page_text, sniff
from lib.senses.parsing import ParseFailed, ParseTimeout, ParseTooLarge

log = logging.getLogger("ash.senses")

REDIRECTS = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "Mozilla/5.0 (compatible; Ash/0.1; personal assistant reading a page for its user)"
ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,application/pdf;q=0.9,application/json;q=0.8,*/*;q=0.1"
# Seconds to open one connection: an address that does not answer (IPv6 without a route) leaves
# time for the name's next address within the whole fetch's timeout.
CONNECT_TIMEOUT = 10.0

__all__ = ["PageRefused", "PageUnavailable", "WebFetcher", "WebPage"]


class PageUnavailable(Exception):
    """A page that could not be fetched (network, timeout, an HTTP error); the message says why."""


@dataclass(frozen=True)
class WebPage:
    url: str  # where the text came from, after redirects
    title: str
    text: str  # capped at [web_fetch] max_chars, with a note when cut
    content_type: str
    truncated: bool  # the body or the text was cut


@dataclass(frozen=True)
class _Body:
    url: str
    content_type: str | None
    data: bytes
    cut: bool  # more than max_bytes: only the beginning was read


class WebFetcher:
    """Fetches one public page at a time within the [web_fetch] limits.

    `resolver`, `trusted` and `tls` exist for tests only (production code never passes them):
    a resolver that answers without DNS, networks that stand in for a public site (a loopback
    server, allowed any port because it cannot listen on 80 without root), and an SSL context
    that trusts a test certificate authority."""

    def __init__(
        self,
        config: WebFetchConfig,
        *,
        resolver: Resolver | None = None,
        trusted: Iterable[IPNetwork] = (),
        tls: ssl.SSLContext | None = None,
    ):
        self.config = config
        self.resolver = resolver or system_resolver
        self.trusted = tuple(trusted)
        self.tls = tls

    async def fetch(self, url: str) -> WebPage:
        """The page at `url` as title, final URL and text; PageRefused or PageUnavailable otherwise.

        [web_fetch] timeout covers the whole fetch: the download and reading the text out of it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.timeout
        try:
            async with asyncio.timeout_at(deadline):
                body = await self._download(url)
        except TimeoutError:
            raise PageUnavailable(f"the page did not arrive within {self.config.timeout:g} s") from None
        kind = kind_of(body.content_type) or sniff(body.data)
        if kind == "pdf" and body.cut:
            raise PageRefused(f"the PDF is larger than {self.config.max_bytes:,} bytes, more than web_fetch reads")
        try:
            text = await page_text(
                kind,
                body.data,
                url=body.url,
                charset=charset_of(body.content_type),
                max_chars=self.config.max_chars,
                timeout=max(deadline - loop.time(), 0.0),
            )
        except ParseFailed as exc:
            raise PageUnavailable(self._unread(kind, exc)) from None
        title = text.title or _title_from_url(body.url)
        content, cut_chars = _cap(text.text, self.config.max_chars)
        notes = []
        if body.cut:
            notes.append(f"[The page is larger than {self.config.max_bytes:,} bytes; only its beginning was read.]")
        if cut_chars:
            total = f"more than {text.chars:,}" if text.more else f"{text.chars:,}"
            notes.append(f"[Cut: {len(content):,} of {total} characters shown.]")
        final = "\n\n".join([content, *notes])
        return WebPage(body.url, title, final, media_type(body.content_type) or kind, body.cut or cut_chars)

    def _unread(self, kind: str, failure: ParseFailed) -> str:
        """Why the text of a downloaded page could not be read, for the model to pass on."""
        what = "PDF" if kind == "pdf" else "page"
        if isinstance(failure, ParseTimeout):
            if not failure.started:
                return f"no reader was free within {self.config.timeout:g} s (other files were being read); try later"
            if kind == "pdf":
                return f"the PDF took too long to read (web_fetch has {self.config.timeout:g} s for a page)"
            return f"the page is too complex to read within the {self.config.timeout:g} s web_fetch has for a page"
        if isinstance(failure, ParseTooLarge):
            return f"the {what} is too large to read: reading it needs {failure}"
        return f"the {what} made the reader fail; it may be damaged"

    async def _download(self, url: str) -> _Body:
        """Follow the URL through at most max_redirects redirects, judging every hop."""
        timeout = httpx.Timeout(self.config.timeout, connect=min(CONNECT_TIMEOUT, self.config.timeout))
        async with httpx.AsyncClient(
            trust_env=False,
            follow_redirects=False,
            verify=self.tls if self.tls is not None else True,
            timeout=timeout,
            headers={"User-Agent": USER_AGENT, "Accept": ACCEPT, "Accept-Encoding": ACCEPT_ENCODING},
        ) as http:
            current: str | httpx.URL = url
            for redirects in range(self.config.max_redirects + 1):
                hop = target(current)
                addresses = await self._addresses(hop)
                http.cookies.clear()  # nothing one hop set travels to the next
                async with self._open(http, hop, addresses) as response:
                    if response.status_code in REDIRECTS:
                        location = response.headers.get("location", "").strip()
                        if not location:
                            raise PageUnavailable(f"{hop.url} redirects ({response.status_code}) without a Location")
                        current = hop.url.join(location)
                        continue
                    if not 200 <= response.status_code < 300:
                        where = f" (at {hop.url}, after {redirects} redirects)" if redirects else ""
                        status = f"{response.status_code} {response.reason_phrase}".rstrip()
                        raise PageUnavailable(f"the server answered {status}{where}")
                    content_type = response.headers.get("content-type")
                    kind_of(content_type)  # refuses an image or a video before downloading it
                    data, cut = await self._read(response)
                    return _Body(str(hop.url), content_type, data, cut)
            raise PageUnavailable(f"more than {self.config.max_redirects} redirects; the page was not reached")

    async def _addresses(self, hop: Target) -> list[IPAddress]:
        """The judged addresses of a hop: its literal address, or every address its name has."""
        if hop.literal is not None:
            return judge(hop, [hop.literal], trusted=self.trusted)
        try:
            resolved = await self.resolver(hop.host, hop.port)
        except OSError as exc:  # socket.gaierror: no such name, or no DNS
            raise PageUnavailable(f"the address of {hop.host} cannot be found ({exc})") from None
        return judge(hop, resolved, trusted=self.trusted)

    @asynccontextmanager
    async def _open(
        self, http: httpx.AsyncClient, hop: Target, addresses: list[IPAddress]
    ) -> AsyncIterator[httpx.Response]:
        """A streamed GET to the first judged address that accepts the connection."""
        headers = {"Host": _host_header(hop)}
        extensions = {"sni_hostname": hop.host} if hop.url.scheme == "https" and hop.literal is None else {}
        failure: httpx.HTTPError | None = None
        for ip in addresses:
            request = http.build_request(
                "GET", hop.url.copy_with(host=str(ip), fragment=None), headers=headers, extensions=extensions
            )
            try:
                response = await http.send(request, stream=True)
            except httpx.ConnectError as exc:
                log.info("web_fetch: %s at %s: %s", hop.host, ip, exc)
                failure = exc
                continue
            except httpx.TimeoutException:
                raise PageUnavailable(f"{hop.host} did not answer in time") from None
            except httpx.HTTPError as exc:  # a broken answer (httpx also rejects a Location that is no URL)
                raise PageUnavailable(f"{hop.host} could not be read: {exc or type(exc).__name__}") from None
            try:
                yield response
            finally:
                await response.aclose()
            return
        raise PageUnavailable(f"cannot connect to {hop.host}: {failure or 'no address answered'}")

    async def _read(self, response: httpx.Response) -> tuple[bytes, bool]:
        """The body, its Content-Encoding undone here (lib/senses/inflate.py), up to max_bytes;
        True when there was more. At most max_bytes are read from the network too, and the event
        loop gets a turn after every bounded step of decoding."""
        limit = self.config.max_bytes
        try:
            decoder = Decoder(layers(response.headers.get_list("content-encoding")), limit)
        except UnsupportedEncoding as exc:
            raise PageUnavailable(str(exc)) from None
        body = bytearray()
        received = 0
        try:
            # Raw bytes: httpx never inflates anything itself (it would do so a whole chunk at a time).
            async for chunk in response.aiter_raw():
                received += len(chunk)
                for piece in decoder.feed(chunk):
                    if len(body) + len(piece) > limit:
                        body += piece[: limit - len(body)]
                        return bytes(body), True
                    body += piece
                    await asyncio.sleep(0)
                if received > limit:  # compressed data that decodes to little: still a cap on the wire
                    return bytes(body), True
        except Overflow:
            return bytes(body), True
        except DecodingFailed as exc:
            raise PageUnavailable(f"the page could not be decompressed: {exc}") from None
        except httpx.TimeoutException:
            raise PageUnavailable("the page stopped arriving (read timeout)") from None
        except httpx.HTTPError as exc:
            raise PageUnavailable(f"the page could not be read to its end: {exc or type(exc).__name__}") from None
        return bytes(body), False


def _host_header(hop: Target) -> str:
    """The Host header for a hop: its name, with the port unless it is the scheme's default."""
    host = f"[{hop.host}]" if hop.literal is not None and hop.literal.version == 6 else hop.host
    return host if hop.url.port is None else f"{host}:{hop.port}"


def _title_from_url(url: str) -> str:
    """A name for a page without a title: its file name, else its host."""
    parsed = httpx.URL(url)
    name = parsed.path.rstrip("/").rsplit("/", 1)[-1]
    return name or parsed.host


def _cap(text: str, max_chars: int) -> tuple[str, bool]:
    """At most `max_chars` characters, cut at a line break when one is near the end."""
    if len(text) <= max_chars:
        return text, False
    cut = text[:max_chars]
    line_end = cut.rfind("\n", max_chars - 2000)
    return (cut[:line_end] if line_end > 0 else cut).rstrip(), True
