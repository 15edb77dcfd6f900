"""One platform on the gateway: updates in, turns on the session service, replies out.

Every platform goes through here, so what users get is the same everywhere: the
allowlist first (a stranger's update is dropped unseen: no reply, no session, nothing
stored), the chat's rate limit, then the update is stored (`accept_update`) before the
platform hears it arrived. A stored update is answered once: its turn runs with the
idempotency key "PLATFORM:ID", so a restart finishes a turn that was cut off instead of
running it again, and replays one that was answered but not delivered; a duplicate
delivery finds the stored row and is dropped.

Updates of one chat are handled in the order they came; chats run side by side. Whoever
handles an update holds a lease on it in the store (renewed while it works), so replicas
never handle one twice, and the update of a process that died is picked up once its
lease runs out.
An update whose handling failed (the platform refused the answer, the database blinked)
stays pending and is tried again every `retry_every` seconds, `MAX_ATTEMPTS` times in
this process, then given up with a warning. While a turn runs the chat shows typing, tool
calls appear as edits of one status message, and a background review's summary comes as
a quiet follow-up. A message's attachments are downloaded when it is handled (again after
a restart, from the stored update) and become blocks after its text or one reply saying
what was not passed (`attachments.py`). The parts of an album (a Telegram album is one
message per photo) are answered together, once no part has come for `ALBUM_SETTLE`
seconds: one turn with every part's text and attachments, counted once against the rate
limit.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.routing import BaseRoute

from stoker.agent.seams import Callbacks
from stoker.cache.models import ModelInfo
from stoker.errors import StokerError, StoreError
from stoker.gateway.errors import Unavailable
from stoker.gateway.images import WITHOUT_TEXT
from stoker.gateway.platforms.access import Allowlist, ChatRates
from stoker.gateway.platforms.attachments import Prepared, prepare
from stoker.gateway.platforms.base import (
    Adapter,
    ButtonPress,
    ChatKey,
    ChatRef,
    Context,
    Message,
    MessageRef,
)
from stoker.gateway.service import Gateway
from stoker.gateway.views import Reply
from stoker.tools import (
    ApprovalDecision,
    ApprovalRequest,
    Approver,
    ToolContext,
    ToolProgress,
)
from stoker.tools.approval import BY_TIMEOUT
from stoker.wire.blocks import ImageBlock, TextBlock

log = logging.getLogger(__name__)

APPROVAL_CHOICES = ("Allow", "Deny")
TYPING_EVERY = 4.0  # seconds: platforms show "typing" for about five
RETRY_EVERY = 15.0  # seconds between looks for updates whose handling failed
MAX_ATTEMPTS = 5  # tries per update in one process before it is given up
LEASE_SECONDS = 60.0  # renewed while an update is handled: a dead replica's expires soon
ALBUM_SETTLE = 1.0  # seconds after an album's last part before it is answered, whole
ALBUMS_REMEMBERED = 1024


def chat_of(key: ChatKey) -> ChatRef:
    return ChatRef(chat=key.chat, thread=key.thread)


@dataclass
class _Question:
    key: ChatKey
    question: str
    choices: tuple[str, ...]
    answer: asyncio.Future[str]
    message: MessageRef | None = None


@dataclass
class _Status:
    """One status message per turn, edited as tools start and end."""

    adapter: Adapter
    ctx: Context
    chat: ChatRef
    lines: list[str] = field(default_factory=list)
    message: MessageRef | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def tool(self, progress: ToolProgress) -> None:
        if progress.phase == "start":
            self.lines.append(f"⚙ {progress.name}")
        else:
            mark = "✗" if progress.is_error else "✓"
            for i in range(len(self.lines) - 1, -1, -1):
                if self.lines[i] == f"⚙ {progress.name}":
                    self.lines[i] = f"{mark} {progress.name}"
                    break
        text = "\n".join(self.lines)
        async with self._lock:  # edits of one message go out in order
            if self.message is None:
                self.message = await self.adapter.send(
                    self.ctx, self.chat, text, markup=False, quiet=True
                )
            else:
                await self.adapter.edit(self.ctx, self.message, text)


class Bridge:
    """One platform's adapter on a gateway (the `Inbox` its adapter delivers to)."""

    def __init__(
        self,
        gateway: Gateway,
        adapter: Adapter,
        *,
        allowlist: Allowlist,
        rates: ChatRates,
        typing_every: float = TYPING_EVERY,
        retry_every: float = RETRY_EVERY,
    ) -> None:
        self.gateway = gateway
        self.adapter = adapter
        self.allowlist = allowlist
        self.rates = rates
        self.typing_every = typing_every
        self.retry_every = retry_every
        self.name = adapter.name
        self._chats: dict[str, asyncio.Lock] = {}
        self._questions: dict[str, _Question] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._ready = asyncio.Event()  # set once the adapter can send
        self._inflight: set[str] = set()  # update ids scheduled in this process
        self._attempts: dict[str, int] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._albums: dict[str, float] = {}  # album group -> when its latest part came

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Answer what a previous run accepted and did not deliver, then receive. The
        pending updates are queued first, so each comes before its chat's new ones."""
        await self._retry_pending()
        await self.adapter.start(self)
        self._ready.set()
        self._sweeper = asyncio.create_task(self._sweep())

    async def _retry_pending(self) -> None:
        for pending in await self.gateway.store.pending_updates(self.name):
            try:
                update = self.adapter.parse(json.loads(pending.body))
            except Exception as exc:  # a row no longer readable (edited, an older shape)
                log.warning(
                    "%s: dropped stored update %s that could not be read: %r",
                    self.name,
                    pending.key,
                    exc,
                )
                update = None
            if isinstance(update, Message):
                self._schedule(update)
            else:  # nothing to answer: never tried again, and the others still are
                await self.gateway.store.finish_update(self.name, pending.key)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self.retry_every)
            try:
                await self._retry_pending()
            except Exception as exc:  # the store is down: the next sweep tries again
                log.warning("%s: could not read the pending updates: %r", self.name, exc)

    async def stop(self, *, grace: float | None = None) -> None:
        """Stop receiving, give the updates being handled `grace` seconds (None: as long
        as they take), then cancel them. What is cut off stays pending in the store and
        is finished at the next start; its turn's writes are shielded like any other."""
        self._closing = True  # updates arriving now are refused: the platform resends them
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
        for q in self._questions.values():
            if not q.answer.done():
                q.answer.cancel()
        if self._tasks:
            _, running = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
        await self.adapter.stop()

    def routes(self) -> Sequence[BaseRoute]:
        return self.adapter.routes(self)

    async def idle(self) -> None:
        """Wait until every scheduled update and follow-up is done (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*set(self._tasks), return_exceptions=True)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("%s: handling an update failed: %r", self.name, task.exception())

    # -- inbound -----------------------------------------------------------------------------

    async def accept(self, raw: Mapping[str, Any]) -> None:
        if self._closing:
            raise Unavailable(f"the {self.name} bridge is shutting down", retry_after=1)
        try:
            update = self.adapter.parse(raw)
        except Exception as exc:  # not an update we can read: answering again will not help
            log.warning("%s: dropped an update that could not be read: %r", self.name, exc)
            return
        if update is None:
            return
        if not self.allowlist.allows(update.key):
            log.info("%s: dropped an update from a user and chat not allowed", self.name)
            return
        if isinstance(update, ButtonPress):
            self._spawn(self._press(update))
            return
        if update.followup and not await self._talking(update.key):
            return  # a thread's message to others, not to the bot
        album = self._album_part(update)
        allowed, tell = (True, False) if album else self.rates.take(update.key.chat)
        if not allowed:
            if tell:
                wait = max(1, round(self.rates.wait(update.key.chat)))
                note = f"Too many messages: this one was not read. Try again in {wait} s."
                self._spawn(self._say(update, note))
            return
        body = json.dumps(dict(raw), separators=(",", ":"))
        if await self.gateway.store.accept_update(
            self.name, update.id, chat=update.key.stored, body=body
        ):
            self._schedule(update)

    def _album_part(self, message: Message) -> bool:
        """Note when an album's part came; whether one came before (an album counts once
        against the chat's rate limit, as the one message it is to the user)."""
        if not message.group:
            return False
        seen = message.group in self._albums
        self._albums[message.group] = time.monotonic()
        while len(self._albums) > ALBUMS_REMEMBERED:
            self._albums.pop(next(iter(self._albums)))
        return seen

    async def _with_album(self, message: Message) -> tuple[Message, list[str]]:
        """`message` with the other parts of its album still pending in the store (once
        no part has come for `ALBUM_SETTLE` seconds): their texts and attachments in
        order, as one message; and the ids of those parts, finished with it."""
        while True:  # a part may come while this waits: then wait on from that one
            wait = self._albums.get(message.group, 0.0) + ALBUM_SETTLE - time.monotonic()
            if wait <= 0:
                break
            await asyncio.sleep(wait)
        parts: list[Message] = []
        for pending in await self.gateway.store.pending_updates(self.name):
            if pending.chat != message.key.stored or pending.key == message.id:
                continue
            try:
                part = self.adapter.parse(json.loads(pending.body))
            except Exception:  # unreadable: `_retry_pending` drops it
                continue
            if isinstance(part, Message) and part.group == message.group:
                parts.append(part)
        if not parts:
            return message, []
        every = sorted([message, *parts], key=lambda m: (len(m.id), m.id))
        text = "\n\n".join(m.text for m in every if m.text.strip())
        attachments = tuple(a for m in every for a in m.attachments)
        return replace(message, text=text, attachments=attachments), [p.id for p in parts]

    async def latest(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for stored, key in await self.gateway.store.latest_updates(self.name):  # newest first
            out.setdefault(stored.split("/", 1)[0], key)  # "chat/thread/user"
        return out

    def _schedule(self, message: Message) -> None:
        if message.id in self._inflight:
            return
        self._inflight.add(message.id)
        lock = self._chats.setdefault(message.key.stored, asyncio.Lock())

        async def in_order() -> None:
            try:
                async with lock:  # asyncio locks wake waiters in the order they came
                    await self._ready.wait()
                    await self._leased(message)
            finally:
                self._inflight.discard(message.id)

        self._spawn(in_order())

    async def _leased(self, message: Message) -> None:
        """Handle `message` under its lease; count a failure, give up after the last."""
        store, lease = self.gateway.store, f"platform:{self.name}:{message.id}"
        # Another replica holds it (or died holding it): wait, keeping the chat's later
        # updates behind this one, until it is answered there or its lease runs out.
        while not await store.take_lease(lease, self.gateway.replica, seconds=LEASE_SECONDS):
            if not await store.is_pending(self.name, message.id):
                return
            await asyncio.sleep(self.retry_every)
        if not await store.is_pending(self.name, message.id):  # answered meanwhile
            await store.drop_lease(lease, self.gateway.replica)
            return
        hold = asyncio.create_task(self._hold(lease))
        try:
            await self._handle(
                message, last_try=self._attempts.get(message.id, 0) + 1 >= MAX_ATTEMPTS
            )
            self._attempts.pop(message.id, None)
        except Exception:
            tries = self._attempts[message.id] = self._attempts.get(message.id, 0) + 1
            if tries >= MAX_ATTEMPTS:
                log.warning("%s: gave up update %s after %d tries", self.name, message.id, tries)
                self._attempts.pop(message.id, None)
                await store.finish_update(self.name, message.id)
            raise
        finally:
            hold.cancel()
            await asyncio.gather(hold, return_exceptions=True)
            await store.drop_lease(lease, self.gateway.replica)

    async def _hold(self, lease: str) -> None:
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            await self.gateway.store.take_lease(lease, self.gateway.replica, seconds=LEASE_SECONDS)

    async def _say(self, message: Message, text: str) -> None:
        await self._ready.wait()
        await self.adapter.send(
            Context(update=message.id), chat_of(message.key), text, markup=False
        )

    async def _talking(self, key: ChatKey) -> bool:
        """Whether the user of `key` talks with the bot in that chat (it has a session)."""
        return await self.gateway.store.chat_session(self.name, key.stored) is not None

    async def _session(self, key: ChatKey) -> str:
        sid = await self.gateway.store.chat_session(self.name, key.stored)
        if sid is None:
            sid = await self.gateway.create_session(
                key.gateway_user, {"platform": self.name, "formatting": self.adapter.formatting}
            )
            await self.gateway.store.bind_chat(self.name, key.stored, sid)
        return sid

    async def _handle(self, message: Message, *, last_try: bool = False) -> None:
        """Run the message's turn (or replay it), then deliver what it produced. Each
        message delivered is counted in the store, so a retry after a failure part-way
        through a long reply sends only what did not arrive. What of the attachments the
        model cannot take is said first; a message of nothing else gets no turn."""
        ctx, chat = Context(update=message.id), chat_of(message.key)
        others: list[str] = []  # the album's other parts, answered by this one's turn
        if message.group:
            message, others = await self._with_album(message)
        outbox: list[tuple[str, bool, bool]] = []  # (text, markup, quiet)
        attached = Prepared()
        if message.attachments:
            attached = await self._attached(message, ctx, last_try)
            if attached.reply:
                outbox.append((attached.reply, False, False))
        if message.text.strip() or attached.blocks:
            reply = await self._turn(message, ctx, chat, attached.blocks)
            if reply.new_session_id:  # /new, /reset, /clear: the chat moves with it
                await self.gateway.store.bind_chat(
                    self.name, message.key.stored, reply.new_session_id
                )
            if reply.notice:
                outbox.append((reply.notice, False, True))
            if reply.kind == "command":
                outbox.append((reply.text, False, False))
            else:
                parts = self.adapter.render(reply.text or "(no answer)")
                outbox += [(part, True, False) for part in parts]
        store = self.gateway.store
        done = await store.delivered(self.name, message.id)
        for i, (text, markup, quiet) in enumerate(outbox):
            if i >= done:
                await self.adapter.send(ctx, chat, text, markup=markup, quiet=quiet)
                await store.mark_delivered(self.name, message.id, i + 1)
        for other in others:  # before this one: a restart replays this one's turn, whole
            await store.finish_update(self.name, other)
        await store.finish_update(self.name, message.id)

    async def _attached(self, message: Message, ctx: Context, last_try: bool) -> Prepared:
        """The message's attachments as blocks for its session's model (downloaded here,
        so a restart downloads them again from the stored update). Only an image needs
        the model (whether it takes images): without one no session is made for a message
        whose files are all refused."""
        user = message.key.gateway_user
        if not any(a.kind == "image" for a in message.attachments):
            return await self._prepare(message, ctx, None, last_try)
        try:
            model = await self.gateway.model_info(user, await self._session(message.key))
        except (StoreError, Unavailable):
            raise  # the update stays pending
        except StokerError as exc:  # the session cannot run as configured: the turn says why
            log.info("%s: message %s: attachments not read: %s", self.name, message.id, exc)
            return Prepared()
        return await self._prepare(message, ctx, model, last_try)

    async def _prepare(
        self, message: Message, ctx: Context, model: ModelInfo | None, last_try: bool
    ) -> Prepared:
        return await prepare(
            self.adapter,
            ctx,
            message.attachments,
            model=model,
            text_limit=self.gateway.max_message_chars,
            last_try=last_try,
        )

    async def _turn(
        self,
        message: Message,
        ctx: Context,
        chat: ChatRef,
        blocks: Sequence[ImageBlock | TextBlock],
    ) -> Reply:
        sid = await self._session(message.key)
        status = _Status(adapter=self.adapter, ctx=ctx, chat=chat)

        def on_review(line: str) -> None:
            self._spawn(self.adapter.send(ctx, chat, line, markup=False, quiet=True))

        callbacks = Callbacks(  # on_tool is awaited
            on_tool=status.tool, on_review=on_review, approver=self._approver(message.key)
        )
        typing = asyncio.create_task(self._typing(ctx, chat))
        try:
            return await self.gateway.send(
                message.key.gateway_user,
                sid,
                message.text if message.text.strip() else WITHOUT_TEXT,
                blocks=blocks,
                idempotency_key=f"{self.name}:{message.id}",
                callbacks=callbacks,
            )
        except (StoreError, Unavailable):
            raise  # the update stays pending: the next start answers it
        except StokerError as exc:  # a bad command, a provider down: the user reads why
            log.info("%s: message %s got an error reply: %s", self.name, message.id, exc)
            return Reply(session_id=sid, kind="command", text=str(exc))
        finally:
            typing.cancel()
            await asyncio.gather(typing, return_exceptions=True)

    async def _typing(self, ctx: Context, chat: ChatRef) -> None:
        while True:
            try:
                await self.adapter.typing(ctx, chat)
            except Exception as exc:  # cosmetic: never fails the turn
                log.debug("%s: typing indicator failed: %r", self.name, exc)
            await asyncio.sleep(self.typing_every)

    # -- questions ---------------------------------------------------------------------------

    def _approver(self, key: ChatKey) -> Approver:
        """A risky tool call of this chat's turn, asked with two buttons: only the chat's
        user can answer, and no answer within the gateway's approval timeout denies."""
        pending = self.gateway.approvals

        async def approve(request: ApprovalRequest, context: ToolContext) -> ApprovalDecision:
            question = f"Allow {request.summary}?"
            choice = await self.ask(key, question, APPROVAL_CHOICES, wait=pending.timeout)
            now = pending.clock.now()
            if choice is None:
                return ApprovalDecision(
                    approved=False, by=BY_TIMEOUT, reason="nobody answered in time", at=now
                )
            by = f"user:{key.gateway_user}"
            return ApprovalDecision(approved=choice == APPROVAL_CHOICES[0], by=by, at=now)

        return approve

    async def ask(
        self,
        key: ChatKey,
        question: str,
        choices: Sequence[str],
        *,
        wait: float = 300.0,
    ) -> str | None:
        """Ask the user of `key` to pick one of `choices` with buttons; their pick, or
        None when they did not answer within `wait` seconds (tool-call approvals)."""
        token = secrets.token_urlsafe(9)
        loop = asyncio.get_running_loop()
        q = _Question(
            key=key, question=question, choices=tuple(choices), answer=loop.create_future()
        )
        self._questions[token] = q
        try:
            q.message = await self.adapter.ask(Context(), chat_of(key), question, q.choices, token)
            return await asyncio.wait_for(asyncio.shield(q.answer), wait)
        except TimeoutError:
            if q.message is not None:
                await self.adapter.edit(Context(), q.message, f"{question}\n(no answer in time)")
            return None
        finally:
            self._questions.pop(token, None)

    async def _press(self, press: ButtonPress) -> None:
        ctx = Context(update=press.id)
        q = self._questions.get(press.question)
        if q is None or q.answer.done():
            await self.adapter.pressed(ctx, press, "This question is no longer open.")
            return
        if press.key.user != q.key.user or not 0 <= press.choice < len(q.choices):
            await self.adapter.pressed(ctx, press, "This question is not yours to answer.")
            return
        choice = q.choices[press.choice]
        q.answer.set_result(choice)
        await self.adapter.pressed(ctx, press, choice)
        if q.message is not None:
            await self.adapter.edit(ctx, q.message, f"{q.question}\n→ {choice}")
