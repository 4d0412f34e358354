"""The body door (lib/web/door.py), driven as ASGI with bodies that arrive as slowly as a test
likes: credentials before bodies, a few places for bodies without one, every body whole within
`body_timeout` and `max_body_bytes`. (Against a real granian and 1,100 connections:
tests/security/test_slow_bodies_everywhere.py.)"""

from __future__ import annotations

import asyncio

import pytest
from litestar.testing import AsyncTestClient

from lib.db import connect
from lib.mcp import tokens
from lib.web.door import has_body, with_body_door
from lib.web.ui import sessions
from tests.support.memory_retrieval import open_db
from tests.support.memory_surfaces import make_settings
from tests.support.telegram import SECRET

ADMIN = "admin-token-for-door-tests"
OWNER = "1001"
PLACES = 2


class Inner:
    """The app behind the door: records the body it was handed and answers 200."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope, receive, send) -> None:
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


class Upload:
    """One request's connection: its body arrives in the pieces a test puts in `pieces`."""

    def __init__(self, path: str, length: int | None = 10, **headers: str) -> None:
        raw = [(k.lower().replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
        if length is not None:
            raw.append((b"content-length", str(length).encode()))
        self.scope = {"type": "http", "method": "POST", "path": path, "headers": raw, "client": ("192.0.2.8", 1)}
        self.pieces: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.read = 0
        self.sent: list[dict] = []
        self.reading = asyncio.Event()  # set once someone waits for the body

    async def receive(self) -> dict:
        self.reading.set()
        piece = await self.pieces.get()
        self.read += 1
        if piece is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        return {"type": "http.request", "body": piece, "more_body": True}

    async def send(self, message: dict) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int | None:
        return self.sent[0]["status"] if self.sent else None

    @property
    def closes(self) -> bool:
        return (b"connection", b"close") in self.sent[0]["headers"]


@pytest.fixture
async def door(ash_home, monkeypatch):
    """A door with PLACES open places in front of `Inner`, over the real app's state."""
    monkeypatch.setenv("ASH_ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    config = '[server]\nbody_timeout = 0.5\nmax_body_bytes = 100\n[embeddings]\nprovider = "none"\n'
    settings = make_settings(ash_home, config)
    open_db(settings).close()
    from app import app

    async with AsyncTestClient(app):
        inner = Inner()
        yield with_body_door(app, inner, "/telegram/webhook", open_bodies=PLACES), inner, app


def started(door, upload: Upload) -> asyncio.Task:
    return asyncio.create_task(door(upload.scope, upload.receive, upload.send))


async def reading(uploads: list[Upload]) -> None:
    """Until the door is reading each of these bodies (holding its place)."""
    await asyncio.wait_for(asyncio.gather(*(upload.reading.wait() for upload in uploads)), 10)


def test_a_request_carries_a_body_by_its_length_or_its_chunks():
    assert has_body({"headers": [(b"content-length", b"5")]})
    assert has_body({"headers": [(b"transfer-encoding", b"chunked")]})
    assert not has_body({"headers": [(b"content-length", b"0")]})
    assert not has_body({"headers": []})


async def test_a_body_is_handed_on_whole_and_a_slow_one_gets_408(door):
    serve, inner, _ = door
    upload = Upload("/admin/ui/signin")
    task = started(serve, upload)
    for piece in (b"csrf=", b"1&tok", b"en=x", None):
        await upload.pieces.put(piece)
    await task
    assert upload.status == 200 and inner.bodies == [b"csrf=1&token=x"]

    slow = Upload("/admin/ui/signin")
    await slow.pieces.put(b"c")  # and nothing more
    await asyncio.wait_for(serve(slow.scope, slow.receive, slow.send), 10)
    assert slow.status == 408 and slow.closes
    assert len(inner.bodies) == 1  # the route never saw it


async def test_bodies_without_a_credential_get_a_few_places_then_503_at_once(door):
    serve, _, _ = door
    holding = [Upload("/admin/ui/signin"), Upload("/somewhere/else")]
    tasks = [started(serve, upload) for upload in holding]
    await reading(holding)
    turned_away = Upload("/admin/ui/memories/1/forget")
    await serve(turned_away.scope, turned_away.receive, turned_away.send)
    assert turned_away.status == 503 and turned_away.closes and turned_away.read == 0
    # A right credential needs no place: the admin API is read beside them.
    admin = Upload("/admin/memories", Authorization=f"Bearer {ADMIN}")
    admin_task = started(serve, admin)
    await admin.pieces.put(None)
    await asyncio.wait_for(admin_task, 10)
    assert admin.status == 200
    # Once the holders are cut (408), the places are free again.
    await asyncio.wait_for(asyncio.gather(*tasks), 10)
    assert [upload.status for upload in holding] == [408, 408]
    again = Upload("/admin/ui/signin")
    task = started(serve, again)
    await again.pieces.put(None)
    await asyncio.wait_for(task, 10)
    assert again.status == 200


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/admin/memories", {"Authorization": "Bearer wrong"}),
        ("/admin/users/42/notes", {}),
        ("/mcp", {"Authorization": "Bearer ashmcp_short"}),
        ("/mcp", {"Authorization": "Bearer ashmcp_" + "u" * 43}),  # the right shape, made by no one
        ("/mcp/", {}),
    ],
)
async def test_a_wrong_or_missing_credential_is_refused_before_any_body(door, path, headers):
    serve, inner, app = door
    conn = connect(app.state.runtime.settings.database_path)
    tokens.create(conn, OWNER, name="laptop")  # MCP is on
    conn.close()
    upload = Upload(path, **headers)
    await asyncio.wait_for(serve(upload.scope, upload.receive, upload.send), 10)
    # The route answered (here: Inner's 200) from an empty body, and the connection closes.
    assert inner.bodies == [b""] and upload.read == 0 and upload.closes


async def test_right_credentials_are_read_without_a_place(door):
    serve, inner, app = door
    conn = connect(app.state.runtime.settings.database_path)
    mcp_token, _ = tokens.create(conn, OWNER, name="laptop")
    session = sessions.open_session(conn, ADMIN)
    conn.close()
    holding = [Upload("/admin/ui/signin"), Upload("/admin/ui/signin")]
    tasks = [started(serve, upload) for upload in holding]
    await reading(holding)
    for path, headers in [
        ("/admin/tick", {"Authorization": f"Bearer {ADMIN}"}),
        ("/mcp", {"Authorization": f"Bearer {mcp_token}"}),
        ("/admin/ui/memories/1/forget", {"Cookie": f"theme=dark; {sessions.COOKIE}={session}"}),
    ]:
        upload = Upload(path, **headers)
        task = started(serve, upload)
        await upload.pieces.put(b"{}")
        await upload.pieces.put(None)
        await asyncio.wait_for(task, 10)
        assert upload.status == 200, path
    assert inner.bodies == [b"{}"] * 3
    for task in tasks:
        task.cancel()


async def test_a_limited_clients_sign_in_is_refused_before_its_form(door):
    serve, inner, app = door
    limiter = app.state.auth_limiter
    for _ in range(5):
        limiter.failed("192.0.2.8")
    upload = Upload("/admin/ui/signin")
    await asyncio.wait_for(serve(upload.scope, upload.receive, upload.send), 10)
    assert inner.bodies == [b""] and upload.read == 0


async def test_a_body_over_the_limit_gets_413(door):
    serve, inner, _ = door
    declared = Upload("/admin/ui/signin", length=101)
    await asyncio.wait_for(serve(declared.scope, declared.receive, declared.send), 10)
    sent = Upload("/admin/ui/signin", length=None, Transfer_Encoding="chunked")
    task = started(serve, sent)
    await sent.pieces.put(b"x" * 101)
    await asyncio.wait_for(task, 10)
    assert (declared.status, sent.status) == (413, 413) and declared.closes and sent.closes
    assert inner.bodies == []


async def test_a_request_without_a_body_goes_straight_in(door):
    serve, inner, _ = door
    upload = Upload("/healthz", length=None)
    task = started(serve, upload)
    await upload.pieces.put(None)
    await asyncio.wait_for(task, 10)
    assert upload.status == 200 and inner.bodies == [b""]


@pytest.mark.parametrize("path", ["/telegram/webhook", "/telegram/webhook/"])
async def test_the_webhook_guards_itself_and_goes_straight_in(door, path):
    """It checks its secret before reading its body within the same limits (tests/security/
    test_slow_body.py); the door adds nothing to Telegram's hot path."""
    serve, inner, _ = door
    upload = Upload(path, X_Telegram_Bot_Api_Secret_Token="wrong")
    task = started(serve, upload)
    await reading([upload])  # the route itself reads
    await upload.pieces.put(b"{}")
    await upload.pieces.put(None)
    await asyncio.wait_for(task, 10)
    assert inner.bodies == [b"{}"] and not upload.closes
