"""The cache-invariant fuzzer: random sessions, and every provider call held to the best read.

A hypothesis state machine drives one agent through random sequences of operations: turns
(tool loops past the 20-position lookback, some cut by the iteration budget), forks,
reviews, parallel sub-agents, resumes in the same and a new process (a new agent, provider
and store object; the simulated cache outlives them), rebuilds that add or drop a tool
(`tools="reconcile"`, again and again), rebases that add a tool a fork then runs, model
and thinking changes (one model drops earlier thinking), toolkits connecting and leaving,
idle gaps of 1-180 minutes with the keep-warm scheduler running, sub-agents' anchors
followed by long loops and idle gaps, forks sent across a gap after a sibling's, and a
session's first call across a gap after its fork wrote the shared prefix.

Two accountants check every call (`stoker.bench.fuzz_audit`): the simulator's own, which
says what the call could read at best (every call must read exactly that), and a usage
ledger that sees only the requests and the usage the provider reported, and recomputes
each verdict from those alone: every record's verdict must agree with it. No call's
explanation may be an undeclared break (diverged, lookback, unexplained, cold, evicted,
concurrent), and a main session's turn finds its entry expired only when the time policy
chose to let it go, and its record says so (or, on its first call, when an entry written
before it expired: `first call`).

`make test` runs a bounded number of examples; `stoker bench fuzz --examples N` runs more.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from stoker.agent.agent import Agent
from stoker.agent.delegate import delegate_tool
from stoker.agent.integrations import Integrations
from stoker.agent.keepwarm import KeepWarm
from stoker.agent.review import ReviewConfig
from stoker.agent.session import Session
from stoker.bench.cache import SYSTEM, TOOLS, WorkloadModel
from stoker.bench.fuzz_audit import BROKEN, Auditor, UsageLedger, disagreement
from stoker.cache.fleet import FleetWatch
from stoker.cache.record import observe_records
from stoker.clock import FrozenClock
from stoker.config import DEFAULT_MODEL
from stoker.integrations import PluginToolkit, ToolkitCache, ToolkitRegistry
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.model import tool_call
from stoker.providers.sim.provider import SimProvider
from stoker.store.sqlite import SQLiteStore
from stoker.tools import Tool, tool
from stoker.wire.blocks import Block, ThinkingBlock
from stoker.wire.messages import UserMessage
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request

__all__ = ["Auditor", "CacheMachine", "ThinkingModel", "fuzz_settings"]

MODELS = (DEFAULT_MODEL, "claude-sonnet-4-5")  # the second strips earlier thinking
NOTES = "release_notes"  # the tool a rebase adds, for a fork to run


class ThinkingModel(WorkloadModel):
    """The workload model, thinking first whenever thinking is on (so a model that strips
    earlier thinking really has some to strip); "use release_notes" calls that tool once."""

    def respond(self, request: Request) -> tuple[Block, ...]:
        blocks = self._answer(request)
        if request.prefix.params.thinking_budget is None:
            return blocks
        signature = f"sig-{len(request.messages)}-{request.messages[-1].block_fingerprints}"
        return (ThinkingBlock(thinking="Planning the next step.", signature=signature), *blocks)

    def _answer(self, request: Request) -> tuple[Block, ...]:
        last = request.messages[-1]
        asked = isinstance(last, UserMessage) and f"use {NOTES}" in last.text
        if asked and NOTES in request.prefix.tool_names:
            return (tool_call(request, NOTES, {"path": "CHANGES"}),)
        return super().respond(request)


def _extra() -> Tool:
    @tool
    def changelog(path: str) -> str:
        """Show the changelog of a path.

        Args:
            path: The file or folder.
        """
        return f"changes of {path}"

    return changelog


def _notes() -> Tool:
    def body(path: str) -> str:
        return f"notes of {path}"

    body.__name__ = NOTES
    body.__doc__ = "Show the release notes of a path.\n\nArgs:\n    path: The file or folder."
    return tool(body)


class CacheMachine(RuleBasedStateMachine):
    """One agent's sessions under random operations; see the module docstring."""

    session: Session

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.home = Path(tempfile.mkdtemp(prefix="stoker-fuzz-"))
        self.clock = FrozenClock()
        self.engine = SimEngine(model=ThinkingModel())
        self.ledger = UsageLedger()
        self.auditors: list[Auditor] = []
        self.toolkits = ToolkitRegistry([PluginToolkit("tickets", [TOOLS[0]])])
        self.integrations = Integrations(
            registry=self.toolkits, cache=ToolkitCache(ttl=60.0, clock=self.clock)
        )
        self.extra_tool = False
        self.model = DEFAULT_MODEL
        self.thinking: int | None = None
        self.store = SQLiteStore(self.home / "fuzz.db")
        self.keep_warm = KeepWarm(self.clock)
        self.fleet = FleetWatch()  # each example is a process of its own
        self.records: list[CacheRecord] = []  # every call's, sub-agents' and keep-warm's too
        self.asked = 0
        self.notes_runnable = False  # the session object got `NOTES` by a rebase
        self.unwatched: set[int] = set()  # ids of records after a gap with no keep-warm

    # -- plumbing -----------------------------------------------------------------------------

    def _run(self, coro: Any) -> Any:
        with observe_records(self.records.append):
            return self.loop.run_until_complete(coro)

    def _agent(self) -> Agent:
        provider = SimProvider(engine=self.engine, clock=self.clock)
        auditor = Auditor(provider, self.ledger)
        self.auditors.append(auditor)
        tools = [*TOOLS, delegate_tool(), *([_extra()] if self.extra_tool else [])]
        return Agent(
            self.model,
            provider=auditor,
            tools=tools,
            system=SYSTEM,
            clock=self.clock,
            thinking_budget=self.thinking,
            max_iterations=25,
            integrations=self.integrations,
            review=ReviewConfig(memory_every=0),
            fleet=self.fleet,
        )

    def _restored(self) -> None:
        self.keep_warm.watch(self.session)
        self.notes_runnable = False

    def _send(self, session: Session, text: str) -> None:
        self._run(session.send(text))

    def _ask(self, text: str) -> str:
        """`text`, made unique: two forks asking the same on the same history would share
        their entries by accident, which is no part of what is checked."""
        self.asked += 1
        return f"{text} ({self.asked})"

    def _idle(self, minutes: int) -> None:
        self._run(self.keep_warm.idle(minutes * 60))

    def teardown(self) -> None:
        self._run(self.store.close())
        self.loop.close()
        shutil.rmtree(self.home, ignore_errors=True)

    # -- operations ------------------------------------------------------------------------

    @initialize(model=st.sampled_from(MODELS), thinking=st.booleans())
    def start(self, model: str, thinking: bool) -> None:
        """A session on either model, thinking or not (one model drops earlier thinking)."""
        self.model, self.thinking = model, 1024 if thinking else None
        self.session = self._run(self._agent().open(self.store, "fuzz"))
        self.keep_warm.watch(self.session)

    @rule(steps=st.integers(min_value=0, max_value=30))
    def turn(self, steps: int) -> None:
        self._send(self.session, f"Work on it: run {steps} steps" if steps else "Thanks.")

    @rule()
    def parallel_sub_agents(self) -> None:
        self._send(self.session, "Please delegate the checks")

    @rule(role=st.sampled_from(["fork", "review"]))
    def fork(self, role: str) -> None:
        child = self.session.fork(role=role)
        self._send(child, self._ask("Anything worth remembering?"))

    def _unwatched(self, minutes: int, then: Callable[[], object]) -> None:
        """`minutes` pass with no keep-warm running for the main session (a process that
        runs none), then `then()`: the main turns it makes may find their entries expired
        though the time policy did not choose it."""
        self.keep_warm.forget(self.session.id)
        self.clock.advance(minutes * 60)
        start = len(self.records)
        then()
        self.unwatched |= {id(r) for r in self.records[start:]}
        self.keep_warm.watch(self.session)

    @rule(
        steps=st.integers(min_value=8, max_value=20),
        minutes=st.integers(min_value=6, max_value=59),
        watched=st.booleans(),
    )
    def sub_agents_then_a_long_loop_and_a_gap(
        self, steps: int, minutes: int, watched: bool
    ) -> None:
        """Sub-agents anchor the history with 1-hour entries; the loop leaves them past the
        lookback and the gap (with or without keep-warm) expires everything shorter."""
        self._send(self.session, "Please delegate the checks")
        self._send(self.session, f"Work on it: run {steps} steps")
        if watched:
            self._idle(minutes)
            self._send(self.session, "Thanks.")
        else:
            self._unwatched(minutes, lambda: self._send(self.session, "Thanks."))

    @rule(minutes=st.integers(min_value=3, max_value=59), delegate=st.booleans())
    def new_turn_after_an_unwatched_gap(self, minutes: int, delegate: bool) -> None:
        """A turn (sub-agents' or a short loop), a gap with no keep-warm, a new turn: on a
        model that drops earlier thinking, part of what was cached can never be read."""
        self._send(self.session, "Please delegate the checks" if delegate else "Work: run 2 steps")
        self._unwatched(minutes, lambda: self._send(self.session, "Thanks."))

    @rule(minutes=st.integers(min_value=3, max_value=120), fresh=st.booleans())
    def siblings_across_a_gap(self, minutes: int, fresh: bool) -> None:
        """A fork, a gap, then its sibling; `fresh`: of a session that made no call."""
        parent = self._agent().session() if fresh else self.session
        self._send(parent.fork(role="fork"), self._ask("Anything worth remembering?"))
        self._idle(minutes)
        self._send(parent.fork(role="review"), self._ask("Anything to save?"))

    @rule(minutes=st.integers(min_value=3, max_value=120))
    def first_call_after_a_forks_entry_expired(self, minutes: int) -> None:
        """A new session forks before its own first call, the fork writes the shared
        prefix, a gap, then the session's first call: after 5 minutes an entry for its
        prefix existed and expired, and its record must say so (not `first`)."""
        fresh = self._agent().session()
        self._send(fresh.fork(role="fork"), self._ask("Anything worth remembering?"))
        self._idle(minutes)
        self._send(fresh, "Thanks.")

    @rule(role=st.sampled_from(["fork", "review"]))
    def fork_runs_a_tool_its_parent_got_by_rebase(self, role: str) -> None:
        """The fork runs it, in the process that rebased; a later process has no code for
        it (none of its agents has the tool) and answers with the stand-in."""
        if NOTES not in self.session.prefix.tool_names:
            known = {t.name: t for t in [*TOOLS, delegate_tool(), _extra()]}
            tools = [known[n] for n in self.session.prefix.tool_names if n in known]
            self._run(self.session.rebase(reason=f"a {NOTES} tool", tools=[*tools, _notes()]))
            self.notes_runnable = True
        child = self.session.fork(role=role)
        self._send(child, self._ask(f"Please use {NOTES}"))
        results = [b for m in child.history for b in getattr(m, "tool_results", ())]
        assert results, f"{role} ran no tool"
        if self.notes_runnable:
            assert results[-1].content == "notes of CHANGES", results[-1]
        else:
            assert results[-1].is_error, results[-1]
            assert "unavailable right now" in results[-1].content, results[-1]

    @rule(new_process=st.booleans())
    def resume(self, new_process: bool) -> None:
        if new_process:
            self._run(self.store.close())
            self.store = SQLiteStore(self.home / "fuzz.db")
        self.session = self._run(self._agent().open(self.store, "fuzz", create=False))
        self._restored()

    @rule()
    def rebuild_with_a_new_tool(self) -> None:
        """`tools="reconcile"`, adding the agent's own extra tool or dropping it again."""
        self.extra_tool = not self.extra_tool
        self.session = self._run(
            self._agent().open(self.store, "fuzz", create=False, tools="reconcile")
        )
        self._restored()
        assert ("changelog" in self.session.prefix.tool_names) == self.extra_tool

    @rule(model=st.sampled_from(MODELS))
    def rebase_model(self, model: str) -> None:
        self.model = model
        self._run(self.session.rebase(reason=f"/model {model}", model=model))
        self._adopt()

    @rule(on=st.booleans())
    def thinking_switch(self, on: bool) -> None:
        self.thinking = 1024 if on else None
        reason = f"thinking {'on' if on else 'off'}"
        self._run(self.session.rebase(reason=reason, thinking_budget=self.thinking))
        self._adopt()

    def _adopt(self) -> None:
        agent = self._agent()
        self._run(self.session.adopt(replace(agent, provider=self.session.agent.provider)))

    @rule(connect=st.booleans())
    def toolkit(self, connect: bool) -> None:
        if connect:
            self.toolkits.register(PluginToolkit("deploys", [TOOLS[1]]), replace=True)
        elif "deploys" in self.toolkits:
            self.toolkits.unregister("deploys")

    @rule(minutes=st.integers(min_value=1, max_value=180))
    def idle(self, minutes: int) -> None:
        self._idle(minutes)

    # -- what must always hold ------------------------------------------------------------------

    @invariant()
    def every_call_reads_the_best_it_could(self) -> None:
        violations = [v for a in self.auditors for v in a.violations]
        assert violations == [], violations

    @invariant()
    def every_record_holds_and_agrees_with_the_usage_alone(self) -> None:
        """No undeclared break, no expiry of a main turn the time policy did not choose, no
        break declared for nothing; and the usage ledger's judgement of each call agrees
        with its record's verdict (calls and records pair up in order, per session)."""
        records: dict[str, list[CacheRecord]] = {}
        for r in self.records:
            records.setdefault(r.session_id, []).append(r)
        for session_id, judged in self.ledger.judgements.items():
            mine = records.get(session_id, [])
            assert len(mine) == len(judged), (
                f"{session_id}: {len(judged)} calls, {len(mine)} records"
            )
            for judgement, r in zip(judged, mine, strict=True):
                verdict = r.explanation.verdict
                assert verdict not in BROKEN, f"{r.session_id} #{r.seq}: {r.explanation}"
                if r.role == "main" and r.purpose == "turn" and verdict == "expired":
                    kind = r.explanation.classification
                    chosen = (
                        kind == "time policy"
                        or (id(r) in self.unwatched and kind == "keep-warm not run")
                        or (judgement.first and kind == "first call")  # no policy in charge
                    )
                    assert chosen, f"{r.session_id} #{r.seq}: {r.explanation}"
                empty = r.declared_break and "added [], removed []" in r.declared_break
                assert not empty, f"{r.session_id} #{r.seq}: a break declared for nothing"
                problem = disagreement(judgement, r)
                assert problem is None, problem


def fuzz_settings(
    examples: int, steps: int = 25, *, shrink: bool = True, derandomize: bool = False
) -> settings:
    """`derandomize` runs the same examples every time (the bounded run in `make test`,
    so CI is reproducible); `stoker bench fuzz` explores new ones on every run."""
    phases = list(Phase) if shrink else [p for p in Phase if p is not Phase.shrink]
    fixed: dict[str, Any] = {"derandomize": True, "database": None} if derandomize else {}
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        print_blob=True,
        phases=phases,
        **fixed,
    )
