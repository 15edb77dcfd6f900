"""The gateway without its database, and the settings replicas are deployed with: every
store-bound request is a clean 503 with Retry-After (never a 500, never a hang), the
liveness probe still answers, readiness does not, and a drain is refused as not ready."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.errors import ConfigError
from stoker.gateway.app import create_app
from stoker.gateway.config import MAX_POOL, load_config
from stoker.gateway.service import Gateway
from stoker.store.postgres import PostgresStore
from stoker.store.postgres_pool import PoolSettings
from stoker.store.sqlite import SQLiteStore
from tests.test_gateway_support import auth, tokens


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_every_store_bound_request_is_a_clean_503_while_the_database_is_down() -> None:
    dsn = f"postgresql://stoker:hunter2-secret@127.0.0.1:{_closed_port()}/stoker"
    store = PostgresStore(dsn, pool=PoolSettings(size=2, wait=0.5))
    gateway = Gateway(store=store)
    app = create_app(gateway, tokens=tokens())
    sid = "a" * 32
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gw", headers=auth("alice")
        ) as client:
            answers = [
                await client.post("/v1/sessions", json={}),
                await client.get("/v1/sessions"),
                await client.get(f"/v1/sessions/{sid}"),
                await client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello"}),
                await client.get("/readyz"),
            ]
            live = await client.get("/healthz")
    finally:
        await store.close()
    for answer in answers:
        assert answer.status_code == 503, answer.text
        assert answer.headers["Retry-After"] == "2"
        assert answer.json()["error"]["type"] == "store_unavailable"
        assert "hunter2" not in answer.text
    assert live.status_code == 200  # the process is up: an orchestrator must not kill it


async def test_ready_until_draining(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    gateway = Gateway(store=store)
    app = create_app(gateway, tokens=tokens())
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://gw"
    ) as client:
        ready = await client.get("/readyz")
        gateway.draining = True
        draining = await client.get("/readyz")
    await store.close()
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "replica": gateway.replica}
    assert draining.status_code == 503
    assert draining.headers["Retry-After"] == "1"


def test_pool_size_grace_and_a_secret_file_come_from_the_environment(tmp_path: Path) -> None:
    secret = tmp_path / "database-url"
    secret.write_text("postgresql://stoker:s3cret@db/stoker\n")
    config = load_config(
        None,
        env={
            "STOKER_GATEWAY_DATABASE_FILE": str(secret),
            "STOKER_GATEWAY_POOL_SIZE": "25",
            "STOKER_GATEWAY_GRACE_SECONDS": "12.5",
        },
    )
    assert config.database == "postgresql://stoker:s3cret@db/stoker"
    assert (config.pool.size, config.grace) == (25, 12.5)
    assert "s3cret" not in repr(config)
    path = tmp_path / "gw.toml"
    path.write_text("[store]\npool_size = 3\nwait_seconds = 1.5\n[lifecycle]\ngrace_seconds = 0\n")
    config = load_config(path, env={})
    assert (config.pool.size, config.pool.wait, config.grace) == (3, 1.5, 0.0)
    with pytest.raises(ConfigError, match="STOKER_GATEWAY_DATABASE_FILE"):
        load_config(None, env={"STOKER_GATEWAY_DATABASE_FILE": str(tmp_path / "missing")})


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=30), st.from_regex(r"\s*[+]?[0-9_]{1,6}\s*", fullmatch=True)))
def test_a_bad_number_in_the_environment_is_a_config_error(raw: str) -> None:
    text = raw.strip()
    if text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_POOL:
        assert load_config(None, env={"STOKER_GATEWAY_POOL_SIZE": raw}).pool.size == int(text)
    elif text:
        with pytest.raises(ConfigError, match="STOKER_GATEWAY_POOL_SIZE"):
            load_config(None, env={"STOKER_GATEWAY_POOL_SIZE": raw})
