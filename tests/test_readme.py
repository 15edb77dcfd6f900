"""The README's library example runs as written (docs that run cannot rot)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_library_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    assert blocks, "the README has no python example"
    done = subprocess.run(
        [sys.executable, "-c", blocks[0]], capture_output=True, text=True, timeout=60, check=False
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
