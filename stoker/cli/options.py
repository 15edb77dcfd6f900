"""Options several commands take, defined once so every command spells, documents and
defaults them alike (`--db` means the same database in `run`, `chat`, `serve` and
`sessions`). Each is a click decorator: `@db_option` above a command adds `--db`."""

from __future__ import annotations

from typing import Any

import click

from stoker.config import DEFAULT_MODEL, DEFAULT_PROVIDER


class Group(click.Group):
    """A group that lists its commands in the order they were added (the order a
    newcomer reads them in), not alphabetically as click does."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


def command_group(name: str, help_text: str, *, cls: type[Group] = Group, **settings: Any) -> Group:
    """A group of commands: run bare it prints its help, `-h` is `--help`, every option
    shows its default, and a docstring's first line is the command's summary in the
    group's list (which is why each command's first docstring line is one short
    sentence)."""
    return cls(
        name=name,
        help=help_text,
        no_args_is_help=True,
        context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
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

db_option = click.option("--db", help=DB_HELP)
provider_option = click.option("--provider", default=DEFAULT_PROVIDER, help=PROVIDER_HELP)
cache_option = click.option("--cache", help=CACHE_HELP)
model_option = click.option(
    "--model",
    default=DEFAULT_MODEL,
    help="Model, when --provider names none (`stoker models` lists them).",
)
workdir_option = click.option("--workdir", default=".", help="Folder the workspace tools may read.")
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON (for scripts) instead of a table."
)
html_option = click.option("--html", help="Write a self-contained HTML report here.")
png_option = click.option("--png", help="Write a PNG chart here.")
session_id_argument = click.argument(
    "session_id",
    help="A session id, or any start of one that no other id has "
    "(`stoker sessions list` prints the shortest).",
)
