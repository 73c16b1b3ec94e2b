"""The command server imports, before its first child, every module a served ``status`` imports (beside
the team file's parser, which its first reading imports), and each
packaged recogniser."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def test_a_served_status_imports_nothing_the_server_did_not(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    team.write_text('name = "t"\ntmux_socket = "fab-preload-none"\n[[seat]]\nrole = "a"\nsession = "a"\n')
    code = textwrap.dedent(
        f"""
        import io, os, sys
        from fabrikito.cli import server
        server._preload()
        from fabrikito.team import teamfile
        teamfile.load({str(team)!r})  # what the server's warm() reads first
        before = set(sys.modules)
        from fabrikito import cli
        from fabrikito.cli.invocation import Invocation
        out = io.StringIO()
        inv = Invocation(pid=os.getpid(), stdin=None, stdout=out, stderr=sys.stderr, served=True)
        assert cli.main(["status", "--team", {str(team)!r}], inv) == 0, out.getvalue()
        from fabrikito.screen import releases
        missing = [d for d in releases.DIALECTS if releases.make(d, "0").__module__ not in before]
        print(sorted(set(sys.modules) - before), missing)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SRC), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "FABRIKITO_SERVER": "0"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] []"
