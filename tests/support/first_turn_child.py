"""Run by tests/web/test_first_turn.py in a fresh interpreter (nothing imported yet): the app's
lifespan, then one update through the webhook and its whole turn, recording every module the
event loop's thread imports meanwhile. Prints {"status": ..., "imported": [...]} as JSON.

argv: the update (JSON), the webhook secret. The environment points Ash at a loopback stub."""

import asyncio
import json
import sys
import threading


class LoopImports:
    """A finder that only watches: the names of modules imported on one thread."""

    def __init__(self, thread: int):
        self.thread = thread
        self.seen: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if threading.get_ident() == self.thread:
            self.seen.append(name)
        return None  # the real finders import it


async def main(update: bytes, secret: str) -> dict:
    import httpx

    from app import app, server
    from lib.web.lifespan import lifespan
    from lib.web.state import get_runtime

    transport = httpx.ASGITransport(app=server)
    async with lifespan(app), httpx.AsyncClient(transport=transport, base_url="http://ash") as client:
        runtime = get_runtime(app)
        await runtime.ready()  # what a real server has done within seconds of starting

        def status() -> str | None:
            row = runtime.db.conn().execute("SELECT status FROM inbox").fetchone()
            return row[0] if row else None

        watch = LoopImports(threading.get_ident())
        sys.meta_path.insert(0, watch)
        try:
            headers = {"x-telegram-bot-api-secret-token": secret, "content-type": "application/json"}
            response = await client.post("/telegram/webhook", content=update, headers=headers)
            assert response.status_code == 200, response.text
            while await asyncio.to_thread(status) not in ("done", "failed", "skipped"):
                await asyncio.sleep(0.02)
        finally:
            sys.meta_path.remove(watch)
        return {"status": await asyncio.to_thread(status), "imported": watch.seen}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1].encode(), sys.argv[2]))))
