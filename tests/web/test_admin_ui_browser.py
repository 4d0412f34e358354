"""The web view in a real browser: headless Chromium (Debian's package, driven by Playwright)
against a real `ash serve` (granian) over a real SQLite file. It signs in, looks at every page,
searches, forgets a memory (the database is checked), and signs out; without a session nothing
is shown, and a write without the CSRF token is refused. The page's Content-Security-Policy must
hold: the browser reports no violation. A screenshot of each page is saved in
build/ui-screenshots/ (the README shows one)."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lib.db import connect
from lib.memory import knowledge, store
from lib.migrations import migrate
from tests.support.faults import AshServer, server_env, write_config
from tests.support.paths import REPO

ADMIN = "admin-token-for-tests"  # what server_env gives the server
ALICE = "408258968"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = REPO / "build" / "ui-screenshots"


def _chromium_or_skip() -> str:
    if Path(CHROMIUM).exists():
        return CHROMIUM
    message = "Debian's chromium is not installed (.ci/debian.sh installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)  # CI must run the browser test, never skip it
    pytest.skip(message)


def seed(home: Path) -> dict:
    """Alice, three facts, a conversation, and a month of model usage."""
    write_config(home)
    from lib.config import load_settings

    os.environ["ASH_HOME"] = str(home)
    settings = load_settings()
    conn = connect(settings.database_path)
    migrate(conn)
    store.touch_profile(conn, ALICE, "alice", "Alice Martins")
    store.set_notes(conn, ALICE, "- Keeps bees on her roof.")
    ids = {
        text: knowledge.add(conn, settings, text, owner_user_id=ALICE, source="cli")
        for text in ("Alice keeps bees on her roof", "Alice's sister lives in Porto", "Alice is allergic to walnuts")
    }
    session = store.open_session(conn, "telegram", ALICE, ALICE, "private")
    store.add_message(conn, session.id, ALICE, "user", "Can I eat the walnut cake at the party?")
    store.add_message(conn, session.id, ALICE, "assistant", "Better not: you told me you are allergic to walnuts.")
    today = datetime.now(UTC)
    for day in range(0, 30, 3):
        stamp = (today - timedelta(days=day)).strftime("%Y-%m-%dT12:00:00.000Z")
        conn.execute(
            "INSERT INTO usage (created_at, user_id, provider, model, input_tokens, output_tokens, cost_usd) "
            "VALUES (?, ?, 'anthropic', 'claude-sonnet-4-6', ?, ?, ?)",
            (stamp, ALICE, 1000 + day * 50, 200, 0.004 + day * 0.001),
        )
    conn.close()
    return {"db": settings.database_path, "walnuts": ids["Alice is allergic to walnuts"], "session": session.id}


@pytest.fixture
def server(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    seeded = seed(home)
    monkeypatch.setenv("ASH_HOME", str(home))
    # Telegram at a closed local port: nothing leaves the machine.
    ash = AshServer(home, server_env(home, None, TELEGRAM_API_BASE="http://127.0.0.1:9")).start()
    yield ash, seeded
    ash.stop()


def test_sign_in_search_forget_and_sign_out_in_chromium(server):
    from playwright.sync_api import expect, sync_playwright

    ash, seeded = server
    base = f"http://127.0.0.1:{ash.port}"
    SHOTS.mkdir(parents=True, exist_ok=True)
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=_chromium_or_skip(), headless=True, args=args)
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        page = context.new_page()
        violations: list[str] = []
        page.on("console", lambda m: "Content Security Policy" in m.text and violations.append(m.text))
        page.on("dialog", lambda dialog: dialog.accept())  # the "Forget for good?" confirmation

        # Without a session every page leads to the sign-in form and shows nothing else.
        page.goto(f"{base}/admin/ui/people/{ALICE}")
        assert page.url == f"{base}/admin/ui/signin"
        expect(page.get_by_label("Admin token")).to_be_visible()
        assert "walnuts" not in page.content()
        page.screenshot(path=SHOTS / "signin.png")

        page.get_by_label("Admin token").fill("not-the-token")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_have_text("That is not the admin token.")
        page.get_by_label("Admin token").fill(ADMIN)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="People")).to_be_visible()
        # The session cookie is invisible to scripts and bound to the web view's path.
        [cookie] = [c for c in context.cookies() if c["name"] == "ash_ui"]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/admin/ui"
        assert ADMIN not in cookie["value"] and page.evaluate("document.cookie") == ""
        page.screenshot(path=SHOTS / "people.png")

        page.get_by_role("link", name="Alice Martins").click()
        expect(page.locator("td.content")).to_have_count(3)
        page.get_by_role("searchbox", name="Search their memories").fill("walnuts")
        page.get_by_role("button", name="Search").click()
        expect(page.locator("td.content")).to_have_text(["Alice is allergic to walnuts"])
        page.screenshot(path=SHOTS / "person-search.png", full_page=True)

        row = page.locator(f"#memory-{seeded['walnuts']}")
        row.get_by_role("button", name="Forget").click()
        expect(page.get_by_role("status")).to_have_text("Forgotten.")
        expect(page.locator("td.content")).to_have_count(2)
        page.screenshot(path=SHOTS / "person.png", full_page=True)
        conn = connect(seeded["db"])
        assert knowledge.get(conn, seeded["walnuts"]) is None
        [(actor, action)] = conn.execute(
            "SELECT actor, action FROM audit_log WHERE action = 'forget_memory'"
        ).fetchall()
        assert (actor, action) == ("admin:ui", "forget_memory")

        # Edit saves a new version that supersedes the old one (kept, shown as replaced).
        porto = page.locator("tr", has_text="Alice's sister lives in Porto")
        porto.get_by_text("Edit").click()
        porto.get_by_role("textbox").fill("Alice's sister lives in Lisbon")
        porto.get_by_role("button", name="Save as a new version").click()
        expect(page.get_by_role("status")).to_contain_text("Saved as a new version")
        [(old_id, new_id)] = conn.execute(
            "SELECT id, superseded_by FROM memories WHERE content = ?", ("Alice's sister lives in Porto",)
        ).fetchall()
        assert knowledge.get(conn, new_id).content == "Alice's sister lives in Lisbon"
        expect(page.locator(f"#memory-{old_id}")).to_contain_text(f"replaced by #{new_id}")

        page.goto(f"{base}/admin/ui/sessions/{seeded['session']}")
        expect(page.locator("ol.messages li")).to_have_count(2)
        page.screenshot(path=SHOTS / "session.png", full_page=True)

        page.goto(f"{base}/admin/ui/audit?memory_id={seeded['walnuts']}")
        expect(page.locator("tbody tr")).to_have_count(2)  # memory_add by cli, forget_memory by admin:ui
        assert "walnuts" not in page.locator("main").inner_text()  # the trail keeps no forgotten text
        page.screenshot(path=SHOTS / "audit.png", full_page=True)

        page.goto(f"{base}/admin/ui/usage")
        expect(page.locator("svg.chart rect.bar")).to_have_count(30)
        page.screenshot(path=SHOTS / "usage.png", full_page=True)

        # A write without the page's CSRF token is refused, even with the session cookie.
        status = page.evaluate(
            """async (id) => (await fetch(`/admin/ui/memories/${id}/forget`, {method: "POST",
                 headers: {"content-type": "application/x-www-form-urlencoded"}, body: "csrf=forged"})).status""",
            seeded["walnuts"] - 2,  # the bees, still there
        )
        assert status == 403
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 3

        page.goto(f"{base}/admin/ui")
        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_label("Admin token")).to_be_visible()
        page.goto(f"{base}/admin/ui/audit")
        assert page.url == f"{base}/admin/ui/signin"
        assert violations == []
        browser.close()
    revoked = conn.execute("SELECT count(*) FROM ui_sessions WHERE revoked_at IS NULL").fetchone()[0]
    assert revoked == 0
    conn.close()
