"""Child process for the resume test: `create` runs two turns and exits; `resume` resumes
the stored session in a fresh process and runs one more. Both talk to the served sim
through the real Anthropic adapter, so the provider's cache outlives each process."""

from __future__ import annotations

import asyncio
import sys

from stoker.agent.agent import Agent
from tests.scripts.child import SYSTEM, read_file, resume_and_report, served


async def main(action: str, location: str, schema: str, url: str, key: str, sid: str) -> None:
    async with served(location, schema, url, key) as (store, provider):
        agent = Agent(
            provider=provider, model="claude-sonnet-4-6", tools=[read_file], system=SYSTEM
        )
        if action == "create":
            session = agent.session(session_id=sid, store=store)
            await session.send("please read_file 'a.md'")
            await session.send("thanks")
        else:
            await resume_and_report(agent, store, sid, "one more thing")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
