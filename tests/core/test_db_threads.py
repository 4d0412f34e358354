"""One connection per thread, and no way to hand one to another thread.

A turn handed the event loop's connection to `asyncio.to_thread(provenance.attach_answer, conn,
...)`; 1 turn in 80 failed with apsw's ThreadingViolationError when the loop used it at the same
moment, was retried, and the person got a second answer. Database.conn()'s connections now refuse
any thread but their own, every time, so the test suite itself fails on a crossing; and the
source is checked for the pattern that caused it, in code the tests may not reach."""

from __future__ import annotations

import ast
import asyncio
import threading

import pytest

from lib.db import Database, ThreadCrossing
from tests.support.paths import REPO


def test_a_connection_used_by_another_thread_fails_every_time(tmp_path):
    db = Database(tmp_path / "ash.db")
    conn = db.conn()
    conn.execute("CREATE TABLE t (x)")
    failures: list[BaseException] = []

    def elsewhere() -> None:
        for use in (
            lambda: conn.execute("SELECT 1"),
            lambda: conn.executemany("INSERT INTO t VALUES (?)", [(1,)]),
            lambda: conn.cursor(),
            lambda: conn.pragma("user_version"),
            lambda: conn.__enter__(),
        ):
            try:
                use()
            except ThreadCrossing as exc:
                failures.append(exc)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert len(failures) == 5
    assert db.conn() is conn  # the owner goes on using it
    db.close()


async def test_each_thread_gets_its_own_connection(tmp_path):
    db = Database(tmp_path / "ash.db")
    mine = db.conn()
    theirs = await asyncio.to_thread(db.conn)
    assert mine is not theirs
    assert await asyncio.to_thread(lambda: db.conn().execute("SELECT 1").fetchone()) == (1,)
    with pytest.raises(ThreadCrossing):
        await asyncio.to_thread(mine.execute, "SELECT 1")
    db.close()


def _hands_a_connection_over(call: ast.Call) -> bool:
    """`asyncio.to_thread(fn, <...>.conn(), ...)` or `loop.run_in_executor(pool, fn, <...>.conn())`:
    the connection is opened in the calling thread and used in another."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name not in ("to_thread", "run_in_executor", "submit"):
        return False
    for argument in call.args[1:]:
        for node in ast.walk(argument):
            if isinstance(node, ast.Lambda):
                break  # opened inside the lambda: in the worker thread
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "conn":
                return True
    return False


def test_no_code_hands_its_threads_connection_to_another_thread():
    found = []
    for path in sorted([*REPO.joinpath("lib").rglob("*.py"), *REPO.joinpath("handlers").rglob("*.py")]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _hands_a_connection_over(node):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == []
