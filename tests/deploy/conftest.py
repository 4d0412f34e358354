"""A local S3-compatible server (moto in server mode, on loopback) and Ash under Litestream."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.faults import ASH, free_port, wait_until

MOTO = Path(sys.executable).with_name("moto_server")
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "replica-test-key", "AWS_SECRET_ACCESS_KEY": "replica-test-secret-value"}


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory) -> str:
    """moto_server on a free loopback port for the whole session."""
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(MOTO), "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(endpoint, timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(up, 30, "moto_server")
    yield endpoint
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def bucket(s3_endpoint, request) -> str:
    """A new, empty bucket for one test."""
    import boto3

    name = "ash-" + request.node.name.lower().replace("_", "-")[:40]
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", **_boto(CREDENTIALS))
    client.create_bucket(Bucket=name)
    return name


def _boto(credentials: dict) -> dict:
    return {
        "aws_access_key_id": credentials["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": credentials["AWS_SECRET_ACCESS_KEY"],
    }


def replica_env(env: dict[str, str], bucket: str) -> dict[str, str]:
    """`env` plus the replica URL and Litestream's credentials (AWS_CA_BUNDLE stays set, as on this
    machine: Ash must keep it from Litestream for a plain-http endpoint)."""
    return {**env, "ASH_REPLICA_URL": f"s3://{bucket}/ash", **CREDENTIALS}


def ash(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run an `ash` command; fails the test with its output when it fails."""
    done = subprocess.run([str(ASH), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"ash {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def config_extra(endpoint: str) -> str:
    return f'\n[replica]\nendpoint = "{endpoint}"\nsync_interval = 1.0\n'


os.environ.setdefault("AWS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
