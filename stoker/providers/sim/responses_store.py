"""Stored responses, as the Responses API keeps them: chained by `previous_response_id`,
read back by id, their items referenced by `item_reference`.

A response is stored unless its request said `store: false`, per workspace (a caller's
API key), and only the latest `capacity` are kept. Chaining continues a stored
conversation: the new request's context is the previous response's own context (its
input, itself chained) followed by its output items, then the new input. Instructions
are not carried over, as the API documents.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stoker.providers.sim.asks import refuse

P = "openai"


def input_items(body: Mapping[str, Any]) -> list[Any]:
    """A request's `input` as a list of items (a string is one user message)."""
    given = body.get("input")
    return [{"role": "user", "content": given}] if isinstance(given, str) else list(given or ())


@dataclass(frozen=True, slots=True, kw_only=True)
class Stored:
    """One stored response: its body and the input items it answered (chain included)."""

    body: dict[str, Any]
    context: tuple[dict[str, Any], ...]

    @property
    def continued(self) -> list[dict[str, Any]]:
        """What a request chained to this response starts with."""
        return [*self.context, *self.body.get("output", ())]


@dataclass(slots=True, kw_only=True)
class ResponseStore:
    capacity: int = 4096
    _items: OrderedDict[tuple[str, str], Stored] = field(default_factory=OrderedDict)
    _by_item: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def get(self, workspace: str, response_id: str) -> Stored | None:
        found = self._items.get((workspace, response_id))
        if found is not None:
            self._items.move_to_end((workspace, response_id))
        return found

    def put(self, workspace: str, stored: Stored) -> None:
        self._items[(workspace, str(stored.body["id"]))] = stored
        for item in [*stored.context, *stored.body.get("output", ())]:
            if isinstance(item.get("id"), str):
                self._by_item[(workspace, item["id"])] = item
        while len(self._items) > self.capacity:
            (ws, _), old = self._items.popitem(last=False)
            for item in old.body.get("output", ()):
                self._by_item.pop((ws, str(item.get("id"))), None)

    def delete(self, workspace: str, response_id: str) -> bool:
        return self._items.pop((workspace, response_id), None) is not None

    def clear(self) -> None:
        self._items.clear()
        self._by_item.clear()

    def context_of(self, workspace: str, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The full input of a request: its chain, then its own items with every
        `item_reference` replaced by the item it names. A 400 for an id it does not know."""
        given = body.get("input")
        items: list[Any] = (
            [{"role": "user", "content": given}] if isinstance(given, str) else list(given or ())
        )
        resolved = [self._resolve(workspace, item, i) for i, item in enumerate(items)]
        previous = body.get("previous_response_id")
        if previous is None:
            return resolved
        stored = self.get(workspace, str(previous)) if isinstance(previous, str) else None
        if stored is None:
            refuse(
                P,
                f"Previous response with id '{previous}' not found.",
                "previous_response_id",
                "previous_response_not_found",
            )
        return [*stored.continued, *resolved]

    def _resolve(self, workspace: str, item: Any, index: int) -> Any:
        if not isinstance(item, Mapping) or item.get("type") != "item_reference":
            return item
        item_id = item.get("id")
        found = self._by_item.get((workspace, str(item_id)))
        if found is None:
            refuse(
                P, f"Item with id '{item_id}' not found.", f"input[{index}].id", "item_not_found"
            )
        return found
