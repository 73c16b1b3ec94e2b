"""The README's `notify` scripts carry a hostile detail as data: never into a script, never as a file name.

A detail is read from a seat's screen (an API error's text, a dialog's question), so a seat can choose it.
Each ``sh`` block of the README that reads ``FABRIKITO_DETAIL`` is run as the watcher runs a notify
command, against stand-ins for ``notify-send``, ``osascript`` and ``curl`` that record their arguments
and stdin; the detail must reach each as one whole argument that the program takes as text.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests import userenv

README = Path(__file__).resolve().parents[2] / "README.md"
DETAIL = '@/etc/passwd" & do shell script "touch /tmp/fabrikito-pwned" & "`id` $(id) \'; x'
# curl's options that read "@name" as a file to send.
FILE_OPTIONS = {"-d", "--data", "--data-binary", "--data-ascii", "--data-urlencode", "-F", "--form"}

RECORDER = """#!{python}
import json, os, sys
data = sys.stdin.read() if not sys.stdin.isatty() else ""
with open(os.environ["RECORD"], "a") as out:
    out.write(json.dumps({{"program": os.path.basename(sys.argv[0]), "argv": sys.argv[1:], "stdin": data}}) + "\\n")
"""


def notify_scripts() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    return [block for block in blocks if "FABRIKITO_DETAIL" in block or "--data-binary @-" in block]


def run(script: str, tmp_path: Path) -> list[dict[str, object]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("notify-send", "osascript", "curl"):
        path = bin_dir / program
        path.write_text(RECORDER.format(python=sys.executable))
        path.chmod(0o755)
    path = tmp_path / "notify.sh"
    path.write_text(script)
    path.chmod(0o755)
    record = tmp_path / "record.jsonl"
    event = {"event": "opened", "kind": "api-error", "seat": "dev", "detail": DETAIL, "team": "t"}
    env = userenv.user_env(
        PATH=f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        RECORD=str(record),
        FABRIKITO_EVENT="opened",
        FABRIKITO_KIND="api-error",
        FABRIKITO_SEAT="dev",
        FABRIKITO_DETAIL=DETAIL,
        FABRIKITO_TEAM="t",
    )
    done = subprocess.run(
        ["/bin/sh", str(path)],
        check=False,
        input=json.dumps(event),
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in record.read_text().splitlines()]


def test_the_readme_shows_a_script_per_notifier() -> None:
    programs = {re.search(r"\b(notify-send|osascript|curl)\b", block).group(1) for block in notify_scripts()}  # type: ignore[union-attr]
    assert programs == {"notify-send", "osascript", "curl"}
    assert len(notify_scripts()) == 4


@pytest.mark.parametrize("index", range(4))
def test_each_readme_notify_script_passes_a_hostile_detail_as_text(index: int, tmp_path: Path) -> None:
    calls = run(notify_scripts()[index], tmp_path)
    assert len(calls) == 1
    argv = [str(arg) for arg in calls[0]["argv"]]  # type: ignore[attr-defined]
    if "--data-binary" in argv:  # the webhook: the event as it came on stdin, and nothing of it on the line
        assert argv[argv.index("--data-binary") + 1] == "@-"
        assert json.loads(str(calls[0]["stdin"]))["detail"] == DETAIL
        assert not [arg for arg in argv if "passwd" in arg]
        return
    whole = [i for i, arg in enumerate(argv) if arg == DETAIL]
    assert len(whole) == 1, argv
    assert not [arg for arg in argv if arg != DETAIL and "passwd" in arg], "the detail went into another argument"
    assert argv[whole[0] - 1] not in FILE_OPTIONS, "curl would read the detail's @name as a file"
