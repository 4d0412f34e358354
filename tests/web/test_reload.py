"""Config changes reach the running server without a restart (lib/web/reload.py).

With the server running, `ash init --owner ID` wrote the owner, and the owner stayed refused
until a restart, with nothing saying so. A real `ash serve` against a loopback Bot API and model:
the file is changed as `ash init` changes it, and the next message is answered; what cannot change
while serving is named instead of silently ignored."""

from __future__ import annotations

import re

import pytest

from lib.commands.init_files import update_config
from tests.support.faults import AshServer, Upstream, private_text, server_env, wait_until, write_config

pytestmark = pytest.mark.slow
STRANGER = 424242
ADMIN = {"authorization": "Bearer admin-token-for-tests"}


def test_an_owner_written_while_serving_is_answered_without_a_restart(tmp_path):
    home = tmp_path / "home"
    config = write_config(home)
    config.write_text(re.sub(r"(?m)^owner = .*$", "", config.read_text()))
    with Upstream() as upstream:
        server = AshServer(home, server_env(home, upstream)).start()
        try:
            assert server.post_update(private_text(1, "hello", STRANGER)).status_code == 200
            wait_until(lambda: upstream.texts_to(STRANGER), 60, "the stranger's refusal")
            assert "Your Telegram id is 424242" in upstream.texts_to(STRANGER)[0]

            update_config(config, {(None, "owner"): STRANGER})  # what `ash init --owner` writes
            wait_until(lambda: "configuration reloaded: owner changed" in server.output(), 60, "the reload")
            assert server.post_update(private_text(2, "hello again", STRANGER)).status_code == 200
            wait_until(lambda: upstream.texts_to(STRANGER)[1:] == ["Echo: hello again"], 60, "the whole answer")
        finally:
            server.stop()


def test_admin_reload_applies_what_it_can_and_names_what_waits_for_a_restart(tmp_path):
    home = tmp_path / "home"
    config = write_config(home)
    server = AshServer(home, server_env(home, None)).start()
    try:
        update_config(config, {("server", "port"): 18001, ("default_llm", "model"): "claude-haiku-4-5"})
        answer = server.http.post("/admin/reload", headers=ADMIN)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert "default_llm.model" in body["changed"] and "server.port" in body["changed"]
        assert body["restart_needed"] == ["server.port"]
        assert server.http.get("/healthz").status_code == 200  # still on its port

        config.write_text(config.read_text().replace("allowed_users = []", "allowed_users = [0]"))
        refused = server.http.post("/admin/reload", headers=ADMIN)
        assert refused.status_code == 400 and "allowed_users[0]" in refused.json()["detail"]
        assert server.http.post("/admin/reload", headers={"authorization": "Bearer wrong"}).status_code == 401
    finally:
        server.stop()
