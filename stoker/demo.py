"""The demo behind `make run`: a six-turn tool-using session and two background forks on
the simulator, with every call's cache effect measured.

It runs on the embedded defaults (no key, no network) and is deterministic, so its table
is also a check: every call after the first reads at least 90% of its input from cache,
and each fork's first call reads its parent's whole prefix.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from stoker.agent.agent import Agent
from stoker.agent.session import Session
from stoker.clock import Clock, SystemClock
from stoker.providers.sim.provider import SimProvider
from stoker.toolkits.workspace import WORKSPACE_SYSTEM, workspace_toolset
from stoker.tools import DispatchPolicy, ToolRegistry
from stoker.wire.record import CacheRecord

DEMO_MODEL = "claude-sonnet-4-6"

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

    lineage: str  # "main" or the fork's label
    turn: int
    record: CacheRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class ForkCheck:
    """Did a fork's first call read everything its parent's last call had sent?"""

    label: str
    parent_prefix_tokens: int
    read_tokens: int

    @property
    def read_whole_prefix(self) -> bool:
        return self.read_tokens >= self.parent_prefix_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoReport:
    rows: tuple[DemoRow, ...]
    forks: tuple[ForkCheck, ...]
    answers: tuple[str, ...]


def demo_agent(workdir: Path, *, clock: Clock | None = None) -> Agent:
    registry = ToolRegistry()
    registry.register(workspace_toolset(workdir))
    return Agent(
        provider=SimProvider(clock=clock or SystemClock()),
        model=DEMO_MODEL,
        registry=registry,
        system=WORKSPACE_SYSTEM,
        system_sections=(NOTES_CONTEXT,),
        clock=clock or SystemClock(),
    )


async def _fork(
    session: Session, label: str, instruction: str, allowed: set[str]
) -> tuple[ForkCheck, list[DemoRow]]:
    parent_last = session.records[-1].usage
    fork = session.fork(
        instruction=instruction,
        policy=DispatchPolicy(allowed=frozenset(allowed), reason="background review"),
        kind="review",
    )
    result = await fork.run()
    first = result.records[0].usage
    check = ForkCheck(
        label=label,
        parent_prefix_tokens=parent_last.read + parent_last.written,
        read_tokens=first.read,
    )
    return check, [DemoRow(lineage=label, turn=0, record=r) for r in result.records]


async def run_demo(workdir: Path | None = None, *, clock: Clock | None = None) -> DemoReport:
    """Run the demo in `workdir` (a fresh temporary folder when None)."""
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="stoker-demo-") as tmp:
            return await run_demo(Path(tmp), clock=clock)
    for name, text in SEED_FILES.items():
        (workdir / name).write_text(text, encoding="utf-8")
    session = demo_agent(workdir, clock=clock).session()
    rows: list[DemoRow] = []
    forks: list[ForkCheck] = []
    answers: list[str] = []
    for turn, text in enumerate(TURNS, 1):
        result = await session.send(text)
        answers.append(result.text)
        rows += [DemoRow(lineage="main", turn=turn, record=r) for r in result.records]
        if turn == 3:
            check, fork_rows = await _fork(
                session,
                "memory review",
                "Review the conversation so far. If a fact is worth keeping, add a note.",
                {"add_note"},
            )
            forks.append(check)
            rows += fork_rows
    check, fork_rows = await _fork(
        session,
        "skill review",
        "Review the conversation and summarise in one sentence what the user did.",
        set(),
    )
    forks.append(check)
    rows += fork_rows
    return DemoReport(rows=tuple(rows), forks=tuple(forks), answers=tuple(answers))
