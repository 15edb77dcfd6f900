"""The gateway's fallback chain: one session's primary fails, its turn goes on the next
entry, its cached agent is evicted and rebuilt on the primary at its next message, and no
other session is touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.errors import ConfigError, ProviderError
from stoker.gateway.config import load_config
from stoker.gateway.session_settings import SessionSettings
from stoker.providers.base import CallContext, Completion, ProviderWrapper
from stoker.store.base import SqlEventStore
from stoker.wire.request import Request
from tests.helpers import SYSTEM
from tests.test_gateway_support import make_rig

PRIMARY = "claude-sonnet-4-6"


class Outage(ProviderWrapper):
    """The simulator, but the primary model is overloaded while `down`."""

    down = False

    async def complete(self, request: Request, context: CallContext) -> Completion:
        if self.down and request.prefix.params.model == PRIMARY:
            raise ProviderError("sim failed after 4 attempts: HTTP 529", status=529, attempts=4)
        return await self.inner.complete(request, context)


async def test_a_fallback_evicts_and_rebuilds_only_its_session(store: SqlEventStore) -> None:
    defaults = SessionSettings(system=SYSTEM, model=PRIMARY, fallbacks=("sim:claude-opus-4-6",))
    rig = make_rig(store, defaults=defaults)
    outage = Outage(rig.sim)
    rig.provider = outage
    gw = rig.gateway
    hit, other = await gw.create_session("alice"), await gw.create_session("alice")
    await gw.send("alice", hit, "hello")
    await gw.send("alice", other, "hello")
    before = gw.agents.peek(hit)
    untouched = gw.agents.peek(other)
    outage.down = True
    detour = await gw.send("alice", hit, "are you there?")
    (call,) = detour.requests
    assert call["model"] == "claude-opus-4-6"
    assert call["fallback_of"] == PRIMARY
    assert call["declared_break"].startswith(f"fallback: {PRIMARY} overloaded (529 x4)")
    assert hit not in gw.agents  # evicted
    assert gw.agents.peek(other) is untouched  # the other session keeps its agent
    outage.down = False
    back = await gw.send("alice", hit, "back?")
    rebuilt = gw.agents.peek(hit)
    assert rebuilt is not None
    assert rebuilt is not before
    first = back.requests[0]
    assert first["model"] == PRIMARY
    view = await gw.view("alice", hit)
    hello = view.turns[0].records[0]
    assert first["usage"]["read"] == hello.usage.read + hello.usage.written  # its own cache
    assert [t.user for t in view.turns] == ["hello", "are you there?", "back?"]
    again = await gw.send("alice", other, "still fine")
    assert gw.agents.peek(other) is untouched
    assert again.requests[0]["explanation"]["verdict"] == "hit"


def test_the_chain_comes_from_the_gateway_config(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(
        '[agent]\nprovider = "sim"\nmodel = "claude-sonnet-4-6"\n'
        'fallbacks = ["sim:claude-opus-4-6", "sim:claude-haiku-4-5"]\n'
        "fallback_cooldown_seconds = 120\n"
        '[[users]]\nid = "a"\ntoken_sha256 = "%s"\n' % ("0" * 64)
    )
    config = load_config(path, env={})
    assert config.defaults.fallbacks == ("sim:claude-opus-4-6", "sim:claude-haiku-4-5")
    assert config.defaults.fallback_cooldown == 120
    path.write_text('[agent]\nfallbacks = "sim:claude-opus-4-6"\n')
    with pytest.raises(ConfigError, match="fallbacks"):
        load_config(path, env={})
