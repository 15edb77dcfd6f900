"""Skills: reusable procedures the agent wrote down, a folder per skill with a SKILL.md.

    skills/
      deploy-checklist/
        SKILL.md          ---
                          name: deploy-checklist
                          description: Steps to check before a production deploy
                          ---

                          1. Run the migrations on staging ...

The layout follows the common SKILL.md convention, so skills can be copied between
tools. The front matter is read by hand (no YAML dependency): `name:` and
`description:` lines are Stoker's; any other front-matter line a human or another
tool wrote is kept verbatim on update. The folder name is the skill's name.

A new session's system prompt holds only the index (one line per skill); the model
loads a body on demand with `skill_view`, so adding a skill never grows every prompt
by its whole text.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import re
from dataclasses import dataclass, replace
from pathlib import Path

from stoker.clock import Clock, SystemClock
from stoker.memory._files import atomic_write, locked, read_text
from stoker.memory.errors import InvalidSkill, SkillExists, SkillNotFound
from stoker.memory.provenance import Provenance, WriteRecord, log_write, read_log
from stoker.tools.tool import matching

logger = logging.getLogger(__name__)

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
NAME_RULE = (
    "use 1 to 64 characters among lowercase letters, digits and '-', starting with a letter "
    "or digit (e.g. 'deploy-checklist')"
)
SKILL_FILE = "SKILL.md"
LOG_FILE = "skills.log.jsonl"
MAX_DESCRIPTION = 1_024
MAX_BODY = 32_000  # characters: about 8k tokens, loaded into a turn whenever it is viewed

_FENCE = "---"
_KEY = re.compile(r"^(name|description)\s*:(.*)$")
# A description needs quotes where a YAML reader would take it for something else.
_NEEDS_QUOTES = re.compile(r"""^[-?:,\[\]{}#&*!|>'"%@`]|:\s|\s#|:$""")


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """A skill as stored. `extra` holds front-matter lines other than name and
    description, verbatim, so an update does not drop what another tool put there."""

    name: str
    description: str
    body: str
    extra: tuple[str, ...] = ()

    def render(self) -> str:
        """The SKILL.md text."""
        description = self.description
        if _NEEDS_QUOTES.search(description):
            description = json.dumps(description, ensure_ascii=False)
        front = [f"name: {self.name}", f"description: {description}", *self.extra]
        return "\n".join([_FENCE, *front, _FENCE, "", self.body]) + "\n"


def check_skill_name(name: object) -> str:
    """`name` if it can be a skill (and folder) name, else InvalidSkill saying what fits."""
    return matching(name, NAME_PATTERN, what="skill name", rule=NAME_RULE, error=InvalidSkill)


def parse_skill(name: str, text: str) -> Skill:
    """A SKILL.md's text as a Skill named after its folder (a file without front matter
    is all body, with an empty description)."""
    lines = text.splitlines()
    front: list[str] = []
    body_lines = lines
    if lines and lines[0].strip() == _FENCE:
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == _FENCE), None)
        if end is not None:
            front, body_lines = lines[1:end], lines[end + 1 :]
    description = ""
    extra: list[str] = []
    for line in front:
        match = _KEY.match(line)
        if match is None:
            extra.append(line)
        elif match[1] == "description":
            description = _unquote(match[2].strip())
        elif _unquote(match[2].strip()) != name:
            logger.warning("skill folder %r has name %r in its SKILL.md", name, match[2].strip())
    body = "\n".join(body_lines).strip("\n").rstrip()
    return Skill(name=name, description=description, body=body, extra=tuple(extra))


class SkillStore:
    """Skill folders and their provenance log in one directory.

    The directory is given (`Config.skills_dir` is `skills/` in the Stoker home); it is
    created on the first write. Writes are atomic
    and serialized across processes, like the memory store's.
    """

    __slots__ = ("_clock", "directory")

    def __init__(
        self,
        directory: Path | str,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.directory = Path(directory)
        self._clock: Clock = clock if clock is not None else SystemClock()

    def __repr__(self) -> str:
        return f"SkillStore({str(self.directory)!r})"

    @property
    def log_path(self) -> Path:
        return self.directory / LOG_FILE

    def path(self, name: str) -> Path:
        """The SKILL.md of skill `name` (which may not exist)."""
        return self.directory / check_skill_name(name) / SKILL_FILE

    def names(self) -> tuple[str, ...]:
        """Names of the stored skills, sorted (folders with a valid name and a SKILL.md)."""
        if not self.directory.is_dir():
            return ()
        return tuple(
            sorted(
                entry.name
                for entry in self.directory.iterdir()
                if NAME_PATTERN.fullmatch(entry.name) and (entry / SKILL_FILE).is_file()
            )
        )

    def list(self) -> tuple[Skill, ...]:
        """Every stored skill, sorted by name."""
        skills = []
        for name in self.names():
            with contextlib.suppress(SkillNotFound):  # deleted by another process just now
                skills.append(self.get(name))
        return tuple(skills)

    def get(self, name: str) -> Skill:
        """The skill called `name`, read from disk now; SkillNotFound lists the others."""
        return self._read(name)[0]

    def index(self) -> str:
        """One "name: description" line per skill, sorted by name ("" when none)."""
        return "\n".join(
            f"{s.name}: {s.description}" if s.description else s.name for s in self.list()
        )

    def read_log(self) -> builtins.list[WriteRecord]:
        """Every logged write, oldest first."""
        return read_log(self.log_path)

    def create(
        self, name: str, description: str, body: str, *, provenance: Provenance | None = None
    ) -> Skill:
        """Store a new skill; SkillExists when the name is taken (create never overwrites)."""
        skill = Skill(
            name=check_skill_name(name),
            description=_check_description(description),
            body=_check_body(body),
        )
        with locked(self.directory):
            path = self.path(name)
            if path.is_file():
                raise SkillExists(
                    f"skill {name!r} already exists; use action 'update' to change it, or "
                    "choose another name"
                )
            path.parent.mkdir(exist_ok=True)
            text = skill.render()
            atomic_write(path, text)
            self._log(name, "create", provenance, text=text)
        return skill

    def update(
        self,
        name: str,
        description: str | None = None,
        body: str | None = None,
        *,
        provenance: Provenance | None = None,
    ) -> Skill:
        """Change a skill's description and/or body; front-matter lines Stoker does not
        own are kept."""
        check_skill_name(name)
        if description is None and body is None:
            raise InvalidSkill(
                f"nothing to update in skill {name!r}: give a description, a body, or both"
            )
        new_description = None if description is None else _check_description(description)
        new_body = None if body is None else _check_body(body)
        with locked(self.directory):
            old, old_text = self._read(name)
            skill = replace(
                old,
                description=old.description if new_description is None else new_description,
                body=old.body if new_body is None else new_body,
            )
            text = skill.render()
            atomic_write(self.path(name), text)
            self._log(name, "update", provenance, old_text=old_text, new_text=text)
        return skill

    def delete(self, name: str, *, provenance: Provenance | None = None) -> Skill:
        """Remove a skill's SKILL.md, and its folder when nothing else is in it.

        Other files in the folder (scripts, references a human added) are left alone;
        the removed SKILL.md stays in the log.
        """
        with locked(self.directory):
            old, old_text = self._read(name)
            path = self.path(name)
            path.unlink()
            with contextlib.suppress(OSError):
                path.parent.rmdir()  # fails, on purpose, when the folder holds other files
            self._log(name, "delete", provenance, old_text=old_text)
        return old

    def _read(self, name: str) -> tuple[Skill, str]:
        """The skill and its SKILL.md text as stored (hand edits included)."""
        path = self.path(name)
        if not path.is_file():
            raise self._not_found(name)
        text = read_text(path)
        return parse_skill(name, text), text

    def _log(self, name: str, action: str, provenance: Provenance | None, **texts: str) -> None:
        log_write(
            self.log_path, self._clock, target=name, action=action, provenance=provenance, **texts
        )

    def _not_found(self, name: str) -> SkillNotFound:
        known = ", ".join(self.names()) or "(none yet)"
        return SkillNotFound(f"no skill named {name!r}; the skills are: {known}")


def _check_description(description: object) -> str:
    text = _filled(description, "description", "say in one line when to use the skill").strip()
    if "\n" in text or "\r" in text:
        raise InvalidSkill("the description must be one line; put details in the body")
    return _within(text, "description", MAX_DESCRIPTION, "; shorten it and put details in the body")


def _check_body(body: object) -> str:
    text = _filled(body, "body", "write the steps of the skill").strip("\n").rstrip()
    return _within(
        text,
        "body",
        MAX_BODY,
        ": a skill is read into the conversation whenever it is used; keep the steps and "
        "drop the rest",
    )


def _filled(value: object, part: str, advice: str) -> str:
    """`value` if it is a string with more than white space, else InvalidSkill."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidSkill(f"the {part} is empty; {advice}")
    return value


def _within(text: str, part: str, limit: int, advice: str) -> str:
    """`text` if it has at most `limit` characters, else InvalidSkill (`advice` follows)."""
    if len(text) > limit:
        raise InvalidSkill(f"the {part} is {len(text):,} characters, over {limit:,}{advice}")
    return text


def _unquote(value: str) -> str:
    """A front-matter value, with YAML-style quotes removed when it has them."""
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            loaded = json.loads(value)
        except ValueError:
            return value[1:-1]
        return loaded if isinstance(loaded, str) else value
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value
