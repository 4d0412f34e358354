"""web_fetch against a real server on loopback: pages read, caps kept, redirects judged hop by hop.

The fetcher trusts 127.0.0.1/32 (a constructor argument production never passes) so the server
can stand in for a public site; every other address, 127.0.0.2 included, is still refused.
"""

from __future__ import annotations

import gzip
import ipaddress
import ssl
import tempfile
import time
import zlib
from pathlib import Path

import pytest

from lib.config import WebFetchConfig
from lib.senses.web import PageRefused, PageUnavailable, WebFetcher
from tests.support.web_pages import LOOPBACK, PageServer, pdf_with_text

ARTICLE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Green tea, properly | Tea Corp</title></head>
<body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/shop">Shop our teas</a></li>
<li><a href="/about">About Tea Corp</a></li></ul></nav>
<main><article>
<h1>Green tea, properly</h1>
<p>Green tea wants water at about eighty degrees Celsius, never boiling, or the leaves turn
bitter within seconds and the cup tastes of grass rather than of the spring it was picked in.</p>
<p>Steep it for two minutes at most, then pour all of it out, so that the leaves do not stew in
the pot while you drink; a second steeping of the same leaves is often the better one.</p>
<h2>Which leaves</h2>
<p>Sencha is the everyday tea of Japan; gyokuro is shaded for weeks before the harvest, which
makes it sweeter, and it wants even cooler water, around sixty degrees.</p>
</article></main>
<footer><p>Copyright 2024 Tea Corp. All rights reserved.</p><p>Cookie settings | Imprint</p></footer>
</body></html>"""


class Resolver:
    """Answers every name with the addresses in the table; records each question."""

    def __init__(self, table: dict[str, list[str]]):
        self.table = table
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int):
        self.calls.append((host, port))
        return [ipaddress.ip_address(a) for a in self.table[host]]


@pytest.fixture
def server():
    pages = PageServer()
    yield pages
    pages.close()


def fetcher(resolver: Resolver | None = None, **limits) -> WebFetcher:
    config = WebFetchConfig(**{"timeout": 5.0, **limits})
    return WebFetcher(config, resolver=resolver or Resolver({}), trusted=LOOPBACK)


async def test_html_page_comes_back_as_title_and_main_text(server):
    server.page("/tea", ARTICLE)
    page = await fetcher().fetch(server.url("/tea"))
    assert page.title == "Green tea, properly"
    assert page.url == server.url("/tea")
    assert page.content_type == "text/html"
    assert page.text.startswith("# Green tea, properly\n\nGreen tea wants water at about eighty degrees")
    assert "## Which leaves" in page.text and "sixty degrees" in page.text
    # The chrome around the article is gone.
    for boilerplate in ("Shop our teas", "About Tea Corp", "All rights reserved", "Cookie settings"):
        assert boilerplate not in page.text
    assert page.truncated is False


async def test_connection_goes_to_the_checked_address_with_the_name_in_host(server):
    # page.test exists in no DNS: the fetch works only because it connects to the address the
    # resolver gave, once, with the name in the Host header.
    server.page("/tea", ARTICLE)
    resolver = Resolver({"page.test": ["127.0.0.1"]})
    page = await fetcher(resolver).fetch(server.url("/tea", host="page.test"))
    assert page.title == "Green tea, properly"
    assert resolver.calls == [("page.test", server.port)]
    assert [(seen.path, seen.host) for seen in server.requests] == [("/tea", f"page.test:{server.port}")]


async def test_every_redirect_is_resolved_and_judged_again(server):
    server.redirect("/start", server.url("/middle", host="other.test"), status=301)
    server.redirect("/middle", "/end", status=307)  # relative: stays on other.test
    server.page("/end", "the end of the road", content_type="text/plain; charset=utf-8")
    resolver = Resolver({"first.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    page = await fetcher(resolver).fetch(server.url("/start", host="first.test"))
    assert page.url == server.url("/end", host="other.test")
    assert page.text == "the end of the road"
    assert resolver.calls == [("first.test", server.port), ("other.test", server.port), ("other.test", server.port)]
    assert [seen.host for seen in server.requests] == [f"first.test:{server.port}"] + [f"other.test:{server.port}"] * 2


@pytest.mark.parametrize(
    ("location", "words"),
    [
        ("http://10.0.0.1/", "10.0.0.1 is a private network address"),
        ("http://169.254.169.254/latest/meta-data/iam/", "cloud metadata address"),
        ("http://[::1]/", "loopback"),
        ("http://127.0.0.2/", "loopback"),  # loopback, but not the trusted test address
        ("http://sneaky.test/", "sneaky.test resolves to 10.0.0.1"),
        ("http://metadata.google.internal/", "local or internal name"),
        ("file:///etc/passwd", "only http:// and https://"),
    ],
)
async def test_redirect_from_an_allowed_host_to_a_private_one_is_refused(server, location, words):
    server.redirect("/innocent", location)
    resolver = Resolver({"sneaky.test": ["10.0.0.1"]})
    with pytest.raises(PageRefused, match=words):
        await fetcher(resolver).fetch(server.url("/innocent"))
    assert [seen.path for seen in server.requests] == ["/innocent"]


async def test_a_redirect_to_no_url_is_an_error(server):
    server.redirect("/broken", "http://[::1")
    with pytest.raises(PageUnavailable, match="Invalid URL in location header"):
        await fetcher().fetch(server.url("/broken"))
    assert [seen.path for seen in server.requests] == ["/broken"]


async def test_redirects_stop_at_max_redirects(server):
    server.redirect("/loop", "/loop")
    with pytest.raises(PageUnavailable, match="more than 2 redirects"):
        await fetcher(max_redirects=2).fetch(server.url("/loop"))
    assert len(server.requests) == 3


async def test_plain_text_and_json_come_back_as_they_are(server):
    server.page("/notes.txt", "Buy milk.\nCall Ana about Lisbon.\n", content_type="text/plain; charset=utf-8")
    server.page("/data.json", '{"city": "Lisboa", "temp": 21}', content_type="application/json")
    server.page("/latin1.txt", "Café à Lisboa".encode("latin-1"), content_type="text/plain; charset=iso-8859-1")
    notes = await fetcher().fetch(server.url("/notes.txt"))
    assert (notes.title, notes.text) == ("notes.txt", "Buy milk.\nCall Ana about Lisbon.")
    data = await fetcher().fetch(server.url("/data.json"))
    assert data.text == '{"city": "Lisboa", "temp": 21}'
    assert (await fetcher().fetch(server.url("/latin1.txt"))).text == "Café à Lisboa"


async def test_pdf_page_is_read(server):
    server.page("/report.pdf", pdf_with_text("Quarterly report on green tea", "Sales rose by nine percent"), None)
    server.page("/typed.pdf", pdf_with_text("Typed as a PDF"), content_type="application/pdf")
    page = await fetcher().fetch(server.url("/report.pdf"))  # no Content-Type: recognised by %PDF-
    assert page.title == "report.pdf"
    assert page.text == "Quarterly report on green tea\nSales rose by nine percent"
    assert (await fetcher().fetch(server.url("/typed.pdf"))).text == "Typed as a PDF"


async def test_page_larger_than_max_bytes_is_cut_with_a_note(server):
    server.endless("/huge.txt")
    started = time.monotonic()
    page = await fetcher(max_bytes=100_000, max_chars=1_000_000).fetch(server.url("/huge.txt"))
    assert time.monotonic() - started < 3
    assert page.truncated is True
    assert page.text.startswith("all work and no play makes jack a dull boy\n")
    body, note = page.text.rsplit("\n\n", 1)
    assert len(body.encode()) <= 100_000
    assert note == "[The page is larger than 100,000 bytes; only its beginning was read.]"


async def test_a_pdf_larger_than_max_bytes_is_refused(server):
    server.endless("/huge.pdf", content_type="application/pdf")
    with pytest.raises(PageRefused, match="PDF is larger than 50,000 bytes"):
        await fetcher(max_bytes=50_000).fetch(server.url("/huge.pdf"))


async def test_text_is_capped_at_max_chars_with_a_note(server):
    server.page("/long.txt", "\n".join(f"line {n:05d} of the long file" for n in range(2000)), "text/plain")
    page = await fetcher(max_chars=1000).fetch(server.url("/long.txt"))
    body, note = page.text.rsplit("\n\n", 1)
    assert len(body) <= 1000 and body.endswith("of the long file")  # cut at a line break
    assert note == f"[Cut: {len(body):,} of 55,999 characters shown.]"
    assert page.truncated is True


async def test_a_slow_server_times_out(server):
    # One byte every 0.1 s: no single read times out; the whole fetch's time limit does.
    server.drip("/slow")
    started = time.monotonic()
    with pytest.raises(PageUnavailable, match=r"did not arrive within 0\.5 s"):
        await fetcher(timeout=0.5).fetch(server.url("/slow"))
    assert time.monotonic() - started < 2


async def test_an_image_is_refused_by_its_content_type_without_being_downloaded(server):
    server.endless("/cat.png", content_type="image/png")
    started = time.monotonic()
    with pytest.raises(PageRefused) as refused:
        await fetcher().fetch(server.url("/cat.png"))
    assert str(refused.value) == (
        "the address serves image/png, which web_fetch does not read (it reads HTML pages, plain text, "
        "Markdown, JSON and PDF)"
    )
    assert time.monotonic() - started < 2


async def test_binary_without_a_content_type_is_refused(server):
    server.page("/blob", b"\x7fELF\x02\x01\x01\x00\x00\x00" * 10, content_type=None)
    with pytest.raises(PageRefused, match="binary data without a content type"):
        await fetcher().fetch(server.url("/blob"))


async def test_http_errors_name_the_status(server):
    with pytest.raises(PageUnavailable, match=r"^the server answered 404 Not Found$"):
        await fetcher().fetch(server.url("/missing"))
    server.redirect("/moved", "/missing")
    with pytest.raises(PageUnavailable, match=r"answered 404 Not Found \(at http://.*/missing, after 1 redirects\)"):
        await fetcher().fetch(server.url("/moved"))


async def test_a_closed_port_is_a_clear_error(server):
    server.close()
    with pytest.raises(PageUnavailable, match=r"cannot connect to 127\.0\.0\.1"):
        await fetcher().fetch(server.url("/gone"))


def certificate_authority(name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A test CA and a server certificate it signed for `name`: (server context, client context)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "web_fetch test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory() as folder:
        cert_file, key_file = Path(folder, "cert.pem"), Path(folder, "key.pem")
        cert_file.write_bytes(leaf.public_bytes(pem))
        key_file.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cadata=ca.public_bytes(pem).decode())
    return server, client


@pytest.fixture
def tls_server():
    server_tls, client_tls = certificate_authority("secure.test")
    pages = PageServer(tls=server_tls)
    pages.client_tls = client_tls
    yield pages
    pages.close()


async def test_https_to_the_checked_address_still_verifies_the_name(tls_server):
    # The request goes to 127.0.0.1, yet TLS sends the name (SNI) and checks the certificate
    # against it: the certificate for secure.test is accepted for secure.test only.
    tls_server.page("/tea", ARTICLE)
    resolver = Resolver({"secure.test": ["127.0.0.1"], "impostor.test": ["127.0.0.1"]})
    web = WebFetcher(WebFetchConfig(timeout=5.0), resolver=resolver, trusted=LOOPBACK, tls=tls_server.client_tls)
    page = await web.fetch(tls_server.url("/tea", host="secure.test"))
    assert page.title == "Green tea, properly"
    assert tls_server.server_names == ["secure.test"]
    assert [seen.host for seen in tls_server.requests] == [f"secure.test:{tls_server.port}"]
    with pytest.raises(PageUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
        await web.fetch(tls_server.url("/tea", host="impostor.test"))
    assert len(tls_server.requests) == 1


NOTES = "Buy milk.\nCall Ana about Lisbon.\n" * 400


def _deflate(data: bytes, wbits: int) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return compressor.compress(data) + compressor.flush()


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("gzip", gzip.compress(NOTES.encode())),
        ("x-gzip", gzip.compress(NOTES.encode())),
        # Two gzip members one after the other (what `cat a.gz b.gz` makes) are one body.
        ("gzip", gzip.compress(NOTES[:3000].encode()) + gzip.compress(NOTES[3000:].encode())),
        ("deflate", _deflate(NOTES.encode(), zlib.MAX_WBITS)),  # zlib-wrapped, as the RFC means it
        ("deflate", _deflate(NOTES.encode(), -zlib.MAX_WBITS)),  # raw, as some servers send it
        ("gzip, gzip", gzip.compress(gzip.compress(NOTES.encode()))),
        ("identity", NOTES.encode()),
    ],
    ids=["gzip", "x-gzip", "gzip-members", "deflate-zlib", "deflate-raw", "gzip-gzip", "identity"],
)
async def test_a_compressed_page_is_decoded_by_web_fetch_itself(server, encoding, body):
    server.encoded("/notes.txt", body, encoding)
    page = await fetcher().fetch(server.url("/notes.txt"))
    assert page.text == NOTES.strip()
    assert page.truncated is False
    # Only what lib/senses/inflate.py decodes is asked for, whatever httpx could decode.
    assert server.headers[0]["accept-encoding"] == "gzip, deflate"


@pytest.mark.parametrize(
    ("encoding", "words"),
    [
        ("br", "compressed as 'br', which web_fetch does not decode"),
        ("zstd", "compressed as 'zstd'"),
        ("gzip, snappy", "compressed as 'snappy'"),
        ("gzip, gzip, gzip", "compressed 3 times over"),
    ],
)
async def test_an_encoding_web_fetch_does_not_decode_is_a_clear_error(server, encoding, words):
    server.encoded("/page.txt", b"\x1f\x8b whatever the server made of it", encoding)
    with pytest.raises(PageUnavailable, match=words):
        await fetcher().fetch(server.url("/page.txt"))


async def test_a_damaged_gzip_body_is_a_clear_error(server):
    server.encoded("/page.txt", b"this was never gzip data", "gzip")
    with pytest.raises(PageUnavailable, match="could not be decompressed: its gzip data is damaged"):
        await fetcher().fetch(server.url("/page.txt"))
