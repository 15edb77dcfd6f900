"""`stoker chat`: a stored conversation in the terminal.

Its workspace is writable: `add_note` is a risky tool, so before each call the terminal
asks "Allow add_note(...)? [y/N]", and anything but y or yes denies it (Enter, n, the
end of the input).
"""

from __future__ import annotations

import asyncio
import getpass
from pathlib import Path

import click
from rich.markup import escape

from stoker.agent.seams import Callbacks
from stoker.agent.session import Session
from stoker.cli.options import cache_option, db_option, provider_option, workdir_option
from stoker.cli.render import console, print_simulator_note, records_table
from stoker.cli.sessions import with_store
from stoker.cli.settings import reading, settings
from stoker.cli.slash import Chat, answer, message_text, parse, print_clock
from stoker.clock import Clock
from stoker.config import DEFAULT_MODEL
from stoker.run import default_agent, turns_in
from stoker.session_ids import resolve
from stoker.store.base import SqlEventStore
from stoker.tools import ApprovalDecision, ApprovalRequest, Approver, ToolContext, ToolProgress
from stoker.tools.approval import BY_NOBODY


class _ToolLines:
    """One line as each tool call starts and ends, so a slow tool is not a frozen
    terminal. A call of a tool that may ask first (`asks`: risky tools, and tools whose
    arguments can make a call need approval) says "running" only once it is allowed:
    the library reports the start before it asks, and the question comes first."""

    def __init__(self, asks: frozenset[str]) -> None:
        self.asks = asks
        self.refused: set[str] = set()  # calls already shown as not run

    def progress(self, event: ToolProgress) -> None:
        name = escape(event.name)
        if event.phase == "start":
            if event.name not in self.asks:
                console.print(f"[dim]  … {name} running[/]")
        elif event.tool_use_id not in self.refused:
            mark = "[red]✗[/]" if event.is_error else "[green]✓[/]"
            console.print(f"[dim]  {mark} {name} done[/]")

    def decided(self, request: ApprovalRequest, approved: bool) -> None:
        if approved:
            console.print(f"[dim]  … {escape(request.tool)} running[/]")
        else:
            self.refused.add(request.tool_use_id)
            console.print(f"[dim]  [red]✗[/] {escape(request.tool)} not run[/]")


def _terminal_approver(clock: Clock, lines: _ToolLines) -> Approver:
    """Asks at the terminal before a risky call runs, one question at a time (calls of
    one reply may run together); the decision names the login that answered."""
    asking = asyncio.Lock()
    try:
        who = f"user:{getpass.getuser()}"
    except (OSError, KeyError):  # no login name (a container without USER)
        who = "user:terminal"

    async def ask(request: ApprovalRequest, context: ToolContext) -> ApprovalDecision:
        question = f"[bold]Allow {escape(request.summary)}? {escape('[y/N]')}[/] "
        async with asking:
            try:
                reply = await asyncio.to_thread(console.input, question)
            except EOFError:
                lines.decided(request, approved=False)
                return ApprovalDecision(
                    approved=False, by=BY_NOBODY, reason="the input ended", at=clock.now()
                )
            approved = reply.strip().lower() in ("y", "yes")
            lines.decided(request, approved=approved)
        return ApprovalDecision(approved=approved, by=who, at=clock.now())

    return ask


async def _converse(session: Session, store: SqlEventStore) -> None:
    chat = Chat(session=session, store=store, out=console)
    asks = frozenset(
        t.name for t in session.agent.resolved_tools() if t.risky or t.asks is not None
    )
    lines = _ToolLines(asks)
    callbacks = Callbacks(
        on_tool=lines.progress, approver=_terminal_approver(session.agent.clock, lines)
    )
    while True:
        try:
            line = await asyncio.to_thread(console.input, "[bold]you> [/]")
        except EOFError:
            return
        if not line.strip():
            continue
        command = parse(line)
        if command is not None:
            if not await answer(chat, *command):
                return
            continue
        result = await session.send(message_text(line), callbacks=callbacks)
        if result.text:
            console.print(result.text, markup=False)
        else:
            console.print(f"[yellow]({result.exit})[/]")
        turn = str(turns_in(session.history))
        console.print(records_table([("chat", turn, r) for r in result.records], title=""))
        print_clock(session, session.records, console)


@click.command()
@click.option("--resume", help="Continue a stored session: its id or a unique start of it.")
@db_option
@click.option(
    "--model",
    help="Model, when --provider names none (default: a resumed session's own, "
    f"else {DEFAULT_MODEL}).",
)
@workdir_option
@provider_option
@cache_option
def chat(
    resume: str | None,
    db: str | None,
    model: str | None,
    workdir: str,
    provider: str,
    cache: str | None,
) -> None:
    """A conversation in the terminal, stored as it goes.

    /help lists the commands it answers itself (/usage, /model, /compact, /exit);
    Ctrl-D ends it too."""

    async def run(store: SqlEventStore) -> None:
        sid = await resolve(store, resume) if resume is not None else None
        # A resumed session goes on with its own model (after any /model switch), unless
        # the command names another: that is then a resume mismatch, said clearly.
        stored = (await store.load(sid)).prefix.params.model if sid and not model else None
        config = settings(db=db, provider=provider, model=model or stored, cache=cache)
        async with default_agent(config=config, workdir=Path(workdir), writable=True) as agent:
            await agent.sweep_caches()  # explicit caches a killed `stoker chat` left behind
            session = await agent.open(store, sid, create=resume is None)
            print_simulator_note(config)
            console.print(f"[dim]session {session.id} — /help for commands, /exit to leave[/]")
            # While you read or think, the agent's time policy keeps the cache warm if it
            # pays (the library's default: `Agent(keep_warm=...)`).
            await _converse(session, store)
        console.print(f"[dim]resume with: stoker chat --resume {session.id}[/]")

    # A resume reads what is stored: a mistyped --db is refused, not made (`reading`).
    with_store(reading(db) if resume is not None else settings(db=db), run)
