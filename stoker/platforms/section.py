"""What every platform's config section shares: how fast each chat may send, and secrets
read from the environment or a file.

A platform's secrets (bot tokens, signing secrets) never stand in the config file
itself: a section names an environment variable (`token_env`) or a file (`token_file`,
e.g. a mounted secret; its first line), and the value is read here once, at load.
Errors name the section and the key, never the value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from stoker.errors import ConfigError
from stoker.platforms.access import Allowlist, RateLimit


class ChatSection(BaseModel):
    """A platform's `[platforms.NAME]` table: unknown keys are errors, and each chat's
    rate limit is set the same way everywhere."""

    model_config = ConfigDict(extra="forbid")

    rate_per_minute: float = Field(default=20.0, ge=0)
    burst: int = Field(default=5, ge=1)

    @property
    def rate(self) -> RateLimit:
        return RateLimit(per_minute=self.rate_per_minute, burst=self.burst)


def allowlist(users: Iterable[int | str], chats: Iterable[int | str]) -> Allowlist:
    """Ids as the platform writes them (numbers or strings), as the strings keys hold."""
    return Allowlist(users=frozenset(str(u) for u in users), chats=frozenset(str(c) for c in chats))


def read_secret(
    what: str,
    *,
    env_name: str | None,
    file: str | None,
    env: Mapping[str, str],
    base: Path,
    keys: str = "token",
) -> str:
    """The secret `{keys}_env` or `{keys}_file` of `[platforms.{what}]` names (exactly one
    of them): the variable's value, or the file's first line (relative to `base`)."""
    where = f"platforms.{what}"
    if (env_name is None) == (file is None):
        raise ConfigError(
            f"{where}: give exactly one of {keys}_env (an environment variable's "
            f"name) or {keys}_file (a file holding it)"
        )
    if env_name is not None:
        value = env.get(env_name, "").strip()
        if not value:
            raise ConfigError(f"{where}: the environment variable {env_name} is not set")
        return value
    assert file is not None
    path = Path(file).expanduser()
    path = path if path.is_absolute() else base / path
    try:
        lines = path.read_text(encoding="utf-8").strip().splitlines()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {keys}_file {path}: {exc.strerror}") from None
    if not lines or not lines[0].strip():
        raise ConfigError(f"{where}: {keys}_file {path} is empty")
    return lines[0].strip()
