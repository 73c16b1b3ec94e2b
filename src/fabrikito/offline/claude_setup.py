"""Claude Code for offline runs: installed with npm (never globally), an isolated HOME, a seat's environment.

Used by :mod:`fabrikito.offline.seatkit` (the live bench), the demo and the capture script.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from fabrikito.base.errors import FabrikitoError

Renderer = Literal["inline", "fullscreen"]


class BenchError(FabrikitoError):
    """The bench could not set something up (install, HOME, a seat)."""


CLAUDE_VERSION = "2.1.316"
PACKAGE = "@anthropic-ai/claude-code"
API_KEY = "sk-ant-api03-fabrikito-bench-0000000000000000000000000000-offline"


#: Variables that make Claude Code draw without colours (``CI`` does, through its
#: terminal-colour detection): fabrikito reads the box by its colours, and a CI
#: job running the live tests has ``CI`` set.
COLOUR_KILLERS = ("CI", "CONTINUOUS_INTEGRATION", "NO_COLOR", "FORCE_COLOR", "TF_BUILD", "TEAMCITY_VERSION")

#: Inherited variables never passed to a seat: another session's messaging
#: and tmux context, the real API settings, and switches that turn feature
#: flags (and with them cross-session messaging) off.
STRIP_EXACT = frozenset(
    {
        "TMUX",
        "TMUX_PANE",
        "CLAUDECODE",
        "CLAUDE_CODE_ENTRYPOINT",
        "CLAUDE_CODE_SSE_PORT",
        "CLAUDE_CONFIG_DIR",
        "CLAUDE_CODE_NO_FLICKER",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "DISABLE_TELEMETRY",
        "DO_NOT_TRACK",
        "DISABLE_GROWTHBOOK",
        "IS_SANDBOX",
        "CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION",
        *COLOUR_KILLERS,
    }
)
STRIP_PREFIXES = ("CLAUDE_CODE_MESSAGING_", "ANTHROPIC_")


# -- install --------------------------------------------------------------------


def repo_root() -> Path:
    """The checkout this module lives in (``src/fabrikito/offline/claude_setup.py`` -> the checkout)."""
    return Path(__file__).resolve().parents[3]


def checkout_root() -> Path | None:
    """The checkout fabrikito runs from, or ``None`` when it runs from an installed copy (pip, pipx, uv)."""
    root = repo_root()
    if (root / "pyproject.toml").is_file() and (root / "src" / "fabrikito").is_dir():
        return root
    return None


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``${XDG_CACHE_HOME:-~/.cache}/fabrikito``: where an installed fabrikito keeps the demo's Claude Code."""
    from fabrikito.base import xdg

    return xdg.cache_home(environ)


def demo_tools_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the demo finds Claude Code: a checkout's ``.tools/claude-code``, else the user's cache."""
    root = checkout_root()
    if root is not None:
        return root / ".tools" / "claude-code"
    return cache_dir(environ) / "claude-code"


def claude_binary(tools_dir: Path) -> Path:
    return tools_dir / "node_modules" / "@anthropic-ai" / "claude-code" / "bin" / "claude.exe"


def installed_version(tools_dir: Path, package: str = PACKAGE) -> str | None:
    """The version of npm package ``package`` installed in ``tools_dir`` (``None``: not installed)."""
    manifest = tools_dir / "node_modules" / package / "package.json"
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = data.get("version") if isinstance(data, dict) else None
    return version if isinstance(version, str) else None


def tools_dir_for(version: str, repo: Path | None = None) -> Path:
    """Where the repository keeps Claude Code ``version``: ``.tools/claude-code`` for the pinned one,
    ``.tools/claude-code-<version>`` for any other (the second release of the live tier, qualification)."""
    name = "claude-code" if version == CLAUDE_VERSION else f"claude-code-{version}"
    return (repo or repo_root()) / ".tools" / name


PROGRESS_EVERY = 5.0


def ensure_claude(
    repo: Path | None = None,
    *,
    version: str = CLAUDE_VERSION,
    timeout: float = 600.0,
    tools_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """The path of ``claude.exe`` ``version``, installed with npm if needed.

    Into ``tools_dir`` when given, else :func:`tools_dir_for` in the repository
    (``.tools/claude-code`` for the pinned release).  ``progress`` is told what
    is installed where, then every few seconds how far npm has got, then that
    it is done.  ``env``: npm's environment (default: this process's).
    """
    if tools_dir is None:
        tools_dir = tools_dir_for(version, repo)
    binary = claude_binary(tools_dir)
    return npm_install(
        PACKAGE, version, tools_dir, binary, name="Claude Code", timeout=timeout, progress=progress, env=env
    )


def npm_install(
    package: str,
    version: str,
    tools_dir: Path,
    binary: Path,
    *,
    name: str,
    timeout: float = 600.0,
    progress: Callable[[str], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """``binary``, after ``npm install package@version`` in ``tools_dir`` if it is not there yet.

    Never global: npm installs into ``tools_dir/node_modules``.  ``progress``
    is told what is installed where, then every few seconds how far npm has
    got, then that it is done.  ``env``: npm's environment (default: this
    process's; the tests hand it the machine's certificates and proxies).
    """
    if installed_version(tools_dir, package) == version and os.access(binary, os.X_OK):
        return binary
    npm = shutil.which("npm")
    if npm is None:
        raise BenchError(
            f"npm is not on PATH: cannot install {package}@{version} into {tools_dir}. "
            "Install Node.js (which brings npm) and run the command again."
        )
    tools_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    manifest = tools_dir / "package.json"
    if not manifest.exists():
        manifest.write_text('{"private": true}\n', encoding="utf-8")
    argv = [npm, "install", "--no-audit", "--no-fund", f"{package}@{version}"]
    say = progress or (lambda _line: None)
    say(f"installing {name} {version} with npm into {tools_dir} (once; a few hundred MB) ...")
    done = _run_with_progress(argv, tools_dir, timeout=timeout, progress=progress, env=env)
    if done is None:
        raise BenchError(f"npm install of {package}@{version} in {tools_dir} timed out after {timeout:g}s")
    status, err = done
    if status != 0:
        raise BenchError(f"npm install of {package}@{version} in {tools_dir} failed (status {status}):\n{err}")
    if installed_version(tools_dir, package) != version or not os.access(binary, os.X_OK):
        raise BenchError(f"npm installed {package} in {tools_dir}, but {binary} is not version {version}")
    say(f"{name} {version} installed: {binary}")
    return binary


def _run_with_progress(
    argv: Sequence[str],
    cwd: Path,
    *,
    timeout: float,
    progress: Callable[[str], None] | None,
    env: Mapping[str, str] | None = None,
) -> tuple[int, str] | None:
    """Run npm; every :data:`PROGRESS_EVERY` seconds tell ``progress`` the time and size so far.

    Returns its status and the tail of its error output, or ``None`` when it
    ran out of time (then it is killed).
    """
    import tempfile
    import time

    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=None if env is None else dict(env),
        )
        start = time.monotonic()
        while True:
            try:
                status = proc.wait(timeout=PROGRESS_EVERY)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - start
                if elapsed >= timeout:
                    proc.kill()
                    proc.wait()
                    return None
                if progress is not None:
                    progress(f"  ... still installing: {elapsed:.0f} s, {_size_mb(cwd / 'node_modules')} MB so far")
        err.seek(0)
        return status, err.read().decode("utf-8", "replace")[-2000:]


def _size_mb(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total // 1_000_000


# -- HOME -----------------------------------------------------------------------


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def make_home(
    home: Path,
    *,
    trusted_dirs: Iterable[Path | str] = (),
    api_key: str = API_KEY,
    settings: Mapping[str, Any] | None = None,
    skip_bypass_prompt: bool = True,
) -> Path:
    """Make (or update) an isolated HOME for Claude Code; return it.

    ``.claude.json`` marks onboarding done, approves ``api_key`` (its last 20
    characters) and trusts each of ``trusted_dirs``.  ``.claude/settings.json``
    gets ``settings``, plus ``skipDangerousModePermissionPrompt: true`` unless
    ``skip_bypass_prompt`` is false (then bypass seats show the acceptance
    dialog at start).
    """
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    config_path = home / ".claude.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    config["hasCompletedOnboarding"] = True
    config.setdefault("numStartups", 1)
    responses = config.setdefault("customApiKeyResponses", {"approved": [], "rejected": []})
    if api_key[-20:] not in responses.setdefault("approved", []):
        responses["approved"].append(api_key[-20:])
    projects = config.setdefault("projects", {})
    for d in trusted_dirs:
        entry = projects.setdefault(str(Path(d).resolve()), {})
        entry["hasTrustDialogAccepted"] = True
        entry.setdefault("hasCompletedProjectOnboarding", True)
    write_json(config_path, config)
    user_settings = dict(settings or {})
    if skip_bypass_prompt:
        user_settings.setdefault("skipDangerousModePermissionPrompt", True)
    settings_path = home / ".claude" / "settings.json"
    if user_settings or not settings_path.exists():
        write_json(settings_path, user_settings)
    return home


def trust_dir(home: Path, directory: Path | str) -> None:
    """Add one more trusted working directory to an existing bench HOME."""
    make_home(home, trusted_dirs=[directory], settings=None, skip_bypass_prompt=False)


# -- environment -----------------------------------------------------------------


def stripped_names(environ: Mapping[str, str]) -> list[str]:
    """The inherited variable names a seat must not see."""
    return sorted(k for k in environ if k in STRIP_EXACT or k.startswith(STRIP_PREFIXES))


def seat_env(
    *,
    home: Path,
    base_url: str,
    api_key: str = API_KEY,
    permission_mode: str = "acceptEdits",
    renderer: Renderer = "inline",
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The variables set for a seat (on top of an environment stripped by :func:`stripped_names`)."""
    env = {
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": api_key,
        "DISABLE_AUTOUPDATER": "1",
        "LANG": os.environ.get("LANG") or "C.UTF-8",
    }
    if permission_mode == "bypassPermissions" and os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"
    if renderer == "fullscreen":
        env["CLAUDE_CODE_NO_FLICKER"] = "1"
    env.update(extra or {})
    return env


def seat_command(
    binary: Path,
    *,
    settings_file: Path,
    permission_mode: str,
    session: str | None,
    environ: Mapping[str, str] | None = None,
    keep: Iterable[str] = (),
    args: Sequence[str] = (),
) -> list[str]:
    """``env -u <inherited...> claude.exe --settings F --permission-mode M -n S``.

    Inherited names from :func:`stripped_names` are unset, except those in
    ``keep`` (the ones the seat's tmux session sets itself with ``-e``).
    ``env`` execs the binary, so the pane's pid is Claude Code's pid.
    """
    kept = set(keep)
    unset: list[str] = []
    for name in stripped_names(os.environ if environ is None else environ):
        if name not in kept:
            unset += ["-u", name]
    argv = ["env", *unset, str(binary), "--settings", str(settings_file), "--permission-mode", permission_mode]
    if session:
        argv += ["-n", session]
    return argv + list(args)
