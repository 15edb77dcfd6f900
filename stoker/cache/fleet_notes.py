"""What one process tells the others about the sessions of an agent: notes of requests,
arrivals, uses, keep-warm spend and the explicit cache of a shared prefix.

`KeyShards` and `FleetWatch` decide from traffic: how many keys a shared prefix needs,
which session speaks for the fleet, whether a new session is likely before the entry
expires. Replicas behind a load balancer each see a share of that traffic, so each alone
decides from a fraction of it. When a process shares its view (`share()`), every
observation is also kept as a `FleetNote` in an outbox; something that reaches the other
processes (the gateway's `stoker.gateway.fleet_sync`, through the store) drains it and
hands the others' notes to `absorb`, so every replica decides from the whole fleet.
The notes carry digests, shard numbers and cache names only: never a prompt, a user or a
key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

NoteKind = Literal["request", "arrival", "use", "spend", "cache"]
KINDS: tuple[NoteKind, ...] = ("request", "arrival", "use", "spend", "cache")


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetNote:
    """One observation. `digest`: the shared prefix (`keys.shared_digest`); `at`: when
    (the process's clock). A request names its `scope` and `shard`; a use the `session`
    that made it and how long it left the entry alive (`live_for`); a spend its `units`
    (base-input tokens); a cache (Gemini's explicit cache of the shared tools and system)
    its name in `session`, its model in `scope`, its tokens in `units` and the seconds it
    lives from `at` in `live_for` (0: deleted)."""

    kind: NoteKind
    digest: str
    at: float
    scope: str = ""
    shard: int = 0
    session: str = ""
    live_for: float = 0.0
    units: float = 0.0


class Outbox:
    """Notes not yet handed on, bounded: a process whose sync stalls (the database is
    down) keeps the newest `limit` and drops the oldest, which matter least to a rate."""

    __slots__ = ("_limit", "_notes")

    def __init__(self, limit: int = 10_000) -> None:
        self._notes: list[FleetNote] = []
        self._limit = limit

    def add(self, note: FleetNote) -> None:
        self._notes.append(note)
        if len(self._notes) > self._limit:
            del self._notes[: len(self._notes) - self._limit]

    def restore(self, notes: list[FleetNote]) -> None:
        """Put back notes drained for a write that failed, before any noted since."""
        self._notes[:0] = notes
        if len(self._notes) > self._limit:
            del self._notes[: len(self._notes) - self._limit]

    def drain(self) -> list[FleetNote]:
        notes, self._notes = self._notes, []
        return notes

    def __len__(self) -> int:
        return len(self._notes)
