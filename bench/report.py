"""Write one benchmark's section of docs/benchmarks.md, leaving the others as they are."""

from __future__ import annotations

import compileall
import os
import platform
import sys
import time
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
HEADER = "# Benchmarks\n\nEach section is written by the script it names; run it again to update it.\n"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for row in Path("/proc/cpuinfo").read_text().splitlines():
            if row.startswith("model name"):
                cpu = row.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def write_section(name: str, body: str) -> None:
    """Replace (or add) the section between ``<!-- bench:NAME -->`` markers."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    text = DOC.read_text() if DOC.exists() else HEADER
    stamp = time.strftime("%Y-%m-%d %H:%M")
    section = f"{start}\n{body.rstrip()}\n\nMachine: {machine()}. Run: {stamp}.\n{end}"
    if start in text and end in text:
        head, _, rest = text.partition(start)
        _, _, tail = rest.partition(end)
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(text)


def fabrikito_cli() -> list[str]:
    """The command as people and seats run it: the installed ``fabrikito`` next to this
    interpreter (else ``python -m fabrikito``), with the package byte-compiled first,
    so no run pays for compiling (``PYTHONDONTWRITEBYTECODE`` would make every run do so)."""
    compileall.compile_dir(str(DOC.parents[1] / "src" / "fabrikito"), quiet=1)
    script = Path(sys.executable).with_name("fabrikito")
    return [str(script)] if script.exists() else [sys.executable, "-m", "fabrikito"]
