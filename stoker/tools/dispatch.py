"""Run one model response's tool calls and turn every outcome into a tool result.

The model's mistakes — an unknown tool, a call the policy refuses, arguments that are
not JSON or do not fit the schema, a tool that raises — and a risky call someone denied
(see `approval`) come back as `is_error` results the model can act on; they never end
the turn. Only cancellation, and errors
raised by the caller's own `context_factory`, propagate.

Calls of `concurrent` tools run together; a non-concurrent tool runs alone, after the
calls before it and before the calls after it, so the model's order holds wherever
it can matter.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from stoker.errors import StokerError, WireError
from stoker.tools.approval import (
    BY_POLICY,
    ApprovalDecision,
    ApprovalRequest,
    Approvals,
    ask,
    refusal,
)
from stoker.tools.context import ToolContext
from stoker.tools.policy import DispatchPolicy, current_policy, use_policy
from stoker.tools.tool import Tool
from stoker.wire.blocks import ToolResultBlock, ToolUseBlock
from stoker.wire.canonical import canonical_json

logger = logging.getLogger(__name__)

ContextFactory = Callable[[ToolUseBlock], ToolContext]
ProgressCallback = Callable[["ToolProgress"], Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolProgress:
    """A tool call starting or ending, for UIs and logs (`name` is the wire name)."""

    name: str
    tool_use_id: str
    phase: Literal["start", "end"]
    is_error: bool = False
    arguments: str = ""  # "start": the arguments' JSON exactly as the model sent it
    content: str = ""  # "end": the result the model reads


async def run_tool_calls(
    calls: Sequence[ToolUseBlock],
    tools: Mapping[str, Tool],
    *,
    context_factory: ContextFactory,
    policy: DispatchPolicy | None = None,
    on_progress: ProgressCallback | None = None,
    approvals: Approvals | None = None,
) -> list[ToolResultBlock]:
    """One result per call, in call order.

    `policy` defaults to the current context's (`current_policy()`); tools run with it
    as the current policy, so a tool that starts a nested run inherits it.
    `on_progress` may be sync or async; its failures are logged, never raised, since
    the tools it reports on may already have had effects. `approvals` says who is asked
    before a risky call runs and where decisions go (None: nobody, nowhere).
    """
    run = _Run(
        tools=tools,
        policy=policy if policy is not None else current_policy(),
        context_factory=context_factory,
        on_progress=on_progress,
        approvals=approvals or Approvals(),
    )
    results: list[ToolResultBlock] = []
    with use_policy(run.policy):
        for batch in _batches(calls, tools):
            if len(batch) == 1:
                results.append(await _run_one(batch[0], run))
                continue
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(_run_one(c, run)) for c in batch]
            results.extend(task.result() for task in tasks)
    return results


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    """What every call of one `run_tool_calls` shares."""

    tools: Mapping[str, Tool]
    policy: DispatchPolicy
    context_factory: ContextFactory
    on_progress: ProgressCallback | None
    approvals: Approvals


def _batches(
    calls: Sequence[ToolUseBlock], tools: Mapping[str, Tool]
) -> Iterator[list[ToolUseBlock]]:
    """Consecutive calls that may overlap; a non-concurrent tool's call is a batch alone.

    Calls that will not run (unknown tools) join any batch.
    """
    batch: list[ToolUseBlock] = []
    for call in calls:
        found = tools.get(call.name)
        if found is not None and not found.concurrent:
            if batch:
                yield batch
            yield [call]
            batch = []
        else:
            batch.append(call)
    if batch:
        yield batch


async def _run_one(call: ToolUseBlock, run: _Run) -> ToolResultBlock:
    progress = run.on_progress
    start = ToolProgress(
        name=call.name, tool_use_id=call.id, phase="start", arguments=call.input_json
    )
    await _notify(progress, start)
    result = await _outcome(call, run)
    await _notify(
        progress,
        ToolProgress(
            name=call.name,
            tool_use_id=call.id,
            phase="end",
            is_error=result.is_error,
            content=result.content,
        ),
    )
    return result


async def _outcome(call: ToolUseBlock, run: _Run) -> ToolResultBlock:
    def error(text: str) -> ToolResultBlock:
        return ToolResultBlock(tool_use_id=call.id, content=text, is_error=True)

    tools, policy, approvals = run.tools, run.policy, run.approvals
    found = tools.get(call.name)
    if found is None:
        callable_names = ", ".join(sorted(n for n in tools if policy.allows(n))) or "(none)"
        return error(f"unknown tool {call.name!r}; available tools: {callable_names}")
    denial = policy.denial(found)
    if denial is not None:
        if found.risky and policy.allows(found.name):
            await _denied_by_policy(call, run, run.context_factory(call).session_id)
        return error(denial)
    try:
        raw = call.arguments()
    except WireError as exc:
        cause = exc.__cause__ or exc
        return error(
            f"tool {found.name}: the arguments are not valid JSON ({cause}); send one JSON object"
        )
    try:
        kwargs = found.validate_arguments(raw)
    except ValueError as exc:
        return error(f"tool {found.name}: invalid arguments: {exc}")
    context = run.context_factory(call)
    gated = not found.risky and found.needs_approval(kwargs)
    if gated and policy.deny_risky:  # a risky tool was refused above; this call is gated
        await _denied_by_policy(call, run, context.session_id)
        return error(f"tool {found.name}: this call needs approval and this run denies it")
    if (found.risky or gated) and approvals.approver is not None:
        request = ApprovalRequest.of(call, _parsed(call), session_id=context.session_id)
        decision = await ask(approvals.approver, request, context, approvals.now)
        if approvals.record is not None:
            await approvals.record(request, decision)
        if not decision.approved:
            return error(refusal(found.name, decision))
    try:
        content = render_result(await found.invoke(kwargs, context))
    except StokerError as exc:
        # A deliberate refusal written for the model (budget, not found, depth): its
        # message is the whole story; the class name would only be noise.
        logger.info("tool %s refused (call %s): %s", found.name, call.id, exc)
        return error(f"tool {found.name}: {exc}")
    except Exception as exc:
        message = f"tool {found.name} failed: {type(exc).__name__}: {exc}"
        # One line at WARNING (tools routinely refuse a model's bad request by raising);
        # the traceback at DEBUG, for when the tool itself is the bug.
        logger.warning("%s (call %s)", message, call.id)
        logger.debug("traceback of tool %s (call %s)", found.name, call.id, exc_info=exc)
        return error(message)
    return ToolResultBlock(tool_use_id=call.id, content=content)


async def _denied_by_policy(call: ToolUseBlock, run: _Run, session_id: str) -> None:
    """Record that the run's policy, not a person, refused a call that needed approval."""
    approvals = run.approvals
    if approvals.record is None:
        return
    request = ApprovalRequest.of(call, _parsed(call), session_id=session_id)
    why = run.policy.reason or "this run denies risky tools"
    decided = ApprovalDecision(approved=False, by=BY_POLICY, reason=why, at=approvals.now())
    await approvals.record(request, decided)


def _parsed(call: ToolUseBlock) -> dict[str, Any]:
    """The call's arguments when they are a JSON object (for a summary), else {}."""
    try:
        raw = call.arguments()
    except WireError:
        return {}
    return raw if isinstance(raw, dict) else {}


def render_result(value: Any) -> str:
    """A tool's return value as result text: a str as is, anything else as canonical JSON.

    Values pydantic can serialize (models, dataclasses, dates, paths) are accepted.
    """
    if isinstance(value, str):
        return value
    return canonical_json(to_jsonable_python(value)).decode("utf-8")


async def _notify(callback: ProgressCallback | None, event: ToolProgress) -> None:
    if callback is None:
        return
    try:
        returned = callback(event)
        if inspect.isawaitable(returned):
            await returned
    except Exception:
        logger.exception("on_progress callback failed on %s", event)
