"""The connection to the Docker engine, and its errors as sentences a user can act on.

Talks to the Docker Engine API through the docker SDK (`docker.from_env()`: `DOCKER_HOST`, and
for `tcp://` hosts `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH`). Every SDK failure the sandbox
meets becomes a `DockerError` here (`docker_error`), so callers handle one error type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lib.errors import DockerError

if TYPE_CHECKING:
    import docker

# Seconds the SDK waits for the engine to answer the first request.
CONNECT_TIMEOUT = 10


def docker_error(exc: Exception, image: str = "") -> DockerError:
    """Map an SDK exception to DockerError with a sentence a user (or the model) can act on."""
    import docker.errors

    if isinstance(exc, DockerError):
        return exc
    if isinstance(exc, docker.errors.ImageNotFound) or (
        isinstance(exc, docker.errors.APIError) and exc.status_code == 404 and "image" in str(exc).lower()
    ):
        return DockerError(404, f"the sandbox image {image} is missing on the Docker host; run `ash sandbox build`")
    if isinstance(exc, docker.errors.APIError):
        return DockerError(exc.status_code, f"Docker engine error: {exc.explanation or exc}")
    return DockerError(None, f"cannot reach the Docker engine ({str(exc)[:200]}); start it or set DOCKER_HOST")


def connect(timeout: float = 60.0, *, connect_timeout: float = CONNECT_TIMEOUT) -> docker.DockerClient:
    """A docker client from the environment, or DockerError when no engine answers."""
    import docker

    try:
        client = docker.from_env(timeout=connect_timeout)
    except Exception as exc:
        raise docker_error(exc) from None
    # Long commands stream quietly; the socket must wait longer than the command timeout.
    client.api.timeout = timeout
    return client
