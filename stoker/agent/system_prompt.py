"""The system prompt, built once per session and then frozen.

It carries the date, never the time: a timestamp in the system block would change the
prefix every request (docs/cache-breakers.md, "Timestamps in the system prompt").
Anything that changes during a session goes into the newest user message instead.
"""

from __future__ import annotations

import datetime as dt

from stoker.clock import Clock

DEFAULT_SYSTEM = (
    "You are a careful assistant that uses tools when they help. Prefer short, exact answers."
)


def build_system_prompt(base: str, *, clock: Clock, sections: tuple[str, ...] = ()) -> str:
    """`base`, optional sections (memory snapshot, skills index), and today's date (UTC)."""
    day = dt.datetime.fromtimestamp(clock.now(), tz=dt.UTC).date().isoformat()
    parts = [base.strip(), *(s.strip() for s in sections if s.strip()), f"Today's date: {day}."]
    return "\n\n".join(parts)
