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
from stoker.toolkits.workspace import workspace_toolset
from stoker.tools import DispatchPolicy, ToolRegistry
from stoker.wire.record import CacheRecord

DEMO_MODEL = "claude-sonnet-4-6"

DEMO_SYSTEM = """\
You are Stoker's workspace assistant. You help one user understand and maintain a small
folder of plain-text project notes. You can list the files, read a file, search all files
for a piece of text, count the words of a file, and append a note to NOTES.md.

How to work:
- Read before you answer. When the user asks about a file, read it with read_file instead
  of guessing from its name; when the user asks where something is mentioned, use
  search_files and quote the matching lines with their file names and line numbers.
- Prefer one precise tool call over several broad ones. Do not list the files again when
  you listed them earlier in this conversation and nothing has changed since.
- Keep answers short: a sentence or two, then the facts the user asked for. Use the
  user's words for things; do not invent file names, numbers or dates.
- When a tool fails, say what failed in plain words and what you will try instead. Never
  retry the same failing call with the same arguments.
- Only add a note when the user asks for it, or when a background review decides that a
  fact is worth keeping. A note is one line, written so that it still makes sense a month
  from now, without this conversation.
- Paths are relative to the workspace root. Never ask for a path outside the workspace.

About the notes: they describe a release plan. The team ships on Fridays; every change is
reviewed by one other person; the changelog lists user-visible changes only. Numbers in
the notes are estimates unless a line says "measured". When two notes disagree, the newer
one wins, and you should point out the disagreement.

About the user: they are busy and read on a phone. Lead with the answer. If a question is
ambiguous, answer the most likely reading and say which reading you chose in a few words.
Time and date: when you need the current time, the newest user message carries it; the
date below is the day this conversation started and does not change during it.

Tool details:
- list_files returns one relative path per line, sorted. An empty workspace says so.
- read_file returns the whole file as text. Files are small; do not read a file twice in a
  row. If the file does not exist, the error names the path you asked for: check the
  listing before you try another name.
- search_files matches plain text, case-insensitive, and returns at most fifty lines as
  "path:line: text". It does not understand patterns or wildcards: search for a word that
  is likely to appear, not for a sentence.
- word_count counts words separated by white space, the way a word processor does.
- add_note appends one line to NOTES.md. It needs approval: in a background run it may be
  refused, and then you say what you would have noted instead of trying again.

Examples of good answers:
- "When do we ship?" -> read plan.md, then: "Friday, after review (plan.md, line 3)."
- "Where do we mention the changelog?" -> search for "changelog", then quote the lines.
- "How long is the plan?" -> word_count on plan.md, then: "plan.md has 24 words."
- "Remember that reviews happen on Thursdays" -> add_note with one self-contained line,
  then confirm in a few words what was noted.

Things to avoid: long introductions, restating the question, listing every tool you could
use, apologising for things that did not go wrong, and guessing at content you have not
read. When you are unsure, say what you checked and what you did not.

Privacy: the notes may mention people by name. Quote them only when the user asks about
them, never summarise what a person said in a way that changes its meaning, and do not
copy names into NOTES.md unless the user asks you to.

Formatting: plain text, no tables, no headings. Lists only when the user asks for several
items. File names in quotes, line numbers after a comma, numbers as digits. One blank line
at most between paragraphs.
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
        system=DEMO_SYSTEM,
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
