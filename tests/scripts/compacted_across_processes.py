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
from stoker.providers.anthropic import AnthropicProvider
from stoker.store.postgres import PostgresStore
from stoker.store.sqlite import SQLiteStore

SYSTEM = "You are a test agent. " + "Follow the rules of the house carefully. " * 160
WORDS = "word " * 400


async def main(action: str, location: str, schema: str, url: str, key: str, sid: str) -> None:
    store = SQLiteStore(location) if schema == "-" else PostgresStore(location, schema=schema)
    provider = AnthropicProvider(api_key=key, base_url=url)
    agent = Agent(
        "claude-sonnet-4-6",
        provider=provider,
        system=SYSTEM,
        max_tokens=512,
        compaction=CompactionPolicy(window=8000),
    )
    try:
        session = await agent.open(store, sid, create=action == "create")
        if action == "create":
            turns = 0
            while not (session.history and session.history[0].text.startswith("Summary of")):
                await session.send(f"turn {turns} {WORDS}")
                turns += 1
            await session.send("after the compaction")
            print(json.dumps({"turns": turns}))
        else:
            result = await session.send("and one more thing")
            first = result.records[0]
            print(json.dumps({"usage": first.usage.to_dict(), "why": first.explanation.verdict}))
    finally:
        await provider.aclose()
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
