"""The live agents of a gateway: one per session, found, rebuilt or changed in place.

This is where the rules of the agent cache live. A cached agent serves a message only
when its signature matches today's settings and the store holds exactly the events this
process wrote for it; otherwise it is rebuilt from the store (`agents.py`). Reasoning
changes that keep the model's cache namespace are applied to the live agent instead.
Providers are made once per route (provider, model, base URL, API mode, key digest).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Literal, TypedDict

from stoker.agent.agent import Agent
from stoker.agent.fallback import Route
from stoker.agent.review import ReviewConfig
from stoker.agent.session import Session
from stoker.agent.telemetry import NO_TELEMETRY, Telemetry
from stoker.cache.fleet import FleetWatch, process_fleet
from stoker.cache.keys import KeyShards, process_key_shards, user_scope
from stoker.cache.models import same_model
from stoker.clock import Clock, SystemClock
from stoker.config import DEFAULT_LIMITS
from stoker.errors import ConfigError
from stoker.gateway.agents import (
    GATEWAY_KEY,
    apply_changes,
    apply_reasoning,
    build_agent,
    gateway_block,
    stored_settings,
)
from stoker.gateway.cache import AgentCache, CachedAgent
from stoker.gateway.errors import BadRequest, ToolsRemoved
from stoker.gateway.memory import MEMORY_TOOLSET, UserMemory
from stoker.gateway.providers import (
    ProviderFactory,
    ProviderRoute,
    TimedProvider,
    default_provider_factory,
)
from stoker.gateway.session_settings import (
    OVERRIDABLE,
    PER_SESSION,
    SessionSettings,
    keeps_namespace,
)
from stoker.gateway.signature import key_digest, signature
from stoker.gateway.sink import Head, SessionSink
from stoker.gateway.toolsets import NOTICE_KEY, dropped_tools, removal_notice
from stoker.providers.base import Provider
from stoker.store.base import SqlEventStore
from stoker.tools import ToolRegistry
from stoker.wire.events import ConfigChanged
from stoker.wire.stored import StoredSession

log = logging.getLogger(__name__)
ROUTE_KEY = "route"  # the session config entry holding its route (see `route_of`)
KEEP: Any = object()
"""`reconfigure(api_key=KEEP)`: leave the key as it is (None means no key)."""


def new_session_id() -> str:
    """192 random bits, URL-safe: ids are unguessable, ownership is still checked."""
    return secrets.token_urlsafe(24)


class PoolOptions(TypedDict, total=False):
    """The operator's choices for a gateway's agents, as `Gateway` takes them and hands
    them on whole: `AgentPool` names their defaults and refuses a keyword it does not
    know, so a misspelt option fails at once rather than being dropped."""

    defaults: SessionSettings | None
    api_key: str | None
    provider_factory: ProviderFactory
    registry: ToolRegistry | None
    cache_size: int
    idle_ttl: float
    cache_key_scope: Literal["agent", "user"]
    telemetry: Telemetry
    review: ReviewConfig | None


class AgentPool:
    """Cached agents in front of the store, and the providers they call."""

    def __init__(
        self,
        *,
        store: SqlEventStore,
        clock: Clock | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        on_evict: Callable[[str], object] | None = None,
        memory: UserMemory | None = None,
        key_shards: KeyShards | None = None,
        fleet: FleetWatch | None = None,
        defaults: SessionSettings | None = None,
        api_key: str | None = None,
        provider_factory: ProviderFactory = default_provider_factory,
        registry: ToolRegistry | None = None,
        cache_size: int = DEFAULT_LIMITS.cache_size,
        idle_ttl: float = DEFAULT_LIMITS.idle_ttl,
        cache_key_scope: Literal["agent", "user"] = "agent",
        telemetry: Telemetry = NO_TELEMETRY,
        review: ReviewConfig | None = None,
    ) -> None:
        self.store = store
        # What this gateway sees of each agent's sessions (with the other replicas' notes,
        # `fleet_sync`); None: the process's own, as a library agent has.
        self.key_shards = key_shards if key_shards is not None else process_key_shards()
        self.fleet = fleet if fleet is not None else process_fleet()
        self.memory = memory  # each user's memory files and `memory` tool (None: off)
        self.telemetry = telemetry
        self.review = review  # background memory/skill reviews after turns (None: off)
        self.cache_key_scope = cache_key_scope
        self.defaults = defaults or SessionSettings()
        self.registry = registry
        self.agents = AgentCache(
            max_size=cache_size, idle_ttl=idle_ttl, now=monotonic, on_evict=on_evict
        )
        self.stats: Counter[str] = Counter()
        self._api_key = api_key
        self._key_sha = key_digest(api_key)
        self._factory = provider_factory
        self._providers: dict[tuple[Any, ...], TimedProvider] = {}
        self._clock = clock or SystemClock()

    # -- configuration -------------------------------------------------------------------

    def reconfigure(
        self, *, defaults: SessionSettings | None = None, api_key: str | None = KEEP
    ) -> None:
        """New operator settings (a reloaded config). Cached agents are not touched here:
        each one's signature no longer matches, so its next message rebuilds it."""
        if defaults is not None:
            self.defaults = defaults
        if api_key is not KEEP:
            self._api_key = api_key
            self._key_sha = key_digest(api_key)

    def provider_for(self, settings: SessionSettings) -> Provider:
        route = ProviderRoute(
            provider=settings.provider,
            model=settings.model,
            base_url=settings.base_url,
            api_mode=settings.api_mode,
            api_key=self._api_key,
        )
        memo = (route.provider, route.model, route.base_url, route.api_mode, self._key_sha)
        provider = self._providers.get(memo)
        if provider is None:
            provider = self._providers[memo] = TimedProvider(self._factory(route))
        return provider

    def route_of(self, settings: SessionSettings) -> dict[str, str | None]:
        """Where a session's calls go, as far as the cache is concerned: the provider and
        a short digest of the key (a workspace's cache is its own; the key is never kept)."""
        return {"provider": settings.provider, "key": self._key_sha[:16] if self._key_sha else None}

    def agent_for(self, settings: SessionSettings, user: str | None = None) -> Agent:
        """The agent `settings` describe; with per-user memory on, `user`'s `memory` tool
        is among its tools (the same spec for everyone, writing to the user's files)."""
        provider = self.provider_for(settings)
        registry = self.registry
        if self.memory is not None and user is not None:
            registry = self.memory.registry(user, self.registry)
            if settings.toolsets is not None and MEMORY_TOOLSET not in settings.toolsets:
                settings = replace(settings, toolsets=(*settings.toolsets, MEMORY_TOOLSET))
        return build_agent(
            settings,
            provider=provider,
            registry=registry,
            clock=self._clock,
            telemetry=self.telemetry,
            fallbacks=[self._fallback(settings, spec) for spec in settings.fallbacks],
            review=self.review,
            key_shards=self.key_shards,
            fleet=self.fleet,
        )

    def _fallback(self, settings: SessionSettings, spec: str) -> Route:
        """A fallback entry on this gateway's providers and key (so a fallback of another
        kind of provider, which needs a key of its own, is not yet possible here)."""
        kind, _, model = spec.partition(":")
        if not kind or not model:
            raise ConfigError(f"fallback {spec!r}: write it as PROVIDER:MODEL")
        same = kind == settings.provider
        there = replace(
            settings,
            provider=kind,
            model=model,
            base_url=settings.base_url if same else None,
            api_mode=settings.api_mode if same else None,
        )
        provider = self.provider_for(there)
        provider.model_info(model)  # an unknown model fails at start, not mid-outage
        return Route(provider=provider, model=model, spec=spec)

    def signature_of(self, settings: SessionSettings, user: str) -> str:
        generation = self.registry.generation if self.registry is not None else 0
        return signature(
            settings, user=user, api_key_sha256=self._key_sha, registry_generation=generation
        )

    # -- sessions --------------------------------------------------------------------------

    async def create(self, user: str, overrides: Mapping[str, Any] | None = None) -> str:
        """A new session for `user`, stored at once; its agent goes into the cache.
        `overrides` are the user's choices (`OVERRIDABLE`) and the surface's (`SURFACE`:
        a chat platform's, never a client's)."""
        chosen = dict(overrides or {})
        unknown = sorted(set(chosen) - PER_SESSION)
        if unknown:
            raise BadRequest(f"cannot set {unknown} per session; allowed: {sorted(OVERRIDABLE)}")
        if self.memory is not None:  # read now, frozen into this session's prefix
            chosen["memory"] = self.memory.snapshot(user)
        settings = self.defaults.with_overrides(chosen)
        agent = self.agent_for(settings, user)
        if self.cache_key_scope == "user":  # the new lineage's OpenAI key is the user's own
            agent = replace(agent, cache_scope=user_scope(user))
        sid = new_session_id()
        stamp = {
            "owner": user,
            GATEWAY_KEY: gateway_block(settings, chosen),
            ROUTE_KEY: self.route_of(settings),
        }
        sink = SessionSink(self.store, sid, written=0, stamp=stamp)
        session = await agent.open(sink, sid)
        self._enter(session, sink, agent, user, chosen, settings=settings, asked=settings)
        self.stats["created"] += 1
        return sid

    def model_of(self, session_id: str) -> str | None:
        """The model a cached session is on (None when it is not cached)."""
        entry = self.agents.peek(session_id)
        return entry.session.prefix.params.model if entry is not None else None

    # -- one session's agent ---------------------------------------------------------------

    async def acquire(self, user: str, session_id: str, head: Head) -> CachedAgent:
        """The session's live agent, rebuilt when stale; marked busy until `release`.

        Call under the session's lock, with `head` read under it.
        """
        entry = self.agents.acquire(session_id)
        if entry is not None:
            reason = await self._stale(entry, user, head)
            if reason is None:
                return entry
            self.agents.release(entry)
            self.agents.evict(session_id, reason)
            self.stats[reason] += 1
        return await self._rebuild(user, session_id, head)

    async def _stale(self, entry: CachedAgent, user: str, head: Head) -> str | None:
        """Why `entry` cannot serve this message, or None (after an in-place change)."""
        if entry.sink.written != head.events:
            return "written by another process"
        generation = self.registry.generation if self.registry is not None else 0
        inputs = (self.defaults, entry.overrides, user, self._key_sha, generation)
        checked = entry.checked
        if checked is not None and _same(checked[0], inputs):
            wanted = checked[1]  # nothing the signature reads changed since it matched
        else:
            wanted = self.defaults.with_overrides(entry.overrides)
            if entry.signature != self.signature_of(wanted, user):
                return "signature changed"
            entry.checked = (inputs, wanted)
        if wanted.reasoning != entry.settings.reasoning:
            if not keeps_namespace(entry.agent.info):
                return "reasoning moves the cache namespace"
            await self.apply_reasoning(entry, wanted)
        return None

    async def apply_reasoning(self, entry: CachedAgent, wanted: SessionSettings) -> None:
        entry.agent = await apply_reasoning(
            entry.session, entry.agent, settings=wanted, overrides=entry.overrides
        )
        entry.settings = replace(
            entry.settings, effort=wanted.effort, thinking_budget=wanted.thinking_budget
        )
        self.stats["reasoning applied in place"] += 1

    async def overrides_of(self, session_id: str) -> dict[str, Any]:
        """A session's stored per-session choices (from its cached agent when there is one)."""
        entry = self.agents.peek(session_id)
        if entry is not None:
            return dict(entry.overrides)
        return stored_settings(await self.store.load(session_id))[1]

    async def _rebuild(self, user: str, session_id: str, head: Head) -> CachedAgent:
        """Resume from the store as stored, then declare what changed since."""
        stored = await self.store.load(session_id)
        built, overrides = stored_settings(stored)
        asked = self.defaults.with_overrides(overrides)
        # Another spelling of the session's model (a vendor prefix, a dated alias) is the
        # same model: the session keeps sending the name its prefix was built with.
        same = same_model(asked.model, built.model)
        wanted = replace(asked, model=built.model) if same else asked
        # The route is not part of the prefix: resume on today's provider and key.
        built = replace(
            built, provider=wanted.provider, base_url=wanted.base_url, api_mode=wanted.api_mode
        )
        before, agent = self.agent_for(built, user), self.agent_for(wanted, user)
        await self._tell_removals(stored, before=before, after=agent, wanted=wanted)
        sink = SessionSink(self.store, session_id, written=head.events, loaded=stored)
        session = await before.open(sink, session_id, create=False)
        route, was = self.route_of(wanted), stored.config.get(ROUTE_KEY)
        if was is not None and was != route:
            # Another provider or key is another cache (a workspace's own): the first call
            # under it is cold, and its record says why.
            what = "provider" if was.get("provider") != route["provider"] else "API key"
            await session.rebase(reason=f"the {what} changed: its cache starts cold")
        await apply_changes(
            session,
            built=built,
            wanted=wanted,
            agent=agent,
            overrides=overrides,
            used=stored.used_tools,
        )
        if was != route:
            await session.adopt(agent, config={ROUTE_KEY: route})
        entry = self._enter(
            session, sink, agent, user, overrides, settings=wanted, asked=asked, busy=True
        )
        self.stats["rebuilt"] += 1
        log.debug("rebuilt the agent of session %s", session_id)
        return entry

    def _enter(
        self,
        session: Session,
        sink: SessionSink,
        agent: Agent,
        user: str,
        overrides: dict[str, Any],
        *,
        settings: SessionSettings,
        asked: SessionSettings,
        busy: bool = False,
    ) -> CachedAgent:
        """Cache a live session, signed with the settings the user `asked` for, as `_stale`
        compares them; `settings` are what its prefix reflects (the model as stored)."""
        entry = CachedAgent(
            session=session,
            agent=agent,
            sink=sink,
            user=user,
            signature=self.signature_of(asked, user),
            settings=settings,
            overrides=overrides,
        )
        self.agents.put(session.id, entry, busy=busy)
        return entry

    async def _tell_removals(
        self, stored: StoredSession, *, before: Agent, after: Agent, wanted: SessionSettings
    ) -> None:
        """A 409 when the configuration dropped tools the session used, once per change:
        the session records that it was told, and the next message applies the change
        (see `toolsets.py`: an outage is never a removal)."""
        dropped = dropped_tools(stored.used_tools, before=before, after=after)
        if not dropped:
            return
        notice = removal_notice(dropped, wanted)
        if stored.config.get(NOTICE_KEY) == notice:
            return
        await self.store.emit(ConfigChanged(session_id=stored.id, changes={NOTICE_KEY: notice}))
        self.stats["told of removed tools"] += 1
        raise ToolsRemoved(stored.id, dropped)

    async def close(self) -> None:
        for provider in self._providers.values():
            await provider.aclose()
        self._providers.clear()


def _same(before: tuple[object, ...], now: tuple[object, ...]) -> bool:
    """What the signature was last checked with: the same settings and overrides objects
    (both are replaced on a change, never changed in place), the same user, key, generation."""
    return before[0] is now[0] and before[1] is now[1] and before[2:] == now[2:]
