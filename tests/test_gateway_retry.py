"""A retry with the same Idempotency-Key after a cut-off turn finishes that turn: the user
text is stored once, whether the gateway was killed mid-turn or the provider failed.
And a session whose last turn was cut off says so on the next message."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from stoker.agent.agent import Agent
from stoker.errors import ProviderError
from stoker.gateway.auth import token_digest
from stoker.providers.sim.server import create_app, serve_in_background
from stoker.session_views import show_session
from stoker.store.base import SqlEventStore
from tests.helpers import SYSTEM, make_registry, sim_agent
from tests.test_gateway_support import FailsOnce, make_rig

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "retry-test-token-0001"


async def _user_texts(store: SqlEventStore, sid: str) -> list[str]:
    return [t.user for t in (await show_session(store, sid)).turns]


async def test_a_retry_after_a_provider_failure_finishes_the_turn_once(
    store: SqlEventStore,
) -> None:
    rig = make_rig(store)
    rig.provider = FailsOnce(rig.sim)
    gw = rig.gateway
    sid = await gw.create_session("alice")
    with pytest.raises(ProviderError, match="overloaded"):
        await gw.send("alice", sid, "read_file 'notes.md'", idempotency_key="key-1")
    assert await _user_texts(store, sid) == ["read_file 'notes.md'"]  # stored, unanswered
    reply = await gw.send("alice", sid, "read_file 'notes.md'", idempotency_key="key-1")
    assert reply.text.startswith("Done. Tool results: read_file ok")
    assert not reply.replayed
    assert await _user_texts(store, sid) == ["read_file 'notes.md'"]  # not sent twice
    again = await gw.send("alice", sid, "read_file 'notes.md'", idempotency_key="key-1")
    assert (again.replayed, again.text) == (True, reply.text)


async def test_the_next_message_after_a_cut_off_turn_says_so(store: SqlEventStore) -> None:
    rig = make_rig(store)
    rig.provider = FailsOnce(rig.sim)
    gw = rig.gateway
    sid = await gw.create_session("alice")
    with pytest.raises(ProviderError):
        await gw.send("alice", sid, "first question")
    reply = await gw.send("alice", sid, "second question")
    assert reply.notice == "the previous message got no answer: its turn was cut off"
    sent = rig.sim.requests[-1]["messages"]
    assert [b["text"] for b in sent[-1]["content"]][-1] == (
        "(the previous message got no answer: its turn was cut off.)"
    )
    assert await _user_texts(store, sid) == ["first question", "second question"]


async def test_a_library_retry_finishes_the_cut_off_turn() -> None:
    agent, provider = sim_agent(registry=make_registry())
    failing = FailsOnce(provider)
    session = Agent(
        agent.model, provider=failing, registry=make_registry(), system=SYSTEM, clock=agent.clock
    ).session()
    with pytest.raises(ProviderError):
        await session.send("list_files please")
    result = await session.send("list_files please", retry=True)
    assert result.exit == "answered"
    users = [m for m in session.history if getattr(m, "text", "") and m.role == "user"]
    assert [m.prompt for m in users] == ["list_files please"]  # type: ignore[union-attr]


# -- a gateway process killed mid-turn ------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _hanging_upstream(arrived: threading.Event) -> Iterator[str]:
    """An Anthropic-shaped upstream that takes every request and never answers."""

    async def messages(request: Request) -> JSONResponse:
        await request.body()
        arrived.set()
        await asyncio.sleep(3600)
        return JSONResponse({})

    app = Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])
    with serve_in_background(app) as served:
        yield served.url


def _gateway(tmp: Path, db: Path, upstream: str, name: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    config = tmp / f"{name}.toml"
    config.write_text(
        f'host = "127.0.0.1"\nport = {port}\ndatabase = "{db}"\n'
        f'[agent]\nprovider = "anthropic"\nbase_url = "{upstream}"\nsystem = "{SYSTEM}"\n'
        f'[[users]]\nid = "alice"\ntoken_sha256 = "{token_digest(TOKEN)}"\n',
        encoding="utf-8",
    )
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-test-retry", "PYTHONPATH": str(ROOT)}
    with (tmp / f"{name}.log").open("w") as log:  # the child has its own copy of the file
        child = subprocess.Popen(
            [sys.executable, "-m", "stoker", "serve", "--config", str(config)],
            stdout=log,
            stderr=log,
            env={k: v for k, v in env.items() if not k.startswith("STOKER_")},
            cwd=ROOT,
        )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(url + "/healthz", timeout=1.0).status_code == 200:
                return child, url
        except httpx.TransportError:
            pass
        assert child.poll() is None, (tmp / f"{name}.log").read_text()
        threading.Event().wait(0.05)
    raise AssertionError("the gateway did not start")


@pytest.mark.slow  # a gateway process, killed and started again
async def test_a_retry_after_the_gateway_was_killed_mid_turn_finishes_it_once(
    tmp_path: Path,
) -> None:
    db = tmp_path / "sessions.db"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    arrived = threading.Event()
    text = "read_file 'notes.md'"
    with _hanging_upstream(arrived) as hanging:
        child, url = _gateway(tmp_path, db, hanging, "first")
        try:
            async with httpx.AsyncClient(base_url=url, headers=auth, timeout=30) as client:
                created = await client.post("/v1/sessions", json={})
                sid = created.json()["id"]
                headers = {"Idempotency-Key": "retry-key-1"}
                body = {"text": text}
                attempt = asyncio.create_task(
                    client.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers)
                )
                assert await asyncio.to_thread(arrived.wait, 30)
                os.kill(child.pid, signal.SIGKILL)  # mid-turn, the upstream holding the call
                with suppress(httpx.TransportError):
                    await attempt
        finally:
            child.kill()
            child.wait()
    with serve_in_background(create_app()) as sim:
        child, url = _gateway(tmp_path, db, sim.url, "second")
        try:
            async with httpx.AsyncClient(base_url=url, headers=auth, timeout=30) as client:
                reply = await client.post(
                    f"/v1/sessions/{sid}/messages", json=body, headers=headers
                )
                assert reply.status_code == 200, reply.text
                assert reply.json()["text"] == f"Understood: {text}"
                history = (await client.get(f"/v1/sessions/{sid}")).json()
        finally:
            child.terminate()
            child.wait(10)
    assert [t["user"] for t in history["turns"]] == [text]
    assert json.dumps(history).count(text) == 1 + history["turns"][0]["answer"].count(text)
