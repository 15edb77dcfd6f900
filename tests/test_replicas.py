"""Several `stoker serve` processes on one real PostgreSQL, behind no sticky routing.

Each message goes to any replica. A session's turns still run one at a time and in
order, each once; an Idempotency-Key retried on another replica replays or waits for the
original; a replica SIGKILLed mid-turn leaves no lock behind; SIGTERM drains; a replica
switch reads the whole cached prefix; reads work from any replica while another runs
the turn; and a database restart under load costs clean 503s, never an acknowledged
message.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from stoker.gateway.replicas import Replica, ReplicaSettings, replicas
from tests.replica_support import (
    ROOT,
    PrivateServer,
    SlowSim,
    fresh_database,
    private_server,
    slow_sim,
)
from tests.store_fixtures import postgres_dsn

# Under xdist, one worker runs the module: its tests share one deployment of three
# replicas, in order.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("replicas")]

TOKEN = "replica-test-token-0001"
USERS = {"alice": TOKEN}
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CLEAN_EXIT = (0, -signal.SIGTERM)  # uvicorn re-raises SIGTERM after a clean shutdown


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@dataclass
class Deployment:
    replicas: list[Replica]
    sim: SlowSim
    settings: ReplicaSettings

    def ensure_running(self) -> None:
        for r in self.replicas:
            if not r.running:
                r.start()


@pytest.fixture(scope="module")
def sim() -> Iterator[SlowSim]:
    with slow_sim(delay=3.0) as s:
        yield s


@pytest.fixture(scope="module")
def deployment(sim: SlowSim, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with fresh_database(postgres_dsn()) as dsn:
        settings = ReplicaSettings(
            database=dsn, upstream=sim.url, users=USERS, grace_seconds=15, env=_env()
        )
        with replicas(3, tmp_path_factory.mktemp("replicas"), settings) as started:
            yield Deployment(started, sim, settings)


@pytest.fixture
def running(deployment: Deployment) -> Deployment:
    deployment.ensure_running()
    deployment.sim.arrived.clear()
    return deployment


@contextmanager
def _own_database(sim: SlowSim) -> Iterator[tuple[PrivateServer, ReplicaSettings]]:
    """A PostgreSQL server the test may stop and start, and settings for replicas on it
    that wait only a second for it."""
    with private_server() as server:
        yield (
            server,
            ReplicaSettings(
                database=server.dsn, upstream=sim.url, users=USERS, wait_seconds=1, env=_env()
            ),
        )


@asynccontextmanager
async def clients(d: Deployment) -> AsyncIterator[list[httpx.AsyncClient]]:
    made = [httpx.AsyncClient(base_url=r.url, headers=AUTH, timeout=60) for r in d.replicas]
    try:
        yield made
    finally:
        for c in made:
            await c.aclose()


async def _session(client: httpx.AsyncClient) -> str:
    created = await client.post("/v1/sessions", json={})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


async def _turns(client: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    got = await client.get(f"/v1/sessions/{sid}")
    assert got.status_code == 200, got.text
    return list(got.json()["turns"])


async def _arrived(sim: SlowSim) -> None:
    assert await asyncio.to_thread(sim.arrived.wait, 20), "the slow call never reached the sim"


async def test_turns_run_once_in_order_and_a_replica_switch_reads_the_whole_prefix(
    running: Deployment,
) -> None:
    rng = random.Random(21)
    async with clients(running) as cs:
        sids = [await _session(cs[0]) for _ in range(6)]
        verdicts: list[str] = []

        async def talk(i: int, sid: str) -> list[int]:
            used = []
            for j in range(5):
                r = rng.randrange(len(cs))  # a load balancer without affinity
                used.append(r)
                reply = await cs[r].post(
                    f"/v1/sessions/{sid}/messages", json={"text": f"session {i} message {j}"}
                )
                assert reply.status_code == 200, reply.text
                if j:
                    verdicts.append(reply.json()["requests"][0]["explanation"]["verdict"])
            return used

        placements = await asyncio.gather(*(talk(i, sid) for i, sid in enumerate(sids)))
        switches = sum(a != b for used in placements for a, b in itertools.pairwise(used))
        assert switches > 0
        for i, sid in enumerate(sids):
            turns = await _turns(cs[rng.randrange(len(cs))], sid)
            sent = [f"session {i} message {j}" for j in range(5)]
            assert [t["user"] for t in turns] == sent
            assert [t["answer"] for t in turns] == [f"Understood: {s}" for s in sent]
    # Every later turn, on whichever replica, read what the one before wrote.
    assert set(verdicts) == {"hit"}, verdicts


async def test_messages_sent_at_once_to_one_session_on_every_replica_run_one_at_a_time(
    running: Deployment,
) -> None:
    async with clients(running) as cs:
        sid = await _session(cs[0])
        texts = [f"burst {k}" for k in range(9)]
        replies = await asyncio.gather(
            *(
                cs[k % len(cs)].post(f"/v1/sessions/{sid}/messages", json={"text": t})
                for k, t in enumerate(texts)
            )
        )
        assert [r.status_code for r in replies] == [200] * len(texts)
        turns = await _turns(cs[1], sid)
    assert sorted(t["user"] for t in turns) == sorted(texts)  # each once
    assert all(t["answer"] == f"Understood: {t['user']}" for t in turns)  # none interleaved


async def test_an_idempotent_retry_on_another_replica_waits_for_the_original(
    running: Deployment,
) -> None:
    sim = running.sim
    text = "a slow question, retried"
    headers = {"Idempotency-Key": "cross-replica-1"}
    async with clients(running) as cs:
        sid = await _session(cs[0])
        path = f"/v1/sessions/{sid}/messages"
        calls = sim.slow_calls
        original = asyncio.create_task(cs[0].post(path, json={"text": text}, headers=headers))
        await _arrived(sim)
        retried = await cs[1].post(path, json={"text": text}, headers=headers)
        first = await original
        later = await cs[2].post(path, json={"text": text}, headers=headers)
        turns = await _turns(cs[2], sid)
    assert (first.status_code, retried.status_code, later.status_code) == (200, 200, 200)
    assert retried.headers["Idempotent-Replayed"] == "true"
    assert later.headers["Idempotent-Replayed"] == "true"
    assert retried.json()["text"] == first.json()["text"] == later.json()["text"]
    assert [t["user"] for t in turns] == [text]
    assert sim.slow_calls == calls + 1  # one provider call: the turn ran once


async def test_a_replica_killed_mid_turn_leaves_the_session_usable(running: Deployment) -> None:
    sim = running.sim
    text = "a slow question its replica dies in"
    headers = {"Idempotency-Key": "killed-1"}
    doomed = running.replicas[0]
    async with clients(running) as cs:
        sid = await _session(cs[1])
        path = f"/v1/sessions/{sid}/messages"
        attempt = asyncio.create_task(cs[0].post(path, json={"text": text}, headers=headers))
        await _arrived(sim)
        doomed.kill()  # its connections die with it, and the server drops its locks
        with suppress(httpx.TransportError):
            await attempt
        retried = await cs[1].post(path, json={"text": text}, headers=headers)
        assert retried.status_code == 200, retried.text
        assert retried.json()["text"] == f"Understood: {text}"
        after = await cs[2].post(path, json={"text": "and after the crash"})
        assert after.status_code == 200, after.text
        turns = await _turns(cs[2], sid)
    assert [t["user"] for t in turns] == [text, "and after the crash"]  # the text once
    doomed.start()
    async with clients(running) as cs:
        back = await cs[0].post(f"/v1/sessions/{sid}/messages", json={"text": "back again"})
        assert back.status_code == 200, back.text
        assert back.json()["requests"][0]["explanation"]["verdict"] == "hit"


async def test_reads_answer_from_any_replica_while_another_runs_the_turn(
    running: Deployment,
) -> None:
    async with clients(running) as cs:
        sid = await _session(cs[0])
        path = f"/v1/sessions/{sid}/messages"
        turn = asyncio.create_task(cs[0].post(path, json={"text": "slow, meanwhile read"}))
        await _arrived(running.sim)
        history = await cs[1].get(f"/v1/sessions/{sid}")
        usage = await cs[2].get(f"/v1/sessions/{sid}/usage")
        assert not turn.done()  # neither read waited for the turn's lock
        assert (await turn).status_code == 200
    assert (history.status_code, usage.status_code) == (200, 200)
    assert [t["user"] for t in history.json()["turns"]] == ["slow, meanwhile read"]


async def test_a_session_followed_on_one_replica_shows_a_turn_running_on_another(
    running: Deployment,
) -> None:
    async with clients(running) as cs:
        sid = await _session(cs[0])
        turn = asyncio.create_task(
            cs[0].post(f"/v1/sessions/{sid}/messages", json={"text": "slow, followed"})
        )
        seen: list[tuple[str, str]] = []  # (type, role) as the stream delivered them
        path = f"/v1/sessions/{sid}/events?stream=true&timeout=20"
        async with cs[1].stream("GET", path) as stream:
            assert stream.status_code == 200
            async for line in stream.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                if event.get("type") == "message_appended":
                    role = event["data"]["message"]["role"]
                    seen.append(("message", role))
                    if role == "user":
                        assert not turn.done()  # seen on replica 1 while replica 0 runs it
                    if role == "assistant":
                        break
        assert (await turn).status_code == 200
    assert seen == [("message", "user"), ("message", "assistant")]


async def test_sigterm_finishes_the_running_turn_then_exits(running: Deployment) -> None:
    leaving = running.replicas[2]
    async with httpx.AsyncClient(base_url=leaving.url, headers=AUTH, timeout=60) as client:
        sid = await _session(client)
        turn = asyncio.create_task(
            client.post(f"/v1/sessions/{sid}/messages", json={"text": "slow, then SIGTERM"})
        )
        await _arrived(running.sim)
        leaving.stop()
        await asyncio.sleep(0.5)
        async with httpx.AsyncClient(base_url=leaving.url) as newcomer:
            with pytest.raises(httpx.ConnectError):  # it stopped accepting
                await newcomer.get("/healthz")
        reply = await turn
    assert reply.status_code == 200, reply.text
    assert reply.json()["text"] == "Understood: slow, then SIGTERM"
    assert await asyncio.to_thread(leaving.wait, 30) in CLEAN_EXIT
    assert "Traceback" not in leaving.log.read_text()


async def test_sigterm_past_the_grace_cancels_cleanly(
    deployment: Deployment, tmp_path: Path
) -> None:
    """A turn longer than the grace is cancelled; its session is not left locked and an
    idempotent retry elsewhere finishes it once."""
    deployment.ensure_running()
    sim = deployment.sim
    sim.arrived.clear()
    settings = ReplicaSettings(
        database=deployment.settings.database,
        upstream=sim.url,
        users=USERS,
        grace_seconds=1,
        env=_env(),
    )
    hasty = Replica("hasty", tmp_path, settings)
    hasty.start()
    text = "slow, longer than the grace"
    headers = {"Idempotency-Key": "grace-1"}
    try:
        async with httpx.AsyncClient(base_url=hasty.url, headers=AUTH, timeout=60) as client:
            sid = await _session(client)
            attempt = asyncio.create_task(
                client.post(f"/v1/sessions/{sid}/messages", json={"text": text}, headers=headers)
            )
            await _arrived(sim)
            hasty.stop()
            with suppress(httpx.TransportError):
                await attempt
        assert await asyncio.to_thread(hasty.wait, 30) in CLEAN_EXIT
    finally:
        hasty.close()
    async with clients(deployment) as cs:
        path = f"/v1/sessions/{sid}/messages"
        retried = await cs[0].post(path, json={"text": text}, headers=headers)
        assert retried.status_code == 200, retried.text
        turns = await _turns(cs[1], sid)
    assert [t["user"] for t in turns] == [text]
    assert turns[0]["answer"] == f"Understood: {text}"


async def test_a_database_restart_under_load_loses_nothing_acknowledged(
    sim: SlowSim, tmp_path: Path
) -> None:
    with _own_database(sim) as (server, settings), replicas(2, tmp_path, settings) as pair:
        outcome = await _load_through_a_restart(pair, server)
        async with httpx.AsyncClient(timeout=10) as probe:
            ready = [(await probe.get(r.url + "/readyz")).status_code for r in pair]
    assert ready == [200, 200]  # recovered by themselves, no restart
    assert outcome.unavailable > 0  # the outage was seen, as clean 503s
    assert outcome.bad == []
    assert (outcome.lost, outcome.duplicated, outcome.out_of_order) == (0, 0, 0)


@dataclass
class LoadOutcome:
    unavailable: int
    bad: list[str]  # answers that were neither 200 nor a clean 503
    lost: int
    duplicated: int
    out_of_order: int


async def _load_through_a_restart(pair: list[Replica], server: Any) -> LoadOutcome:
    rng = random.Random(5)
    unavailable, bad = 0, []
    per_session = 30
    partway = asyncio.Event()  # a third of the messages acknowledged: restart the database
    async with (
        httpx.AsyncClient(base_url=pair[0].url, headers=AUTH, timeout=30) as a,
        httpx.AsyncClient(base_url=pair[1].url, headers=AUTH, timeout=30) as b,
    ):
        cs = [a, b]
        sids = [await _session(a) for _ in range(4)]
        acked: dict[str, list[str]] = {sid: [] for sid in sids}

        async def talk(i: int, sid: str) -> None:
            nonlocal unavailable
            for j in range(per_session):
                text, key = f"s{i} m{j}", f"{sid}-{j}"
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    try:
                        r = await cs[rng.randrange(2)].post(
                            f"/v1/sessions/{sid}/messages",
                            json={"text": text},
                            headers={"Idempotency-Key": key},
                        )
                    except httpx.TransportError:
                        await asyncio.sleep(0.2)
                        continue
                    if r.status_code == 200:
                        acked[sid].append(text)
                        if sum(map(len, acked.values())) >= len(sids) * per_session // 3:
                            partway.set()
                        break
                    if (
                        r.status_code == 503
                        and r.headers.get("retry-after", "").isdigit()
                        and r.json()["error"]["type"] == "store_unavailable"
                    ):
                        unavailable += 1
                        await asyncio.sleep(0.3)
                        continue
                    bad.append(f"{r.status_code} {r.text[:200]}")
                    return
                else:
                    bad.append(f"{text} was never answered")
                    return

        async def restart() -> None:
            await partway.wait()
            await asyncio.to_thread(server.stop)
            await asyncio.sleep(2.0)
            await asyncio.to_thread(server.start)

        await asyncio.gather(restart(), *(talk(i, sid) for i, sid in enumerate(sids)))
        lost = duplicated = out_of_order = 0
        for sid in sids:
            users = [t["user"] for t in await _turns(a, sid)]
            lost += len(set(acked[sid]) - set(users))
            duplicated += len(users) - len(set(users))
            stored = [u for u in users if u in acked[sid]]
            out_of_order += stored != acked[sid]
    return LoadOutcome(unavailable, bad, lost, duplicated, out_of_order)


async def test_a_replica_started_without_its_database_serves_once_it_is_back(
    sim: SlowSim, tmp_path: Path
) -> None:
    with _own_database(sim) as (server, settings):
        server.stop()
        early = Replica("early", tmp_path, settings)
        early.launch()
        try:
            async with httpx.AsyncClient(base_url=early.url, headers=AUTH, timeout=10) as c:
                while True:  # up, but not ready
                    with suppress(httpx.TransportError):
                        if (await c.get("/healthz")).status_code == 200:
                            break
                    assert early.running, early.log.read_text()[-2000:]
                    await asyncio.sleep(0.1)
                not_ready = await c.get("/readyz")
                refused = await c.post("/v1/sessions", json={})
                await asyncio.to_thread(server.start)
                deadline = time.monotonic() + 20
                while (await c.get("/readyz")).status_code != 200:
                    assert time.monotonic() < deadline, "never became ready"
                    await asyncio.sleep(0.2)
                created = await c.post("/v1/sessions", json={})  # migrated on first use
        finally:
            early.close()
    assert (not_ready.status_code, refused.status_code) == (503, 503)
    assert refused.json()["error"]["type"] == "store_unavailable"
    assert created.status_code == 201, created.text
