"""A Bot API client over the process's one httpx.AsyncClient, with typed errors and one retry policy.

Retries (lib/retry.py): 429 waits `retry_after` and tries again; 5xx, timeouts and network
failures are retried with exponential backoff and jitter. 400/401/403 are not retried. Callers
that handle flood control themselves (streaming edits) pass `retry_flood=False` and get RetryAfter.

A 429 is Telegram's word about the chat, not about one call: until its `retry_after` has passed,
every call to that chat waits it out first (or, with `retry_flood=False`, is refused with
RetryAfter without being sent), so the final answer never goes out into a flood wait that an
earlier streaming edit was told about.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import msgspec

from lib.errors import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from lib.retry import Backoff, Retryable, retry
from lib.telegram.placement import CHAT, Placement
from lib.telegram.types import (
    ENCODER,
    BotCommand,
    EditMessageText,
    File,
    InlineKeyboardMarkup,
    SendMessage,
    SentMessage,
)

log = logging.getLogger("ash.telegram")

# Updates Ash asks Telegram to deliver (setWebhook allowed_updates): exactly the kinds it acts on.
# Not edited_message: Ash answers a message once, and an edit that arrives after the answer
# cannot change it (lib/telegram/kinds.py UNHANDLED_UPDATES skips any that still arrive).
ALLOWED_UPDATES = ["message", "callback_query", "my_chat_member"]
# A flood wait longer than this is not slept through inside one call: the turn fails and is
# retried later by the inbox (Telegram sometimes asks for hours).
MAX_FLOOD_WAIT = 60.0
NOT_MODIFIED = "message is not modified"
PARSE_ERROR = "can't parse entities"

_ENVELOPE = msgspec.json.Decoder(dict)
_TOKEN_IN_URL = re.compile(r"/(file/)?bot\d+:[A-Za-z0-9_-]+/")


class _RedactToken(logging.Filter):
    """httpx logs every request URL at INFO, and Bot API URLs carry the token: hide it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args and any(isinstance(a, httpx.URL | str) for a in record.args):
            record.args = tuple(
                _TOKEN_IN_URL.sub(r"/\1bot<token>/", str(a)) if isinstance(a, httpx.URL | str) else a
                for a in record.args
            )
        return True


_REDACT = _RedactToken()


def _error(status: int, body: dict) -> TelegramError:
    """The typed error for a Bot API error response."""
    code = body.get("error_code", status)
    description = str(body.get("description") or f"HTTP {status}")
    parameters = body.get("parameters") or {}
    if code == 429:
        return RetryAfter(description, float(parameters.get("retry_after", 1)))
    if code == 403:
        return Forbidden(description, error_code=403)
    if "migrate_to_chat_id" in parameters:
        return ChatMigrated(description, int(parameters["migrate_to_chat_id"]))
    if code in (401, 404):
        return InvalidToken(description, error_code=code)
    if code >= 500:
        return NetworkError(description, error_code=code)
    return BadRequest(description, error_code=code)


def _text_params[TextParams: (SendMessage, EditMessageText)](
    struct: type[TextParams],
    chat_id: int | str,
    text: str,
    parse_mode: str | None,
    reply_markup: InlineKeyboardMarkup | None,
    **where: object,
) -> TextParams:
    """The params of a text the bot writes or rewrites: the same fields, link previews always off."""
    return struct(
        chat_id=chat_id,
        text=text,
        parse_mode=parse_mode,
        reply_markup=reply_markup,
        link_preview_options={"is_disabled": True},
        **where,
    )


def _chat_of(params: Any) -> str | None:
    """The chat a call writes to (None for getMe, setWebhook, answerCallbackQuery ...)."""
    chat = params.get("chat_id") if isinstance(params, dict) else getattr(params, "chat_id", None)
    return None if chat is None else str(chat)


class TelegramClient:
    """Bot API methods Ash uses; `http_client` is the process's shared client."""

    def __init__(
        self,
        http_client: httpx.AsyncClient,
        token: str,
        base_url: str = "https://api.telegram.org",
        *,
        retries: int = 3,
        backoff: float = 0.5,  # seconds before the first retry; doubled each time, with jitter
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ):
        if not token:
            raise InvalidToken("TELEGRAM_BOT_TOKEN is not set")
        self.http = http_client
        if _REDACT not in logging.getLogger("httpx").filters:
            logging.getLogger("httpx").addFilter(_REDACT)
        self.base = base_url.rstrip("/")
        self._token = token
        self.retries = retries
        # A flood wait longer than MAX_FLOOD_WAIT is not sat out: the caller gets RetryAfter.
        self.backoff = Backoff(base=backoff, max_delay=MAX_FLOOD_WAIT)
        self.sleep = sleep
        self.clock = clock
        # chat id -> the clock time before which Telegram's flood control asked for quiet.
        self._quiet_until: dict[str, float] = {}

    def __repr__(self) -> str:
        return f"TelegramClient({self.base})"

    async def _once(self, method: str, body: bytes, timeout: float | None) -> Any:
        url = f"{self.base}/bot{self._token}/{method}"
        try:
            response = await self.http.post(
                url,
                content=body,
                headers={"content-type": "application/json"},
                timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.TimeoutException as exc:
            raise TimedOut(f"{method}: timed out") from exc
        except httpx.TransportError as exc:
            raise NetworkError(f"{method}: {type(exc).__name__}") from exc
        try:
            payload = _ENVELOPE.decode(response.content)
        except msgspec.DecodeError:
            payload = {}
        if response.status_code == 200 and payload.get("ok"):
            return payload.get("result")
        raise _error(response.status_code, payload)

    async def call(self, method: str, params: Any = None, *, retry_flood: bool = True, timeout: float | None = None):
        """Call a Bot API method and return its `result`; raises a TelegramError subclass."""
        body = ENCODER.encode(params if params is not None else {})
        chat = _chat_of(params)
        flooded = False  # this call's last attempt got a 429: `retry` has slept its retry_after

        async def attempt() -> Any:
            nonlocal flooded
            if chat is not None and not flooded:
                await self._wait_for_quiet(chat, method, retry_flood)
            flooded = False
            try:
                return await self._once(method, body, timeout)
            except RetryAfter as exc:
                flooded = True
                if chat is not None:
                    until = self.clock() + exc.retry_after
                    self._quiet_until[chat] = max(self._quiet_until.get(chat, 0.0), until)
                raise

        def classify(exc: Exception) -> Retryable | None:
            if isinstance(exc, RetryAfter):
                # Flood control says how long to wait; a caller streaming edits handles it itself.
                return Retryable(exc.retry_after) if retry_flood else None
            return Retryable() if isinstance(exc, NetworkError | TimedOut) else None

        def note(exc: Exception, attempt: int) -> None:
            if isinstance(exc, RetryAfter) and retry_flood:
                log.warning("telegram %s: flood control, waiting %.0f s", method, exc.retry_after)
            elif isinstance(exc, NetworkError | TimedOut):
                log.warning("telegram %s: %s (attempt %d)", method, exc.message, attempt + 1)

        return await retry(
            attempt,
            retries=self.retries,
            backoff=self.backoff,
            classify=classify,
            sleep=self.sleep,
            on_error=note,
        )

    async def _wait_for_quiet(self, chat: str, method: str, retry_flood: bool) -> None:
        """Before a call to `chat`: wait out a flood wait Telegram gave for it (see the module)."""
        left = self._quiet_until.get(chat, 0.0) - self.clock()
        if left <= 0:
            self._quiet_until.pop(chat, None)
            return
        if not retry_flood or left > MAX_FLOOD_WAIT:
            raise RetryAfter(f"{method}: flood control for this chat, {left:.0f} s left", left)
        log.info("telegram %s: waiting %.1f s of flood control for chat %s", method, left, chat)
        await self.sleep(left)

    async def get_me(self) -> dict:
        """The bot's own User object."""
        return await self.call("getMe")

    async def send_message(
        self,
        chat_id: int | str,
        text: str,
        *,
        parse_mode: str | None = None,
        reply_markup: InlineKeyboardMarkup | None = None,
        placement: Placement = CHAT,
        retry_flood: bool = True,
    ) -> SentMessage:
        """Send a text message (to a topic, as a reply: `placement`); returns its id."""
        params = _text_params(
            SendMessage,
            chat_id,
            text,
            parse_mode,
            reply_markup,
            message_thread_id=placement.message_thread_id,
            direct_messages_topic_id=placement.direct_messages_topic_id,
            reply_parameters=placement.reply_parameters,
        )
        result = await self.call("sendMessage", params, retry_flood=retry_flood)
        return msgspec.convert(result, SentMessage)

    async def edit_message_text(
        self,
        chat_id: int | str,
        message_id: int,
        text: str,
        *,
        parse_mode: str | None = None,
        reply_markup: InlineKeyboardMarkup | None = None,
        retry_flood: bool = True,
    ) -> None:
        """Replace a message's text; "message is not modified" is not an error."""
        params = _text_params(EditMessageText, chat_id, text, parse_mode, reply_markup, message_id=message_id)
        try:
            await self.call("editMessageText", params, retry_flood=retry_flood)
        except BadRequest as exc:
            if NOT_MODIFIED not in exc.message:
                raise

    async def edit_message_reply_markup(
        self, chat_id: int | str, message_id: int, reply_markup: InlineKeyboardMarkup | None
    ) -> None:
        """Replace a message's buttons (None removes them); "message is not modified" is not an error."""
        params: dict[str, Any] = {"chat_id": chat_id, "message_id": message_id}
        if reply_markup is not None:
            params["reply_markup"] = reply_markup
        try:
            await self.call("editMessageReplyMarkup", params)
        except BadRequest as exc:
            if NOT_MODIFIED not in exc.message:
                raise

    async def delete_message(self, chat_id: int | str, message_id: int) -> None:
        """Delete a message the bot sent (Telegram allows it for 48 hours)."""
        await self.call("deleteMessage", {"chat_id": chat_id, "message_id": message_id})

    async def send_chat_action(
        self, chat_id: int | str, action: str = "typing", *, message_thread_id: int | None = None
    ) -> None:
        """Show "typing..." (in a forum topic: there) for about five seconds; failures only cost the indicator."""
        params: dict[str, Any] = {"chat_id": chat_id, "action": action}
        if message_thread_id is not None:
            params["message_thread_id"] = message_thread_id
        await self.call("sendChatAction", params, retry_flood=False)

    async def answer_callback_query(self, callback_query_id: str, text: str | None = None) -> None:
        """Stop the button's spinner, optionally with a short notice."""
        params: dict[str, Any] = {"callback_query_id": callback_query_id}
        if text:
            params["text"] = text
        await self.call("answerCallbackQuery", params)

    async def get_file(self, file_id: str) -> File:
        """File metadata, including the path to download it from."""
        return msgspec.convert(await self.call("getFile", {"file_id": file_id}), File)

    async def download(self, file_path: str, max_bytes: int) -> bytes:
        """Download a file by its getFile path, refusing anything over `max_bytes`."""
        url = f"{self.base}/file/bot{self._token}/{file_path}"
        chunks: list[bytes] = []
        size = 0
        try:
            async with self.http.stream("GET", url) as response:
                if response.status_code != 200:
                    raise NetworkError(f"file download: HTTP {response.status_code}", error_code=response.status_code)
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise BadRequest(f"file larger than {max_bytes} bytes")
                    chunks.append(chunk)
        except httpx.TimeoutException as exc:
            raise TimedOut("file download timed out") from exc
        except httpx.TransportError as exc:
            raise NetworkError(f"file download: {type(exc).__name__}") from exc
        return b"".join(chunks)

    async def set_webhook(
        self,
        url: str,
        secret_token: str,
        *,
        allowed_updates: list[str] | None = None,
        drop_pending_updates: bool = False,
        max_connections: int | None = None,
    ) -> bool:
        """Register the webhook URL with its secret and the update types Ash handles."""
        params: dict[str, Any] = {
            "url": url,
            "secret_token": secret_token,
            "allowed_updates": allowed_updates if allowed_updates is not None else ALLOWED_UPDATES,
            "drop_pending_updates": drop_pending_updates,
        }
        if max_connections:
            params["max_connections"] = max_connections
        return bool(await self.call("setWebhook", params))

    async def get_my_commands(self) -> list[BotCommand]:
        """The command menu Telegram shows for the bot (default scope)."""
        return msgspec.convert(await self.call("getMyCommands"), list[BotCommand])

    async def set_my_commands(self, commands: list[BotCommand]) -> bool:
        """Replace the command menu Telegram shows for the bot (default scope)."""
        return bool(await self.call("setMyCommands", {"commands": commands}))

    async def delete_webhook(self, *, drop_pending_updates: bool = False) -> bool:
        """Remove the webhook."""
        return bool(await self.call("deleteWebhook", {"drop_pending_updates": drop_pending_updates}))

    async def get_webhook_info(self) -> dict:
        """The webhook Telegram has on record, with pending count and last error."""
        return await self.call("getWebhookInfo")
