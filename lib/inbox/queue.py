"""The durable update inbox: store once, claim one chat at a time in order, lease, finish, prune.

Every state change is one conditional UPDATE, so two server processes on one database never
claim the same update and never run two updates of one chat at once. A claim is a lease:
the holder renews it while a turn runs; once it expires anyone may take the update over.
Work Ash queues itself (a fired scheduled task) is a row like any other, with an update_id of
its own space (enqueue_own), so it gets the same guarantees.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import dataclass

import apsw

from lib.db import now_iso, one, rows, write, write_rows

# Kinds Ash never answers. They are stored all the same (a repeat delivery is then recognised and
# the inbox shows what arrived), but already finished: a bot in a busy channel never wakes the
# inbox worker for them. They are the Bot API 10.1 update types lib/telegram/kinds.py
# UNHANDLED_UPDATES lists (with why), "service" (a message saying something happened in the
# chat, such as a member joining) and "unknown" (an update that did not decode).
UNANSWERED_KINDS = frozenset(
    {
        "edited_message",
        "channel_post",
        "edited_channel_post",
        "business_connection",
        "business_message",
        "edited_business_message",
        "deleted_business_messages",
        "guest_message",
        "message_reaction",
        "message_reaction_count",
        "inline_query",
        "chosen_inline_result",
        "shipping_query",
        "pre_checkout_query",
        "purchased_paid_media",
        "poll",
        "poll_answer",
        "chat_member",
        "chat_join_request",
        "chat_boost",
        "removed_chat_boost",
        "managed_bot",
        "service",
        "unknown",
    }
)

# Work a scheduled task queued when it fell due (lib/inbox/scheduler.py).
SCHEDULED = "scheduled"

STORE_SQL = """
INSERT OR IGNORE INTO inbox (bot_id, update_id, chat_key, kind, payload, received_at, status, done_at, last_error)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

# The oldest claimable update whose chat has nothing earlier still open. A chat whose head is
# claimed under a live lease therefore offers nothing. One statement: atomic across processes.
# INDEXED BY pins the partial indexes of open rows (m004): the planner would otherwise walk the
# primary key through every finished row.
#
# "Earlier" is the chat's running order (m009): by coalesce(follows, update_id), then by
# update_id descending. A Telegram update's position is its update_id; work Ash queued itself
# (update_id < 0) takes the position of the last Telegram update stored before it, so it runs
# after what its chat had received, before what arrives next, and never beside either.
CLAIM_SQL = """
UPDATE inbox SET status = 'claimed', claimed_by = :worker, lease_until = :lease, attempts = attempts + 1
WHERE bot_id = :bot AND update_id = (
    SELECT i.update_id FROM inbox AS i INDEXED BY inbox_open
    WHERE i.bot_id = :bot AND i.status IN ('pending', 'claimed')
      AND (
        (i.status = 'pending' AND coalesce(i.not_before, 0) <= :now)
        OR (i.status = 'claimed' AND i.lease_until < :now)
      )
      AND NOT EXISTS (
        SELECT 1 FROM inbox AS e INDEXED BY inbox_open_chat
        WHERE e.bot_id = i.bot_id AND e.chat_key = i.chat_key
          AND coalesce(e.follows, e.update_id) <= coalesce(i.follows, i.update_id)
          AND (coalesce(e.follows, e.update_id) < coalesce(i.follows, i.update_id) OR e.update_id > i.update_id)
          AND e.status IN ('pending', 'claimed')
      )
    ORDER BY i.update_id
    LIMIT 1
)
RETURNING update_id, chat_key, kind, payload, attempts, reply_chat_id, reply_message_id, reply_message_ids, received_at,
    answer
"""

# Work Ash queues itself: see CLAIM_SQL for where it runs. Not OR IGNORE: an id already taken
# is a bug to raise, never a row to drop.
ENQUEUE_OWN_SQL = """
INSERT INTO inbox (bot_id, update_id, chat_key, kind, payload, received_at, follows)
VALUES (:bot, :update_id, :chat_key, :kind, :payload, :now, coalesce((
    SELECT update_id FROM inbox WHERE bot_id = :bot AND update_id >= 0 ORDER BY update_id DESC LIMIT 1
), 0))
"""

# Updates Ash never answers (channel posts, edits, ...) are skipped in bulk rather than claimed
# one by one: a flood of them costs one write, not three per update.
SKIP_KINDS_SQL = """
UPDATE inbox SET status = 'skipped', done_at = :now, last_error = 'not answered: ' || kind
WHERE bot_id = :bot AND update_id IN (
    SELECT update_id FROM inbox INDEXED BY inbox_open
    WHERE bot_id = :bot AND status IN ('pending', 'claimed') AND status = 'pending'
      AND kind IN (SELECT value FROM json_each(:kinds))
)
RETURNING update_id, kind
"""

RENEW_SQL = """
UPDATE inbox SET lease_until = ? WHERE bot_id = ? AND update_id = ? AND status = 'claimed' AND claimed_by = ?
"""

RELEASE_SQL = """
UPDATE inbox SET status = 'pending', claimed_by = NULL, lease_until = NULL,
    attempts = max(attempts - :uncount, 0), not_before = :not_before, last_error = coalesce(:error, last_error)
WHERE bot_id = :bot AND update_id = :update_id AND status = 'claimed' AND claimed_by = :worker
"""

FINISH_SQL = """
UPDATE inbox SET status = :status, claimed_by = NULL, lease_until = NULL, done_at = :done_at,
    last_error = coalesce(:error, last_error)
WHERE bot_id = :bot AND update_id = :update_id AND status = 'claimed' AND claimed_by = :worker
"""

RELEASE_ALL_SQL = """
UPDATE inbox SET status = 'pending', claimed_by = NULL, lease_until = NULL, attempts = max(attempts - 1, 0)
WHERE bot_id = ? AND status = 'claimed' AND claimed_by = ?
"""

RECORD_REPLY_SQL = """
UPDATE inbox SET reply_chat_id = ?, reply_message_id = ?, reply_message_ids = ?
WHERE bot_id = ? AND update_id = ? AND status = 'claimed' AND claimed_by = ?
"""

RECORD_ANSWER_SQL = """
UPDATE inbox SET answer = ? WHERE bot_id = ? AND update_id = ? AND status = 'claimed' AND claimed_by = ?
"""

PRUNE_SQL = """
DELETE FROM inbox WHERE status IN ('done', 'failed', 'skipped') AND done_at < ?
"""

CLAIMED_BY_SQL = "SELECT DISTINCT claimed_by FROM inbox WHERE bot_id = ? AND status = 'claimed'"

PENDING_STOPS_SQL = """
SELECT update_id, chat_key, payload FROM inbox
WHERE bot_id = ? AND status = 'pending' AND kind = 'stop' AND chat_key = ?
ORDER BY update_id
"""

TAKE_PENDING_SQL = """
UPDATE inbox SET status = 'done', done_at = ?, last_error = ?
WHERE bot_id = ? AND update_id = ? AND status = 'pending'
"""

ALBUM_SQL = """
SELECT update_id, payload, received_at FROM inbox
WHERE bot_id = ? AND chat_key = ? AND kind = 'album' AND status = 'pending' AND update_id > ?
ORDER BY update_id
"""

COUNTS_SQL = "SELECT status, count(*) AS n FROM inbox GROUP BY status"


@dataclass(frozen=True)
class Claim:
    """An update this worker holds under a lease."""

    update_id: int
    chat_key: str | None
    kind: str
    payload: bytes
    attempts: int
    reply_chat_id: str | None
    reply_message_id: int | None
    reply_message_ids: str
    received_at: str
    # The whole answer, once a run of this update got as far as showing it (record_answer).
    answer: str | None = None

    @property
    def reply_ids(self) -> list[int]:
        """Every message the turn had sent before, in order."""
        ids = json.loads(self.reply_message_ids or "[]")
        return ids or ([self.reply_message_id] if self.reply_message_id is not None else [])


def worker_id() -> str:
    """host:pid:random, so a restarted process can tell its dead predecessor's claims apart."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def store_params(
    bot_id: int, update_id: int, chat_key: str | None, kind: str, payload: bytes, received_at: str
) -> tuple:
    """STORE_SQL's parameters: pending for the inbox worker, or already skipped (UNANSWERED_KINDS)."""
    if kind in UNANSWERED_KINDS:
        note = f"not answered: {kind}"
        return (bot_id, update_id, chat_key, kind, payload, received_at, "skipped", received_at, note)
    return (bot_id, update_id, chat_key, kind, payload, received_at, "pending", None, None)


def store(conn: apsw.Connection, bot_id: int, update_id: int, chat_key: str | None, kind: str, payload: bytes) -> bool:
    """Keep an update; False when (bot_id, update_id) was already stored (a repeat delivery)."""
    return write(conn, STORE_SQL, store_params(bot_id, update_id, chat_key, kind, payload, now_iso())) > 0


def enqueue_own(conn: apsw.Connection, bot_id: int, own_id: int, chat_key: str, kind: str, payload: bytes) -> int:
    """Queue work Ash made itself behind everything its chat has received; returns its update_id.

    `own_id` is a positive number never handed out twice (a schedule run's id); the row's
    update_id is its negative. Telegram's update_ids are never negative (the webhook refuses
    them), so the two spaces never meet: a made-up id in Telegram's sequential space would one
    day be taken by a real update, which would then be dropped as a repeat. Runs inside the
    caller's transaction."""
    if own_id <= 0:
        raise ValueError(f"own ids are positive, got {own_id}")
    params = {"bot": bot_id, "update_id": -own_id, "chat_key": chat_key, "kind": kind, "payload": payload}
    conn.execute(ENQUEUE_OWN_SQL, {**params, "now": now_iso()})
    return -own_id


def claim(
    conn: apsw.Connection, bot_id: int, worker: str, lease_seconds: float, now: float | None = None
) -> Claim | None:
    """Claim the next update that may run now, or None."""
    now = time.time() if now is None else now
    found = write_rows(conn, CLAIM_SQL, {"worker": worker, "lease": now + lease_seconds, "bot": bot_id, "now": now})
    return Claim(**found[0]) if found else None


def skip_kinds(conn: apsw.Connection, bot_id: int) -> list[dict]:
    """Mark pending updates of UNANSWERED_KINDS skipped (rows stored pending by an older version,
    or before a kind joined the list); returns their ids and kinds."""
    kinds = json.dumps(sorted(UNANSWERED_KINDS))
    return write_rows(conn, SKIP_KINDS_SQL, {"now": now_iso(), "bot": bot_id, "kinds": kinds})


def renew(conn: apsw.Connection, bot_id: int, update_id: int, worker: str, lease_seconds: float, now: float) -> bool:
    """Extend this worker's lease from `now`; False when it was lost (expired and taken over)."""
    return write(conn, RENEW_SQL, (now + lease_seconds, bot_id, update_id, worker)) > 0


def release(
    conn: apsw.Connection,
    bot_id: int,
    update_id: int,
    worker: str,
    *,
    delay: float = 0.0,
    error: str | None = None,
    count_attempt: bool = True,
    now: float | None = None,
) -> bool:
    """Give an update back: pending again after `delay` seconds (a retry or a wait)."""
    changed = write(
        conn,
        RELEASE_SQL,
        {
            "uncount": 0 if count_attempt else 1,
            "not_before": (time.time() if now is None else now) + delay if delay else None,
            "error": error,
            "bot": bot_id,
            "update_id": update_id,
            "worker": worker,
        },
    )
    return changed > 0


def finish(
    conn: apsw.Connection, bot_id: int, update_id: int, worker: str, status: str = "done", error: str | None = None
) -> bool:
    """Mark a claimed update done, failed or skipped; False when this worker no longer holds it."""
    changed = write(
        conn,
        FINISH_SQL,
        {
            "status": status,
            "done_at": now_iso(),
            "error": error,
            "bot": bot_id,
            "update_id": update_id,
            "worker": worker,
        },
    )
    return changed > 0


def release_all(conn: apsw.Connection, bot_id: int, worker: str) -> int:
    """Release every claim this worker holds (shutdown); the attempt is not counted."""
    return write(conn, RELEASE_ALL_SQL, (bot_id, worker))


RELEASE_HOLDER_SQL = """
UPDATE inbox SET status = 'pending', claimed_by = NULL, lease_until = NULL
WHERE bot_id = ? AND status = 'claimed' AND claimed_by = ?
"""


def release_dead(conn: apsw.Connection, bot_id: int, me: str) -> int:
    """Release claims of dead processes on this host at once instead of waiting out their lease."""
    host, pid, token = me.rsplit(":", 2)
    freed = 0
    for (holder,) in conn.execute(CLAIMED_BY_SQL, (bot_id,)).fetchall():
        try:
            their_host, their_pid, their_token = holder.rsplit(":", 2)
        except (AttributeError, ValueError):
            continue
        if their_host != host or their_token == token:
            continue
        if their_pid != pid and _alive(int(their_pid)):
            continue
        freed += write(conn, RELEASE_HOLDER_SQL, (bot_id, holder))
    return freed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def record_reply(
    conn: apsw.Connection, bot_id: int, update_id: int, worker: str, chat_id: str, message_ids: list[int]
) -> bool:
    """Remember the messages a turn has sent, so a resumed turn edits them instead of sending more."""
    params = (chat_id, message_ids[0], json.dumps(message_ids), bot_id, update_id, worker)
    return write(conn, RECORD_REPLY_SQL, params) > 0


def record_answer(conn: apsw.Connection, bot_id: int, update_id: int, worker: str, answer: str) -> bool:
    """Keep a turn's whole answer before it is shown as final: if the turn is interrupted after
    this, the next run shows it again instead of asking the model (so nobody sees a complete
    answer replaced). `answer` is the channel's own encoding of it."""
    return write(conn, RECORD_ANSWER_SQL, (answer, bot_id, update_id, worker)) > 0


def pending_stops(conn: apsw.Connection, bot_id: int, chat_key: str) -> list[dict]:
    """/stop updates waiting behind a running turn of this chat."""
    return rows(conn, PENDING_STOPS_SQL, (bot_id, chat_key))


def take_pending(conn: apsw.Connection, bot_id: int, update_id: int, note: str) -> bool:
    """Mark a pending update done out of order (a /stop, an album sibling); False if gone."""
    return write(conn, TAKE_PENDING_SQL, (now_iso(), note, bot_id, update_id)) > 0


def album_siblings(conn: apsw.Connection, bot_id: int, chat_key: str, after: int) -> list[dict]:
    """Later pending album updates of the chat (the caller filters by media_group_id)."""
    return rows(conn, ALBUM_SQL, (bot_id, chat_key, after))


def prune(conn: apsw.Connection, retention_days: float, now: float | None = None) -> int:
    """Delete finished rows older than the retention (Telegram may reuse ids after a week)."""
    from lib.db import iso

    cutoff = iso((time.time() if now is None else now) - retention_days * 86400)
    return write(conn, PRUNE_SQL, (cutoff,))


# Finished updates sent by one person (any update type carries the sender as `<type>.from.id`).
# Their payloads hold what the person wrote; the rows themselves stay so repeats stay no-ops.
SCRUB_USER_SQL = """
UPDATE inbox SET payload = CAST('{}' AS BLOB)
WHERE status IN ('done', 'failed', 'skipped') AND json_valid(CAST(payload AS TEXT)) AND EXISTS (
    SELECT 1 FROM json_each(CAST(inbox.payload AS TEXT)) AS part
    WHERE part.type = 'object' AND json_extract(part.value, '$.from.id') = CAST(:user_id AS INTEGER)
)
"""


def scrub_user(conn: apsw.Connection, user_id: str) -> int:
    """Blank the stored payloads of a person's finished updates (part of forgetting them)."""
    if not user_id.lstrip("-").isdigit():
        return 0
    return write(conn, SCRUB_USER_SQL, {"user_id": user_id})


def counts(conn: apsw.Connection) -> dict[str, int]:
    """Rows per status."""
    return {row["status"]: row["n"] for row in rows(conn, COUNTS_SQL)}


def get(conn: apsw.Connection, bot_id: int, update_id: int) -> dict | None:
    """One inbox row."""
    return one(conn, "SELECT * FROM inbox WHERE bot_id = ? AND update_id = ?", (bot_id, update_id))
