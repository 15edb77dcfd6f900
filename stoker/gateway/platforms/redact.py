"""Keeps a platform token out of the logs that the libraries write.

A Telegram bot token is part of every API URL, and the HTTP client logs each request's
URL (httpx at INFO), the Telegram library its base URL (at DEBUG). A filter on those
loggers rewrites each record with the token replaced before any handler sees it.
"""

from __future__ import annotations

import logging

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
