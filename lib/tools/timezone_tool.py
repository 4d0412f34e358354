"""The `set_timezone` tool: the model sets the asker's time zone when they say where they live.

It always acts on the person talking (the tool context), never on a user the model names, and in
a group too it is the speaker's own zone: a time zone belongs to a person, not to a chat.
"""

from __future__ import annotations

import asyncio
import zoneinfo
from datetime import UTC, datetime
from typing import Annotated, ClassVar

import msgspec

from lib.tools.base import ToolContext, ToolResult


class SetTimezone:
    """Set the asking user's time zone (the same setter as /timezone and `ash users timezone`)."""

    name: ClassVar[str] = "set_timezone"
    description: ClassVar[str] = (
        "Set the time zone the user's dates and times are shown in. Use it when the user tells you where they "
        "live or are staying, or which time zone they are in, and it differs from the one in 'This "
        "conversation': give the IANA name of that place's zone (Lisbon -> Europe/Lisbon, New York -> "
        "America/New_York, Tokyo -> Asia/Tokyo). Do not guess from a place they only mention in passing."
    )

    class Input(msgspec.Struct, forbid_unknown_fields=True):
        timezone: Annotated[
            str, msgspec.Meta(min_length=1, description="An IANA time zone name such as Europe/Lisbon.")
        ]

    async def execute(self, args: SetTimezone.Input, context: ToolContext) -> ToolResult:
        """Store the zone in the asker's profile, or say why the name is not one."""
        from lib.memory.store import set_timezone

        zone = args.timezone.strip()
        try:
            await asyncio.to_thread(lambda: set_timezone(context.db.conn(), context.user_id, zone))
        except ValueError as exc:
            return ToolResult(str(exc), is_error=True)
        local = datetime.now(UTC).astimezone(zoneinfo.ZoneInfo(zone))
        return ToolResult(f"The user's time zone is now {zone}; it is {local:%A %H:%M} there.")
