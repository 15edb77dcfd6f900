"""Options several commands take, defined once so every command spells, documents and
defaults them alike (`--db` means the same database in `run`, `chat`, `serve` and
`sessions`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer


def command_group(help_text: str, **settings: Any) -> typer.Typer:
    """A group of commands whose help is click's plain text: a flag reads `--save  Keep
    ...`, not `--save <bool>` as typer's rich panels print every option's type, and a
    docstring's first line is the command's summary in its group's list (which is why
    each command's first docstring line is one short sentence)."""
    return typer.Typer(
        help=help_text,
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
        **settings,
    )


# Which commands create a SQLite file that does not exist: stoker.cli.settings says why.
DB_HELP = (
    "Session database: a path or postgresql:// URL "
    "(default: STOKER_DATABASE_URL, else STOKER_DB, else stoker.db in STOKER_HOME, "
    "else in the user data dir). A command that stores sessions creates a missing SQLite "
    "file; one that only reads refuses a path that does not exist (a typo), except the "
    "default before its first session, which has no sessions yet."
)
PROVIDER_HELP = (
    "sim:, anthropic:MODEL, openai:MODEL, openai-chat:MODEL, bedrock:MODEL_ID, "
    "openrouter:MODEL, deepseek:MODEL, google:MODEL (Gemini) or "
    "openai-compatible[+vllm|+llamacpp]:URL#MODEL "
    "(a model named here wins over --model)."
)
CACHE_HELP = (
    "The server an openai-compatible: provider runs on, whose cache rules then apply: "
    "vllm or llamacpp (default: STOKER_LOCAL_CACHE)."
)

Db = Annotated[str | None, typer.Option(help=DB_HELP, show_default=False)]
Provider = Annotated[str, typer.Option(help=PROVIDER_HELP)]
LocalCache = Annotated[str | None, typer.Option("--cache", help=CACHE_HELP, show_default=False)]
Model = Annotated[
    str, typer.Option(help="Model, when --provider names none (`stoker models` lists them).")
]
Workdir = Annotated[str, typer.Option(help="Folder the workspace tools may read.")]
AsJson = Annotated[
    bool, typer.Option("--json", help="Print JSON (for scripts) instead of a table.")
]
SessionId = Annotated[
    str,
    typer.Argument(
        help="A session id, or any start of one that no other id has "
        "(`stoker sessions list` prints the shortest).",
        show_default=False,
    ),
]
