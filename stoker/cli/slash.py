"""What `stoker chat` answers itself: lines that start with a command word (`/help`,
`/usage`, `/model`, `/compact`, `/exit`) never reach the model, and neither does a mistyped one.

A line is a command when its first word is a slash and letters only, so a message that
merely starts with a path (`/etc/hosts is missing`) still goes to the model; `//text`
sends `/text`. A new command is one entry in `COMMANDS` and one function.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape

from stoker.agent.cache_clock import cache_clock
from stoker.agent.session import Session
from stoker.cli.render import cost_text, counted, saving_text
from stoker.errors import CompactionError, ConfigError
from stoker.session_views import Spend, show_session
from stoker.store.base import SqlEventStore
from stoker.wire.record import CacheRecord

_COMMAND = re.compile(r"/([a-z]+)(?:\s+(.*))?", re.DOTALL)


@dataclass(frozen=True, slots=True, kw_only=True)
class Chat:
    """What a command may use: the live session, the store it is kept in (which also
    holds the calls of earlier processes), and where to print."""

    session: Session
    store: SqlEventStore
    out: Console


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """A local command: its help line, what it does (returns False to end the chat), and
    other names it answers to (listed on its own help line, never as a second command)."""

    usage: str
    run: Callable[[Chat, str], Awaitable[bool]]
    aliases: tuple[str, ...] = ()


def parse(line: str) -> tuple[str, str] | None:
    """(command name, argument) when `line` is a command, else None (send it)."""
    found = _COMMAND.fullmatch(line.strip())
    return (found[1], (found[2] or "").strip()) if found else None


def message_text(line: str) -> str:
    """What a line that is not a command sends: `//x` is the escape for a leading slash."""
    return line[1:] if line.startswith("//") else line


async def _help(chat: Chat, argument: str) -> bool:
    out = chat.out
    for name, command in COMMANDS.items():
        names = ", ".join(f"/{n}" for n in (name, *command.aliases))
        out.print(f"  [bold]{names}[/] {escape(command.usage)}")
    out.print("  Anything else goes to the model; start a line with // to send a leading /.")
    return True


async def _usage(chat: Chat, argument: str) -> bool:
    """The whole stored session, calls made by earlier processes (resumes) included."""
    out = chat.out
    records = (await show_session(chat.store, chat.session.id)).records
    spend = Spend.of(records)
    u = spend.usage
    unpriced = (
        f" (+{counted(spend.unpriced, 'call')} with no known price)" if spend.unpriced else ""
    )
    out.print(
        f"{counted(spend.calls, 'call')} · read {u.read:,} · written {u.written:,} · uncached "
        f"{u.uncached:,} · output {u.output:,} · hit ratio {u.hit_ratio:.1%}\n"
        f"cost {cost_text(spend.cost_usd)}{unpriced} · without a cache "
        f"{cost_text(spend.no_cache_usd)} · {saving_text(spend.savings_usd)}"
    )
    print_clock(chat.session, records, out)
    return True


def print_clock(session: Session, records: Sequence[CacheRecord], out: Console) -> None:
    """The session's cache clock (`stoker.agent.cache_clock`): how long its prefix stays
    cached, what the next message costs now and after expiry, and the time policy's
    planned keep-warm with its price."""
    info = session.agent.provider.model_info(session.prefix.params.model)
    clock = cache_clock(records, info, plan=session.warm_plan())
    for line in clock.lines(session.agent.clock.now()):
        out.print(f"[dim]{escape(line)}[/]")


async def _model(chat: Chat, argument: str) -> bool:
    session, out = chat.session, chat.out
    current = session.prefix.params.model
    if not argument:
        out.print(f"model: {current} (/model NAME switches: one declared cache break)")
        return True
    session.agent.provider.model_info(argument)  # an unknown model fails here, clearly
    if argument == current:
        out.print(f"model is already {current}")
        return True
    await session.rebase(reason=f"/model {argument}", model=argument)
    out.print(f"model set to {escape(argument)}; the next message starts its new prefix")
    return True


async def _compact(chat: Chat, argument: str) -> bool:
    session, out = chat.session, chat.out
    before = len(session.history)
    try:
        await session.compact(reason="/compact")
    except CompactionError as exc:
        out.print(f"[red]error:[/] {escape(str(exc))}")
        return True
    out.print(
        f"compacted: {counted(before, 'message')} became {len(session.history)} (a summary, "
        "then the newest turns); the next message starts the compacted prefix"
    )
    return True


async def _exit(chat: Chat, argument: str) -> bool:
    return False


COMMANDS: dict[str, Command] = {
    "help": Command(usage="list these commands", run=_help),
    "usage": Command(
        usage="tokens, hit ratio, cost and savings of this session; how long it stays cached",
        run=_usage,
    ),
    "model": Command(usage="[NAME] show the model, or switch to NAME", run=_model),
    "compact": Command(usage="summarise the older history now (newest turns kept)", run=_compact),
    "exit": Command(usage="leave (Ctrl-D too)", run=_exit, aliases=("quit",)),
}
_BY_ALIAS = {alias: command for command in COMMANDS.values() for alias in command.aliases}


async def answer(chat: Chat, name: str, argument: str) -> bool:
    """Answer one command locally; False ends the chat. A mistyped command or a bad
    argument is a message here, never a turn."""
    command = COMMANDS.get(name) or _BY_ALIAS.get(name)
    if command is None:
        chat.out.print(f"[red]unknown command /{escape(name)}[/]: /help lists them")
        return True
    try:
        return await command.run(chat, argument)
    except ConfigError as exc:
        chat.out.print(f"[red]error:[/] {escape(str(exc))}")
        return True
