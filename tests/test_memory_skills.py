"""SkillStore: SKILL.md files as a human reads them, the index, names, hand edits."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.memory import (
    InvalidSkill,
    Skill,
    SkillExists,
    SkillNotFound,
    SkillStore,
    check_skill_name,
    skills_section,
)


@pytest.fixture
def store(tmp_path: Path) -> SkillStore:
    return SkillStore(tmp_path / "skills")


def test_create_update_delete_round_trip(store: SkillStore) -> None:
    created = store.create(
        "deploy-checklist", "  Checks before a deploy  ", "\n1. Staging first.\n\n2. Prod.\n\n"
    )
    assert created == Skill(
        name="deploy-checklist",
        description="Checks before a deploy",
        body="1. Staging first.\n\n2. Prod.",
    )
    path = store.directory / "deploy-checklist" / "SKILL.md"
    assert path.read_text(encoding="utf-8") == (
        "---\nname: deploy-checklist\ndescription: Checks before a deploy\n---\n\n"
        "1. Staging first.\n\n2. Prod.\n"
    )
    assert store.get("deploy-checklist") == created

    store.update("deploy-checklist", body="1. Tag the release.")
    assert path.read_text(encoding="utf-8") == (
        "---\nname: deploy-checklist\ndescription: Checks before a deploy\n---\n\n"
        "1. Tag the release.\n"
    )
    store.update("deploy-checklist", description="Use before any production deploy")
    assert path.read_text(encoding="utf-8") == (
        "---\nname: deploy-checklist\ndescription: Use before any production deploy\n---\n\n"
        "1. Tag the release.\n"
    )

    deleted = store.delete("deploy-checklist")
    assert deleted.body == "1. Tag the release."
    assert sorted(p.name for p in store.directory.iterdir()) == [".lock", "skills.log.jsonl"]
    assert store.list() == ()
    assert [(r.action, r.target) for r in store.read_log()] == [
        ("create", "deploy-checklist"),
        ("update", "deploy-checklist"),
        ("update", "deploy-checklist"),
        ("delete", "deploy-checklist"),
    ]
    last = store.read_log()[-1]
    assert last.old_text is not None
    assert "1. Tag the release." in last.old_text  # a deleted skill is recoverable


def test_index_is_one_sorted_line_per_skill(store: SkillStore) -> None:
    assert store.index() == ""
    store.create("zeta", "Last by name", "z")
    store.create("alpha", "First: by name", "a")
    store.create("m2", "Middle", "m")
    (store.directory / "Not A Skill").mkdir()  # a folder a human made: not a valid name
    (store.directory / "empty-folder").mkdir()  # no SKILL.md
    assert store.names() == ("alpha", "m2", "zeta")
    assert store.index() == "alpha: First: by name\nm2: Middle\nzeta: Last by name"
    assert skills_section(store).endswith("\nalpha: First: by name\nm2: Middle\nzeta: Last by name")


@pytest.mark.parametrize(
    "name", ["", "Deploy", "-lead", "has space", "a_b", "é", "a" * 65, "../escape", None]
)
def test_skill_names_are_validated(store: SkillStore, name: object) -> None:
    with pytest.raises(InvalidSkill) as caught:
        store.create(name, "d", "b")  # type: ignore[arg-type]
    assert str(caught.value) == (
        f"invalid skill name {name!r}: use 1 to 64 characters among lowercase letters, "
        "digits and '-', starting with a letter or digit (e.g. 'deploy-checklist')"
    )
    assert not store.directory.exists()


@pytest.mark.parametrize("name", ["a", "0", "deploy-checklist", "x" * 64, "a--b", "9-lives"])
def test_valid_skill_names(name: str) -> None:
    assert check_skill_name(name) == name


@pytest.mark.parametrize(
    ("description", "body", "message"),
    [
        ("", "b", "the description is empty; say in one line when to use the skill"),
        ("two\nlines", "b", "the description must be one line; put details in the body"),
        (
            "d" * 1_025,
            "b",
            "the description is 1,025 characters, over 1,024; shorten it and put details "
            "in the body",
        ),
        ("d", " \n ", "the body is empty; write the steps of the skill"),
        (
            "d",
            "b" * 32_001,
            "the body is 32,001 characters, over 32,000: a skill is read into the conversation "
            "whenever it is used; keep the steps and drop the rest",
        ),
    ],
)
def test_descriptions_and_bodies_are_validated(
    store: SkillStore, description: str, body: str, message: str
) -> None:
    with pytest.raises(InvalidSkill) as caught:
        store.create("s", description, body)
    assert str(caught.value) == message
    assert store.names() == ()


def test_create_never_overwrites_and_missing_skills_say_what_exists(store: SkillStore) -> None:
    store.create("ship", "d", "original")
    before = (store.directory / "ship" / "SKILL.md").read_bytes()
    with pytest.raises(SkillExists, match="skill 'ship' already exists; use action 'update'"):
        store.create("ship", "d", "replacement")
    assert (store.directory / "ship" / "SKILL.md").read_bytes() == before
    with pytest.raises(SkillNotFound) as caught:
        store.update("shop", body="x")
    assert str(caught.value) == "no skill named 'shop'; the skills are: ship"
    with pytest.raises(SkillNotFound):
        store.delete("shop")
    with pytest.raises(InvalidSkill, match="nothing to update in skill 'ship'"):
        store.update("ship")


def test_a_hand_written_skill_keeps_its_other_front_matter(store: SkillStore) -> None:
    folder = store.directory / "pdf-tools"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\n"
        "name: pdf-tools\n"
        "description: 'Fill PDF forms: it''s quick'\n"
        "license: MIT\n"
        "metadata:\n"
        "  version: 2\n"
        "---\n"
        "# PDF tools\n\nRun `fill.py`.\n",
        encoding="utf-8",
    )
    (folder / "fill.py").write_text("print('hi')\n", encoding="utf-8")
    skill = store.get("pdf-tools")
    assert skill == Skill(
        name="pdf-tools",
        description="Fill PDF forms: it's quick",
        body="# PDF tools\n\nRun `fill.py`.",
        extra=("license: MIT", "metadata:", "  version: 2"),
    )
    store.update("pdf-tools", body="# PDF tools\n\nRun `fill.py --all`.")
    assert (folder / "SKILL.md").read_text(encoding="utf-8") == (
        "---\n"
        "name: pdf-tools\n"
        'description: "Fill PDF forms: it\'s quick"\n'
        "license: MIT\n"
        "metadata:\n"
        "  version: 2\n"
        "---\n\n"
        "# PDF tools\n\nRun `fill.py --all`.\n"
    )
    assert store.get("pdf-tools").description == "Fill PDF forms: it's quick"
    store.delete("pdf-tools")
    assert sorted(p.name for p in folder.iterdir()) == ["fill.py"]  # the human's file stays
    assert store.names() == ()


def test_a_skill_md_without_front_matter_is_all_body(store: SkillStore) -> None:
    folder = store.directory / "notes"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("Just steps.\n---\nmore\n", encoding="utf-8")
    assert store.get("notes") == Skill(name="notes", description="", body="Just steps.\n---\nmore")
    assert store.index() == "notes"


def test_skill_writes_leave_no_temp_files(store: SkillStore) -> None:
    store.create("a", "d", "b")
    store.update("a", body="c")
    store.create("b", "d", "b")
    top = sorted(p.name for p in store.directory.iterdir())
    assert top == [".lock", "a", "b", "skills.log.jsonl"]
    assert [p.name for p in (store.directory / "a").iterdir()] == ["SKILL.md"]


def test_an_oversized_update_changes_nothing_and_logs_nothing(store: SkillStore) -> None:
    store.create("ship", "d", "short")
    before = (store.directory / "ship" / "SKILL.md").read_bytes()
    log = store.log_path.read_bytes()
    with pytest.raises(InvalidSkill, match="over 32,000"):
        store.update("ship", body="x" * 20_000_000)
    assert (store.directory / "ship" / "SKILL.md").read_bytes() == before
    assert store.log_path.read_bytes() == log
