"""Reading a provider's answer defensively: a body or event of the wrong shape is a
`WireError`, never a KeyError or TypeError from deep inside a parser.

A provider, or a proxy in front of it, can answer 200 with anything: HTML, an empty
body, the JSON of another API. The parsers index into a body as the API documents it;
`malformed` turns what that raises on any other shape into the one error the adapters
recognise (and retry, as they would a 5xx), and `checked` makes sure a message that
parsed has the types the rest of Stoker relies on before it is stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from stoker.errors import WireError
from stoker.wire.messages import AssistantMessage
from stoker.wire.usage import Usage

# What indexing into JSON of an unexpected shape raises (json.loads included).
MALFORMED = (KeyError, IndexError, TypeError, AttributeError, ValueError)


@contextmanager
def malformed(what: str) -> Iterator[None]:
    """Inside the block, reading `what` with the wrong shape raises a `WireError`."""
    try:
        yield
    except MALFORMED as exc:
        raise WireError(f"malformed {what}: {exc!r}") from exc


def response_object(body: Any, items: str, what: str) -> dict[str, Any]:
    """`body` when it is a JSON object whose `items` field (the answer's content) is a list.

    Checked first, because parsers read an absent field as "empty": a JSON object from
    another API would otherwise parse as an answer with no content.
    """
    if not isinstance(body, dict):
        raise WireError(f"malformed {what}: a JSON {type(body).__name__}, not an object")
    if not isinstance(body.get(items), list):
        raise WireError(f"malformed {what}: no {items!r} list in {_keys(body)}")
    return body


def _keys(body: dict[str, Any]) -> str:
    names = sorted(str(k) for k in body)[:8]
    return "an object with keys " + ", ".join(names) if names else "an empty object"


def checked(message: AssistantMessage, usage: Usage, what: str) -> tuple[AssistantMessage, Usage]:
    """`(message, usage)` when every field has its declared type: strings in blocks, ids
    and stop reasons, integers in usage. A number where text belongs would otherwise be
    stored, and fail later in code that has nothing to do with the provider."""
    for block in message.content:
        for name in block.__dataclass_fields__:
            value = getattr(block, name)
            if not isinstance(value, bool if name == "is_error" else str):
                raise WireError(
                    f"malformed {what}: {block.kind} {name} is a {type(value).__name__}"
                )
    for name, value in (("stop_reason", message.stop_reason), ("id", message.id)):
        if not isinstance(value, str):
            raise WireError(f"malformed {what}: {name} is a {type(value).__name__}")
    for name, count in usage.to_dict().items():
        if isinstance(count, bool) or not isinstance(count, int):
            raise WireError(f"malformed {what}: usage {name} is a {type(count).__name__}")
    return message, usage


def model_of(body: dict[str, Any]) -> str:
    """A request's `model`: a name (the record, the store and the prices key on it)."""
    model = body["model"]
    if not isinstance(model, str) or not model:
        raise WireError(f"model must be a model's name (a non-empty string), not {model!r:.60}")
    return model
