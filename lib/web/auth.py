"""The bearer-token guard every `/admin/...` route declares."""

from __future__ import annotations

import hmac

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from lib.web.state import get_runtime


def admin_guard(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """Allow the request only with `Authorization: Bearer $ASH_ADMIN_TOKEN`.

    No token configured: 403 (admin is off, fail closed). Missing or wrong: 401.
    """
    expected = get_runtime(connection.app).settings.secrets.admin_token
    if not expected:
        raise PermissionDeniedException("admin API disabled: set ASH_ADMIN_TOKEN to enable it")
    scheme, _, given = connection.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected.encode()):
        raise NotAuthorizedException("missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})
