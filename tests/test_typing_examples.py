"""A user's `mypy --strict` passes on every python example of the README and the docs, and
on tests/typed/check_public_api.py, whose `assert_type`s pin what the public API's types
say (the type of a turn's `output`, what `@tool` makes, the lazily loaded names).

mypy checks them as a user's program: from a folder outside the checkout, with no
configuration but `--strict`, and `stoker` found as an installed package (this
environment's editable install of the checkout, typed by its `py.typed`), so mypy reads
its annotations but reports nothing inside it. One mypy run checks every file; its cache
lives under the temporary folder between runs (a cold run takes most of a minute: the
package and the provider SDKs; a warm one a few seconds).

A block preceded by `<!-- test: untyped REASON -->` is left out (tests/doc_examples.py).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.doc_examples import ROOT, Block, blocks, docs_pages

PAGES = [ROOT / "README.md", *docs_pages()]
PYTHON = [b for page in PAGES for b in blocks(page) if b.language == "python"]
CHECKED = [b for b in PYTHON if b.mark not in {"skip", "untyped"}]
PUBLIC_API = ROOT / "tests" / "typed" / "check_public_api.py"
_ERROR = re.compile(r"^(?P<file>[^:\s]+\.py):(?P<line>\d+): (?P<message>.*)$")


def test_the_examples_to_type_check_include_the_readmes() -> None:
    assert any(b.path.name == "README.md" for b in CHECKED)
    for block in PYTHON:
        if block.mark == "untyped":
            assert block.reason, f"{block.id}: `<!-- test: untyped -->` needs a reason"


def _user_env() -> dict[str, str]:
    """This environment as a user's shell would have it: no path of the checkout's."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "MYPYPATH"} and not k.startswith("MYPY_")
    }


def _cache_dir() -> Path:
    """mypy's cache for this checkout, kept between runs (one per checkout: runs of two
    checkouts would overwrite each other's entries for the same module names)."""
    key = hashlib.sha256(f"{ROOT}|{sys.executable}".encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"stoker-mypy-examples-{key}"


def _where(location: str, files: dict[str, Block]) -> str:
    """`example_03.py:12` as the Markdown line it came from (`README.md:98`)."""
    name, _, line = location.partition(":")
    block = files.get(name)
    if block is None:
        return location if name != PUBLIC_API.name else f"{PUBLIC_API.relative_to(ROOT)}:{line}"
    return f"{block.path.relative_to(ROOT)}:{block.line + int(line)}"


@pytest.mark.slow  # a mypy run: a few seconds warm, most of a minute cold
def test_every_python_example_type_checks_with_mypy_strict(tmp_path: Path) -> None:
    found = subprocess.run(
        [sys.executable, "-c", "import stoker; print(stoker.__file__)"],
        cwd=tmp_path,
        env=_user_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(found).parent == ROOT / "stoker", (
        f"outside the checkout, `import stoker` finds {found}, not this checkout's package: "
        f"install it editable (`make .venv/.installed`) so the examples are checked against it"
    )

    files: dict[str, Block] = {}
    for number, block in enumerate(CHECKED):
        name = f"example_{number:02d}.py"
        (tmp_path / name).write_text(block.code, encoding="utf-8")
        files[name] = block
    shutil.copy(PUBLIC_API, tmp_path / PUBLIC_API.name)
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n", encoding="utf-8")  # a user's: nothing but --strict

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--config-file",
            str(config),
            "--cache-dir",
            str(_cache_dir()),
            "--python-executable",
            sys.executable,
            "--no-pretty",
            "--no-error-summary",
            *files,
            PUBLIC_API.name,
        ],
        cwd=tmp_path,
        env=_user_env(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    problems = []
    for line in done.stdout.splitlines():
        matched = _ERROR.match(line)
        if matched is None:
            problems.append(line)
        elif not matched["message"].startswith("note:"):
            where = _where(f"{matched['file']}:{matched['line']}", files)
            problems.append(f"{where}: {matched['message']}")
    if done.returncode != 0 or problems:
        pytest.fail(
            f"mypy --strict (exit {done.returncode}) on the python examples:\n"
            + "\n".join(problems or [done.stderr]),
            pytrace=False,
        )
