"""Users keep Stoker's types: `mypy --strict` passes on every Python example in the README
and the docs, and on tests/typing/check_public_api.py, whose `assert_type`s pin what the
public API gives a type checker (a typed turn's `output` is the type asked for, `@tool`
gives a `Tool`).

mypy sees `stoker` as users do: an installed package (this virtualenv's editable install),
which it reads only because the package ships `py.typed`. The wheel installed with no
extra is type-checked the same way by tests/test_packaging.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doc_examples import ROOT, blocks, docs_pages

pytestmark = pytest.mark.slow  # one mypy run over every example: half a minute

EXAMPLES = [
    b
    for page in [ROOT / "README.md", *docs_pages()]
    for b in blocks(page)
    if b.language == "python"
]
API_CHECK = ROOT / "tests" / "typing" / "check_public_api.py"


def test_the_package_says_it_is_typed() -> None:
    assert (ROOT / "stoker" / "py.typed").is_file()


def test_every_python_example_and_the_api_check_pass_mypy_strict(tmp_path: Path) -> None:
    assert len(EXAMPLES) >= 10, [b.id for b in EXAMPLES]
    origin: dict[str, str] = {}
    for block in EXAMPLES:
        name = "ex_" + re.sub(r"\W", "_", block.id) + ".py"
        (tmp_path / name).write_text(block.code, encoding="utf-8")
        origin[name] = block.id
    (tmp_path / API_CHECK.name).write_text(API_CHECK.read_text(encoding="utf-8"))
    origin[API_CHECK.name] = str(API_CHECK.relative_to(ROOT))
    done = subprocess.run(
        [
            sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
            "--python-executable", sys.executable,
            "--cache-dir", str(tmp_path / ".mypy_cache"), ".",
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    problems = [
        re.sub(r"^(\w+\.py)", lambda m: origin.get(m.group(1), m.group(1)), line)
        for line in done.stdout.splitlines()
        if ": error:" in line or ": note:" in line
    ]
    assert done.returncode == 0, "\n".join(problems) or done.stdout + done.stderr
