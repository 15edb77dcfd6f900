"""Commands, sent as messages ("/model claude-opus-4-6") or to their own endpoint.

Each runs under the session's lock. What users expect decides the cache: `/new`,
`/reset` and `/clear` continue in a new session (a new lineage: history is append-only,
so "clearing" it means starting another); `/model` evicts the cached agent, and the
model change is applied at the next message as a declared break; `/compress` compacts
the history now (a summary replaces its older part; the next message is a declared break);
`/reasoning` is applied in place when the model's cache namespace survives it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stoker.cache.models import same_model
from stoker.errors import CompactionError
from stoker.gateway.agents import GATEWAY_KEY, gateway_block
from stoker.gateway.errors import BadRequest
from stoker.gateway.session_settings import SURFACE, keeps_namespace, parse_reasoning
from stoker.gateway.views import Reply, usage_view
from stoker.session_views import show_session

if TYPE_CHECKING:
    from stoker.gateway.cache import CachedAgent
    from stoker.gateway.pool import AgentPool
    from stoker.gateway.sink import Head

HELP = {
    "new": "start a new session with the default settings",
    "reset": "the same as /new",
    "clear": "start a new session (empty history) keeping this one's model and reasoning",
    "model": "/model NAME: switch model (one declared cache break at the next message)",
    "reasoning": "/reasoning LEVEL: set the reasoning effort (low, medium, high, off)",
    "compress": "summarise the older history now (the newest turns stay as they are)",
    "usage": "tokens and cost of this session",
    "help": "this list",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    name: str
    argument: str = ""


def parse(text: str) -> Command | None:
    """A command when `text` starts with one "/"; "//..." is text that starts with "/"."""
    if not text.startswith("/") or text.startswith("//"):
        return None
    name, _, argument = text[1:].strip().partition(" ")
    return Command(name=name.lower(), argument=argument.strip())


async def run(pool: AgentPool, user: str, sid: str, head: Head, command: Command) -> Reply:
    """Run `command` on session `sid`; called under the session's lock."""
    name = command.name
    if name not in HELP:
        raise BadRequest(
            f"unknown command /{name}; commands: {', '.join('/' + n for n in HELP)} "
            "(start a message with // to send text that begins with /)"
        )
    if name in ("new", "reset"):
        # The defaults, on the same surface: a chat's new session keeps its formatting.
        kept = await pool.overrides_of(sid)
        pool.agents.evict(sid, f"/{name}")
        new = await pool.create(user, {k: v for k, v in kept.items() if k in SURFACE})
        return _done(sid, name, f"started session {new}", new_session_id=new)
    if name == "clear":
        entry = await pool.acquire(user, sid, head)
        pool.agents.release(entry)
        pool.agents.evict(sid, "/clear")
        new = await pool.create(user, entry.overrides)
        return _done(sid, name, f"history cleared: continuing in session {new}", new_session_id=new)
    if name == "model":
        return await _model(pool, user, sid, head, command.argument)
    if name == "reasoning":
        return await _reasoning(pool, user, sid, head, command.argument)
    if name == "compress":
        return await _compress(pool, user, sid, head)
    if name == "usage":
        view = usage_view(await show_session(pool.store, sid))
        cost = view["cost_usd"]
        text = f"{len(view['requests'])} requests, " + (
            f"${cost:.6f}" if cost is not None else "cost unknown"
        )
        return _done(sid, name, text, data=view)
    lines = "\n".join(f"/{n}: {what}" for n, what in HELP.items())
    return _done(sid, name, lines)


def _done(
    sid: str,
    name: str,
    text: str,
    *,
    new_session_id: str | None = None,
    data: dict[str, Any] | None = None,
) -> Reply:
    return Reply(
        session_id=sid,
        kind="command",
        text=text,
        command=name,
        new_session_id=new_session_id,
        data=data,
    )


async def _set_overrides(entry: CachedAgent, changes: dict[str, Any]) -> None:
    entry.overrides = {**entry.overrides, **changes}
    block = gateway_block(entry.settings, entry.overrides)
    await entry.session.adopt(entry.agent, config={GATEWAY_KEY: block})


async def _compress(pool: AgentPool, user: str, sid: str, head: Head) -> Reply:
    entry = await pool.acquire(user, sid, head)
    try:
        before = len(entry.session.history)
        try:
            await entry.session.compact(reason="/compress")
        except CompactionError as exc:
            raise BadRequest(str(exc)) from exc
        after = len(entry.session.history)
    finally:
        pool.agents.release(entry)
    return _done(
        sid,
        "compress",
        f"compacted: {before} messages became {after} (a summary, then the newest turns); "
        "the next message starts the compacted prefix",
        data={"messages_before": before, "messages_after": after},
    )


async def _model(pool: AgentPool, user: str, sid: str, head: Head, name: str) -> Reply:
    if not name:
        raise BadRequest("/model needs a model name, e.g. /model claude-opus-4-6")
    entry = await pool.acquire(user, sid, head)
    try:
        wanted = pool.defaults.with_overrides({**entry.overrides, "model": name})
        pool.provider_for(wanted).model_info(name)  # an unknown model fails here, clearly
        current = entry.settings.model
        if same_model(name, current):
            # Another spelling (a router's vendor prefix, a dated alias) is not a switch.
            return _done(sid, "model", f"model is already {current} ({name} names it too)")
        await _set_overrides(entry, {"model": name})
    finally:
        pool.agents.release(entry)
    pool.agents.evict(sid, "/model")
    return _done(sid, "model", f"model set to {name}; the next message starts its new prefix")


async def _reasoning(pool: AgentPool, user: str, sid: str, head: Head, level: str) -> Reply:
    if not level:
        raise BadRequest("/reasoning needs a level: low, medium, high, or off")
    changes = parse_reasoning(level)
    entry = await pool.acquire(user, sid, head)
    try:
        await _set_overrides(entry, changes)
        wanted = pool.defaults.with_overrides(entry.overrides)
        in_place = keeps_namespace(entry.agent.info)
        if in_place and wanted.reasoning != entry.settings.reasoning:
            await pool.apply_reasoning(entry, wanted)
    finally:
        pool.agents.release(entry)
    if not in_place:
        pool.agents.evict(sid, "/reasoning")
        return _done(sid, "reasoning", f"reasoning set to {level}; the agent is rebuilt")
    return _done(sid, "reasoning", f"reasoning set to {level}, applied in place")
