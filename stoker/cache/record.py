"""Builds the `CacheRecord` of one provider call: fingerprints, breakpoints, usage, cost, why."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace

from stoker.cache.explain import explain
from stoker.cache.models import ModelInfo
from stoker.cache.pricing import cost_usd
from stoker.wire.fingerprint import fingerprints
from stoker.wire.record import CacheRecord, Explanation
from stoker.wire.request import Request
from stoker.wire.usage import Usage


def build_record(
    *,
    session_id: str,
    seq: int,
    role: str,
    provider: str,
    info: ModelInfo,
    request: Request,
    previous: Request | None,
    previous_started_at: float | None,
    previous_written: int | None = None,
    previous_cached: int | None = None,
    started_at: float,
    usage: Usage,
    history: str,
    new_from: int,
    retries: int = 0,
    facts: tuple[tuple[str, str], ...] = (),
    declared_break: str | None = None,
    ttl_seconds: float = 300.0,
    stripped: bool = False,
) -> CacheRecord:
    """The record of a call, with its explanation against the session's previous request.

    A partial expiry's explanation ends with what writing the lost part again cost.
    `stripped`: the model dropped thinking the previous call sent (see `explain`)."""
    gap = None if previous_started_at is None else started_at - previous_started_at
    explanation = explain(
        previous,
        request,
        usage=usage,
        facts=facts,
        gap_seconds=gap,
        declared_break=declared_break,
        ttl_seconds=ttl_seconds,
        previous_written=previous_written,
        previous_cached=previous_cached,
        stripped=stripped,
    )
    if explanation.verdict == "expired" and previous_cached and 0 < usage.read < previous_cached:
        lost = Usage(written_5m=previous_cached - usage.read)
        paid, instead = cost_usd(lost, info), cost_usd(Usage(read=lost.written_5m), info)
        if paid is not None and instead is not None:
            note = (
                f"; writing those {lost.written_5m:,} tokens again cost ${paid - instead:.6f} more"
            )
            explanation = replace(explanation, detail=explanation.detail + note)
    elif explanation.verdict == "expired" and previous is None:
        explanation = first_expiry(explanation, usage, info)
    return CacheRecord(
        session_id=session_id,
        seq=seq,
        role=role,
        provider=provider,
        model=request.prefix.params.model,
        started_at=started_at,
        fingerprints=fingerprints(request, history=history, new_from=new_from),
        breakpoints=request.breakpoints,
        usage=usage,
        cost_usd=cost_usd(usage, info),
        retries=retries,
        declared_break=declared_break,
        explanation=explanation,
    )


def first_expiry(explanation: Explanation, usage: Usage, info: ModelInfo) -> Explanation:
    """A session's first call that found its prefix's entry expired (written before it by
    a fork, a sibling or an earlier process): no time policy of its own was in charge yet
    (`classification="first call"`), and what writing instead of reading cost."""
    written = usage.written_5m + usage.written_1h
    paid, instead = (
        cost_usd(usage, info),
        cost_usd(replace(usage, read=usage.read + written, written_5m=0, written_1h=0), info),
    )
    note = ""
    if written and paid is not None and instead is not None:
        note = (
            f"; this call wrote {written:,} tokens, up to ${paid - instead:.6f} more than "
            "reading them from a live entry"
        )
    return replace(explanation, detail=explanation.detail + note, classification="first call")


_observers: ContextVar[tuple[Callable[[CacheRecord], object], ...]] = ContextVar(
    "stoker_record_observers", default=()
)


@contextmanager
def observe_records(callback: Callable[[CacheRecord], object]) -> Iterator[None]:
    """Call `callback` with every record made in this context (tasks started in it included).

    This is how a test suite checks every call of every test for undeclared cache breaks
    without the agent knowing about tests.
    """
    token = _observers.set((*_observers.get(), callback))
    try:
        yield
    finally:
        _observers.reset(token)


def notify(record: CacheRecord) -> None:
    for callback in _observers.get():
        callback(record)
