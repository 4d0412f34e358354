"""/timezone in Telegram: shows the sender's zone, sets it, refuses a name that is not a zone."""

from __future__ import annotations

from lib.db import connect
from lib.memory import store
from lib.telegram.updates import telegram_worker
from tests.support.telegram import deliver, echo_runner, private_text
from tests.telegram.conftest import USER


async def test_timezone_shows_sets_and_refuses_an_unknown_zone(runtime, bot, env):
    turns = []
    deliver(
        runtime,
        private_text(50, "/timezone"),
        private_text(51, "/timezone Europe/Lisbon"),
        private_text(52, "/timezone Mars/Olympus_Mons"),
        private_text(53, "/timezone"),
    )

    await telegram_worker(runtime, runner=echo_runner(turns)).drain()

    shown, set_, refused, shown_again = [m["text"] for m in bot.sent_to(USER)]
    assert shown.startswith("Your time zone is UTC (the default). Set it with /timezone")
    assert set_.startswith("Your time zone is now Europe/Lisbon: it is ")
    assert "I don't know the time zone <code>Mars/Olympus_Mons</code>" in refused
    assert shown_again.startswith("Your time zone is Europe/Lisbon.")
    assert turns == []  # answered by the command, never sent to the model
    conn = connect(env)
    assert store.get_profile(conn, str(USER)).timezone == "Europe/Lisbon"
    conn.close()
