"""What the proxy does to a call, apart from how the bytes travel: one implementation for
`stoker proxy` (a server, `stoker.proxy.app`) and for the HTTP client that runs the same
work inside a user's own process (`stoker.proxy.in_process`).

A front end hands each request it sees to `prepare` (the call's facts and, in optimize
mode, the rewritten body), forwards the body as it was returned, and hands the finished
call to `finish`, which records it off the path of the bytes. Keep-warm pings go out
through the front end's own `post`, so a ping reaches the provider the way the client's
calls do. Neither half imports a server or an HTTP library: the front ends bring theirs.

The state here (lineages, key shards, the recorder) is touched by one event loop, plus,
for a synchronous client, the threads that call it: every change to it holds `lock`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from stoker.cache.keys import KeyShards
from stoker.cache.planner import CachePolicy
from stoker.cache.time_policy import WarmPlan
from stoker.clock import Clock, SystemClock
from stoker.errors import StokerError
from stoker.proxy.keepwarm import ProxyKeepWarm, warm_body
from stoker.proxy.lineage import LineageState
from stoker.proxy.markers import read
from stoker.proxy.optimize import encode, rewrite
from stoker.proxy.recorder import Call, ExchangeSink, Recorder, info_of
from stoker.proxy.routes import client_key, tenant_of
from stoker.wire.dialects import Dialect
from stoker.wire.exchange import Exchange

if TYPE_CHECKING:
    from stoker.proxy.recorder_process import RecorderProcess

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyConfig:
    """`upstream`: anthropic, openai or a URL (the server's; an in-process client sends
    each call where its SDK addressed it). `optimize`: rewrite requests (else audit).
    `policy`: the breakpoint TTLs and time policy, Stoker's sessions' defaults."""

    upstream: str = ""
    optimize: bool = False
    policy: CachePolicy = field(default_factory=CachePolicy)
    timeout: float = 600.0

    @property
    def mode(self) -> str:
        return "optimize" if self.optimize else "audit"


class ProxyCore:
    """The recorder, the lineages' rewrites and the keep-warm timer behind one front end.

    Subclasses bring `post`: how a keep-warm body reaches the provider.
    """

    def __init__(
        self,
        config: ProxyConfig,
        *,
        sink: ExchangeSink | None,
        clock: Clock | None = None,
        process: RecorderProcess | None = None,
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.process = process
        self.recorder = process.local if process is not None else Recorder(sink)
        self.shards = KeyShards()
        self.lock = threading.RLock()
        self.keep_warm = (
            ProxyKeepWarm(self.clock, config.policy, self._ping, self.lock)
            if config.optimize
            else None
        )
        self.last: Exchange | None = None  # the latest call recorded, as stored
        self._tasks: set[asyncio.Task[None]] = set()
        self._pending = 0
        self._idle = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    async def post(
        self, lineage: LineageState, body: bytes
    ) -> tuple[int, bytes]:  # pragma: no cover - each front end has its own
        """Send a keep-warm body to the lineage's provider; its status and response."""
        raise NotImplementedError

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Record on `loop` (a thread of its own) whichever thread a call finishes on."""
        self._loop = loop

    # -- a request ----------------------------------------------------------------------------

    def prepare(
        self, dialect: Dialect, path: str, headers: Iterable[tuple[str, str]], body: bytes
    ) -> tuple[Call, bytes]:
        """The call a recorded API request starts, and the body to forward: the client's,
        or in optimize mode its rewrite. `headers` are those that go upstream."""
        sent = list(headers)
        self._begin()
        call = Call(
            tenant=tenant_of(client_key(sent)),
            dialect=dialect,
            path=path,
            mode=self.config.mode,
            started_at=self.clock.now(),
        )
        if self.config.optimize:
            with self.lock:
                body = self._optimized(call, body, sent)
        call.body = body
        return call, body

    def _optimized(self, call: Call, body: bytes, outgoing: list[tuple[str, str]]) -> bytes:
        """The rewritten body; the client's own when it is not a request the proxy reads
        (the upstream then answers it as it would without the proxy)."""
        try:
            payload = json.loads(body)
            if not isinstance(payload, dict):
                raise ValueError("not an object")
            request = self.recorder.parse(call.dialect, payload)
        except (ValueError, RecursionError, StokerError) as exc:
            call.error = f"not rewritten: the body is not a {call.dialect} request ({exc!r:.200})"
            return body
        call.request = request
        admission = self.recorder.admit(call)
        assert admission is not None
        info = info_of(request.prefix.params.model, call.dialect)
        done = rewrite(
            call.dialect,
            payload,
            request,
            admission.lineage,
            info,
            policy=self.config.policy,
            shards=self.shards,
            at=call.started_at,
        )
        call.sent, call.request = done.payload, done.request
        call.rewrites, call.rolling = done.rewrites, done.rolling
        call.auth = outgoing  # what a keep-warm ping of this lineage sends upstream
        return encode(done.payload)

    # -- after a request ---------------------------------------------------------------------

    def _begin(self) -> None:
        with self._idle:
            self._pending += 1

    def finish(self, call: Call, began: float) -> None:
        """Record the call in a task of its own (the client has its bytes already), on
        the core's loop: this one, or from another thread the one it runs on."""
        call.duration = time.perf_counter() - began
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and (self._loop is None or self._loop is running):
            self._loop = running
            self._spawn(call)
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._spawn, call)
        else:  # no loop to record on (closed): the call is not recorded, and says so
            log.warning("a call finished after its Stoker client closed: not recorded")
            self._done()

    def _spawn(self, call: Call) -> None:
        task = asyncio.get_running_loop().create_task(self._record(call))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _record(self, call: Call) -> None:
        try:
            if self.process is not None:
                await self.process.record(call)
            else:
                with self.lock:
                    exchange = self.recorder.build(call)
                await self.recorder.deliver(exchange)
                self.last = exchange
            admission = call.admission
            if (
                self.keep_warm is not None
                and not self._closed
                and admission is not None
                and call.status == 200
                and call.purpose == "turn"
            ):
                with self.lock:
                    self.keep_warm.watch(admission.lineage)
        except Exception as exc:  # recording must never touch the client's traffic
            log.warning("could not record a proxied call: %r", exc)
        finally:
            self._done()

    def _done(self) -> None:
        with self._idle:
            self._pending -= 1
            self._idle.notify_all()

    def wait_recorded(self, timeout: float = 10.0) -> bool:
        """Block (another thread) until every call so far is recorded; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    async def recorded(self) -> None:
        """Wait (on the core's loop) until every call so far is recorded."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # -- keep-warm ------------------------------------------------------------------------------

    async def _ping(self, lineage: LineageState, plan: WarmPlan) -> None:
        with self.lock:
            body = warm_body(lineage, plan)
            if body is None:
                return
            self._begin()
            call = Call(
                tenant=lineage.tenant,
                dialect=lineage.dialect,
                path=lineage.path,
                mode="optimize",
                started_at=self.clock.now(),
                sent=body,
                body=encode(body),
                purpose=plan.action,
                request=replace(self.recorder.parse(lineage.dialect, body), breakpoints=read(body)),
                admission=self.recorder.index.admit_ping(lineage),
            )
        began = time.perf_counter()
        try:
            call.status, call.response = await self.post(lineage, call.body)
        except Exception as exc:  # the front end's own transport error
            call.status, call.error = 502, f"keep-warm ping failed: {named(exc)}"
        call.duration = time.perf_counter() - began
        await self._record(call)

    async def start(self) -> None:
        """Start the recorder process now, not at the first call (which it would delay)."""
        if self.process is not None:
            await self.process.start()

    async def close_core(self) -> None:
        """Stop keep-warm and let every call in flight be recorded (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await self.recorded()  # first: a call recorded now would start keep-warm again
        if self.keep_warm is not None:
            await self.keep_warm.aclose()
        if self.process is not None:
            await self.process.aclose()

    def run_on_loop(self, coroutine: Any, timeout: float = 60.0) -> Any:
        """Run `coroutine` on the loop serving the app, from another thread (a benchmark
        crossing an idle gap with the proxy's keep-warm); its result."""
        if self._loop is None:
            raise RuntimeError("the proxy has served no request yet")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)


def named(exc: BaseException) -> str:
    """What went wrong, for the client and the record: the error's kind, and its text when
    it has one (transport errors say which host and why; none carries a client header)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
