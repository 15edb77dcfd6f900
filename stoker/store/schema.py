"""The schema, as named migrations applied in order and recorded in `stoker_schema`.

Opening an older database migrates it; opening one written by a newer Stoker fails with
a message saying so, instead of guessing. SQL here is the common subset of SQLite and
PostgreSQL (`?` placeholders are rewritten for psycopg).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


def _places(table: str) -> str:
    """A table of one place per session and prefix (a message and a block in it)."""
    return f"""CREATE TABLE {table} (
                session_id TEXT NOT NULL,
                prefix_key TEXT NOT NULL,
                message INTEGER NOT NULL,
                block INTEGER NOT NULL,
                PRIMARY KEY (session_id, prefix_key)
            )"""


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        version=1,
        name="sessions, events, used tools",
        statements=(
            """CREATE TABLE sessions (
                id TEXT PRIMARY KEY,
                root_id TEXT NOT NULL,
                parent_id TEXT,
                kind TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                model TEXT NOT NULL,
                title TEXT NOT NULL DEFAULT '',
                prefix TEXT NOT NULL,
                config TEXT NOT NULL,
                message_count INTEGER NOT NULL DEFAULT 0,
                last_record TEXT
            )""",
            "CREATE INDEX sessions_parent ON sessions (parent_id)",
            "CREATE INDEX sessions_updated ON sessions (updated_at)",
            """CREATE TABLE events (
                session_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                type TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                body TEXT NOT NULL,
                PRIMARY KEY (session_id, seq)
            )""",
            "CREATE INDEX events_by_type ON events (session_id, type, seq)",
            """CREATE TABLE used_tools (
                session_id TEXT NOT NULL,
                name TEXT NOT NULL,
                PRIMARY KEY (session_id, name)
            )""",
        ),
    ),
    Migration(
        version=2,
        name="session owners and idempotency keys",
        statements=(
            "ALTER TABLE sessions ADD COLUMN owner TEXT",
            "CREATE INDEX sessions_owner ON sessions (owner, updated_at)",
            """CREATE TABLE idempotency (
                session_id TEXT NOT NULL,
                key TEXT NOT NULL,
                response TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (session_id, key)
            )""",
        ),
    ),
    Migration(
        version=3,
        name="a declared break survives a restart",
        statements=("ALTER TABLE sessions ADD COLUMN pending_break TEXT",),
    ),
    Migration(
        version=4,
        name="one word per concept: a session's role, its declared break",
        statements=(
            "ALTER TABLE sessions RENAME COLUMN kind TO role",
            "ALTER TABLE sessions RENAME COLUMN pending_break TO declared_break",
        ),
    ),
    Migration(
        version=5,
        name="where each prefix last wrote, so a switch back reads it after a restart",
        statements=(_places("session_writes"),),
    ),
    Migration(
        version=6,
        name="leases: background work runs once across replicas",
        statements=(
            """CREATE TABLE leases (
                name TEXT PRIMARY KEY,
                holder TEXT NOT NULL,
                expires_at DOUBLE PRECISION NOT NULL
            )""",
        ),
    ),
    Migration(
        version=7,
        name="where an OpenAI client's conversation stands, to find its session again",
        statements=(
            """CREATE TABLE client_histories (
                session_id TEXT PRIMARY KEY,
                history TEXT NOT NULL,
                response_id TEXT,
                messages INTEGER NOT NULL
            )""",
            "CREATE INDEX client_histories_history ON client_histories (history)",
            "CREATE INDEX client_histories_response ON client_histories (response_id)",
        ),
    ),
    Migration(
        version=8,
        name="calls the recording proxy forwarded, grouped into lineages",
        statements=(
            """CREATE TABLE proxy_lineages (
                id TEXT PRIMARY KEY,
                parent_id TEXT,
                tenant TEXT NOT NULL,
                dialect TEXT NOT NULL,
                model TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                calls INTEGER NOT NULL DEFAULT 0,
                title TEXT NOT NULL DEFAULT ''
            )""",
            "CREATE INDEX proxy_lineages_updated ON proxy_lineages (updated_at)",
            """CREATE TABLE proxy_calls (
                lineage_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                tenant TEXT NOT NULL,
                dialect TEXT NOT NULL,
                path TEXT NOT NULL,
                mode TEXT NOT NULL,
                purpose TEXT NOT NULL,
                model TEXT NOT NULL,
                started_at DOUBLE PRECISION NOT NULL,
                duration DOUBLE PRECISION NOT NULL,
                status INTEGER NOT NULL,
                stream INTEGER NOT NULL,
                messages_from INTEGER NOT NULL,
                request TEXT NOT NULL,
                response TEXT,
                record TEXT,
                notes TEXT NOT NULL,
                ideal INTEGER NOT NULL,
                error TEXT,
                PRIMARY KEY (lineage_id, seq)
            )""",
        ),
    ),
    Migration(
        version=9,
        name="chat platforms: inbound updates seen, and the session each chat is in",
        statements=(
            """CREATE TABLE platform_updates (
                platform TEXT NOT NULL,
                update_key TEXT NOT NULL,
                chat TEXT NOT NULL,
                body TEXT NOT NULL,
                mark TEXT NOT NULL,
                received_at DOUBLE PRECISION NOT NULL,
                delivered INTEGER NOT NULL DEFAULT 0,
                done_at DOUBLE PRECISION,
                PRIMARY KEY (platform, update_key)
            )""",
            "CREATE INDEX platform_updates_pending ON platform_updates (platform, done_at)",
            """CREATE TABLE platform_chats (
                platform TEXT NOT NULL,
                chat TEXT NOT NULL,
                session_id TEXT NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (platform, chat)
            )""",
            "CREATE INDEX platform_chats_session ON platform_chats (session_id)",
        ),
    ),
    Migration(
        version=10,
        name="fleet notes: the replicas see one fleet of sessions per agent",
        statements=(
            """CREATE TABLE fleet_notes (
                holder TEXT NOT NULL,
                seq INTEGER NOT NULL,
                written_at DOUBLE PRECISION NOT NULL,
                kind TEXT NOT NULL,
                digest TEXT NOT NULL,
                at DOUBLE PRECISION NOT NULL,
                scope TEXT NOT NULL,
                shard INTEGER NOT NULL,
                session TEXT NOT NULL,
                live_for DOUBLE PRECISION NOT NULL,
                units DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (holder, seq)
            )""",
            "CREATE INDEX fleet_notes_written ON fleet_notes (written_at)",
        ),
    ),
    Migration(
        version=11,
        name="what a resumed session needs to plan as its last process did: the 1-hour "
        "entries it holds, when each prefix last wrote, the idle gaps it watched, when its "
        "last turn's last call began",
        statements=(
            _places("session_holds"),
            """CREATE TABLE session_gaps (
                session_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                seconds DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (session_id, seq)
            )""",
            "ALTER TABLE sessions ADD COLUMN last_turn_at DOUBLE PRECISION",
            "ALTER TABLE session_writes ADD COLUMN at DOUBLE PRECISION",
        ),
    ),
)

LATEST = MIGRATIONS[-1].version

VERSION_TABLE = """CREATE TABLE IF NOT EXISTS stoker_schema (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at DOUBLE PRECISION NOT NULL
)"""
