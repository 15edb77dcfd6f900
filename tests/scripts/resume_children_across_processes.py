"""Child process for the resume-by-role test.

`create` runs a main session through the served sim and makes one child of each role: a
fork, a background review and a sub-agent (through the real `delegate` tool); it prints,
in call order, which session made each provider call. `resume ID` resumes one stored
session in a fresh process and sends one more message, printing its first record."""

from __future__ import annotations

import asyncio
import json
import sys

from stoker.agent.agent import Agent
from stoker.agent.delegate import delegate_tool
from stoker.agent.review import ReviewConfig
from stoker.cache.models import ModelInfo
from stoker.providers.base import CallContext, Completion, Provider
from stoker.tools import DispatchPolicy
from stoker.wire.request import Request
from tests.scripts.child import SYSTEM, read_file, resume_and_report, served


class CallLog:
    """The provider, noting which session made each call (in call order)."""

    def __init__(self, inner: Provider) -> None:
        self.inner, self.callers = inner, []  # type: ignore[var-annotated]
        self.name = inner.name

    def model_info(self, model: str) -> ModelInfo:
        return self.inner.model_info(model)

    async def complete(self, request: Request, context: CallContext) -> Completion:
        self.callers.append(context.session_id)
        return await self.inner.complete(request, context)


async def main(action: str, location: str, schema: str, url: str, key: str, sid: str) -> None:
    async with served(location, schema, url, key) as (store, provider):
        log = CallLog(provider)
        agent = Agent(
            "claude-sonnet-4-6",
            provider=log,
            tools=[read_file, delegate_tool()],
            system=SYSTEM,
            review=ReviewConfig(memory_every=2),
        )
        if action == "create":
            session = await agent.open(store, sid)
            await session.send("please read_file 'a.md'")
            await session.send("thanks")  # the second turn starts a background review
            await session.drain()
            fork = session.fork(policy=DispatchPolicy(allowed=frozenset({"read_file"})))
            await fork.send("summarise what we read")
            await session.send("please delegate 'count the words of a.md'")
            print(json.dumps({"callers": log.callers}))
        else:
            await resume_and_report(agent, store, sid, "and one more thing")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
