"""Every error type Ash raises on purpose, grouped by the part that raises it."""


class AshError(Exception):
    """Base class for errors Ash raises on purpose."""


class ConfigError(AshError):
    """The configuration file or environment holds a value Ash cannot use."""


class DatabaseUnavailable(AshError):
    """The database file cannot be opened or is not fully migrated."""


class Rejected(AshError):
    """A request Ash refuses with a 4xx (`status`); nothing of it is stored."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


class MigrationError(AshError):
    """A migration step failed, or the database is from a newer Ash."""


class ChannelError(AshError):
    """The channel (Telegram) could not deliver what the agent wrote. The agent does not try to
    say so through the same channel ("Something went wrong" into a chat that blocked the bot):
    it lets the error through to the channel's own handler."""


# Telegram Bot API (lib/telegram/client.py); modelled on python-telegram-bot's request layer.
class TelegramError(ChannelError):
    """The Bot API answered with an error or could not be reached."""

    def __init__(self, message: str, *, error_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.error_code = error_code


class RetryAfter(TelegramError):
    """429: flood control; wait `retry_after` seconds before the next call."""

    def __init__(self, message: str, retry_after: float):
        super().__init__(message, error_code=429)
        self.retry_after = retry_after


class Forbidden(TelegramError):
    """403: the bot was blocked, kicked, or may not write to this chat."""


class BadRequest(TelegramError):
    """400: the request itself is wrong (parse error, message not found, ...)."""


class ChatMigrated(TelegramError):
    """400 with `migrate_to_chat_id`: the group became a supergroup."""

    def __init__(self, message: str, new_chat_id: int):
        super().__init__(message, error_code=400)
        self.new_chat_id = new_chat_id


class InvalidToken(TelegramError):
    """401/404: the bot token is wrong or revoked."""


class TimedOut(TelegramError):
    """The request to the Bot API timed out."""


class NetworkError(TelegramError):
    """The Bot API could not be reached or answered 5xx."""


# LLM providers (lib/llm/).
class LLMError(AshError):
    """A model provider failed; `retryable` says whether trying again can help."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        switch_provider: bool = False,
        model: str = "",
    ):
        super().__init__(message)
        self.message = message
        self.provider = provider
        # The model asked (set by the router), so "not found" can say which one.
        self.model = model
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        # True when the fallback should answer at once (e.g. OpenAI insufficient_quota).
        self.switch_provider = switch_provider


class LLMNotConfigured(LLMError):
    """No API key (or base URL) is set for the configured provider."""


class LLMWrongAPI(LLMError):
    """The server answered in another API than the one asked (Responses API events to a Chat
    Completions request): its configuration needs fixing, so no retry or fallback can help.
    `for_person` says so without the server's address."""

    def __init__(self, message: str, *, provider: str, for_person: str):
        super().__init__(message, provider=provider)
        self.for_person = for_person


# Sandbox (lib/sandbox/).
class DockerError(AshError):
    """The Docker Engine API failed or cannot be reached."""

    def __init__(self, status: int | None, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


# Brave Search (lib/tools/brave.py).
class SearchError(AshError):
    """The web search API failed."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after


# Who may talk to Ash (lib/conversation/access.py).
class InvalidUserEntry(AshError, ValueError):
    """Not a Telegram user id or @username as Telegram defines them."""


class OwnerProtected(AshError):
    """The owner's access cannot be taken away."""


# The relay (lib/telegram/relay.py).
class RelayStopped(AshError):
    """The relay cannot go on without the operator (a webhook is set, the token or secret is wrong)."""


# Reminders and scheduled tasks (lib/schedule).
class ScheduleError(AshError, ValueError):
    """A scheduled task cannot be made or changed as asked; the message says why and what to do
    instead (the model, the CLI and the admin API show it as it is)."""


# Embeddings (lib/memory/search/embeddings.py).
class EmbeddingError(AshError):
    """The embedding model cannot be loaded or the embedding service failed."""


# What the person is told. The one place an error becomes a sentence for the user; the log
# keeps the full reason (secrets redacted), the chat gets something they can act on.
SOMETHING_WENT_WRONG = "Something went wrong on my side while answering; the details are in the log."


def user_message(error: BaseException) -> str:
    """A short sentence for the person whose request failed with `error`."""
    if isinstance(error, LLMNotConfigured):
        return error.message
    if isinstance(error, LLMWrongAPI):
        return error.for_person
    if isinstance(error, LLMError):
        if error.status in (401, 403):
            return f"The {error.provider} API rejected the key ({error.status}); the owner needs to check it."
        if error.status == 404:
            which = f": no model named {error.model}" if error.model else ""
            return (
                f"The configured {error.provider} model was not found (404{which}); "
                "the owner needs to check the config."
            )
        if error.status in (400, 413, 422):
            return "The model refused this request as invalid, so I cannot answer it. Details are in the log."
        return "The model is not available right now (overloaded or unreachable). Please try again in a minute."
    return SOMETHING_WENT_WRONG
