"""Keeps a platform's secrets out of the logs that the libraries write.

A Telegram bot token is part of every API URL, and the HTTP client logs each request's
URL (httpx at INFO), the Telegram library its base URL (at DEBUG); the Slack SDK logs
each request, and discord.py its gateway payloads. While an adapter runs, a filter on
each of those loggers rewrites every record with the secrets replaced before any
handler sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

MASK = "<redacted>"


class Redact(logging.Filter):
    """Replaces `secret` in a record's formatted message (and drops its args)."""

    def __init__(self, secret: str) -> None:
        super().__init__()
        self.secret = secret

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self.secret and self.secret in message:
            record.msg, record.args = message.replace(self.secret, MASK), None
        return True


class Redacting:
    """A `Redact` for each of `secrets` (None: not configured) on each of `loggers`,
    from `install` (before the library may log) to `remove`."""

    def __init__(self, loggers: Iterable[str], *secrets: str | None) -> None:
        self._loggers = [logging.getLogger(name) for name in loggers]
        self._filters = [Redact(secret) for secret in secrets if secret]

    def install(self) -> None:
        for logger in self._loggers:
            for f in self._filters:
                logger.addFilter(f)

    def remove(self) -> None:
        for logger in self._loggers:
            for f in self._filters:
                logger.removeFilter(f)
