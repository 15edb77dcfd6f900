"""`stoker proxy` records in a child process: the command end to end, and a recorder
process that dies or cannot start, which must cost the client nothing."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from stoker.providers.sim.server import create_app, serve_in_background
from stoker.proxy import ProxyConfig
from stoker.proxy import create_app as create_proxy
from stoker.proxy.recorder_process import RecorderProcess
from stoker.proxy.routes import tenant_of
from stoker.store.sqlite import SQLiteStore
from stoker.wire.exchange import Exchange
from tests.proxy_helpers import SYSTEM, TOOLS, behind_proxy

HEADERS = {"anthropic-version": "2023-06-01", "content-type": "application/json"}


def _body(text: str) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 64,
        "system": SYSTEM,
        "tools": TOOLS,
        "messages": [{"role": "user", "content": text}],
    }


async def _stored(db: Path) -> list[list[Exchange]]:
    async with SQLiteStore(db) as store:
        return [await store.proxy_calls(x.id) for x in await store.proxy_lineages()]


def test_a_recorder_process_that_cannot_start_costs_the_client_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`/bin/false` stands for a recorder that exits at once: every call is still
    answered with the upstream's own bytes, nothing waits for it, and the log says
    calls went unrecorded."""
    key = f"sk-test-{uuid.uuid4().hex}"
    headers = {**HEADERS, "x-api-key": key}
    with serve_in_background(create_app()) as sim, serve_in_background(create_app()) as direct:
        app = create_proxy(
            ProxyConfig(upstream=sim.url),
            sink=None,
            process=RecorderProcess(str(tmp_path / "proxy.db"), python="/bin/false"),
        )
        with serve_in_background(app) as proxied:
            with httpx.Client(headers=headers) as client:
                for n in range(3):
                    through = client.post(f"{proxied.url}/v1/messages", json=_body(f"q{n}"))
                    plain = client.post(f"{direct.url}/v1/messages", json=_body(f"q{n}"))
                    assert (through.status_code, through.content) == (200, plain.content)
            assert app.state.proxy.wait_recorded(timeout=10)
            app.state.proxy.close_from_thread()
    assert "recorder process is gone" in caplog.text
    assert key not in caplog.text


def test_a_killed_recorder_process_is_replaced_at_the_next_call(tmp_path: Path) -> None:
    headers = {**HEADERS, "x-api-key": f"sk-test-{uuid.uuid4().hex}"}
    with behind_proxy(tmp_path, recording="process") as behind:
        process = behind.proxy.process
        assert process is not None
        with httpx.Client(base_url=behind.url, headers=headers) as client:
            client.post("/v1/messages", json=_body("first")).raise_for_status()
            behind.recorded()
            first = process.pid
            assert first is not None
            os.kill(first, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while process.running and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not process.running
            client.post("/v1/messages", json=_body("second")).raise_for_status()
            behind.recorded()
        assert process.pid not in (None, first)
        lineages = asyncio.run(_stored(behind.db))
    titles = sorted(calls[0].title for calls in lineages)
    assert titles == ["first", "second"]
    assert all(calls[0].record is not None for calls in lineages)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_proxy_command_records_each_call_in_its_child_and_stores_no_key(
    tmp_path: Path,
) -> None:
    key = f"sk-test-{uuid.uuid4().hex}"
    db = tmp_path / "proxy.db"
    port = _free_port()
    with serve_in_background(create_app()) as sim:
        command = [sys.executable, "-m", "stoker", "proxy", "--listen", f"127.0.0.1:{port}"]
        command += ["--upstream", sim.url, "--db", str(db), "--optimize"]
        proxy = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    httpx.get(url, timeout=1)
                    break
                except httpx.TransportError:
                    assert proxy.poll() is None
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
            history: list[dict[str, Any]] = []
            with anthropic.Anthropic(base_url=url, api_key=key, max_retries=0) as client:
                for text in ("Review: read the file 'app.py'", "Thanks"):
                    history.append({"role": "user", "content": text})
                    answer = client.messages.create(
                        model="claude-sonnet-4-6",
                        max_tokens=64,
                        system=SYSTEM,
                        tools=TOOLS,  # type: ignore[arg-type]
                        messages=history,  # type: ignore[arg-type]
                    )
                    history.append(
                        {"role": "assistant", "content": [b.model_dump() for b in answer.content]}
                    )
                    uses = [b for b in answer.content if b.type == "tool_use"]
                    if uses:
                        history.append(
                            {
                                "role": "user",
                                "content": [
                                    {"type": "tool_result", "tool_use_id": b.id, "content": "ok"}
                                    for b in uses
                                ],
                            }
                        )
        finally:
            proxy.send_signal(signal.SIGTERM)
            out, err = proxy.communicate(timeout=30)
    # uvicorn shuts down cleanly, then ends with the signal it caught
    assert proxy.returncode in (0, -signal.SIGTERM), err.decode()
    assert b"Traceback" not in err
    assert out.startswith(f"Stoker proxy (optimize) on http://127.0.0.1:{port} -> ".encode())
    (calls,) = asyncio.run(_stored(db))
    assert [c.seq for c in calls] == [0, 1]
    assert all(c.record is not None and c.record.usage.input_total > 0 for c in calls)
    assert calls[1].record is not None
    assert calls[1].record.usage.read > 0
    assert calls[0].ideal > 0  # the shadow cache ran in the child
    assert calls[0].rewrites  # optimize mode placed the breakpoints
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("proxy.db*"))
    assert key.encode() not in stored
    assert tenant_of(key).encode() in stored
    assert key.encode() not in out + err


@pytest.fixture(autouse=True)
def _warnings_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/chat/completions"])
def test_an_upstream_that_cannot_be_reached_is_a_502_in_the_apis_shape(
    tmp_path: Path, path: str
) -> None:
    key = f"sk-test-{uuid.uuid4().hex}"
    port = _free_port()  # nothing listens there
    db = tmp_path / "proxy.db"
    app = create_proxy(ProxyConfig(upstream=f"http://127.0.0.1:{port}"), sink=SQLiteStore(db))
    with (
        serve_in_background(app) as proxied,
        httpx.Client(headers={**HEADERS, "x-api-key": key}) as c,
    ):
        answer = c.post(proxied.url + path, json=_body("hello"))
        assert app.state.proxy.wait_recorded()
        app.state.proxy.close_from_thread()
    assert answer.status_code == 502
    error = answer.json()
    message = error["error"]["message"]
    assert message.startswith("the proxy could not reach the upstream: ClientConnectorError")
    if path == "/v1/messages":
        assert error["type"] == "error"
    else:
        assert error["error"]["type"] == "server_error"
    assert key not in answer.text
    (calls,) = asyncio.run(_stored(db))
    assert [(c.status, c.error) for c in calls] == [(502, message)]
