"""The README's examples run as written (docs that run cannot rot), and it stays short."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.doc_examples import (
    Block,
    Services,
    blocks,
    check_with,
    live_services,
)

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_library_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    example = next(b for b in blocks if "session.fork" in b)
    done = subprocess.run(
        [sys.executable, "-c", example], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("Done. Tool results: 3")
    assert int(lines[-1]) > 1000  # the fork read the parent's prefix from the cache


def test_readme_typed_stream_and_sync_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    example = next(b for b in blocks if "output=Review" in b)
    done = subprocess.run(
        [sys.executable, "-c", example], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "Review True"
    assert lines[1] == "tool: word_count"
    assert "Done. Tool results: 4" in done.stdout
    assert "read from cache: True" in done.stdout
    assert lines[-1].startswith("verdict=")


# The README's other blocks (install, gateway, proxy) are held to the docs' rules
# (tests/doc_examples.py): python runs, shell parses, and `<!-- test: run -->` shell runs
# against a live gateway.
OTHER_BLOCKS = [b for b in blocks(README) if not (b.language == "python" and ("asyncio" in b.code))]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    with live_services(tmp_path_factory.mktemp("readme-services"), "the README's") as found:
        yield found


@pytest.mark.parametrize("block", OTHER_BLOCKS, ids=[b.id for b in OTHER_BLOCKS])
def test_readme_example(block: Block, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    check_with(block, request, tmp_path)


def test_the_readme_fits_on_a_screen_or_two_and_its_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 250
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert targets
    missing = [t for t in targets if "://" not in t and not (README.parent / t).exists()]
    assert not missing, missing
    assert {"## Install", "## As a library", "## The gateway", "## The recording proxy"} <= {
        line for line in text.splitlines() if line.startswith("## ")
    }
