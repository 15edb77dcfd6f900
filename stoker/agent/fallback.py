"""The fallback chain: when the primary provider is down, a turn goes on elsewhere.

A fallback is another model, so another cache namespace: its first call is a declared
break that says why, and the primary is restored at the next turn (or after a
cool-down) with exactly the prefix it sent before, so it reads its own cache if that is
still warm. The messages a fallback produced stay in the history as sent; thinking a
provider signed is never sent to another provider (stripped, and the count recorded).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from stoker.errors import AuthenticationError, InvalidRequest, ProviderError, ProviderTimeout
from stoker.providers.base import Provider
from stoker.providers.retry import RETRYABLE_STATUS
from stoker.wire.blocks import RedactedThinkingBlock, ThinkingBlock
from stoker.wire.messages import AssistantMessage, Message


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """One entry of the chain: who serves it, and which model."""

    provider: Provider
    model: str
    spec: str  # as configured, "PROVIDER:MODEL"


@dataclass(frozen=True, slots=True, kw_only=True)
class Detour:
    """The chain entry a session is on, since when, and why it left the primary."""

    index: int
    since: float
    reason: str


def transient(exc: ProviderError) -> bool:
    """Whether a failure says the provider is unavailable (overloaded, rate-limited, a
    server error, unreachable, too slow), not that the request or the key is wrong."""
    if isinstance(exc, InvalidRequest | AuthenticationError):
        return False
    if isinstance(exc, ProviderTimeout):
        return True
    return exc.status is None or exc.status in RETRYABLE_STATUS


def why(model: str, exc: ProviderError) -> str:
    """ "fallback: claude-sonnet-4-6 overloaded (529 x4)", and the like."""
    status = exc.status
    if isinstance(exc, ProviderTimeout):
        what = f"timed out ({exc.phase})"
    elif status == 529:
        what = "overloaded"
    elif status == 429:
        what = "rate-limited"
    elif status is None:
        what = "unreachable"
    else:
        what = "failing"
    code = "" if status is None else str(status)
    tries = f" x{exc.attempts}" if exc.attempts else ""
    detail = f" ({code}{tries})" if code else f" ({tries.strip()})" if tries else ""
    return f"fallback: {model} {what}{detail}"


def restored(detour: Detour | None, now: float, cooldown: float) -> Detour | None:
    """The detour still in force at a new turn: none once the cool-down has passed."""
    if detour is None or now - detour.since >= cooldown:
        return None
    return detour


def sendable(messages: Sequence[Message], *, to: str, home: str) -> tuple[tuple[Message, ...], int]:
    """`messages` as provider family `to` may receive them, and how many thinking blocks
    were left out: those another family signed (`home` is the family of messages with no
    origin, the session's primary)."""
    out: list[Message] = []
    stripped = 0
    for m in messages:
        if isinstance(m, AssistantMessage) and (m.origin or home) != to:
            kept = tuple(
                b for b in m.content if not isinstance(b, ThinkingBlock | RedactedThinkingBlock)
            )
            if len(kept) != len(m.content):
                stripped += len(m.content) - len(kept)
                m = replace(m, content=kept)
        out.append(m)
    return tuple(out), stripped
