"""Gemini's prompt caches, computed exactly, as pure code: the implicit cache and the
explicit cache objects (`cachedContents`). The rules and what is [inferred] are in
docs/provider-caching.md, "Gemini".

* Implicit: an entry ends after every unit of a request whose prefix reaches the model's
  minimum (a unit: the tools, the system instruction, a part, or a `unit`-token piece of
  a text part); a request reads the longest live one. Writes are not reported (they are
  billed as plain input); an entry lives `idle_ttl` seconds after its last use.
* Explicit: `create` stores a head and contents for a TTL (default one hour) and bills
  its tokens once as input plus storage per token-hour; a request naming the cache reads
  all of it, guaranteed, and sends neither tools, system instruction nor tool config.
  `update` moves its expiry, `delete` ends it; storage is billed for the time it existed
  (`refund_on_delete`).

The accountant also keeps each workspace's storage bill (token-seconds), so a test can
hold Stoker's own storage records to what the simulated provider would charge.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field, replace
from typing import Any

from stoker.cache.accounting._google_render import Rendered, render
from stoker.cache.accounting._state import CacheEntry, EntryStore
from stoker.cache.accounting.outcome import CacheBreakpoint, CacheOutcome, MissFact, outcome
from stoker.cache.models import ModelInfo, model_info
from stoker.errors import ConfigError, InvalidRequest, WireError
from stoker.wire.dialects._chain import DEFAULT_CAPACITY, ChainMemo
from stoker.wire.dialects.gemini import parse_request
from stoker.wire.dialects.gemini_caches import CacheInfo, bare_model, parse_duration
from stoker.wire.dialects.gemini_caches import parse_timestamp as read_time
from stoker.wire.usage import Usage

P = "google"
_HEAD = ("tools", "systemInstruction", "toolConfig")
NOT_FOUND = "CachedContent not found (or permission denied)"


@dataclass(frozen=True, slots=True, kw_only=True)
class GoogleSettings:
    """The knobs of the Gemini simulation; defaults follow the docs and the model table.

    `implicit`: False turns the implicit cache off (what Google promises for it: no
    guaranteed saving). `idle_ttl`: overrides the model table's implicit lifetime.
    `default_ttl`: an explicit cache's TTL when its create names none [doc: 1 hour].
    `refund_on_delete`: storage is billed for the time a cache existed, so deleting it
    early stops the bill [inferred; see the docs]. `ttft`: when entries become readable.
    """

    implicit: bool = True
    idle_ttl: float | None = None
    min_cacheable: dict[str, int] = field(default_factory=dict)
    default_ttl: float = 3600.0
    refund_on_delete: bool = True
    ttft: float = 0.0
    max_entries: int | None = None
    forget_after: float = 86400.0
    memo_capacity: int = DEFAULT_CAPACITY

    def __post_init__(self) -> None:
        if self.default_ttl <= 0 or self.ttft < 0:
            raise ConfigError("default_ttl must be positive and ttft not negative")
        if self.max_entries is not None and self.max_entries < 1:
            raise ConfigError(f"max_entries must be at least 1 (or None), not {self.max_entries}")

    def minimum_for(self, info: ModelInfo) -> int:
        return self.min_cacheable.get(info.name, info.min_cacheable)

    def idle_for(self, info: ModelInfo) -> float:
        return self.idle_ttl if self.idle_ttl is not None else info.idle_ttl or 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Held:
    """An explicit cache as the simulated provider keeps it."""

    info: CacheInfo
    head: dict[str, Any]
    contents: tuple[Any, ...]
    updated_at: float
    billed_until: float  # storage is billed up to here (its expiry, or its deletion)


@dataclass(slots=True)
class _Scope:
    entries: EntryStore
    caches: dict[str, Held] = field(default_factory=dict)
    storage: float = 0.0  # token-seconds billed
    created: int = 0  # tokens billed as input by creations


class GoogleAccountant:
    """Implicit entries and explicit caches per workspace (API key). Not thread-safe."""

    __slots__ = ("_ids", "_memo", "_scopes", "_settings")

    def __init__(self, settings: GoogleSettings | None = None) -> None:
        self._settings = settings or GoogleSettings()
        self._scopes: dict[str, _Scope] = {}
        self._memo = ChainMemo(self._settings.memo_capacity)
        self._ids = itertools.count(1)

    @property
    def settings(self) -> GoogleSettings:
        return self._settings

    def reset(self) -> None:
        self._scopes.clear()

    def entries(self, workspace: str = "default") -> dict[str, CacheEntry]:
        scope = self._scopes.get(workspace)
        return scope.entries.snapshot() if scope else {}

    def entry_store(self, workspace: str = "default") -> EntryStore:
        """The workspace's implicit entries themselves (not its explicit caches), as
        `ScopedAccountant.entry_store` gives them."""
        return self._scope(workspace).entries

    def storage_billed(self, workspace: str = "default") -> float:
        """Token-seconds of explicit-cache storage the workspace has been billed."""
        scope = self._scopes.get(workspace)
        return scope.storage if scope else 0.0

    def _scope(self, workspace: str) -> _Scope:
        scope = self._scopes.get(workspace)
        if scope is None:
            s = self._settings
            entries = EntryStore(
                max_entries=s.max_entries, forget_after=s.forget_after, memo_capacity=2
            )
            scope = self._scopes[workspace] = _Scope(entries=entries)
        return scope

    # -- explicit caches ---------------------------------------------------------------------

    def _live(self, scope: _Scope, name: str, at: float) -> Held:
        held = scope.caches.get(name)
        if held is None or held.info.expires_at <= at:
            raise InvalidRequest(NOT_FOUND, provider=P, status=404, code="NOT_FOUND")
        return held

    def create_cache(self, payload: dict[str, Any], *, at: float, workspace: str) -> CacheInfo:
        """Store a cache object; its tokens are billed as input now, storage for its TTL."""
        info = _model(payload.get("model"))
        if info.storage is None:
            raise InvalidRequest(
                f"models/{info.name} is not supported for createCachedContent",
                provider=P,
                param="model",
            )
        ttl = self._ttl(payload, at, default=self._settings.default_ttl)
        head = {k: payload[k] for k in _HEAD if payload.get(k) is not None}
        contents = tuple(payload.get("contents") or ())
        if not contents and not head:
            raise InvalidRequest("Cached content must not be empty", provider=P, param="contents")
        scope = self._scope(workspace)
        body = {"model": info.name, **head, "contents": list(contents)}
        try:  # the shape the API takes: what a request would send
            parse_request(body)
        except WireError as exc:
            raise InvalidRequest(f"Invalid cached content: {exc}", provider=P) from exc
        rendered = render(body, model=info.name, scope=workspace)
        minimum = self._settings.minimum_for(info)
        if rendered.total < minimum:
            raise InvalidRequest(
                f"Cached content is too small. total_token_count={rendered.total}, "
                f"min_total_token_count={minimum}",
                provider=P,
            )
        digest = hashlib.sha256(f"{workspace}/{next(self._ids)}".encode()).hexdigest()[:12]
        cache = CacheInfo(
            name=f"cachedContents/{digest}",
            model=info.name,
            tokens=rendered.total,
            created_at=at,
            expires_at=at + ttl,
            display_name=str(payload.get("displayName") or ""),
        )
        scope.caches[cache.name] = Held(
            info=cache, head=head, contents=contents, updated_at=at, billed_until=at + ttl
        )
        scope.created += cache.tokens
        scope.storage += cache.tokens * ttl
        return cache

    def get_cache(self, name: str, *, at: float, workspace: str) -> CacheInfo:
        return self._live(self._scope(workspace), name, at).info

    def list_caches(self, *, at: float, workspace: str) -> list[CacheInfo]:
        scope = self._scope(workspace)
        return [h.info for h in scope.caches.values() if h.info.expires_at > at]

    def update_cache(
        self, name: str, payload: dict[str, Any], *, at: float, workspace: str
    ) -> CacheInfo:
        """A new expiry: `ttl` from now, or `expireTime`; storage billed to the new one."""
        scope = self._scope(workspace)
        held = self._live(scope, name, at)
        expires = at + self._ttl(payload, at, default=None)
        scope.storage += held.info.tokens * (expires - held.billed_until)
        scope.caches[name] = replace(
            held,
            info=replace(held.info, expires_at=expires),
            updated_at=at,
            billed_until=expires,
        )
        return scope.caches[name].info

    def delete_cache(self, name: str, *, at: float, workspace: str) -> None:
        scope = self._scope(workspace)
        held = self._live(scope, name, at)
        if self._settings.refund_on_delete:
            scope.storage -= held.info.tokens * max(0.0, held.billed_until - at)
        del scope.caches[name]

    def _ttl(self, payload: dict[str, Any], at: float, *, default: float | None) -> float:
        ttl, expire = payload.get("ttl"), payload.get("expireTime")
        if ttl is not None and expire is not None:
            raise InvalidRequest("set either ttl or expireTime, not both", provider=P)
        try:
            if ttl is not None:
                seconds = parse_duration(ttl)
            elif expire is not None:
                seconds = read_time(expire) - at
            elif default is not None:
                seconds = default
            else:
                raise InvalidRequest("an update needs ttl or expireTime", provider=P)
        except ValueError as exc:
            raise InvalidRequest(str(exc), provider=P, param="ttl") from exc
        if seconds <= 0:
            raise InvalidRequest("the expiration time must be in the future", provider=P)
        return seconds

    # -- generateContent ---------------------------------------------------------------------

    def expand(self, payload: dict[str, Any], *, at: float, workspace: str) -> dict[str, Any]:
        """The request as the model sees it: a named cache's head and contents in front of
        the request's own contents. Refused as the API refuses it: tools, a system
        instruction or a tool config beside a cache, another model, a cache that is gone."""
        name = payload.get("cachedContent")
        if name is None:
            return payload
        set_too = [k for k in _HEAD if payload.get(k) is not None]
        if set_too:
            raise InvalidRequest(
                "CachedContent can not be used with GenerateContent request setting "
                "system_instruction, tools or tool_config.\n\nProposed fix: move those values "
                "to CachedContent from GenerateContent request.",
                provider=P,
            )
        held = self._live(self._scope(workspace), str(name), at)
        model = bare_model(str(payload.get("model") or ""))
        if model != held.info.model:
            raise InvalidRequest(
                f"Model used by GenerateContent request (models/{model}) and CachedContent "
                f"(models/{held.info.model}) has to be the same.",
                provider=P,
            )
        rest = {k: v for k, v in payload.items() if k != "cachedContent"}
        contents = [*held.contents, *(payload.get("contents") or ())]
        return {**rest, **held.head, "contents": contents, "cachedContent": name}

    def account(self, payload: dict[str, Any], *, at: float, workspace: str) -> CacheOutcome:
        """Reads of a request starting at `at` (its cache expanded, see `expand`); updates
        the implicit entries. Input only: the model layer adds output tokens."""
        s = self._settings
        info = _model(payload.get("model"))
        scope = self._scope(workspace)
        full = self.expand(payload, at=at, workspace=workspace)
        explicit = 0
        if payload.get("cachedContent") is not None:
            explicit = scope.caches[str(payload["cachedContent"])].info.tokens
        r = render(full, model=info.name, scope=workspace, memo=self._memo, grid=_grid(info))
        scope.entries.purge(at)
        minimum = s.minimum_for(info)
        implicit = s.implicit and bool(info.implicit)
        writes = [i for i, u in enumerate(r.units) if u.cum >= minimum] if implicit else []
        hit = max((i for i in writes if scope.entries.readable(r.units[i].key, at)), default=None)
        read = max(explicit, r.units[hit].cum if hit is not None else 0)
        misses = self._misses(r, scope.entries, at, writes, read, minimum, implicit)
        idle = s.idle_for(info)
        for i in writes:
            scope.entries.write(
                r.units[i].key,
                tokens=r.units[i].cum,
                ttl="implicit",
                expires_at=at + idle,
                available_at=at + s.ttft,
                at=at,
            )
        usage = Usage(uncached=r.total - read, read=read)
        last = r.units[writes[-1]] if writes else None
        marks = (CacheBreakpoint(index=last.part, ttl="implicit", tokens=last.cum),) if last else ()
        # indices name whole units (tools, system, parts), as the explainer counts blocks
        return outcome(
            usage,
            blocks=r.units[-1].part + 1 if r.units else 0,
            breakpoints=marks,
            hit_index=r.units[hit].part if hit is not None else None,
            misses=misses,
        )

    def _misses(
        self,
        r: Rendered,
        entries: EntryStore,
        at: float,
        writes: list[int],
        read: int,
        minimum: int,
        implicit: bool,
    ) -> list[MissFact]:
        if not implicit:
            return []
        if not writes:
            return [MissFact(cause="below_minimum", tokens=r.total, minimum=minimum)]
        facts: list[MissFact] = []
        for i in reversed(writes):
            unit = r.units[i]
            if unit.cum <= read:
                break
            fact = entries.miss(unit.key, at, index=unit.part, tokens=unit.cum, ttl=_idle_label)
            if fact is not None:
                facts.append(fact)
                if fact.cause != "evicted":  # the nearest entry that was there says why
                    break
        return facts

    def units(
        self, payload: dict[str, Any], *, workspace: str = "default"
    ) -> list[tuple[str, int]]:
        """(key, tokens) of each unit of a request (its cache expanded): what "every
        distinct prefix token written once" counts when a benchmark holds a session to the
        ideal. Nothing is read or written."""
        info = _model(payload.get("model"))
        full = payload
        if payload.get("cachedContent") is not None:
            held = self._scope(workspace).caches.get(str(payload["cachedContent"]))
            if held is not None:
                full = {**payload, **held.head, "contents": [*held.contents, *payload["contents"]]}
        r = render(full, model=info.name, scope=workspace, memo=self._memo, grid=_grid(info))
        return [(u.key, u.tokens) for u in r.units]


def _grid(info: ModelInfo) -> int:
    """Where a text part is cut into units: every `unit` tokens of the prompt (the model
    table's; 1, the default, leaves parts whole)."""
    return info.unit if info.unit > 1 else 0


def _idle_label(entry: CacheEntry) -> str:
    return f"{entry.expires_at - entry.last_used:.0f}s idle"


def _model(name: Any) -> ModelInfo:
    if not isinstance(name, str) or not name:
        raise InvalidRequest("model: a model name is required", provider=P, param="model")
    try:
        info = model_info(bare_model(name))
    except ConfigError as exc:
        raise InvalidRequest(
            f"models/{bare_model(name)} is not found for API version v1beta",
            provider=P,
            status=404,
            code="NOT_FOUND",
        ) from exc
    if info.provider != "google":
        raise InvalidRequest(
            f"models/{info.name} is not a Gemini model", provider=P, status=404, code="NOT_FOUND"
        )
    return info
