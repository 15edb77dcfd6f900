"""The gateway as a library: users' sessions, one cached agent each, turns and commands.

The HTTP app is a thin shell over this class. A message takes the session's lock (an
advisory lock on PostgreSQL, so replicas never run one session twice at once), checks
ownership and the cross-process count in one read, finds or rebuilds the cached agent,
runs the turn with that message's callbacks, and clears them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import secrets
import socket
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar, Unpack

from stoker.agent.keepwarm import SpendLimits
from stoker.agent.output import OutputSpec
from stoker.agent.seams import Callbacks
from stoker.cache.fleet import FleetWatch
from stoker.cache.keys import KeyShards
from stoker.cache.models import ModelInfo
from stoker.cache.time_policy import WarmPlan
from stoker.clock import Clock, SystemClock
from stoker.config import DEFAULT_LIMITS
from stoker.errors import SessionNotFound, StoreError, StoreUnavailable
from stoker.gateway.approvals import DEFAULT_TIMEOUT, PendingApprovals
from stoker.gateway.cache import AgentCache
from stoker.gateway.commands import Command
from stoker.gateway.commands import parse as parse_command
from stoker.gateway.commands import run as run_command
from stoker.gateway.errors import BadRequest, NotFound, PayloadTooLarge, Unavailable
from stoker.gateway.fleet_sync import FleetSync
from stoker.gateway.keepwarm import GatewayKeepWarm
from stoker.gateway.memory import UserMemory
from stoker.gateway.pool import KEEP, AgentPool, PoolOptions
from stoker.gateway.session_settings import SessionSettings
from stoker.gateway.sink import Head, read_head
from stoker.gateway.views import Reply, event_view
from stoker.lifecycle import Background
from stoker.providers.base import Provider
from stoker.session_views import SessionView, answered, show_session
from stoker.store._sql import Op
from stoker.store.base import SqlEventStore
from stoker.store.gateway_log import STARTED, response_op
from stoker.store.schema import LATEST
from stoker.tools import ApprovalDecision
from stoker.wire.blocks import ImageBlock, TextBlock
from stoker.wire.messages import UserMessage
from stoker.wire.stored import SessionSummary

log = logging.getLogger(__name__)
T = TypeVar("T")
_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")
AfterAnswer = Callable[[Reply], Sequence[Op]]


@dataclass(slots=True, kw_only=True)
class Kept:
    """What is written with a reply: the response to its idempotency key, and what the
    caller's `after` keeps of it; `written` once it is."""

    session_id: str
    key: str | None
    after: AfterAnswer | None
    written: bool = False

    def ops(self, reply: Reply) -> list[Op]:
        ops = [] if self.key is None else [response_op(self.session_id, self.key, reply.to_json())]
        return ops + list(self.after(reply)) if self.after is not None else ops


class Gateway:
    """Sessions per user over one store, with an agent pool in front of it."""

    def __init__(
        self,
        *,
        store: SqlEventStore,
        max_message_chars: int = DEFAULT_LIMITS.max_message_chars,
        clock: Clock | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        keep_warm: bool = True,
        keep_warm_limits: SpendLimits | None = None,
        replica: str | None = None,
        approval_timeout: float = DEFAULT_TIMEOUT,
        memory_dir: Path | None = None,
        **options: Unpack[PoolOptions],
    ) -> None:
        """`options`, the agents' settings (`PoolOptions`: defaults, api_key, registry,
        ...), go to the pool unread, so each is named and defaulted in one place."""
        self.store = store
        self.replica = replica or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.draining = False
        clock = clock or SystemClock()
        self.pool = AgentPool(
            store=store,
            clock=clock,
            monotonic=monotonic,
            on_evict=lambda session_id: self.keep_warm.forget(session_id),
            memory=UserMemory(memory_dir, clock=clock) if memory_dir is not None else None,
            key_shards=KeyShards(),
            fleet=FleetWatch(),
            **options,
        )
        # Spans of its agents' turns; the app adds trace context.
        self.telemetry = self.pool.telemetry
        # The fleet of each agent is the deployment's, not this replica's share of it.
        self.fleet_sync = FleetSync(
            store,
            shards=self.pool.key_shards,
            fleet=self.pool.fleet,
            holder=self.replica,
            clock=clock,
        )
        self.keep_warm = GatewayKeepWarm(self.pool, clock, keep_warm_limits, holder=self.replica)
        self._keep_warm_on = keep_warm
        self.max_message_chars = max_message_chars
        self.approvals = PendingApprovals(clock=clock, timeout=approval_timeout)
        self._tasks = Background(
            lambda exc: log.info("a streamed message ended with an error: %s", exc)
        )

    @property
    def agents(self) -> AgentCache:
        return self.pool.agents

    @property
    def stats(self) -> Counter[str]:
        return self.pool.stats

    @property
    def defaults(self) -> SessionSettings:
        return self.pool.defaults

    def reconfigure(
        self, *, defaults: SessionSettings | None = None, api_key: str | None = KEEP
    ) -> None:
        """New operator settings (a reloaded config); see `AgentPool.reconfigure`."""
        self.pool.reconfigure(defaults=defaults, api_key=api_key)

    # -- sessions ------------------------------------------------------------------------

    async def create_session(self, user: str, overrides: Mapping[str, Any] | None = None) -> str:
        """A new session for `user` (with the per-session `overrides`), stored at once."""
        return await self.pool.create(user, overrides)

    async def list_sessions(self, user: str, *, limit: int = 50) -> list[SessionSummary]:
        return await self.store.list_sessions(limit=limit, owner=user, role="main")

    async def authorize(self, user: str, session_id: str) -> None:
        """NotFound unless `user` owns the session (missing and foreign look the same)."""
        if not _ID.fullmatch(session_id):
            raise NotFound(session_id)
        entry = self.agents.peek(session_id)
        if entry is not None and entry.user == user:
            return
        try:
            owner = await self.store.owner(session_id)
        except SessionNotFound:
            raise NotFound(session_id) from None
        if owner != user:
            raise NotFound(session_id)

    async def view(self, user: str, session_id: str) -> SessionView:
        """History, tokens and cost per turn, from the store (every process's writes)."""
        await self.authorize(user, session_id)
        return await show_session(self.store, session_id)

    def planned_keep_warm(self, session_id: str) -> WarmPlan | None:
        """The keep-warm this process plans for a session it holds live (the cache clock
        prices it); None when keep-warm is off, the session lives elsewhere, or nothing
        is planned."""
        entry = self.pool.agents.peek(session_id)
        if not self._keep_warm_on or entry is None:
            return None
        return self.keep_warm.plan_of(entry.session)

    async def events(
        self, user: str, session_id: str, *, after: int = 0, limit: int = 500
    ) -> list[dict[str, Any]]:
        """The session's events after number `after`, from the store: any replica answers,
        whichever one runs the session's turn, and without waiting for its lock."""
        await self.authorize(user, session_id)
        try:
            rows = await self.store.events(session_id, after=after, limit=limit)
        except SessionNotFound:  # deleted since it was authorized
            raise NotFound(session_id) from None
        return [event_view(*row) for row in rows]

    async def delete(self, user: str, session_id: str) -> None:
        await self.authorize(user, session_id)
        async with self.store.session_lock(session_id):
            self.agents.evict(session_id, "deleted")
            await self.store.delete(session_id)

    # -- messages ------------------------------------------------------------------------

    async def send(
        self,
        user: str,
        session_id: str,
        text: str,
        *,
        blocks: Sequence[ImageBlock | TextBlock] = (),
        idempotency_key: str | None = None,
        callbacks: Callbacks | None = None,
        output: OutputSpec[Any] | None = None,
        after: AfterAnswer | None = None,
    ) -> Reply:
        """One message: a turn, or a command when it starts with "/" ("//" escapes).

        `after(reply)`: statements the caller keeps of the answer (an OpenAI client's
        history), written in the answer's own transaction, before it is returned.

        `output` asks for the answer as JSON of a schema (the client's): its text is then
        that JSON, validated (`stoker.agent.output`; the schema goes in the message, so the
        session's prefix never moves for it).

        A message may hold any Unicode text but NUL (U+0000): PostgreSQL cannot store it
        in text, and one store must not accept what the other refuses. Tabs, newlines and
        the other control characters are text like any other, stored and sent as is.

        `blocks` go after the text in the same user message (a chat platform's images
        and files; see `model_info` for whether the session's model takes images). The
        text stays the first block, so it is what the idempotent retry recognizes; a
        message without blocks is sent exactly as before they existed.
        """
        if len(text) > self.max_message_chars:
            raise PayloadTooLarge(
                f"the message has {len(text)} characters; the limit is {self.max_message_chars}"
            )
        if not text.strip():
            raise BadRequest("the message is empty")
        if (nul := text.find("\x00")) >= 0:
            raise BadRequest(
                f"the message holds a NUL character (U+0000) at index {nul}, "
                "which cannot be stored; remove it (other control characters are kept)"
            )
        if any(isinstance(b, TextBlock) and "\x00" in b.text for b in blocks):
            raise BadRequest(
                "an attached text holds a NUL character (U+0000), which cannot be stored"
            )
        command = parse_command(text)
        if command is not None and blocks:
            raise BadRequest(
                f"/{command.name} is a command: send the files in a message of their own"
            )
        if command is None and text.startswith("//"):
            text = text[1:]

        async def work(head: Head, started: bool, kept: Kept) -> Reply:
            if command is not None:
                return await run_command(self.pool, user, session_id, head, command)
            return await self._turn(
                user,
                session_id,
                head,
                text,
                callbacks,
                blocks=tuple(blocks),
                kept=kept,
                retry=started,
                output=output,
            )

        return await self.locked(
            user, session_id, work, idempotency_key=idempotency_key, after=after
        )

    async def model_info(self, user: str, session_id: str) -> ModelInfo:
        """The facts of the model `user`'s session is on: whether it takes images, for a
        platform to decide what to send before the turn. The session's agent is found
        (or rebuilt) under its lock, as for a turn, so the turn after finds it cached."""
        await self.authorize(user, session_id)
        async with self.store.session_lock(session_id):
            entry = await self.pool.acquire(user, session_id, await self._head(user, session_id))
            try:
                return entry.agent.provider.model_info(entry.session.prefix.params.model)
            finally:
                self.pool.agents.release(entry)

    async def command(
        self,
        user: str,
        session_id: str,
        name: str,
        argument: str = "",
        *,
        idempotency_key: str | None = None,
    ) -> Reply:
        """A command sent to its endpoint rather than as a message."""
        command = Command(name=name.lower(), argument=argument.strip())

        async def work(head: Head, started: bool, kept: Kept) -> Reply:
            return await run_command(self.pool, user, session_id, head, command)

        return await self.locked(user, session_id, work, idempotency_key=idempotency_key)

    async def locked(
        self,
        user: str,
        session_id: str,
        work: Callable[[Head, bool, Kept], Coroutine[Any, Any, Reply]],
        *,
        idempotency_key: str | None = None,
        after: AfterAnswer | None = None,
    ) -> Reply:
        """Run `work` under the session's lock, after the ownership and retry checks.

        A key already answered replays its response. A key whose turn started and was never
        answered (the process died, the provider failed) runs `work` as a retry
        (`started=True`), which finishes that turn instead of sending its text again.
        What is kept of the reply (`Kept`: the key's response, `after`'s statements) is
        written before it returns: by a turn with its answer, else here.
        """
        await self.authorize(user, session_id)
        async with self.store.session_lock(session_id):
            head = await self._head(user, session_id)
            started = False
            if idempotency_key is not None:
                saved = await self.store.idempotent_response(session_id, idempotency_key)
                if saved:
                    self.stats["replayed"] += 1
                    return Reply.from_json(saved, replayed=True)
                started = saved == STARTED
            kept = Kept(session_id=session_id, key=idempotency_key, after=after)
            reply = await work(head, started, kept)
            if not kept.written and (ops := kept.ops(reply)):
                await self.store.write_ops(ops)
            return reply

    async def _head(self, user: str, session_id: str) -> Head:
        """The session's head, read under its lock; NotFound unless `user` owns it (it
        may have been deleted or moved since it was authorized)."""
        try:
            head = await read_head(self.store, session_id)
        except SessionNotFound:
            raise NotFound(session_id) from None
        if head.owner != user:
            raise NotFound(session_id)
        return head

    async def _turn(
        self,
        user: str,
        session_id: str,
        head: Head,
        text: str,
        callbacks: Callbacks | None,
        *,
        blocks: tuple[ImageBlock | TextBlock, ...] = (),
        kept: Kept,
        retry: bool = False,
        output: OutputSpec[Any] | None = None,
    ) -> Reply:
        key = kept.key
        entry = await self.pool.acquire(user, session_id, head)
        session = entry.session
        note = entry.settings.ephemeral_prompt or None
        if callbacks is None or callbacks.approver is None:  # nobody sees a question
            callbacks = replace(callbacks or Callbacks(), approver=self.approvals.unattended)
        try:
            if retry and answered(session.history, text):  # done; only its response was lost
                view = await show_session(self.store, session_id)
                return Reply.of_turn(session_id, view.turns[-1].result())
            message = _with_blocks(entry.agent.provider, session.prefix.params.model, text, blocks)
            if key is not None and not retry:
                entry.sink.expect(key)
            self.keep_warm.turn_starting(user, session_id)
            # The answer is written with what is kept of the reply, in one transaction.
            entry.sink.hold()
            try:
                result = await session.send(
                    message, note=note, callbacks=callbacks, retry=retry, output=output or str
                )
            except BaseException:
                await entry.sink.commit_held()  # what the live session holds, stored
                raise
            reply = Reply.of_turn(session_id, result)
            extra: list[Op] = []
            try:
                extra = kept.ops(reply)
            finally:
                await entry.sink.commit_held(extra)
            kept.written = True
        except StoreError:
            # A write the database did not acknowledge may still be in the live session:
            # the next message rebuilds it from what the store holds.
            self.pool.agents.evict(session_id, "a store write failed")
            raise
        finally:
            self.pool.agents.release(entry)
        if any(r.fallback_of is not None for r in result.records):
            # A fallback answered: this session's agent is rebuilt at its next message,
            # which goes to the primary again with the prefix it sent before.
            self.pool.agents.evict(session_id, "fallback")
        elif self._keep_warm_on:
            self.keep_warm.turn_ended(user, session)
        return reply

    # -- approvals -------------------------------------------------------------------------

    async def answer_approval(
        self, user: str, session_id: str, approval_id: str, *, approve: bool, reason: str = ""
    ) -> ApprovalDecision:
        """Answer a risky call that a streamed turn of `user`'s session waits on. It takes
        no session lock: the waiting turn holds it."""
        await self.authorize(user, session_id)
        return self.approvals.answer(user, session_id, approval_id, approve=approve, reason=reason)

    # -- lifecycle -------------------------------------------------------------------------

    def check(self) -> None:
        """A `ConfigError` for settings that cannot work (an unknown model or toolset, a
        provider without its key), found by building the default agent, with no network
        call: `stoker serve` calls it before it takes its port, `start` again."""
        defaults = self.pool.defaults
        self.pool.agent_for(defaults).info  # noqa: B018 - raises ConfigError when unusable
        if self.pool.registry is not None:
            self.pool.agent_for(defaults).resolved_tools()

    async def start(self) -> None:
        """Fail at start, not at the first request, on settings that cannot work
        (`check`); and open the store here, so its migration runs once instead of racing
        the first burst of requests."""
        self.check()
        try:
            await self.store.list_sessions(limit=1)
            if self._keep_warm_on:
                await self.keep_warm.reschedule(limit=self.agents.max_size)
        except StoreUnavailable as exc:
            # Serve anyway: /readyz says not ready, requests get 503 until it is back,
            # and the migration runs on the first request that reaches it.
            log.warning("starting without the store: %s", exc)
        if self._keep_warm_on:
            self.keep_warm.start()
        self.fleet_sync.start()

    def spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run `coro` to the end even if whoever started it goes away (a closed stream)."""
        return self._tasks.spawn(coro)

    async def ready(self) -> None:
        """Unavailable unless this replica takes traffic: not draining, the store answers,
        and its schema is the one this code writes (another replica may be migrating)."""
        if self.draining:
            raise Unavailable("this gateway replica is shutting down", retry_after=1)
        version = await self.store.schema_version()
        if version != LATEST:
            raise Unavailable(f"the store's schema is at version {version}, not {LATEST}")

    async def close(self, *, grace: float | None = None) -> None:
        """Stop: no new keep-warm, messages still running get `grace` seconds (None: as
        long as they take) and are then cancelled (their writes are shielded, their locks
        released), this replica's leases are given back, providers are closed."""
        self.draining = True
        await self.keep_warm.stop()
        await self.fleet_sync.stop()
        if cancelled := await self._tasks.stop(grace):
            log.warning("cancelled %d message(s) still running after the grace", cancelled)
        try:
            await self.store.drop_leases(self.replica)
        except StoreError as exc:  # the database is gone: the leases expire on their own
            log.warning("could not give back this replica's leases: %s", exc)
        await self.pool.close()


def _with_blocks(
    provider: Provider, model: str, text: str, blocks: tuple[ImageBlock | TextBlock, ...]
) -> str | UserMessage:
    """The user message of a turn: the text alone as before, or the text then `blocks`.
    Images to a model that reads only text fail here, clearly, before any call."""
    if not blocks:
        return text
    if any(isinstance(b, ImageBlock) for b in blocks) and not provider.model_info(model).images:
        raise BadRequest(f"the model {model} reads text only: send the message without images")
    return UserMessage(content=(TextBlock(text=text), *blocks))
