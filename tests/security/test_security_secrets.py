"""Secrets never reach the logs: a real `ash serve` with every secret set to a recognizable value
serves a turn, a failing Telegram call, a refused model key, wrong admin and webhook secrets; its
captured stdout and stderr must contain none of the values (the Bot API URL carries the token).
"""

from __future__ import annotations

import pytest

from tests.support.database import inbox_status
from tests.support.faults import (
    AshServer,
    Failure,
    Upstream,
    private_text,
    server_env,
    wait_until,
    write_config,
)
from tests.support.telegram import load

pytestmark = pytest.mark.slow

KEY_REFUSED = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
SECRETS = {
    "TELEGRAM_BOT_TOKEN": "987654321:AAtgSECRETtokenVALUE_recognizable42",
    "TELEGRAM_WEBHOOK_SECRET": "whSECRETvalue-recognizable-43",
    "ANTHROPIC_API_KEY": "sk-ant-SECRETanthropic-recognizable-44",
    "OPENAI_API_KEY": "sk-SECRETopenai-recognizable-45",
    "BRAVE_SEARCH_API_KEY": "braveSECRET-recognizable-46",
    "ASH_ADMIN_TOKEN": "adminSECRET-recognizable-47",
}


@pytest.mark.parametrize("verbose", [False, True], ids=["default", "verbose"])
def test_no_secret_value_appears_in_the_server_output(ash_home, verbose):
    write_config(ash_home)
    db = ash_home / "ash.db"
    secret = SECRETS["TELEGRAM_WEBHOOK_SECRET"]
    admin = SECRETS["ASH_ADMIN_TOKEN"]
    with Upstream() as upstream:
        server = AshServer(ash_home, server_env(ash_home, upstream, **SECRETS), verbose=verbose).start()
        try:
            # A normal turn: getMe/typing/sendMessage/edits with the token in every URL.
            assert server.post_update(private_text(2001, "hello"), secret=secret).status_code == 200
            wait_until(lambda: inbox_status(db, 2001) == "done", what="the first turn")
            # The model refuses the key (401): logged as a provider error.
            upstream.fail["anthropic"] = [
                Failure(
                    401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
                )
            ]
            assert server.post_update(private_text(2002, "again"), secret=secret).status_code == 200
            wait_until(lambda: inbox_status(db, 2002) in ("done", "failed"), what="the refused-key turn")
            # Telegram fails: 500s, then chat not found.
            chat_not_found = load("sendMessage_400_chat_not_found.json")
            upstream.fail["sendMessage"] = [Failure(500, {"ok": False, "error_code": 500, "description": "boom"})] * 4
            upstream.fail["sendMessage"].append(Failure(400, chat_not_found))
            assert server.post_update(private_text(2003, "third"), secret=secret).status_code == 200
            wait_until(lambda: upstream.count("sendMessage") >= 5, what="the failing Telegram calls")
            # Wrong secrets at the doors.
            assert server.post_update(private_text(2004, "x"), secret=secret[:-1] + "X").status_code == 401
            assert server.http.get("/admin/stats", headers={"authorization": f"Bearer {admin}x"}).status_code == 401
            assert server.http.get("/admin/stats", headers={"authorization": f"Bearer {admin}"}).status_code == 200
            assert server.http.post("/admin/tick", headers={"authorization": f"Bearer {admin}"}).status_code == 200
        finally:
            server.stop()
    output = server.output()
    # The request log lines that would carry the token were written, with the token masked.
    assert "/bot<token>/sendMessage" in output
    assert upstream.count("sendMessage") >= 5
    leaked = [name for name, value in SECRETS.items() if value in output]
    # The numeric bot id is public (it is in every update); the part after the colon is the secret.
    token_secret = SECRETS["TELEGRAM_BOT_TOKEN"].split(":", 1)[1]
    if token_secret in output:
        leaked.append("TELEGRAM_BOT_TOKEN (secret part)")
    assert not leaked, f"secrets in the log: {leaked}\n{output[-3000:]}"
