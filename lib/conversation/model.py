"""/model: which model answers in this chat, and switching it between the `[models.NAME]` presets.

`/model` lists the presets with a button each (plus "default", [default_llm]); a press or
`/model NAME` switches this chat from its next turn on (lib/agent/presets.py stores the pick).
A private chat's person switches their own chat; in a group only the owner may, since the
choice (and its cost) is the whole group's.
"""

from __future__ import annotations

import logging

import apsw

from lib.agent import pick_preset, picked_preset
from lib.config import DEFAULT_PRESET, LLMConfig, Settings
from lib.memory.scope import is_group
from lib.telegram.types import InlineKeyboardButton, InlineKeyboardMarkup

log = logging.getLogger("ash.telegram")

MODEL_PICK = "model:"
OWNER_ONLY = "Only the owner can switch this group's model."
NO_PRESETS = """This chat uses the default model, {model}. No other models are configured: to offer one, \
add a preset to config.toml and restart Ash, for example

```toml
[models.fast]
provider = "openai"
model = "gpt-4o-mini"
```

/model then lists it with a button to switch."""
PICK = "Pick one below, or send /model NAME."
UNKNOWN = "There is no model preset `{name}`. The presets are {names}."
GONE = "That preset is no longer configured; send /model for the current list."
SWITCHED = "Switched."


def _model(llm: LLMConfig) -> str:
    return f"{llm.provider} {llm.model}"


def _presets(settings: Settings) -> dict[str, LLMConfig]:
    """Every model a chat may pick, "default" first."""
    return {DEFAULT_PRESET: settings.config.default_llm, **settings.config.models}


def _may_switch(settings: Settings, chat_type: str, user_id: str) -> bool:
    owner = settings.config.owner
    return not is_group(chat_type) or (owner is not None and str(owner) == user_id)


def _listing(settings: Settings, picked: str | None, current: str) -> str:
    """The chat's model (and a pick the config no longer has), then every preset, the current one marked."""
    chosen = _presets(settings)[current]
    head = (
        f"This chat uses the default model, {_model(chosen)}."
        if current == DEFAULT_PRESET
        else f"This chat uses `{current}`: {_model(chosen)}."
    )
    if picked is not None and picked != current:
        head += f" It had picked `{picked}`, which is no longer configured."
    lines = [
        f"- `{name}`: {_model(llm)}" + (" (current)" if name == current else "")
        for name, llm in _presets(settings).items()
    ]
    return "\n".join([head, "", *lines])


def _keyboard(settings: Settings, current: str) -> InlineKeyboardMarkup:
    """One button per preset, the current one ticked."""
    return InlineKeyboardMarkup(
        inline_keyboard=[
            [InlineKeyboardButton(text=f"✓ {name}" if name == current else name, callback_data=f"{MODEL_PICK}{name}")]
            for name in _presets(settings)
        ]
    )


def _switch(conn: apsw.Connection, settings: Settings, provider: str, chat_id: str, name: str) -> str | None:
    """Switch the chat to the preset `name`; what to tell the chat, or None when there is no such preset."""
    llm = _presets(settings).get(name)
    if llm is None:
        return None
    pick_preset(conn, provider, chat_id, None if name == DEFAULT_PRESET else name)
    log.info("chat %s:%s now uses the model preset %s", provider, chat_id, name)
    if name == DEFAULT_PRESET:
        return f"This chat now uses the default model, {_model(llm)}."
    return f"This chat now uses {name}: {_model(llm)}."


def model_reply(
    conn: apsw.Connection, settings: Settings, *, provider: str, chat_id: str, chat_type: str, user_id: str, args: str
) -> tuple[str, InlineKeyboardMarkup | None]:
    """/model's Markdown answer and buttons; `args` is a preset's name to switch to at once."""
    if not settings.config.models:
        return NO_PRESETS.format(model=_model(settings.config.default_llm)), None
    picked = picked_preset(conn, provider, chat_id)
    current = picked if picked in settings.config.models else DEFAULT_PRESET
    listing = _listing(settings, picked, current)
    if not _may_switch(settings, chat_type, user_id):
        return f"{listing}\n\n{OWNER_ONLY}", None
    if not args:
        return f"{listing}\n\n{PICK}", _keyboard(settings, current)
    name = args.lower()
    switched = _switch(conn, settings, provider, chat_id, name)
    if switched is None:
        return UNKNOWN.format(name=name, names=", ".join(f"`{n}`" for n in _presets(settings))), None
    return switched, None


def model_press(
    conn: apsw.Connection, settings: Settings, *, data: str, provider: str, chat_id: str, chat_type: str, user_id: str
) -> tuple[str, str | None]:
    """(toast, new text for the message) for a press of one of /model's buttons."""
    if not _may_switch(settings, chat_type, user_id):
        return OWNER_ONLY, None
    switched = _switch(conn, settings, provider, chat_id, data.removeprefix(MODEL_PICK))
    return (GONE, None) if switched is None else (SWITCHED, switched)
