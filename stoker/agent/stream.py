"""A turn as a stream of typed events: `async for event in session.stream(text)`.

The turn runs in a task of its own and hands each thing it does to the stream as it
happens: text and thinking as they arrive, a tool call starting and its result, a question
about a risky tool (answered from the consumer), a cache record per provider call, and
last `TurnDone` with the `TurnResult`. `Session.send` is this stream drained, so every
consumer (the library, the CLI, the gateway) reads one order of events.

Leaving the loop early (`break`, an exception, the consumer's task cancelled) cancels the
turn with the guarantees of a cut-off turn: the store holds what was said, a tool call
left without its result gets an "interrupted" one, and the next `send` works. Use
`async with session.stream(...) as events:` to have that happen at the end of the block;
a stream merely dropped cancels its turn when it is collected.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, TypeVar

from stoker.agent.loop import TurnResult
from stoker.agent.output import partial
from stoker.agent.seams import Callbacks
from stoker.errors import StokerError
from stoker.lifecycle import AsyncClosing
from stoker.tools import ApprovalDecision, ApprovalRequest, ToolContext, ToolProgress
from stoker.wire.record import CacheRecord

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    """Answer text as it arrives."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingDelta:
    """The model's thinking (or its reasoning summary) as it arrives."""

    text: str
    kind: Literal["thinking_delta"] = "thinking_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputDelta:
    """A structured output as far as it has arrived: the JSON parsed so far (partial
    strings, lists and objects included), before it is validated."""

    partial: Any
    kind: Literal["output_delta"] = "output_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted:
    """A tool call about to run: its wire name and its arguments exactly as sent."""

    call_id: str
    name: str
    arguments: str
    kind: Literal["tool_call_started"] = "tool_call_started"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallFinished:
    """A tool call's result, as the model will read it."""

    call_id: str
    name: str
    content: str
    is_error: bool
    kind: Literal["tool_call_finished"] = "tool_call_finished"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested:
    """A risky call waits for the consumer: call `approve()` or `deny(reason)` before
    asking for the next event (the turn waits until then)."""

    request: ApprovalRequest
    answer: asyncio.Future[ApprovalDecision] = field(repr=False, compare=False)
    kind: Literal["approval_requested"] = "approval_requested"

    def approve(self, *, by: str = "user") -> None:
        if not self.answer.done():
            self.answer.set_result(ApprovalDecision(approved=True, by=by))

    def deny(self, reason: str = "", *, by: str = "user") -> None:
        if not self.answer.done():
            self.answer.set_result(ApprovalDecision(approved=False, by=by, reason=reason))


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRecorded:
    """A provider call finished: its cache record (what it read, wrote, cost, and why)."""

    record: CacheRecord
    kind: Literal["call_recorded"] = "call_recorded"


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusChanged:
    """What the turn is doing now ("model call 2", "running read_file")."""

    text: str
    kind: Literal["status"] = "status"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnDone(Generic[T]):
    """The last event: the turn's result."""

    result: TurnResult[T]
    kind: Literal["turn_done"] = "turn_done"


TurnEvent = (
    TextDelta
    | ThinkingDelta
    | OutputDelta
    | ToolCallStarted
    | ToolCallFinished
    | ApprovalRequested
    | CallRecorded
    | StatusChanged
    | TurnDone[Any]
)


class UnansweredApproval(StokerError):
    """The consumer asked for the next event while a risky call still waits for its
    `approve()` or `deny()`."""


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


Emit = Callable[[TurnEvent], None]
Turn = Callable[[Callbacks], Awaitable[TurnResult[T]]]


def hooks_for(
    emit: Emit,
    given: Callbacks,
    *,
    ask_consumer: bool,
    structured: bool,
    deltas: bool,
    now: Callable[[], float],
) -> Callbacks:
    """The callbacks a streamed turn runs with: each hook emits its event, then calls the
    caller's own hook. Risky calls go to the caller's approver, or (`ask_consumer`) to
    the consumer of the stream as `ApprovalRequested` events (decisions stamped `now`).
    With `structured`, an answer's text also comes as `OutputDelta`s of its JSON so far.
    Without `deltas` (a drained stream) text and thinking are hooked only when the caller
    hooks them, so the provider is not asked to stream for nobody."""
    answer: list[str] = []  # the text of the current model call

    def text(piece: str) -> None:
        emit(TextDelta(text=piece))
        if structured:
            answer.append(piece)
            value = partial("".join(answer))
            if value is not None:
                emit(OutputDelta(partial=value))
        if given.on_text is not None:
            given.on_text(piece)

    def thinking(piece: str) -> None:
        emit(ThinkingDelta(text=piece))
        if given.on_thinking is not None:
            given.on_thinking(piece)

    def tool(progress: ToolProgress) -> object:
        if progress.phase == "start":
            emit(
                ToolCallStarted(
                    call_id=progress.tool_use_id, name=progress.name, arguments=progress.arguments
                )
            )
        else:
            emit(
                ToolCallFinished(
                    call_id=progress.tool_use_id,
                    name=progress.name,
                    content=progress.content,
                    is_error=progress.is_error,
                )
            )
        return given.on_tool(progress) if given.on_tool is not None else None

    def status(line: str) -> None:
        emit(StatusChanged(text=line))
        if given.on_status is not None:
            given.on_status(line)

    def record(r: CacheRecord) -> None:
        answer.clear()  # the next call's text is another answer
        emit(CallRecorded(record=r))
        if given.on_record is not None:
            given.on_record(r)

    async def consumer(request: ApprovalRequest, context: ToolContext) -> ApprovalDecision:
        answer: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        emit(ApprovalRequested(request=request, answer=answer))
        decision = await answer
        return replace(decision, at=now()) if not decision.at else decision

    approver = given.approver or (consumer if ask_consumer else None)
    return Callbacks(
        on_text=text if deltas or given.on_text is not None else None,
        on_thinking=thinking if deltas or given.on_thinking is not None else None,
        on_tool=tool,
        on_status=status,
        on_record=record,
        on_review=given.on_review,
        on_review_error=given.on_review_error,
        approver=approver,
    )


async def _drive(
    turn: Turn[T], hooks: Callbacks, queue: asyncio.Queue[TurnEvent | _Failed]
) -> None:
    """Run the turn, ending its events with `TurnDone` (or the error, for the consumer)."""
    try:
        result = await turn(hooks)
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # the consumer gets it at its next event
        queue.put_nowait(_Failed(exc))
    else:
        queue.put_nowait(TurnDone(result=result))


class TurnStream(AsyncClosing, Generic[T]):
    """The events of one turn, as an async iterator (and an async context manager that
    cancels the turn if the block ends before it did). The turn starts at the first
    `__anext__` or on entering the block."""

    def __init__(
        self,
        turn: Turn[T],
        callbacks: Callbacks,
        *,
        ask_consumer: bool,
        structured: bool,
        deltas: bool = True,
        now: Callable[[], float],
    ) -> None:
        self._turn = turn
        self._callbacks = callbacks
        self._ask_consumer = ask_consumer
        self._structured = structured
        self._deltas = deltas
        self._now = now
        self._queue: asyncio.Queue[TurnEvent | _Failed] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._finished = False
        self._waiting: ApprovalRequested | None = None

    def __aiter__(self) -> TurnStream[T]:
        return self

    async def __anext__(self) -> TurnEvent:
        if self._finished:
            raise StopAsyncIteration
        if self._waiting is not None and not self._waiting.answer.done():
            raise UnansweredApproval(
                f"{self._waiting.request.summary} is waiting for approval: call "
                "event.approve() or event.deny(reason) before asking for the next event"
            )
        self._start()
        try:
            item = await self._queue.get()
        except asyncio.CancelledError:
            await self.aclose()
            raise
        if isinstance(item, _Failed):
            self._finished = True
            raise item.error
        if isinstance(item, TurnDone):
            self._finished = True
        if isinstance(item, ApprovalRequested):
            self._waiting = item
        return item

    def _start(self) -> None:
        if self._task is None:
            hooks = hooks_for(
                self._queue.put_nowait,
                self._callbacks,
                ask_consumer=self._ask_consumer,
                structured=self._structured,
                deltas=self._deltas,
                now=self._now,
            )
            # The task holds the queue, not this stream: a stream its consumer dropped is
            # collected at once, and its `__del__` cancels the turn.
            self._task = asyncio.get_running_loop().create_task(
                _drive(self._turn, hooks, self._queue)
            )

    async def result(self) -> TurnResult[T]:
        """The turn's result, reading (and dropping) every event before it."""
        async for event in self:
            if isinstance(event, ApprovalRequested):
                raise UnansweredApproval(
                    f"{event.request.summary} needs approval: read the events, or give "
                    "the stream an approver (Callbacks(approver=...))"
                )
            if isinstance(event, TurnDone):
                return event.result
        raise AssertionError("a stream always ends with TurnDone")

    async def aclose(self) -> None:
        """Cancel the turn if it is still running, and wait until it has settled."""
        self._finished = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> TurnStream[T]:
        self._start()
        return self

    def __del__(self) -> None:
        task = self._task
        if task is not None and not task.done():
            task.cancel()
