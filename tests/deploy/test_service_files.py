"""The files that keep Ash running without a public URL: two systemd user units and a compose
file (the relay path was two long-running processes and no way to keep them running)."""

from __future__ import annotations

import configparser
import shlex

import yaml

from tests.support.paths import REPO


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string((REPO / "deploy" / "systemd" / name).read_text())
    return parser


def test_the_units_run_the_server_and_the_relay_and_restart_them():
    server, relay = unit("ash.service"), unit("ash-relay.service")
    assert shlex.split(server["Service"]["ExecStart"])[1:] == ["serve"]
    assert shlex.split(relay["Service"]["ExecStart"])[1:] == ["relay"]
    for service in (server, relay):
        assert service["Service"]["Restart"] == "always"
        assert service["Service"]["ExecStart"].startswith(service["Service"]["WorkingDirectory"] + "/.venv/bin/ash ")
        assert service["Install"]["WantedBy"] == "default.target"  # a user unit
    assert "ash.service" in relay["Unit"]["After"]


def test_the_compose_file_runs_the_image_and_relays_to_it():
    compose = yaml.safe_load((REPO / "deploy" / "compose.yaml").read_text())
    ash, relay = compose["services"]["ash"], compose["services"]["relay"]
    assert ash["build"] == relay["build"] == {"context": "..", "dockerfile": "Containerfile"}
    assert (REPO / "deploy" / ash["build"]["context"] / "Containerfile").is_file()
    assert ash["volumes"] == relay["volumes"] == ["../data:/data"]
    assert relay["command"] == ["ash", "relay", "--url", "http://ash:8080/telegram/webhook"]
    assert ash["ports"] == ["127.0.0.1:8080:8080"]  # the admin API stays on this machine
