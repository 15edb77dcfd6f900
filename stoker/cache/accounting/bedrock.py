"""Bedrock's prompt cache for Claude, computed exactly: Anthropic's algorithm on what
Claude receives, with Bedrock's model facts and Bedrock's refusals.

A Converse body becomes the Messages body Claude receives
(`stoker.wire.dialects.bedrock.anthropic_equivalent`: each `cachePoint` as a marker on
the block before it), and `AnthropicAccountant` bills it with the Bedrock model's
minimum (the model table's, from Bedrock's own list), its TTLs, the 20-block lookback
Bedrock documents for Claude ("simplified cache management") and at most four cache
points. Caches are per AWS account: the simulator keys them by access key id.
Bedrock refuses (ValidationException) a `ttl` the model does not offer.
"""

from __future__ import annotations

from typing import Any

from stoker.cache.accounting.anthropic import AnthropicAccountant
from stoker.cache.accounting.outcome import CacheOutcome
from stoker.cache.models import model_info
from stoker.errors import InvalidRequest
from stoker.wire.dialects.bedrock import anthropic_equivalent


def _points(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every `cachePoint` of a Converse body, with where it is."""
    found = []
    for i, tool in enumerate((body.get("toolConfig") or {}).get("tools") or ()):
        if isinstance(tool, dict) and "cachePoint" in tool:
            found.append((f"toolConfig.tools[{i}]", tool["cachePoint"]))
    for i, block in enumerate(body.get("system") or ()):
        if isinstance(block, dict) and "cachePoint" in block:
            found.append((f"system[{i}]", block["cachePoint"]))
    for m, message in enumerate(body.get("messages") or ()):
        for i, block in enumerate((message or {}).get("content") or ()):
            if isinstance(block, dict) and "cachePoint" in block:
                found.append((f"messages[{m}].content[{i}]", block["cachePoint"]))
    return found


class BedrockAccountant:
    """Bedrock's caches, one per account, over an `AnthropicAccountant` of its own."""

    __slots__ = ("anthropic",)

    def __init__(self, anthropic: AnthropicAccountant | None = None) -> None:
        self.anthropic = anthropic or AnthropicAccountant()

    def reset(self) -> None:
        self.anthropic.reset()

    def account(
        self, payload: dict[str, Any], *, at: float, workspace: str = "default"
    ) -> CacheOutcome:
        """Reads and writes of a Converse request that starts at `at`."""
        info = model_info(str(payload.get("modelId")))
        points = _points(payload)
        if len(points) > info.markers:
            raise InvalidRequest(
                f"A maximum of {info.markers} cache points can be used, found {len(points)}",
                provider="bedrock",
            )
        for where, point in points:
            if not isinstance(point, dict) or point.get("type") != "default":
                raise InvalidRequest(
                    f"{where}.cachePoint.type: expected 'default'", provider="bedrock"
                )
            ttl = point.get("ttl") or "5m"
            if ttl not in info.ttls:
                raise InvalidRequest(
                    f"{where}.cachePoint.ttl: {ttl!r} is not supported by {info.name} "
                    f"(it offers {', '.join(info.ttls)})",
                    provider="bedrock",
                )
        return self.anthropic.account(anthropic_equivalent(payload), at=at, workspace=workspace)
