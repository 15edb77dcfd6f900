"""Every code block of the docs site runs or parses (the rules: tests/doc_examples.py); that
the site builds with no warning is `make docs` (`make test` runs it too) and
tests/test_docs_build.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.doc_examples import (
    Block,
    Services,
    blocks,
    check_with,
    docs_pages,
    live_services,
)

BLOCKS = [b for page in docs_pages() for b in blocks(page)]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    with live_services(tmp_path_factory.mktemp("docs-services"), "the docs'") as found:
        yield found


def test_the_docs_have_examples_of_every_kind() -> None:
    languages = {b.language for b in BLOCKS}
    assert {"python", "sh", "toml"} <= languages
    assert any(b.mark == "run" for b in BLOCKS), "no shell example is run"


@pytest.mark.slow  # a process (or several `stoker` commands) per block
@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_docs_example(block: Block, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    check_with(block, request, tmp_path)
