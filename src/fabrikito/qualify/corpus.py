"""The project's evidence for every qualified release: its captures, stored once, and what they showed.

``tests/fixtures/releases/`` holds, per release, a manifest ``<release>.json``
(the dialect it qualified with, or the differences that kept it out; the date;
each capture's name and key) and, in ``screens/``, the captures themselves,
named by a hash of their content: a screen drawn the same by several releases
is stored once.  From the manifests the qualifying script writes the package's
table (:mod:`fabrikito.screen.qualified`) and ``docs/compatibility.md``, and a
unit test reads every stored capture again with its release's dialect.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabrikito.qualify.capture import Capture
from fabrikito.qualify.run import Outcome

VARYING_META = ("claude_code", "release", "note")  # not part of what a screen is: kept out of its key
#: Where another agent's evidence lives, under the folder of Claude Code's (same layout).
OTHER_AGENTS = ("codex", "gemini")


@dataclass
class Manifest:
    release: str
    qualified: bool
    dialect: str | None
    date: str
    checked: str
    captures: dict[str, str] = field(default_factory=dict)  # capture name -> key in screens/
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "release": self.release,
            "qualified": self.qualified,
            "dialect": self.dialect,
            "date": self.date,
            "checked": self.checked,
            "captures": dict(sorted(self.captures.items())),
            "problems": self.problems,
        }


def release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def capture_key(capture: Capture) -> str:
    meta = {k: v for k, v in capture.meta.items() if k not in VARYING_META}
    digest = hashlib.sha256()
    digest.update(capture.ansi.encode("utf-8"))
    digest.update(json.dumps(meta, sort_keys=True).encode("utf-8"))
    return digest.hexdigest()[:20]


def store(folder: Path, outcome: Outcome, *, date: str, checked: str) -> Manifest:
    """Write ``outcome``'s captures (those not stored yet) and its manifest under ``folder``."""
    screens = folder / "screens"
    screens.mkdir(parents=True, exist_ok=True)
    manifest = Manifest(
        release=outcome.release,
        qualified=outcome.qualified,
        dialect=outcome.dialect,
        date=date,
        checked=checked,
        problems=list(outcome.problems),
    )
    for capture in outcome.captures:
        key = capture_key(capture)
        manifest.captures[capture.name] = key
        if not (screens / f"{key}.ansi").exists():
            meta = {k: v for k, v in capture.meta.items() if k not in VARYING_META}
            (screens / f"{key}.txt").write_text(capture.text, encoding="utf-8")
            (screens / f"{key}.ansi").write_text(capture.ansi, encoding="utf-8")
            (screens / f"{key}.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    text = json.dumps(manifest.to_json(), indent=1) + "\n"
    (folder / f"{outcome.release}.json").write_text(text, encoding="utf-8")
    return manifest


def manifests(folder: Path) -> list[Manifest]:
    """Every release's manifest, oldest release first."""
    found = []
    for path in folder.glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        found.append(
            Manifest(
                release=data["release"],
                qualified=bool(data["qualified"]),
                dialect=data.get("dialect"),
                date=data["date"],
                checked=data["checked"],
                captures=dict(data["captures"]),
                problems=list(data.get("problems", [])),
            )
        )
    return sorted(found, key=lambda m: release_key(m.release))


def load_capture(folder: Path, name: str, key: str, release: str) -> Capture:
    screens = folder / "screens"
    meta = json.loads((screens / f"{key}.json").read_text(encoding="utf-8"))
    meta["release" if "agent" in meta else "claude_code"] = release
    text = (screens / f"{key}.txt").read_text(encoding="utf-8")
    ansi = (screens / f"{key}.ansi").read_text(encoding="utf-8")
    return Capture(name, str(meta.get("case", "")), str(meta.get("renderer", "")), text, ansi, meta)


def _rows(found: list[Manifest]) -> str:
    return "".join(f'    "{m.release}": "{m.dialect}",\n' for m in found if m.qualified and m.dialect)


def table_source(found: list[Manifest], others: dict[str, list[Manifest]] | None = None) -> str:
    """The text of ``src/fabrikito/screen/qualified.py``: the qualified releases among ``found`` (Claude
    Code's) and among ``others`` (agent -> its manifests)."""
    others = others or {}
    tables = "".join(
        f"\n{agent.upper()}: dict[str, str] = {{\n" + _rows(others.get(agent, [])) + "}\n" for agent in OTHER_AGENTS
    )
    return (
        '"""The agent releases this copy of fabrikito has qualified, and the dialect each speaks.\n\n'
        "Written by ``scripts/qualify_releases.py`` from the captures of each release's\n"
        "real binary (``tests/fixtures/releases/``, another agent's under its name); not\n"
        "edited by hand.  A release enters only when every capture of its agent's\n"
        'catalogue was read as expected.\n"""\n\n'
        "from __future__ import annotations\n\n"
        "CLAUDE: dict[str, str] = {\n" + _rows(found) + "}\n" + tables
    )


def compatibility_doc(found: list[Manifest], others: dict[str, list[Manifest]] | None = None) -> str:
    """``docs/compatibility.md``: a row per release, Claude Code's first, then each other agent's."""
    lines = [
        "# Compatibility: Claude Code releases",
        "",
        "Written by `scripts/qualify_releases.py`, not by hand. Each release's real binary was run offline",
        "(the stand-in model, a private tmux server, an isolated HOME) through the catalogue of states in",
        "`src/fabrikito/qualify/catalogue.py`, in both renderers, and every capture was read with each",
        "dialect; a release qualifies with the oldest dialect that reads every capture as expected and",
        "passes the messaging checks (the registry entry, the SendMessage hook's line, a post to the inbox",
        "socket, a labelled message through `say`'s engine reaching the model intact). The captures are in",
        "`tests/fixtures/releases/`, and a unit test reads them again on every run.",
        "",
        "A release not listed here can be qualified on your machine with `fabrikito qualify`.",
        "",
        "| release | date qualified | dialect | what was checked | result |",
        "|---|---|---|---|---|",
    ]
    for m in found:
        result = "qualified" if m.qualified else "NOT qualified: " + "; ".join(m.problems[:3]).replace("|", "\\|")
        lines.append(f"| {m.release} | {m.date} | {m.dialect or '-'} | {m.checked} | {result} |")
    lines += _other_sections(others or {})
    return "\n".join(lines) + "\n"


_OTHER_NAMES = {"codex": "Codex CLI (`@openai/codex`)", "gemini": "Gemini CLI (`@google/gemini-cli`)"}


def _other_sections(others: dict[str, list[Manifest]]) -> list[str]:
    lines = [
        "",
        "## Other agents",
        "",
        "Codex CLI and Gemini CLI releases are qualified the same way, through their own catalogue",
        "(`src/fabrikito/qualify/others.py`: the empty box, typed and pasted text with the label, the",
        "longest paste shown as it is and the shortest shown as a placeholder, a finished turn, a busy",
        "turn, text typed while busy, a prompt sent while busy, a reply still streaming, an interrupted",
        "turn, the approval dialog, the start-up dialog, copy mode; Codex: a text taller than its box;",
        "Gemini: YOLO and shell mode), in the one screen each draws, 120x40. A busy screen must be read",
        "as not typable. The messaging checks of Claude Code (registry, hook, inbox) do not apply.",
        "Their captures are in `tests/fixtures/releases/<agent>/`.",
    ]
    for agent in OTHER_AGENTS:
        lines += [
            "",
            f"### {_OTHER_NAMES[agent]}",
            "",
            "| release | date qualified | dialect | what was checked | result |",
        ]
        lines.append("|---|---|---|---|---|")
        for m in others.get(agent, []):
            result = "qualified" if m.qualified else "NOT qualified: " + "; ".join(m.problems[:3]).replace("|", "\\|")
            lines.append(f"| {m.release} | {m.date} | {m.dialect or '-'} | {m.checked} | {result} |")
    return lines
