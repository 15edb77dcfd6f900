"""OpenAI's `prompt_cache_key`: one per lineage, shared by forks, sub-agents and resumes.

A key derived from a per-run id starts every run on a cold shard; deriving it from the
root session id keeps the whole lineage on one (docs/cache-breakers.md, "Unstable OpenAI
cache keys").
"""

from __future__ import annotations

import hashlib


def lineage_cache_key(root_session_id: str) -> str:
    """A stable key (<= 64 chars, as OpenAI requires) for everything descended from a session."""
    return "stoker-" + hashlib.sha256(root_session_id.encode("utf-8")).hexdigest()[:32]
