"""Attack: guessing the admin token. The JSON admin API took 300 wrong bearer tokens in 7.6 s with
no limit, while the web view's sign-in could be closed for everyone by 30 failures (and, behind
Fly's proxy where every connection has the proxy's address, by 5). Now one limit on failed
authentications per client covers the admin API, the sign-in and /mcp (lib/auth_limit.py):
past it that client gets 429 with Retry-After, and nobody else is locked out."""

from __future__ import annotations

import re

import httpx
import pytest
from litestar.testing import TestClient

from lib.auth_limit import PER_CLIENT, WINDOW, AuthLimiter, behind_fly, client_key
from tests.support.faults import AshServer, server_env, write_config

ADMIN = "admin-token-for-tests"  # what server_env sets
STATS = "/admin/stats"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def from_address(server: AshServer, address: str) -> httpx.Client:
    """A client of the real server whose connections come from another loopback address."""
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=f"http://127.0.0.1:{server.port}", transport=transport, timeout=30)


def sign_in(client: httpx.Client | TestClient, token: str, **headers: str):
    """The sign-in form, filled in. Its pre-session cookie is sent by hand: it is Secure for any
    client but a browser on the machine itself (lib/web/ui/sessions.py needs_secure)."""
    form = client.get("/admin/ui/signin", headers=headers)
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', form.text).group(1)
    pre = re.search(r"ash_ui_signin=([^;]+)", form.headers["set-cookie"]).group(1)
    client.cookies.clear()
    return client.post(
        "/admin/ui/signin",
        data={"csrf": csrf, "token": token},
        headers={**headers, "Cookie": f"ash_ui_signin={pre}"},
        follow_redirects=False,
    )


@pytest.fixture
def server(ash_home):
    write_config(ash_home)
    running = AshServer(ash_home, server_env(ash_home, None)).start()
    yield running
    running.stop()


@pytest.mark.slow
def test_wrong_admin_tokens_close_the_api_for_that_client_only(server):
    attacker, owner = from_address(server, "127.0.0.2"), from_address(server, "127.0.0.3")
    try:
        for attempt in range(PER_CLIENT):
            assert attacker.get(STATS, headers=bearer(f"guess-{attempt}")).status_code == 401
        refused = attacker.get(STATS, headers=bearer("guess-again"))
        assert refused.status_code == 429
        assert 0 < int(refused.headers["retry-after"]) <= WINDOW
        # The right token too: a lucky guess must look like any other.
        assert attacker.get(STATS, headers=bearer(ADMIN)).status_code == 429
        # The same limit holds at the other doors that take a secret.
        assert attacker.post("/mcp", json={}, headers=bearer("ashmcp_" + "x" * 43)).status_code == 429
        assert sign_in(attacker, ADMIN).status_code == 429

        # The owner, from elsewhere, is not locked out of anything.
        assert owner.get(STATS, headers=bearer(ADMIN)).status_code == 200
        assert sign_in(owner, ADMIN).status_code == 303
        # No token at all is not a guess: it is refused and not counted.
        for _ in range(PER_CLIENT + 1):
            assert owner.get(STATS).status_code == 401
        assert owner.get(STATS, headers=bearer(ADMIN)).status_code == 200
    finally:
        attacker.close()
        owner.close()


@pytest.mark.slow
def test_a_second_client_signs_in_while_the_first_is_limited(server):
    first, second = from_address(server, "127.0.0.4"), from_address(server, "127.0.0.5")
    try:
        for _ in range(PER_CLIENT):
            assert sign_in(first, "not-the-token").status_code == 401
        closed = sign_in(first, ADMIN)
        assert closed.status_code == 429 and "Too many failed sign-ins" in closed.text
        assert int(closed.headers["retry-after"]) > 0
        # Sign-in failures count for the JSON API as well: one limit.
        assert first.get(STATS, headers=bearer(ADMIN)).status_code == 429

        # Thirty failures from six more addresses close nothing for anyone else (there is no
        # total over everyone that an attacker could fill).
        for n in range(6):
            other = from_address(server, f"127.0.1.{n + 1}")
            for _ in range(PER_CLIENT):
                assert sign_in(other, "not-the-token").status_code == 401
            other.close()
        opened = sign_in(second, ADMIN)
        assert opened.status_code == 303 and "ash_ui=" in opened.headers["set-cookie"]
    finally:
        first.close()
        second.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_right_token_works_again_after_the_window(db_path, monkeypatch):
    monkeypatch.setenv("ASH_ADMIN_TOKEN", ADMIN)
    from app import app

    clock = Clock()
    with TestClient(app) as client:
        app.state.auth_limiter = AuthLimiter(trust_fly_header=True, clock=clock)
        fly = {"Fly-Client-IP": "203.0.113.7"}
        for _ in range(PER_CLIENT):
            assert client.get(STATS, headers={**fly, **bearer("wrong")}).status_code == 401
            clock.now += 60
        refused = client.get(STATS, headers={**fly, **bearer(ADMIN)})
        assert refused.status_code == 429
        # Until the first failure leaves the window.
        assert int(refused.headers["retry-after"]) == WINDOW - PER_CLIENT * 60
        # Behind Fly's proxy every request has the proxy's address: the header names the client.
        assert client.get(STATS, headers={"Fly-Client-IP": "198.51.100.9", **bearer(ADMIN)}).status_code == 200

        clock.now += WINDOW - PER_CLIENT * 60 - 1
        assert client.get(STATS, headers={**fly, **bearer(ADMIN)}).status_code == 429
        clock.now += 1
        assert client.get(STATS, headers={**fly, **bearer(ADMIN)}).status_code == 200
        assert sign_in(client, ADMIN, **fly).status_code == 303


def test_clients_are_addresses_ipv6_by_its_64_and_fly_names_them_only_on_fly():
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("::ffff:192.0.2.1") == "192.0.2.1"
    assert client_key("192.0.2.1") == "192.0.2.1"
    scope = {"client": ("10.0.0.5", 4000), "headers": [(b"fly-client-ip", b"2001:db8::5")]}
    assert AuthLimiter().client(scope) == "10.0.0.5"  # off Fly, anyone could send the header
    assert AuthLimiter(trust_fly_header=True).client(scope) == "2001:db8::/64"
    assert behind_fly({"FLY_APP_NAME": "ash"}) and behind_fly({"FLY_MACHINE_ID": "abc"}) and not behind_fly({})


def test_many_clients_are_remembered_within_a_bound():
    clock = Clock()
    limiter = AuthLimiter(max_clients=100, clock=clock)
    for n in range(1000):
        limiter.failed(f"10.0.{n // 256}.{n % 256}")
        clock.now += 0.01
    assert len(limiter) == 100
    for _ in range(PER_CLIENT - 1):
        limiter.failed("10.0.3.231")  # the newest one is kept, with all its failures
    assert limiter.retry_after("10.0.3.231") > 0
