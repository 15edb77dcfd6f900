"""The agent cache key: a digest of everything that shapes a session's prefix or routes it.

Two cached agents may be shared only when every input matches. The provider key enters
as the sha256 of the whole key: a prefix of it (one project used its first 8 characters)
let two accounts share one cached agent, and the key itself must never sit in memory
next to what is logged or compared.
"""

from __future__ import annotations

import hashlib

from stoker.cache.models import canonical_name
from stoker.gateway.session_settings import SessionSettings
from stoker.wire.canonical import canonical_json


def key_digest(api_key: str | None) -> str | None:
    """sha256 of the full key (None when the provider needs none, like the simulator)."""
    if not api_key:
        return None
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def signature(
    settings: SessionSettings,
    *,
    user: str,
    api_key_sha256: str | None,
    registry_generation: int,
) -> str:
    """sha256 over canonical JSON of the settings (reasoning excluded; the model by its one
    name, however it is spelled), the key digest, the user and the tool registry's
    generation."""
    fields = settings.signed_fields()
    fields["model"] = canonical_name(settings.model)
    payload = {
        "settings": fields,
        "api_key_sha256": api_key_sha256,
        "user": user,
        "registry_generation": registry_generation,
    }
    return hashlib.sha256(canonical_json(payload)).hexdigest()
