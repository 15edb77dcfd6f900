"""Child process for the crash test: starts a turn whose tool blocks, printing each
acknowledged event, so the parent can SIGKILL it between tool_use and tool_result."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from stoker.agent.agent import Agent
from stoker.clock import FrozenClock
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.model import Call, ScriptedModel
from stoker.providers.sim.provider import SimProvider
from stoker.store.postgres import PostgresStore
from stoker.store.sqlite import SQLiteStore
from stoker.tools import tool
from stoker.wire.events import Event

SYSTEM = "You are a test agent. " + "Follow the rules of the house carefully. " * 160


def make_tool(marker: Path | None):  # type: ignore[no-untyped-def]
    @tool
    def slow_tool(text: str) -> str:
        """A tool that takes a long time.

        Args:
            text: Anything.
        """
        if marker is not None:
            marker.write_text("started")
            time.sleep(120)
        return f"slow_tool ran: {text}"

    return slow_tool


class Acknowledging:
    def __init__(self, store) -> None:  # type: ignore[no-untyped-def]
        self.store = store

    async def emit(self, event: Event) -> None:
        await self.store.emit(event)
        print(f"ack {event.type}", flush=True)


async def main(location: str, schema: str, marker: str) -> None:
    store = SQLiteStore(location) if schema == "-" else PostgresStore(location, schema=schema)
    model = ScriptedModel([Call(name="slow_tool", arguments={"text": "x"})])
    clock = FrozenClock()
    agent = Agent(
        provider=SimProvider(engine=SimEngine(model=model), clock=clock),
        model="claude-sonnet-4-6",
        tools=[make_tool(Path(marker))],
        system=SYSTEM,
        clock=clock,
    )
    session = agent.session(session_id="crashed", store=Acknowledging(store))
    await session.send("please run the slow tool")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
