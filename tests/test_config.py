"""Settings are resolved once, at the edge: library code reads no environment, the Stoker
home reaches everything that keeps files, each default has one home, and keys never show."""

from __future__ import annotations

import ast
from pathlib import Path

import platformdirs
import pytest
from click.testing import CliRunner

import stoker
from stoker.cli import app
from stoker.config import DEFAULT_MODEL, DEFAULT_PROVIDER, Config, GatewayLimits

ROOT = Path(stoker.__file__).parent
# The edges that may read the environment: the CLI (which also starts `stoker serve`), and
# the in-process client (`stoker.http_client()`), the proxy's counterpart inside a user's
# process, which finds its store as `stoker report-proxy` does so that both see the calls.
EDGES = ("cli/", "proxy/in_process.py")
ENV_NAMES = frozenset({"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"})


def environment_reads(source: str) -> list[int]:
    """Lines of `source` that touch the process environment (`os.environ`, `os.getenv`,
    `from os import environ`, under any alias of the module)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and node.attr in ENV_NAMES) or (
            isinstance(node, ast.ImportFrom)
            and node.module in ("os", "posix", "nt")
            and any(a.name in ENV_NAMES for a in node.names)
        ):
            found.append(node.lineno)
    return found


def _package_sources() -> dict[str, str]:
    return {
        path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(ROOT.rglob("*.py"))
    }


def test_only_the_edges_read_the_environment() -> None:
    reads = {
        name: lines
        for name, source in _package_sources().items()
        if not name.startswith(EDGES) and (lines := environment_reads(source))
    }
    assert reads == {}


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.environ['X']",
        "import os\nos.environ.get('X')",
        "import os\nos.getenv('X')",
        "import os as o\nv = dict(o.environ)",
        "from os import environ",
        "from os import getenv as g",
    ],
)
def test_the_check_finds_every_way_to_read_the_environment(source: str) -> None:
    assert environment_reads(source) != []


def test_the_check_leaves_a_mapping_that_was_passed_in_alone() -> None:
    assert environment_reads("def f(env):\n    return env.get('STOKER_HOME')") == []


def test_the_home_decides_the_database_memory_and_skills(tmp_path: Path) -> None:
    config = Config.from_env({"STOKER_HOME": str(tmp_path)})
    assert (config.home, config.database) == (tmp_path, str(tmp_path / "stoker.db"))
    assert (config.memory_dir, config.skills_dir) == (tmp_path / "memory", tmp_path / "skills")
    default = Config.from_env({})
    assert default.home == Path(platformdirs.user_data_dir("stoker"))
    assert default.database == str(default.home / "stoker.db")


def test_database_precedence_argument_then_url_then_file_then_home(tmp_path: Path) -> None:
    env = {
        "STOKER_HOME": str(tmp_path),
        "STOKER_DATABASE_URL": "postgresql://db/stoker",
        "STOKER_DB": str(tmp_path / "file.db"),
    }
    assert Config.from_env(env, database="other.db").database == "other.db"
    assert Config.from_env(env).database == "postgresql://db/stoker"
    assert Config.from_env({**env, "STOKER_DATABASE_URL": ""}).database == str(tmp_path / "file.db")
    # A flag that moves the home moves the default database with it.
    moved = Config.from_env({}, home=tmp_path / "elsewhere")
    assert moved.database == str(tmp_path / "elsewhere" / "stoker.db")


def test_arguments_win_over_the_environment_and_blank_variables_are_unset() -> None:
    env = {"ANTHROPIC_API_KEY": " sk-env ", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "  "}
    config = Config.from_env(env, model="claude-opus-4-6")
    assert config == Config(
        home=config.home,
        database=config.database,
        provider=DEFAULT_PROVIDER,
        model="claude-opus-4-6",
        anthropic_api_key="sk-env",
    )
    assert Config.from_env(env, anthropic_api_key="sk-arg").anthropic_api_key == "sk-arg"
    assert (config.api_key_for("anthropic:x"), config.api_key_for("openai-compatible")) == (
        "sk-env",
        None,
    )


def test_keys_and_database_passwords_never_show_in_a_repr() -> None:
    anthropic_key, openai_key = "sk-ant-DISTINCTIVE-1f9e", "sk-oai-DISTINCTIVE-7c2d"
    config = Config.from_env(
        {
            "ANTHROPIC_API_KEY": anthropic_key,
            "OPENAI_API_KEY": openai_key,
            "STOKER_DATABASE_URL": "postgresql://stoker:pw-DISTINCTIVE@db:5432/stoker",
        }
    )
    for shown in (repr(config), str(config), f"{config!r}"):
        assert "DISTINCTIVE" not in shown
    assert "postgresql://stoker:***@db:5432/stoker" in repr(config)
    assert config.anthropic_api_key == anthropic_key  # kept, only not shown


def _constants(source: str) -> list[object]:
    return [n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant)]


def test_the_default_model_and_provider_are_written_once() -> None:
    copies = [
        (name, value)
        for name, source in _package_sources().items()
        if name != "config.py"
        for value in _constants(source)
        if value in (DEFAULT_MODEL, DEFAULT_PROVIDER)
    ]
    assert copies == []


def test_the_gateway_limits_are_written_once() -> None:
    limits = GatewayLimits()
    numbers = {limits.max_body_bytes, limits.max_message_chars, limits.cache_size}
    numbers |= {limits.idle_ttl, int(limits.idle_ttl)}
    copies = [
        (name, value)
        for name, source in _package_sources().items()
        if name.startswith("gateway/")
        for value in _constants(source)
        if not isinstance(value, bool) and value in numbers
    ]
    assert copies == []


def test_the_cli_keeps_sessions_under_stoker_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"STOKER_HOME": str(home), "STOKER_DB": None, "STOKER_DATABASE_URL": None}
    runner = CliRunner()
    ran = runner.invoke(
        app, ["run", "--session", "kept", "--workdir", str(tmp_path), "hello"], env=env
    )
    assert ran.exit_code == 0, ran.output
    assert (home / "stoker.db").is_file()
    listed = runner.invoke(app, ["sessions", "list"], env=env)
    assert "kept" in listed.output
