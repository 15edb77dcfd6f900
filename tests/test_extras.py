"""A core install stays light: what needs an extra is imported only where it is used, and
names its extra when it is missing.

The suite's own virtualenv has every extra, so a missing one is played by blocking its
modules (`sys.modules[name] = None`, which makes `import name` fail) in a child process.
The real thing, a wheel installed with no extra, is tests/test_packaging.py.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from stoker.errors import ConfigError, MissingExtra
from stoker.extras import EXTRAS, missing, require

HEAVY = ("starlette", "uvicorn", "aiohttp", "anthropic", "openai", "bpe_openai", "httpx")


def _child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_cli_loads_no_server_sdk_or_bench_to_print_its_version() -> None:
    done = _child(
        f"""
        import sys
        from click.testing import CliRunner
        from stoker.cli.app import app
        out = CliRunner().invoke(app, ["--version"]).output
        assert out.startswith("stoker "), out
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r}
                        or m.startswith(("stoker.bench", "stoker.gateway", "stoker.proxy.app")))
        print(loaded)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.parametrize(
    ("blocked", "args", "extra"),
    [
        ("starlette", ["serve"], "server"),
        ("aiohttp", ["proxy"], "server"),
        ("uvicorn", ["sim", "serve"], "server"),
        ("anthropic", ["run", "hi", "--provider", "anthropic"], "anthropic"),
        ("bpe_openai", ["run", "hi", "--model", "gpt-5.6"], "openai"),
    ],
)
def test_a_command_without_its_extra_names_it_in_one_line(
    blocked: str, args: list[str], extra: str, tmp_path: object
) -> None:
    done = _child(
        f"""
        import os, sys
        sys.modules[{blocked!r}] = None
        os.environ["STOKER_HOME"] = {str(tmp_path)!r}
        from click.testing import CliRunner
        from stoker.cli.app import app
        result = CliRunner().invoke(app, {args!r})
        print(result.exit_code)
        print(result.output)
        """
    )
    assert done.returncode == 0, done.stderr
    code, _, output = done.stdout.partition("\n")
    assert code == "1", done.stdout
    assert f"pip install 'stoker[{extra}]'" in output, output
    assert f"({blocked} is not installed)" in output, output
    assert "Traceback" not in output, output


def test_importing_the_gateway_without_the_server_extra_is_a_missing_extra() -> None:
    done = _child(
        """
        import sys
        sys.modules["starlette"] = None
        from stoker.errors import MissingExtra
        try:
            import stoker.gateway
        except MissingExtra as exc:
            print(exc.extra, isinstance(exc, ImportError))
        """
    )
    assert done.stdout.split() == ["server", "True"], done.stdout + done.stderr


def test_require_names_the_first_missing_module_and_is_a_config_and_import_error() -> None:
    require("server", "serving")  # the suite has every extra
    assert all(missing(extra) is None for extra in EXTRAS), [m for m in EXTRAS if missing(m)]
    with pytest.raises(MissingExtra) as caught:
        require("report", "the chart", ("plotly", "no_such_module_here"))
    assert isinstance(caught.value, ConfigError)
    assert isinstance(caught.value, ImportError)
    assert caught.value.missing == "no_such_module_here"
    assert str(caught.value) == (
        "the chart needs the 'report' extra (no_such_module_here is not installed): "
        "pip install 'stoker[report]'"
    )


def test_every_extra_the_code_names_is_one_pyproject_declares() -> None:
    import tomllib
    from pathlib import Path

    declared = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    extras = declared["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(extras), set(EXTRAS) - set(extras)
    assert set(extras) - set(EXTRAS) == {"all", "dev"}  # the two that only gather others
