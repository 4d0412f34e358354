"""Loaded by the `ash serve` processes of bench/hostile.py only (through PYTHONPATH), never by Ash.

The bench serves its hostile pages from loopback, which `web_fetch` refuses in production (a
page must not reach what sits behind the firewall). Here the fetcher is told to trust loopback,
exactly as the tests do (`WebFetchTool(trusted=LOOPBACK)`), so that the page is fetched and the
bomb meets the code under test. Nothing else changes.
"""

import functools
import ipaddress

try:
    from lib.tools import web_fetch

    web_fetch.WebFetchTool = functools.partial(web_fetch.WebFetchTool, trusted=[ipaddress.ip_network("127.0.0.1/32")])
except Exception as exc:  # a bench helper: say why, never stop the server from starting
    print(f"bench/hostile_site: web_fetch not patched: {exc}")
