"""`stoker.http_client()`: the proxy's audit and optimize inside an SDK's own client.

Against the simulator over HTTP, with the official SDKs: audit mode hands the upstream
exactly the bytes the SDK sent (the same conversation through a plain client sends the
same requests), every call lands in the store with its explanation, optimize mode reads
the cache from the second call on and keeps an idle conversation warm on the client's
own loop or thread, and nothing a client or the store gets wrong fails a user's call.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.middleware.gzip import GZipMiddleware

import stoker
from stoker.clock import FrozenClock
from stoker.providers.sim.server import ServedSim, create_app, serve_in_background
from stoker.proxy.routes import dialect_at
from stoker.store.open import IN_MEMORY
from stoker.store.sqlite import SQLiteStore
from stoker.wire.exchange import Exchange
from tests.sim_routes import SYSTEM

MODEL = "claude-sonnet-4-6"
QUESTIONS = ["What does this change do?", "Is the test enough?", "Anything else?"]


class Recording(httpx2.BaseTransport):
    """A real transport that keeps what it was handed to send: method, URL, headers, body."""

    def __init__(self) -> None:
        self.inner = httpx2.HTTPTransport()
        self.sent: list[tuple[str, str, list[tuple[bytes, bytes]], bytes]] = []

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        body = request.read()
        self.sent.append((request.method, str(request.url), request.headers.raw, body))
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def sim() -> Iterator[ServedSim]:
    with serve_in_background(create_app(clock=FrozenClock())) as served:
        yield served


def _conversation(
    client: anthropic.Anthropic, after_each: Callable[[], object] | None = None, tag: str = ""
) -> list[anthropic.types.Message]:
    """`QUESTIONS` asked in turn, each with the history before it (`tag` after each
    question); `after_each` runs after every answer."""
    messages: list[dict[str, Any]] = []
    answers = []
    for question in QUESTIONS:
        messages.append({"role": "user", "content": question + tag})
        answer = client.messages.create(
            model=MODEL,
            max_tokens=64,
            system=SYSTEM,
            messages=messages,  # type: ignore[arg-type]
        )
        messages.append({"role": "assistant", "content": answer.content})
        answers.append(answer)
        if after_each is not None:
            after_each()
    return answers


async def _aconversation(
    client: anthropic.AsyncAnthropic, after_each: Callable[[], Awaitable[None]] | None = None
) -> list[anthropic.types.Message]:
    """`_conversation` on an async client; `after_each` runs after every answer."""
    messages: list[dict[str, Any]] = []
    answers = []
    for question in QUESTIONS:
        messages.append({"role": "user", "content": question})
        answer = await client.messages.create(
            model=MODEL,
            max_tokens=64,
            system=SYSTEM,
            messages=messages,  # type: ignore[arg-type]
        )
        messages.append({"role": "assistant", "content": answer.content})
        answers.append(answer)
        if after_each is not None:
            await after_each()
    return answers


async def _stored(db: Path) -> list[list[Exchange]]:
    async with SQLiteStore(db) as store:
        return [await store.proxy_calls(x.id) for x in await store.proxy_lineages()]


def test_audit_mode_sends_the_bytes_the_sdk_sent_and_records_every_call(
    sim: ServedSim, tmp_path: Path
) -> None:
    key = f"sk-sim-{uuid.uuid4().hex}"
    plain, through = Recording(), Recording()
    with anthropic.Anthropic(
        api_key=key, base_url=sim.url, max_retries=0, http_client=httpx2.Client(transport=plain)
    ) as client:
        expected = _conversation(client)
    http = stoker.http_client(sync=True, db=tmp_path / "calls.db", transport=through)
    with anthropic.Anthropic(api_key=key, base_url=sim.url, max_retries=0, http_client=http) as c:
        got = _conversation(c)
        last = http.recorded()
    # byte for byte, headers and all (the same key: the simulator answers alike)
    assert through.sent == plain.sent
    assert [a.content for a in got] == [a.content for a in expected]
    # every call recorded, one conversation, each with its explanation; no rewrite
    (calls,) = asyncio.run(_stored(tmp_path / "calls.db"))
    assert [c.mode for c in calls] == ["audit"] * 3
    assert all(c.record is not None and not c.rewrites for c in calls)
    assert last is not None
    assert last.record is not None
    assert (last.lineage_id, last.seq) == (calls[-1].lineage_id, calls[-1].seq)
    # the SDK sent no breakpoint: the record says so rather than "hit"
    assert last.record.explanation.verdict == "no_breakpoint"


def test_optimize_mode_reads_the_cache_from_the_second_call(sim: ServedSim, tmp_path: Path) -> None:
    http = stoker.http_client(sync=True, optimize=True, db=tmp_path / "calls.db")
    key = f"sk-sim-{uuid.uuid4().hex}"
    with anthropic.Anthropic(api_key=key, base_url=sim.url, max_retries=0, http_client=http) as c:
        answers = _conversation(c)
    assert answers[0].usage.cache_read_input_tokens == 0
    assert all(a.usage.cache_read_input_tokens for a in answers[1:])
    (calls,) = asyncio.run(_stored(tmp_path / "calls.db"))
    assert [c.record.explanation.verdict for c in calls if c.record] == ["first", "hit", "hit"]
    assert all(any("breakpoint" in r for r in c.rewrites) for c in calls)


def test_an_async_client_records_off_its_loop_and_leaves_nothing_on_it(
    sim: ServedSim, tmp_path: Path
) -> None:
    """OpenAI's SDK, async, optimize mode: each call recorded with its cache key set,
    reads from the second call on, and nothing of Stoker's ever runs on the client's
    loop (recording and keep-warm have a thread of their own)."""
    clock = sim.app.state.sim.clock
    assert isinstance(clock, FrozenClock)

    async def main() -> tuple[list[int], set[asyncio.Task[Any]]]:
        http = stoker.http_client(optimize=True, db=tmp_path / "calls.db", clock=clock)
        client = openai.AsyncOpenAI(
            api_key=f"sk-sim-{uuid.uuid4().hex}", base_url=sim.url + "/v1", http_client=http
        )
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        reads = []
        for question in QUESTIONS:
            messages.append({"role": "user", "content": question})
            answer = await client.chat.completions.create(model="gpt-5", messages=messages)  # type: ignore[arg-type]
            messages.append({"role": "assistant", "content": answer.choices[0].message.content})
            assert answer.usage is not None
            assert answer.usage.prompt_tokens_details is not None
            reads.append(answer.usage.prompt_tokens_details.cached_tokens or 0)
            last = await http.recorded()
            assert last is not None
            assert last.record is not None
        on_loop = {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}
        await client.close()
        return reads, on_loop

    reads, on_loop = asyncio.run(main())
    assert reads[0] == 0
    assert all(reads[1:])
    assert on_loop == set()  # no task of Stoker's on the client's loop, even while open
    (calls,) = asyncio.run(_stored(tmp_path / "calls.db"))
    assert [c.purpose for c in calls] == ["turn"] * 3
    assert all("set prompt_cache_key" in " ".join(c.rewrites) for c in calls)


def test_an_async_client_pings_across_a_gap_from_its_thread(sim: ServedSim, tmp_path: Path) -> None:
    """Keep-warm of an async client: its pings go out from the client's thread through
    a transport of its own (the client's belongs to the client's loop)."""
    clock = sim.app.state.sim.clock
    assert isinstance(clock, FrozenClock)

    async def main() -> tuple[int, list[int]]:
        http = stoker.http_client(optimize=True, db=tmp_path / "calls.db", clock=clock)
        key = f"sk-sim-{uuid.uuid4().hex}"
        pings = []

        async def gap() -> None:
            await http.recorded()
            keep_warm = http.stoker.keep_warm
            assert keep_warm is not None
            idle = functools.partial(http.stoker.run_on_loop, keep_warm.idle(360.0))
            pings.append(await asyncio.to_thread(idle))

        async with anthropic.AsyncAnthropic(
            api_key=key, base_url=sim.url, max_retries=0, http_client=http
        ) as client:
            answers = await _aconversation(client, gap)
        return sum(pings), [a.usage.cache_read_input_tokens or 0 for a in answers]

    pings, reads = asyncio.run(main())
    assert pings >= 1
    assert reads[0] == 0
    assert all(reads[1:])  # each entry outlived its 6-minute gap
    (calls,) = asyncio.run(_stored(tmp_path / "calls.db"))
    assert {c.purpose for c in calls} & {"ping", "seal"}
    assert all(c.status == 200 for c in calls)


def test_a_sync_client_pings_across_a_gap_from_its_own_thread(
    sim: ServedSim, tmp_path: Path
) -> None:
    clock = sim.app.state.sim.clock
    assert isinstance(clock, FrozenClock)
    http = stoker.http_client(sync=True, optimize=True, db=tmp_path / "calls.db", clock=clock)
    key = f"sk-sim-{uuid.uuid4().hex}"
    pings = []

    def gap() -> None:
        http.recorded()
        keep_warm = http.stoker.keep_warm
        assert keep_warm is not None
        pings.append(http.stoker.run_on_loop(keep_warm.idle(360.0)))

    with anthropic.Anthropic(api_key=key, base_url=sim.url, max_retries=0, http_client=http) as c:
        reads = [a.usage.cache_read_input_tokens or 0 for a in _conversation(c, gap)]
    assert sum(pings) >= 1
    assert reads[0] == 0
    assert all(reads[1:])
    (calls,) = asyncio.run(_stored(tmp_path / "calls.db"))
    assert [c.purpose for c in calls if c.purpose == "turn"] == ["turn"] * 3
    assert {c.purpose for c in calls} & {"ping", "seal"}


EXITING = {  # a script that makes four calls and exits without closing its client
    "sync": """
import anthropic, stoker
http = stoker.http_client(sync=True, db={db!r})
client = anthropic.Anthropic(api_key="sk-sim-exit", base_url={url!r}, http_client=http)
for n in range(4):
    client.messages.create(model={model!r}, max_tokens=16,
        messages=[{{"role": "user", "content": "question %d" % n}}])
""",
    # asyncio.run cancels what is pending when main returns: recording is not on its loop
    "async": """
import asyncio, anthropic, stoker
async def main():
    http = stoker.http_client(db={db!r})
    client = anthropic.AsyncAnthropic(api_key="sk-sim-exit", base_url={url!r}, http_client=http)
    for n in range(4):
        await client.messages.create(model={model!r}, max_tokens=16,
            messages=[{{"role": "user", "content": "question %d" % n}}])
asyncio.run(main())
""",
}


@pytest.mark.parametrize("kind", list(EXITING))
def test_a_process_that_exits_without_closing_its_client_stored_every_call(
    sim: ServedSim, tmp_path: Path, kind: str
) -> None:
    db = tmp_path / "calls.db"
    script = EXITING[kind].format(db=str(db), url=sim.url, model=MODEL)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    stored = asyncio.run(_stored(db))
    assert sorted(c.request["messages"][0]["content"] for calls in stored for c in calls) == [
        f"question {n}" for n in range(4)
    ]


def test_a_store_that_cannot_be_written_warns_once_and_the_calls_succeed(
    sim: ServedSim, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "a-folder-not-a-file"
    blocked.mkdir()
    http = stoker.http_client(sync=True, db=blocked)
    with (
        caplog.at_level(logging.WARNING),
        anthropic.Anthropic(
            api_key="sk-sim-full", base_url=sim.url, max_retries=0, http_client=http
        ) as client,
    ):
        answers = _conversation(client)
        last = http.recorded()
    assert len(answers) == 3
    assert all(a.content for a in answers)
    assert last is not None
    assert last.record is not None
    warned = [r for r in caplog.records if "could not record a proxied call" in r.message]
    assert len(warned) == 1


def test_a_client_of_the_wrong_kind_is_a_type_error_that_names_the_right_one() -> None:
    with pytest.raises(TypeError, match=r"httpx2\.AsyncBaseTransport"):
        stoker.http_client(transport=httpx2.HTTPTransport())  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"httpx2\.BaseTransport"):
        stoker.http_client(sync=True, transport=httpx2.AsyncHTTPTransport())  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"httpx2\.Client"):  # the SDK's own words
        anthropic.Anthropic(api_key="k", http_client=stoker.http_client())  # type: ignore[arg-type]


def test_only_the_apis_calls_are_recorded_whatever_the_base_path() -> None:
    assert dialect_at("POST", "/v1/messages") == "anthropic"
    assert dialect_at("POST", "/openai/v1/chat/completions") == "openai_chat"
    assert dialect_at("POST", "/api/v1/chat/completions") == "openai_chat"
    assert dialect_at("POST", "/v1/responses/") == "openai_responses"
    assert dialect_at("GET", "/v1/messages") is None
    assert dialect_at("POST", "/v1/messages/count_tokens") is None
    assert dialect_at("POST", "/v1/models") is None


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)
_bodies = st.one_of(
    st.binary(max_size=200),
    _json.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {"model": st.sampled_from([MODEL, "x", ""]), "messages": _json, "max_tokens": _json},
        optional={"system": _json, "tools": _json},
    ).map(lambda v: json.dumps(v).encode()),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=_bodies)
def test_a_body_the_optimizer_cannot_read_goes_out_unchanged_and_is_recorded_so(
    sim: ServedSim, body: bytes
) -> None:
    """Whatever a client posts to the Messages path, optimize mode never fails the call:
    the client gets the status a plain client gets, a body Stoker cannot read reaches the
    upstream byte for byte, and its record says it was not rewritten."""
    headers = {"x-api-key": "sk-sim-hostile", "anthropic-version": "2023-06-01"}
    plain = httpx2.post(sim.url + "/v1/messages", content=body, headers=headers)
    transport = Recording()
    with stoker.http_client(sync=True, optimize=True, db=IN_MEMORY, transport=transport) as http:
        got = http.post(sim.url + "/v1/messages", content=body, headers=headers)
        last = http.recorded()
    assert got.status_code == plain.status_code
    assert last is not None
    if last.error is not None and last.error.startswith("not rewritten"):
        assert transport.sent[-1][3] == body
        assert last.record is None
    elif got.status_code == 200:
        assert last.record is not None  # read, rewritten and explained


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
def test_a_child_process_can_record_and_the_latest_call_is_read_back(
    sim: ServedSim, tmp_path: Path, sync: bool
) -> None:
    """`recorder="process"`: the costly half of recording runs in a child process (as
    `stoker proxy` records); every call is stored and `recorded()` reads the latest back."""
    db = tmp_path / "calls.db"
    key = f"sk-sim-{uuid.uuid4().hex}"
    if sync:
        http = stoker.http_client(sync=True, optimize=True, db=db, recorder="process")
        with anthropic.Anthropic(
            api_key=key, base_url=sim.url, max_retries=0, http_client=http
        ) as client:
            _conversation(client)
            last = http.recorded()
    else:

        async def main() -> Exchange | None:
            http = stoker.http_client(optimize=True, db=db, recorder="process")
            async with anthropic.AsyncAnthropic(
                api_key=key, base_url=sim.url, max_retries=0, http_client=http
            ) as client:
                await _aconversation(client)
                return await http.recorded()

        last = asyncio.run(main())
    (calls,) = asyncio.run(_stored(db))
    assert [c.record.explanation.verdict for c in calls if c.record] == ["first", "hit", "hit"]
    assert last is not None
    assert (last.lineage_id, last.seq) == (calls[-1].lineage_id, calls[-1].seq)
    assert last.record is not None
    assert last.record.explanation.verdict == "hit"


def test_a_compressed_answer_is_recorded_as_the_provider_meant_it(tmp_path: Path) -> None:
    """Real APIs compress their answers when the SDK asks (it does): the SDK reads the
    answer inflated, and so does the record."""
    app = GZipMiddleware(create_app(clock=FrozenClock()), minimum_size=0)
    with serve_in_background(app) as zipped:
        http = stoker.http_client(sync=True, db=tmp_path / "calls.db")
        with anthropic.Anthropic(
            api_key="sk-sim-gzip", base_url=zipped.url, max_retries=0, http_client=http
        ) as client:
            raw = client.messages.with_raw_response.create(
                model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "hi"}]
            )
            last = http.recorded()
    assert raw.headers["content-encoding"] == "gzip"
    assert last is not None
    assert last.error is None
    assert last.record is not None
    assert last.record.usage.input_total == raw.parse().usage.input_tokens


def test_google_genai_takes_the_client_and_its_calls_pass_through_unrecorded(
    sim: ServedSim, tmp_path: Path
) -> None:
    """google-genai takes an httpx2 client too; Gemini's wire is one the proxy does not
    record yet (docs/frameworks.md), so its calls go through untouched and unrecorded."""
    from google import genai
    from google.genai import types

    transport = Recording()
    http = stoker.http_client(sync=True, db=tmp_path / "calls.db", transport=transport)
    client = genai.Client(
        api_key="AIza-in-process",
        http_options=types.HttpOptions(
            base_url=sim.url,
            api_version="v1beta",
            httpx_client=http,
        ),
    )
    with http:  # the SDK leaves a client it was given open: its owner closes it
        answer = client.models.generate_content(model="gemini-2.5-flash", contents="Hello!")
        assert answer.text
        assert transport.sent  # it went through Stoker's client
        assert http.recorded() is None
    assert asyncio.run(_stored(tmp_path / "calls.db")) == []


def test_one_sync_client_shared_by_threads_keeps_their_conversations_apart(
    sim: ServedSim, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A framework's batch runs one client from a thread pool: every thread's
    conversation is its own lineage, every call recorded, and each reads the cache from
    its second call (its own key, its own lineage: nothing crossed)."""
    http = stoker.http_client(sync=True, optimize=True, db=tmp_path / "calls.db")

    def converse(n: int) -> list[int]:
        client = anthropic.Anthropic(
            api_key=f"sk-sim-thread-{n}-{uuid.uuid4().hex}",
            base_url=sim.url,
            max_retries=0,
            http_client=http,
        )
        answers = _conversation(client, tag=f" (thread {n})")
        return [a.usage.cache_read_input_tokens or 0 for a in answers]

    with caplog.at_level(logging.WARNING), http, ThreadPoolExecutor(max_workers=6) as pool:
        reads = list(pool.map(converse, range(6)))
        http.recorded()
    # closing stopped keep-warm and stored everything (it once waited out its timeout)
    assert not [r.message for r in caplog.records if "before closing" in r.message]
    assert all(r[0] == 0 and all(r[1:]) for r in reads)
    lineages = asyncio.run(_stored(tmp_path / "calls.db"))
    assert len(lineages) == 6
    for calls in lineages:
        turns = [c for c in calls if c.purpose == "turn"]
        assert [c.record.explanation.verdict for c in turns if c.record] == ["first", "hit", "hit"]
        assert len({c.tenant for c in calls}) == 1
