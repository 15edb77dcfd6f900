"""What the child processes of the resume tests share: the system prompt, a tool, the
store and provider they are handed on the command line, and the report of a resumed
session's first call that the parent reads from standard output."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

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


def open_store(location: str, schema: str) -> SQLiteStore | PostgresStore:
    """SQLite at `location` when `schema` is "-", else PostgreSQL in that schema."""
    return SQLiteStore(location) if schema == "-" else PostgresStore(location, schema=schema)


@asynccontextmanager
async def served(
    location: str, schema: str, url: str, key: str
) -> AsyncIterator[tuple[SQLiteStore | PostgresStore, AnthropicProvider]]:
    """The store and the real Anthropic adapter on the served sim, both closed after."""
    store = open_store(location, schema)
    provider = AnthropicProvider(api_key=key, base_url=url)
    try:
        yield store, provider
    finally:
        await provider.aclose()
        await store.close()


async def resume_and_report(
    agent: Agent, store: SQLiteStore | PostgresStore, sid: str, text: str
) -> None:
    """Resume the stored session `sid`, send `text`, and print the first call's usage and
    cache verdict as JSON for the parent."""
    session = await agent.open(store, sid, create=False)
    result = await session.send(text)
    first = result.records[0]
    print(json.dumps({"usage": first.usage.to_dict(), "why": first.explanation.verdict}))
