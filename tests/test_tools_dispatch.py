"""run_tool_calls: one result per call, the model's mistakes as error results, concurrency."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from stoker.tools import (
    DispatchPolicy,
    Tool,
    ToolContext,
    ToolProgress,
    current_policy,
    run_tool_calls,
    tool,
    use_policy,
)
from stoker.wire.blocks import ToolResultBlock, ToolUseBlock


def _call(name: str, arguments: Any = None, *, raw: str | None = None, n: int = 0) -> ToolUseBlock:
    text = raw if raw is not None else json.dumps(arguments or {})
    return ToolUseBlock(id=f"toolu_{n}_{name}", name=name, input_json=text)


def _context(call: ToolUseBlock) -> ToolContext:
    return ToolContext(session_id="s1", tool_use_id=call.id, metadata={"user": "ann"})


async def _run(
    calls: Sequence[ToolUseBlock], tools: Sequence[Tool], **kwargs: Any
) -> list[ToolResultBlock]:
    table: Mapping[str, Tool] = {t.name: t for t in tools}
    return await run_tool_calls(calls, table, context_factory=_context, **kwargs)


def _ok(call: ToolUseBlock, content: str) -> ToolResultBlock:
    return ToolResultBlock(tool_use_id=call.id, content=content)


def _err(call: ToolUseBlock, content: str) -> ToolResultBlock:
    return ToolResultBlock(tool_use_id=call.id, content=content, is_error=True)


@tool
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


async def test_results_in_call_order_and_rendering() -> None:
    @tool
    async def describe(name: str) -> dict[str, Any]:
        """Describe."""
        return {"name": name, "size": 3, "tags": ["é"]}

    calls = [_call("describe", {"name": "x"}), _call("add", {"a": 2, "b": 3}, n=1)]
    assert await _run(calls, [describe, add]) == [
        _ok(calls[0], '{"name":"x","size":3,"tags":["é"]}'),
        _ok(calls[1], "5"),
    ]


async def test_unknown_tool_names_the_tool_and_the_available_ones() -> None:
    call = _call("delete_all")
    assert await _run([call], [add]) == [
        _err(call, "unknown tool 'delete_all'; available tools: add")
    ]


async def test_policy_denial_returns_an_error_and_never_runs_the_tool() -> None:
    ran: list[str] = []

    @tool
    def write(text: str) -> str:
        """Write."""
        ran.append(text)
        return "written"

    call = _call("write", {"text": "x"})
    policy = DispatchPolicy(allowed=frozenset({"add"}), reason="background review")
    assert await _run([call], [write, add], policy=policy) == [
        _err(call, "tool write is not allowed in this run: background review")
    ]
    with use_policy(policy):  # no explicit policy: the context variable decides
        assert (await _run([call], [write, add]))[0].is_error
    assert ran == []


async def test_risky_tool_is_denied_under_deny_risky() -> None:
    ran: list[bool] = []

    @tool(risky=True)
    def add_note(text: str) -> str:
        """Add a note."""
        ran.append(True)
        return "noted"

    call = _call("add_note", {"text": "x"})
    policy = DispatchPolicy(deny_risky=True, reason="nobody can approve it")
    assert await _run([call], [add_note], policy=policy) == [
        _err(
            call,
            "tool add_note needs approval and this run denies risky tools: nobody can approve it",
        )
    ]
    assert ran == []
    assert await _run([call], [add_note]) == [_ok(call, "noted")]


async def test_invalid_json_arguments_quote_the_parse_error() -> None:
    call = _call("add", raw='{"a": 1,')
    assert await _run([call], [add]) == [
        _err(
            call,
            "tool add: the arguments are not valid JSON (Expecting property name enclosed in "
            "double quotes: line 1 column 9 (char 8)); send one JSON object",
        )
    ]


async def test_schema_violation_returns_pydantics_concise_message() -> None:
    calls = [_call("add", {"b": "x"}), _call("add", {"a": 1, "c": 2}, n=1)]
    assert await _run(calls, [add]) == [
        _err(
            calls[0],
            "tool add: invalid arguments: a: Field required; "
            "b: Input should be a valid integer, unable to parse string as an integer",
        ),
        _err(calls[1], "tool add: invalid arguments: c: Extra inputs are not permitted"),
    ]


async def test_raw_schema_tool_gets_the_minimal_check() -> None:
    seen: list[dict[str, Any]] = []

    def forward(**arguments: Any) -> str:
        seen.append(arguments)
        return "ok"

    schema = {"type": "object", "properties": {"file-path": {"type": "string"}}}
    raw = Tool.from_schema("open", "Open.", {**schema, "required": ["file-path"]}, forward)
    calls = [
        _call("open", {}),
        _call("open", {"file-path": 3}, n=1),
        _call("open", {"file-path": "a"}, n=2),
    ]
    assert await _run(calls, [raw]) == [
        _err(calls[0], "tool open: invalid arguments: file-path: Field required"),
        _err(calls[1], "tool open: invalid arguments: file-path: expected string, got integer"),
        _ok(calls[2], "ok"),
    ]
    assert seen == [{"file-path": "a"}]


async def test_exception_becomes_an_error_result_and_later_calls_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool(concurrent=False)
    def explode(path: str) -> str:
        """Fail."""
        raise FileNotFoundError(f"no such file: {path}")

    calls = [_call("explode", {"path": "a.txt"}), _call("add", {"a": 1}, n=1)]
    assert await _run(calls, [explode, add]) == [
        _err(calls[0], "tool explode failed: FileNotFoundError: no such file: a.txt"),
        _ok(calls[1], "1"),
    ]
    assert "tool explode failed" in caplog.text


async def test_cancellation_propagates() -> None:
    @tool
    async def hang() -> str:
        """Never returns."""
        await asyncio.Event().wait()
        return ""

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(_run([_call("hang")], [hang]), timeout=0.05)


async def test_concurrent_tools_run_at_the_same_time() -> None:
    # Each tool waits for the other to have started: run one after the other, they deadlock.
    ping_started, pong_started = asyncio.Event(), asyncio.Event()

    @tool
    async def ping() -> str:
        """Ping."""
        ping_started.set()
        await pong_started.wait()
        return "ping"

    @tool
    async def pong() -> str:
        """Pong."""
        pong_started.set()
        await ping_started.wait()
        return "pong"

    calls = [_call("ping"), _call("pong", n=1)]
    results = await asyncio.wait_for(_run(calls, [ping, pong]), timeout=5)
    assert results == [_ok(calls[0], "ping"), _ok(calls[1], "pong")]


async def test_non_concurrent_tools_run_one_at_a_time_in_call_order() -> None:
    log: list[str] = []

    def make(name: str, concurrent: bool, ticks: int) -> Tool:
        async def body() -> str:
            log.append(f"start {name}")
            for _ in range(ticks):
                await asyncio.sleep(0)
            log.append(f"end {name}")
            return name

        return tool(name=name, description=name, concurrent=concurrent)(body)

    tools = [make("w1", False, 3), make("w2", False, 0), make("r1", True, 2), make("r2", True, 0)]
    calls = [_call(n, n=i) for i, n in enumerate(["r1", "w1", "w2", "r2"])]
    results = await _run(calls, tools)
    assert [r.content for r in results] == ["r1", "w1", "w2", "r2"]
    assert log == [
        "start r1",
        "end r1",
        "start w1",
        "end w1",
        "start w2",
        "end w2",
        "start r2",
        "end r2",
    ]


async def test_sync_tool_runs_in_a_worker_thread_with_the_context() -> None:
    @tool
    def where(ctx: ToolContext, label: str) -> dict[str, Any]:
        """Report the thread and context."""
        return {
            "label": label,
            "session": ctx.session_id,
            "call": ctx.tool_use_id,
            "user": ctx.metadata["user"],
            "worker": threading.get_ident() != main_thread,
            "policy_reason": current_policy().reason,
        }

    main_thread = threading.get_ident()
    call = _call("where", {"label": "x"})
    [result] = await _run([call], [where], policy=DispatchPolicy(reason="scoped"))
    assert json.loads(result.content) == {
        "label": "x",
        "session": "s1",
        "call": call.id,
        "user": "ann",
        "worker": True,
        "policy_reason": "scoped",
    }


async def test_progress_events_pair_start_and_end() -> None:
    events: list[ToolProgress] = []
    calls = [_call("add", {"a": 1}), _call("nope", n=1)]
    await _run(calls, [add], on_progress=events.append)
    unknown = "unknown tool 'nope'; available tools: add"
    assert sorted(events, key=lambda e: (e.tool_use_id, e.phase == "end")) == [
        ToolProgress(name="add", tool_use_id=calls[0].id, phase="start", arguments='{"a": 1}'),
        ToolProgress(name="add", tool_use_id=calls[0].id, phase="end", content="1"),
        ToolProgress(name="nope", tool_use_id=calls[1].id, phase="start", arguments="{}"),
        ToolProgress(
            name="nope", tool_use_id=calls[1].id, phase="end", is_error=True, content=unknown
        ),
    ]
