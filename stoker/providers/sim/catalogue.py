"""What the simulator lists: its models (in each provider's shape) and a stored response's
input items.

The models are the model table's (`stoker/cache/data/models.toml`), each under the
provider that serves it. Neither table says when a model was released, so every entry
carries one fixed date: listing the same models twice gives the same bytes.
"""

from __future__ import annotations

from typing import Any

from stoker.cache.models import ModelInfo, known_models, model_info
from stoker.errors import ConfigError
from stoker.providers.sim._http import Shape
from stoker.providers.sim.responses_store import Stored

CREATED = 1_767_225_600  # 2026-01-01T00:00:00Z
CREATED_AT = "2026-01-01T00:00:00Z"


def _served(shape: Shape) -> list[ModelInfo]:
    return [i for i in map(model_info, known_models()) if i.provider == shape]


def _entry(shape: Shape, info: ModelInfo, name: str) -> dict[str, Any]:
    if shape == "openai":
        return {"id": name, "object": "model", "created": CREATED, "owned_by": "openai"}
    return {
        "type": "model",
        "id": name,
        "display_name": name,
        "created_at": CREATED_AT,
        "lifecycle": "active",
        "max_input_tokens": info.context_window,
        "max_tokens": None,
    }


def model_list(shape: Shape) -> dict[str, Any]:
    """Every model of the provider, as its list endpoint pages them (one page)."""
    data = [_entry(shape, info, info.name) for info in _served(shape)]
    if shape == "openai":
        return {"object": "list", "data": data}
    ids = [d["id"] for d in data]
    return {
        "data": data,
        "has_more": False,
        "first_id": ids[0] if ids else None,
        "last_id": ids[-1] if ids else None,
    }


def model_entry(shape: Shape, name: str) -> dict[str, Any] | None:
    """The entry of model `name` as the caller spelled it (a dated snapshot of a known
    model is that model); None when the provider does not serve it."""
    try:
        info = model_info(name)
    except ConfigError:
        return None
    return _entry(shape, info, name) if info.provider == shape else None


def input_items(stored: Stored, response_id: str) -> dict[str, Any]:
    """The input items a stored response answered, newest first as the API lists them,
    each with an id (the API gives ids to the items it stores)."""
    items = []
    for i, item in enumerate(stored.context):
        given = dict(item)
        given.setdefault("id", f"msg_{response_id.removeprefix('resp_')[:40]}{i:04d}")
        given.setdefault("type", "message")
        if given["type"] == "message":
            given.setdefault("status", "completed")
            if isinstance(given.get("content"), str):  # stored as parts, as the API keeps it
                kind = "output_text" if given.get("role") == "assistant" else "input_text"
                given["content"] = [{"type": kind, "text": given["content"]}]
        items.append(given)
    items.reverse()
    return {
        "object": "list",
        "data": items,
        "first_id": items[0]["id"] if items else None,
        "last_id": items[-1]["id"] if items else None,
        "has_more": False,
    }
