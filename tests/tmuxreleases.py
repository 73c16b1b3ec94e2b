"""The tmux releases the tests run on, and what one run of them found (docs/compatibility.md's tmux table).

A test module marked ``pytestmark = pytest.mark.tmux_releases`` runs once per release of :data:`RELEASES`:
the machine's own tmux (3.3a here), and Debian's 3.5a and 3.8 that ``scripts/setup`` unpacks into
``.tools/`` (:mod:`fabrikito.offline.tmux_releases`).  For each run the release's ``tmux`` is first on
``PATH`` of the test process, so everything fabrikito runs there, and everything a test starts (it is
handed :func:`tests.userenv.user_env`, which takes ``PATH`` from the test process), runs that tmux.

Each result is recorded by the module it belongs to; :func:`write_results` keeps them in
``.pytest_cache/fabrikito-tmux-releases.json``, which ``scripts/tmux_table.py`` turns into the table.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SYSTEM_RELEASE = "3.3a"  # the machine's own tmux (Debian 12)
RELEASES = (SYSTEM_RELEASE, "3.5a", "3.8")
RESULTS = REPO / ".pytest_cache" / "fabrikito-tmux-releases.json"
PARAM = re.compile(r"[\[-]tmux(\d+\.\d+[a-z]?)[\]-]")

#: What each marked module checks, as the table says it.
CHECKED: Mapping[str, str] = {
    "test_tmux_framing.py": "-F framing: tab between fields, names/paths/titles with tabs, controls, UTF-8",
    "test_tmux_control.py": "the command server's control client (connect, exchange, leftovers)",
    "test_say_live.py": "say direct: into a seat's box, refusals, growing a short pane, copy mode",
    "test_say_served_live.py": "say and flush served (through the command server)",
    "test_queue_live.py": "the queue and its worker",
    "test_up_live.py": "up, status and down; the demo (demo, its say and status, demo --stop)",
}


def release_of(nodeid: str) -> str | None:
    """The tmux release a test id ran on (``...[tmux3.5a]``), or ``None`` for an unmarked test."""
    found = PARAM.search(nodeid)
    return found.group(1) if found else None


def path_with(release: str, path: str) -> str:
    """``path`` with ``release``'s tmux first (the machine's own: ``path`` as it is)."""
    if release == SYSTEM_RELEASE:
        return path
    from fabrikito.offline import tmux_releases

    return str(tmux_releases.wrapper(release, REPO).parent) + os.pathsep + path


def ensure(release: str) -> None:
    """``release``'s tmux is there (installed once, under a lock) and says it is ``release``."""
    if release == SYSTEM_RELEASE:
        found = shutil.which("tmux")
        said = (
            subprocess.run(["tmux", "-V"], capture_output=True, text=True, check=False).stdout.strip() if found else ""
        )
        if said != f"tmux {release}":
            raise RuntimeError(f"the machine's tmux is {said or 'missing'}, not tmux {release}")
        return
    from tests import userenv

    from fabrikito.offline import tmux_releases

    tmux_releases.ensure(release, REPO, env=userenv.tooling_env())


def write_results(results: Mapping[str, Mapping[str, Mapping[str, int]]]) -> None:
    """``{release: {module: {outcome: count}}}`` of this run, for scripts/tmux_table.py."""
    from tests import userenv

    path = Path(userenv.setting("FABRIKITO_TMUX_RESULTS") or RESULTS)  # a run of part of the suite: elsewhere
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
