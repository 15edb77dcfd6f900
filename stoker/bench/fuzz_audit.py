"""The fuzzer's two accountants, each checking every provider call on its own terms.

- `Auditor` asks the simulator's exact accountant what a call could read at best: the
  longest prefix of it that a live entry covers, wherever that entry is, with no lookback
  limit. Every call must read exactly that.
- `UsageLedger` knows nothing of the simulator. It sees what any client sees: the
  request it sent, the clock, the model table's public facts (minimum length, TTLs) and
  the usage the provider reported. From those alone it keeps its own book of the entries
  every call wrote (the reported writes must add up to the request's breakpoints) and
  read (a read must end at a live entry it wrote down), and judges each call: it read
  everything its book holds (`read_all`), it read less because a longer entry expired
  (`expired`), or it read less than a live entry held (`missed`). Each judgement must
  agree with the verdict of the call's record (`disagreements`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from stoker.cache.accounting._anthropic_render import Rendered, render
from stoker.cache.models import model_info
from stoker.providers.base import CallContext, Completion, ProviderWrapper
from stoker.providers.sim.provider import SimProvider
from stoker.wire.dialects import dialect_module
from stoker.wire.dialects._chain import ChainMemo
from stoker.wire.record import CacheRecord
from stoker.wire.request import Request
from stoker.wire.usage import Usage

BROKEN = frozenset({"diverged", "lookback", "unexplained", "cold", "evicted", "concurrent"})
LIFETIME = {"5m": 300.0, "1h": 3600.0}  # Anthropic's documented TTLs

Judged = Literal["read_all", "expired", "missed", "inconsistent"]


@dataclass(slots=True, kw_only=True)
class Violation:
    """A call that read less than a live entry covered."""

    call: int
    session_id: str
    read: int
    best: int
    why: str


@dataclass(frozen=True, slots=True, kw_only=True)
class _Entry:
    tokens: int
    ttl: str
    expires_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Judgement:
    """What the usage ledger concluded about one call."""

    session_id: str
    judged: Judged
    read: int
    live: int  # the longest prefix of the call a live entry in the book covered
    known: int  # the same, live or not
    detail: str = ""
    first: bool = False  # the session's first call


class UsageLedger:
    """The cache as reported usage shows it (see the module docstring). Not thread-safe."""

    def __init__(self) -> None:
        self._book: dict[str, _Entry] = {}
        self._memo = ChainMemo()
        self.judgements: dict[str, list[Judgement]] = {}

    def render(self, payload: dict[str, Any], workspace: str) -> Rendered:
        """The request's blocks and breakpoints, as the client can work them out."""
        info = model_info(str(payload["model"]))
        return render(payload, info, workspace=workspace, collapse_tool_runs=True, memo=self._memo)

    def judge(
        self,
        rendered: Rendered,
        usage: Usage,
        *,
        at: float,
        model: str,
        session_id: str,
    ) -> Judgement:
        """Judge a call that started at `at` against the book, then write its usage in."""
        keys = [rendered.key(i) for i in range(len(rendered.blocks))]
        cums = [b.cum for b in rendered.blocks]
        live = max((c for k, c in zip(keys, cums, strict=True) if self._live(k, at)), default=0)
        known = max((c for k, c in zip(keys, cums, strict=True) if k in self._book), default=0)
        read = usage.read
        problem = self._enter(rendered, keys, usage, at=at, model=model)
        if problem:
            judged: Judged = "inconsistent"
        elif read < live:
            judged, problem = "missed", f"read {read} though a live entry covered {live}"
        elif read < known:
            judged, problem = "expired", f"read {read}; an entry for {known} had expired"
        else:
            judged = "read_all"
        found = Judgement(
            session_id=session_id,
            judged=judged,
            read=read,
            live=live,
            known=known,
            detail=problem,
            first=session_id not in self.judgements,
        )
        self.judgements.setdefault(session_id, []).append(found)
        return found

    def _live(self, key: str, at: float) -> bool:
        entry = self._book.get(key)
        return entry is not None and entry.expires_at > at

    def _enter(
        self, rendered: Rendered, keys: list[str], usage: Usage, *, at: float, model: str
    ) -> str:
        """Write a call's usage into the book; what does not add up, else ""."""
        read, markers, blocks = usage.read, rendered.markers, rendered.blocks
        written = usage.written_1h + usage.written_5m
        last = blocks[markers[-1].index].cum if markers else 0
        if not markers or last < model_info(model).min_cacheable:
            return "" if read == written == 0 else f"cached {read}+{written} with nothing to cache"
        if read + written != last:
            return f"read {read} + wrote {written} is not the {last} the last breakpoint ends at"
        long_end = max(
            (c for m in markers if m.ttl == "1h" and (c := blocks[m.index].cum) > read),
            default=read,
        )
        if read + usage.written_1h != long_end:
            return f"wrote {usage.written_1h} at 1h though the 1-hour breakpoints end at {long_end}"
        hit = next(
            (k for k, b in zip(keys, blocks, strict=True) if b.cum == read and self._live(k, at)),
            None,
        )
        if read and hit is None:
            return f"read {read} tokens, but no live entry of that length is on this request"
        minimum = model_info(model).min_cacheable
        for marker in markers:
            cum = blocks[marker.index].cum
            if cum >= minimum and keys[marker.index] != hit:
                self._write(keys[marker.index], cum, marker.ttl, at)
        if hit is not None:  # a read renews the entry for its own TTL
            entry = self._book[hit]
            expires = max(entry.expires_at, at + LIFETIME[entry.ttl])
            self._book[hit] = replace(entry, expires_at=expires)
        return ""

    def _write(self, key: str, tokens: int, ttl: str, at: float) -> None:
        """A write, or the free renewal of a live entry a breakpoint covers again (it keeps
        its latest expiry)."""
        old, expires = self._book.get(key), at + LIFETIME[ttl]
        if old is not None and old.expires_at > at:
            keep = old.ttl if old.expires_at > expires else ttl
            self._book[key] = replace(old, ttl=keep, expires_at=max(old.expires_at, expires))
        else:
            self._book[key] = _Entry(tokens=tokens, ttl=ttl, expires_at=expires)


def disagreement(judgement: Judgement, record: CacheRecord) -> str | None:
    """Why the ledger's judgement and the record's verdict cannot both be true, or None."""
    verdict = record.explanation.verdict
    where = f"{record.session_id} #{record.seq} ({record.purpose}): {verdict!r}"
    if judgement.judged in ("missed", "inconsistent"):
        return f"{where}; usage alone: {judgement.detail}"
    if record.declared_break or verdict == "declared" or record.purpose != "turn":
        return None
    if judgement.judged == "expired" and verdict != "expired":
        return f"{where}, but usage alone says expired: {judgement.detail}"
    if judgement.judged == "read_all" and (verdict == "expired" or verdict in BROKEN):
        return f"{where}, but usage alone says it read all it could ({judgement.read})"
    return None


class Auditor(ProviderWrapper):
    """The simulator, checked call by call: what each call read against the best it could
    (by the simulator's own entries), and by the usage ledger (by the usage alone)."""

    def __init__(
        self,
        inner: SimProvider,
        ledger: UsageLedger | None = None,
    ) -> None:
        super().__init__(inner)
        self.sim = inner
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.violations: list[Violation] = []
        self.calls = 0

    async def complete(self, request: Request, context: CallContext) -> Completion:
        payload = dialect_module("anthropic").render_request(request)
        at = self.sim.clock.now()
        rendered = self.ledger.render(payload, self.sim.workspace)
        entries = self.sim.engine.anthropic.entries(self.sim.workspace)
        best = 0
        for i, block in enumerate(rendered.blocks):
            entry = entries.get(rendered.key(i))
            if entry is not None and entry.live(at):
                best = block.cum
        completion = await self.sim.complete(request, context)
        self.calls += 1
        read = completion.usage.read
        self.ledger.judge(
            rendered,
            completion.usage,
            at=at,
            model=request.prefix.params.model,
            session_id=context.session_id,
        )
        if read != best:
            self.violations.append(
                Violation(
                    call=self.calls,
                    session_id=context.session_id,
                    read=read,
                    best=best,
                    why=f"{dict(completion.facts)}",
                )
            )
        return completion
