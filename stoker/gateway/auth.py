"""Bearer tokens to users. Only sha256 digests of tokens are held, compared and stored.

A token arrives in `Authorization: Bearer ...`, is hashed at once and looked up by its
digest; the plain token is never kept, logged or put in an error message. The lookup
is by digest, so what its timing could reveal is bytes of a sha256, which do not help
anyone find a token.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from stoker.errors import ConfigError
from stoker.gateway.errors import Unauthorized

_HEX = re.compile(r"^[0-9a-f]{64}$")
_USER = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenTable:
    """Token digests to user ids."""

    __slots__ = ("_users",)

    def __init__(self, digests: Mapping[str, str]) -> None:
        for digest, user in digests.items():
            if not _HEX.match(digest):
                raise ConfigError(f"token_sha256 for user {user!r} is not 64 hex characters")
            if not _USER.match(user):
                raise ConfigError(f"user id {user!r}: use letters, digits and _ . @ - (1-64)")
        self._users = dict(digests)

    def __len__(self) -> int:
        return len(self._users)

    def user_for(self, authorization: str | None) -> str:
        """The user an `Authorization` header value names; Unauthorized otherwise."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("send an Authorization: Bearer <token> header")
        digest = token_digest(token.strip())
        user = self._users.get(digest)
        if user is None:
            raise Unauthorized("unknown bearer token")
        return user
