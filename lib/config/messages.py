"""A bad config file explained in its own words: the key as TOML writes it, the choices or the
range it takes, the line that is not TOML."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect

from lib.config.sections import Config

RANGE_ERROR = re.compile(r"Expected `(?:int|float)` [<>]=? ")
TOML_POSITION = re.compile(r"^(?P<reason>.*) \(at line (?P<line>\d+), column (?P<column>\d+)\)$")


def explain(error: msgspec.ValidationError, raw: dict[str, Any], path: Path) -> str:
    """msgspec's complaint about the file as a sentence naming the key (and the choices or the range)."""
    # msgspec says "Expected `int`, got `str` - at `$.server.port`"; name the key as TOML does.
    text = str(error)
    message, _, where = text.partition(" - at `$")
    parts = _key_parts(where.rstrip("`"), raw)
    if message.startswith("Object contains unknown field"):
        field = message.split("`")[1] if "`" in message else "?"
        return f"{path}: unknown key `{toml_key([*parts, field])}`; see config.example.toml for the keys Ash reads"
    info = _type_at(parts)
    if message.startswith("Invalid enum value"):
        choices = _choices(info)
        if choices:
            message = f"expected one of {', '.join(choices)}, got {message.split(' ', 3)[-1]}"
    elif RANGE_ERROR.match(message):
        message = f"expected {_range(info)}, got {_value_at(raw, parts)}"
    return f"{path}: `{toml_key(parts) or '(top level)'}`: {message[0].lower()}{message[1:]}"


# One step of msgspec's error path: `.name`, or `[...]` / `[3]` inside a dict / list.
PATH_STEP = re.compile(r"\.([^.\[]+)|(\[[^\]]*\])")
BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key_parts(where: str, raw: dict[str, Any]) -> list[str]:
    """msgspec's error path (`.models[...].temperature`) as the keys it names (models, fast,
    temperature). msgspec does not say which table of a dict failed (`[...]`), so the first one
    that does not convert on its own is named."""
    parts: list[str] = []
    for name, index in PATH_STEP.findall(where):
        if name:
            parts.append(name)
        elif index == "[...]":
            parts.append(_failing_entry(raw, parts))
        elif parts:
            parts[-1] += index  # a list position: allowed_users[2]
    return parts


def _failing_entry(raw: dict[str, Any], parts: list[str]) -> str:
    """The name of the first table under the dict at `parts` that fails on its own."""
    info = _type_at(parts)
    tables = _value_at(raw, parts)
    if isinstance(info, msgspec.inspect.DictType) and isinstance(tables, dict):
        kind = info.value_type
        if isinstance(kind, msgspec.inspect.StructType):
            for name, table in tables.items():
                try:
                    msgspec.convert(table, kind.cls)
                except msgspec.ValidationError:
                    return name
    return "..."


def toml_key(parts: list[str]) -> str:
    """Dotted keys as TOML writes them: `prices."gpt-4.1".input`."""
    return ".".join(part if BARE_KEY.fullmatch(part.split("[")[0]) else f'"{part}"' for part in parts)


def _type_at(parts: list[str]) -> msgspec.inspect.Type | None:
    """The declared type of a key such as default_llm.temperature or models.NAME.model (None if
    unknown)."""
    info: msgspec.inspect.Type | None = msgspec.inspect.type_info(Config)
    for part in parts:
        if isinstance(info, msgspec.inspect.DictType):  # `part` names one of its tables
            info = info.value_type
            continue
        struct = _struct_in(info)
        if struct is None:
            return None
        info = next((f.type for f in struct.fields if f.name == part), None)
        # A key with a description (sections.about) is its type wrapped in Metadata.
        if isinstance(info, msgspec.inspect.Metadata):
            info = info.type
    return info


def _struct_in(info: msgspec.inspect.Type | None) -> msgspec.inspect.StructType | None:
    """The struct a type is, or the struct inside an optional one (`LLMConfig | None`)."""
    if isinstance(info, msgspec.inspect.UnionType):
        info = next((t for t in info.types if isinstance(t, msgspec.inspect.StructType)), None)
    return info if isinstance(info, msgspec.inspect.StructType) else None


def _choices(info: msgspec.inspect.Type | None) -> list[str]:
    """The allowed values of a Literal key (or of a Literal-or-bool one such as `sandbox.enabled`)."""
    types = info.types if isinstance(info, msgspec.inspect.UnionType) else (info,)
    found = []
    for kind in types:
        if isinstance(kind, msgspec.inspect.LiteralType):
            found += [f'"{value}"' for value in kind.values]
        elif isinstance(kind, msgspec.inspect.BoolType):
            found += ["true", "false"]
    return found


def _range(info: msgspec.inspect.Type | None) -> str:
    """A number's allowed range in words, from its declared bounds."""
    if isinstance(info, msgspec.inspect.UnionType):  # `int | None`: the number's bounds
        info = next((t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)), None)
    low = getattr(info, "ge", None)
    high = getattr(info, "le", None)
    if low is not None and high is not None:
        return f"a number from {low} to {high}"
    if getattr(info, "gt", None) is not None:
        return f"a number above {info.gt}"
    if low is not None:
        return f"a number of at least {low}"
    return f"a number of at most {high}"


def _value_at(raw: dict[str, Any], parts: list[str]) -> Any:
    value: Any = raw
    for part in parts:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def toml_error(exc: tomllib.TOMLDecodeError, text: str, path: Path) -> str:
    """Where the file stops being TOML: the line number and the line itself."""
    found = TOML_POSITION.match(str(exc))
    if found is None:  # "Unclosed array (at end of document)" and the like
        return f"{path}: not valid TOML: {exc}"
    number = int(found["line"])
    lines = text.splitlines()
    line = lines[number - 1].strip() if number <= len(lines) else ""
    reason = found["reason"][0].lower() + found["reason"][1:]
    return f"{path}: line {number} is not valid TOML ({reason}, column {found['column']}): {line}"
