"""What a key of config.toml may hold (the ranges msgspec checks while decoding, so an error names
the key and the range), its description (`about`), and `Table`, the base of every table."""

from __future__ import annotations

from typing import Annotated

import msgspec

# Ranges msgspec checks while decoding the file, so an error names the key and the range.
Positive = Annotated[float, msgspec.Meta(gt=0)]
Count = Annotated[int, msgspec.Meta(ge=1)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]
NonNegative = Annotated[float, msgspec.Meta(ge=0)]
Fraction = Annotated[float, msgspec.Meta(ge=0, le=1)]
Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]
# OpenAI accepts 0 to 2; Anthropic 0 to 1 (settings.py checks that per provider).
Temperature = Annotated[float, msgspec.Meta(ge=0, le=2)]
# Brave Search returns at most 20 results a request.
BraveCount = Annotated[int, msgspec.Meta(ge=1, le=20)]


def about(text: str) -> msgspec.Meta:
    """A key's description for people: the configuration reference is generated from it."""
    return msgspec.Meta(description=text)


class Table(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A config table: unknown keys are typos and fail loudly."""
