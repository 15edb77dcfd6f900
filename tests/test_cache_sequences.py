"""Sequences the fuzzer found, kept as regression tests: a fork made while its parent
has a declared break not yet sent, and a model that strips earlier thinking after a tool
loop cut by the iteration budget."""

from __future__ import annotations

from pathlib import Path

from stoker.agent.agent import Agent
from stoker.agent.keepwarm import KeepWarm
from stoker.bench.cache import SYSTEM, TOOLS
from stoker.bench.fuzz import Auditor, ThinkingModel
from stoker.clock import FrozenClock
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.store.sqlite import SQLiteStore
from stoker.tools import tool


@tool
def changelog(path: str) -> str:
    """Show the changelog of a path.

    Args:
        path: The file or folder.
    """
    return f"changes of {path}"


def _agent(engine: SimEngine, clock: FrozenClock, **kwargs: object) -> tuple[Agent, Auditor]:
    auditor = Auditor(SimProvider(engine=engine, clock=clock))
    tools = kwargs.pop("tools", TOOLS)
    agent = Agent(
        str(kwargs.pop("model", "claude-sonnet-4-6")),
        provider=auditor,
        tools=tools,  # type: ignore[arg-type]
        system=SYSTEM,
        clock=clock,
        **kwargs,  # type: ignore[arg-type]
    )
    return agent, auditor


async def test_a_fork_made_after_a_model_rebase_declares_the_break() -> None:
    clock, engine = FrozenClock(), SimEngine(model=ThinkingModel())
    agent, _ = _agent(engine, clock)
    session = agent.session()
    await session.send("Work on it: run 2 steps")
    await session.rebase(reason="/model claude-sonnet-4-5", model="claude-sonnet-4-5")
    result = await session.fork().send("Anything worth remembering?")
    first = result.records[0]
    assert (first.explanation.verdict, first.declared_break) == (
        "declared",
        "/model claude-sonnet-4-5",
    )


async def test_a_fork_made_after_a_resume_that_changed_the_tools_declares_the_break(
    tmp_path: Path,
) -> None:
    clock, engine = FrozenClock(), SimEngine(model=ThinkingModel())
    async with SQLiteStore(tmp_path / "s.db") as store:
        agent, _ = _agent(engine, clock)
        session = await agent.open(store, "s")
        await session.send("Work on it: run 2 steps")
        wider, _ = _agent(engine, clock, tools=[*TOOLS, changelog])
        resumed = await wider.open(store, "s", create=False, tools="reconcile")
        result = await resumed.fork().send("Anything worth remembering?")
    first = result.records[0]
    assert first.explanation.verdict == "declared"
    assert (first.declared_break or "").startswith("tools reconciled on resume")


async def test_stripped_thinking_after_a_cut_loop_and_a_rebuild_reads_what_still_matches(
    tmp_path: Path,
) -> None:
    clock, engine = FrozenClock(), SimEngine(model=ThinkingModel())
    settings = {"model": "claude-sonnet-4-5", "thinking_budget": 1024, "max_iterations": 25}
    async with SQLiteStore(tmp_path / "s.db") as store:
        agent, _ = _agent(engine, clock, **settings)
        session = await agent.open(store, "s")
        loop = await session.send("Audit the service: run 30 steps")
        assert loop.exit == "budget_exhausted"
        rebuilt, auditor = _agent(engine, clock, **settings)
        session = await rebuilt.open(store, "s", create=False)
        result = await session.send("Continue, please")
    first = result.records[0]
    assert auditor.violations == []  # it read the longest prefix a live entry covers
    assert first.explanation.verdict == "hit"
    assert "drops earlier thinking" in first.explanation.detail
    assert first.breakpoints[1].message == 0  # where the loop began: the last match


async def test_no_keep_warm_while_a_rebase_waits_for_the_next_call() -> None:
    clock, engine = FrozenClock(), SimEngine(model=ThinkingModel())
    agent, auditor = _agent(engine, clock)
    session = agent.session()
    scheduler = KeepWarm(clock)
    scheduler.watch(session)
    await session.send("Work on it: run 2 steps")
    await session.rebase(reason="a new tool", tools=[*TOOLS, changelog])
    assert session.warm_plan() is None  # what is cached is the old prefix
    assert await scheduler.idle(6 * 60) == []
    assert auditor.violations == []


async def test_keep_warm_on_a_model_that_strips_thinking_reads_up_to_the_cut() -> None:
    clock, engine = FrozenClock(), SimEngine(model=ThinkingModel())
    agent, auditor = _agent(engine, clock, model="claude-sonnet-4-5", thinking_budget=1024)
    session = agent.session()
    scheduler = KeepWarm(clock)
    scheduler.watch(session)
    await session.send("Audit the service: run 10 steps")
    fired = await scheduler.idle(6 * 60)
    assert [r.purpose for r in fired] == ["ping"]  # nothing unwritten before the cut
    assert fired[0].breakpoints[-1].message == 0  # the placeholder would strip what follows
    assert auditor.violations == []
    back = await session.send("Continue, please")
    assert back.records[0].usage.read == fired[0].usage.read
    assert auditor.violations == []
