"""One platform on the gateway: updates in, turns on the session service, replies out.

Every platform goes through here, so what users get is the same everywhere: the
allowlist first (a stranger's update is dropped unseen: no reply, no session, nothing
stored), the chat's rate limit, then the update is stored (`accept_update`) before the
platform hears it arrived. A stored update is answered once: its turn runs with the
idempotency key "PLATFORM:ID", so a restart finishes a turn that was cut off instead of
running it again, and replays one that was answered but not delivered; a duplicate
delivery finds the stored row and is dropped.

Updates of one chat are handled in the order they came; chats run side by side. Whoever
handles an update holds its lease (`leases`), so replicas never handle one twice, and
the update of a process that died is picked up once its lease runs out.
An update whose handling failed (the platform refused the answer, the database blinked)
stays pending and is tried again every `retry_every` seconds, `MAX_ATTEMPTS` times in
this process, then given up with a warning. While a turn runs the chat shows typing, tool
calls appear as edits of one status message (`progress`), risky ones ask with buttons
(`questions`), and a background review's summary comes as a quiet follow-up, after the
reply it follows even when the review ends first (it runs beside the reply's delivery). A message's
attachments are downloaded when it is handled (again after a restart, from the stored
update) and become blocks after its text or one reply saying what was not passed
(`attachments`); an album's parts are answered together (`albums`).

A bridge is a companion of the gateway's app (`gateway.companion`): started and stopped
with it, its adapter's webhook routes served by it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.routing import BaseRoute

from stoker.agent.seams import Callbacks
from stoker.errors import StokerError, StoreError
from stoker.gateway.errors import Unavailable
from stoker.gateway.images import WITHOUT_TEXT
from stoker.gateway.service import Gateway
from stoker.gateway.views import Reply
from stoker.lifecycle import Background
from stoker.platforms import albums, leases
from stoker.platforms.access import Allowlist, ChatRates
from stoker.platforms.albums import Albums
from stoker.platforms.attachments import Prepared, prepare
from stoker.platforms.base import Adapter, ButtonPress, ChatKey, ChatRef, Context, Message
from stoker.platforms.progress import Status
from stoker.platforms.questions import Questions
from stoker.platforms.replies import outbox
from stoker.wire.blocks import ImageBlock, TextBlock

log = logging.getLogger(__name__)

TYPING_EVERY = 4.0  # seconds: platforms show "typing" for about five
RETRY_EVERY = 15.0  # seconds between looks for updates whose handling failed
MAX_ATTEMPTS = 5  # tries per update in one process before it is given up


def chat_of(key: ChatKey) -> ChatRef:
    return ChatRef(chat=key.chat, thread=key.thread)


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
        self._questions = Questions(adapter)
        self._tasks = Background(
            lambda exc: log.warning("%s: handling an update failed: %r", self.name, exc)
        )
        self._closing = False
        self._ready = asyncio.Event()  # set once the adapter can send
        self._inflight: set[str] = set()  # update ids scheduled in this process
        self._attempts: dict[str, int] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._albums = Albums()

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
        self._questions.cancel()
        await self._tasks.stop(grace)
        await self.adapter.stop()

    def routes(self) -> Sequence[BaseRoute]:
        return self.adapter.routes(self)

    async def idle(self) -> None:
        """Wait until every scheduled update and follow-up is done (tests, shutdown)."""
        await self._tasks.idle()

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
            self._tasks.spawn(self._questions.press(update))
            return
        if update.followup and not await self._talking(update.key):
            return  # a thread's message to others, not to the bot
        # an album counts once against the rate limit, as the one message it is to the user
        album = self._albums.came(update)
        allowed, tell = (True, False) if album else self.rates.take(update.key.chat)
        if not allowed:
            if tell:
                wait = max(1, round(self.rates.wait(update.key.chat)))
                note = f"Too many messages: this one was not read. Try again in {wait} s."
                self._tasks.spawn(self._say(update, note))
            return
        body = json.dumps(dict(raw), separators=(",", ":"))
        if await self.gateway.store.accept_update(
            self.name, update.id, chat=update.key.stored, body=body
        ):
            self._schedule(update)

    async def _with_album(self, message: Message) -> tuple[Message, list[str]]:
        """`message` with the other parts of its album still pending in the store, once
        the album settled; and the ids of those parts, finished with it."""
        await self._albums.settled(message.group)
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
        return albums.merge(message, parts), [p.id for p in parts]

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

        self._tasks.spawn(in_order())

    async def _leased(self, message: Message) -> None:
        """Handle `message` under its lease; count a failure, give up after the last."""
        store, replica = self.gateway.store, self.gateway.replica
        lease = f"platform:{self.name}:{message.id}"

        async def pending() -> bool:
            return await store.is_pending(self.name, message.id)

        if not await leases.take(store, lease, replica, wanted=pending, every=self.retry_every):
            return
        async with leases.held(store, lease, replica):
            tries = self._attempts.get(message.id, 0) + 1
            try:
                await self._handle(message, last_try=tries >= MAX_ATTEMPTS)
                self._attempts.pop(message.id, None)
            except Exception:
                self._attempts[message.id] = tries
                if tries >= MAX_ATTEMPTS:
                    log.warning(
                        "%s: gave up update %s after %d tries", self.name, message.id, tries
                    )
                    self._attempts.pop(message.id, None)
                    await store.finish_update(self.name, message.id)
                raise

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
        attached = await self._attached(message, ctx, last_try) if message.attachments else None
        blocks = attached.blocks if attached else ()
        reply = None
        store = self.gateway.store
        replied = asyncio.Event()  # a review's line waits for it: it follows the reply
        try:
            if message.text.strip() or blocks:
                reply = await self._turn(message, ctx, chat, blocks, replied)
                if reply.new_session_id:  # /new, /reset, /clear: the chat moves with it
                    await self.gateway.store.bind_chat(
                        self.name, message.key.stored, reply.new_session_id
                    )
            done = await store.delivered(self.name, message.id)
            sending = outbox(attached.reply if attached else "", reply, self.adapter.render)
            for i, out in enumerate(sending):
                if i >= done:
                    await self.adapter.send(ctx, chat, out.text, markup=out.markup, quiet=out.quiet)
                    await store.mark_delivered(self.name, message.id, i + 1)
        finally:
            replied.set()
        for other in others:  # before this one: a restart replays this one's turn, whole
            await store.finish_update(self.name, other)
        await store.finish_update(self.name, message.id)

    async def _attached(self, message: Message, ctx: Context, last_try: bool) -> Prepared:
        """The message's attachments as blocks for its session's model (downloaded here,
        so a restart downloads them again from the stored update). Only an image needs
        the model (whether it takes images): without one no session is made for a message
        whose files are all refused."""
        model = None
        if any(a.kind == "image" for a in message.attachments):
            user = message.key.gateway_user
            try:
                model = await self.gateway.model_info(user, await self._session(message.key))
            except (StoreError, Unavailable):
                raise  # the update stays pending
            except StokerError as exc:
                # the session cannot run as configured: its turn tells the user why
                log.info("%s: message %s: attachments not read: %s", self.name, message.id, exc)
                return Prepared()
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
        replied: asyncio.Event,
    ) -> Reply:
        sid = await self._session(message.key)
        status = Status(adapter=self.adapter, ctx=ctx, chat=chat)

        async def review_line(line: str) -> None:
            await replied.wait()  # the review can end before the reply is delivered
            await self.adapter.send(ctx, chat, line, markup=False, quiet=True)

        def on_review(line: str) -> None:
            self._tasks.spawn(review_line(line))

        callbacks = Callbacks(  # on_tool is awaited
            on_tool=status.tool,
            on_review=on_review,
            approver=self._questions.approver(message.key, self.gateway.approvals),
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
        return await self._questions.ask(key, question, choices, wait=wait)
