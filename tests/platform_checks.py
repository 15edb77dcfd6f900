"""What every chat platform's tests share, written once: the gateway they run on (the
simulator as a model that echoes, or writes a long reply), a bridge receiving, a
provider that hangs like a process about to die, the cache checks (a chat's tenth
message reads all its ninth read and wrote, a review after a platform turn reads all the
turn cached), `stoker serve`'s config composed as the command composes it, and `Chat`:
one platform's side of a conversation, which each rig implements for its fake so the
tests of `test_platforms.py` run against every platform."""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from stoker.errors import ConfigError
from stoker.gateway.app import create_app
from stoker.gateway.config import GatewayConfig, load_config
from stoker.gateway.server import build_app, build_gateway, serve_in_thread
from stoker.gateway.service import Gateway
from stoker.gateway.session_settings import SessionSettings
from stoker.platforms.access import Allowlist, ChatRates, RateLimit
from stoker.platforms.base import Adapter
from stoker.platforms.bridge import Bridge
from stoker.platforms.config import PlatformSettings, load_platforms
from stoker.platforms.registry import build_bridges
from stoker.providers.base import CallContext, Completion, ProviderWrapper
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.model import RuleModel
from stoker.providers.sim.provider import SimProvider
from stoker.store.base import SqlEventStore
from stoker.store.sqlite import SQLiteStore
from stoker.wire.blocks import Block, TextBlock
from stoker.wire.messages import UserMessage
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request
from tests.helpers import SYSTEM
from tests.store_fixtures import reopen
from tests.test_gateway_support import Rig, make_rig, tokens

LONG = "\n\n".join(
    f"Paragraph {i}: " + "words that fill a phone screen & more <tags> " * 12 for i in range(40)
)
# What a user sends across a restart (the bot's fake process dies during "stuck two").
ASKED = ["one", "stuck two", "three, sent while the gateway was down", "four"]
# Any JSON value, for bodies and payloads a platform (or an attacker) may send.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=20,
)
# The hostile-body runs against a served route: bounded, and the rig's fake API (a
# function-scoped fixture) is shared by a test's examples on purpose.
HOSTILE_BODIES = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


class ChatModel:
    """The rule model, except "long ..." gets a reply longer than any platform's message."""

    def __init__(self, inner: object | None = None) -> None:
        self.inner = inner or RuleModel()

    def respond(self, request: Request) -> tuple[Block, ...]:
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.text.startswith("long"):
            return (TextBlock(text=LONG),)
        return self.inner.respond(request)  # type: ignore[attr-defined,no-any-return]


def chat_rig(store: SqlEventStore) -> Rig:
    """A gateway on `store` whose model answers "Understood: ..." (or a long reply, which
    needs room: the simulator, like a model, stops at `max_tokens`)."""
    rig = make_rig(store, defaults=SessionSettings(system=SYSTEM, max_tokens=16_000))
    rig.provider = SimProvider(engine=SimEngine(model=ChatModel()), clock=rig.clock)
    return rig


class Stuck(ProviderWrapper):
    """Hangs on the turn that says "stuck", as a process does just before it dies."""

    def __init__(self, inner: SimProvider) -> None:
        super().__init__(inner)
        self.entered = asyncio.Event()

    async def complete(self, request: Request, context: CallContext) -> Completion:
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.text.startswith("stuck"):
            self.entered.set()
            await asyncio.Event().wait()
        return await self.inner.complete(request, context)


class Crash:
    """A gateway process that dies in the turn whose text starts with "stuck" (its
    provider hangs there), and the process after it: `kill` the first once that turn
    began, then `restart` on the same store; the simulator answers from then on."""

    def __init__(self, rig: Rig) -> None:
        sim = rig.provider
        assert isinstance(sim, SimProvider)
        self.rig, self.sim, self.hanging = rig, sim, Stuck(sim)
        rig.provider = self.hanging  # type: ignore[assignment]

    async def kill(self, b: Bridge, update: str = "", *, lease: float = 1.0) -> None:
        """`b`'s process dies in the stuck turn: its writes are shielded, and (given
        `update`) it never gives back its lease on the update, as a killed process does
        not (another may take it over `lease` seconds on)."""
        await self.hanging.entered.wait()
        await b.stop(grace=0)
        if update:
            held = f"platform:{b.name}:{update}"
            assert await b.gateway.store.take_lease(held, "the-dead-process", seconds=lease)
        self.rig.provider = self.sim

    def restart(self, store: SqlEventStore) -> AbstractAsyncContextManager[Gateway]:
        """The gateway of the process after it, on `store` reopened."""
        return restarted(self.rig, store)


def bridge_on(
    gateway: Gateway,
    adapter: Adapter,
    settings: Any,
    *,
    retry_every: float,
    now: Callable[[], float] | None = None,
) -> Bridge:
    """A bridge as `registry.build_bridges` makes one from a platform's `settings`,
    quicker to show typing and to try again (`now`: the rate limit's clock)."""
    rates = ChatRates(settings.rate, now=now) if now is not None else ChatRates(settings.rate)
    return Bridge(
        gateway,
        adapter,
        allowlist=settings.allowlist,
        rates=rates,
        typing_every=0.05,
        retry_every=retry_every,
    )


def rig_settings(user: str, given: dict[str, Any]) -> dict[str, Any]:
    """A rig's platform settings: `given`, by default allowing only `user`, at a rate no
    test reaches."""
    return {
        "allowlist": Allowlist(users=frozenset({user})),
        "rate": RateLimit(per_minute=600, burst=100),
        **given,
    }


@asynccontextmanager
async def running(b: Bridge) -> AsyncIterator[Bridge]:
    """`b` receiving; on the way out everything it started is finished, then it stops."""
    await b.start()
    try:
        yield b
        await b.idle()
    finally:
        await b.stop()


@asynccontextmanager
async def restarted(rig: Rig, store: SqlEventStore) -> AsyncIterator[Gateway]:
    """The gateway of another process on `store` reopened (closed on the way out), as
    after a restart."""
    reopened = reopen(store)
    try:
        yield rig.another_process(reopened)
    finally:
        await reopened.close()


@asynccontextmanager
async def app_client(gateway: Gateway, b: Bridge) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the gateway's app with `b` as its companion (its routes served)."""
    app = create_app(gateway, tokens=tokens(), companions=[b])
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        yield client


@asynccontextmanager
async def routes_of(
    tmp_path: Path, bridge_for: Callable[[Gateway], Bridge]
) -> AsyncIterator[tuple[httpx.AsyncClient, SqlEventStore]]:
    """For one generated example: a client of the app of a gateway on a store of its own,
    with the bridge `bridge_for` makes as its companion (not started: its routes only),
    and that store; on the way out the bridge's work is done and the store closed."""
    store = SQLiteStore(tmp_path / f"fuzz-{uuid.uuid4().hex}.db")
    rig = make_rig(store)
    b = bridge_for(rig.gateway)
    try:
        async with app_client(rig.gateway, b) as client:
            yield client, store
    finally:
        await b.idle()
        await store.close()


async def user_texts(store: SqlEventStore, platform: str, chat: str) -> list[str]:
    """The text of each user message stored in the session of `platform`'s chat key."""
    sid = await store.chat_session(platform, chat)
    assert sid is not None
    stored = await store.load(sid)
    return [m.text for m in stored.messages if isinstance(m, UserMessage) and m.text]


async def assert_a_new_session(
    gateway: Gateway, user: str, first: str | None, second: str | None
) -> tuple[str, str]:
    """`/new` moved the chat from session `first`, which holds its "hello", to a session
    `second` of its own, which holds the "after new" sent next; the two."""
    assert first is not None
    assert second is not None
    assert second != first
    assert [t.user for t in (await gateway.view(user, first)).turns] == ["hello"]
    assert [t.user for t in (await gateway.view(user, second)).turns] == ["after new"]
    return first, second


async def assert_nothing_stored(store: SqlEventStore, platform: str) -> None:
    """Nothing that came in was kept: no session, no update waiting to be answered."""
    assert await store.list_sessions() == []
    assert await store.pending_updates(platform) == []


async def assert_tenth_reads_the_ninth(
    gateway: Gateway, platform: str, chat: str, user: str
) -> int:
    """The chat key `chat` of `platform` answered ten messages, and the tenth's first call
    read the whole prefix its ninth's last call had (hit); the tokens it read."""
    sid = await gateway.store.chat_session(platform, chat)
    assert sid is not None
    view = await gateway.view(f"{platform}:{user}", sid)
    assert len(view.turns) == 10
    ninth, tenth = view.turns[8].records[-1], view.turns[9].records[0]
    assert tenth.explanation.verdict == "hit"
    assert tenth.usage.read == ninth.usage.read + ninth.usage.written > 0
    return tenth.usage.read


def assert_review_reads_the_turn(recorded_calls: list[CacheRecord]) -> int:
    """The first review is a fork of the last main call's session and read everything
    that call read and wrote; the tokens it read."""
    main = [r for r in recorded_calls if r.role == "main"]
    reviews = [r for r in recorded_calls if r.role == "review"]
    assert reviews[0].usage.read == main[-1].usage.read + main[-1].usage.written > 0
    assert reviews[0].session_id.startswith(main[-1].session_id + ".review-")
    return reviews[0].usage.read


def load_section(
    tmp_path: Path, platform: str, section: str, env: Mapping[str, str]
) -> PlatformSettings:
    """The platforms of a config file holding `[platforms.PLATFORM]` with `section`."""
    path = tmp_path / "gateway.toml"
    path.write_text(f"[platforms.{platform}]\n{section}\n", encoding="utf-8")
    return load_platforms(path, env=env)


def toml_section(platform: str, **keys: str | int | list[str] | list[int]) -> str:
    """The config file's `[platforms.PLATFORM]` table with `keys` (TOML writes these
    values as JSON does)."""
    lines = [f"[platforms.{platform}]", *(f"{k} = {json.dumps(v)}" for k, v in keys.items())]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class Served:
    url: str
    rig: Rig
    config: GatewayConfig


@contextmanager
def served(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    platform: str,
    env: Mapping[str, str],
    **section: str | int | list[str] | list[int],
) -> Iterator[Served]:
    """`stoker serve` on a config file of `[platforms.PLATFORM]` with `section` and a
    database in `tmp_path`, composed as the command composes it (the gateway, on the
    simulator, and the configured platforms' bridges as companions of its app), on a free
    port; every log line at DEBUG is captured, to look for secrets in."""
    caplog.set_level(logging.DEBUG)
    database, config_file = tmp_path / "gateway.db", tmp_path / "gateway.toml"
    tables = toml_section(platform, **section)
    config_file.write_text(f'database = "{database}"\n{tables}', encoding="utf-8")
    config = load_config(config_file, env=env)
    rig = make_rig(SQLiteStore(database))
    gateway = build_gateway(config, store=rig.gateway.store, provider_factory=rig.factory)
    bridges = build_bridges(load_platforms(config_file, env=env), gateway)
    with serve_in_thread(build_app(config, gateway, companions=bridges)) as url:
        yield Served(url=url, rig=rig, config=config)


async def assert_start_refused(
    b: Bridge, match: str, secret: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`b` fails to start with an error matching `match` (what to do), and neither the
    error, its traceback nor any log line shows `secret`."""
    with pytest.raises(ConfigError, match=match) as caught:
        await b.start()
    shown = "".join(traceback.format_exception(caught.value)) + caplog.text
    assert secret not in shown


def assert_secrets_kept(
    served: Served, tmp_path: Path, caplog: pytest.LogCaptureFixture, *secrets: str
) -> None:
    """No secret of a served gateway is in a log line, its database files (`served`'s, in
    `tmp_path`) or its config's repr."""
    for secret in secrets:
        assert secret not in caplog.text
        assert files_holding(tmp_path, "gateway.db", secret) == []
        assert secret not in repr(served.config)


def files_holding(folder: Path, prefix: str, secret: str) -> list[str]:
    """The files named `prefix`* (the database, its WAL) whose bytes contain `secret`."""
    files = [p for p in folder.iterdir() if p.name.startswith(prefix)]
    assert files
    return [p.name for p in files if secret.encode() in p.read_bytes()]


class Chat(Protocol):
    """One platform's side of a conversation, as the shared tests drive it: its fake API
    on loopback, bridges to it, and the test user's direct chat with the bot.

    `stored` is the store's key of that chat; `other` another user (allowed only where a
    test says so); `silences` whether the platform can post without notifying."""

    platform: str
    user: str
    other: str
    stored: str
    silences: bool

    def bridge(self, gateway: Gateway, **settings: Any) -> Bridge:
        """A bridge from the fake to `gateway` (`settings`: the platform's, changed)."""
        ...

    def talking(self, gateway: Gateway, b: Bridge) -> AbstractAsyncContextManager[Bridge]:
        """`b` receiving what the fake delivers; on the way out all it started is done."""
        ...

    async def say(self, text: str) -> str:
        """The user's message in their direct chat, delivered; its update's id."""
        ...

    def texts(self) -> list[str]:
        """Every message the bot posted (refused ones too), as the user reads it."""
        ...

    def quiet(self) -> list[bool]:
        """For each of them, whether it was posted without notifying."""
        ...

    def edits(self) -> list[str]:
        """Each edit of a posted message, as the user reads it."""
        ...

    def notes(self) -> list[str]:
        """The note each button press got, as its presser reads it."""
        ...

    def asked(self) -> list[dict[str, Any]]:
        """The bot's questions (messages posted with buttons), as posted."""
        ...

    def buttons(self, question: dict[str, Any]) -> list[str]: ...

    async def press(self, question: dict[str, Any], button: int, *, other: bool = False) -> None:
        """The user (or the `other` user) presses a button of `question`."""
        ...

    def fail_sends(self, count: int) -> None:
        """The platform refuses the next `count` messages the bot posts."""
        ...

    def check_questions(self) -> None:
        """Asserts how the platform showed the questions and their notes (its own way)."""
        ...

    async def wait_for(self, check: Callable[[], bool], within: float = 10.0) -> None: ...


class ChatOnFake(Chat, Protocol):
    """A `Chat` whose fake API takes the user's messages itself (`fake.user_message`)."""

    fake: Any
    update_key: str


class FakeChat:
    """What a `Chat` on a fake platform API shares: the fake, its URL, waiting on what
    the bot called, and bridges the rig makes (`make(gateway, url, **settings)`)."""

    user: str
    other: str
    update_key = ""  # the field of the fake's `user_message` that is its update's id

    def __init__(self, api: Any, make: Callable[..., Bridge]) -> None:
        self.fake, self.url = api.fake, api.url
        self.wait_for = api.fake.wait_for
        self._make = make

    def bridge(self, gateway: Gateway, **settings: Any) -> Bridge:
        return self._make(gateway, self.url, **settings)

    def talking(self, gateway: Gateway, b: Bridge) -> AbstractAsyncContextManager[Bridge]:
        return running(b)

    async def say(self, text: str) -> str:
        """Written on the fake itself, which delivers it to the bot its own way."""
        return str(self.fake.user_message(text)[self.update_key])

    def fail_sends(self, count: int) -> None:
        self.fake.fail_next[self.fake.SEND] = count

    async def press(self, question: dict[str, Any], button: int, *, other: bool = False) -> None:
        """Pressed on the fake itself, which takes the presser's id as a number."""
        self.fake.press(question, button, user=int(self.other if other else self.user))


async def exchange(chat: Chat, text: str, *, replies: int = 1) -> list[str]:
    """Send `text` as the user; the texts the bot posted for it."""
    before = len(chat.texts())
    await chat.say(text)
    await chat.wait_for(lambda: len(chat.texts()) >= before + replies)
    return chat.texts()[before:]


async def assert_help_and_usage(chat: Chat, store: SqlEventStore) -> str | None:
    """A first message is answered, then `/help` and `/usage` in the same chat, which
    counts that message's request; the chat's session."""
    assert await exchange(chat, "hello") == ["Understood: hello"]
    session = await store.chat_session(chat.platform, chat.stored)
    (help_text,) = await exchange(chat, "/help")
    assert help_text.splitlines()[0] == "/new: start a new session with the default settings"
    (usage,) = await exchange(chat, "/usage")
    assert usage.startswith("1 requests, $")
    return session


async def assert_a_restart_loses_nothing(
    chat: ChatOnFake, store: SqlEventStore, *, while_down: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    """The bot's process dies in the turn of "stuck two", the user sends a third message
    while the gateway is down (then `while_down` does what the platform does, given the
    cut-off update), and the next process answers each message once, "four" after them
    all, storing each once; the cut-off update."""
    rig = chat_rig(store)
    crash = Crash(rig)
    first = chat.bridge(rig.gateway)
    await first.start()
    assert await exchange(chat, "one") == ["Understood: one"]
    cut: dict[str, Any] = chat.fake.user_message("stuck two")
    await crash.kill(first, str(cut[chat.update_key]))
    await chat.say("three, sent while the gateway was down")
    while_down(cut)
    async with crash.restart(store) as gateway:
        async with running(chat.bridge(gateway, retry_every=0.2)):
            await chat.wait_for(lambda: len(chat.texts()) == 3)
            assert await exchange(chat, "four") == ["Understood: four"]
        assert chat.texts() == [f"Understood: {text}" for text in ASKED]
        assert await user_texts(gateway.store, chat.platform, chat.stored) == ASKED
        assert await gateway.store.pending_updates(chat.platform) == []
    return cut
