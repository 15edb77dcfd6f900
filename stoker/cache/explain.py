"""Names the byte that moved: the first diverging slot between two requests, and why.

Order follows the provider's render order (params, tools, system, messages), so the
first difference found is the one that invalidated everything after it. Inside a slot
it walks the JSON to a key path and classifies the change (reorder, whitespace,
timestamp-like, id-like, added/removed, parameter change). When nothing moved and the
call still read less than expected, the provider's own facts (the simulator reports
them; real providers leave a time gap) say why: TTL, lookback, minimum, concurrency.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from stoker.wire.blocks import ImageBlock, block_to_dict
from stoker.wire.record import Explanation
from stoker.wire.request import Request
from stoker.wire.usage import Usage

_TIMESTAMP = re.compile(r"\d{1,2}:\d{2}(:\d{2})?|\d{4}-\d{2}-\d{2}|\b\d{10,13}\b")
_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-|\b[0-9a-f]{12,}\b|\b[A-Za-z0-9_-]{20,}\b")

FACT_CAUSES = {
    "expired",
    "lookback",
    "below_minimum",
    "concurrent",
    "evicted",
    "no_breakpoints",
    "cold",
    "overflow",
    "rerouted",
}
_PARTIAL_CAUSES = (
    "lookback",
    "below_minimum",
    "overflow",
    "rerouted",
)  # named even when some was read
_VERDICT = {"no_breakpoints": "no_breakpoint"}  # the accountant's cause -> the record's verdict


def _first_diff(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def first_image(previous: Request, current: Request) -> str | None:
    """Where `current`'s first image is when `previous` had none ("messages[i].content[k]"),
    else None: Anthropic keys a conversation with images apart from one without."""
    if any(isinstance(b, ImageBlock) for m in previous.messages for b in m.content):
        return None
    for i, message in enumerate(current.messages):
        for k, block in enumerate(message.content):
            if isinstance(block, ImageBlock):
                return f"messages[{i}].content[{k}]"
    return None


def classify_text(old: str, new: str) -> str:
    """What kind of edit turned `old` into `new`."""
    if "".join(old.split()) == "".join(new.split()):
        return "whitespace"
    i = _first_diff(old, new)
    lo = max(0, i - 24)
    window_old, window_new = old[lo : i + 24], new[lo : i + 24]
    if _TIMESTAMP.search(window_old) or _TIMESTAMP.search(window_new):
        return "timestamp-like"
    if _ID.search(window_old) or _ID.search(window_new):
        return "id-like"
    return "changed"


def _walk(old: Any, new: Any, path: str) -> tuple[str, str]:
    """Key path of the first difference inside two JSON values, and its classification."""
    if isinstance(old, dict) and isinstance(new, dict):
        if list(old) != list(new):
            if set(old) == set(new):
                return path, "reorder"
            added = [k for k in new if k not in old]
            removed = [k for k in old if k not in new]
            key = (added or removed)[0]
            return f"{path}.{key}", "added" if added else "removed"
        for key in old:
            if old[key] != new[key]:
                return _walk(old[key], new[key], f"{path}.{key}")
        return path, "reorder"
    if isinstance(old, list) and isinstance(new, list):
        for i, (a, b) in enumerate(zip(old, new, strict=False)):
            if a != b:
                return _walk(a, b, f"{path}[{i}]")
        return path, "added" if len(new) > len(old) else "removed"
    if isinstance(old, str) and isinstance(new, str):
        return path, classify_text(old, new)
    if type(old) is not type(new):
        return path, "re-shaped"
    return path, "changed"


def _diff_params(prev: Request, cur: Request) -> Explanation | None:
    a, b = prev.prefix.params.to_dict(), cur.prefix.params.to_dict()
    for key in dict.fromkeys([*a, *b]):
        if a.get(key) != b.get(key):
            return _diverged(
                f"params.{key}",
                "parameter change",
                f"{key} changed from {a.get(key)!r} to {b.get(key)!r}",
            )
    return None


def _diff_tools(prev: Request, cur: Request) -> Explanation | None:
    old, new = prev.prefix.tools, cur.prefix.tools
    if old == new:
        return None
    old_names, new_names = prev.prefix.tool_names, cur.prefix.tool_names
    if sorted(old) == sorted(new):
        return _diverged(
            "tools",
            "reorder",
            f"same tools in another order: {list(old_names)} -> {list(new_names)}",
        )
    for i, (a, b) in enumerate(zip(old, new, strict=False)):
        if a != b:
            if old_names[i] != new_names[i] and set(old_names) != set(new_names):
                gone = sorted(set(old_names) - set(new_names))
                came = sorted(set(new_names) - set(old_names))
                return _diverged(
                    f"tools[{i}]", "added/removed", f"tools added {came}, removed {gone}"
                )
            path, cls = _walk(json.loads(a), json.loads(b), f"tools[{i}]")
            return _diverged(
                path,
                cls,
                f"definition of tool {new_names[i]!r} changed",
                offset=_first_diff(a.decode("utf-8"), b.decode("utf-8")),
            )
    came = sorted(set(new_names) - set(old_names))
    gone = sorted(set(old_names) - set(new_names))
    return _diverged(
        f"tools[{min(len(old), len(new))}]", "added/removed", f"tools added {came}, removed {gone}"
    )


def _diff_system(prev: Request, cur: Request) -> Explanation | None:
    a, b = prev.prefix.system, cur.prefix.system
    if a == b:
        return None
    i = _first_diff(a, b)
    return _diverged(
        "system[0]",
        classify_text(a, b),
        f"system prompt changed: {a[max(0, i - 10) : i + 30]!r} -> {b[max(0, i - 10) : i + 30]!r}",
        offset=len(a[:i].encode("utf-8")),
    )


def _diff_messages(prev: Request, cur: Request) -> Explanation | None:
    old, new = prev.messages, cur.messages
    if new[: len(old)] == old:
        return None  # append-only: tuple equality checks identity first, so this is cheap
    for j, a in enumerate(old):
        if j >= len(new):
            return _diverged(
                f"messages[{j}]",
                "removed",
                f"history shrank from {len(old)} to {len(new)} messages",
            )
        b = new[j]
        if a is b or (a.block_fingerprints == b.block_fingerprints and a.role == b.role):
            continue
        if a.role != b.role:
            return _diverged(f"messages[{j}]", "changed", f"role {a.role} became {b.role}")
        for k, (x, y) in enumerate(zip(a.content, b.content, strict=False)):
            if x != y:
                path, cls = _walk(block_to_dict(x), block_to_dict(y), f"messages[{j}].content[{k}]")
                return _diverged(
                    path, cls, f"an earlier {a.role} message was edited instead of appended to"
                )
        return _diverged(
            f"messages[{j}].content[{min(len(a.content), len(b.content))}]",
            "added/removed",
            f"an earlier {a.role} message gained or lost blocks",
        )
    return None


def _diverged(
    slot: str, classification: str, detail: str, *, offset: int | None = None
) -> Explanation:
    return Explanation(
        verdict="diverged", slot=slot, offset=offset, classification=classification, detail=detail
    )


def first_divergence(prev: Request, cur: Request) -> Explanation | None:
    """The first slot, in render order, where `cur` does not extend `prev`; None if it does."""
    for diff in (_diff_params, _diff_tools, _diff_system, _diff_messages):
        found = diff(prev, cur)
        if found is not None:
            return found
    return None


def _from_facts(
    facts: Sequence[tuple[str, str]], usage: Usage, *, skip: Sequence[str] = ()
) -> Explanation | None:
    """The miss the provider's facts name: a live entry left past the lookback first (a
    breakpoint closer to it would have read it; what expired on the way is said too),
    else the first fact that explains the read (a partial read only by a partial cause).
    """
    known = [(c, d) for c, d in facts if c in FACT_CAUSES and c not in skip]
    lookback = [d for c, d in known if c == "lookback"]
    if lookback:
        rest = [d for c, d in known if c != "lookback"]
        return Explanation(verdict="lookback", detail="; ".join([*lookback[:1], *rest]))
    for cause, detail in known:
        if usage.read == 0 or cause in _PARTIAL_CAUSES:
            return Explanation(verdict=_VERDICT.get(cause, cause), detail=detail)  # type: ignore[arg-type]
    return None


def explain(
    previous: Request | None,
    current: Request,
    *,
    usage: Usage,
    facts: Sequence[tuple[str, str]] = (),
    gap_seconds: float | None = None,
    declared_break: str | None = None,
    ttl_seconds: float = 300.0,
    previous_written: int | None = None,
    previous_cached: int | None = None,
    stripped: bool = False,
) -> Explanation:
    """Why `current` read what it read. `facts` are (cause, detail) pairs from the provider.

    `previous_cached` is what the previous call left cached (read + written): a call that
    reads some but less of it, nothing having moved, lost the rest to expiry, and says
    which entry and how long it had been idle (a partial expiry is still a miss).
    `stripped`: the model dropped thinking the previous call sent (a new turn on a model
    that strips earlier thinking), so what it cached past that point can never be read:
    a shorter read is no expiry unless the provider says one happened.
    A session's first call (`previous` is None) is `first` only when nothing it could
    have read was ever there: an entry for its prefix that expired before it (written by
    a fork, a sibling, another session of the agent or an earlier process) is a miss.
    """
    if declared_break:
        return Explanation(verdict="declared", detail=declared_break)
    if previous is None:
        for cause, detail in facts:
            if cause in ("below_minimum", "no_breakpoints"):
                return Explanation(verdict=_VERDICT.get(cause, cause), detail=detail)  # type: ignore[arg-type]
        # a session with no call of its own still finds what its lineage or fleet left
        missed = _from_facts(facts, usage, skip=("cold",))
        if missed is not None:
            return missed
        expired = next((detail for cause, detail in facts if cause == "expired"), None)
        if usage.read and expired is not None:  # a longer entry than it read was there
            return Explanation(verdict="expired", detail=f"read {usage.read} only: {expired}")
        if usage.read:
            return Explanation(verdict="hit", detail=f"read {usage.read} tokens on a first call")
        return Explanation(verdict="first", detail="first call of this session")
    diverged = first_divergence(previous, current)
    if diverged is not None:
        return diverged
    missed = _from_facts(facts, usage)
    if missed is not None:
        return missed
    if previous_written == 0 and usage.read == 0:
        return Explanation(
            verdict="first",
            detail="the previous call wrote nothing to the cache (below the minimum or no "
            "breakpoint), so there was nothing to read yet",
        )
    partial = previous_cached is not None and 0 < usage.read < previous_cached
    expired = next((detail for cause, detail in facts if cause == "expired"), None)
    if partial and expired is not None:
        return Explanation(verdict="expired", detail=f"read {usage.read} only: {expired}")
    if partial and not stripped and gap_seconds is not None and gap_seconds > ttl_seconds:
        return Explanation(
            verdict="expired",
            detail=f"read {usage.read} of the {previous_cached} tokens the previous call left "
            f"cached: {gap_seconds:.0f} s idle, longer than the {ttl_seconds:.0f} s TTL of the "
            "newer entry",
        )
    if partial and (image := first_image(previous, current)) is not None:
        return Explanation(
            verdict="hit",
            slot=image,
            classification="first image",
            detail=f"read {usage.read} of the {previous_cached} tokens the previous call left "
            "cached: the first image of a conversation changes the cache key of its messages "
            "(Anthropic), so they were written again; the calls after it read them",
        )
    if usage.read > 0:
        return Explanation(verdict="hit", detail=f"read {usage.read} of {usage.input_total} tokens")
    if gap_seconds is not None and gap_seconds > ttl_seconds:
        return Explanation(
            verdict="expired",
            detail=f"{gap_seconds:.0f} s since the previous call, "
            f"longer than the {ttl_seconds:.0f} s TTL",
        )
    return Explanation(verdict="unexplained", detail="nothing moved and no cache was read")
