"""Notes the gateway replicas leave each other about the sessions of an agent.

Each replica sees only the sessions a load balancer sends it; the rate of requests on a
shared prefix, the arrivals of new sessions and the fleet's last use are the whole
deployment's. A replica writes its notes here every few seconds and reads the others'
(`stoker.gateway.fleet_sync`); the rows hold digests, shard numbers and session ids,
never a prompt or a key. A note is a plain tuple here: the store does not know the
cache's types.

Reads go by when a note was written (`written_at`, the writer's clock at its sync) with
an overlap, not by an id: rows of concurrent transactions do not become visible in id
order, so a cursor on ids would skip some. The reader drops what it has already seen by
(holder, seq).
"""

from __future__ import annotations

from collections.abc import Sequence

from stoker.store._sql import SqlAccess

NoteRow = tuple[str, str, float, str, int, str, float, float]
"""(kind, digest, at, scope, shard, session, live_for, units)."""

_COLUMNS = "kind, digest, at, scope, shard, session, live_for, units"


class FleetLog(SqlAccess):
    """What the SQL store offers the replicas' fleet sync. Mixed into `SqlEventStore`."""

    async def add_fleet_notes(
        self, holder: str, first_seq: int, notes: Sequence[NoteRow], *, written_at: float
    ) -> None:
        """Write `holder`'s notes, numbered from `first_seq`, in one transaction (a retry
        of the same numbers after a lost answer is ignored)."""
        if not notes:
            return
        sql = (
            f"INSERT INTO fleet_notes (holder, seq, written_at, {_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (holder, seq) DO NOTHING"
        )
        await self._write(
            [(sql, (holder, first_seq + i, written_at, *n)) for i, n in enumerate(notes)]
        )

    async def fleet_notes_since(
        self, written_at: float, *, besides: str, limit: int = 20_000
    ) -> list[tuple[str, int, float, NoteRow]]:
        """Other holders' notes written from `written_at` on, oldest first, as (holder,
        seq, written_at, note)."""
        rows = await self._read(
            f"SELECT holder, seq, written_at, {_COLUMNS} FROM fleet_notes "
            "WHERE written_at >= ? AND holder <> ? ORDER BY written_at, holder, seq LIMIT ?",
            (written_at, besides, limit),
        )
        return [
            (
                str(r[0]),
                int(r[1]),
                float(r[2]),
                (
                    str(r[3]),
                    str(r[4]),
                    float(r[5]),
                    str(r[6]),
                    int(r[7]),
                    str(r[8]),
                    float(r[9]),
                    float(r[10]),
                ),
            )
            for r in rows
        ]

    async def prune_fleet_notes(self, before: float) -> None:
        """Forget notes written before `before` (any replica may; it is idempotent)."""
        await self._write([("DELETE FROM fleet_notes WHERE written_at < ?", (before,))])
