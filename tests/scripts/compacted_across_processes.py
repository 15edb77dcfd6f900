"""Child process for the compacted-resume test.

`create` drives a session through the served sim past its context window until it has
compacted, then sends one more turn; `resume ID` resumes it in a fresh process and sends
one more message, printing its first record."""

from __future__ import annotations

import asyncio
import json
import sys

from stoker.agent.agent import Agent
from stoker.agent.compaction import CompactionPolicy
from tests.scripts.child import SYSTEM, resume_and_report, served

WORDS = "word " * 400


async def main(action: str, location: str, schema: str, url: str, key: str, sid: str) -> None:
    async with served(location, schema, url, key) as (store, provider):
        agent = Agent(
            "claude-sonnet-4-6",
            provider=provider,
            system=SYSTEM,
            max_tokens=512,
            compaction=CompactionPolicy(window=8000),
        )
        if action == "create":
            session = await agent.open(store, sid)
            turns = 0
            while not (session.history and session.history[0].text.startswith("Summary of")):
                await session.send(f"turn {turns} {WORDS}")
                turns += 1
            await session.send("after the compaction")
            print(json.dumps({"turns": turns}))
        else:
            await resume_and_report(agent, store, sid, "and one more thing")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
