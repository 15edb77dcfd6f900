"""A stored session continued, or a new one stored at once: what `agent.open` does.

A resume sends the stored prefix byte for byte (see `starts.resume_start` for what it
sends and refuses); a new session gets the prefix the agent builds now.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Literal

from stoker.agent.resume import ToolsMode
from stoker.agent.seams import SessionAgent
from stoker.agent.session import Session
from stoker.agent.starts import SessionStart, new_start, resume_start
from stoker.cache.pricing import cost_usd
from stoker.errors import ConfigError, SessionNotFound
from stoker.wire.prefix import Prefix
from stoker.wire.stored import SessionSource


async def open_session(
    agent: SessionAgent,
    store: SessionSource,
    session_id: str | None = None,
    *,
    create: bool = True,
    tools: ToolsMode = "keep",
    interrupted: Literal["record", "rerun"] = "record",
    new_prefix: Callable[[], Prefix] | None = None,
) -> Session:
    """The stored session `session_id` continued by `agent`, or (when `create`) a new
    one stored at once under that id (a fresh id when None). See `starts.resume_start`
    for what a resume sends and refuses. `new_prefix` builds the prefix of a new
    session; a resume never calls it (a toolset that is down must not stop a session
    that already has its tools).
    """
    start: SessionStart | None = None
    if session_id is not None:
        try:
            stored = await store.load(session_id)
        except SessionNotFound:
            if not create:
                raise
        else:
            start = resume_start(
                stored,
                config=agent.config_snapshot(),
                tools=agent.available_tools(),
                mode=tools,
                rerun=interrupted == "rerun",
                cost=lambda usage: cost_usd(
                    usage, agent.provider.model_info(stored.prefix.params.model)
                ),
            )
    if start is None:
        if new_prefix is None:
            raise ConfigError("a new session needs its prefix (agent.open passes it)")
        start = new_start(
            prefix=new_prefix(),
            config=agent.config_snapshot(),
            now=agent.clock.now(),
            session_id=session_id,
        )
    for event in start.events:  # stored now: its creation, or a resume's rebase and answers
        await store.emit(event)
    # How this store's sessions came back after idle gaps: what the time policy learns
    # from before this session has shown any (a store without the read has none).
    idle_gaps = getattr(store, "idle_gaps", None)
    if idle_gaps is not None:
        start.state.seen = tuple(await idle_gaps(besides=start.session_id))
    return Session(replace(start, events=()), agent=agent, store=store)
