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
from lib.conversation.replies import Asker, Button, Press, Reply, column
from lib.memory.scope import is_group

log = logging.getLogger("ash.conversation")

MODEL_PICK = "model:"
OWNER_ONLY = "Only the owner can switch this group's model."
NO_PRESETS = """This chat uses the default model, {model}. No other models are configured: to offer one, \
add a preset to config.toml (Ash picks it up without a restart), for example

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
NO_KEY = "{name} needs {needs}, which is not set. Add it to secrets.env (no restart needed), then pick it again."
KEY_NAMES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY (or OPENAI_BASE_URL)"}


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


def _buttons(settings: Settings, current: str) -> tuple[tuple[Button, ...], ...]:
    """One button per preset, the current one ticked."""
    return column(
        *(Button(f"✓ {name}" if name == current else name, f"{MODEL_PICK}{name}") for name in _presets(settings))
    )


def _switch(conn: apsw.Connection, settings: Settings, asker: Asker, name: str) -> tuple[bool, str] | None:
    """Switch the chat to the preset `name`: whether it did and what to tell the chat, or None when
    there is no such preset. A preset whose provider has no key is refused: the chat's next turn
    would fail."""
    from lib.llm.router import is_configured

    llm = _presets(settings).get(name)
    if llm is None:
        return None
    if not is_configured(settings, llm):
        return False, NO_KEY.format(name=name, needs=KEY_NAMES[llm.provider])
    pick_preset(conn, asker.provider, asker.chat_id, None if name == DEFAULT_PRESET else name)
    log.info("chat %s:%s now uses the model preset %s", asker.provider, asker.chat_id, name)
    if name == DEFAULT_PRESET:
        return True, f"This chat now uses the default model, {_model(llm)}."
    return True, f"This chat now uses {name}: {_model(llm)}."


def model_reply(conn: apsw.Connection, settings: Settings, asker: Asker, args: str) -> Reply:
    """/model's answer and buttons; `args` is a preset's name to switch to at once."""
    if not settings.config.models:
        return Reply(NO_PRESETS.format(model=_model(settings.config.default_llm)))
    picked = picked_preset(conn, asker.provider, asker.chat_id)
    current = picked if picked in settings.config.models else DEFAULT_PRESET
    listing = _listing(settings, picked, current)
    if not _may_switch(settings, asker.chat_type, asker.user_id):
        return Reply(f"{listing}\n\n{OWNER_ONLY}")
    if not args:
        return Reply(f"{listing}\n\n{PICK}", _buttons(settings, current))
    name = args.lower()
    switched = _switch(conn, settings, asker, name)
    if switched is None:
        return Reply(UNKNOWN.format(name=name, names=", ".join(f"`{n}`" for n in _presets(settings))))
    return Reply(switched[1])


def model_press(conn: apsw.Connection, settings: Settings, asker: Asker, data: str) -> Press:
    """A press of one of /model's buttons: the chat switched, and the message says so."""
    if not _may_switch(settings, asker.chat_type, asker.user_id):
        return Press(OWNER_ONLY)
    switched = _switch(conn, settings, asker, data.removeprefix(MODEL_PICK))
    if switched is None:
        return Press(GONE)
    done, said = switched
    # Refused for want of a key: the list and its buttons stay, to pick again once the key is set.
    return Press(SWITCHED, Reply(said)) if done else Press(said)
