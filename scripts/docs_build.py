#!/usr/bin/env python3
"""Build the docs site (`make docs`): silent when clean, fails on any warning.

Run from the folder that holds mkdocs.yml: `python scripts/docs_build.py`; the site goes
to its `site_dir`. tests/test_docs_build.py runs this same script on a copy of the docs.

Why not just `mkdocs build --strict --quiet`: `--quiet` sets the `mkdocs` logger's level
to ERROR, so every WARNING record is dropped before it reaches any handler, the counter
`--strict` relies on included. A broken `[text][ref]` (reported by mkdocs-autorefs) or a
link to a missing page then built with exit status 0. So the build runs at its normal
level and its log is read here instead: any record above INFO, and any line printed
outside mkdocs' log (a logger outside the `mkdocs` tree, such as Python-Markdown's, which
`--strict` never counts), fails the build and is shown. A clean build prints nothing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

# mkdocs' log lines: "WARNING -  message"; a long message may continue on indented lines.
_RECORD = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+-\s+(.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_QUIET_LEVELS = {"DEBUG", "INFO"}


def command() -> list[str]:
    """The build itself; `--strict` also makes mkdocs abort on the warnings it counts."""
    return [sys.executable, "-m", "mkdocs", "build", "--strict"]


def problems(log: str) -> list[str]:
    """Every record of `log` above INFO, and every line that is no mkdocs record, whole."""
    found: list[str] = []
    quiet = False  # whether the record an indented line continues is one to ignore
    for raw in log.splitlines():
        line = _ANSI.sub("", raw).rstrip()
        if not line:
            continue
        record = _RECORD.match(line)
        if record is not None:
            quiet = record.group(1) in _QUIET_LEVELS
            if not quiet:
                found.append(line)
        elif line[0].isspace() and quiet:
            continue
        elif line[0].isspace() and found:
            found[-1] += "\n" + line
        else:
            quiet = False
            found.append(line)
    return found


def main() -> int:
    # Material for MkDocs prints a notice about MkDocs 2.0 on every build unless this is set;
    # it is about the tool's future, not about these docs.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        command(), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    found = problems(built.stdout)
    if built.returncode == 0 and not found:
        return 0
    print(built.stdout, end="", file=sys.stderr)
    print(f"docs build failed (mkdocs exit status {built.returncode}):", file=sys.stderr)
    for problem in found:
        print(f"  {problem}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
