"""No module under ``src/`` is over 600 lines: one that grows past it has two concepts in it (STYLE.md)."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
MAX_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    modules = sorted(SRC.rglob("*.py"))
    assert modules, f"no modules found under {SRC}"
    sizes = {path.relative_to(SRC).as_posix(): len(path.read_text(encoding="utf-8").splitlines()) for path in modules}
    over = [f"{name}: {lines} lines" for name, lines in sorted(sizes.items()) if lines > MAX_LINES]
    assert not over, f"modules over {MAX_LINES} lines (split each into the concepts it holds): " + ", ".join(over)
