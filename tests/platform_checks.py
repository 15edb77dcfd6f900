"""What every chat platform's end-to-end tests share, written once: the gateway they run
on (the simulator as a model that echoes, or writes a long reply), and the cache checks:
a chat's tenth message reads all its ninth read and wrote, and a review after a platform
turn reads all the turn cached."""

from __future__ import annotations

from stoker.gateway.service import Gateway
from stoker.gateway.session_settings import SessionSettings
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from stoker.wire.record import CacheRecord
from tests.helpers import SYSTEM
from tests.telegram_rig import ChatModel
from tests.test_gateway_support import Rig, make_rig


def chat_rig(store: SqlEventStore) -> Rig:
    """A gateway on `store` whose model answers "Understood: ..." (or a long reply, which
    needs room: the simulator, like a model, stops at `max_tokens`)."""
    rig = make_rig(store, defaults=SessionSettings(system=SYSTEM, max_tokens=16_000))
    rig.provider = SimProvider(engine=SimEngine(model=ChatModel()), clock=rig.clock)
    return rig


async def assert_tenth_reads_the_ninth(
    gateway: Gateway, platform: str, chat: str, user: str
) -> int:
    """The chat key `chat` of `platform` answered ten messages, and the tenth's first call
    read the whole prefix its ninth's last call had (hit); the tokens it read."""
    sid = await gateway.store.chat_session(platform, chat)
    assert sid is not None
    view = await gateway.view(f"{platform}:{user}", sid)
    assert len(view.turns) == 10
    ninth, tenth = view.turns[8].records[-1], view.turns[9].records[0]
    assert tenth.explanation.verdict == "hit"
    assert tenth.usage.read == ninth.usage.read + ninth.usage.written > 0
    return tenth.usage.read


def assert_review_reads_the_turn(recorded_calls: list[CacheRecord]) -> int:
    """The first review is a fork of the last main call's session and read everything
    that call read and wrote; the tokens it read."""
    main = [r for r in recorded_calls if r.role == "main"]
    reviews = [r for r in recorded_calls if r.role == "review"]
    assert reviews[0].usage.read == main[-1].usage.read + main[-1].usage.written > 0
    assert reviews[0].session_id.startswith(main[-1].session_id + ".review-")
    return reviews[0].usage.read
