"""The demo behind `make run`: a six-turn tool-using session on the simulator, with
background memory and skill reviews, and every call's cache effect measured.

It runs on the embedded defaults (no key, no network) and is deterministic, so its table
is also a check: every call after the first reads at least 90% of its input from cache,
and each review's first call reads its parent's whole prefix.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from stoker.agent.agent import Agent
from stoker.agent.review import ReviewConfig
from stoker.cache.models import model_info
from stoker.cache.pricing import total_cost, uncached_cost_usd
from stoker.clock import Clock, SystemClock
from stoker.config import Config
from stoker.memory import (
    MemoryStore,
    SkillStore,
    memory_section,
    memory_toolset,
    skills_section,
    skills_toolset,
)
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.model import RuleModel, tool_call
from stoker.providers.sim.provider import SimProvider
from stoker.store import open_store
from stoker.tools import ToolRegistry
from stoker.toolsets.workspace import WORKSPACE_SYSTEM, workspace_toolset
from stoker.wire.blocks import Block
from stoker.wire.events import CacheRecorded, Event, EventSink, MemorySink
from stoker.wire.messages import UserMessage
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request

NOTES_CONTEXT = """\
About the notes: they describe a release plan. The team ships on Fridays; every change is
reviewed by one other person; the changelog lists user-visible changes only. Numbers in
the notes are estimates unless a line says "measured". When two notes disagree, the newer
one wins, and you should point out the disagreement.
"""

TURNS = (
    "List the files in the workspace.",
    "Read the file 'plan.md' and tell me when we ship.",
    "Search the files for 'cache' please.",
    "Give me the word count of 'plan.md'.",
    "Add a note: 'release notes are drafted on Thursdays'",
    "Thanks, that is all for now.",
)

SEED_FILES = {
    "plan.md": (
        "# Release plan\n\nWe ship on Friday after review.\n"
        "The prompt cache keeps long sessions cheap; measured hit ratio 97%.\n"
    ),
    "todo.md": "- write the changelog\n- check the cache report\n- book the release meeting\n",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoRow:
    """One provider call of the demo."""

    label: str  # "main" or the review it comes from
    turn: int
    record: CacheRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewCheck:
    """A background review: what it changed, and whether its first call read everything
    its parent's last call had sent."""

    label: str
    after_turn: int
    summary: str
    parent_prefix_tokens: int
    read_tokens: int

    @property
    def read_whole_prefix(self) -> bool:
        return self.read_tokens >= self.parent_prefix_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoReport:
    rows: tuple[DemoRow, ...]
    reviews: tuple[ReviewCheck, ...]
    answers: tuple[str, ...]
    session_id: str = ""

    @property
    def cost_usd(self) -> float | None:
        return total_cost(r.record.cost_usd for r in self.rows)

    @property
    def uncached_cost_usd(self) -> float | None:
        return total_cost(
            uncached_cost_usd(r.record.usage, model_info(r.record.model)) for r in self.rows
        )


REVIEW = ReviewConfig(memory_every=3, skills_every=5)
MEMORY_FACT = "The team ships on Fridays, after review (plan.md)."
SKILL = {
    "action": "create",
    "name": "release-check",
    "description": "Check a release plan before Friday",
    "body": "1. read plan.md\n2. search the files for open items\n3. add a note with the date",
}


class DemoModel:
    """The simulator's rule model, plus what this demo's background reviews decide to keep."""

    def __init__(self) -> None:
        self.rules = RuleModel()

    def respond(self, request: Request) -> tuple[Block, ...]:
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.text.startswith("Background review"):
            calls: list[Block] = []
            if "memory tool" in last.text:
                args = {"action": "add", "target": "memory", "text": MEMORY_FACT}
                calls.append(tool_call(request, "memory", args, 0))
            if "skill_manage" in last.text:
                calls.append(tool_call(request, "skill_manage", SKILL, len(calls)))
            return tuple(calls)
        return self.rules.respond(request)


def demo_agent(workdir: Path, config: Config, *, clock: Clock | None = None) -> Agent:
    """The workspace assistant with memory and skills kept in `config.home`."""
    clock = clock or SystemClock()
    memory, skills = (
        MemoryStore(config.memory_dir, clock=clock),
        SkillStore(config.skills_dir, clock=clock),
    )
    registry = ToolRegistry(
        [workspace_toolset(workdir), memory_toolset(memory), skills_toolset(skills)]
    )
    return Agent(
        provider=SimProvider(engine=SimEngine(model=DemoModel()), clock=clock),
        model=config.model,
        registry=registry,
        system=WORKSPACE_SYSTEM,
        system_sections=(NOTES_CONTEXT, memory_section(memory), skills_section(skills)),
        review=REVIEW,
        clock=clock,
        platform="demo",
    )


class _Both:
    """Events to the demo's own list and to a store, so `stoker report` can read it back."""

    def __init__(self, *sinks: EventSink) -> None:
        self.sinks = sinks

    async def emit(self, event: Event) -> None:
        for sink in self.sinks:
            await sink.emit(event)


async def run_demo(
    workdir: Path | None = None,
    *,
    clock: Clock | None = None,
    store: EventSink | None = None,
    database: str | Path | None = None,
) -> DemoReport:
    """Run the demo in `workdir` (a fresh temporary folder when None); its session and its
    reviews are also kept in `store`, or in the database at `database`, when given."""
    if database is not None:
        async with open_store(database) as opened:
            return await run_demo(workdir, clock=clock, store=opened)
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="stoker-demo-") as tmp:
            return await run_demo(Path(tmp), clock=clock, store=store)
    for name, text in SEED_FILES.items():
        (workdir / name).write_text(text, encoding="utf-8")
    sink = MemorySink()
    # The demo's own home, not the user's: it must not read or write their memory.
    config = Config.from_env({}, home=workdir / ".stoker")
    both = sink if store is None else _Both(sink, store)
    session = demo_agent(workdir, config, clock=clock).session(store=both)
    rows: list[DemoRow] = []
    reviews: list[ReviewCheck] = []
    answers: list[str] = []
    for turn, text in enumerate(TURNS, 1):
        result = await session.send(text)
        answers.append(result.text)
        rows += [DemoRow(label="main", turn=turn, record=r) for r in result.records]
        parent_last = session.records[-1].usage
        for outcome in await session.drain():
            records = [
                e.record
                for e in sink.events
                if isinstance(e, CacheRecorded) and e.session_id == outcome.session_id
            ]
            label = f"{outcome.topic} review"
            rows += [DemoRow(label=label, turn=turn, record=r) for r in records]
            reviews.append(
                ReviewCheck(
                    label=label,
                    after_turn=turn,
                    summary=outcome.summary,
                    parent_prefix_tokens=parent_last.read + parent_last.written,
                    read_tokens=records[0].usage.read,
                )
            )
    return DemoReport(
        rows=tuple(rows), reviews=tuple(reviews), answers=tuple(answers), session_id=session.id
    )
