"""`/admin/ui/static/{name}`: the web view's stylesheet and script, served by the app (no CDN)."""

from __future__ import annotations

from litestar import Response, get
from litestar.params import FromPath

from lib.web.ui.http import refuse, respond


@get("/admin/ui/static/{name:str}", sync_to_thread=True, include_in_schema=False)
def ui_static(name: FromPath[str]) -> Response:
    """One of the named assets; anything else is 404 (no paths, no directory listing)."""
    from lib.web.ui.render import asset

    found = asset(name)
    if found is None:
        return refuse(404, "Not found.")
    body, media_type = found
    return respond(body, media_type=media_type)
