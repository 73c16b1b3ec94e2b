"""fabrikito as a new user gets it: the wheel, ``uv tool install`` into a fresh HOME, then init, check and demo.

Slow (it installs uv, builds the wheel, installs Claude Code into the user's
cache with npm and runs the demo's seats), so it is one test.  npm reuses
this machine's package cache (``npm_config_cache``); everything else lives
in the temporary HOME.  The demo's tmux server, seats and stand-in are
stopped however the test ends.
"""

from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from tests import userenv

from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.offline import claude_setup, seatkit

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[2]


def _run(
    argv: list[str], *, env: Mapping[str, str], cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=dict(env), cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture
def user(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A fresh user's environment: an empty HOME, no XDG overrides, no PYTHONPATH, no fabrikito on PATH."""
    home = tmp_path / "home"
    home.mkdir()
    dropped = ("PYTHON", "XDG_", "VIRTUAL_ENV", "CLAUDE", "TMUX", "TEAM_ROLE", "FABRIKITO", "UV_", "npm_config")
    # The machine's certificates and proxies (uv, pip and the demo's npm reach the registries through them).
    env = {k: v for k, v in userenv.tooling_env().items() if not k.startswith(dropped)}
    env["HOME"] = str(home)
    npm_cache = Path(os.path.expanduser("~/.npm"))
    if npm_cache.is_dir():
        env["npm_config_cache"] = str(npm_cache)  # reuse the machine's download cache; the install is still real
    yield env
    seatkit.stop_pids(seatkit.home_pids(tmp_path / "demo" / "home"))


def test_wheel_installed_with_uv_runs_init_check_and_the_demo(tmp_path: Path, user: dict[str, str]) -> None:
    home = Path(user["HOME"])
    tools = tmp_path / "uv"
    made = _run([sys.executable, "-m", "venv", str(tools)], env=userenv.tooling_env(), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    got_uv = _run([str(tools / "bin" / "pip"), "install", "--quiet", "uv"], env=userenv.tooling_env(), cwd=tmp_path)
    assert got_uv.returncode == 0, got_uv.stderr
    uv = str(tools / "bin" / "uv")
    # uv reaches the package index through this machine's certificate authority (a user's machine has its own
    # certificates where uv looks; here they are the system's, which uv reads only when told).
    certs = {k: v for k, v in userenv.tooling_env().items() if k.startswith("SSL_")}
    uv_env = {**user, **certs, "UV_SYSTEM_CERTS": "1"}
    dist = tmp_path / "dist"
    built = _run([uv, "build", "--wheel", "-o", str(dist), str(REPO)], env={**uv_env, "HOME": str(tmp_path)}, cwd=REPO)
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("fabrikito-*.whl")
    installed = _run([uv, "tool", "install", str(wheel)], env=uv_env, cwd=home)
    assert installed.returncode == 0, installed.stderr
    fabrikito = home / ".local" / "bin" / "fabrikito"
    assert fabrikito.exists(), installed.stderr
    venv_bin = home / ".local" / "share" / "uv" / "tools" / "fabrikito" / "bin"

    # init: a team of one's own, then check says nothing is missing.
    project = home / "project"
    project.mkdir()
    (project / ".gitignore").write_text("node_modules/\n")
    init = _run([str(fabrikito), "init", "--roles", "em,api,web"], env=user, cwd=project)
    assert init.returncode == 0, init.stderr
    assert "check" in init.stdout and "up" in init.stdout
    assert ".state/" in (project / ".gitignore").read_text()
    again = _run([str(fabrikito), "init"], env=user, cwd=project)
    assert again.returncode == 1 and "never overwrites" in again.stderr
    check = _run([str(fabrikito), "check"], env=user, cwd=project)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "nothing needs attention" in check.stdout and "WARNING" not in check.stdout

    # demo: the example team from the package, Claude Code installed into ~/.cache/fabrikito.
    socket = f"fab-inst-{secrets.token_hex(3)}"
    demo_dir = tmp_path / "demo"
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    try:
        demo = _run(
            [str(fabrikito), "demo", "--dir", str(demo_dir), "--tmux-socket", socket],
            env=user,
            cwd=elsewhere,
            timeout=600,
        )
        assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
        cache = home / ".cache" / "fabrikito" / "claude-code"
        assert str(cache) in demo.stdout and "installing Claude Code" in demo.stdout, demo.stdout[:2000]
        assert claude_setup.installed_version(cache) == claude_setup.CLAUDE_VERSION
        assert list(elsewhere.iterdir()) == []  # nothing in the current directory
        assert not list((home / ".local" / "share" / "uv" / "tools" / "fabrikito").rglob("claude.exe"))
        assert "logged by api's hook" in demo.stdout, demo.stdout[-3000:]  # the hook ran from the tool's venv
        assert "say web 'Owner here" in demo.stdout and "delivered" in demo.stdout
        # The seats are told the command that runs this fabrikito, absolute, whatever their PATH.
        command = shlex.quote(str(venv_bin / "fabrikito"))
        prompt = (demo_dir / ".state" / "acme" / "seats" / "em.prompt.md").read_text()
        assert f"`{command} say <role>" in prompt
        settings = (demo_dir / ".state" / "acme" / "seats" / "em.settings.json").read_text()
        assert f'"FABRIKITO": "{venv_bin / "fabrikito"}"' in settings
        status = _run(
            ["/bin/sh", "-c", f"{command} status --no-screens --team {demo_dir / 'team.toml'}"],
            env={**user, "PATH": "/usr/bin:/bin"},
            cwd=elsewhere,
        )
        assert status.returncode == 0 and "acme-em" in status.stdout, status.stderr
    finally:
        stopped = _run([str(fabrikito), "demo", "--stop", "--dir", str(demo_dir)], env=user, cwd=elsewhere)
        try:
            Server(socket_name=socket).kill_server()
        except TmuxError:
            pass
    assert stopped.returncode == 0, stopped.stderr
    assert "stand-in model stopped" in stopped.stdout


def readme_install_lines() -> list[str]:
    """The install commands of the README's "install it like any Python tool" block, each ``or:`` one too."""
    text = (REPO / "README.md").read_text()
    block = text.partition("Or install it like any Python tool")[2].partition("```sh\n")[2].partition("```")[0]
    lines = []
    for row in block.splitlines():
        command, _, comment = row.partition("#")
        lines.append(command.strip())
        lines += [alt.strip() for alt in comment.split("or:")[1:]]
    return [line for line in lines if line.startswith(("pipx install", "uv tool install"))]


def test_the_readme_s_install_lines_work_as_written(tmp_path: Path) -> None:
    """Each install line of the README, run as written (from this checkout; ``$URL`` this repository's
    ``file://`` URL) with pipx and uv fresh from PyPI, in a HOME of its own, gives a working ``fabrikito``."""
    lines = readme_install_lines()
    assert sorted(lines) == sorted(
        ["pipx install .", "uv tool install .", 'pipx install "git+$URL"', 'uv tool install "git+$URL"']
    )
    tools = tmp_path / "tools"
    made = _run([sys.executable, "-m", "venv", str(tools)], env=userenv.tooling_env(), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    got = _run(
        [str(tools / "bin" / "pip"), "install", "--quiet", "pipx", "uv"], env=userenv.tooling_env(), cwd=tmp_path
    )
    assert got.returncode == 0, got.stderr
    machine = {k: v for k, v in userenv.tooling_env().items() if k.startswith(("SSL_", "REQUESTS_", "PIP_"))}
    for n, line in enumerate(lines):
        home = tmp_path / f"home-{n}"
        home.mkdir()
        env = userenv.user_env(
            machine,
            HOME=str(home),
            PATH=f"{tools / 'bin'}:/usr/bin:/bin",
            URL=f"file://{REPO}",
            UV_SYSTEM_CERTS="1",  # this machine's TLS goes through its own certificate authority
        )
        done = _run(["/bin/sh", "-c", line], env=env, cwd=REPO)
        assert done.returncode == 0, f"{line}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        installed = home / ".local" / "bin" / "fabrikito"
        version = _run([str(installed), "--version"], env=userenv.user_env(HOME=str(home)), cwd=home)
        assert version.returncode == 0 and version.stdout.startswith("fabrikito "), (line, version.stderr)
