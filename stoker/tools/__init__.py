"""Tools: the `Tool` value and `@tool`, toolsets, the registry, the dispatch policy,
and the dispatcher that turns a response's tool calls into results.

Imports only `stoker.errors` and `stoker.wire`. What a request *sends* is resolved
once (`ToolRegistry.resolve`, `Tool.spec_bytes`); what a run may *call* is a
`DispatchPolicy` — advertising is not allowing; who is asked before a risky call runs is
an `Approver` (`stoker.tools.approval`).
"""

from __future__ import annotations

from stoker.tools._schema import ToolDocWarning
from stoker.tools.approval import (
    ApprovalDecision,
    ApprovalRequest,
    Approvals,
    Approver,
)
from stoker.tools.context import ToolContext
from stoker.tools.dispatch import ToolProgress, render_result, run_tool_calls
from stoker.tools.policy import ALLOW_ALL, DispatchPolicy, current_policy, use_policy
from stoker.tools.registry import ToolRegistry
from stoker.tools.tool import Tool, check_name, tool
from stoker.tools.toolset import Toolset
from stoker.tools.unavailable import unavailable_tool

__all__ = [
    "ALLOW_ALL",
    "ApprovalDecision",
    "ApprovalRequest",
    "Approvals",
    "Approver",
    "DispatchPolicy",
    "Tool",
    "ToolContext",
    "ToolDocWarning",
    "ToolProgress",
    "ToolRegistry",
    "Toolset",
    "check_name",
    "current_policy",
    "render_result",
    "run_tool_calls",
    "tool",
    "unavailable_tool",
    "use_policy",
]
