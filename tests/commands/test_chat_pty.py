"""The interactive `ash chat` as a person uses it: a real process on a pseudo-terminal, keys typed into
it, the model a local stub over HTTP (tests/support/faults.py Upstream)."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path

import pytest

from tests.support.agent import write_config
from tests.support.database import query
from tests.support.faults import ASH, Upstream, anthropic_tool_use

UP = b"\x1b[A"
ENTER = b"\r"
CTRL_D = b"\x04"
PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"
# Escape sequences (colours, cursor moves, modes) and carriage returns: what is left is the text.
CONTROL = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z~]|\x1b[=>]|\r")
CURSOR_POSITION_REQUEST = b"\x1b[6n"
ROWS, COLUMNS = 40, 100


class Terminal:
    """`ash chat` on a pseudo-terminal: type into it, wait for text on its screen."""

    def __init__(self, home: Path, upstream: Upstream):
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ASH_", "ANTHROPIC_", "OPENAI_"))}
        env.update(
            ASH_HOME=str(home),
            ANTHROPIC_API_KEY="sk-ant-test-key",
            ANTHROPIC_BASE_URL=upstream.origin,
            TERM="xterm-256color",
        )
        self.proc = subprocess.Popen(
            [str(ASH), "chat"], stdin=slave, stdout=slave, stderr=slave, env=env, cwd=home, start_new_session=True
        )
        os.close(slave)
        self.master = master
        self.screen = b""
        self.seen = 0  # where the next `expect` starts looking

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def expect(self, text: str, timeout: float = 10.0) -> None:
        """Wait until `text` shows up after what was already expected."""
        needle = text.encode()
        deadline = time.monotonic() + timeout
        while True:
            found = self.text().find(needle, self.seen)
            if found >= 0:
                self.seen = found + len(needle)
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{text!r} never appeared; the screen read:\n{self.text().decode(errors='replace')}"
                )
            self._read(deadline - time.monotonic())

    def _read(self, timeout: float) -> None:
        ready, _, _ = select.select([self.master], [], [], max(0.0, min(timeout, 0.1)))
        if not ready:
            return
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # the process ended and the terminal closed
            time.sleep(0.05)
            return
        if CURSOR_POSITION_REQUEST in chunk:
            # Answer as a terminal does, so the prompt never waits for its cursor position.
            self.type(b"\x1b[1;1R")
        self.screen += chunk

    def text(self) -> bytes:
        return CONTROL.sub(b"", self.screen)

    def wait(self, timeout: float = 10.0) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.1)
        return self.proc.wait(timeout=1)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        os.close(self.master)


@pytest.fixture
def home(ash_home):
    write_config(ash_home, 'owner = 1001\n[memory]\nextraction_enabled = false\n[embeddings]\nprovider = "none"\n')
    return ash_home


@pytest.fixture
def upstream():
    with Upstream(reply=lambda text: f"**Echo**: {text}") as stub:
        yield stub


@pytest.fixture
def terminal(home, upstream):
    term = Terminal(home, upstream)
    yield term
    term.close()


def user_texts(upstream: Upstream) -> list[str]:
    """Each message the model was asked to answer (a call that carries tool results is left out)."""
    texts = []
    for key, body, _ in upstream.calls:
        last = body["messages"][-1]["content"] if key == "anthropic" else []
        texts += [block["text"] for block in last if block.get("type") == "text"]
    return texts


def test_history_recall_a_slash_command_a_tool_line_and_a_pasted_block(terminal, upstream, home):
    upstream.anthropic_script.append(anthropic_tool_use("set_timezone", {"timezone": "Europe/Lisbon"}))

    terminal.expect("you>")
    terminal.type(b"I live in Lisbon" + ENTER)
    terminal.expect("✓ set_timezone: Europe/Lisbon")
    terminal.expect("Echo: I live in Lisbon")  # rendered Markdown: no ** left

    terminal.expect("you>")
    terminal.type(b"/help" + ENTER)
    terminal.expect("/timezone - show or set your time zone")
    terminal.expect("In the terminal: exit or Ctrl-D leaves")

    terminal.expect("you>")
    terminal.type(UP + UP + ENTER)  # Up twice: past /help to the first message
    terminal.expect("Echo: I live in Lisbon")

    terminal.expect("you>")
    terminal.type(PASTE_START + b"first line\nsecond line" + PASTE_END + ENTER)
    terminal.expect("Echo: first line")
    terminal.expect("second line")

    terminal.expect("you>")
    terminal.type(CTRL_D)
    assert terminal.wait() == 0
    # /help never reached the model; the recalled message and the pasted block each went as one message.
    assert user_texts(upstream) == ["I live in Lisbon", "I live in Lisbon", "first line\nsecond line"]
    history = (home / "chat_history").read_text()
    assert "+I live in Lisbon" in history and "+/help" in history and "+first line\n+second line" in history
    assert (home / "chat_history").stat().st_mode & 0o777 == 0o600


def test_ctrl_c_stops_the_answer_and_the_chat_goes_on(terminal, upstream):
    upstream.hold_anthropic = threading.Event()  # the stub streams one piece, then waits

    terminal.expect("you>")
    terminal.type(b"Tell me a long story" + ENTER)
    terminal.expect("Echo")
    # What the terminal sends the foreground process for Ctrl-C while an answer streams.
    os.kill(terminal.proc.pid, signal.SIGINT)
    terminal.expect("Stopped.")

    terminal.expect("you>")
    assert terminal.proc.poll() is None
    terminal.type(b"exit" + ENTER)
    assert terminal.wait() == 0


def test_a_risky_call_waits_for_y_in_the_terminal(ash_home, upstream):
    # "always": every risky call asks, so a plain message shows the question (lib/agent/approval.py).
    write_config(
        ash_home,
        'owner = 1001\n[memory]\nextraction_enabled = false\n[embeddings]\nprovider = "none"\n'
        '[sandbox]\napproval = "always"\n',
    )
    upstream.anthropic_script.append(anthropic_tool_use("remember", {"content": "The door code is 4711."}))
    terminal = Terminal(ash_home, upstream)
    try:
        terminal.expect("you>")
        terminal.type(b"Remember my door code 4711" + ENTER)
        terminal.expect("needs your OK first")
        terminal.expect("The door code is 4711.")
        terminal.expect("Run it? [y/N]")
        terminal.type(b"n" + ENTER)
        terminal.expect("Echo")

        upstream.anthropic_script.append(anthropic_tool_use("remember", {"content": "The gate code is 1234."}))
        terminal.expect("you>")
        terminal.type(b"Remember the gate code 1234" + ENTER)
        terminal.expect("Run it? [y/N]")
        terminal.type(b"y" + ENTER)
        terminal.expect("✓ remember")
        terminal.expect("you>")
        terminal.type(CTRL_D)
        assert terminal.wait() == 0
    finally:
        terminal.close()
    saved = query(ash_home / "ash.db", "SELECT content FROM memories")
    assert [row["content"] for row in saved] == ["The gate code is 1234."]


async def test_without_a_terminal_a_risky_call_is_not_run_and_the_chat_says_why(capsys):
    from lib.agent import ApprovalRequest
    from lib.commands.chat_sink import CliSink

    request = ApprovalRequest(1, "bash", {"command": "ls /"}, "this conversation holds a web page", 600)
    assert await CliSink().ask(request) is False  # pytest's stdin is not a terminal
    shown = capsys.readouterr().err
    assert "ls /" in shown and "this conversation holds a web page" in shown
    assert "Not run: there is no terminal to ask you at" in shown
