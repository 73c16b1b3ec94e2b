"""The decision records in docs/decisions/ keep their form, and every link to one leads to it.

Each ``NNNN-slug.md`` has a title line ``# NNNN. Title`` naming its own number, ``- Date:``, ``- Status:``
(``accepted`` or ``superseded by NNNN`` of a record that exists), the sections Context, Decision and What it
costs, and a row in the index (docs/decisions/README.md).  Every ``decisions/NNNN`` and ``NNNN-slug.md``
named in docs/, src/, tests/, README.md and CHANGELOG.md is a record that exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DECISIONS = ROOT / "docs" / "decisions"
RECORD = re.compile(r"(\d{4})-[a-z0-9-]+\.md")
RECORDS = sorted(path for path in DECISIONS.iterdir() if RECORD.fullmatch(path.name))
SECTIONS = ("## Context", "## Decision", "## What it costs")


def numbers() -> set[str]:
    return {path.name[:4] for path in RECORDS}


def problems_of(path: Path, known: set[str], index: str) -> list[str]:
    number = path.name[:4]
    lines = path.read_text(encoding="utf-8").splitlines()
    problems = []
    if not lines or not re.fullmatch(rf"# {number}\. \S.*", lines[0]):
        problems.append(f"the first line is not '# {number}. Title'")
    head = [line for line in lines[1:12] if line.startswith("- ")]
    if not any(re.fullmatch(r"- Date: \d{4}-\d\d-\d\d", line) for line in head):
        problems.append("no '- Date: YYYY-MM-DD' line under the title")
    status = next((line[len("- Status: ") :] for line in head if line.startswith("- Status: ")), None)
    told = re.match(r"accepted\b|superseded by (\d{4})\b", status or "")
    if told is None:
        problems.append(f"the status {status!r} is not 'accepted' or 'superseded by NNNN'")
    elif told.group(1) is not None and told.group(1) not in known:
        problems.append(f"superseded by {told.group(1)}, which is no record")
    problems += [f"no section {section!r}" for section in SECTIONS if section not in lines]
    if f"| [{number}]({path.name}) |" not in index:
        problems.append("no row in docs/decisions/README.md")
    return problems


def test_there_are_records() -> None:
    assert len(RECORDS) >= 30
    assert len(numbers()) == len(RECORDS)  # no number used twice


@pytest.mark.parametrize("path", RECORDS, ids=[path.name[:4] for path in RECORDS])
def test_a_record_has_its_form(path: Path) -> None:
    index = (DECISIONS / "README.md").read_text(encoding="utf-8")
    assert problems_of(path, numbers(), index) == []


def test_a_record_out_of_form_is_told(tmp_path: Path) -> None:
    bad = tmp_path / "0099-a-bad-one.md"
    bad.write_text("# A title\n\n- Status: superseded by 0098\n\n## Decision\n", encoding="utf-8")
    assert problems_of(bad, numbers() | {"0099"}, "") == [
        "the first line is not '# 0099. Title'",
        "no '- Date: YYYY-MM-DD' line under the title",
        "superseded by 0098, which is no record",
        "no section '## Context'",
        "no section '## What it costs'",
        "no row in docs/decisions/README.md",
    ]


def test_every_index_row_is_a_record() -> None:
    index = (DECISIONS / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| \[(\d{4})\]\(([^)]+)\) \|", index, re.MULTILINE)
    assert rows
    assert [(number, name) for number, name in rows if not (DECISIONS / name).is_file() or name[:4] != number] == []


def linked(text: str) -> set[str]:
    """The record names and numbers a text links to: ``NNNN-slug.md`` and ``decisions/NNNN``."""
    return {m.group(0) for m in RECORD.finditer(text)} | set(re.findall(r"decisions/(\d{4})\b(?!-)", text))


def test_every_link_to_a_record_resolves() -> None:
    names = {path.name for path in RECORDS}
    places = [ROOT / "README.md", ROOT / "CHANGELOG.md"]
    for folder in ("docs", "src", "tests"):
        places += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".md", ".py", ".toml") and p.is_file()]
    broken = []
    for place in places:
        text = place.read_text(encoding="utf-8", errors="replace")
        if place.name == Path(__file__).name:
            continue  # its own example of a broken link
        broken += [f"{place.relative_to(ROOT)}: {link}" for link in linked(text) if link not in names | numbers()]
    assert sorted(broken) == []


def test_a_broken_link_is_found() -> None:
    assert linked("see docs/decisions/0999 and (0998-gone.md)") == {"0999", "0998-gone.md"}
