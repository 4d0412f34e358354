"""The web view at /admin/ui: server-rendered pages over the same database as the admin API.

sessions: sign-in, the session cookie and CSRF tokens (no template engine, so every request can
check them cheaply); render: the Jinja2 environment and the security headers every page sends;
pages: what each page shows. Jinja2 and the templates load on the first /admin/ui request only:
start-up and the webhook never pay for them (tests/web/test_cold_start.py).
"""
