"""The model's tools over the memory and skills stores.

A refused operation (over budget, old_text not found or ambiguous, a bad skill name)
*raises* a `MemoryStoreError` whose message is written for the model; the dispatcher
turns it into an `is_error` result reading
"tool memory: MEMORY.md would be 2,431 of 2,200 characters;
consolidate: ...". Raising rather than returning the text keeps `is_error` true, so
the model (and the background review's summary) never mistakes a refusal for a write.

Successful writes return text with fixed prefixes, because the review's summary line
is built from these results: "Memory updated", "User profile updated" and
"Skill 'NAME' created|updated|deleted". Nothing else starts with those words.

Every tool takes the `ToolContext` (injected, not in the schema) to log provenance.
None is risky: a background review, which denies risky tools, must be able to use
them. Writers are not concurrent, so two writes in one response apply in the model's
order.
"""

from __future__ import annotations

from typing import Literal

from stoker.memory.errors import InvalidEntry
from stoker.memory.provenance import Provenance
from stoker.memory.skills import SkillStore
from stoker.memory.store import Action, MemoryStore, MemoryWrite, Target
from stoker.tools.context import ToolContext
from stoker.tools.tool import tool
from stoker.tools.toolset import Toolset

_UPDATED = {"memory": "Memory updated", "user": "User profile updated"}
_UNCHANGED = {"memory": "Memory unchanged", "user": "User profile unchanged"}
_VERBS = {
    "add": "added an entry to",
    "replace": "replaced an entry of",
    "remove": "removed an entry from",
}


def _memory_result(write: MemoryWrite) -> str:
    """The tool result for a write: a stable prefix, then what changed and the room left."""
    if not write.changed:
        return f"{_UNCHANGED[write.target]}: that entry is already in {write.file}"
    return (
        f"{_UPDATED[write.target]}: {_VERBS[write.action]} {write.file} "
        f"({write.size:,} of {write.budget:,} characters)"
    )


def memory_toolset(store: MemoryStore) -> Toolset:
    """The `memory` toolset: one tool, `memory`, over `store`."""

    @tool(concurrent=False)
    def memory(
        action: Action,
        target: Target,
        text: str = "",
        old_text: str = "",
        *,
        context: ToolContext,
    ) -> str:
        """Save what should outlive this conversation, in files loaded into future sessions:
        target "memory" (MEMORY.md) for what you learned (conventions, fixes, facts about
        the work), target "user" (USER.md) for the user (preferences, role, habits). Keep
        entries short and durable. Each file has a character budget; a write over it is
        refused until you consolidate (replace or remove entries).

        Args:
            action: "add" saves text as a new entry; "replace" swaps the entry containing
                old_text for text; "remove" deletes the entry containing old_text.
            target: "memory" for what you learned, "user" for what you know about the user.
            text: For add and replace: the complete entry to store.
            old_text: For replace and remove: a short part of the entry to change, found in
                exactly one entry.
        """
        provenance = Provenance.from_context(context)
        if action in ("add", "replace") and not text.strip():
            raise InvalidEntry(f"{action} needs text: the complete entry to store")
        if action in ("replace", "remove") and not old_text.strip():
            raise InvalidEntry(f"{action} needs old_text: a short part of the entry to change")
        if action == "add":
            write = store.add(target, text, provenance=provenance)
        elif action == "replace":
            write = store.replace(target, old_text, text, provenance=provenance)
        else:
            write = store.remove(target, old_text, provenance=provenance)
        return _memory_result(write)

    return Toolset(name="memory", tools=[memory])


def skills_toolset(store: SkillStore) -> Toolset:
    """The `skills` toolset: `skill_view` and `skill_manage` over `store`."""

    @tool
    def skill_view(name: str) -> str:
        """Load a saved skill's full instructions; the system prompt lists skills by name only.

        Args:
            name: The skill's name, as listed in the skills index.
        """
        skill = store.get(name)
        return f"Skill '{skill.name}': {skill.description}\n\n{skill.body}"

    @tool(concurrent=False)
    def skill_manage(
        action: Literal["create", "update", "delete"],
        name: str,
        description: str = "",
        body: str = "",
        *,
        context: ToolContext,
    ) -> str:
        """Create, update or delete a skill: a reusable procedure for a recurring task.
        Write one when you worked out how to do something that will come up again
        (steps, commands, checks, pitfalls); future sessions see its name and
        description and load the body with skill_view.

        Args:
            action: "create" a new skill, "update" an existing one (only the fields you
                give change), or "delete" one.
            name: Lowercase letters, digits and '-', e.g. "deploy-checklist".
            description: One line saying when to use the skill (create; optional for update).
            body: The instructions, in Markdown (create; optional for update).
        """
        provenance = Provenance.from_context(context)
        if action == "create":
            store.create(name, description, body, provenance=provenance)
        elif action == "update":
            store.update(name, description or None, body or None, provenance=provenance)
        else:
            store.delete(name, provenance=provenance)
        return f"Skill '{name}' {action}d"

    return Toolset(name="skills", tools=[skill_view, skill_manage])
