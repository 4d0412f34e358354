"""web_fetch refuses every address that is not a public site, before any connection is made.

No server runs here: a refused URL never reaches the network. Names resolve through an injected
resolver (a public name that answers 10.0.0.1 is the DNS trick these rules exist for), except
where the system resolver's own reading of odd address forms is the point.
"""

from __future__ import annotations

import ipaddress

import pytest

from lib.config import WebFetchConfig
from lib.senses.addresses import address_refusal
from lib.senses.web import PageRefused, WebFetcher

PUBLIC = "93.184.215.14"


class Resolver:
    """Answers from a table and records every question."""

    def __init__(self, table: dict[str, list[str]]):
        self.table = table
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
        self.calls.append((host, port))
        return [ipaddress.ip_address(a) for a in self.table[host]]


async def refusal(url: str, resolver: Resolver | None = None) -> str:
    fetcher = WebFetcher(WebFetchConfig(timeout=2.0), resolver=resolver or Resolver({}))
    with pytest.raises(PageRefused) as refused:
        await fetcher.fetch(url)
    return str(refused.value)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://127.0.0.1", "loopback"),
        ("http://127.8.9.10:8080/admin", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
        ("http://[fd00:ec2::254]/", "cloud metadata"),
        ("http://100.100.100.200/", "cloud metadata"),
        ("http://[::1]", "loopback"),
        ("http://[::ffff:127.0.0.1]", "IPv4-mapped IPv6 address standing for 127.0.0.1, a loopback"),
        ("http://[::ffff:8.8.8.8]", "IPv4-mapped IPv6 address standing for 8.8.8.8, a public address, but only"),
        ("http://[::127.0.0.1]", "IPv4-compatible"),
        ("http://[64:ff9b::a00:1]", "NAT64 address standing for 10.0.0.1, a private"),
        ("http://100.64.0.1", "carrier-grade NAT"),
        ("http://[fd00::1]", "unique-local"),
        ("http://[fdaa:0:1::3]:8080/", "unique-local"),
        ("http://[fe80::1]", "link-local"),
        ("http://0.0.0.0", "the 'this host' address"),
        ("http://[::]", "unspecified"),
        ("http://10.1.2.3", "private network"),
        ("http://172.16.5.4", "private network"),
        ("http://192.168.1.1", "private network"),
        ("http://224.0.0.1", "multicast"),
        ("http://[ff02::1]", "multicast"),
        ("http://255.255.255.255", "broadcast"),
        ("http://240.0.0.1", "reserved"),
        ("http://[2002:a00:1::1]", "6to4"),
    ],
)
async def test_non_public_addresses_are_refused(url, words):
    message = await refusal(url)
    assert words in message
    assert "web_fetch reads public pages only" in message


@pytest.mark.parametrize(
    "url",
    [
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://x.flycast",
        "http://my-app.internal:8080/",
        "http://localhost:8080/",
        "http://LOCALHOST./",
        "http://api.localhost/",
        "http://printer.local/",
    ],
)
async def test_internal_names_are_refused_without_a_lookup(url):
    resolver = Resolver({})
    assert "local or internal name" in await refusal(url, resolver)
    assert resolver.calls == []


async def test_a_public_name_that_resolves_to_a_private_address_is_refused():
    resolver = Resolver({"innocent.example": ["10.0.0.1"]})
    message = await refusal("https://innocent.example/page", resolver)
    assert message == (
        "innocent.example resolves to 10.0.0.1, which is a private network address; web_fetch reads public pages only"
    )
    assert resolver.calls == [("innocent.example", 443)]


async def test_one_private_address_among_public_ones_refuses_the_name():
    # The connection could land on any of them; a rebinding DNS server mixes them on purpose.
    resolver = Resolver({"mixed.example": [PUBLIC, "2606:4700::1111", "192.168.0.10"]})
    assert "resolves to 192.168.0.10" in await refusal("http://mixed.example/", resolver)


async def test_only_web_ports_on_public_addresses():
    resolver = Resolver({"example.com": [PUBLIC]})
    message = await refusal("http://example.com:6379/", resolver)
    assert "port 6379 is not a web port" in message
    assert "port 22" in await refusal(f"http://{PUBLIC}:22/")


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("file:///etc/passwd", "a file: URL; only http:// and https://"),
        ("ftp://example.com/x", "a ftp: URL"),
        ("gopher://example.com:70/", "a gopher: URL"),
        ("example.com/page", "no scheme"),
        ("http://user:secret@example.com/", "user name or password"),
        ("http:///nohost", "names no host"),
        ("http://intranet/", "intranet is a local name"),
        ("http://exa mple.com/", "not a valid URL"),
        ("http://example.com/" + "a" * 9000, "longer than 8000"),
    ],
)
async def test_urls_that_are_not_public_web_pages_are_refused(url, words):
    resolver = Resolver({})
    assert words in await refusal(url, resolver)
    assert resolver.calls == []


@pytest.mark.parametrize("url", ["http://127.1/", "http://0x7f.0.0.1/", "http://127.0.1/"])
async def test_shorthand_ipv4_forms_are_judged_by_what_the_system_reads(url):
    # The real resolver: getaddrinfo reads these numerically (inet_aton, no DNS query), as
    # 127.0.0.1, and what it answers is what gets judged.
    fetcher = WebFetcher(WebFetchConfig(timeout=5.0))
    with pytest.raises(PageRefused, match=r"resolves to 127\.0\.0\.1, which is a loopback address"):
        await fetcher.fetch(url)


@pytest.mark.parametrize(
    "address", [PUBLIC, "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001:82b::200e", "64:ff9b::808:808"]
)
def test_public_addresses_pass(address):
    assert address_refusal(ipaddress.ip_address(address)) is None
