"""Durable sessions: an append-only event log per session, SQLite by default, PostgreSQL
for shared deployments. Imports wire only, never the agent."""

from stoker.errors import SessionNotFound
from stoker.store.base import SessionStore, StoreStats
from stoker.store.open import open_store

__all__ = ["SessionNotFound", "SessionStore", "StoreStats", "open_store"]
