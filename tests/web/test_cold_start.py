"""What importing the app loads: nothing slow that a webhook does not need (cold start < 1 s)."""

import subprocess
import sys

CHECK = """
import sys, app
slow = [m for m in ("pydantic", "litestar.plugins.pydantic", "anthropic", "openai", "numpy", "onnxruntime", "docker",
                   "mcp", "mcp_types", "lib.mcp.server",
                   # The web view's template engine and pages, and /why's buttons: on first use only.
                   "jinja2", "markupsafe", "lib.web.ui.pages", "lib.conversation.why")
        if m in sys.modules]
assert not slow, slow
# What the lifespan loads to start serving: still no numpy (the memory index), no agent loop, no
# restore machinery; those load with the first turn, file or restore.
import lib.inbox.group_commit, lib.memory.service, lib.telegram.updates
late = [m for m in ("numpy", "lib.agent.steps", "lib.telegram.approvals", "lib.memory.documents",
                    "lib.memory.search.index", "lib.web.restore", "lib.inbox.restore", "pypdf", "trafilatura")
        if m in sys.modules]
assert not late, late
import pydantic  # still importable for the LLM SDKs that need it
print("ok", len(app.app.routes))
"""


def test_importing_the_app_skips_slow_modules_and_leaves_pydantic_importable():
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")


def test_start_up_builds_no_http_client_until_one_is_needed(db_path, monkeypatch):
    # Building one loads the CA bundle (~50 ms); the first answer to Telegram must not wait for it.
    # The warm-up thread builds it after start-up, off the loop (tests/web/test_first_turn.py);
    # without it, the lifespan itself builds none.
    from litestar.testing import TestClient

    from app import app
    from lib.web import lifespan
    from lib.web.state import get_runtime

    monkeypatch.setattr(lifespan, "start_warmup", lambda runtime: None)
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw")
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        runtime = get_runtime(app)
        assert runtime.http_client is None
        assert runtime.http is runtime.http  # built once, on first use, then kept
