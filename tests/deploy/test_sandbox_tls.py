"""The sandbox host recipe: dockerd on TCP with --tlsverify and certificates from `ash sandbox certs`,
reached through the docker SDK's own DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import docker
import pytest
from docker.tls import TLSConfig

from lib.sandbox.container import Sandbox
from lib.sandbox.engine import connect
from tests.deploy.conftest import ash
from tests.support.faults import free_port, wait_until
from tests.support.sandbox import IMAGE, cleanup, new_key, small_config

pytestmark = pytest.mark.docker


@pytest.fixture
def tls_dockerd(tmp_path):
    """A second dockerd on a loopback TCP port, TLS with client certificates required."""
    assert shutil.which("dockerd"), "dockerd is installed by .ci/docker.sh (Debian's docker.io)"
    certs = tmp_path / "certs"
    ash({**os.environ, "ASH_HOME": str(tmp_path / "home")}, "sandbox", "certs", "--app", "ash-docker",
        "--out", str(certs), "--name", "127.0.0.1")  # fmt: skip
    port = free_port()
    root = tmp_path / "d"
    server = certs / "server"
    argv = [
        "dockerd", "--host", f"tcp://127.0.0.1:{port}", "--tlsverify",
        "--tlscacert", str(server / "ca.pem"), "--tlscert", str(server / "server-cert.pem"),
        "--tlskey", str(server / "server-key.pem"), "--data-root", str(root / "data"),
        "--exec-root", str(root / "exec"), "--pidfile", str(root / "docker.pid"),
        "--iptables=false", "--ip6tables=false", "--bridge=none",
    ]  # fmt: skip
    with (tmp_path / "dockerd.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    wait_until(lambda: b"API listen on" in (tmp_path / "dockerd.log").read_bytes(), 60, "dockerd with TLS")
    yield port, certs
    proc.terminate()
    proc.wait(30)


def test_ash_reaches_a_tls_docker_host_with_its_client_certificate_and_others_are_refused(
    tls_dockerd, docker_client, monkeypatch
):
    port, certs = tls_dockerd
    client_dir = certs / "client"
    # Private keys readable by their owner only; the CA key is in neither machine's folder.
    for key in (client_dir / "key.pem", certs / "server" / "server-key.pem", certs / "ca" / "ca-key.pem"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert sorted(p.name for p in client_dir.iterdir()) == ["ca.pem", "cert.pem", "key.pem"]
    # This machine points requests at its own CA bundle, which would override DOCKER_CERT_PATH's CA.
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{port}")
    monkeypatch.setenv("DOCKER_TLS_VERIFY", "1")
    monkeypatch.setenv("DOCKER_CERT_PATH", str(client_dir))

    engine = connect(timeout=30)  # what the sandbox uses
    assert engine.ping()
    assert engine.containers.list(all=True) == []

    # The sandbox itself runs there: the image comes over from the local engine (no registry here),
    # then a command runs in a chat's container on the TLS host.
    engine.images.load(b"".join(docker_client.images.get(IMAGE).save(named=True)))
    key = new_key()
    box = Sandbox(small_config(), client=engine, sweeper=False)
    try:
        ran = box.run_sync(key, "echo ran-on-the-tls-host")
    finally:
        cleanup(engine, key)
    assert ran.exit_code == 0 and "ran-on-the-tls-host" in ran.output

    stranger = TLSConfig(ca_cert=str(client_dir / "ca.pem"), verify=True)  # trusts the CA, has no certificate
    with pytest.raises(docker.errors.DockerException, match=r"(?i)certificate|ssl"):
        docker.DockerClient(base_url=f"https://127.0.0.1:{port}", tls=stranger).ping()
