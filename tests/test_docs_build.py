"""`make docs` fails on any warning, and the API reference shows the calls Python accepts.

The builds run `scripts/docs_build.py`, the script `make docs` runs, on a copy of the docs
tree and mkdocs.yml: untouched it builds silently; with a broken `[text][reference]` or a
link to a missing page planted it fails and names the problem. (`mkdocs build --strict
--quiet`, the target before, passed both: `--quiet` drops warnings before `--strict`
counts them.)
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import shutil
import subprocess
import sys
from html import unescape
from pathlib import Path
from typing import Any

import griffe
import pytest

import stoker

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "docs_build.py"


def _script() -> Any:
    """scripts/docs_build.py as a module (`scripts` would name tests/scripts here)."""
    spec = importlib.util.spec_from_file_location("docs_build", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


problems = _script().problems


def test_make_docs_runs_the_script_these_tests_run() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^docs: .*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe is not None, "the Makefile has no docs target"
    assert recipe.group(1) == "\t$(BIN)/python scripts/docs_build.py\n"
    assert re.search(r"^test: .*\n(?:\t.*\n)*\t.*\$\(MAKE\).* docs\n", makefile, re.MULTILINE)


def test_every_record_above_info_and_every_stray_line_is_a_problem() -> None:
    log = "\n".join(
        [
            "INFO    -  Cleaning site directory",
            "INFO    -  a long note",
            "           that goes on",  # an INFO record's continuation: fine
            "\x1b[33mWARNING -  \x1b[0mmkdocs_autorefs: a.md: Could not find "
            "cross-reference target 'sdk'",
            "ERROR   -  Config value 'nav': a.md is missing",
            "           and continues",
            "a warning from a logger outside mkdocs' tree",  # `--strict` never counts it
            "DEBUG   -  fine",
            "",
        ]
    )
    assert problems(log) == [
        "WARNING -  mkdocs_autorefs: a.md: Could not find cross-reference target 'sdk'",
        "ERROR   -  Config value 'nav': a.md is missing\n           and continues",
        "a warning from a logger outside mkdocs' tree",
    ]
    assert problems("INFO    -  Documentation built in 5.1 seconds\n") == []


def _docs_copy(where: Path) -> Path:
    """The docs tree and mkdocs.yml in `where`, with the package beside them as in the
    repository (mkdocstrings reads it from `paths: [.]`)."""
    shutil.copytree(ROOT / "docs", where / "docs")
    shutil.copy2(ROOT / "mkdocs.yml", where / "mkdocs.yml")
    (where / "stoker").symlink_to(ROOT / "stoker", target_is_directory=True)
    return where


def _build(folder: Path) -> subprocess.CompletedProcess[str]:
    """What `make docs` runs, run in `folder`."""
    return subprocess.run(
        [sys.executable, str(SCRIPT)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The untouched docs, built; the site's folder."""
    folder = _docs_copy(tmp_path_factory.mktemp("docs-clean"))
    done = _build(folder)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")  # silent when clean
    return folder / "site"


@pytest.mark.slow
def test_the_docs_build_silently_when_clean(built: Path) -> None:
    assert (built / "index.html").is_file()
    assert (built / "reference" / "agent" / "index.html").is_file()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("planted", "named"),
    [
        (
            "See [the settings][nonexistent].",
            "Could not find cross-reference target 'nonexistent'",
        ),
        (
            "See [the settings](no-such-page.md).",
            "contains a link 'no-such-page.md', but the target is not found",
        ),
    ],
    ids=["reference-link", "missing-page"],
)
def test_a_broken_link_fails_the_docs_build_and_is_named(
    tmp_path: Path, planted: str, named: str
) -> None:
    folder = _docs_copy(tmp_path)
    page = folder / "docs" / "getting-started.md"
    page.write_text(page.read_text(encoding="utf-8") + f"\n{planted}\n", encoding="utf-8")
    done = _build(folder)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    failure = done.stderr.split("docs build failed", 1)[1]  # the summary names it
    assert "getting-started.md" in failure
    assert named in failure


def test_agent_takes_the_model_positionally() -> None:
    first, *rest = inspect.signature(stoker.Agent).parameters.values()
    assert (first.name, first.kind) == ("model", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    assert {p.kind for p in rest} == {inspect.Parameter.KEYWORD_ONLY}


@pytest.mark.slow
def test_the_reference_shows_agent_called_with_the_model_first(built: Path) -> None:
    page = (built / "reference" / "agent" / "index.html").read_text(encoding="utf-8")
    signature = page.split('class="doc-signature', 1)[1].split("</code>", 1)[0]
    text = " ".join(unescape(re.sub(r"<[^>]+>", "", signature)).split())
    assert text.startswith('highlight">Agent( model: str, *, provider: Provider = None,'), text[:80]


def _documented() -> list[str]:
    """Every object the API reference renders (`::: path` in docs/reference/)."""
    return [
        path
        for md in sorted((ROOT / "docs" / "reference").glob("*.md"))
        for path in re.findall(r"^::: (\S+)", md.read_text(encoding="utf-8"), re.MULTILINE)
    ]


def _runtime(path: str) -> Any:
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return importlib.import_module(path)


def test_the_reference_signatures_are_the_ones_python_accepts() -> None:
    """What mkdocstrings draws comes from griffe's reading of the source, not from Python:
    a dataclass with `kw_only=True` and one `field(kw_only=False)` was drawn `Agent(*,
    model` while Python takes the model positionally. Every rendered class and function
    must list the parameters, and their kinds, that `inspect.signature` gives."""
    package = griffe.load(
        "stoker", search_paths=[str(ROOT)], resolve_aliases=True, resolve_external=False
    )
    compared = []
    for path in _documented():
        obj = _runtime(path)
        drawn = package[path.removeprefix("stoker.")]
        if drawn.is_alias:
            drawn = drawn.final_target
        if not (drawn.is_class or drawn.is_function) or getattr(obj, "_is_protocol", False):
            continue  # modules, values; a Protocol's runtime __init__ is typing's placeholder
        try:
            parameters = inspect.signature(obj).parameters.values()
        except ValueError:  # a class on a builtin's constructor (an exception): nothing to say
            continue
        runtime = [(p.name, p.kind.description) for p in parameters]
        shown = [(p.name, p.kind.value) for p in drawn.parameters if p.name not in ("self", "cls")]
        assert shown == runtime, path
        compared.append(path)
    assert "stoker.agent.agent.Agent" in compared
