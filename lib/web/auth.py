"""The bearer-token guard every `/admin/...` route declares."""

from __future__ import annotations

import hmac

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException, TooManyRequestsException
from litestar.handlers.base import BaseRouteHandler

from lib.web.state import get_auth_limiter, get_runtime


def bearer_matches(authorization: str, expected: str) -> bool:
    """Whether an Authorization header is `Bearer <expected>` (constant-time)."""
    scheme, _, given = authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected.encode())


def admin_guard(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """Allow the request only with `Authorization: Bearer $ASH_ADMIN_TOKEN`.

    No token configured: 403 (admin is off, fail closed). Missing or wrong: 401. A client with
    too many wrong tokens lately (lib/auth_limit.py, shared with the web view's sign-in and
    /mcp): 429 with Retry-After, the right token included. In memory: guards run on the loop.
    """
    expected = get_runtime(connection.app).settings.secrets.admin_token
    if not expected:
        raise PermissionDeniedException("admin API disabled: set ASH_ADMIN_TOKEN to enable it")
    limiter = get_auth_limiter(connection.app)
    client = limiter.client(connection.scope)
    wait = limiter.retry_after(client)
    if wait:
        raise TooManyRequestsException(
            f"too many wrong tokens from this address; retry in {wait} s", headers={"Retry-After": str(wait)}
        )
    authorization = connection.headers.get("authorization", "")
    if not bearer_matches(authorization, expected):
        if authorization:  # a token was offered and was wrong: a guess (none at all is not)
            limiter.failed(client)
        raise NotAuthorizedException("missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})
