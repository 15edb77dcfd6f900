"""Builders shared by the gateway tests (no tests here): a gateway on the simulator whose
provider factory hands every route the same `SimProvider`, so the provider-side cache
survives a rebuild the way a real provider's does, and an HTTP client over ASGI."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from stoker.clock import FrozenClock
from stoker.errors import ProviderError
from stoker.gateway.app import create_app
from stoker.gateway.auth import TokenTable, token_digest
from stoker.gateway.cache import CachedAgent
from stoker.gateway.providers import ProviderRoute
from stoker.gateway.service import Gateway
from stoker.gateway.session_settings import SessionSettings
from stoker.providers.base import CallContext, Completion, Provider, ProviderWrapper
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from stoker.wire.request import Request
from tests.helpers import SYSTEM, make_registry

TOKENS = {"alice": "alice-secret-token-0001", "bob": "bob-secret-token-0002"}


def tokens() -> TokenTable:
    return TokenTable({token_digest(t): user for user, t in TOKENS.items()})


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


@dataclass
class Rig:
    """A gateway, the simulator behind it, and the routes it asked providers for."""

    sim: SimProvider
    clock: FrozenClock
    routes: list[ProviderRoute] = field(default_factory=list)
    provider: Provider | None = None  # set before the first session to wrap the simulator
    gateway: Gateway = field(init=False)

    def factory(self, route: ProviderRoute) -> Provider:
        self.routes.append(route)
        return self.provider or self.sim

    def another_process(
        self, store: SqlEventStore, defaults: SessionSettings | None = None
    ) -> Gateway:
        """A second gateway (another process or replica) on `store`, same provider."""
        return Gateway(
            store=store,
            defaults=defaults or self.gateway.defaults,
            provider_factory=self.factory,
            registry=self.gateway.pool.registry,
            clock=self.clock,
        )


class FailsOnce(ProviderWrapper):
    """The provider, failing its next call as an overloaded upstream would while `armed`
    (from the start, unless told otherwise); after that, itself again."""

    def __init__(self, inner: Provider, *, status: int = 529, armed: bool = True) -> None:
        super().__init__(inner)
        self.status, self.armed = status, armed

    async def complete(self, request: Request, context: CallContext) -> Completion:
        if self.armed:
            self.armed = False
            raise ProviderError("upstream overloaded", provider="sim", status=self.status)
        return await self.inner.complete(request, context)


def make_rig(store: SqlEventStore, **kwargs: Any) -> Rig:
    clock = FrozenClock()
    rig = Rig(sim=SimProvider(clock=clock), clock=clock)
    kwargs.setdefault("defaults", SessionSettings(system=SYSTEM))
    kwargs.setdefault("registry", make_registry())
    rig.gateway = Gateway(store=store, provider_factory=rig.factory, clock=clock, **kwargs)
    return rig


async def answered(
    store: SqlEventStore, first: str = "hello", model: str | None = None, **kwargs: Any
) -> tuple[Rig, str, CachedAgent]:
    """A rig whose gateway answered `first` in a new session of alice's (on `model`), and
    the agent it keeps for that session."""
    rig = make_rig(store, **kwargs)
    sid = await rig.gateway.create_session("alice", {"model": model} if model else None)
    await rig.gateway.send("alice", sid, first)
    entry = rig.gateway.agents.peek(sid)
    assert entry is not None
    return rig, sid, entry


@asynccontextmanager
async def client(rig: Rig, *, max_body_bytes: int = 1_048_576) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(rig.gateway, tokens=tokens(), max_body_bytes=max_body_bytes)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as c:
        yield c


def sse_events(body: str) -> list[tuple[str, str]]:
    """(event, data) pairs of a text/event-stream body ("" for data-only frames)."""
    out = []
    for frame in body.split("\n\n"):
        if not frame.strip():
            continue
        event, data = "", ""
        for line in frame.split("\n"):
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        out.append((event, data))
    return out
