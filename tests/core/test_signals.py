"""The runtime's signals (lib/runtime.py): one part tells another without either knowing the other."""

from __future__ import annotations

import logging

from lib.runtime import Signal, Signals


def test_every_listener_hears_an_emit_until_it_disconnects():
    heard = []
    signal = Signal("schedule_changed")
    first, second = (lambda: heard.append("first")), (lambda: heard.append("second"))
    signal.connect(first)
    signal.connect(second)
    signal.emit()
    signal.disconnect(first)
    signal.disconnect(first)  # twice is harmless
    signal.emit()
    assert heard == ["first", "second", "second"]


def test_a_failing_listener_is_logged_and_the_others_still_hear(caplog):
    heard = []

    def broken() -> None:
        raise RuntimeError("boom")

    signal = Signals().schedule_changed
    signal.connect(broken)
    signal.connect(lambda: heard.append(1))
    with caplog.at_level(logging.ERROR):
        signal.emit()
    assert heard == [1]
    assert "a listener of schedule_changed failed" in caplog.text


def test_an_emit_nobody_listens_to_does_nothing():
    Signals().schedule_changed.emit()  # a CLI command's runtime: no scheduler runs
