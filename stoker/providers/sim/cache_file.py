"""The embedded simulator's cache entries, kept between processes in the Stoker home.

A real provider's cache outlives the process that wrote it: a second `stoker run
--session S` a minute after the first reads what the first wrote. The simulator keeps
its entries in memory, so without this file every new process started cold: its first
call was explained as "cold" and `stoker report` advised a pre-warm that a real provider
would not have needed.

Where: `sim-cache.db` in the Stoker home (`Config.sim_cache_file`), beside `stoker.db`.
It is a small SQLite file because several processes may use it at once (a `stoker
serve` and a `stoker run`, two terminals). Each call loads, accounts and saves in one
transaction (`BEGIN IMMEDIATE`, WAL), so two processes never both rewrite the file and
lose each other's writes. A single JSON file rewritten whole would do exactly that.

What: only the accountants' entries (`stoker.cache.accounting`), that is Anthropic's,
OpenAI's and Gemini's implicit ones. Each row holds an entry's accountant, workspace and
cache key, its tokens and TTL, and the wall-clock times it was created, becomes readable,
was last used and expires. The accounting is unchanged. Before a call, the rows that
changed since this engine last looked are put into the accountant's `EntryStore`. After
the call, the entries it wrote, refreshed or dropped are saved. Everything else the
simulator holds stays in this process's memory, as before: memos, stored Responses,
Gemini's explicit caches, OpenAI's routing, and the state of the Bedrock, OpenRouter,
DeepSeek and local-server families.

When: only for a simulator on the wall clock that has a home. That is `stoker run`,
`stoker chat`, `stoker serve` on sim, and `Agent("sim:...", config=...)`, i.e.
`select_provider` given a `Config` and the system clock. It is never used for:
- A simulator on an injected clock (tests, `stoker demo`, the benchmarks,
  `stoker.testing`). Its times are not the wall clock's, and its output must stay the
  same run after run.
- An `Agent("sim:...")` with no config. The library reads no environment, so it knows
  no home, and it writes no file it was not given a place for.
- `stoker sim serve`. Its caches are per API key, and other programs' keys are not
  written to disk.

Pruning: a row stays for the accountant's `forget_after` (a day) after its entry
expires. During that time, a call after the TTL is explained as "expired N s ago" rather
than "cold". After it, whichever process calls next deletes the row, as the accountant
forgets the entry in memory.

Failures: a file that cannot be opened, read or written (corrupt, not a database, in a
read-only home, on a full disk) logs one warning that names it. The simulator then goes
on in memory, as it did before this file existed. A call never fails because of its
cache file. A file another process holds locked for longer than `BUSY_SECONDS` costs
that one call its sync; the file is not given up.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from stoker.cache.accounting import CacheEntry, EntryStore
from stoker.providers.sim.engine import SimEngine

log = logging.getLogger(__name__)

T = TypeVar("T")

BUSY_SECONDS = 2.0  # how long a call waits for another process's transaction
VERSION = 1  # PRAGMA user_version of the schema below

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    accountant TEXT NOT NULL,
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    ttl TEXT NOT NULL,
    created_at REAL NOT NULL,
    available_at REAL NOT NULL,
    last_used REAL NOT NULL,
    expires_at REAL NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (accountant, scope, key)
);
CREATE INDEX IF NOT EXISTS entries_by_version ON entries (accountant, scope, version);
CREATE INDEX IF NOT EXISTS entries_by_expiry ON entries (expires_at);
CREATE TABLE IF NOT EXISTS counter (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT OR IGNORE INTO counter VALUES (1, 0);
"""

_COLUMNS = "key, tokens, ttl, created_at, available_at, last_used, expires_at"

_SAVE = f"""
INSERT INTO entries (accountant, scope, {_COLUMNS}, version)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (accountant, scope, key) DO UPDATE SET
    tokens = excluded.tokens, ttl = excluded.ttl, created_at = excluded.created_at,
    available_at = excluded.available_at, last_used = excluded.last_used,
    expires_at = excluded.expires_at, version = excluded.version
"""


@dataclass(frozen=True, slots=True)
class _Target:
    """The entries one call reads and writes: an accountant's, in one scope."""

    accountant: str
    store: EntryStore
    forget_after: float


def _target(engine: SimEngine, dialect: str, scope: str) -> _Target | None:
    """The entries a call on `dialect` uses, or None for the families whose state is more
    than entries (Bedrock, OpenRouter, DeepSeek, the local servers): those stay in memory."""
    if dialect == "anthropic":
        a = engine.anthropic
        return _Target("anthropic", a.entry_store(scope), a.settings.forget_after)
    if dialect in ("openai_chat", "openai_responses"):
        o = engine.openai
        return _Target("openai", o.entry_store(scope), o.settings.forget_after)
    if dialect == "gemini":
        g = engine.google
        return _Target("google", g.entry_store(scope), g.settings.forget_after)
    return None


def _row(accountant: str, scope: str, key: str, e: CacheEntry, version: int) -> tuple[object, ...]:
    """An entry as the values of `_SAVE`, in its order."""
    times = (e.created_at, e.available_at, e.last_used, e.expires_at)
    return (accountant, scope, key, e.tokens, e.ttl, *times, version)


def _is_busy(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


@dataclass(slots=True, eq=False)
class SimCacheFile:
    """One engine's entries, kept in the SQLite file at `path`.

    Serves one `SimEngine` at a time. It remembers which rows that engine has already
    loaded, so a call loads only what other processes changed since. A gateway gives all
    its sim sessions one engine and one of these. Safe to share between threads: a call
    holds the lock for its whole transaction.
    """

    path: Path
    _db: sqlite3.Connection | None = field(default=None, init=False, repr=False)
    _broken: bool = field(default=False, init=False)
    _engine: SimEngine | None = field(default=None, init=False, repr=False)
    _seen: dict[tuple[str, str], int] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def in_use(self) -> bool:
        """False once the file failed: the simulator then keeps its cache in memory."""
        return not self._broken

    def call(
        self, engine: SimEngine, dialect: str, scope: str, *, at: float, run: Callable[[], T]
    ) -> T:
        """`run()` (one call of `engine`, accounted at `at`) with the entries of its
        accountant loaded from the file first and saved to it after, in one transaction.
        Whatever the file does, `run()` runs once and its result or error is the caller's.
        """
        target = _target(engine, dialect, scope)
        if target is None or self._broken:
            return run()
        with self._lock:
            if engine is not self._engine:  # another engine: it has loaded nothing yet
                self._engine, self._seen = engine, {}
            db = self._begin()
            if db is None:
                return run()
            try:
                self._load(db, target, scope, at)
                before = target.store.snapshot()
            except (sqlite3.Error, OSError, ValueError, TypeError) as exc:
                self._fail(exc, db)
                return run()
            try:
                result = run()
            except BaseException:
                self._rollback(db)
                raise
            try:
                self._save(db, target, scope, before, at)
                db.execute("COMMIT")
            except (sqlite3.Error, OSError) as exc:
                self._fail(exc, db)
            return result

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- the transaction ---------------------------------------------------------------

    def _begin(self) -> sqlite3.Connection | None:
        """The connection, in a write transaction; None when the file cannot be used
        (logged once, then never tried again) or is busy (only this call goes without)."""
        try:
            db = self._db if self._db is not None else self._open()
            db.execute("BEGIN IMMEDIATE")
            return db
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                log.debug("%s is busy; this call keeps its cache in memory only", self.path)
                return None
            self._fail(exc, None)
            return None
        except (sqlite3.Error, OSError) as exc:
            self._fail(exc, None)
            return None

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(
            self.path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False
        )
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # a simulator's cache: no fsync per call
            (found,) = db.execute("PRAGMA user_version").fetchone()
            if found not in (0, VERSION):
                raise sqlite3.DatabaseError(
                    f"schema version {found}, this Stoker reads version {VERSION}"
                )
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA user_version = {VERSION}")
        except BaseException:
            db.close()
            raise
        self._db = db
        return db

    def _load(self, db: sqlite3.Connection, target: _Target, scope: str, at: float) -> None:
        """Put into the engine the rows of its accountant and scope written since it last
        looked (by any process, this one included). The file wins: every call saves
        what it changed, so a row is never older than this process's own entry."""
        seen_key = (target.accountant, scope)
        (version,) = db.execute("SELECT version FROM counter").fetchone()
        rows = db.execute(
            f"SELECT {_COLUMNS} FROM entries WHERE accountant = ? AND scope = ? AND version > ?",
            (target.accountant, scope, self._seen.get(seen_key, 0)),
        ).fetchall()
        for key, tokens, ttl, created, available, used, expires in rows:
            entry = CacheEntry(
                tokens=int(tokens),
                ttl=str(ttl),
                expires_at=float(expires),
                available_at=float(available),
                created_at=float(created),
                last_used=float(used),
            )
            target.store.put(str(key), entry, at=at)
        self._seen[seen_key] = int(version)

    def _save(
        self,
        db: sqlite3.Connection,
        target: _Target,
        scope: str,
        before: dict[str, CacheEntry],
        at: float,
    ) -> None:
        """Save the entries the call wrote or refreshed (an entry changes only by being
        replaced, so identity tells), delete the ones it dropped, prune the long expired."""
        after = target.store.snapshot()
        changed = [(k, e) for k, e in after.items() if before.get(k) is not e]
        gone = [k for k in before if k not in after]
        name = target.accountant
        if changed:
            (version,) = db.execute("SELECT version FROM counter").fetchone()
            version += 1
            db.execute("UPDATE counter SET version = ?", (version,))
            db.executemany(_SAVE, [_row(name, scope, k, e, version) for k, e in changed])
            self._seen[(name, scope)] = version  # the lock held: nobody else wrote since
        if gone:
            db.executemany(
                "DELETE FROM entries WHERE accountant = ? AND scope = ? AND key = ?",
                [(name, scope, k) for k in gone],
            )
        db.execute(
            "DELETE FROM entries WHERE accountant = ? AND expires_at <= ?",
            (name, at - target.forget_after),
        )

    def _rollback(self, db: sqlite3.Connection) -> None:
        try:
            db.execute("ROLLBACK")
        except sqlite3.Error as exc:
            self._fail(exc, db)

    def _fail(self, exc: BaseException, db: sqlite3.Connection | None) -> None:
        """Give the file up for this process, once, saying so."""
        if db is not None:
            try:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                db.close()
            except sqlite3.Error:
                pass
        self._db = None
        if not self._broken:
            self._broken = True
            log.warning(
                "the simulator cannot keep its cache in %s (%s): it keeps it in this "
                "process's memory, so the next process starts cold; delete the file to "
                "start a new one",
                self.path,
                exc,
            )
