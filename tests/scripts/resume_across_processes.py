"""Child process for the resume test: `create` runs two turns and exits; `resume` resumes
the stored session in a fresh process and runs one more. Both talk to the served sim
through the real Anthropic adapter, so the provider's cache outlives each process."""

from __future__ import annotations

import asyncio
import json
import sys

from stoker.agent.agent import Agent
from stoker.providers.anthropic import AnthropicProvider
from stoker.store.postgres import PostgresStore
from stoker.store.sqlite import SQLiteStore
from stoker.tools import tool

SYSTEM = "You are a test agent. " + "Follow the rules of the house carefully. " * 160


@tool
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: Which file.
    """
    return f"contents of {path}"


async def main(action: str, location: str, schema: str, url: str, key: str, sid: str) -> None:
    store = SQLiteStore(location) if schema == "-" else PostgresStore(location, schema=schema)
    provider = AnthropicProvider(api_key=key, base_url=url)
    agent = Agent(provider=provider, model="claude-sonnet-4-6", tools=[read_file], system=SYSTEM)
    try:
        if action == "create":
            session = agent.session(session_id=sid, store=store)
            await session.send("please read_file 'a.md'")
            await session.send("thanks")
        else:
            session = await agent.open(store, sid, create=False)
            result = await session.send("one more thing")
            first = result.records[0]
            print(json.dumps({"usage": first.usage.to_dict(), "why": first.explanation.verdict}))
    finally:
        await provider.aclose()
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
