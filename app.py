"""Ash's web app: routes, lifespan and exception handlers. Logic lives in `lib/`."""

from litestar import Litestar
from litestar.openapi import OpenAPIConfig

from handlers.admin_audit import list_audit
from handlers.admin_backup import admin_backup
from handlers.admin_export import admin_export
from handlers.admin_memories import create_memory, delete_memory, list_memories
from handlers.admin_reload import admin_reload
from handlers.admin_restore import admin_restore
from handlers.admin_schedules import cancel_schedule, list_schedules
from handlers.admin_sessions import list_sessions, session_messages
from handlers.admin_stats import admin_stats
from handlers.admin_tick import admin_tick
from handlers.admin_ui_actions import ui_discard, ui_edit, ui_forget, ui_keep, ui_undo
from handlers.admin_ui_pages import ui_audit, ui_people, ui_person, ui_session, ui_usage
from handlers.admin_ui_signin import signin, signin_page, signout
from handlers.admin_ui_static import ui_static
from handlers.admin_users import deny_user, get_user, list_users, put_user_notes
from handlers.health import healthz, readyz
from handlers.mcp_endpoint import mcp_endpoint
from handlers.telegram_webhook import WEBHOOK_PATH, handle_webhook, telegram_webhook
from lib.web.door import with_body_door
from lib.web.errors import EXCEPTION_HANDLERS
from lib.web.fast_path import with_fast_path
from lib.web.lean_app import without_pydantic_plugin
from lib.web.lifespan import lifespan
from lib.web.write_gate import with_writer_door

with without_pydantic_plugin():
    app = Litestar(
        route_handlers=[
            healthz,
            readyz,
            admin_stats,
            telegram_webhook,
            admin_tick,
            list_memories,
            create_memory,
            delete_memory,
            list_sessions,
            session_messages,
            list_users,
            get_user,
            put_user_notes,
            deny_user,
            list_schedules,
            cancel_schedule,
            admin_export,
            list_audit,
            admin_backup,
            admin_restore,
            admin_reload,
            mcp_endpoint,
            # The web view (/admin/ui): its own sign-in and session, never the bearer token.
            signin_page,
            signin,
            signout,
            ui_people,
            ui_person,
            ui_session,
            ui_audit,
            ui_usage,
            ui_forget,
            ui_edit,
            ui_keep,
            ui_discard,
            ui_undo,
            ui_static,
        ],
        lifespan=[lifespan],
        exception_handlers=EXCEPTION_HANDLERS,
        # Each route's docstring is its description at /schema and in docs/reference/http.md.
        openapi_config=OpenAPIConfig(title="Ash", version="0.1.0", use_handler_docstrings=True),
    )

# What `ash serve` runs: the writer rule and the restore gate in front (lib/web/writer.py), then
# the body door (credentials before bodies, bodies whole in time: lib/web/door.py), then
# Telegram's webhook before Litestar's router (lib/web/fast_path.py).
server = with_writer_door(
    app, with_body_door(app, with_fast_path(app, WEBHOOK_PATH, handle_webhook), WEBHOOK_PATH), WEBHOOK_PATH
)
