"""What a newcomer installs works: the sdist and wheel that `python -m build` makes pass
`twine check`, the wheel holds the package's data files, and installed into a fresh
virtualenv (outside the checkout) it gives a working `stoker` and library, with and
without the extras.

Slow (a minute or two, most of it pip resolving the dependencies), so it builds once
per session; it needs the package registry, which the machine and CI reach.
"""

from __future__ import annotations

import email.parser
import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from stoker.cli.app import app
from tests.doc_examples import ROOT, free_port

# Under xdist, one worker runs the module: the session-scoped build happens once.
pytestmark = [pytest.mark.packaging, pytest.mark.slow, pytest.mark.xdist_group("packaging")]

DATA_FILES = {  # what is not Python in the package, and must be in the wheel
    "stoker/cache/data/models.toml",
    "stoker/gateway/static/dashboard.html",
    "stoker/gateway/static/dashboard.css",
    "stoker/gateway/static/dashboard.js",
    "stoker/py.typed",  # type checkers read the package's annotations only when it is there
}
EXTRAS = sorted(  # not `frameworks`: five agent frameworks for one benchmark (dev installs it)
    tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ].keys()
    - {"dev", "frameworks"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Built:
    wheel: Path
    sdist: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Installed:
    bin: Path
    home: Path  # a folder outside the checkout, to run from
    wheel: Path

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("STOKER_", "PYTHON"))}
        env |= {"STOKER_HOME": str(self.home / "stoker-home"), "COLUMNS": "400"}
        done = subprocess.run(
            args,
            cwd=self.home,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, f"{args}:\n{done.stdout}\n{done.stderr}"
        return done

    def pip(self, *args: str, compile: bool = False) -> None:
        """`pip install` into the virtualenv: this interpreter's pip (`--python`), so the
        virtualenv needs none of its own, and no .pyc compiled ahead (that took half the
        time on a loaded machine; imports compile what they use) unless `compile`."""
        pip = [sys.executable, "-m", "pip", "--python", str(self.bin / "python"), "install"]
        self.run(*pip, "--quiet", "--compile" if compile else "--no-compile", *args, timeout=900)


def _run(*args: str | Path, cwd: Path = ROOT) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{args}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--outdir", out, ROOT)
    (wheel,) = out.glob("stoker-*.whl")
    (sdist,) = out.glob("stoker-*.tar.gz")
    return Built(wheel=wheel, sdist=sdist)


def test_the_version_and_help_flags_answer() -> None:
    runner = CliRunner()
    for flags in (["--version"], ["-V"]):
        done = runner.invoke(app, flags)
        assert done.exit_code == 0, done.output
        assert re.fullmatch(r"stoker \d+\.\d+\.\d+\S*\n", done.output), done.output
    for flags in (["-h"], ["--help"], ["sessions", "-h"], ["sim", "serve", "-h"]):
        done = runner.invoke(app, flags)
        assert done.exit_code == 0, (flags, done.output)
        assert "Usage" in done.output


def test_the_wheel_and_sdist_hold_the_package_and_pass_twine(built: Built) -> None:
    names = set(zipfile.ZipFile(built.wheel).namelist())
    assert names >= DATA_FILES
    sources = {str(p.relative_to(ROOT)) for p in (ROOT / "stoker").rglob("*.py")}
    assert sources <= names, sorted(sources - names)[:10]
    assert not [n for n in names if n.startswith(("tests/", "docs/"))]
    with tarfile.open(built.sdist) as sdist:
        held = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    assert {"README.md", "pyproject.toml", "mkdocs.yml", *DATA_FILES} <= held
    out = _run(sys.executable, "-m", "twine", "check", "--strict", built.wheel, built.sdist)
    assert out.count("PASSED") == 2, out


def test_the_wheel_says_what_it_is_to_an_index_and_a_type_checker(built: Built) -> None:
    """What PyPI and pip show of the package: its Python range, licence, keywords, the
    extras it offers and classifiers, "Typing :: Typed" among them (py.typed ships)."""
    with zipfile.ZipFile(built.wheel) as wheel:
        (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        meta = email.parser.Parser().parsestr(wheel.read(name).decode("utf-8"))
    assert meta["Requires-Python"] == ">=3.11"
    assert meta["License"] or meta["License-Expression"]
    assert "prompt-caching" in meta["Keywords"]
    assert set(meta.get_all("Provides-Extra") or ()) >= {*EXTRAS, "frameworks", "dev"}
    classifiers = set(meta.get_all("Classifier") or ())
    assert "Typing :: Typed" in classifiers
    for minor in (11, 12, 13):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers
    assert meta["Description-Content-Type"] == "text/markdown"


def _footprint(venv: Path, python: str) -> tuple[float, list[str]]:
    """The virtualenv's size in MB (its files, links not followed) and the distributions
    in it. Made `--without-pip`, it holds only what `pip install stoker` brought."""
    size = sum(p.lstat().st_size for p in venv.rglob("*") if p.is_file() and not p.is_symlink())
    names = subprocess.run(
        [
            python,
            "-c",
            "import importlib.metadata as m; print(*sorted({d.name.lower() "
            "for d in m.distributions()}), sep='\\n')",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    return size / 1e6, names


# The core install's budget: the library, the CLI's local commands, the simulator and
# SQLite. The README quotes the figures this test prints. Issue 38 aimed at under 25
# distributions; 25 is where it stands, held here so it cannot grow unnoticed: stoker, its
# 9 direct dependencies (the CLI's is plain click: typer brought two more), and theirs:
# pydantic's 4, rich's 3, httpx2's 5 and jsonschema's 3 (attrs, jsonschema-specifications,
# rpds-py; the one single-wheel alternative, jsonschema-rs, takes the process down on deep
# values and long $ref chains where jsonschema raises: stoker/providers/sim/schema_valid.py).
CORE_MB, CORE_PACKAGES = 100, 25


def test_the_wheel_works_in_a_fresh_virtualenv_with_and_without_extras(
    built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One test, so that a parallel run installs once: pip takes most of its time."""
    _run(sys.executable, "-m", "venv", "--without-pip", tmp_path / "venv")
    home = tmp_path / "work"  # outside the checkout: the installed package is imported
    home.mkdir()
    fresh = Installed(bin=tmp_path / "venv" / "bin", home=home, wheel=built.wheel)
    python, stoker = str(fresh.bin / "python"), str(fresh.bin / "stoker")
    fresh.pip(str(built.wheel), compile=True)  # no extras, with .pyc files: as users get it

    megabytes, packages = _footprint(tmp_path / "venv", python)
    with capsys.disabled():
        print(f"\ncore install: {megabytes:.0f} MB, {len(packages)} packages: {' '.join(packages)}")
    assert megabytes < CORE_MB, packages
    assert len(packages) <= CORE_PACKAGES, packages
    heavy = {"starlette", "uvicorn", "aiohttp", "anthropic", "openai", "bpe-openai", "httpx"}
    assert not heavy & set(packages), heavy & set(packages)

    where = fresh.run(python, "-c", "import stoker; print(stoker.__file__)").stdout
    assert where.startswith(str(tmp_path / "venv")), where
    assert fresh.run(stoker, "--version").stdout.startswith("stoker 0.")
    assert "the same tokens without a cache" in fresh.run(stoker, "demo").stdout
    _extras_are_named(fresh)

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    example = next(b for b in blocks if "session.fork" in b)  # the library's own example
    (home / "example.py").write_text(example, encoding="utf-8")
    lines = fresh.run(python, "example.py").stdout.splitlines()
    assert lines[0].startswith("Done. Tool results: 3")
    assert int(lines[-1]) > 1000  # the fork read the parent's prefix
    # a user's type checker sees the installed package's types (py.typed), strictly
    mypy = [sys.executable, "-m", "mypy", "--strict", "--python-executable", python]
    fresh.run(*mypy, "--cache-dir", str(tmp_path / "mypy-cache"), "example.py", timeout=300)

    fresh.pip(f"{built.wheel}[{','.join(EXTRAS)}]")
    assert "Usage" in fresh.run(stoker, "sim", "serve", "--help").stdout
    _sim_serve_answers(fresh)
    saved = fresh.run(stoker, "demo", "--save").stdout
    (session,) = re.findall(r"stored as session (\S+);", saved)
    fresh.run(stoker, "report", session, "--html", "report.html")
    assert (home / "report.html").stat().st_size > 100_000  # plotly's library inline
    modules = ["psycopg", "psycopg_pool", "mcp", "hypothesis", "plotly", "matplotlib"]
    modules += ["opentelemetry.sdk", "telegram", "slack_sdk", "discord", "google.genai"]
    modules += ["aiobotocore", "starlette", "uvicorn", "anthropic", "openai", "bpe_openai"]
    fresh.run(python, "-c", f"import {', '.join(modules)}")


def _extras_are_named(fresh: Installed) -> None:
    """On a core install, what needs an extra says which, in one line, and exits 1."""
    stoker = str(fresh.bin / "stoker")
    for args, extra in (
        (("serve",), "server"),
        (("proxy",), "server"),
        (("sim", "serve"), "server"),
        (("run", "hello", "--provider", "anthropic"), "anthropic"),
        (("run", "hello", "--model", "gpt-5.6"), "openai"),  # OpenAI's exact tokenizer
    ):
        done = subprocess.run(
            [stoker, *args],
            cwd=fresh.home,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "STOKER_HOME": str(fresh.home / "stoker-home")},
            check=False,
        )
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert f"pip install 'stoker[{extra}]'" in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
    code = "import stoker.gateway"
    done = subprocess.run(
        [str(fresh.bin / "python"), "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "MissingExtra" in done.stderr, done.stderr
    assert "pip install 'stoker[server]'" in done.stderr, done.stderr


SDK_CALL = """
import sys

import anthropic

client = anthropic.Anthropic(base_url=sys.argv[1], api_key="any", max_retries=20)
cached = {"type": "ephemeral"}
system = [{"type": "text", "text": "You review code. " * 400, "cache_control": cached}]
for _ in range(2):
    reply = client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=100,
        system=system,
        messages=[{"role": "user", "content": "Hello"}],
    )
print(reply.usage.cache_read_input_tokens)
"""


def _sim_serve_answers(fresh: Installed) -> None:
    """`stoker sim serve` answers the official SDK as Anthropic's API, cache included."""
    port = free_port()
    server = subprocess.Popen(
        [str(fresh.bin / "stoker"), "sim", "serve", "--port", str(port)],
        cwd=fresh.home,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        (fresh.home / "sdk_call.py").write_text(SDK_CALL, encoding="utf-8")
        read = fresh.run(str(fresh.bin / "python"), "sdk_call.py", f"http://127.0.0.1:{port}")
        assert int(read.stdout) > 1000, read.stdout
    finally:
        server.terminate()
        server.wait(timeout=15)
