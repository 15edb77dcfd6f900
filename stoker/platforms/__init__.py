"""Chat platforms in front of the gateway: Telegram, Slack and Discord users talk to
gateway sessions. This room sits above the gateway and uses only its public surface (the
`Gateway` service, its config file, its errors and replies); the gateway knows nothing
of it, and runs its bridges as companions of its app (`gateway.companion`).

    base.py         the seam: the values updates are made of, `Adapter` (one per
                    platform) and `Inbox` (where an adapter hands what it receives)
    bridge.py       Bridge: updates in, turns on the gateway, replies out; the same for
                    every platform (allowlist, rate limit, storage, order, retries)
    leases.py       which replica handles an update
    albums.py       messages sent together, answered as one
    attachments.py  what a message's files become: blocks for the model, or a reply
    download.py     reading a file within a limit, from the platform's own hosts only
    progress.py     tool calls as one status message, edited
    questions.py    questions with buttons, and risky tool calls asked with them
    replies.py      what a handled message sends back, in order
    access.py       who may talk to the bot, and how fast
    text.py         long replies split within a platform's limit; markdown.py: the walk
                    every platform's markup conversion shares
    redact.py       keeps tokens out of the libraries' logs
    section.py, config.py   the `[platforms.*]` tables of the config file
    registry.py     the configured platforms as bridges (each one's library imported
                    only when it is configured)
    telegram/, slack/, discord/   one package per platform: adapter.py (the `Adapter`),
                    updates.py (what it receives, read), markup.py (replies in its
                    markup), settings.py (its section); Slack's inbound.py (its signed
                    routes and Socket Mode), Discord's client.py and commands.py

Adding a platform is a package here implementing `Adapter`, its section in `config`,
and its line in `registry.ADAPTERS`.
"""
