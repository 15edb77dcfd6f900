"""One turn from the command line: the library function behind `stoker run`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stoker.agent.agent import Agent
from stoker.agent.loop import TurnResult
from stoker.agent.telemetry_setup import telemetry_from
from stoker.config import Config
from stoker.errors import ConfigError
from stoker.providers.select import select_provider
from stoker.store import open_store
from stoker.tools import ToolRegistry
from stoker.toolsets.workspace import WORKSPACE_SYSTEM, workspace_toolset
from stoker.wire.messages import AssistantMessage, Message, UserMessage


def default_agent(*, config: Config, workdir: Path, writable: bool = False) -> Agent:
    """The agent of `stoker run` and `stoker chat`: read-only workspace tools (`writable`
    adds `add_note`, a risky tool: for a caller that can ask before it runs), on the
    provider `config` names (a model named in its spec wins over `config.model`), with
    the OpenTelemetry export `config.telemetry` asks for (flushed at process exit).

    A `workdir` that is not a folder is refused: a turn or a chat starts now, on the
    folder just typed, so a missing one can only be a typo (the tools would find no file
    and `add_note` could not write)."""
    if not workdir.is_dir():
        state = "is not a folder" if workdir.exists() else "does not exist"
        raise ConfigError(
            f"the workspace folder {str(workdir.absolute())!r} {state}: create it, or pass "
            "--workdir with the folder the workspace tools should read"
        )
    choice = select_provider(config.provider, config=config)
    registry = ToolRegistry()
    registry.register(workspace_toolset(workdir, writable=writable))
    return Agent(
        provider=choice.provider,
        model=choice.model or config.model,
        registry=registry,
        system=WORKSPACE_SYSTEM,
        name="stoker-cli",
        telemetry=telemetry_from(config.telemetry),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class OneTurn:
    """A turn run from the command line, and its number in its session (a stored
    session's turns count on across `stoker run --session` calls)."""

    number: int
    result: TurnResult[Any]
    tools: tuple[str, ...] = ()  # the tools the turn called, in order


def last_turn_tools(history: tuple[Message, ...]) -> tuple[str, ...]:
    """The tools the newest turn of `history` called, in order, one name a call (a turn
    starts at a user message that is not only tool results; compaction keeps it)."""
    starts = [i for i, m in enumerate(history) if isinstance(m, UserMessage) and not m.tool_results]
    turn = history[starts[-1] :] if starts else ()
    return tuple(c.name for m in turn if isinstance(m, AssistantMessage) for c in m.tool_calls)


def turns_in(history: tuple[Message, ...]) -> int:
    """User turns in a history: user messages that are not only tool results."""
    return sum(isinstance(m, UserMessage) and not m.tool_results for m in history)


async def run_once(
    prompt: str,
    *,
    config: Config,
    workdir: Path,
    session_id: str | None = None,
) -> OneTurn:
    """One turn; with `session_id`, in that stored session of `config.database` (created
    if it is new)."""
    async with default_agent(config=config, workdir=workdir) as agent:
        if session_id is None:
            session = agent.session()
            result = await session.send(prompt)
            return OneTurn(number=1, result=result, tools=last_turn_tools(session.history))
        async with open_store(config.database) as store:
            session = await agent.open(store, session_id)
            result = await session.send(prompt)
            return OneTurn(
                number=turns_in(session.history),
                result=result,
                tools=last_turn_tools(session.history),
            )
