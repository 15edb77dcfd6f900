"""Discord, through discord.py: importing this package imports no library; `adapter`,
`client` and `updates` (the `discord` extra) do."""
