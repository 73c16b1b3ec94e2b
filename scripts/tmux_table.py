"""Write docs/compatibility.md's tmux table from what the last run of the tests found.

The run (``./scripts/test``, or any pytest run of the ``tmux_releases`` modules) keeps its results
per release and module in ``.pytest_cache/fabrikito-tmux-releases.json`` (tests/tmuxreleases.py);
this turns them into the table between the ``tmux-table`` markers: release, what was checked, result.

    .venv/bin/python scripts/tmux_table.py [RESULTS.json ...]

Several files (runs of part of the suite) are added together.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests import tmuxreleases  # noqa: E402 -- after the path is set

DOC = ROOT / "docs" / "compatibility.md"
BEGIN = "<!-- tmux-table: written by scripts/tmux_table.py from a run of the tests -->"
END = "<!-- /tmux-table -->"


def table(results: dict[str, dict[str, dict[str, int]]]) -> str:
    lines = ["| tmux | what was checked | result |", "|---|---|---|"]
    for release in tmuxreleases.RELEASES:
        modules = results.get(release, {})
        if not modules:
            lines.append(f"| {release} | — | not run |")
        for module, counts in sorted(modules.items()):
            what = tmuxreleases.CHECKED.get(module, module)
            failed = counts.get("failed", 0) + counts.get("error", 0)
            shown = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
            lines.append(f"| {release} | {what} (`{module}`) | {'FAILED: ' if failed else ''}{shown} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or [tmuxreleases.RESULTS]
    merged: defaultdict[str, defaultdict[str, defaultdict[str, int]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(int))
    )
    for path in paths:
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"error: cannot read {path}: {exc}; run the tests first (./scripts/test)", file=sys.stderr)
            return 1
        for release, modules in found.items():
            for module, counts in modules.items():
                for outcome, n in counts.items():
                    merged[release][module][outcome] += n
    text = DOC.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"error: {DOC} has no tmux-table markers", file=sys.stderr)
        return 1
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    plain = {r: {m: dict(c) for m, c in ms.items()} for r, ms in merged.items()}
    DOC.write_text(f"{head}{BEGIN}\n{table(plain)}\n{END}{tail}", encoding="utf-8")
    print(f"wrote the tmux table of {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
