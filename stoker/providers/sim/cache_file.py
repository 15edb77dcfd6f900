"""The embedded simulator's cache entries, kept between processes in the Stoker home.

A real provider's cache outlives the process that wrote it: a second `stoker run
--session S` a minute after the first reads what the first wrote. The simulator keeps
its entries in memory, so without this file every new process started cold: its first
call was explained as "cold" and `stoker report` advised a pre-warm that a real provider
would not have needed.

Where: `sim-cache.db` in the Stoker home (`Config.sim_cache_file`), beside `stoker.db`.
It is a small SQLite file because several processes may use it at once (a `stoker
serve` and a `stoker run`, two terminals). Rows are written one by one, each only if the
file does not hold a newer version of it (one used later), so two processes never lose
each other's writes. A single JSON file rewritten whole would do exactly that.

What: only the accountants' entries (`stoker.cache.accounting`), that is Anthropic's,
OpenAI's and Gemini's implicit ones. Each row holds an entry's accountant, workspace and
cache key, its tokens and TTL, and the wall-clock times it was created, becomes readable,
was last used and expires. The accounting is unchanged. Before a call, the rows that
changed since this engine last looked are put into the accountant's `EntryStore` (when
`PRAGMA data_version` says no other connection wrote, nothing is read). After the call,
the entries it wrote, refreshed or dropped are queued, and a thread of their own writes
what is queued behind the calls, `WRITE_DELAY` later, one transaction per batch (`BEGIN
IMMEDIATE`, WAL): a gateway's event loop never waits for the file, and a hundred
sessions' calls cost a few transactions a second, not one each. Closing the file, or the
process ending normally, writes what is still queued. Everything else the simulator
holds stays in this process's memory, as before: memos, stored Responses,
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
cache file. A file another process holds locked for longer than `BUSY_SECONDS` keeps
the batch queued for the next one; the file is not given up.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from stoker.cache.accounting import CacheEntry, EntryStore
from stoker.providers.sim.engine import SimEngine

log = logging.getLogger(__name__)

T = TypeVar("T")

BUSY_SECONDS = 2.0  # how long the writer waits for another process's transaction
# How long changes wait to be written, so that a busy gateway's calls share a transaction
# (a few a second, not one per call). Another process reads a change this much later at
# most; a real provider's entry is not readable at once either.
WRITE_DELAY = 0.05
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

# An entry changes only by being used again (`last_used` is the time of the call that
# changed it), so of two processes' versions of a row the one last used is the newer: a
# write that reaches the file after another process's newer one leaves that one.
_SAVE_NEWER = f"""
INSERT INTO entries (accountant, scope, {_COLUMNS}, version)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (accountant, scope, key) DO UPDATE SET
    tokens = excluded.tokens, ttl = excluded.ttl, created_at = excluded.created_at,
    available_at = excluded.available_at, last_used = excluded.last_used,
    expires_at = excluded.expires_at, version = excluded.version
WHERE excluded.last_used >= entries.last_used
"""

_Change = tuple[CacheEntry | None, CacheEntry | None]


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
    """An entry as the values of `_SAVE_NEWER`, in its order."""
    times = (e.created_at, e.available_at, e.last_used, e.expires_at)
    return (accountant, scope, key, e.tokens, e.ttl, *times, version)


def _is_busy(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


@dataclass(slots=True, eq=False)
class SimCacheFile:
    """One engine's entries, kept in the SQLite file at `path`.

    Serves one `SimEngine` at a time. It remembers which rows that engine has already
    loaded, so a call loads only what other processes changed since, and reads nothing
    when `PRAGMA data_version` says no other connection committed since it last looked.
    What a call changed is queued and written behind it by a thread of its own, in one
    transaction per batch, so the caller (a gateway's event loop) never waits for the
    file's lock. A gateway gives all its sim sessions one engine and one of these. Safe
    to share between threads.
    """

    path: Path
    _db: sqlite3.Connection | None = field(default=None, init=False, repr=False)
    _broken: bool = field(default=False, init=False)
    _engine: SimEngine | None = field(default=None, init=False, repr=False)
    _seen: dict[tuple[str, str], int] = field(default_factory=dict, init=False, repr=False)
    _data_version: int | None = field(default=None, init=False, repr=False)
    # `_calling` makes calls one at a time (an engine is not shared by two at once);
    # `_lock` guards the state the writer shares with them, and the reading connection.
    _calling: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    # What calls changed that is not written yet: (accountant, scope, key) -> (the entry
    # now, None), or (None, the entry dropped); and per accountant the expiry before
    # which rows are pruned.
    _pending: dict[tuple[str, str, str], _Change] = field(
        default_factory=dict, init=False, repr=False
    )
    _prune: dict[str, float] = field(default_factory=dict, init=False, repr=False)
    # The writer: its own connection, one thread, one batch at a time.
    _write_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _wdb: sqlite3.Connection | None = field(default=None, init=False, repr=False)
    _executor: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)
    _scheduled: Future[None] | None = field(default=None, init=False, repr=False)

    @property
    def in_use(self) -> bool:
        """False once the file failed: the simulator then keeps its cache in memory."""
        return not self._broken

    def call(
        self, engine: SimEngine, dialect: str, scope: str, *, at: float, run: Callable[[], T]
    ) -> T:
        """`run()` (one call of `engine`, accounted at `at`) with the entries of its
        accountant that other processes wrote loaded from the file first, and what it
        changed queued for the writer after. Whatever the file does, `run()` runs once
        and its result or error is the caller's.
        """
        target = _target(engine, dialect, scope)
        if target is None or self._broken:
            return run()
        with self._calling:
            if not self._loaded(engine, target, scope, at):
                return run()
            target.store.changes()  # what loading put in came from the file
            try:
                result = run()
            except BaseException:
                target.store.changes()  # a refused call changes nothing; forget its tries
                raise
            with self._lock:  # not held during `run`: the writer takes its batch meanwhile
                self._queue(target, scope, at)
                if self._scheduled is None and not self._broken:
                    if self._executor is None:
                        self._executor = ThreadPoolExecutor(
                            1, thread_name_prefix="stoker-sim-cache"
                        )
                    self._scheduled = self._executor.submit(self._write_later)
            return result

    def flush(self) -> None:
        """Write what is queued now, in this thread: what it returns after is in the file
        (a batch the writer has taken is written before, under the same lock)."""
        self._write_pending()

    def _write_later(self) -> None:
        time.sleep(WRITE_DELAY)
        self._write_pending()

    def close(self) -> None:
        """Write what is queued, then close the file (a later call opens it again)."""
        self.flush()
        with self._write_lock:
            if self._wdb is not None:
                self._wdb.close()
                self._wdb = None
        with self._lock:
            executor, self._executor = self._executor, None
            if self._db is not None:
                self._db.close()
                self._db = None
            self._data_version = None
        if executor is not None:
            executor.shutdown(wait=True)

    # -- reading what others wrote ---------------------------------------------------------

    def _loaded(self, engine: SimEngine, target: _Target, scope: str, at: float) -> bool:
        """Load what others wrote (`_load`); False when the file was given up."""
        with self._lock:
            if engine is not self._engine:  # another engine: it has loaded nothing yet
                self._engine, self._seen, self._data_version = engine, {}, None
            try:
                self._load(target, scope, at)
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    self._fail(exc)
                    return False
                log.debug("%s is busy; this call reads no other process's entries", self.path)
            except (sqlite3.Error, OSError, ValueError, TypeError) as exc:
                self._fail(exc)
                return False
            return True

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
        return db

    def _load(self, target: _Target, scope: str, at: float) -> None:
        """Put into the engine the rows of its accountant and scope written since it last
        looked (by any process, this one's writer included), unless no connection has
        committed since. A row whose change of this process is still queued is skipped:
        the queued one is newer (see `_SAVE_NEWER`). The lock is held."""
        if self._db is None:
            self._db = self._open()
        db = self._db
        seen_key = (target.accountant, scope)
        (data_version,) = db.execute("PRAGMA data_version").fetchone()
        if data_version == self._data_version and seen_key in self._seen:
            return
        # The counter first: rows written after it are read again next time, never missed.
        (version,) = db.execute("SELECT version FROM counter").fetchone()
        if version <= self._seen.get(seen_key, -1):  # only this process's writer wrote
            self._data_version = int(data_version)
            return
        rows = db.execute(
            f"SELECT {_COLUMNS} FROM entries WHERE accountant = ? AND scope = ? AND version > ?",
            (target.accountant, scope, self._seen.get(seen_key, 0)),
        ).fetchall()
        for key, tokens, ttl, created, available, used, expires in rows:
            if (target.accountant, scope, str(key)) in self._pending:
                continue
            entry = CacheEntry(
                tokens=int(tokens),
                ttl=str(ttl),
                expires_at=float(expires),
                available_at=float(available),
                created_at=float(created),
                last_used=float(used),
            )
            if target.store.get(str(key)) != entry:  # this process's own: not used again
                target.store.put(str(key), entry, at=at)
        self._seen[seen_key] = int(version)
        self._data_version = int(data_version)

    def _queue(self, target: _Target, scope: str, at: float) -> None:
        """Queue the entries the call wrote or refreshed and the ones it dropped (the
        entry store counts them). The lock is held."""
        now, gone = target.store.changes()
        name = target.accountant
        for k, e in now.items():
            self._pending[(name, scope, k)] = (e, None)
        for k, e in gone.items():
            self._pending[(name, scope, k)] = (None, e)
        horizon = at - target.forget_after
        self._prune[name] = max(self._prune.get(name, horizon), horizon)

    # -- writing behind ----------------------------------------------------------------------

    def _write_pending(self) -> None:
        """Everything queued, in one transaction. A busy file keeps it queued for the next
        batch; a file that fails is given up (the entries stay in memory)."""
        with self._write_lock:
            with self._lock:
                self._scheduled = None
                if self._broken or not (self._pending or self._prune):
                    return
                batch, prune = self._pending, self._prune
                self._pending, self._prune = {}, {}
            try:
                if self._wdb is None:
                    self._wdb = self._open()
                before = _write(self._wdb, batch, prune)
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    self._write_failed(exc)
                    return
                log.debug("%s is busy; its writes wait for the next batch", self.path)
                self._rollback_writer()
                with self._lock:
                    self._requeue(batch, prune)
                return
            except (sqlite3.Error, OSError) as exc:
                self._write_failed(exc)
                return
            with self._lock:
                # Rows up to `before` were loaded and `before + 1` is this batch's: an
                # engine that had read every row but its own has nothing new to read.
                for seen_key, seen in self._seen.items():
                    if seen >= before:
                        self._seen[seen_key] = max(seen, before + 1)

    def _requeue(self, batch: dict[tuple[str, str, str], _Change], prune: dict[str, float]) -> None:
        for k, change in batch.items():
            self._pending.setdefault(k, change)  # a change queued since is newer
        for name, horizon in prune.items():
            self._prune[name] = max(self._prune.get(name, horizon), horizon)

    def _rollback_writer(self) -> None:
        try:
            if self._wdb is not None and self._wdb.in_transaction:
                self._wdb.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def _write_failed(self, exc: BaseException) -> None:
        """The writer's connection failed: close it and give the file up. The write lock
        is held."""
        self._rollback_writer()
        db, self._wdb = self._wdb, None
        if db is not None:
            db.close()
        with self._lock:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        """Give the file up for this process, once, saying so. The lock is held."""
        db, self._db = self._db, None
        if db is not None:
            try:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                db.close()
            except sqlite3.Error:
                pass
        self._pending, self._prune = {}, {}
        if not self._broken:
            self._broken = True
            log.warning(
                "the simulator cannot keep its cache in %s (%s): it keeps it in this "
                "process's memory, so the next process starts cold; delete the file to "
                "start a new one",
                self.path,
                exc,
            )


def _write(
    db: sqlite3.Connection, batch: dict[tuple[str, str, str], _Change], prune: dict[str, float]
) -> int:
    """One transaction: save the changed entries (unless the file holds a newer one),
    delete the dropped ones (unless used again since), prune the long expired. Returns
    the counter's value before it; the batch's rows carry that value plus one."""
    db.execute("BEGIN IMMEDIATE")
    try:
        (before,) = db.execute("SELECT version FROM counter").fetchone()
        version = before + 1
        db.execute("UPDATE counter SET version = ?", (version,))
        db.executemany(
            _SAVE_NEWER,
            [
                _row(name, scope, key, now, version)
                for (name, scope, key), (now, _) in batch.items()
                if now is not None
            ],
        )
        db.executemany(
            "DELETE FROM entries WHERE accountant = ? AND scope = ? AND key = ? AND last_used <= ?",
            [
                (name, scope, key, dropped.last_used)
                for (name, scope, key), (now, dropped) in batch.items()
                if now is None and dropped is not None
            ],
        )
        for name, horizon in prune.items():
            db.execute(
                "DELETE FROM entries WHERE accountant = ? AND expires_at <= ?", (name, horizon)
            )
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return int(before)
