"""What the simulator's two OpenAI APIs (Chat Completions, Responses) check and answer
alike: sampling parameters, reasoning models' refusals, forced tool choices, ids and
log probabilities.

Reasoning models (`reasons` in the model table) refuse the sampling knobs they do not
have: a `temperature` other than 1, `top_p`, `logprobs`; models that do not reason refuse
a reasoning effort. Messages and codes are OpenAI's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, NoReturn

from stoker.cache.models import ModelInfo
from stoker.providers.sim.answer import Tokens
from stoker.providers.sim.asks import number, refuse

P = "openai"
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


def unsupported(name: str, hint: str = "") -> NoReturn:
    refuse(
        P,
        f"Unsupported parameter: '{name}' is not supported with this model.{hint}",
        name,
        "unsupported_parameter",
    )


def sampling(body: Mapping[str, Any], info: ModelInfo) -> None:
    """`temperature` and `top_p` as the model takes them."""
    temperature = number(P, body, "temperature", low=0, high=2)
    number(P, body, "top_p", low=0, high=1)
    if info.reasons and temperature is not None and temperature != 1:
        refuse(
            P,
            f"Unsupported value: 'temperature' does not support {temperature:g} with this model. "
            "Only the default (1) value is supported.",
            "temperature",
            "unsupported_value",
        )


def effort(value: Any, param: str, info: ModelInfo) -> str | None:
    """A reasoning effort, refused by a model that does not reason."""
    if value is None:
        return None
    if value not in EFFORTS:
        refuse(
            P,
            f"Invalid value: '{value}'. Supported values are: "
            + ", ".join(f"'{e}'" for e in EFFORTS)
            + ".",
            param,
            "invalid_value",
        )
    if not info.reasons:
        unsupported(param)
    return str(value)


def forced_tool(choice: Any, tool_names: list[str], named: str | None) -> str | None:
    """None when the model may answer in text; "" for any tool; the name of a named one.
    `named` is the name a `{"type": "function", ...}` choice carries (its API's place)."""
    if choice is None or choice in ("auto", "none"):
        return None
    if choice != "required" and not (
        isinstance(choice, Mapping) and choice.get("type") == "function"
    ):
        refuse(
            P,
            "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or a "
            "named function.",
            "tool_choice",
            "invalid_value",
        )
    if not tool_names:
        refuse(
            P,
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
            "specified.",
            "tool_choice",
            "invalid_value",
        )
    if choice == "required":
        return ""
    if named not in tool_names:
        refuse(
            P,
            f"Invalid value for 'tool_choice': function '{named}' was not found in 'tools'.",
            "tool_choice",
            "invalid_value",
        )
    return named


def sim_id(prefix: str, n: int, length: int) -> str:
    """An id in the API's format (`chatcmpl-…`, `resp_…`, `call_…`): deterministic."""
    return prefix + hashlib.sha256(f"{prefix}{n}".encode()).hexdigest()[:length]


def logprobs(text: str, tokens: Tokens, top: int) -> list[dict[str, Any]]:
    """One entry per output token. The simulator chose each token with certainty, so its
    log probability is 0 and it is its own only alternative: honest, and in the shape the
    SDKs parse."""
    out = []
    for piece in tokens.pieces(text):
        token, raw = piece.decode("utf-8", "replace"), list(piece)
        alternatives = [{"token": token, "logprob": 0.0, "bytes": raw}] if top else []
        out.append({"token": token, "logprob": 0.0, "bytes": raw, "top_logprobs": alternatives})
    return out
