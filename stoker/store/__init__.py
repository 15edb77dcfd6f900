"""Durable sessions: an append-only event log per session, SQLite by default, PostgreSQL
for shared deployments. Imports wire only, never the agent."""

from stoker.errors import SessionNotFound
from stoker.store.base import SessionStore, StoreStats
from stoker.store.open import default_db_path, open_store

__all__ = ["SessionNotFound", "SessionStore", "StoreStats", "default_db_path", "open_store"]
