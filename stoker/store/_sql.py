"""The two calls every part of the SQL store is written against.

`SqlEventStore` mixes in one part per client (the proxy's, the platforms', the gateway's,
the fleet's); each part reads and writes only through these, which the backends implement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stoker.errors import SessionNotFound

Op = tuple[str, tuple[Any, ...]]
"""One statement and its parameters; a list of them is one transaction."""


class SqlAccess:
    """`_write(ops)` (one transaction) and `_read(sql, params)`, for the parts to build on."""

    async def _write(self, ops: Sequence[Op]) -> None:
        raise NotImplementedError

    async def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    async def _session_row(self, sql: str, session_id: str) -> tuple[Any, ...]:
        """The row `sql` reads of one session (its id the only parameter): a session that
        is not there is an error, never an empty answer."""
        rows = await self._read(sql, (session_id,))
        if not rows:
            raise SessionNotFound(session_id)
        return rows[0]
