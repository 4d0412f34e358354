"""Property-based fuzzing of POST /telegram/webhook through the real app and a real SQLite file.

Whatever the body (arbitrary JSON, nesting 5,000 deep, huge strings, invalid UTF-8, wrong
types), the answer is 200, 400 or 413: never a 500, never an unhandled exception (the test
client re-raises them), and the process stays healthy. A 200 always means a stored row.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient

from tests.support.database import inbox_row
from tests.support.telegram import SECRET, load

HEADERS = {"x-telegram-bot-api-secret-token": SECRET, "content-type": "application/json"}
ALLOWED = {200, 400, 413}
LIMIT = 64 * 1024


# Named functions, never lambdas, in the strategies: to describe a lambda Hypothesis reads its
# source and walks sys.modules, which the app's warm-up thread changes as it imports the SDKs
# ("dictionary changed size during iteration", seen once beside two CPU hogs).
def _containers(children):
    return st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50),
    _containers,
    max_leaves=30,
)
update_ids = st.one_of(
    st.integers(),
    st.integers(min_value=2**63 - 10, max_value=2**70),
    st.text(max_size=10),
    st.floats(),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
)
telegram_keys = st.sampled_from(["message", "edited_message", "channel_post", "callback_query", "my_chat_member"])


def deep(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


@st.composite
def bodies(draw) -> bytes:
    kind = draw(st.integers(0, 6))
    if kind == 0:  # any JSON at all
        return json.dumps(draw(json_values)).encode()
    if kind == 1:  # a Telegram-shaped object with wrong types everywhere
        update = {"update_id": draw(update_ids), draw(telegram_keys): draw(json_values)}
        return json.dumps(update, allow_nan=True).encode()
    if kind == 2:  # a real update with one field replaced by junk
        update = load("update_message_private_text_2.json")
        field = draw(st.sampled_from(["text", "chat", "from", "date", "entities", "message_id"]))
        update["message"][field] = draw(json_values)
        update["update_id"] = draw(st.integers(1, 2**40))
        return json.dumps(update).encode()
    if kind == 3:  # raw bytes, mostly not UTF-8
        return draw(st.binary(max_size=200))
    if kind == 4:  # invalid UTF-8 inside an otherwise valid update
        junk = draw(st.binary(min_size=1, max_size=20).filter(_not_utf8))
        return b'{"update_id": 7, "message": {"text": "' + junk + b'"}}'
    if kind == 5:  # deep nesting, bare or under a valid update_id
        depth = draw(st.sampled_from([999, 1000, 1001, 5000]))
        if draw(st.booleans()):
            return deep(depth).encode()
        return ('{"update_id": 8, "message": {"x": ' + deep(depth) + "}}").encode()
    size = draw(st.sampled_from([LIMIT - 100, LIMIT + 1, 4 * LIMIT]))  # huge strings
    return json.dumps({"update_id": 9, "message": {"text": "\U0001f600" * (size // 4)}}).encode()


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _not_utf8(data: bytes) -> bool:
    return not _utf8(data)


@pytest.fixture
def client(db_path, ash_home, monkeypatch):
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    (ash_home / "config.toml").write_text(f"[server]\nmax_body_bytes = {LIMIT}\n", encoding="utf-8")
    from app import app

    with TestClient(app) as test_client:
        # The warm-up thread imports the SDKs a moment after start; let it finish before
        # Hypothesis starts describing strategies (see _containers).
        test_client.blocking_portal.call(test_client.app.state.runtime.ready)
        yield test_client


def _stored(client, update_id: int) -> bool:
    return inbox_row(client.app.state.runtime.settings.database_path, update_id) is not None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies())
def test_webhook_never_answers_500_whatever_the_body(client, body: bytes):
    response = client.post("/telegram/webhook", content=body, headers=HEADERS)
    assert response.status_code in ALLOWED, (response.status_code, body[:200])
    if response.status_code == 200:
        update_id = json.loads(body)["update_id"]
        assert _stored(client, update_id)


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (deep(5000).encode(), 400),
        (('{"update_id": 11, "message": {"x": ' + deep(5000) + "}}").encode(), 400),
        (b'{"update_id": "12"}', 400),
        (b'{"update_id": 1.5}', 400),
        (b'{"update_id": 99999999999999999999999}', 400),
        (b"\xff\xfe{not json", 400),
        (b'{"update_id": 13, "message": {"text": "\xc3\x28"}}', 400),
        (json.dumps({"update_id": 14, "message": {"text": "x" * (LIMIT + 1)}}).encode(), 413),
        (json.dumps({"update_id": 15, "message": ["wrong", "type"]}).encode(), 200),
    ],
    ids=[
        "nest-5000",
        "nest-5000-in-update",
        "id-str",
        "id-float",
        "id-huge",
        "bytes",
        "bad-utf8",
        "huge",
        "wrong-type",
    ],
)
def test_known_bad_bodies_get_their_status_and_the_process_stays_healthy(client, body: bytes, status: int):
    response = client.post("/telegram/webhook", content=body, headers=HEADERS)
    assert response.status_code == status
    assert client.get("/healthz").status_code == 200
    # The server still takes a good update afterwards.
    good = load("update_channel_post.json")
    assert client.post("/telegram/webhook", json=good, headers=HEADERS).status_code == 200
    assert _stored(client, good["update_id"])
