"""Codex CLI and Gemini CLI for offline runs: installed with npm (never globally), an isolated home, a seat's
command line and environment against the stand-in model.

The facts (``other-agents/README.md`` of the research notes, and checked again
by the live tests):

* **Codex CLI** (``@openai/codex``): a JS shim and a static binary in a
  platform package; the seat runs the binary itself (the pane's process is
  Codex), with ``--no-daemon`` (else a background server outlives the pane).
  ``$CODEX_HOME/config.toml`` names the stand-in as the model provider
  (Responses API), trusts the working folder, turns the update check and
  analytics off.
* **Gemini CLI** (``@google/gemini-cli``): a JS bundle run by ``node``;
  ``GEMINI_CLI_NO_RELAUNCH`` keeps it one process (its relaunching parent
  ignores SIGHUP and outlives its pane).  ``$HOME/.gemini/settings.json``
  picks API-key auth and turns auto-update and usage statistics off; the
  environment points it at the stand-in (``GOOGLE_GEMINI_BASE_URL``) and
  trusts the workspace.

Used by the live tests, the capture and qualification scripts and the mixed
demo: :func:`seat_launch` returns a seat's ``(argv, env)``.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from fabrikito.base import hostos, procs
from fabrikito.base.tmux import Server
from fabrikito.base.values import frozen
from fabrikito.offline.claude_setup import (
    BenchError,
    cache_dir,
    checkout_root,
    npm_install,
    repo_root,
    stripped_names,
    write_json,
)

CODEX = "codex"
GEMINI = "gemini"
AGENTS = (CODEX, GEMINI)

CODEX_VERSION = "0.171.0"
GEMINI_VERSION = "0.61.0"
PINNED = {CODEX: CODEX_VERSION, GEMINI: GEMINI_VERSION}
PACKAGES = {CODEX: "@openai/codex", GEMINI: "@google/gemini-cli"}
NAMES = {CODEX: "Codex CLI", GEMINI: "Gemini CLI"}

API_KEY = "fabrikito-offline-key"
CODEX_KEY_VAR = "STANDIN_API_KEY"
MODEL = "standin-model"

#: Inherited variables a seat of these agents never sees: the user's own keys and endpoints.
STRIP_PREFIXES = ("OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_", "VERTEX")

# Codex's platform packages (``bin/codex.js`` picks the same): machine -> (package, target triple).
_CODEX_TARGETS = {
    ("Linux", "x86_64"): ("@openai/codex-linux-x64", "x86_64-unknown-linux-musl"),
    ("Linux", "aarch64"): ("@openai/codex-linux-arm64", "aarch64-unknown-linux-musl"),
    ("Darwin", "x86_64"): ("@openai/codex-darwin-x64", "x86_64-apple-darwin"),
    ("Darwin", "arm64"): ("@openai/codex-darwin-arm64", "aarch64-apple-darwin"),
}


# -- install --------------------------------------------------------------------------


def tools_dir_for(agent: str, version: str, repo: Path | None = None) -> Path:
    """``<repo>/.tools/<agent>-<version>``."""
    return (repo or repo_root()) / ".tools" / f"{agent}-{version}"


def demo_tools_dir(agent: str, version: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where the demo keeps ``agent``: a checkout's ``.tools/``, else the user's cache (like Claude Code's)."""
    root = checkout_root()
    if root is not None:
        return tools_dir_for(agent, version, root)
    return cache_dir(environ) / f"{agent}-{version}"


def _codex_target() -> tuple[str, str]:
    key = (platform.system(), platform.machine())
    if key not in _CODEX_TARGETS:
        raise BenchError(f"Codex CLI has no binary for {key[0]} on {key[1]}")
    return _CODEX_TARGETS[key]


def binary_in(agent: str, tools_dir: Path) -> Path:
    """The program a seat of ``agent`` runs, inside ``tools_dir``: Codex's binary, Gemini's bundle."""
    modules = tools_dir / "node_modules"
    if agent == CODEX:
        package, triple = _codex_target()
        return modules / package / "vendor" / triple / "bin" / "codex"
    if agent == GEMINI:
        return modules / PACKAGES[GEMINI] / "bundle" / "gemini.js"
    raise BenchError(f"no offline set-up for agent {agent!r}: known are {', '.join(AGENTS)}")


def ensure_agent(
    agent: str,
    repo: Path | None = None,
    *,
    version: str | None = None,
    timeout: float = 600.0,
    tools_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """The program of ``agent`` (``codex``/``gemini``) at ``version`` (default: the pinned one), installed
    with npm into ``tools_dir`` (default ``<repo>/.tools/<agent>-<version>``) if needed; ``env``: npm's."""
    version = version or PINNED.get(agent, "")
    if tools_dir is None:
        tools_dir = tools_dir_for(agent, version, repo)
    binary = binary_in(agent, tools_dir)
    return npm_install(
        PACKAGES[agent], version, tools_dir, binary, name=NAMES[agent], timeout=timeout, progress=progress, env=env
    )


def ensure_codex(repo: Path | None = None, *, version: str = CODEX_VERSION, **options: object) -> Path:
    """Codex CLI's binary at ``version`` (see :func:`ensure_agent`)."""
    return ensure_agent(CODEX, repo, version=version, **options)  # type: ignore[arg-type]


def ensure_gemini(repo: Path | None = None, *, version: str = GEMINI_VERSION, **options: object) -> Path:
    """Gemini CLI's bundle at ``version`` (see :func:`ensure_agent`)."""
    return ensure_agent(GEMINI, repo, version=version, **options)  # type: ignore[arg-type]


def package_root(binary: Path) -> Path:
    """The npm package a program was installed with (``node_modules/<scope>/<name>``; for Codex's binary,
    its platform package beside ``@openai/codex``)."""
    for parent in binary.parents:
        if parent.parent.name.startswith("@") and parent.parent.parent.name == "node_modules":
            return parent
    raise BenchError(f"{binary} is not inside an npm package")


# -- homes ------------------------------------------------------------------------------


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def make_codex_home(codex_home: Path, *, base_url: str, workdirs: Iterable[Path | str] = ()) -> Path:
    """Write ``config.toml`` in ``codex_home``: the stand-in as the provider, each of ``workdirs`` trusted
    (a folder not trusted opens Codex on its "Trust this folder?" dialog)."""
    lines = [
        f"model = {_toml_str(MODEL)}",
        'model_provider = "standin"',
        'approval_policy = "on-request"',
        'sandbox_mode = "workspace-write"',
        "check_for_update_on_startup = false",
        "",
        "[model_providers.standin]",
        'name = "Stand-in"',
        f"base_url = {_toml_str(base_url.rstrip('/') + '/v1')}",
        f"env_key = {_toml_str(CODEX_KEY_VAR)}",
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
        "[analytics]",
        "enabled = false",
    ]
    for folder in workdirs:
        lines += ["", f"[projects.{_toml_str(str(Path(folder).resolve()))}]", 'trust_level = "trusted"']
    codex_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = codex_home / "config.toml"
    tmp = path.with_name(f".config.toml.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return codex_home


GEMINI_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
    "ui": {"theme": "Default"},
}


def make_gemini_home(home: Path, *, auth: bool = True) -> Path:
    """Write ``$HOME/.gemini/settings.json``: API-key auth (without ``auth``: none chosen, so Gemini opens
    on its "How would you like to authenticate" dialog), no auto-update, no usage statistics."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    settings = dict(GEMINI_SETTINGS)
    if not auth:
        del settings["security"]
    write_json(home / ".gemini" / "settings.json", settings)
    return home


# -- a seat ------------------------------------------------------------------------------


def strip_names(environ: Mapping[str, str]) -> list[str]:
    """The inherited names a seat of Codex or Gemini must not see (Claude's list and the other vendors')."""
    return sorted({*stripped_names(environ), *(k for k in environ if k.startswith(STRIP_PREFIXES))})


def seat_launch(
    agent: str,
    binary: Path,
    *,
    home: Path,
    workdir: Path,
    base_url: str,
    environ: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
    answered: bool = True,
    extra_env: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The ``(argv, env)`` of an offline seat of ``agent`` running ``binary`` in ``workdir``.

    ``home`` is the seat's own HOME (made and configured here); ``base_url``
    the stand-in's base for the seat (``StandIn.base_url(role)``).  ``argv``
    starts with ``env -u <name>...`` for the inherited names the seat must not
    see (those ``env`` sets again are kept); ``env`` is what to set (``tmux
    new-session -e``).  ``argv`` execs the agent, so the pane's process is it.
    With ``answered`` false the start-up question is left open (Codex: trust
    for ``workdir``; Gemini: the kind of authentication).  ``extra_env`` is set
    too; a name given an empty value there is unset instead.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(home), "LANG": os.environ.get("LANG") or "C.UTF-8"}
    if agent == CODEX:
        codex_home = make_codex_home(home / ".codex", base_url=base_url, workdirs=[workdir] if answered else [])
        env.update(
            {
                "CODEX_HOME": str(codex_home),
                CODEX_KEY_VAR: API_KEY,
                "CODEX_MANAGED_BY_NPM": "1",
                "CODEX_MANAGED_PACKAGE_ROOT": str(package_root(binary).parent / "codex"),
            }
        )
        program = [str(binary), "--no-daemon"]
    elif agent == GEMINI:
        make_gemini_home(home, auth=answered)
        node = shutil.which("node")
        if node is None:
            raise BenchError("node is not on PATH: Gemini CLI runs on Node.js; install it and run again")
        env.update(
            {
                "GOOGLE_GEMINI_BASE_URL": base_url,
                "GEMINI_API_KEY": API_KEY,
                "GEMINI_CLI_TRUST_WORKSPACE": "true",
                "GEMINI_CLI_NO_RELAUNCH": "true",
                "COLORTERM": "truecolor",
            }
        )
        program = [node, str(binary)]
    else:
        raise BenchError(f"no offline set-up for agent {agent!r}: known are {', '.join(AGENTS)}")
    env.update(extra_env or {})
    cleared = sorted(k for k, v in env.items() if v == "")  # an empty value in extra_env unsets the name
    for name in cleared:
        del env[name]
    unset: list[str] = []
    for name in sorted({*strip_names(os.environ if environ is None else environ), *cleared}):
        if name not in env:
            unset += ["-u", name]
    return ["env", *unset, *program, *args], env


def pids_with_home(home: Path) -> list[int]:
    """Processes whose ``HOME`` is ``home``: every process a seat started, whatever it re-parented to."""
    found = []
    wanted = str(home)
    for pid in hostos.pids():
        try:
            if procs.environ(pid).get("HOME") == wanted:
                found.append(pid)
        except (procs.ProcessGone, procs.ProcessUnreadable, OSError):
            continue
    return found


# -- a seat in tmux ------------------------------------------------------------------------

#: What each agent shows in its empty input box once it is up.
PLACEHOLDERS = {CODEX: "Ask Codex to do anything", GEMINI: "Type your message or @path/to/file"}


@frozen
class OtherSeat:
    """A running Codex or Gemini seat in a tmux pane, with its own HOME."""

    agent: str
    role: str
    session: str
    pane: str
    pid: int
    home: Path
    workdir: Path
    binary: Path


def start_seat(
    server: Server,
    agent: str,
    binary: Path,
    *,
    role: str,
    root: Path,
    base_url: str,
    session: str | None = None,
    width: int = 120,
    height: int = 40,
    wait: bool = True,
    timeout: float = 60.0,
    answered: bool = True,
    args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> OtherSeat:
    """Start ``agent`` for ``role`` in a new tmux session (HOME ``root/home-<role>``, working folder
    ``root/work/<role>``); with ``wait``, wait until its empty input box shows."""
    from fabrikito.offline.seatkit import wait_until

    name = session or role
    home = root / f"home-{role}"
    workdir = root / "work" / role
    argv, env = seat_launch(agent, binary, home=home, workdir=workdir, base_url=base_url, answered=answered, args=args)
    pane = server.new_session(name, argv, cwd=str(workdir), width=width, height=height, env=env)
    pid = int(server.display(pane, "#{pane_pid}"))
    seat = OtherSeat(agent, role, name, pane, pid, home, workdir, binary)
    if wait:
        wait_until(
            lambda: PLACEHOLDERS[agent] in server.capture(pane),
            timeout,
            describe=lambda: server.capture(pane),
            what=f"{NAMES[agent]}'s empty input box in pane {pane}",
        )
    return seat


def stop_seats(seats: Iterable[OtherSeat]) -> None:
    """Stop every process each seat started (found by its HOME), whatever it re-parented to."""
    from fabrikito.offline.seatkit import stop_pids

    homes = {seat.home for seat in seats}
    stop_pids([pid for home in homes for pid in pids_with_home(home)])


# -- a program given by its path ------------------------------------------------------------


def kind_of(program: Path) -> str | None:
    """Which agent ``program`` is (``claude``, ``codex``, ``gemini``), by the npm package it lies in; ``None``
    when it lies in none of theirs."""
    from fabrikito.team.agents import agent_in_package

    found = agent_in_package(program.resolve())
    return found[0] if found is not None else None


def program_for(agent: str, program: Path) -> Path:
    """What a seat of ``agent`` runs for the ``program`` a user named: Codex's binary for its JS shim
    (``bin/codex.js``, or ``node_modules/.bin/codex``), else the program itself."""
    program = program.resolve()
    if agent == CODEX and program.suffix == ".js":
        root = package_root(program)  # node_modules/@openai/codex
        return binary_in(CODEX, root.parent.parent.parent)
    return program
