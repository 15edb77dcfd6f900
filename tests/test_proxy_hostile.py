"""Whatever a client sends through `stoker proxy`, the proxy itself never fails: a body
the upstream rejects comes back with the upstream's own answer, a body optimize mode
cannot read goes upstream as it came, and the recorder (in its own process) goes on
recording the calls after it."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker.store.sqlite import SQLiteStore
from stoker.wire.exchange import Exchange
from tests.hostile_http import (
    bad_utf8_strings,
    deep_values,
    encode,
    escaped_surrogates,
    huge_numbers,
    json_values,
)
from tests.proxy_helpers import TOOLS, behind_proxy

PATHS = ["/v1/messages", "/v1/chat/completions", "/v1/responses"]
GOOD = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 64,
    "system": "You review pull requests.",  # short: a failing example's repr stays short
    "tools": TOOLS,
    "messages": [{"role": "user", "content": "read the file 'app.py'"}],
}
odd = json_values | huge_numbers | deep_values | bad_utf8_strings | escaped_surrogates


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """Bytes, JSON of any shape, or a good request with one field replaced."""
    kind = draw(st.sampled_from(["bytes", "json", "field"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "json":
        return encode(draw(odd))
    field = draw(st.sampled_from([*GOOD, "stream", "thinking", "tool_choice"]))
    return encode({**GOOD, field: draw(odd)})


async def _stored(db: Path) -> list[Exchange]:
    async with SQLiteStore(db) as store:
        lineages = await store.proxy_lineages(limit=10_000)
        return [c for x in lineages for c in await store.proxy_calls(x.id)]


@pytest.mark.parametrize("optimize", [False, True], ids=["audit", "optimize"])
def test_any_body_gets_the_upstreams_answer_and_recording_goes_on(
    tmp_path: Path, optimize: bool
) -> None:
    key = f"sk-test-{uuid.uuid4().hex}"
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    sent = 0
    with (
        behind_proxy(tmp_path, optimize=optimize, recording="process") as b,
        httpx.Client(headers=headers, timeout=30) as client,
    ):

        @settings(
            max_examples=100,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        @given(path=st.sampled_from(PATHS), body=bodies())
        def one(path: str, body: bytes) -> None:
            nonlocal sent
            through = client.post(b.url + path, content=body)
            direct = client.post(b.direct + path, content=body)
            sent += 1
            assert through.status_code < 500, through.text
            if not optimize:  # audit mode: the upstream's own answer
                assert (through.status_code, _answer(through)) == (
                    direct.status_code,
                    _answer(direct),
                )

        one()
        # The recorder survived all of it: a normal call after the garbage is recorded.
        b.clock.advance(1.0)  # the last call is the latest
        answer = client.post(b.url + "/v1/messages", json=GOOD)
        assert answer.status_code == 200
        b.recorded()
        calls = asyncio.run(_stored(b.db))
    assert len(calls) == sent + 1
    last = max(calls, key=lambda c: c.started_at)
    assert last.record is not None
    assert last.record.usage.input_total == _input_total(answer.json()["usage"])
    assert key not in json.dumps([c.error for c in calls])


def _input_total(usage: dict[str, Any]) -> int:
    return int(
        usage["input_tokens"]
        + usage["cache_read_input_tokens"]
        + usage["cache_creation_input_tokens"]
    )


def _answer(response: httpx.Response) -> Any:
    """A response's body without the ids each simulator numbers on its own."""
    try:
        body = response.json()
    except ValueError:
        return response.content
    if isinstance(body, dict):
        return {k: v for k, v in body.items() if k not in ("request_id", "id")}
    return body
