"""A live conversation's turns: `stream`, `send`, `send_sync`, and keep-warm between them.

A `Session` owns what the agent has said; the agent only says what it is. A session is
built from a `SessionStart` (see `starts.py`: new, fork, branch, resume), and it is the
only thing that changes itself: its state and the changes made between turns are
`SessionBase`'s (session_base.py), its keep-warm and cache release while idle
`IdleSession`'s (session_idle.py); its collaborators take values and return values (the
measured model call in `calls.py`, keep-warm plans in `warmth.py`, compaction runs in
`compaction.py`, tool runs in `tool_runs.py`, the turn loop in `loop.py`, the event stream
in `stream.py`). The prefix changes only through `rebase`, a declared break.

A turn is a stream of events (`stream`); `send` is that turn drained, `send_sync` runs it
from code with no event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, TypeVar, overload

from stoker.agent import calls, explicit, tool_runs, warmth
from stoker.agent.delegate import Delegator
from stoker.agent.fallback import restored
from stoker.agent.loop import TurnResult, TurnSteps, run_turn
from stoker.agent.output import OutputSpec, validated
from stoker.agent.review import ReviewOutcome
from stoker.agent.seams import Callbacks
from stoker.agent.session_idle import IdleSession
from stoker.agent.stream import TurnStream, hooks_for
from stoker.agent.telemetry import TurnFacts
from stoker.cache.record import notify
from stoker.cache.robust import settled
from stoker.errors import ConfigError
from stoker.providers.base import CallContext, Completion
from stoker.tools import (
    ApprovalDecision,
    ApprovalRequest,
)
from stoker.wire.blocks import TextBlock, ToolResultBlock, ToolUseBlock
from stoker.wire.events import (
    CacheRecorded,
    ConfigChanged,
)
from stoker.wire.messages import AssistantMessage, UserMessage, tool_results, user_text
from stoker.wire.record import CacheRecord

T = TypeVar("T")

DELEGATED = "(handed to a sub-agent; its answer goes to the conversation that asked)"
CUT_OFF = "the previous message got no answer: its turn was cut off"
CANCELLED = (
    "interrupted: the turn was cancelled before this tool call returned; it was not run "
    "again. Call it again if its result is still needed."
)
log = logging.getLogger(__name__)


class Session(IdleSession):
    """One conversation. Create with `agent.session()` or `await agent.open(store, id)`.

    Public surface (everything else is private):
      id, role, parent_id, agent, prefix, history, records
      stream(text), send(text), send_sync(text), drain()
      fork(), branch(), rebase(reason=...), adopt(agent)
      compact()   (a summary replaces the older history; turns also compact when due)
      warm_plan(), warm()   (keep-warm across idle gaps, see `stoker.agent.keepwarm`)
      release_caches()   (delete an explicit cache it made, Gemini's; closing the agent does)
    """

    __slots__ = ()

    # The overloads of `stream`, `send` and `send_sync` type the result's `output` as the
    # type asked for: `output=Invoice` gives `TurnResult[Invoice]` (its `output` is an
    # Invoice, or None when the turn ran out of iterations). With no `output` the answer
    # is of the agent's own type, which a session does not know statically (`Any`); type
    # expressions that are not classes (`A | B`) are `Any` too.
    @overload
    def stream(
        self,
        text: str | UserMessage,
        *,
        output: type[T] | OutputSpec[T],
        note: str | None = None,
        callbacks: Callbacks | None = None,
        retry: bool = False,
    ) -> TurnStream[T]: ...

    @overload
    def stream(
        self,
        text: str | UserMessage,
        *,
        output: object = None,
        note: str | None = None,
        callbacks: Callbacks | None = None,
        retry: bool = False,
    ) -> TurnStream[Any]: ...

    def stream(
        self,
        text: str | UserMessage,
        *,
        output: Any = None,
        note: str | None = None,
        callbacks: Callbacks | None = None,
        retry: bool = False,
    ) -> TurnStream[Any]:
        """One user turn as a stream of events (`stoker.agent.stream`): text and thinking
        as they arrive, tool calls and their results, approvals to answer, a cache record
        per provider call, and `TurnDone` with the result last.

        `output` asks for the answer as a type (a Pydantic model, a dataclass, a TypedDict;
        `str` for text); None means the agent's own (`Agent(output=...)`). Risky tool
        calls are asked of the consumer (`ApprovalRequested`) unless `callbacks` brings an
        approver. See `send` for `note` and `retry`."""
        hooks = callbacks or Callbacks()
        spec = self._output_spec(output)
        return TurnStream(
            lambda h: self._turn(text, note=note, hooks=h, retry=retry, spec=spec),
            hooks,
            ask_consumer=hooks.approver is None,
            structured=spec is not None,
            now=self._agent.clock.now,
        )

    @overload
    async def send(
        self,
        text: str | UserMessage,
        *,
        output: type[T] | OutputSpec[T],
        note: str | None = None,
        callbacks: Callbacks | None = None,
        retry: bool = False,
    ) -> TurnResult[T]: ...

    @overload
    async def send(
        self,
        text: str | UserMessage,
        *,
        output: object = None,
        note: str | None = None,
        callbacks: Callbacks | None = None,
        retry: bool = False,
    ) -> TurnResult[Any]: ...

    async def send(
        self,
        text: str | UserMessage,
        *,
        output: Any = None,
        note: str | None = None,
        callbacks: Callbacks | None = None,
        retry: bool = False,
    ) -> TurnResult[Any]:
        """Run one user turn: model, tools, model... until an answer or the budget ends
        (`stream` drained: the same turn and hooks, its events read by nobody). Risky calls
        go to `callbacks.approver`; with none they run as the dispatch policy allows.

        `note` is volatile context (time, recalled memory) sent after the text in this
        message and stored exactly as sent; it never touches the prefix.

        A turn cut off (the process died, the provider failed) leaves its user message
        unanswered. `retry=True` says this send may repeat that message: when the history
        ends with this very text unanswered, the turn is finished instead of the text sent
        twice. Any other send after a cut-off turn tells the model, in a note, that the
        message before got no answer, and the result's `notice` tells the caller.
        """
        # The stream's own hooks with no one reading the events, run in the caller's task
        # (its cancellation cancels the turn, and the gateway times its steps).
        drained = hooks_for(
            lambda _event: None,
            callbacks or Callbacks(),
            ask_consumer=False,
            structured=False,
            deltas=False,
            now=self._agent.clock.now,
        )
        spec = self._output_spec(output)
        return await self._turn(text, note=note, hooks=drained, retry=retry, spec=spec)

    async def _answer(self, text: str, callbacks: Callbacks) -> TurnResult[Any]:
        return await self.send(text, callbacks=callbacks)

    @overload
    def send_sync(
        self,
        text: str | UserMessage,
        *,
        output: type[T] | OutputSpec[T],
        note: str | None = None,
        callbacks: Callbacks | None = None,
        retry: bool = False,
    ) -> TurnResult[T]: ...

    @overload
    def send_sync(
        self,
        text: str | UserMessage,
        *,
        output: object = None,
        note: str | None = None,
        callbacks: Callbacks | None = None,
        retry: bool = False,
    ) -> TurnResult[Any]: ...

    def send_sync(
        self,
        text: str | UserMessage,
        *,
        output: Any = None,
        note: str | None = None,
        callbacks: Callbacks | None = None,
        retry: bool = False,
    ) -> TurnResult[Any]:
        """`send` for code with no running event loop (scripts, notebooks, tests); inside
        one, `await session.send(...)`. It runs on the agent's own loop thread, so its
        provider connections outlive the call; it keeps no keep-warm timer."""
        portal = getattr(self._agent, "portal", None)
        if portal is None:
            raise ConfigError("this session's agent has no portal for synchronous calls")
        return portal.call(  # type: ignore[no-any-return]
            self.send(text, output=output, note=note, callbacks=callbacks, retry=retry),
            what="session.send_sync",
        )

    def _output_spec(self, output: Any) -> OutputSpec[Any] | None:
        return OutputSpec.of(self._agent.output if output is None else output)

    @asynccontextmanager
    async def _turning(self) -> AsyncIterator[None]:
        """Holds the session for one turn; a cancelled turn is settled before it lets go."""
        async with self._lock:
            self._gap_plan = self._own_plan()  # what the time policy meant for this gap
            self._leave_detour()
            self._state.turn_starts(self._agent.clock.now())
            try:
                yield
            except asyncio.CancelledError:
                await asyncio.shield(self._settle_cancelled())
                raise
            finally:
                self._state.turn_ended()

    async def _turn(
        self,
        text: str | UserMessage,
        *,
        note: str | None,
        hooks: Callbacks,
        retry: bool,
        spec: OutputSpec[Any] | None,
    ) -> TurnResult[Any]:
        async with self._turning():
            words = text if isinstance(text, str) else text.prompt
            unanswered = self._cut_off()
            message: UserMessage | None = None
            notice = ""
            if spec is not None and not self._native(spec):  # the schema goes with the message
                note = "\n\n".join(n for n in (note, spec.instruction()) if n)
            if not (retry and unanswered is not None and unanswered == words):
                if unanswered is not None:
                    notice = CUT_OFF
                    note = "\n\n".join(n for n in (note, f"({CUT_OFF}.)") if n)
                message = await self._user_message(text, note, hooks)
            steps = TurnSteps(
                append=self._append,
                call_model=lambda: self._call_model(hooks),
                run_tools=lambda calls: self._run_tools(calls, hooks),
                status=lambda line: hooks.on_status(line) if hooks.on_status else None,
                max_iterations=self._max_iterations or self._agent.max_iterations,
            )
            with self._agent.telemetry.turn(self._turn_facts()) as span:
                result = await run_turn(steps, message)
                if spec is not None and result.exit == "answered":
                    result = await validated(
                        result,
                        spec,
                        lambda words: run_turn(steps, user_text(words)),
                        retries=self._agent.output_retries,
                    )
                if notice:
                    result = replace(result, notice=notice)
                span.ended(result)
                review = self._agent.review
                if review is not None and self._role == "main":  # under this turn's span
                    self._reviews.after_turn(
                        self,
                        result,
                        review,
                        on_summary=hooks.on_review,
                        on_error=hooks.on_review_error,
                    )
            return result

    def _native(self, spec: OutputSpec[Any]) -> bool:
        """Whether the prefix already asks every request for this output natively."""
        native = self._prefix.params.output
        return native is not None and native == spec.native(self._info().provider).to_param()

    async def _settle_cancelled(self) -> None:
        """A cancelled turn leaves the history as a cut-off one would: tool calls made but
        not answered get an "interrupted" result, so the next call is a valid request."""
        last = self._history[-1] if self._history else None
        if isinstance(last, AssistantMessage) and last.tool_calls:
            await self._append(
                tool_results(
                    [
                        ToolResultBlock(tool_use_id=c.id, content=CANCELLED, is_error=True)
                        for c in last.tool_calls
                    ]
                )
            )
        await self._flush()

    def _leave_detour(self) -> None:
        """Back to the primary at a new turn once the cool-down passed: it sends the prefix
        it sent before the fallback, so it reads its own cache if that is still warm."""
        detour = self._detour
        self._detour = restored(detour, self._agent.clock.now(), self._agent.fallback_cooldown)
        if detour is not None and self._detour is None and self._declared_break is None:
            self._declared_break = f"fallback over: back on {self._prefix.params.model}"

    def _cut_off(self) -> str | None:
        """The words of the last user message when the model never answered its turn."""
        if not self._history or not isinstance(self._history[-1], UserMessage):
            return None
        for message in reversed(self._history):
            if isinstance(message, UserMessage) and message.text:
                return message.prompt
        return ""

    async def drain(self) -> list[ReviewOutcome]:
        """Wait for the background reviews started since the last drain; oldest first."""
        return await self._reviews.drain()

    async def _user_message(
        self, text: str | UserMessage, note: str | None, hooks: Callbacks
    ) -> UserMessage:
        """The message as sent: answers to calls left waiting, the text, the caller's
        note, then any toolkit change."""
        answers: tuple[ToolResultBlock, ...] = ()
        if self._unanswered:
            calls, self._unanswered = self._unanswered, ()
            if self._rerun:  # a resumed session asked to run interrupted calls again
                await self._append(tool_results(await self._run_tools(calls, hooks)))
            else:  # a fork made while its parent waits on these calls (a sub-agent)
                answers = tuple(ToolResultBlock(tool_use_id=c.id, content=DELEGATED) for c in calls)
        toolkit_note = ""
        if self._toolkits is not None:
            toolkit_note = await self._toolkits.turn_note(self._id)
            if toolkit_note:
                view = self._toolkits.announced.fingerprint
                self._pending.append(
                    ConfigChanged(session_id=self._id, changes={"toolkit_view": view})
                )
        if isinstance(text, UserMessage):
            extra = [TextBlock(text=n) for n in (note, toolkit_note) if n]
            content = (*answers, *text.content, *extra)
            return UserMessage(content=content) if content != text.content else text
        combined = "\n\n".join(n for n in (note, toolkit_note) if n) or None
        message = user_text(text, note=combined)
        return UserMessage(content=(*answers, *message.content)) if answers else message

    async def _call_model(self, hooks: Callbacks) -> tuple[Completion, CacheRecord]:
        """One provider call on the current history, recorded and explained."""
        await self._compact_if_due(hooks)
        route = self._agent.routes[self._detour.index] if self._detour is not None else None
        site = self._site()
        made = await explicit.head(site, self._agent, self._state, self._records, self._call_facts)
        if made is not None:  # Gemini: the tools and system, cached before the first call
            self._records.append(made)
            await self._emit(CacheRecorded(session_id=self._id, record=made))
        context = CallContext(
            session_id=self._id, on_text=hooks.on_text, on_thinking=hooks.on_thinking
        )
        request, stripped = calls.next_request(
            site, self._agent, self._state, stream=context.streams, route=route
        )
        self._declared_break = calls.with_stripped(self._declared_break, stripped)
        with self._agent.telemetry.call(self._call_facts("turn", request)) as span:
            got = await calls.answered(
                site,
                self._agent,
                self._state,
                request,
                route=route,
                detour=self._detour,
                declared_break=self._declared_break,
                context=context,
            )
            self._detour, self._declared_break = got.detour, got.declared_break
            self._mixed = self._mixed or got.mixed
            record = calls.measured(
                site,
                self._agent,
                self._state,
                got,
                seq=len(self._records),
                declared_break=self._declared_break,
            )
            record = warmth.after_gap(record, explicit.for_gap(self._gap_plan, record.started_at))
            span.recorded(record)
        self._gap_plan = self._declared_break = self._anchor = None
        self._state.after_call(got.request, record)
        self._records.append(record)
        margin = self._agent.cache_policy.keep_warm.margin  # the gap it ended, settled
        self._state.account = settled(self._state.account, self._records, site.info, margin=margin)
        notify(record)
        if hooks.on_record is not None:
            hooks.on_record(record)
        # Written with the answer it came with, in that one transaction (the answer is
        # appended next): a turn is one write at each durability point, not one per event.
        self._pending.append(CacheRecorded(session_id=self._id, record=record))
        return got.completion, record

    def _turn_facts(self) -> TurnFacts:
        return TurnFacts(
            agent=self._agent.name,
            session_id=self._id,
            parent_id=self._parent_id,
            role=self._role,
            provider=self._agent.provider.name,
            model=self._prefix.params.model,
        )

    async def _run_tools(
        self, calls: Sequence[ToolUseBlock], hooks: Callbacks
    ) -> list[ToolResultBlock]:
        async def record(request: ApprovalRequest, decision: ApprovalDecision) -> None:
            await self._emit(tool_runs.decided(self._id, request, decision))

        return await tool_runs.run(
            calls,
            tools=self._tools,
            policy=self._policy,
            hooks=hooks,
            record=record,
            now=self._agent.clock.now,
            context_of=lambda call_id: tool_runs.context(
                session_id=self._id,
                tool_use_id=call_id,
                role=self._role,
                parent_id=self._parent_id,
                platform=self._agent.platform,
            ),
            delegator=self._delegator(hooks),
        )

    def _delegator(self, hooks: Callbacks) -> Delegator:
        async def subagent(
            task: str, max_iterations: int, first_response: Callable[[], object] | None
        ) -> TurnResult[Any]:
            child = self.fork(role="subagent", max_iterations=max_iterations)
            on_record = (lambda _record: first_response()) if first_response else None
            # The child works for the same person: it asks them what this turn would.
            callbacks = Callbacks(on_record=on_record, approver=hooks.approver)
            return await child._answer(task, callbacks)  # noqa: SLF001 (a Session's own kind)

        return Delegator(
            history_length=lambda: len(self._history),
            fanout=self._fanout,
            subagent=subagent,
            toolkit_brief=self._toolkits.brief if self._toolkits else None,
        )
