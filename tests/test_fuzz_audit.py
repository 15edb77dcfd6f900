"""The fuzzer's usage ledger: verdicts recomputed from the requests and the reported usage
alone, with no look at the simulator's entries (`stoker.bench.fuzz_audit`)."""

from __future__ import annotations

import dataclasses

from stoker.agent.agent import Agent
from stoker.agent.session import Session
from stoker.bench.fuzz_audit import Auditor, disagreement
from stoker.bench.workload import SYSTEM, TOOLS, WorkloadModel
from stoker.clock import FrozenClock
from stoker.providers.sim.engine import SimEngine
from stoker.providers.sim.provider import SimProvider
from stoker.wire.dialects import dialect_module
from stoker.wire.request import Breakpoint, Request
from stoker.wire.usage import Usage


async def _audited_session(clock: FrozenClock) -> tuple[Auditor, Session]:
    """The workload agent behind an `Auditor`, one turn ("hello") already sent."""
    auditor = Auditor(SimProvider(engine=SimEngine(model=WorkloadModel()), clock=clock))
    agent = Agent("claude-sonnet-4-6", provider=auditor, tools=TOOLS, system=SYSTEM, clock=clock)
    session = agent.session()
    await session.send("hello")
    return auditor, session


async def test_the_ledger_judges_each_call_and_agrees_with_the_records() -> None:
    clock = FrozenClock()
    auditor, session = await _audited_session(clock)
    await session.send("again")
    clock.advance(400)
    await session.send("later")
    judged = auditor.ledger.judgements[session.id]
    assert [j.judged for j in judged] == ["read_all", "read_all", "expired"]
    records = session.records
    assert [disagreement(j, r) for j, r in zip(judged, records, strict=True)] == [None] * 3
    wrong = dataclasses.replace(
        records[2], explanation=dataclasses.replace(records[2].explanation, verdict="hit")
    )
    problem = disagreement(judged[2], wrong)
    assert problem is not None
    assert "usage alone says expired" in problem


async def test_the_ledger_flags_usage_that_does_not_add_up() -> None:
    clock = FrozenClock()
    auditor, session = await _audited_session(clock)
    request = Request(
        prefix=session.prefix,
        messages=session.history,
        breakpoints=(Breakpoint(message=None), Breakpoint(message=1, block=0)),
    )
    rendered = auditor.ledger.render(
        dialect_module("anthropic").render_request(request), auditor.sim.workspace
    )
    model = session.prefix.params.model
    short = auditor.ledger.judge(
        rendered, Usage(written_5m=10), at=clock.now(), model=model, session_id="x"
    )
    assert short.judged == "inconsistent"
    assert "is not the" in short.detail
    last = rendered.blocks[-1].cum
    nowhere = auditor.ledger.judge(
        rendered, Usage(read=last - 1, written_5m=1), at=clock.now(), model=model, session_id="x"
    )
    assert nowhere.judged == "inconsistent"
    assert "no live entry of that length" in nowhere.detail
