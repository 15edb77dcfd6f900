"""What a session does between its turns: keep-warm plans and pings, deleting the
explicit cache it made, and how those calls join its records.

Between turns a session is idle, and its cache entry ages; these methods look at the
session as it stands (`_gap_view`, `_site`) and hand the decision to `warmth` and
`explicit`, which take values and return values. They live apart from the turn's flow
(`session.py`) and the session's state (`session_base.py`) because they are neither: a
keep-warm never changes the history, only the records.
"""

from __future__ import annotations

from collections.abc import Sequence

from stoker.agent import explicit, warmth
from stoker.agent.calls import CallSite
from stoker.agent.session_base import SessionBase
from stoker.cache.record import notify
from stoker.cache.time_policy import WarmPlan
from stoker.wire.events import CacheRecorded
from stoker.wire.record import CacheRecord


class IdleSession(SessionBase):
    """A session's between-turn calls; `Session` is the one concrete kind."""

    __slots__ = ()

    def _gap_view(self) -> warmth.GapView:
        settled = not self._unanswered and self._declared_break is None and self._detour is None
        return warmth.GapView(
            session_id=self._id,
            parent_id=self._parent_id,
            role=self._role,
            settled=settled,
            prefix=self._prefix,
            history=tuple(self._history),
            info=self._info(),
        )

    def _site(self) -> CallSite:
        state = self._state
        warm = self._cold_for() is None and state.last_started is not None
        return CallSite(
            session_id=self._id,
            root_id=self._root_id,
            parent_id=self._parent_id,
            role=self._role,
            prefix=self._prefix,
            history=tuple(self._history),
            info=self._info(),
            mixed=self._mixed,
            anchor=self._anchor,
            warm=warm,
        )

    def warm_plan(self, *, gaps: Sequence[float] = ()) -> WarmPlan | None:
        """What the time policy will do before this session's cache entry expires, and
        when; None while nothing is cached, a turn is running (it may wait minutes for an
        approval: the turn's next call refreshes the entry, not a keep-warm) or unfinished,
        or a rebase waits for the next call (what is cached is the old prefix), and for
        forks, reviews and sub-agents (they end soon; only what they share with their
        parent lives on).
        `gaps` adds observed idle gaps (seconds) to the ones this session saw, e.g. the
        user's other sessions.

        When the session lets its own entry go and it made the last call of its agent's
        fleet (`stoker.cache.fleet`), the plan may keep only the shared tools and system
        prompt warm for the next new session (`scope="shared"`)."""
        if self._lock.locked():  # a turn (or a rebase) is running: not an idle gap
            return None
        return warmth.plan(self._gap_view(), self._state, self._agent, gaps=gaps)

    def _own_plan(self) -> WarmPlan | None:
        return warmth.own_plan(self._gap_view(), self._state, self._agent)

    async def warm(self, *, gaps: Sequence[float] = ()) -> CacheRecord | None:
        """Send the planned keep-warm request if it is due now (see `warm_plan`); its
        record, or None when nothing was due. It never changes the history, and a failed
        one is logged and leaves the session as it was."""
        async with self._lock:
            record = await warmth.keep_warm(
                self._gap_view(),
                self._state,
                self._agent,
                gaps=gaps,
                mixed=self._mixed,
                site=self._site(),
                seq=len(self._records),
                facts=self._call_facts,
            )
            return await self._kept(record)

    async def release_caches(self) -> CacheRecord | None:
        """Delete the explicit cache object (Gemini's `cachedContents`) this session made,
        if it still lives; its record, or None. Its agent calls it when it closes."""
        if self._state.explicit is None:
            return None
        async with self._lock:
            record = await explicit.release(
                self._gap_view(),
                state=self._state,
                agent=self._agent,
                seq=len(self._records),
                facts=self._call_facts,
            )
            return await self._kept(record)

    async def _kept(self, record: CacheRecord | None) -> CacheRecord | None:
        """A record made between turns (a keep-warm, a release) joins the session's records,
        its observers and its events like a turn's call."""
        if record is not None:
            self._records.append(record)
            notify(record)
            await self._emit(CacheRecorded(session_id=self._id, record=record))
        return record
