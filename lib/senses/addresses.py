"""Which URLs and addresses `web_fetch` may reach: public http(s) sites only.

The rules stop server-side request forgery: a page (or a prompt injected into one) asking Ash
to read its own admin API, the cloud's metadata service (which hands out credentials), Fly's
private network or anything else behind the firewall. Every address a name resolves to is
judged, and the fetch then connects to a judged address, so a name that answers differently the
second time (DNS rebinding) gains nothing. There is no setting that relaxes these rules; tests
pass `trusted` networks (their loopback server) to the fetcher's constructor.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import httpx

type IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
type IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# (name, port) -> the addresses the name resolves to.
type Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]

SCHEMES = frozenset({"http", "https"})
DEFAULT_PORTS = {"http": 80, "https": 443}
# Only the web's own ports. Public sites serve pages on 80 and 443; any other port on a public
# address is more often a service never meant to be read as a page (a database, a mail server,
# an admin panel left open), and an instruction hidden in a page must not turn Ash into a port
# scanner that reports what it found.
WEB_PORTS = frozenset(DEFAULT_PORTS.values())
MAX_URL_LENGTH = 8000
# A host name after IDNA encoding: dot-separated labels of letters, digits, hyphens (and the
# underscores some real names carry). Anything else (%-escapes, spaces) is no public name.
HOST_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*")

# Names that never belong to a public site: `localhost` (RFC 6761), `.internal` (cloud-internal
# names such as metadata.google.internal, and Fly's `<app>.internal`), `.flycast` (Fly's private
# load balancer), mDNS `.local`, `.home.arpa` (home networks, RFC 8375).
LOCAL_NAMES = frozenset({"localhost"})
LOCAL_SUFFIXES = (".localhost", ".internal", ".flycast", ".local", ".localdomain", ".home.arpa")

# Cloud metadata services answer with credentials; they are inside the ranges below too, but
# the refusal says plainly what they are.
METADATA = {
    ipaddress.ip_address("169.254.169.254"): "AWS, Google Cloud, Azure, Fly and others",
    ipaddress.ip_address("fd00:ec2::254"): "AWS, over IPv6",
    ipaddress.ip_address("100.100.100.200"): "Alibaba Cloud",
}

NAT64 = ipaddress.ip_network("64:ff9b::/96")
IPV4_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")

# Ranges that are never a public site, each with the words a refusal uses. Checked in order, so
# the narrower entries (:: and ::1 inside ::/96) come first.
BLOCKED: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(network), words)
    for network, words in (
        ("0.0.0.0/8", "the 'this host' address 0.0.0.0, which reaches the machine itself"),
        ("10.0.0.0/8", "a private network address"),
        ("100.64.0.0/10", "a carrier-grade NAT address (shared, not public)"),
        ("127.0.0.0/8", "a loopback address (the machine itself)"),
        ("169.254.0.0/16", "a link-local address"),
        ("172.16.0.0/12", "a private network address"),
        ("192.0.0.0/24", "an IETF protocol address"),
        ("192.0.2.0/24", "a documentation address"),
        ("192.88.99.0/24", "a 6to4 relay address"),
        ("192.168.0.0/16", "a private network address"),
        ("198.18.0.0/15", "a benchmarking address"),
        ("198.51.100.0/24", "a documentation address"),
        ("203.0.113.0/24", "a documentation address"),
        ("224.0.0.0/4", "a multicast address"),
        ("240.0.0.0/4", "a reserved or broadcast address"),
        ("::/128", "the unspecified address ::, which reaches the machine itself"),
        ("::1/128", "a loopback address (the machine itself)"),
        ("::/96", "an IPv4-compatible IPv6 address (deprecated)"),
        ("64:ff9b:1::/48", "a local-use NAT64 address"),
        ("100::/64", "a discard-only address"),
        ("2001::/23", "an IETF protocol address (Teredo and others)"),
        ("2001:db8::/32", "a documentation address"),
        ("2002::/16", "a 6to4 address (it wraps an IPv4 address)"),
        ("fc00::/7", "a unique-local address (a private network, such as Fly's)"),
        ("fe80::/10", "a link-local address"),
        ("fec0::/10", "a site-local address (deprecated)"),
        ("ff00::/8", "a multicast address"),
    )
)


class PageRefused(Exception):
    """A URL, address or answer `web_fetch` will not read; the message says why, for the model."""


@dataclass(frozen=True)
class Target:
    """One URL to request, already past the URL rules (its addresses are judged after resolving)."""

    url: httpx.URL
    host: str  # lower-case ASCII (IDNA), no trailing dot; a bare IP for an address literal
    port: int
    literal: IPAddress | None  # the address when the URL names one instead of a host name


def address_refusal(ip: IPAddress) -> str | None:
    """Why `ip` is not a public address (words for the model), or None when it is one."""
    if ip in METADATA:
        return f"a cloud metadata address ({METADATA[ip]})"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in IPV4_MAPPED:
            # Refused even when the IPv4 address inside is public: no public site needs this
            # form, and some stacks treat it as the IPv4 address itself.
            inner = ip.ipv4_mapped
            assert inner is not None
            judged = address_refusal(inner) or "a public address, but only in its IPv4 form"
            return f"an IPv4-mapped IPv6 address standing for {inner}, {judged}"
        if ip in NAT64:
            # DNS64 resolvers on IPv6-only networks write public IPv4 sites this way; judge the
            # IPv4 address the NAT64 gateway would reach.
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
            judged = address_refusal(inner)
            return f"a NAT64 address standing for {inner}, {judged}" if judged else None
    for network, words in BLOCKED:
        if ip in network:
            return words
    if isinstance(ip, ipaddress.IPv6Address) and ip not in GLOBAL_UNICAST:
        return "not a public IPv6 address (outside 2000::/3)"
    if not ip.is_global:
        return "not a public address"
    return None


def name_refusal(host: str) -> str | None:
    """Why `host` (lower-case, no trailing dot) names no public site, or None."""
    if host in LOCAL_NAMES or host.endswith(LOCAL_SUFFIXES):
        return f"{host} is a local or internal name, not a public site"
    if "." not in host:
        # A single label is looked up through the resolver's search domains: an internal name.
        return f"{host} is a local name (public sites have a dot in their name)"
    return None


def target(url: str | httpx.URL) -> Target:
    """The URL, checked: http or https, no credentials, a host that may be public.

    Raises PageRefused with the reason. The port is judged with the addresses (see `judge`)."""
    text = str(url).strip()
    if len(text) > MAX_URL_LENGTH:
        raise PageRefused(f"the URL is longer than {MAX_URL_LENGTH} characters")
    try:
        parsed = httpx.URL(text)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise PageRefused(f"{text!r} is not a valid URL ({exc})") from None
    if parsed.scheme not in SCHEMES:
        what = f"a {parsed.scheme}: URL" if parsed.scheme else "no scheme"
        raise PageRefused(f"{text!r} has {what}; only http:// and https:// pages are read (write the full URL)")
    if parsed.userinfo:
        raise PageRefused("the URL carries a user name or password; web_fetch never sends credentials")
    try:
        host = parsed.raw_host.decode("ascii").lower().rstrip(".")
    except UnicodeDecodeError:
        raise PageRefused(f"{text!r} has a host name that cannot be encoded") from None
    if not host:
        raise PageRefused(f"{text!r} names no host")
    port = parsed.port or DEFAULT_PORTS[parsed.scheme]
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
        if not HOST_NAME.fullmatch(host):
            raise PageRefused(f"{text!r} is not a valid URL (the host {host!r} is not a name)") from None
        if refusal := name_refusal(host):
            raise PageRefused(refusal) from None
    return Target(parsed, host, port, literal)


def judge(target: Target, addresses: Iterable[IPAddress], *, trusted: Iterable[IPNetwork] = ()) -> list[IPAddress]:
    """The addresses, if EVERY one is public and the port is a web port; else PageRefused.

    One private address among public ones refuses the whole name: the connection could land on
    any of them. `trusted` networks (a test's loopback server) pass both rules."""
    checked = list(dict.fromkeys(addresses))
    if not checked:
        raise PageRefused(f"{target.host} has no address")
    trusted = tuple(trusted)
    for ip in checked:
        if any(ip.version == network.version and ip in network for network in trusted):
            continue
        if refusal := address_refusal(ip):
            where = "is" if target.literal is not None else f"resolves to {ip}, which is"
            raise PageRefused(f"{target.host} {where} {refusal}; web_fetch reads public pages only")
        if target.port not in WEB_PORTS:
            raise PageRefused(f"port {target.port} is not a web port; web_fetch reads pages on ports 80 and 443 only")
    return checked


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """The addresses the system resolver gives for `host` (getaddrinfo, in a worker thread)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
