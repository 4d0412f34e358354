"""The web view's locks, through the real app and a real SQLite file: every /admin/ui route
refuses without a session, the bearer token does not open it and its cookie does not open the
JSON API; cookies, headers, CSRF, the sign-in rate limit, sign-out and a changed admin token.
(The pages themselves, in a real browser: test_admin_ui_browser.py.)"""

from __future__ import annotations

import hashlib
import re

import pytest
from litestar.testing import TestClient

from lib.db import connect
from lib.memory import knowledge, undo
from lib.web.ui import sessions
from tests.support.database import query

ADMIN = "admin-token-for-tests-ui"
ALICE = "408258968"


def _client(monkeypatch, token: str | None = ADMIN, base_url: str = "https://ash.example.com") -> TestClient:
    if token is None:
        monkeypatch.delenv("ASH_ADMIN_TOKEN", raising=False)
    else:
        monkeypatch.setenv("ASH_ADMIN_TOKEN", token)
    from app import app

    return TestClient(app, base_url=base_url)


def _ui_routes() -> list[tuple[str, str]]:
    from app import app

    found = []
    for route in app.routes:
        if route.path.startswith("/admin/ui") and "static" not in route.path:
            path = route.path.replace("{memory_id:int}", "1").replace("{session_id:int}", "1")
            path = path.replace("{audit_id:int}", "1")
            path = path.replace("{user_id:str}", ALICE)
            found += [(method, path) for method in sorted(route.methods - {"OPTIONS", "HEAD"})]
    return found


def _csrf(html: str) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', html).group(1)


def sign_in(client: TestClient, token: str = ADMIN):
    form = client.get("/admin/ui/signin")
    return client.post("/admin/ui/signin", data={"csrf": _csrf(form.text), "token": token}, follow_redirects=False)


@pytest.fixture
def seeded(db_path, settings):
    conn = connect(db_path)
    conn.execute(
        "INSERT INTO user_profiles (user_id, display_name, notes, created_at, updated_at) "
        "VALUES (?, 'Alice', '', 'x', 'x')",
        (ALICE,),
    )
    memory_id = knowledge.add(conn, settings, "Alice keeps bees on her roof", owner_user_id=ALICE, source="cli")
    conn.close()
    return memory_id


def test_every_page_and_action_is_refused_without_a_session(seeded, monkeypatch):
    routes = _ui_routes()
    assert {("GET", "/admin/ui"), ("POST", "/admin/ui/memories/1/forget"), ("GET", "/admin/ui/audit")} <= set(routes)
    with _client(monkeypatch) as client:
        for method, path in routes:
            if path == "/admin/ui/signin":
                continue
            # The JSON API's bearer token does not open the web view.
            response = client.request(
                method, path, headers={"authorization": f"Bearer {ADMIN}"}, data={}, follow_redirects=False
            )
            if method == "GET":
                assert response.status_code == 303 and response.headers["location"] == "/admin/ui/signin", path
            else:
                assert response.status_code == 403, (method, path)
            assert "bees" not in response.text and ADMIN not in response.text
    assert knowledge.get(connect(_db(monkeypatch)), seeded) is not None


def _db(monkeypatch):
    from lib.config import load_settings

    return load_settings().database_path


def test_everything_is_403_when_no_admin_token_is_configured(seeded, monkeypatch):
    with _client(monkeypatch, token=None) as client:
        for method, path in _ui_routes():
            assert client.request(method, path, data={}, follow_redirects=False).status_code == 403, (method, path)


def test_sign_in_sets_a_strict_cookie_whose_hash_alone_is_stored(seeded, monkeypatch):
    with _client(monkeypatch, base_url="https://ash.example.com") as client:
        response = sign_in(client)
        assert response.status_code == 303 and response.headers["location"] == "/admin/ui"
        [cookie] = [c for c in response.headers.get_list("set-cookie") if c.startswith("ash_ui=")]
        raw = cookie.split(";")[0].removeprefix("ash_ui=")
        for flag in ("httponly", "samesite=strict", "secure", "path=/admin/ui", "max-age=43200"):
            assert flag in cookie.lower()
        assert ADMIN not in cookie
        page = client.get("/admin/ui")
        assert page.status_code == 200 and "Alice" in page.text
        for header, value in {
            "cache-control": "no-store",
            "x-frame-options": "DENY",
            "x-content-type-options": "nosniff",
        }.items():
            assert page.headers[header] == value
        csp = page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert "<script>" not in page.text and 'src="http' not in page.text  # no inline script, no CDN
        stored = query(_db(monkeypatch), "SELECT session_hash, token_fingerprint FROM ui_sessions")
        assert stored == [
            {
                "session_hash": hashlib.sha256(raw.encode()).hexdigest(),
                "token_fingerprint": stored[0]["token_fingerprint"],
            }
        ]
        assert raw not in str(stored) and ADMIN not in str(stored)
        # The session opens the web view only: the JSON admin API still wants the bearer token.
        assert client.get("/admin/memories").status_code == 401


def test_cookie_is_not_secure_only_for_plain_http_on_loopback():
    # The real browser test signs in over http://127.0.0.1 with exactly this rule.
    assert not sessions.needs_secure("127.0.0.1", "http", "127.0.0.1:8080")
    assert not sessions.needs_secure("::1", "http", "[::1]:8080")
    assert sessions.needs_secure("127.0.0.1", "https", "127.0.0.1:8080")  # TLS: always Secure
    assert sessions.needs_secure("203.0.113.9", "http", "ash.example.com")  # a proxy in front
    assert sessions.needs_secure("127.0.0.1", "http", "ash.example.com")  # a local proxy for a public name


def test_a_write_without_the_csrf_token_is_refused(seeded, monkeypatch):
    with _client(monkeypatch) as client:
        sign_in(client)
        for form in ({}, {"csrf": "0" * 64}, {"csrf": ""}):
            response = client.post(f"/admin/ui/memories/{seeded}/forget", data=form, follow_redirects=False)
            assert response.status_code == 403 and "CSRF" in response.text
        edit = client.post(f"/admin/ui/memories/{seeded}/edit", data={"content": "hacked"}, follow_redirects=False)
        assert edit.status_code == 403
        assert knowledge.get(connect(_db(monkeypatch)), seeded).content == "Alice keeps bees on her roof"
        # With the page's token it works.
        token = _csrf(client.get(f"/admin/ui/people/{ALICE}").text)
        done = client.post(f"/admin/ui/memories/{seeded}/forget", data={"csrf": token}, follow_redirects=False)
        assert done.status_code == 303
        assert knowledge.get(connect(_db(monkeypatch)), seeded) is None
        # A sign-in form without its pre-session token is refused too.
        assert client.post("/admin/ui/signin", data={"token": ADMIN}).status_code == 403


def test_sign_in_is_rate_limited_even_for_the_right_token(seeded, monkeypatch):
    with _client(monkeypatch) as client:
        for _ in range(5):
            assert sign_in(client, "wrong-token").status_code == 401
        limited = sign_in(client)
        assert limited.status_code == 429 and "Too many" in limited.text
        assert client.get("/admin/ui", follow_redirects=False).status_code == 303


def test_sign_out_and_a_new_admin_token_revoke_sessions(seeded, monkeypatch):
    with _client(monkeypatch) as client:
        sign_in(client)
        page = client.get("/admin/ui")
        out = client.post("/admin/ui/signout", data={"csrf": _csrf(page.text)}, follow_redirects=False)
        assert out.status_code == 303
        assert client.get("/admin/ui", follow_redirects=False).status_code == 303
    with _client(monkeypatch) as client:
        sign_in(client)
        assert client.get("/admin/ui").status_code == 200
        cookie = client.cookies.get("ash_ui")
    # The operator rotates ASH_ADMIN_TOKEN: the old session is refused and revoked.
    with _client(monkeypatch, token="a-brand-new-admin-token") as client:
        client.cookies.set("ash_ui", cookie)
        assert client.get("/admin/ui", follow_redirects=False).status_code == 303
    revoked = query(_db(monkeypatch), "SELECT revoked_at FROM ui_sessions ORDER BY id")
    assert all(r["revoked_at"] for r in revoked)


def test_stored_text_is_escaped_and_assets_come_from_the_app(seeded, monkeypatch, settings):
    conn = connect(_db(monkeypatch))
    knowledge.add(conn, settings, "<script>alert(1)</script>", owner_user_id=ALICE, source="cli")
    with _client(monkeypatch) as client:
        sign_in(client)
        page = client.get(f"/admin/ui/people/{ALICE}")
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text and "<script>alert" not in page.text
        css = client.get("/admin/ui/static/ui.css")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert client.get("/admin/ui/static/..%2Fsessions.py").status_code == 404


def test_pending_memories_are_shown_and_kept_or_discarded_with_the_csrf_token(seeded, monkeypatch, settings):
    conn = connect(_db(monkeypatch))
    waiting = [
        knowledge.add(conn, settings, text, owner_user_id=ALICE, source="tool", origin="web", status="pending")
        for text in ("Alice's bees are Italian", "Alice sells honey")
    ]
    with _client(monkeypatch) as client:
        sign_in(client)
        page = client.get(f"/admin/ui/people/{ALICE}").text
        assert page.count("waits for review") == 2 and "tool (web)" in page
        assert client.post(f"/admin/ui/memories/{waiting[0]}/keep", data={}).status_code == 403
        token = _csrf(page)
        kept = client.post(f"/admin/ui/memories/{waiting[0]}/keep", data={"csrf": token}, follow_redirects=False)
        dropped = client.post(f"/admin/ui/memories/{waiting[1]}/discard", data={"csrf": token}, follow_redirects=False)
        assert kept.status_code == dropped.status_code == 303
        again = client.post(f"/admin/ui/memories/{waiting[1]}/keep", data={"csrf": token}, follow_redirects=False)
        assert again.status_code == 409
    assert [knowledge.get(conn, i).status for i in waiting] == ["active", "discarded"]

    # The audit page undoes the keep: the entry waits for review again.
    with _client(monkeypatch) as client:
        sign_in(client)
        page = client.get("/admin/ui/audit", params={"memory_id": waiting[0]}).text
        keep_id = undo.last_change(conn, waiting[0], "memory_keep")
        assert f'action="/admin/ui/audit/{keep_id}/undo"' in page
        token = _csrf(page)
        assert client.post(f"/admin/ui/audit/{keep_id}/undo", data={}).status_code == 403
        undone = client.post(f"/admin/ui/audit/{keep_id}/undo", data={"csrf": token}, follow_redirects=False)
        assert undone.status_code == 303
        assert knowledge.get(conn, waiting[0]).status == "pending"
        again = client.post(f"/admin/ui/audit/{keep_id}/undo", data={"csrf": token}, follow_redirects=False)
        assert again.status_code == 409 and "undone already" in again.text


def test_the_audit_page_offers_undo_for_a_forget_only_while_it_is_held(seeded, monkeypatch, settings):
    import time

    from lib.memory import forget

    conn = connect(_db(monkeypatch))
    held = knowledge.add(conn, settings, "Alice keeps her bees in Sintra", owner_user_id=ALICE, source="cli")
    plain = knowledge.add(conn, settings, "Alice's hives face south", owner_user_id=ALICE, source="cli")
    from_why = forget.forget_memory(conn, settings, ALICE, held, "why", hold_until_undo=time.time())["audit_id"]
    from_cli = forget.forget_memory(conn, settings, ALICE, plain, "cli")["audit_id"]
    with _client(monkeypatch) as client:
        sign_in(client)
        page = client.get("/admin/ui/audit").text
        assert f'action="/admin/ui/audit/{from_why}/undo"' in page
        assert f'action="/admin/ui/audit/{from_cli}/undo"' not in page
        undone = client.post(f"/admin/ui/audit/{from_why}/undo", data={"csrf": _csrf(page)}, follow_redirects=False)
        assert undone.status_code == 303
    assert knowledge.get(conn, held).active and knowledge.get(conn, plain) is None
