"""What the Bedrock, OpenRouter, DeepSeek and local-server tests share: the README's
library example (an agent with a tool, a system prompt, two turns, a fork), run through
a provider, and the check that a key reaches no log, record or error message."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from stoker import Agent, DispatchPolicy, tool
from stoker.clock import FrozenClock
from stoker.config import Config
from stoker.errors import AuthenticationError
from stoker.providers.base import Provider
from stoker.providers.select import select_provider
from stoker.providers.sim.server import ServedSim, create_app, serve_in_background
from stoker.store.sqlite import SQLiteStore
from stoker.wire.record import CacheRecord

# The README's stand-in for a real system prompt: above every minimum used here.
SYSTEM = "You help a Python team review their pull requests carefully. " * 120


@tool
def word_count(text: str) -> str:
    """Count the words in a text.

    Args:
        text: The text to count.
    """
    return str(len(text.split()))


@dataclass(frozen=True, slots=True, kw_only=True)
class Example:
    """The calls of the example: each turn's records, and the fork's."""

    turns: tuple[tuple[CacheRecord, ...], ...]
    fork: tuple[CacheRecord, ...]

    @property
    def second_turn_read(self) -> int:
        return self.turns[1][0].usage.read

    @property
    def fork_read(self) -> int:
        return self.fork[0].usage.read


async def readme_example(agent: Agent, *, store: SQLiteStore | None = None) -> Example:
    """Two turns and a fork that may call nothing, in a new (or stored) session."""
    session = await agent.open(store, "readme") if store is not None else agent.session()
    first = await session.send("word count of 'one two three'")
    second = await session.send("word count of 'four five'")
    review = session.fork(policy=DispatchPolicy(allowed=frozenset()))
    answer = await review.send("Anything worth remembering?")
    return Example(turns=(first.records, second.records), fork=answer.records)


@contextmanager
def served_sim(**app: Any) -> Iterator[ServedSim]:
    """`stoker sim serve` on a loopback port, on a frozen clock."""
    with serve_in_background(create_app(clock=FrozenClock(), **app)) as served:
        yield served


def assert_secret_nowhere(
    secret: str, caplog: pytest.LogCaptureFixture, *, db: Path | None = None, shown: str = ""
) -> None:
    """`secret` is in no log line, no stored byte, and not in `shown` (an error's text)."""
    assert secret not in caplog.text
    assert secret not in shown
    if db is not None:
        for path in db.parent.glob(db.name + "*"):  # the database and its WAL
            assert secret.encode() not in path.read_bytes()


def chained(exc: BaseException) -> str:
    """An exception's text with every exception it was raised from or during."""
    parts = []
    seen: BaseException | None = exc
    while seen is not None:
        parts.append(f"{type(seen).__name__}: {seen!s} {seen!r}")
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Loopback:
    """What `through_loopback` saw: the provider the spec chose (pointed at `url`), and
    everything shown to a user: its repr, its settings' repr, a refused call's errors."""

    provider: Provider
    url: str
    shown: str


async def through_loopback(
    spec: str, config_for: Callable[[str], Config], *, refused_key: str, db: Path
) -> Loopback:
    """The README example through the provider `spec` names, against a loopback `stoker
    sim serve` and stored in `db`; then a call that a simulator knowing only
    `refused_key` refuses, whose error chain is added to what was shown."""
    model = spec.partition(":")[2]
    with served_sim() as served:
        provider = select_provider(spec, config=config_for(served.url)).provider
        async with (
            SQLiteStore(db) as store,
            Agent(model, provider=provider, system=SYSTEM) as agent,
        ):
            await readme_example(agent, store=store)
        shown = repr(provider) + repr(config_for(served.url))
    with served_sim(api_keys=[refused_key]) as refusing:
        other = select_provider(spec, config=config_for(refusing.url)).provider
        async with Agent(model, provider=other, system=SYSTEM) as agent:
            with pytest.raises(AuthenticationError) as refused:
                await agent.session().send("hello")
        shown += chained(refused.value)
    return Loopback(provider=provider, url=served.url, shown=shown)


async def served_example(
    spec: str, config_for: Callable[[str], Config]
) -> tuple[Example, dict[str, Any]]:
    """The README example through the provider `spec` names, against a loopback `stoker
    sim serve`: it reads the cache on its second turn and in its fork. Returned with the
    last body the simulator received."""
    with served_sim() as served:
        async with Agent(
            spec, tools=[word_count], system=SYSTEM, config=config_for(served.url)
        ) as agent:
            example = await readme_example(agent)
        sent = served.app.state.sim.received[-1][1]
    assert example.second_turn_read > 0
    assert example.fork_read > 0
    return example, sent


async def loopback_keeps_secrets(
    spec: str,
    config_for: Callable[[str], Config],
    secrets: tuple[str, ...],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    *,
    refused_key: str = "sk-someone-else",
) -> Loopback:
    """`through_loopback` with debug logging on: the provider talks to the loopback
    server, and no secret reaches a log, the store or an error."""
    caplog.set_level(logging.DEBUG)
    db = tmp_path / "s.db"
    seen = await through_loopback(spec, config_for, refused_key=refused_key, db=db)
    assert seen.url.startswith("http://127.0.0.1:")
    for secret in secrets:
        assert_secret_nowhere(secret, caplog, db=db, shown=seen.shown)
    return seen


async def in_process_example(model: str, provider: Provider | None = None) -> None:
    """The README example on the in-process simulator reads the cache on its second turn
    and in its fork."""
    spec = f"sim:{model}" if provider is None else model
    async with Agent(spec, provider=provider, tools=[word_count], system=SYSTEM) as agent:
        example = await readme_example(agent)
    assert example.second_turn_read > 0
    assert example.fork_read > 0


def cli_run(
    spec: str, workdir: Path, env: dict[str, str], *, url_in: str, unset: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess[str], int]:
    """`stoker run --provider spec hi` in a child process with `env` set (an API key among
    it), `unset` unset and the URL of a loopback `stoker sim serve` in `url_in`; with how
    many requests the simulator counted for the model under that key."""
    model = spec.partition(":")[2]
    with serve_in_background(create_app()) as served:
        environ = {**os.environ, **env, url_in: served.url}
        for name in unset:
            environ.pop(name, None)
        command = ["run", "--provider", spec, "--workdir", str(workdir), "hi"]
        done = subprocess.run(
            [sys.executable, "-m", "stoker", *command],
            capture_output=True,
            text=True,
            env=environ,
            timeout=60,
            check=False,
        )
        (key,) = (value for name, value in env.items() if name.endswith("_API_KEY"))
        stats = httpx.get(served.url + "/stats", headers={"x-api-key": key}).json()
    return done, stats["keys"][stats["you"]]["models"][model]["requests"]
