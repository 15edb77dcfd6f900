"""Who wrote what, where from: the sidecar log next to the memory and skill files.

A user who finds a surprising line in MEMORY.md should be able to see which session,
which tool call, and whether a background review (not the conversation they watched)
wrote it. Each successful write appends one JSON object per line; the log is never
rewritten, so it also keeps every removed entry and deleted skill.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from stoker.clock import Clock
from stoker.memory._files import append_line
from stoker.tools.context import ToolContext

logger = logging.getLogger(__name__)

FOREGROUND = "foreground"
"""Origin of a write made by a tool call in the conversation the user sees."""
BACKGROUND_REVIEW = "background_review"
"""Origin of a write made by the background review fork."""
DIRECT = "direct"
"""Origin of a write made through the Python API, with no tool call behind it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    """Where a write came from.

    `origin` is FOREGROUND, BACKGROUND_REVIEW or DIRECT (other values are kept as
    given); `execution_context` says what kind of run made it (main session, fork,
    sub-agent, cron...); `platform` the surface the session serves (cli, a chat
    gateway...).
    """

    origin: str = DIRECT
    execution_context: str = "unknown"
    session_id: str = ""
    parent_session_id: str | None = None
    platform: str = "unknown"
    tool_use_id: str = ""
    run_id: str = ""

    @classmethod
    def from_context(cls, context: ToolContext) -> Provenance:
        """Provenance of a tool call: ids from the context, the rest from its metadata.

        Metadata keys: "origin" (default FOREGROUND: a tool call with no other word is
        the conversation's own), "execution_context" (else the session's "kind", which
        `Session.tool_context` sets), "parent_session_id", "platform".
        """
        meta = context.metadata
        parent = meta.get("parent_session_id")
        return cls(
            origin=str(meta.get("origin") or FOREGROUND),
            execution_context=str(meta.get("execution_context") or meta.get("kind") or "unknown"),
            session_id=context.session_id,
            parent_session_id=None if parent in (None, "") else str(parent),
            platform=str(meta.get("platform") or "unknown"),
            tool_use_id=context.tool_use_id,
            run_id=context.run_id,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteRecord:
    """One successful write, as logged.

    `target` is "memory" or "user" for the memory store and the skill name for the
    skills store. `text` is what was added or created; `old_text`/`new_text` are the
    whole entry (or SKILL.md) before and after a replace or update; `old_text` alone
    is what a remove or delete took away.
    """

    timestamp: str
    target: str
    action: str
    text: str | None = None
    old_text: str | None = None
    new_text: str | None = None
    provenance: Provenance

    def to_json(self) -> str:
        """One line of JSON, flat (provenance fields beside the write's), for `jq` users."""
        data = asdict(self)
        data.update(data.pop("provenance"))
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> WriteRecord:
        data: Any = json.loads(line)
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        names = {f.name for f in fields(Provenance)}
        provenance = Provenance(**{k: v for k, v in data.items() if k in names})
        own = {f.name for f in fields(cls)} - {"provenance"}
        return cls(**{k: v for k, v in data.items() if k in own}, provenance=provenance)


def timestamp(clock: Clock) -> str:
    """ISO 8601 in UTC, to the millisecond."""
    return dt.datetime.fromtimestamp(clock.now(), tz=dt.UTC).isoformat(timespec="milliseconds")


def log_write(
    path: Path,
    clock: Clock,
    *,
    target: str,
    action: str,
    provenance: Provenance | None,
    **texts: str,
) -> None:
    """Append one write to the log at `path`, stamped now (no provenance: an unknown one)."""
    record = WriteRecord(
        timestamp=timestamp(clock),
        target=target,
        action=action,
        provenance=provenance if provenance is not None else Provenance(),
        **texts,
    )
    append_line(path, record.to_json())


def read_log(path: Path | str) -> list[WriteRecord]:
    """Every record of a log file, oldest first ([] when there is none).

    A line that does not parse (a hand edit, a write cut short by a crash) is skipped
    with a warning rather than hiding every other record.
    """
    records: list[WriteRecord] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return records
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(WriteRecord.from_json(line))
        except (ValueError, TypeError) as exc:
            logger.warning("%s line %d skipped: %s", path, number, exc)
    return records
