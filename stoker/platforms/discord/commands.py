"""The gateway's commands as Discord slash commands.

They are registered at each start with a bulk overwrite, so Discord's list always
matches the gateway's (`HELP`). A slash command is stored like the message typing it
would be (`updates.raw_command`) and answered in place of Discord's "thinking..." note;
typed as text (`/usage` in a DM, `@Stoker /usage` in a channel) they work too.
"""

from __future__ import annotations

from typing import Any

from stoker.gateway.commands import HELP

# The commands that take an argument: their one string option.
OPTIONS: dict[str, dict[str, Any]] = {
    "model": {"name": "name", "description": "the model to switch to"},
    "reasoning": {
        "name": "level",
        "description": "the reasoning effort",
        "choices": [{"name": c, "value": c} for c in ("low", "medium", "high", "off")],
    },
}
CHAT_INPUT, STRING = 1, 3  # Discord's application command type and option type


def slash_commands() -> list[dict[str, Any]]:
    """Every gateway command as a Discord application command (at most 100 characters
    of description, as Discord takes)."""
    out = []
    for name, what in HELP.items():
        description = what.partition(": ")[2] if what.startswith("/") else what
        command: dict[str, Any] = {
            "name": name,
            "type": CHAT_INPUT,
            "description": description[:100],
        }
        if name in OPTIONS:
            command["options"] = [{"type": STRING, "required": True, **OPTIONS[name]}]
        out.append(command)
    return out
