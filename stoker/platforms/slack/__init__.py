"""Slack, through slack-sdk: importing this package imports no library; `adapter` and
`inbound` (the `slack` extra) do."""
