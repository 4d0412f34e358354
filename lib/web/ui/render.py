"""Pages as HTML: the Jinja2 environment (autoescaped, loaded on first use) and the headers
every web view response sends.

The Content-Security-Policy allows scripts, styles and images from the app itself only and
nothing inline: a stored memory that holds `<script>` is escaped by the template, and would not
run even if it were not. No CDN: the assets are served from lib/web/ui/static by the app.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

HERE = Path(__file__).parent
STATIC = HERE / "static"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
ASSETS = {"ui.css": "text/css; charset=utf-8", "ui.js": "text/javascript; charset=utf-8"}


@cache
def _environment():
    # Loaded with the first page, never at start-up; the environment holds compiled templates.
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(name: str, **context) -> str:
    """A page's HTML."""
    return _environment().get_template(name).render(**context)


def asset(name: str) -> tuple[bytes, str] | None:
    """A static file's bytes and type, or None for anything not in ASSETS."""
    if name not in ASSETS:
        return None
    return (STATIC / name).read_bytes(), ASSETS[name]
