"""The CLI's one read of the environment: each command resolves its settings here, once,
with its flags on top, and passes the frozen `Config` down (library code reads none).

Which commands may create the session database:

- a command that stores sessions (`run --session`, `chat`, `demo --save`, `serve`,
  `proxy`) creates a SQLite file that does not exist, and its folder, on first use:
  `settings`;
- a command that only reads what is stored (`report`, `report-proxy`, `sessions list`,
  `show`, `export`, `rm`, `chat --resume`) never creates one: `reading`. A path that was
  named (`--db`, STOKER_DB, STOKER_DATABASE_URL) and does not exist is a
  `DatabaseNotFound` naming it, because a mistyped path would otherwise become an empty
  database, folders and all, reported as "0 calls". The default database (`stoker.db`
  in the Stoker home) that no session has been stored in yet reads as empty: a first
  `stoker report --all` says there are no sessions yet.

No `--create` flag: a reader has nothing to put in a new database, and the commands
that write already create theirs.
"""

from __future__ import annotations

import os
from dataclasses import replace

from stoker.config import DATABASE_FILE, ENVIRONMENT, Config
from stoker.errors import DatabaseNotFound
from stoker.store.open import IN_MEMORY, sqlite_path


def settings(
    *,
    db: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    cache: str | None = None,
) -> Config:
    """This command's settings: the process environment, then its flags (None: not given;
    `cache` is `--cache vllm|llamacpp`, the server an openai-compatible: provider runs on)."""
    return Config.from_env(
        os.environ, database=db, provider=provider, model=model, local_cache=cache
    )


def reading(db: str | None = None) -> Config:
    """The settings of a command that only reads stored sessions (see the module's
    docstring): `settings(db=db)`, or a `DatabaseNotFound` when the SQLite file named
    does not exist; the default file, before it exists, is read as an empty database
    held in memory. Nothing is created either way."""
    config = settings(db=db)
    path = sqlite_path(config.database)
    if path is None or path.exists():
        return config
    if path == config.home / DATABASE_FILE:
        return replace(config, database=IN_MEMORY)
    raise DatabaseNotFound(str(path), named_by=_named_by(db))


def _named_by(db: str | None) -> str:
    if db is not None:
        return "--db"
    named = [name for name in ENVIRONMENT["database"] if os.environ.get(name, "").strip()]
    return named[0] if named else "the settings"
