"""Optimize mode: rewrite a client's request only where the model cannot tell.

- tool schemas in canonical JSON (sorted keys): a framework that builds its schemas from
  a dict whose order varies no longer moves the prefix;
- the lineage's first tool order kept when a later call sends the same tools in another
  order;
- Anthropic: the client's `cache_control` markers replaced by the planner's (one at the
  end of tools + system, one rolling on the newest block, an intermediate one when a turn
  appended more than the lookback), never more than the provider's 4, with the TTLs of
  Stoker's own sessions (`CachePolicy`);
- OpenAI: a `prompt_cache_key` per lineage, addressed by what the lineage shares with
  other conversations of the same agent and sharded by traffic (`stoker.cache.keys`),
  and `prompt_cache_retention` where the model takes it, when the client set neither.

Every change is named in `Rewritten.rewrites`, which the record keeps. What would need a
change the model sees (a timestamp in the system prompt, a tool added mid-session) is
left alone; the recorder reports it with its slot and cost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

from stoker.cache.keys import KeyShards, cache_key
from stoker.cache.models import ModelInfo
from stoker.cache.planner import BlockRef, CachePolicy, plan
from stoker.cache.time_policy import retention
from stoker.proxy.lineage import LineageState
from stoker.proxy.markers import describe, place, read, strip
from stoker.wire.canonical import canonical_json, canonicalize
from stoker.wire.dialects._chain import compact
from stoker.wire.request import Breakpoint, Request


@dataclass(frozen=True, slots=True, kw_only=True)
class Rewritten:
    """The body to send upstream, the request it parses to, and what was changed."""

    payload: dict[str, Any]
    request: Request
    rewrites: tuple[str, ...]
    rolling: BlockRef | None


def _name(tool: Any) -> str:
    if not isinstance(tool, dict):
        return ""
    function = tool.get("function")
    return str(tool.get("name") or (function.get("name") if isinstance(function, dict) else ""))


def _tools(payload: dict[str, Any], lineage: LineageState, notes: list[str]) -> None:
    tools = payload.get("tools")
    if not isinstance(tools, list) or not tools:
        return
    memo = lineage.tools_memo
    if memo is not None and memo[0] == tools:  # what the lineage's last call sent: as then
        payload["tools"] = list(memo[1])  # a list of its own: markers replace its items
        notes.extend(memo[2])
        return
    given = len(notes)
    canonical = [canonicalize(t) for t in tools]
    moved = [_name(t) for t, c in zip(tools, canonical, strict=True) if compact(t) != compact(c)]
    if moved:
        notes.append(f"tools: canonical JSON key order in {', '.join(moved)}")
    names = [_name(t) for t in canonical]
    order = lineage.tool_order
    if order is None or len(set(names)) != len(names):
        lineage.tool_order = tuple(names)
    elif sorted(order) == sorted(names) and tuple(names) != order:
        where = {name: i for i, name in enumerate(order)}
        canonical.sort(key=lambda t: where[_name(t)])
        notes.append(f"tools: kept the lineage's order {list(order)} (client sent {names})")
    elif set(order) != set(names):
        lineage.tool_order = tuple(names)  # another tool set: that is a change to report
    unmarked = ({k: v for k, v in t.items() if k != "cache_control"} for t in canonical)
    sent = tuple(canonical_json(t) for t in unmarked)  # what the prefix's tools[] hold
    lineage.tools_memo = (tools, tuple(canonical), tuple(notes[given:]), sent)
    payload["tools"] = canonical


@dataclass(slots=True, kw_only=True)
class _Job:
    """One request's rewrite: what each dialect's step reads, and the notes it adds."""

    payload: dict[str, Any]
    request: Request
    lineage: LineageState
    info: ModelInfo
    policy: CachePolicy
    notes: list[str]


def _anthropic(job: _Job) -> tuple[tuple[Breakpoint, ...], BlockRef | None]:
    payload, notes = job.payload, job.notes
    theirs = read(payload)
    strip(payload)
    thinking = (payload.get("thinking") or {}).get("type") == "enabled"
    planned = plan(
        job.info,
        job.request.messages,
        previous=job.lineage.rolling,
        policy=job.policy,
        thinking=thinking,
    )
    place(payload, planned.breakpoints)
    mine = set(planned.breakpoints)
    notes += [f"removed breakpoint {describe(b)}" for b in theirs if b not in mine]
    notes += [f"added breakpoint {describe(b)}" for b in planned.breakpoints if b not in theirs]
    return planned.breakpoints, planned.rolling


def _openai(job: _Job, shards: KeyShards, at: float) -> None:
    payload, lineage, prefix = job.payload, job.lineage, job.request.prefix
    if "prompt_cache_key" not in payload:
        if lineage.cache_key is None:
            routed = job.info.regime == "L"
            slot = shards.slot(prefix, at, routed=routed)
            lineage.cache_key = cache_key(prefix.with_params(cache_slot=slot), lineage.id)
            lineage.cache_slot = slot
        payload["prompt_cache_key"] = lineage.cache_key
        job.notes.append(f"set prompt_cache_key {lineage.cache_key}")
    if lineage.cache_slot is not None:
        shards.observe(prefix.with_params(cache_slot=lineage.cache_slot), at)
    kept = retention(job.info, job.policy.keep_warm)
    if kept is not None and "prompt_cache_retention" not in payload:
        payload["prompt_cache_retention"] = kept
        job.notes.append(f"set prompt_cache_retention {kept}")


def rewrite(
    dialect: str,
    payload: dict[str, Any],
    request: Request,
    lineage: LineageState,
    info: ModelInfo,
    *,
    policy: CachePolicy,
    shards: KeyShards,
    at: float,
) -> Rewritten:
    """Rewrite `payload` (the client's parsed body, changed in place) for `lineage`;
    `request` is its parse, whose messages the planner reads."""
    notes: list[str] = []
    _tools(payload, lineage, notes)
    job = _Job(
        payload=payload, request=request, lineage=lineage, info=info, policy=policy, notes=notes
    )
    breakpoints: tuple[Breakpoint, ...] = ()
    rolling = lineage.rolling
    if dialect == "anthropic":
        breakpoints, rolling = _anthropic(job)
    else:
        _openai(job, shards, at)
    prefix = request.prefix
    tools = payload.get("tools")
    if isinstance(tools, list) and dialect == "anthropic" and lineage.tools_memo is not None:
        sent = lineage.tools_memo[3]  # the tools as forwarded, before any marker
        if sent != prefix.tools:
            prefix = replace(prefix, tools=sent)
    elif isinstance(tools, list) and [_name(t) for t in tools] != list(prefix.tool_names):
        by_name = dict(zip(prefix.tool_names, prefix.tools, strict=True))
        prefix = replace(prefix, tools=tuple(by_name[_name(t)] for t in tools))
    forwarded = replace(
        request,
        prefix=prefix,
        breakpoints=breakpoints,
        cache_key=payload.get("prompt_cache_key") if dialect != "anthropic" else None,
    )
    return Rewritten(payload=payload, request=forwarded, rewrites=tuple(notes), rolling=rolling)


def encode(payload: dict[str, Any]) -> bytes:
    """The rewritten body's bytes (compact; what is not rewritten keeps its key order).

    pydantic-core's serializer: it runs before the request can go upstream, and is four
    times faster than `json`. A lone surrogate (which a client may send escaped) has no
    UTF-8 form: such a body goes as `json` writes it, with `\\u` escapes."""
    try:
        return to_json(payload)
    except PydanticSerializationError:
        return json.dumps(payload, separators=(",", ":")).encode("ascii")
