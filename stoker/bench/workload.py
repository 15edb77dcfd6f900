"""The benchmarks' agent: its system prompt, its eight inspection tools and the
deterministic model that drives it (`stoker bench cache`, `bench proxy`, `bench fuzz`)."""

from __future__ import annotations

import re

from stoker.providers.sim.model import json_answer, tool_call
from stoker.tools import Tool, tool
from stoker.wire.blocks import Block, TextBlock
from stoker.wire.messages import UserMessage
from stoker.wire.request import Request

SYSTEM = (
    "You are the maintenance agent of a mid-sized Python service. You read the code, run "
    "the checks, and explain what you found in plain words before you change anything. "
) * 80  # about 3,900 tokens: a working agent's instructions, conventions and examples
_STEPS = re.compile(r"run (\d+) steps")


def lookup_tool(index: int) -> Tool:
    """The inspection tool number `index`."""

    def body(path: str) -> str:
        return f"tool {index} on {path}: " + "result line of moderate length. " * 6

    body.__name__ = f"inspect_{index}"
    body.__doc__ = (
        f"Inspect part {index} of the repository: read what is there, run the checks that "
        "apply to it, and report what they found, one finding per line, most serious first. "
        "Use it before changing anything in that part, and again after, to confirm the "
        "change did what was intended and nothing else.\n\n"
        "Args:\n    path: The file or folder to inspect, relative to the repository root."
    )
    return tool(body)


TOOLS = [lookup_tool(i) for i in range(8)]


class WorkloadModel:
    """Deterministic stand-in for the model: "run N steps" makes N sequential tool calls
    in one turn, "delegate" fans out to three sub-agents, a review saves one memory;
    anything else is answered in a sentence."""

    def respond(self, request: Request) -> tuple[Block, ...]:
        messages = request.messages
        start = max(
            (
                i
                for i, m in enumerate(messages)
                if isinstance(m, UserMessage) and m.text and not m.text.startswith("(")
            ),
            default=0,
        )
        asked = messages[start].text if isinstance(messages[start], UserMessage) else ""
        done = sum(len(m.tool_results) for m in messages[start + 1 :] if isinstance(m, UserMessage))
        names = set(request.prefix.tool_names)
        steps = _STEPS.search(asked)
        if steps and done < int(steps.group(1)):
            return (tool_call(request, f"inspect_{done % 8}", {"path": f"src/part{done}.py"}),)
        if "delegate" in asked and "delegate" in names and not done:
            return tuple(
                tool_call(request, "delegate", {"goal": f"check part {i} of the service"}, i)
                for i in range(3)
            )
        if asked.startswith("Background review") and "memory" in names and not done:
            fact = {"action": "add", "target": "memory", "content": f"fact {len(messages)}"}
            return (tool_call(request, "memory", fact),)
        structured = json_answer(request, asked)  # a turn that asks for typed output
        if structured is not None:
            return (structured,)
        return (TextBlock(text=f"Done: {asked[:60]}. " + "Here is what I found. " * 8),)
