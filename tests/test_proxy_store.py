"""The recording proxy's tables, on both backends: exchanges go in and come back whole."""

from __future__ import annotations

from stoker.store.base import SqlEventStore
from stoker.wire.exchange import Exchange
from stoker.wire.fingerprint import SlotFingerprints
from stoker.wire.record import CacheRecord, Explanation
from stoker.wire.request import Breakpoint
from stoker.wire.usage import Usage


def _record(seq: int) -> CacheRecord:
    return CacheRecord(
        session_id="lin_a",
        seq=seq,
        role="main",
        provider="anthropic",
        model="claude-sonnet-4-6",
        started_at=100.0 + seq,
        fingerprints=SlotFingerprints(
            params="p",
            tools=("t1",),
            system="s",
            history="h",
            message_count=seq + 1,
            new_from=seq,
            new_messages=(("b1", "b2"),),
        ),
        breakpoints=(Breakpoint(message=None, ttl="1h"), Breakpoint(message=seq, block=0)),
        usage=Usage(uncached=3, written_5m=2000, read=1500 * seq, output=12),
        cost_usd=0.01,
        explanation=Explanation(verdict="hit" if seq else "first", detail="x"),
    )


def _exchange(seq: int, **changes: object) -> Exchange:
    fields: dict[str, object] = {
        "lineage_id": "lin_a",
        "seq": seq,
        "tenant": "t_123",
        "dialect": "anthropic",
        "path": "/v1/messages",
        "mode": "optimize",
        "started_at": 100.0 + seq,
        "duration": 0.25,
        "status": 200,
        "stream": seq == 1,
        "model": "claude-sonnet-4-6",
        "title": "Audit the service",
        "messages_from": seq,
        "request": {"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "é"}]},
        "response": {"id": f"msg_{seq}"},
        "record": _record(seq),
        "rewrites": (f"added a breakpoint at messages[{seq}].content[0]",),
        "cannot_fix": ("system[0] at byte 12: timestamp-like",) if seq else (),
        "ideal": 2000 if seq == 0 else 40,
    }
    fields.update(changes)
    return Exchange(**fields)  # type: ignore[arg-type]


async def test_exchanges_round_trip_and_group_by_lineage(store: SqlEventStore) -> None:
    first, second = _exchange(0), _exchange(1)
    failed = _exchange(
        0,
        lineage_id="lin_b",
        parent_id="lin_a",
        record=None,
        response=None,
        status=502,
        error="upstream unreachable",
        title="Another",
    )
    await store.record_exchange(first)
    await store.record_exchanges([second, failed])
    lineages = await store.proxy_lineages()
    assert [(x.id, x.parent_id, x.calls, x.title) for x in lineages] == [
        ("lin_a", None, 2, "Audit the service"),
        ("lin_b", "lin_a", 1, "Another"),
    ]
    assert await store.proxy_calls("lin_a") == [first, second]
    assert await store.proxy_calls("lin_b") == [failed]
    assert await store.proxy_calls("missing") == []
