"""What a handled message sends back, in order, as values the bridge delivers.

First what of its attachments was not passed (plain text), then the turn's notice (a
quiet line, e.g. a model fallback), then the answer: in the platform's markup and in
pieces within its limit, or a command's reply as plain text. The list is the same each
time a message is handled again, so a retry sends only the pieces not yet delivered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stoker.gateway.views import Reply

NO_ANSWER = "(no answer)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Outgoing:
    """One message to post (`markup`: text in the platform's markup, else plain)."""

    text: str
    markup: bool = False
    quiet: bool = False


def outbox(refused: str, reply: Reply | None, render: Callable[[str], list[str]]) -> list[Outgoing]:
    """The messages for a handled message: `refused` (the attachments' note, "" for
    none) and its turn's `reply` (None when it had no turn), the answer `render`ed."""
    out = [Outgoing(text=refused)] if refused else []
    if reply is None:
        return out
    if reply.notice:
        out.append(Outgoing(text=reply.notice, quiet=True))
    if reply.kind == "command":
        return [*out, Outgoing(text=reply.text)]
    return out + [Outgoing(text=part, markup=True) for part in render(reply.text or NO_ANSWER)]
