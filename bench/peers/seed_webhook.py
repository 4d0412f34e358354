"""The seed's stack doing Ash's webhook work: verify the secret, decode the Update, store it, 200.

FastAPI + uvicorn + aiogram's Update model + SQLAlchemy 2 async over aiosqlite, as planned in
../shared/seeds/000_* . Run from bench/peers/.venv (see setup_peer.py):

    PEER_DB=/tmp/peer.db TELEGRAM_WEBHOOK_SECRET=s .venv/bin/python seed_webhook.py --port 8090

Routes: GET /healthz, POST /telegram/webhook (401 on a wrong secret, 400 on a bad body).
"""

from __future__ import annotations

import argparse
import hmac
import os
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import uvicorn
from aiogram import Bot
from aiogram.types import Update
from fastapi import FastAPI, Request, Response
from pydantic import ValidationError
from sqlalchemy import BigInteger, String, Text, UniqueConstraint
from sqlalchemy.dialects.sqlite import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

SECRET = os.environ.get("TELEGRAM_WEBHOOK_SECRET", "")
DB_PATH = os.environ.get("PEER_DB", "peer.db")
# A syntactically valid token: aiogram checks the format, and nothing here calls Telegram.
BOT = Bot(os.environ.get("TELEGRAM_BOT_TOKEN", "110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"))


class Base(DeclarativeBase):
    pass


class InboxRow(Base):
    __tablename__ = "inbox"
    __table_args__ = (UniqueConstraint("bot_id", "update_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    bot_id: Mapped[int] = mapped_column(BigInteger)
    update_id: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(32))
    payload: Mapped[str] = mapped_column(Text)
    received_at: Mapped[str] = mapped_column(String(32))


engine = create_async_engine(f"sqlite+aiosqlite:///{DB_PATH}")
Session = async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)


@asynccontextmanager
async def lifespan(_: FastAPI):
    async with engine.begin() as conn:
        await conn.exec_driver_sql("PRAGMA journal_mode=WAL")
        await conn.run_sync(Base.metadata.create_all)
    yield
    await engine.dispose()


app = FastAPI(lifespan=lifespan)


@app.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}


@app.post("/telegram/webhook")
async def webhook(request: Request) -> Response:
    given = request.headers.get("x-telegram-bot-api-secret-token", "")
    if not SECRET or not hmac.compare_digest(given.encode(), SECRET.encode()):
        return Response(status_code=401)
    try:
        update = Update.model_validate(await request.json(), context={"bot": BOT})
    except (ValueError, ValidationError):
        return Response(status_code=400)
    kind = update.event_type
    statement = (
        insert(InboxRow)
        .values(
            bot_id=BOT.id,
            update_id=update.update_id,
            kind=kind,
            payload=update.model_dump_json(exclude_none=True),
            received_at=datetime.now(UTC).isoformat(),
        )
        .on_conflict_do_nothing()
    )
    async with Session() as session:
        await session.execute(statement)
        await session.commit()
    return Response(content=b'{"ok":true}', media_type="application/json")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
