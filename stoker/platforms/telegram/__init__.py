"""Telegram, through python-telegram-bot: importing this package imports no library;
`adapter` (the `telegram` extra) does."""
