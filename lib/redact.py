"""Defence in depth for logs: no secret value ever reaches a log line, whoever logs it.

Installed on the root logger's handlers at start-up. A record's message is rendered once,
every configured secret (and the secret half of the bot token, which appears in Bot API URLs)
is replaced by `<redacted>`, and the rendered text is kept so nothing re-expands it.
"""

from __future__ import annotations

import logging

from lib.config import Secrets

MIN_SECRET_LENGTH = 6  # shorter values would redact ordinary words


class RedactSecrets(logging.Filter):
    """A logging filter that blanks the configured secrets in every record."""

    def __init__(self, secrets: Secrets):
        super().__init__()
        values = [
            secrets.telegram_bot_token,
            secrets.telegram_webhook_secret,
            secrets.anthropic_api_key,
            secrets.openai_api_key,
            secrets.brave_search_api_key,
            secrets.admin_token,
        ]
        token = secrets.telegram_bot_token or ""
        if ":" in token:
            values.append(token.split(":", 1)[1])
        # Longest first, so a value containing another is replaced whole.
        self.values = sorted({v for v in values if v and len(v) >= MIN_SECRET_LENGTH}, key=len, reverse=True)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.values:
            return True
        message = record.getMessage()
        text = message
        for value in self.values:
            text = text.replace(value, "<redacted>")
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            for value in self.values:
                record.exc_text = record.exc_text.replace(value, "<redacted>")
        if text != message:
            record.msg, record.args = text, ()
        return True


def install(secrets: Secrets) -> RedactSecrets:
    """Attach the filter to every handler of the root logger (records of all loggers pass there)."""
    redactor = RedactSecrets(secrets)
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for handler in root.handlers:
        for old in [f for f in handler.filters if isinstance(f, RedactSecrets)]:
            handler.removeFilter(old)
        handler.addFilter(redactor)
    return redactor
