"""The cache-invariant fuzzer: random sessions, and every provider call held to the best read.

A hypothesis state machine drives one agent through random sequences of operations: turns
(tool loops past the 20-position lookback, some cut by the iteration budget), forks,
reviews, parallel sub-agents, resumes in the same and a new process (a new agent, provider
and store object; the simulated cache outlives them), rebuilds that add a tool, model and
thinking changes, toolkits connecting and leaving, and idle gaps of 1-180 minutes with the
keep-warm scheduler running.

Before each call an auditor asks the simulator's exact accountant what the call could read
at best: the longest prefix of it that a live entry covers, wherever that entry is, with
no lookback limit. The invariant: every call reads exactly that (a planner that leaves an
entry out of the lookback's reach, or a break that rewrites what was cached, fails it),
and no call's explanation is an undeclared break (diverged, lookback, unexplained, cold,
evicted, concurrent). A main session's turn finds its entry expired only when the time
policy chose to let it go, and its record says so.

`make test` runs a bounded number of examples; `stoker bench fuzz --examples N` runs more.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from stoker.agent.agent import Agent
from stoker.agent.delegate import delegate_tool
from stoker.agent.integrations import Integrations
from stoker.agent.keepwarm import KeepWarm
from stoker.agent.review import ReviewConfig
from stoker.agent.session import Session
from stoker.bench.cache import SYSTEM, TOOLS, WorkloadModel
from stoker.cache.accounting.anthropic import prefix_blocks
from stoker.cache.fleet import FleetWatch
from stoker.clock import FrozenClock
from stoker.config import DEFAULT_MODEL
from stoker.integrations import PluginToolkit, ToolkitCache, ToolkitRegistry
from stoker.providers.base import CallContext, Completion, ProviderWrapper
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.store.sqlite import SQLiteStore
from stoker.tools import Tool, tool
from stoker.wire.blocks import Block, ThinkingBlock
from stoker.wire.dialects import dialect_module
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request

MODELS = (DEFAULT_MODEL, "claude-sonnet-4-5")  # the second strips earlier thinking
BROKEN = frozenset({"diverged", "lookback", "unexplained", "cold", "evicted", "concurrent"})


class ThinkingModel(WorkloadModel):
    """The workload model, thinking first whenever thinking is on (so a model that strips
    earlier thinking really has some to strip)."""

    def respond(self, request: Request) -> tuple[Block, ...]:
        blocks = super().respond(request)
        if request.prefix.params.thinking_budget is None:
            return blocks
        signature = f"sig-{len(request.messages)}-{request.messages[-1].block_fingerprints}"
        return (ThinkingBlock(thinking="Planning the next step.", signature=signature), *blocks)


@dataclass(slots=True, kw_only=True)
class Violation:
    call: int
    session_id: str
    read: int
    best: int
    why: str


class Auditor(ProviderWrapper):
    """The simulator, checked call by call: what each call read against the best it could."""

    def __init__(self, inner: SimProvider) -> None:
        super().__init__(inner)
        self.sim = inner
        self.violations: list[Violation] = []
        self.calls = 0

    async def complete(self, request: Request, context: CallContext) -> Completion:
        payload = dialect_module("anthropic").render_request(request)
        at = self.sim.clock.now()
        entries = self.sim.engine.anthropic.entries(self.sim.workspace)
        best, cum = 0, 0
        for key, tokens in prefix_blocks(payload, workspace=self.sim.workspace):
            cum += tokens
            entry = entries.get(key)
            if entry is not None and entry.live(at):
                best = cum
        completion = await self.sim.complete(request, context)
        self.calls += 1
        if completion.usage.read != best:
            self.violations.append(
                Violation(
                    call=self.calls,
                    session_id=context.session_id,
                    read=completion.usage.read,
                    best=best,
                    why=f"{dict(completion.facts)}",
                )
            )
        return completion


def _extra() -> Tool:
    @tool
    def changelog(path: str) -> str:
        """Show the changelog of a path.

        Args:
            path: The file or folder.
        """
        return f"changes of {path}"

    return changelog


class CacheMachine(RuleBasedStateMachine):
    """One agent's sessions under random operations; see the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.home = Path(tempfile.mkdtemp(prefix="stoker-fuzz-"))
        self.clock = FrozenClock()
        self.engine = SimEngine(model=ThinkingModel())
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
        self.records: list[CacheRecord] = []
        self.session = self._run(self._agent().open(self.store, "fuzz"))
        self.keep_warm.watch(self.session)

    # -- plumbing -----------------------------------------------------------------------------

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def _agent(self) -> Agent:
        auditor = Auditor(SimProvider(engine=self.engine, clock=self.clock))
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

    def _send(self, session: Session, text: str) -> None:
        result = self._run(session.send(text))
        self.records += result.records

    def teardown(self) -> None:
        self._run(self.store.close())
        self.loop.close()
        shutil.rmtree(self.home, ignore_errors=True)

    # -- operations ------------------------------------------------------------------------

    @rule(steps=st.integers(min_value=0, max_value=30))
    def turn(self, steps: int) -> None:
        self._send(self.session, f"Work on it: run {steps} steps" if steps else "Thanks.")

    @rule()
    def parallel_sub_agents(self) -> None:
        self._send(self.session, "Please delegate the checks")

    @rule(role=st.sampled_from(["fork", "review"]))
    def fork(self, role: str) -> None:
        child = self.session.fork(role=role)
        self._send(child, "Anything worth remembering?")

    @rule(new_process=st.booleans())
    def resume(self, new_process: bool) -> None:
        if new_process:
            self._run(self.store.close())
            self.store = SQLiteStore(self.home / "fuzz.db")
        self.session = self._run(self._agent().open(self.store, "fuzz", create=False))
        self.keep_warm.watch(self.session)

    @rule()
    def rebuild_with_a_new_tool(self) -> None:
        self.extra_tool = not self.extra_tool
        self.session = self._run(
            self._agent().open(self.store, "fuzz", create=False, tools="reconcile")
        )
        self.keep_warm.watch(self.session)

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
        self.records += self._run(self.keep_warm.idle(minutes * 60))

    # -- what must always hold ------------------------------------------------------------------

    @invariant()
    def every_call_reads_the_best_it_could(self) -> None:
        violations = [v for a in self.auditors for v in a.violations]
        assert violations == [], violations

    @invariant()
    def no_undeclared_break_and_no_unchosen_expiry(self) -> None:
        for r in self.records:
            verdict = r.explanation.verdict
            assert verdict not in BROKEN, f"{r.session_id} #{r.seq}: {r.explanation}"
            if r.role == "main" and r.purpose == "turn" and verdict == "expired":
                chosen = r.explanation.classification == "time policy"
                assert chosen, f"{r.session_id} #{r.seq}: {r.explanation}"


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
