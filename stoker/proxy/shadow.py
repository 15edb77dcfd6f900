"""The provider's cache as the proxied calls left it: the costly half of recording a call.

Why a call missed (an entry expired, a write outside the lookback, a prefix under the
minimum) and how much of its prefix an earlier call of its tenant had sent both come
from replaying every forwarded body, in order, through the pure accountant the
simulator bills with (`stoker.cache.accounting`). Both are in the accountant's token
estimate: the recorder weighs them against the counts the provider reported, which win.
That replay is most of a recording's CPU time; `stoker proxy` records in a process of its own
(`stoker.proxy.recorder_process`) so that none of it runs on the loop that forwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from stoker.cache.accounting import AnthropicAccountant, OpenAIAccountant
from stoker.cache.accounting.anthropic import prefix_blocks
from stoker.errors import StokerError
from stoker.providers.sim.provider import facts_of
from stoker.wire.dialects._chain import ChainMemo

_API: dict[str, Literal["chat", "responses"]] = {
    "openai_chat": "chat",
    "openai_responses": "responses",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """What one forwarded body did to the shadow cache.

    `facts`: the accountant's reasons for what the call could not read, as (cause,
    sentence) pairs for the explainer. `shared` of `total`: estimated prefix tokens an
    earlier call of the tenant sent, of all the call's (Anthropic turns; 0 elsewhere).
    """

    facts: tuple[tuple[str, str], ...] = ()
    shared: int = 0
    total: int = 0


@dataclass(slots=True)
class ShadowCache:
    """The accountants' entries per tenant, and the prefix blocks each tenant has sent."""

    anthropic: AnthropicAccountant = field(default_factory=AnthropicAccountant)
    openai: OpenAIAccountant = field(default_factory=OpenAIAccountant)
    seen: dict[str, set[str]] = field(default_factory=dict)
    memos: dict[str, ChainMemo] = field(default_factory=dict)  # per tenant, as the accountant's

    def observe(
        self, tenant: str, dialect: str, payload: dict[str, Any], *, at: float, turn: bool
    ) -> Observation:
        """Account `payload` (a request the upstream answered) as started at `at`. A body
        the accountant cannot read leaves no facts; it never raises for what a client sent."""
        try:
            if dialect == "anthropic":
                outcome = self.anthropic.account(payload, at=at, workspace=tenant)
            else:
                outcome = self.openai.account(payload, api=_API[dialect], at=at, org=tenant)
        except (StokerError, KeyError, TypeError, AttributeError, ValueError, OverflowError):
            return Observation()  # the upstream answered it; the shadow cannot read it
        shared, total = self._shared(tenant, payload) if turn and dialect == "anthropic" else (0, 0)
        return Observation(facts=facts_of(outcome), shared=shared, total=total)

    def _shared(self, tenant: str, payload: dict[str, Any]) -> tuple[int, int]:
        """Tokens through the last block an earlier call had sent (keys chain, so every
        block before it was sent too), and all the payload's tokens."""
        seen = self.seen.setdefault(tenant, set())
        try:
            memo = self.memos.setdefault(tenant, ChainMemo())
            blocks = prefix_blocks(payload, workspace=tenant, memo=memo)
        except (StokerError, KeyError, TypeError, AttributeError, ValueError, OverflowError):
            return 0, 0
        shared = total = 0
        for key, tokens in blocks:
            total += tokens
            if key in seen:
                shared = total
            else:
                seen.add(key)
        return shared, total
