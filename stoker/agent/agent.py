"""The agent is configuration: a provider, a model, tools, a system prompt, limits.

It holds no conversation state. `agent.session()` freezes a `Prefix` from this
configuration once; every turn, fork and resume of that session sends it verbatim.

    agent = Agent("anthropic:claude-sonnet-4-6", tools=[...], system="...")
    session = agent.session()                      # in memory
    session = await agent.open(store, "my-id")     # stored: resumed, or created
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from types import TracebackType
from typing import Any, Literal, TypeVar, overload

from stoker.agent.background import BackgroundWarmth
from stoker.agent.compaction import CompactionPolicy
from stoker.agent.explicit import Holders
from stoker.agent.fallback import Route
from stoker.agent.integrations import USE_TOOLKIT, Integrations, use_toolkit_tool
from stoker.agent.keepwarm import SpendLimits
from stoker.agent.loop import TurnResult
from stoker.agent.opening import open_session
from stoker.agent.output import OutputSpec
from stoker.agent.portal import Portal
from stoker.agent.resume import ToolsMode
from stoker.agent.review import ReviewConfig
from stoker.agent.seams import Callbacks
from stoker.agent.session import Session
from stoker.agent.starts import new_start
from stoker.agent.system_prompt import DEFAULT_SYSTEM, build_system_prompt
from stoker.agent.telemetry import NO_TELEMETRY, Telemetry
from stoker.cache.fleet import FleetWatch, process_fleet
from stoker.cache.keys import KeyShards, process_key_shards
from stoker.cache.models import ModelInfo, bare_model_message
from stoker.cache.planner import CachePolicy
from stoker.clock import Clock, SystemClock
from stoker.config import Config
from stoker.errors import ConfigError, ToolError
from stoker.lifecycle import AsyncClosing
from stoker.providers.base import Provider
from stoker.providers.caches import cache_objects
from stoker.providers.select import select_provider
from stoker.tools import Tool, ToolRegistry, Toolset
from stoker.wire.events import EventSink
from stoker.wire.messages import Message
from stoker.wire.prefix import CacheParams, Prefix
from stoker.wire.stored import SessionSource

T = TypeVar("T")


def _tools_of(item: Tool | Toolset) -> Sequence[Tool]:
    return item.tools if isinstance(item, Toolset) else (item,)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Agent(AsyncClosing):
    """What an agent is, not what it has said. Immutable: derive variants with `replace`.

    `model` is "PROVIDER:MODEL" ("anthropic:claude-sonnet-4-6", "openai:gpt-5.6",
    "sim:claude-sonnet-4-6"; see `stoker.providers.select`), or a bare model name when
    `provider` is given. A provider that needs a key takes it from `config`
    (`Config.from_env(os.environ)` at your program's edge). `async with agent:` closes
    the provider's connections at the end.
    """

    model: str  # the one positional argument: `Agent("sim:claude-sonnet-4-6", tools=...)`
    # Every later field is keyword-only. Said with `KW_ONLY` rather than `kw_only=True` on
    # the class plus `field(kw_only=False)` here: Python read both the same, but the API
    # reference (griffe) took the class's `kw_only` for every field and showed `Agent(*, model`.
    _: KW_ONLY
    provider: Provider = field(default=None, compare=False)  # type: ignore[assignment]
    tools: Sequence[Tool | Toolset] = ()  # loose tools, and toolsets always on
    registry: ToolRegistry | None = field(default=None, compare=False)
    toolsets: tuple[str, ...] | None = None  # enabled toolsets of the registry; None = all
    disabled_toolsets: tuple[str, ...] = ()
    system: str = DEFAULT_SYSTEM
    system_sections: tuple[str, ...] = ()
    thinking_budget: int | None = None
    effort: str | None = None
    tool_choice: str = "auto"
    parallel_tool_calls: bool = True
    max_iterations: int = 25
    max_tokens: int = 4096
    # The answer's type (a Pydantic model, a dataclass, a TypedDict; `str` for text): asked
    # for natively on every request, so it is part of the prefix (`stoker.agent.output`).
    output: Any = str
    output_retries: int = 2  # a reply that does not validate is sent back this many times
    cache_policy: CachePolicy = field(default_factory=CachePolicy)
    compaction: CompactionPolicy = field(default_factory=CompactionPolicy)
    # Where a turn goes on when the provider is unavailable: "PROVIDER:MODEL" specs (or
    # `Route`s) in order; the primary is tried again at the next turn after the cool-down.
    fallbacks: Sequence[str | Route] = ()
    fallback_cooldown: float = 0.0
    review: ReviewConfig | None = None
    integrations: Integrations | None = field(default=None, compare=False)
    clock: Clock = field(default_factory=SystemClock, compare=False)
    config: Config | None = field(default=None, compare=False, repr=False)  # keys, base URLs
    name: str = "agent"  # what kind of agent this is; a session resumes only with its own
    platform: str = "library"  # where the agent runs ("cli", "gateway", ...), for provenance
    # OpenAI cache keys: rates seen (process-wide by default) and the scope of a new
    # lineage's key ("" shares it with every session of the same prefix; see cache.keys).
    key_shards: KeyShards = field(default_factory=process_key_shards, compare=False, repr=False)
    # When new sessions of this agent arrive, for keeping their shared part warm.
    fleet: FleetWatch = field(default_factory=process_fleet, compare=False, repr=False)
    cache_scope: str = field(default="", compare=False)
    # Spans and metrics per turn and provider call (`stoker.agent.telemetry`); none unless
    # given, e.g. `telemetry_from(config.telemetry)`.
    telemetry: Telemetry = field(default=NO_TELEMETRY, compare=False, repr=False)
    # While the agent is open its sessions are kept warm across idle gaps by the time
    # policy (`stoker.agent.background`); False turns that off, `SpendLimits` caps it.
    keep_warm: bool | SpendLimits = True
    portal: Portal = field(default_factory=Portal, init=False, compare=False, repr=False)
    warmth: BackgroundWarmth | None = field(default=None, init=False, compare=False, repr=False)
    # Its sessions that may hold explicit cache objects (Gemini's), deleted at `aclose`.
    holders: Holders = field(default_factory=Holders, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        budget = self.thinking_budget
        if budget is not None and not 1024 <= budget < self.max_tokens:
            raise ConfigError(
                f"thinking_budget={budget} with max_tokens={self.max_tokens}: the thinking "
                "budget must be at least 1,024 tokens and below max_tokens (it is part of the "
                "output); raise max_tokens or lower the budget"
            )
        if self.provider is None:
            self._select()
        # resolved once: every session of this agent shares the fallbacks' connections
        object.__setattr__(self, "fallbacks", tuple(self._route(f) for f in self.fallbacks))

    @property
    def routes(self) -> tuple[Route, ...]:
        """The fallback chain, resolved (`fallbacks` holds only `Route`s once built)."""
        return tuple(f for f in self.fallbacks if isinstance(f, Route))

    def _route(self, entry: str | Route) -> Route:
        if isinstance(entry, Route):
            return entry
        if ":" not in entry:
            raise ConfigError(
                f"fallback {entry!r}: write it as PROVIDER:MODEL, e.g. 'openai:gpt-5.6'"
            )
        choice = select_provider(entry, config=self.config, clock=self.clock)
        if not choice.model:
            raise ConfigError(f"fallback {entry!r} names no model; write PROVIDER:MODEL")
        choice.provider.model_info(choice.model)  # an unknown model fails now, not mid-outage
        return Route(provider=choice.provider, model=choice.model, spec=entry)

    def _select(self) -> None:
        if ":" not in self.model:
            raise ConfigError(bare_model_message(self.model))
        choice = select_provider(self.model, config=self.config, clock=self.clock)
        if not choice.model:
            raise ConfigError(f"{self.model!r} names no model; write PROVIDER:MODEL")
        object.__setattr__(self, "provider", choice.provider)
        object.__setattr__(self, "model", choice.model)

    async def aclose(self) -> None:
        """Stop the sessions' keep-warm, delete the explicit caches its sessions hold, and
        close the providers' connections."""
        if self.warmth is not None:
            await self.warmth.aclose()
        await self.holders.release_all()
        for provider in (self.provider, *(r.provider for r in self.routes)):
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()

    def close(self) -> None:
        """`aclose` for code with no event loop: it also stops the synchronous calls'
        loop thread (`run_sync`, `send_sync`)."""
        self.portal.close(self.aclose())

    def __enter__(self) -> Agent:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @overload
    def run_sync(
        self, text: str, *, output: type[T] | OutputSpec[T], callbacks: Callbacks | None = None
    ) -> TurnResult[T]: ...

    @overload
    def run_sync(
        self, text: str, *, output: object = None, callbacks: Callbacks | None = None
    ) -> TurnResult[Any]: ...

    def run_sync(
        self, text: str, *, output: Any = None, callbacks: Callbacks | None = None
    ) -> TurnResult[Any]:
        """One turn of a new in-memory session, for code with no event loop (scripts,
        notebooks, tests); inside one, `await agent.session().send(...)`."""
        return self.portal.call(
            self.session().send(text, output=output, callbacks=callbacks), what="agent.run_sync"
        )

    async def sweep_caches(self) -> list[str]:
        """Delete the explicit cache objects a process of this agent (its `name`) made on
        this provider and left behind (it crashed, or was killed); the provider keeps the
        ones it made itself. The names deleted. `stoker chat` and `stoker serve` run it at start;
        nothing to do on providers without cache objects."""
        caches = cache_objects(self.provider)
        if caches is None or self.info.storage is None:
            return []
        return await caches.sweep_caches(self.name)

    def _watched(self, session: Session) -> Session:
        """`session`, kept warm in the background while the agent is open (`keep_warm`)."""
        self.holders.track(session)
        if self.keep_warm is False:
            return session
        if self.warmth is None:
            limits = self.keep_warm if isinstance(self.keep_warm, SpendLimits) else SpendLimits()
            object.__setattr__(self, "warmth", BackgroundWarmth(self.clock, limits))
        assert self.warmth is not None
        self.warmth.watch(session)
        return session

    @property
    def info(self) -> ModelInfo:
        return self.provider.model_info(self.model)

    def resolved_tools(self) -> tuple[Tool, ...]:
        """Registry toolsets plus loose tools, sorted by wire name; a name used twice fails."""
        registry_tools = (
            self.registry.resolve(self.toolsets, self.disabled_toolsets) if self.registry else ()
        )
        return self._merged(registry_tools)

    def available_tools(self) -> tuple[Tool, ...]:
        """What `resolved_tools` gives without the toolsets that are not registered now.

        What a session that already has its prefix can run: a selected toolset missing
        from the registry is down, and its tools stay in the prefix as unavailable.
        """
        registry_tools = (
            self.registry.available(self.toolsets, self.disabled_toolsets) if self.registry else ()
        )
        return self._merged(registry_tools)

    def _own_tools(self) -> tuple[Tool, ...]:
        """The tools this agent defines itself (`tools`, the toolkit tool): never down."""
        toolkit_tools = (use_toolkit_tool(self.integrations),) if self.integrations else ()
        return (*(t for item in self.tools for t in _tools_of(item)), *toolkit_tools)

    def _merged(self, registry_tools: Sequence[Tool]) -> tuple[Tool, ...]:
        found: dict[str, Tool] = {}
        for t in (*registry_tools, *self._own_tools()):
            if t.name in found and found[t.name] != t:
                raise ToolError(f"two different tools are named {t.name!r}; rename one of them")
            found[t.name] = t
        return tuple(found[name] for name in sorted(found))

    def build_prefix(self, *, new_lineage: bool = False) -> Prefix:
        """The frozen prefix a new session will send for its whole life. Where requests
        carry a cache key (OpenAI, OpenRouter), a new lineage's prefix carries its slot,
        chosen now (`stoker.cache.keys`)."""
        prefix = Prefix(
            params=CacheParams(
                model=self.model,
                thinking_budget=self.thinking_budget,
                effort=self.effort,
                tool_choice=self.tool_choice,
                parallel_tool_calls=self.parallel_tool_calls,
                output=self._native_output(),
            ),
            tools=tuple(t.spec_bytes for t in self.resolved_tools()),
            system=build_system_prompt(
                self.system, clock=self.clock, sections=self.system_sections
            ),
        )
        info = self.info
        if not new_lineage or not info.cache_key:
            return prefix
        routed = (info.regime or "L") == "L"
        slot = self.key_shards.slot(prefix, self.clock.now(), routed=routed, scope=self.cache_scope)
        return prefix.with_params(cache_slot=slot)

    def _native_output(self) -> str | None:
        """The output format every request of a new session asks for (None: text)."""
        spec = OutputSpec.of(self.output)
        return spec.native(self.info.provider).to_param() if spec is not None else None

    def config_snapshot(self) -> dict[str, Any]:
        """What shapes the prefix, as stored with a session and compared on resume.

        Inputs, not outputs: the system prompt's base text and sections are hashed (the
        built prompt carries the creation date, which a resume days later must not
        compare). Credentials and callbacks are never part of it. `own_tools` is not
        compared: it tells a resume which tools came from the registry (a missing one is
        an outage) and which the agent defines itself (a missing one was removed).
        """
        return {
            "agent_name": self.name,
            "provider": self.provider.name,
            "model": self.model,
            "system_sha": _sha(self.system),
            "sections_sha": _sha("\x00".join(self.system_sections)),
            "thinking_budget": self.thinking_budget,
            "effort": self.effort,
            "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls,
            "output": self._native_output(),
            "toolsets": list(self.toolsets) if self.toolsets is not None else None,
            "disabled_toolsets": list(self.disabled_toolsets),
            "own_tools": sorted(
                {t.name for item in self.tools for t in _tools_of(item)}
                | ({USE_TOOLKIT} if self.integrations else set())
            ),
        }

    def session(
        self,
        *,
        session_id: str | None = None,
        store: EventSink | None = None,
        history: Sequence[Message] = (),
    ) -> Session:
        """A new conversation with a prefix frozen now (stored in `store` from its first
        turn on, when given; `open` stores it at once). `history` starts it from an
        earlier conversation, sent as given."""
        self.info  # noqa: B018 - fail here, not at the first call, on an unknown model
        start = new_start(
            prefix=self.build_prefix(new_lineage=True),
            config=self.config_snapshot(),
            now=self.clock.now(),
            session_id=session_id,
            history=history,
        )
        return self._watched(Session(start, agent=self, store=store))

    async def open(
        self,
        store: SessionSource,
        session_id: str | None = None,
        *,
        create: bool = True,
        tools: ToolsMode = "keep",
        interrupted: Literal["record", "rerun"] = "record",
    ) -> Session:
        """The stored session `session_id`, resumed, or a new one stored at once (under
        that id; a fresh one when None). `create=False` raises `SessionNotFound` instead.

        A resumed session sends its stored prefix byte for byte. `tools="reconcile"` takes
        this agent's tools as a declared break; `interrupted="rerun"` runs tool calls the
        stored session left unanswered again before the next turn instead of recording
        them as interrupted.
        """
        self.info  # noqa: B018
        session = await open_session(
            self,
            store,
            session_id,
            create=create,
            tools=tools,
            interrupted=interrupted,
            new_prefix=lambda: self.build_prefix(new_lineage=True),
        )
        return self._watched(session)
