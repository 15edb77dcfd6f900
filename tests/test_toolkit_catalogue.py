"""A toolkit's catalogue of gated actions: told with its tools, frozen with the view,
changed only by a note at a turn boundary, and a connection-gated action never runs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from mcp import types

from stoker.agent.integrations import Integrations
from stoker.agent.seams import Callbacks
from stoker.agent.session import Session
from stoker.clock import FrozenClock
from stoker.errors import ToolError
from stoker.integrations import (
    IntegrationContext,
    PluginToolkit,
    ToolkitCache,
    ToolkitRegistry,
    ToolkitView,
    ToolSpec,
    catalogue,
    describe_change,
)
from stoker.integrations.mcp import _destructive
from stoker.providers.sim.model import tool_call
from stoker.providers.sim.provider import SimProvider
from stoker.tools import (
    ApprovalDecision,
    ApprovalRequest,
    DispatchPolicy,
    ToolContext,
    tool,
)
from stoker.wire.blocks import Block, TextBlock
from stoker.wire.messages import UserMessage
from stoker.wire.request import Request
from tests.helpers import make_registry, sim_agent

SEARCH = ToolSpec(name="search", description="Search the mailbox.")
SEND = ToolSpec(
    name="send_email",
    description="Send an email.\nThe body is plain text; attachments are not supported.",
    input_schema={"type": "object", "properties": {"to": {"type": "string"}}},
    gate="approval",
)
POST = ToolSpec(name="post_slack", description="Post to a channel.", gate="connection")
CONNECTED = (
    "Toolkit 'mail' connected: 1 tool (search); behind the user's approval: send_email "
    "(Send an email.); waiting for the user to connect an account: post_slack (Post to a "
    "channel.)."
)


class Mail:
    """A toolkit whose listing the test edits, and which counts the calls it runs."""

    name = "mail"

    def __init__(self, *specs: ToolSpec) -> None:
        self.specs = specs
        self.calls: list[str] = []

    async def list_tools(self, context: IntegrationContext) -> tuple[ToolSpec, ...]:
        return self.specs

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any) -> str:
        self.calls.append(name)
        return f"{name} done"

    async def close(self) -> None:
        return None


class Caller:
    """Calls `use_toolkit` on the action a message names ("call mail.X"), then reports."""

    def respond(self, request: Request) -> tuple[Block, ...]:
        last = request.messages[-1]
        assert isinstance(last, UserMessage)
        if last.tool_results and not last.text:
            return (TextBlock(text="result: " + last.tool_results[0].content),)
        if last.prompt.startswith("call mail."):
            args = {"toolkit": "mail", "name": last.prompt.removeprefix("call mail.")}
            return (tool_call(request, "use_toolkit", args),)
        return (TextBlock(text="ok"),)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Mailing:
    """A session on the simulator whose one toolkit is `mail`, its listing cached for five
    minutes on `clock`."""

    clock: FrozenClock
    mail: Mail
    session: Session
    provider: SimProvider
    integrations: Integrations


def _mailing(*specs: ToolSpec) -> _Mailing:
    clock, mail = FrozenClock(), Mail(*specs)
    integrations = Integrations(
        registry=ToolkitRegistry([mail]), cache=ToolkitCache(ttl=300.0, clock=clock)
    )
    agent, provider = sim_agent(
        model=Caller(), clock=clock, registry=make_registry(), integrations=integrations
    )
    session = agent.session()
    return _Mailing(
        clock=clock, mail=mail, session=session, provider=provider, integrations=integrations
    )


def _notes(payload: dict[str, Any]) -> list[str]:
    last = payload["messages"][-1]["content"]
    return [b["text"] for b in last[1:] if b["type"] == "text"]


def test_the_catalogue_names_each_gated_action_with_one_line() -> None:
    assert catalogue([SEARCH]) == ""
    assert catalogue([POST, SEARCH, SEND]) == (
        "; behind the user's approval: send_email (Send an email.); waiting for the user to "
        "connect an account: post_slack (Post to a channel.)"
    )
    # A toolkit with no gated action is told exactly as before gates existed.
    view = ToolkitView(toolkits={"mail": [SEARCH]})
    assert describe_change(ToolkitView(), view) == "Toolkit 'mail' connected: 1 tool (search)."
    assert b"gate" not in view.view_bytes()


def test_a_gate_is_one_of_two_words() -> None:
    with pytest.raises(ToolError, match="gate must be one of approval, connection"):
        ToolSpec(name="x", gate="admin")  # type: ignore[arg-type]


async def test_a_session_is_told_the_catalogue_with_the_tools_and_tools_never_move() -> None:
    m = _mailing(SEARCH, SEND, POST)
    session, provider = m.session, m.provider
    await session.send("hello")
    first = provider.requests[0]
    assert _notes(first) == [CONNECTED]
    names = {t["name"] for t in first["tools"]}
    assert names.isdisjoint({"search", "send_email", "post_slack"})
    await session.send("and now?")
    assert _notes(provider.requests[-1]) == []  # frozen: told once
    assert json.dumps(provider.requests[-1]["tools"]) == json.dumps(first["tools"])


async def test_a_connection_gated_action_never_runs_and_the_model_is_told_why() -> None:
    m = _mailing(SEARCH, SEND, POST)
    session, mail = m.session, m.mail
    blocked = await session.send("call mail.post_slack")
    assert blocked.text == (
        "result: tool use_toolkit: post_slack of toolkit 'mail' waits for the user to connect "
        "an account, so it did not run; ask the user to connect mail, then try again"
    )
    opened = await session.send("call mail.search")
    assert opened.text == "result: search done"
    assert mail.calls == ["search"]


async def test_a_catalogue_change_upstream_is_a_note_at_a_turn_boundary() -> None:
    m = _mailing(SEARCH, SEND)
    session, mail, provider, integrations = m.session, m.mail, m.provider, m.integrations
    await session.send("hello")
    before = provider.requests[-1]
    mail.specs = (SEARCH, SEND, POST)  # the server gates a new action behind a connection
    m.clock.advance(301)  # the listing's TTL: the next turn reads it again
    await session.send("anything new?")
    after = provider.requests[-1]
    assert _notes(after) == ["Toolkit 'mail' changed: added post_slack."]
    assert json.dumps(after["tools"]) == json.dumps(before["tools"])
    assert after["system"] == before["system"]
    assert integrations.spec("mail", "post_slack") == POST


async def test_risky_plugin_tools_and_destructive_mcp_tools_are_behind_approval() -> None:
    @tool(risky=True)
    def wipe(path: str) -> str:
        """Delete a file."""
        return path

    @tool
    def read(path: str) -> str:
        """Read a file."""
        return path

    listed = await PluginToolkit("files", [wipe, read]).list_tools(IntegrationContext())
    specs = {s.name: s.gate for s in listed}
    assert specs == {"read": None, "wipe": "approval"}
    hints = types.ToolAnnotations
    assert _destructive(hints(destructive_hint=True)) is True
    assert _destructive(hints(destructive_hint=True, read_only_hint=True)) is False
    assert _destructive(hints(read_only_hint=False)) is False  # the protocol's default: not a gate
    assert _destructive(None) is False


class Answer:
    """An approver that answers `approved` and keeps what it was asked."""

    def __init__(self, approved: bool) -> None:
        self.approved = approved
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest, context: ToolContext) -> ApprovalDecision:
        self.asked.append(request)
        reason = "" if self.approved else "not today"
        return ApprovalDecision(approved=self.approved, by="user:alice", reason=reason)


async def test_an_approval_gated_action_runs_only_once_the_user_approves() -> None:
    m = _mailing(SEARCH, SEND, POST)
    session, mail = m.session, m.mail
    yes, no = Answer(True), Answer(False)
    sent = await session.send("call mail.send_email", callbacks=Callbacks(approver=yes))
    assert sent.text == "result: send_email done"
    ((request,),) = [yes.asked]
    assert request.tool == "use_toolkit"
    assert request.summary == 'use_toolkit(toolkit="mail", name="send_email")'
    refused = await session.send("call mail.send_email", callbacks=Callbacks(approver=no))
    assert refused.text.startswith(
        "result: the user denied use_toolkit (user:alice): not today. It did not run"
    )
    searched = await session.send("call mail.search", callbacks=Callbacks(approver=no))
    assert searched.text == "result: search done"  # an open tool asks nobody
    assert len(no.asked) == 1
    assert mail.calls == ["send_email", "search"]


async def test_a_run_that_denies_risky_calls_refuses_a_gated_action_unasked() -> None:
    m = _mailing(SEARCH, SEND)
    session, mail = m.session, m.mail
    await session.send("hello")
    answer = Answer(True)
    background = session.fork(policy=DispatchPolicy(deny_risky=True, reason="background"))
    refused = await background.send("call mail.send_email", callbacks=Callbacks(approver=answer))
    searched = await background.send("call mail.search", callbacks=Callbacks(approver=answer))
    assert refused.text == (
        "result: tool use_toolkit: this call needs approval and this run denies it"
    )
    assert searched.text == "result: search done"
    assert answer.asked == []
    assert mail.calls == ["search"]
