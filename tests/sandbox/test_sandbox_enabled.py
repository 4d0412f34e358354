"""`[sandbox] enabled`: "auto" offers bash only while a Docker engine answers, asking the engine
at most once per PROBE_TTL; true offers it always, false never. No real engine needed: a dead
socket, and a stand-in engine on a unix socket."""

from __future__ import annotations

import pytest

import lib.sandbox.availability as availability
from lib.config import load_settings
from lib.tools.registry import available_tools
from tests.support.fake_docker import FakeDockerEngine


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    """A fresh engine probe for the test, on a clock the test moves."""
    fake = Clock()
    monkeypatch.setattr(availability, "_PROBE", availability.EngineProbe(clock=fake))
    return fake


@pytest.fixture
def engine(tmp_path, monkeypatch):
    with FakeDockerEngine(tmp_path / "docker.sock") as fake:
        monkeypatch.setenv("DOCKER_HOST", fake.host)
        yield fake


def tool_names(ash_home, sandbox: str = "") -> list[str]:
    (ash_home / "config.toml").write_text(f"[sandbox]\n{sandbox}\n")
    return [tool.name for tool in available_tools(load_settings())]


def test_auto_without_an_engine_offers_no_bash(ash_home, clock, monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    names = tool_names(ash_home)
    assert "bash" not in names and "remember" in names


def test_auto_offers_bash_while_the_engine_answers_and_asks_it_once_per_ttl(ash_home, clock, engine):
    for _ in range(5):
        assert "bash" in tool_names(ash_home)
    assert engine.asked("/version") == 1  # five turns, one round trip

    engine.__exit__()  # the engine goes away
    clock.now += availability.PROBE_TTL - 1
    assert "bash" in tool_names(ash_home)  # the cached answer still stands
    clock.now += 2
    assert "bash" not in tool_names(ash_home)  # asked again: gone


def test_true_offers_bash_without_asking_and_false_never_offers_it(ash_home, clock, engine, monkeypatch, tmp_path):
    assert "bash" not in tool_names(ash_home, "enabled = false")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    assert "bash" in tool_names(ash_home, "enabled = true")  # the model hears the engine's error
    assert engine.asked("/version") == 0


def test_each_docker_host_has_its_own_answer(ash_home, clock, engine, monkeypatch, tmp_path):
    assert "bash" in tool_names(ash_home)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    assert "bash" not in tool_names(ash_home)


@pytest.mark.docker
def test_auto_offers_bash_with_a_real_engine_and_doctor_finds_the_image(ash_home, clock):
    from lib.commands.doctor_remote import check_sandbox
    from tests.support.sandbox import engine_client

    engine_client().close()  # skipped without an engine and the image (a failure under CI=true)
    assert "bash" in tool_names(ash_home)
    (check,) = check_sandbox(load_settings())
    assert check.status == "ok" and "image ash-sandbox:latest present" in check.detail
