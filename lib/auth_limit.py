"""One limit on failed authentications per client, for every door that takes a secret: the admin
API's bearer token, the web view's sign-in and /mcp's tokens.

Past `per_client` failures within `window` seconds a client is refused (429 with Retry-After)
until the oldest of them is older than the window, with the right secret too, so a guess that
happens to be right tells nothing. Only that client: there is no total over everyone, which
anyone could fill to lock the owner out.

A client is its address as the server sees it; an IPv6 client is its /64 (one home or one VM is
given a whole /64 and can pick any address in it). Behind Fly.io's proxy every connection comes
from the proxy, so there (FLY_APP_NAME or FLY_MACHINE_ID set, by Fly) the `Fly-Client-IP`
header the proxy sets is the client instead.

The state lives in memory (one server process), behind a lock: the admin guard runs on the event
loop and must not wait on the database, and the sign-in runs on a thread. A restart forgets it,
which an attacker cannot cause. At most `max_clients` clients are remembered; past that the
ones whose failures have all aged out go first, then the oldest.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

FLY_CLIENT_IP = b"fly-client-ip"
FLY_VARIABLES = ("FLY_APP_NAME", "FLY_MACHINE_ID")
PER_CLIENT = 5
WINDOW = 15 * 60.0
MAX_CLIENTS = 10_000


def behind_fly(environ: Mapping[str, str]) -> bool:
    """Whether this process runs on Fly.io, where Fly's proxy names the client."""
    return any(environ.get(name) for name in FLY_VARIABLES)


def client_key(address: str) -> str:
    """The name a client is counted under: its IPv4 address, or the /64 of an IPv6 one."""
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return address  # not an address (a test client's name, a unix socket): counted as given
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class AuthLimiter:
    """Failed authentications per client, within a sliding window."""

    def __init__(
        self,
        *,
        trust_fly_header: bool = False,
        per_client: int = PER_CLIENT,
        window: float = WINDOW,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.trust_fly_header = trust_fly_header
        self.per_client = per_client
        self.window = window
        self.max_clients = max_clients
        self.clock = clock
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many clients are remembered."""
        with self._lock:
            return len(self._failures)

    def client(self, scope: Mapping) -> str:
        """Who an ASGI request comes from (see the module's docstring)."""
        if self.trust_fly_header:
            for name, value in scope.get("headers", ()):
                if name == FLY_CLIENT_IP and value:
                    return client_key(value.decode("latin-1"))
        peer = scope.get("client")
        return client_key(peer[0]) if peer else "unknown"

    def retry_after(self, client: str) -> int:
        """Whole seconds until `client` may try again; 0 when it is not refused now."""
        with self._lock:
            failures = self._failures.get(client)
            if failures is None or len(failures) < self.per_client:
                return 0
            left = failures[0] + self.window - self.clock()
        return max(1, math.ceil(left)) if left > 0 else 0

    def failed(self, client: str) -> None:
        """Count one failed authentication of `client`."""
        now = self.clock()
        with self._lock:
            failures = self._failures.pop(client, None) or deque(maxlen=self.per_client)
            failures.append(now)
            self._failures[client] = failures  # re-inserted: the dict's order is oldest activity first
            if len(self._failures) > self.max_clients:
                self._forget(now)

    def _forget(self, now: float) -> None:
        for name in [n for n, f in self._failures.items() if f[-1] <= now - self.window]:
            del self._failures[name]
        while len(self._failures) > self.max_clients:
            del self._failures[next(iter(self._failures))]
