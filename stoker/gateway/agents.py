"""Agents from settings, and bringing a resumed session to the settings it should have.

A rebuild resumes the stored session with an agent configured as the session was stored
(so the strict resume rules pass and the stored prefix is what gets sent), then applies
what changed since: a model, toolsets, system prompt or reasoning change becomes one
declared cache break (`Session.rebase`); a new route (provider, base URL, key) or
ephemeral prompt moves nothing in the prefix, and `Session.adopt` takes the new agent.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from stoker.agent.agent import Agent
from stoker.agent.fallback import Route
from stoker.agent.review import ReviewConfig
from stoker.agent.session import Session
from stoker.agent.starts import INHERIT
from stoker.agent.system_prompt import build_system_prompt
from stoker.agent.telemetry import NO_TELEMETRY, Telemetry
from stoker.cache.fleet import FleetWatch, process_fleet
from stoker.cache.keys import KeyShards, process_key_shards
from stoker.clock import Clock
from stoker.errors import ConfigError
from stoker.gateway.session_settings import SessionSettings
from stoker.gateway.toolsets import NOTICE_KEY, tools_after_change
from stoker.providers.base import Provider
from stoker.tools import ToolRegistry
from stoker.wire.stored import StoredSession

GATEWAY_KEY = "gateway"  # the session config entry holding the gateway's settings
AGENT_NAME = "gateway"


def build_agent(
    settings: SessionSettings,
    *,
    provider: Provider,
    registry: ToolRegistry | None,
    clock: Clock,
    telemetry: Telemetry = NO_TELEMETRY,
    fallbacks: Sequence[Route] = (),
    review: ReviewConfig | None = None,
    key_shards: KeyShards | None = None,
    fleet: FleetWatch | None = None,
) -> Agent:
    """The agent of `settings`; `key_shards` and `fleet`: the gateway's view of the
    sessions of its agents (None: the process's)."""
    if registry is None and settings.toolsets:
        raise ConfigError(
            f"toolsets {list(settings.toolsets)} are configured but the gateway has no "
            "tool registry; remove them or start the gateway with one"
        )
    return Agent(
        provider=provider,
        model=settings.model,
        registry=registry,
        toolsets=settings.toolsets,
        disabled_toolsets=settings.disabled_toolsets,
        system=settings.system,
        system_sections=tuple(s for s in (settings.formatting, settings.memory) if s),
        effort=settings.effort,
        thinking_budget=settings.thinking_budget,
        max_tokens=settings.max_tokens,
        clock=clock,
        name=AGENT_NAME,
        telemetry=telemetry,
        keep_warm=False,  # the gateway's own scheduler keeps them warm, across replicas
        fallbacks=tuple(fallbacks),
        fallback_cooldown=settings.fallback_cooldown,
        review=review,
        platform=settings.platform or "gateway",  # for memory provenance
        key_shards=key_shards if key_shards is not None else process_key_shards(),
        fleet=fleet if fleet is not None else process_fleet(),
    )


def gateway_block(settings: SessionSettings, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """What the store keeps for the gateway: the settings the prefix reflects (never a
    key) and the user's own choices, which win over the operator's defaults."""
    return {"settings": settings.to_dict(), "overrides": dict(overrides)}


def stored_settings(stored: StoredSession) -> tuple[SessionSettings, dict[str, Any]]:
    """The settings a stored session's prefix reflects, and its overrides.

    Model and reasoning are read from the stored prefix itself, the truth after every
    declared rebase.
    """
    block = stored.config.get(GATEWAY_KEY) or {}
    params = stored.prefix.params
    settings = replace(
        SessionSettings.from_dict(block.get("settings") or {}),
        model=params.model,
        effort=params.effort,
        thinking_budget=params.thinking_budget,
    )
    return settings, dict(block.get("overrides") or {})


def describe_reasoning(
    old: tuple[str | None, int | None], new: tuple[str | None, int | None]
) -> str:
    parts = []
    if old[0] != new[0]:
        parts.append(f"effort {old[0] or 'default'} -> {new[0] or 'default'}")
    if old[1] != new[1]:
        parts.append(f"thinking budget {old[1] or 'off'} -> {new[1] or 'off'}")
    return "reasoning " + ", ".join(parts)


def _describe(built: SessionSettings, wanted: SessionSettings) -> list[str]:
    changes = []
    if wanted.model != built.model:
        changes.append(f"model {built.model} -> {wanted.model}")
    if (wanted.toolsets, wanted.disabled_toolsets) != (built.toolsets, built.disabled_toolsets):
        changes.append(
            f"toolsets {built.toolsets}/-{list(built.disabled_toolsets)} -> "
            f"{wanted.toolsets}/-{list(wanted.disabled_toolsets)}"
        )
    if wanted.system != built.system:
        changes.append("system prompt changed")
    if wanted.reasoning != built.reasoning:
        changes.append(describe_reasoning(built.reasoning, wanted.reasoning))
    return changes


async def apply_changes(
    session: Session,
    *,
    built: SessionSettings,
    wanted: SessionSettings,
    agent: Agent,
    overrides: Mapping[str, Any],
    used: Collection[str] = (),
) -> None:
    """Move a resumed `session` from `built` to `wanted`: one declared break for whatever
    moves the prefix, then the new agent (whose config the store then describes, or the
    next resume would refuse it). `used` names the tools history called: a toolsets
    change keeps them advertised (see `toolsets.py`)."""
    if built == wanted:
        return
    changes = _describe(built, wanted)
    config: dict[str, Any] = {GATEWAY_KEY: gateway_block(wanted, overrides)}
    if changes:
        toolsets_changed = (wanted.toolsets, wanted.disabled_toolsets) != (
            built.toolsets,
            built.disabled_toolsets,
        )
        reasoning_changed = wanted.reasoning != built.reasoning
        tools = None
        if toolsets_changed:
            tools = tools_after_change(session.prefix, before=session.agent, after=agent, used=used)
            config[NOTICE_KEY] = None  # applied: a later removal is a notice of its own
        await session.rebase(
            reason="gateway settings changed: " + "; ".join(changes),
            tools=tools,
            system=(
                build_system_prompt(wanted.system, clock=agent.clock)
                if wanted.system != built.system
                else None
            ),
            model=wanted.model if wanted.model != built.model else None,
            effort=wanted.effort if reasoning_changed else INHERIT,
            thinking_budget=wanted.thinking_budget if reasoning_changed else INHERIT,
        )
    await session.adopt(agent, config=config)


async def apply_reasoning(
    session: Session, agent: Agent, *, settings: SessionSettings, overrides: Mapping[str, Any]
) -> Agent:
    """Change effort/thinking on a live session: same instance, same tools and system
    objects, one declared break (the messages are salted with the reasoning settings).
    Returns the agent the session continues with."""
    old = (session.prefix.params.effort, session.prefix.params.thinking_budget)
    await session.rebase(
        reason=describe_reasoning(old, settings.reasoning) + ", applied in place",
        effort=settings.effort,
        thinking_budget=settings.thinking_budget,
    )
    adopted = replace(agent, effort=settings.effort, thinking_budget=settings.thinking_budget)
    await session.adopt(adopted, config={GATEWAY_KEY: gateway_block(settings, overrides)})
    return adopted
