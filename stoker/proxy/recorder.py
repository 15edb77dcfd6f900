"""Turns a finished proxied call into an `Exchange`: its lineage, usage, record and why.

The usage is what the upstream reported, and it has the last word. The facts behind a
miss (an entry expired, a write outside the lookback, a prefix under the minimum) come
from a shadow of the provider's cache (`stoker.proxy.shadow`), fed every body the proxy
forwarded; a fact about the cache's state stands only where the reported read fell
short of what the lineage had cached (the shadow is a model, the usage a measurement).
The explanation is the one Stoker's own sessions get (`stoker.cache.record.build_record`):
the first slot that moved against the lineage's previous call, with its key path and
class. What a call could have read (`sent_before`) and what no earlier call had sent
(`ideal`) are in the provider's counts too: from the input it reported for the longest
earlier call of the tenant that this one extends (its messages a prefix of this one's;
on the same wire and model family, and for the ideal with the same model, tools and
system too, since a changed prefix makes everything after it new to the cache).

Lineage state lives in memory (`LineageIndex`); the store keeps what was recorded.
`stoker proxy` runs the recorder in a process of its own (`recorder_process`).
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from stoker.cache.models import ModelInfo, fallback_info, model_info
from stoker.cache.record import build_record
from stoker.cache.robust import carried
from stoker.errors import ConfigError, StokerError
from stoker.proxy.capture import response_body
from stoker.proxy.lineage import (
    Admission,
    LineageIndex,
    LineageState,
    Placement,
    chain_hashes,
    family_of,
)
from stoker.proxy.shadow import ShadowCache
from stoker.wire.dialects import dialect_module
from stoker.wire.dialects._chain import ChainMemo
from stoker.wire.exchange import Exchange
from stoker.wire.fingerprint import EMPTY_CHAIN, key_of
from stoker.wire.record import CacheRecord, Explanation
from stoker.wire.request import Request
from stoker.wire.usage import Usage

log = logging.getLogger(__name__)

_PROVIDER = {"anthropic": "anthropic", "openai_chat": "openai", "openai_responses": "openai"}
MAX_GAPS = 50
MAX_ENDS = 100_000  # earlier calls' ends remembered (with their reported input), LRU
# What the shadow may say about the cache's state; each stands only where the provider's
# usage shows a shortfall. (No breakpoint, or a prefix under the minimum, is the request's
# own shape, known for sure.)
_STATE_FACTS = frozenset({"expired", "lookback", "concurrent", "evicted", "cold", "overflow"})


class ExchangeSink(Protocol):
    """Where exchanges go: the SQL store (`ProxyLog`), or a list in a test."""

    async def record_exchange(self, exchange: Exchange) -> None: ...


@dataclass(slots=True, kw_only=True)
class Call:
    """One forwarded call as the proxy saw it, handed to the recorder when it is over."""

    tenant: str
    dialect: str
    path: str
    mode: str
    started_at: float
    origin: str = ""  # in process: where the client sent it (the proxy has one upstream)
    duration: float = 0.0
    status: int = 0
    streamed: bool = False
    client: dict[str, Any] | None = None  # the client's body, parsed (None: not JSON)
    body: bytes = b""  # the bytes forwarded upstream
    sent: dict[str, Any] | None = None  # their parse (None: not a JSON object)
    request: Request | None = None  # its parse
    admission: Admission | None = None  # its lineage, when placed before forwarding
    response: bytes = b""
    rewrites: tuple[str, ...] = ()
    rolling: Any = None
    purpose: str = "turn"
    error: str | None = None
    auth: list[tuple[str, str]] = field(default_factory=list, repr=False)


def info_of(model: str, dialect: str) -> ModelInfo:
    """The model's facts, or its provider's usual ones for a model not in the table."""
    try:
        return model_info(model)
    except ConfigError:
        return fallback_info(model, "anthropic" if dialect == "anthropic" else "openai")


def messages_key(body: dict[str, Any]) -> str:
    return "messages" if isinstance(body.get("messages"), list) else "input"


class Recorder:
    """Lineages, the shadow cache per tenant, and the sink the exchanges go to.

    `measure=False` keeps only the lineages (placing calls and moving each lineage on
    when its response is read): what a proxy that records in another process still
    needs for optimize mode's rewrites and keep-warm, without the costly half.
    """

    def __init__(self, sink: ExchangeSink | None, *, measure: bool = True) -> None:
        self.sink = sink
        self.measure = measure
        self.shadow = ShadowCache()
        self.index = LineageIndex()
        self.memo = ChainMemo()
        self._unread = 0
        self._sink_failed = False
        # (tenant, wire, prefix key or model family, chain of the messages) -> the input the
        # provider reported for a call that sent exactly that: what a later call extending
        # it shares (with the same prefix), or could have read (had nothing moved)
        self._ends: OrderedDict[tuple[str, str, str, str], int] = OrderedDict()

    def parse(self, dialect: str, body: dict[str, Any]) -> Request:
        """The request a body describes (a `WireError` when it is not one of the API's)."""
        return dialect_module(dialect).parse_request(body, memo=self.memo)  # type: ignore[no-any-return]

    def admit(self, call: Call, placement: Placement | None = None) -> Admission | None:
        """Place the call in its lineage (once): before forwarding in optimize mode, after
        the response in audit mode, where nothing may delay the bytes; where `placement`
        says when the proxy placed it in another process."""
        if call.admission is None and call.request is not None:
            lineage = self.index.get(placement.lineage_id) if placement is not None else None
            if placement is not None and placement.ping and lineage is not None:
                call.admission = self.index.admit_ping(lineage)
            else:
                call.admission = self.index.admit(
                    call.tenant, call.dialect, call.request, at=call.started_at, placement=placement
                )
        return call.admission

    async def record(self, call: Call, placement: Placement | None = None) -> Exchange:
        """Build the call's exchange, update its lineage, and hand it to the sink."""
        exchange = self.build(call, placement)
        await self.deliver(exchange)
        return exchange

    def build(self, call: Call, placement: Placement | None = None) -> Exchange:
        """The call's exchange, its lineage moved on. A call it cannot make sense of is
        still recorded, as unread, with the reason."""
        try:
            return self._exchange(call, placement)
        except Exception as exc:  # a client's body must not cost the record of the call
            log.warning("a proxied call could not be read for its record: %r", exc)
            return self._unread_exchange(call, f"the call could not be read: {type(exc).__name__}")

    async def deliver(self, exchange: Exchange) -> None:
        """Hand an exchange to the sink; a sink that fails is logged, never raised."""
        if self.sink is not None:
            try:
                await self.sink.record_exchange(exchange)
            except Exception as exc:  # a full disk must not break the client's traffic
                # once, not once a call: the client's traffic goes on either way
                (log.debug if self._sink_failed else log.warning)(
                    "could not record a proxied call (the call itself went through; further "
                    "failures are logged at debug level): %r",
                    exc,
                )
                self._sink_failed = True

    def _exchange(self, call: Call, placement: Placement | None) -> Exchange:
        if call.sent is None and call.error is None:
            try:
                sent = json.loads(call.body)
                call.sent = sent if isinstance(sent, dict) else None
                call.client = call.sent
            except (ValueError, RecursionError):  # RecursionError: nested past the limit
                call.error = "the request body is not JSON"
        if call.request is None and call.sent is not None and call.error is None:
            try:
                call.request = self.parse(call.dialect, call.sent)
            except StokerError as exc:
                call.error = f"the request is not one the {call.dialect} API reads: {exc}"
        admission = self.admit(call, placement)
        if admission is None or call.request is None or call.sent is None:
            return self._unread_exchange(call, call.error or "the request body is not JSON")
        lineage = admission.lineage
        base = replace(
            _base(call),
            lineage_id=lineage.id,
            seq=admission.seq,
            parent_id=lineage.parent_id,
            model=call.request.prefix.params.model,
            title=lineage.title,
            messages_from=admission.shared if call.purpose == "turn" else 0,
            request=self._stored_request(call, admission),
        )
        if call.status != 200:
            return replace(base, error=call.error or f"the upstream answered {call.status}")
        try:
            body = response_body(call.dialect, call.response, streamed=call.streamed)
            _, usage = dialect_module(call.dialect).parse_response(body)
        except StokerError as exc:
            return replace(base, error=f"the response could not be read: {exc}")
        if not self.measure:
            self._advance(lineage, call, usage, body)
            return base
        turn = call.purpose == "turn"
        observed = self.shadow.observe(
            call.tenant, call.dialect, call.sent, at=call.started_at, turn=turn
        )
        sent_before = self._sent_before(call, same_prefix=False) if turn else 0
        info = info_of(call.request.prefix.params.model, call.dialect)
        facts = _consistent(observed.facts, usage, admission, info, sent_before)
        record = self._record(call, admission, usage, facts)
        self._advance(lineage, call, usage, body)
        lineage.account, lineage.since_turn = carried(
            lineage.account, lineage.since_turn, record, info
        )
        ideal = 0
        if turn:
            shared = self._sent_before(call, same_prefix=True)
            self._ended(call, usage)
            if not shared and observed.total:  # a prefix shared with no whole earlier call
                shared = round(observed.shared * usage.input_total / observed.total)
            ideal = max(0, usage.input_total - shared)
        return replace(
            base,
            response=body,
            record=record,
            cannot_fix=self._cannot_fix(call, record),
            ideal=ideal,
            sent_before=sent_before,
        )

    def _space(self, call: Call, *, same_prefix: bool) -> tuple[str, str, str]:
        assert call.request is not None
        prefix = call.request.prefix
        within = key_of(prefix) if same_prefix else family_of(prefix.params.model, call.dialect)
        return (call.tenant, call.dialect, within)

    def _sent_before(self, call: Call, *, same_prefix: bool) -> int:
        """The reported input of the longest earlier call this one extends (0: none)."""
        assert call.request is not None
        space = self._space(call, same_prefix=same_prefix)
        for chain in reversed(chain_hashes(call.request.messages)):
            total = self._ends.get((*space, chain))
            if total is not None:
                self._ends.move_to_end((*space, chain))
                return total
        return 0

    def _ended(self, call: Call, usage: Usage) -> None:
        assert call.request is not None
        hashes = chain_hashes(call.request.messages)
        if hashes:
            for same in (True, False):
                self._ends[(*self._space(call, same_prefix=same), hashes[-1])] = usage.input_total
            while len(self._ends) > MAX_ENDS:
                self._ends.popitem(last=False)

    def _unread_exchange(self, call: Call, error: str) -> Exchange:
        """A call that is not a request of its API, recorded in its tenant's unread list."""
        self._unread += 1
        unread = f"pl_unread_{call.tenant[2:]}"
        return replace(_base(call), lineage_id=unread, seq=self._unread, error=error)

    def _stored_request(self, call: Call, admission: Admission) -> dict[str, Any]:
        body = call.client if call.client is not None else call.sent or {}
        key = messages_key(body)
        items = body.get(key)
        if call.purpose != "turn" or not isinstance(items, list):
            return dict(body)
        return {**body, key: items[admission.shared :]}

    def _record(
        self, call: Call, admission: Admission, usage: Usage, facts: tuple[tuple[str, str], ...]
    ) -> CacheRecord:
        assert call.request is not None
        lineage = admission.lineage
        hashes = chain_hashes(call.request.messages)
        record = build_record(
            session_id=lineage.id,
            seq=admission.seq,
            role="fork" if lineage.parent_id else "main",
            provider=_PROVIDER[call.dialect],
            info=info_of(call.request.prefix.params.model, call.dialect),
            request=call.request,
            previous=admission.previous,
            previous_started_at=admission.previous_started_at,
            previous_written=None if admission.new else lineage.previous_written,
            previous_cached=None if admission.new else lineage.previous_cached,
            started_at=call.started_at,
            usage=usage,
            history=hashes[-1] if hashes else EMPTY_CHAIN,
            new_from=admission.shared,
            facts=facts,
        )
        if call.purpose != "turn":
            explanation = Explanation(verdict="kept_warm", detail=f"{call.purpose} by the proxy")
            record = replace(record, purpose=call.purpose, explanation=explanation)
        return record

    def _advance(
        self, lineage: LineageState, call: Call, usage: Usage, body: dict[str, Any]
    ) -> None:
        """The lineage after a successful call: what it sent, wrote, and when."""
        assert call.request is not None
        lineage.refreshed_at = call.started_at
        if call.purpose == "seal" and usage.written_1h:  # the settled prefix, for an hour
            lineage.live_for = 3600.0
            lineage.previous_cached = usage.read + usage.written
            lineage.answer_tokens = 0
        if call.purpose != "turn":
            return
        if lineage.previous_started_at is not None:
            lineage.gaps = [*lineage.gaps, call.started_at - lineage.previous_started_at][
                -MAX_GAPS:
            ]
        lineage.previous = call.request
        lineage.previous_started_at = call.started_at
        lineage.previous_written = usage.written
        lineage.previous_cached = usage.read + usage.written
        lineage.live_for = 3600.0 if usage.written_1h else 300.0
        lineage.warm_spent = 0.0
        lineage.path = call.path
        lineage.origin = call.origin
        if call.mode == "optimize":
            lineage.rolling = call.rolling
            lineage.last_payload = call.sent
            lineage.auth = call.auth
            content = body.get("content")
            lineage.last_answer = content if isinstance(content, list) and content else None
            lineage.answer_tokens = usage.output

    def _cannot_fix(self, call: Call, record: CacheRecord) -> tuple[str, ...]:
        """What optimize mode saw and left alone: a moved slot only the client can fix."""
        e = record.explanation
        if call.mode != "optimize" or e.verdict != "diverged":
            return ()
        where = e.slot or "?"
        if e.offset is not None:
            where += f" at byte {e.offset}"
        return (f"{where} [{e.classification}]: {e.detail}",)


def _consistent(
    facts: tuple[tuple[str, str], ...],
    usage: Usage,
    admission: Admission,
    info: ModelInfo,
    sent_before: int,
) -> tuple[tuple[str, str], ...]:
    """The shadow's facts, less those about the cache's state when the provider reports
    the call read all the lineage had cached: on OpenAI's regime L everything sent is
    cached implicitly and reads are whole boundaries, so a read within a boundary (and a
    few framing tokens) of what an earlier call sent is a full one."""
    lineage = admission.lineage
    if info.regime == "L":
        cached, slack = sent_before, info.interval + 16
    elif admission.new or lineage.previous_cached is None:
        return facts
    else:
        cached, slack = lineage.previous_cached, 0
    if usage.read + slack < cached:
        return facts
    return tuple((cause, detail) for cause, detail in facts if cause not in _STATE_FACTS)


def _base(call: Call) -> Exchange:
    """What an exchange records of any call, before its lineage is known."""
    return Exchange(
        lineage_id="",
        seq=0,
        tenant=call.tenant,
        dialect=call.dialect,
        path=call.path,
        mode=call.mode,
        started_at=call.started_at,
        duration=call.duration,
        status=call.status,
        stream=call.streamed,
        purpose=call.purpose,
        rewrites=call.rewrites,
        error=call.error,
    )
