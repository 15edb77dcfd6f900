"""Recorded calls back into the bodies that were sent, to replay a lineage elsewhere.

The store keeps each call's body with the messages it shares with the previous call of
its lineage left out (`Exchange.messages_from`); this puts them back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stoker.proxy.recorder import messages_key
from stoker.wire.exchange import Exchange


def full_bodies(calls: Sequence[Exchange]) -> list[dict[str, Any]]:
    """The whole body of each turn call of one lineage, in order (keep-warm left out)."""
    out: list[dict[str, Any]] = []
    history: list[Any] = []
    for call in calls:
        if call.purpose != "turn":
            continue
        key = messages_key(call.request)
        history = [*history[: call.messages_from], *call.request.get(key, ())]
        out.append({**call.request, key: history})
    return out
