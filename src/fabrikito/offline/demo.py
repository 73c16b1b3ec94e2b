"""``fabrikito demo``: the example team, offline, with real Claude Code seats.

It needs no API key and no network once Claude Code is installed: from a
checkout in its ``.tools/`` (the README's set-up installs it there), from an
installed fabrikito (pip, pipx, uv) in ``${XDG_CACHE_HOME:-~/.cache}/fabrikito/``,
where the first run installs it with npm, showing its progress
(:func:`fabrikito.offline.claude_setup.ensure_claude`).  The example team comes
with the package (:func:`fabrikito.team.init.example_dir`; a checkout's
``examples/`` links to it).  In a directory of its own
(``$TMPDIR/fabrikito-demo-<uid>`` unless ``--dir`` says otherwise) it writes:

* ``team.toml``: the example's ``team.toml`` with the tmux server
  ``fabrikito-demo``, the agent set to that Claude Code binary, and
  each seat's ``env`` pointing it at the stand-in model and an isolated HOME;
* ``roles/common.md``: a copy of the example's shared prompt;
* ``home/``: the seats' HOME (onboarding, the API key question and the trust
  prompt answered for their working directories ``work/<role>``);
* ``standin.json``: the stand-in's script: ``api`` answers its kickoff with a
  SendMessage to the EM, ``web`` answers the owner;
* ``standin.pid`` / ``standin.out``: the stand-in runs as a background
  process (``python -m fabrikito.offline.standin``) so the team keeps working after
  the demo command returns.

Then it runs ``up``, shows each kickoff arriving on its seat's screen, waits
for ``api``'s SendMessage to the EM to be logged by the hook, sends one
message as the owner with ``say``'s engine, and prints ``status`` and the
decoded log.  The team is left running; ``fabrikito demo --stop`` stops its
seats (``down``) and the stand-in.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabrikito.base import procs
from fabrikito.base.errors import FabrikitoError

if TYPE_CHECKING:
    from fabrikito.base.tmux import Server
    from fabrikito.launch.lifecycle import Helper
    from fabrikito.team.teamfile import Team

SOCKET = "fabrikito-demo"
STANDIN_START_TIMEOUT = 15.0
SCREEN_TIMEOUT = 30.0
MESSAGE_TIMEOUT = 60.0
OWNER_MESSAGE = "Owner here: please look at the login page first."
API_REPORT = "api here: I read the kickoff and will take the first API ticket, the /health endpoint."
WEB_ANSWER = "On it: looking at the login page first."
_LISTENING = re.compile(r"listening on (http://[0-9.]+:[0-9]+)")


class DemoError(FabrikitoError):
    """The demo could not be set up or run; the message says what to do."""


def demo_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg).expanduser().absolute()
    return Path(tempfile.gettempdir()) / f"fabrikito-demo-{os.getuid()}"


def standin_script() -> dict[str, Any]:
    """What the stand-in model answers in the demo."""
    return {
        "default_text": "Understood. (a reply from the stand-in model)",
        "rules": [
            {
                "seat": "api",
                "match": "[from launcher]",
                "reply": {
                    "text": "Telling the EM what I will take first.",
                    "tool": "SendMessage",
                    "input": {"to": "acme-em", "message": API_REPORT},
                    "then": {"text": "Told the EM what I will take first."},
                },
            },
            {"seat": "web", "match": "[from owner]", "reply": {"text": WEB_ANSWER}},
        ],
    }


def toml_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def demo_team_text(example: Mapping[str, Any], *, binary: Path, home: Path, base_url: str, socket: str = SOCKET) -> str:
    """The demo's team file: the example's roster and kickoffs, offline seats on a private server."""
    from fabrikito.offline.claude_setup import seat_env

    lines = [
        "# Written by `fabrikito demo` from the example team: offline seats, a stand-in model.",
        f"name = {toml_value(example.get('name', 'acme'))}",
        f"tmux_socket = {toml_value(socket)}",
        f"agent = {toml_value([str(binary)])}",
        f"shared_prompt = {toml_value('roles/common.md')}",
    ]
    if "kickoff" in example:
        lines.append(f"kickoff = {toml_value(example['kickoff'])}")
    for seat in example.get("seat", []):
        role = str(seat["role"])
        env = seat_env(home=home, base_url=f"{base_url}/seat/{role}", permission_mode=seat.get("permission_mode", ""))
        env.update(seat.get("env", {}))
        lines += ["", "[[seat]]", f"role = {toml_value(role)}", f"session = {toml_value(seat['session'])}"]
        lines.append(f"cwd = {toml_value('work/' + role)}")
        for key in ("permission_mode", "args", "kickoff"):
            if key in seat:
                lines.append(f"{key} = {toml_value(seat[key])}")
        lines.append(f"env = {toml_value(env)}")
    return "\n".join(lines) + "\n"


# -- the stand-in as a background process --------------------------------------------------


def running_standin(directory: Path) -> int | None:
    """The pid of the demo's stand-in when it still runs (checked by its command line)."""
    try:
        pid = int((directory / "standin.pid").read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None
    try:
        argv = procs.cmdline(pid)
    except (procs.ProcessGone, procs.ProcessUnreadable):
        return None
    return pid if "fabrikito.offline.standin" in argv else None


def start_standin(directory: Path, rules: Mapping[str, Any] | None = None) -> tuple[int, str]:
    """Start ``python -m fabrikito.offline.standin`` in the background (with ``rules``, the demo's by
    default); return its pid and URL."""
    from fabrikito.log.hook import package_root

    script = directory / "standin.json"
    script.write_text(json.dumps(standin_script() if rules is None else rules, indent=2) + "\n", encoding="utf-8")
    out_path = directory / "standin.out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = package_root()
    with out_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fabrikito.offline.standin", "--port", "0", "--script", str(script), "--quiet"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    (directory / "standin.pid").write_text(f"{proc.pid}\n", encoding="ascii")
    deadline = time.monotonic() + STANDIN_START_TIMEOUT
    while time.monotonic() < deadline:
        found = _LISTENING.search(out_path.read_text(encoding="utf-8", errors="replace"))
        if found:
            return proc.pid, found.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    text = out_path.read_text(encoding="utf-8", errors="replace")
    stop_pid(proc.pid)
    raise DemoError(f"the stand-in model did not start (see {out_path}):\n{text[-2000:]}")


def stop_pid(pid: int, grace: float = 3.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = 0 if procs.alive(pid) else pid
        if done == pid or not procs.alive(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# -- running -----------------------------------------------------------------------------------


def clean_environment() -> None:
    """Drop what the seats must not inherit through the tmux server this process starts."""
    from fabrikito.offline.claude_setup import stripped_names

    for name in stripped_names(os.environ):
        os.environ.pop(name, None)
    for name in ("TEAM_ROLE", "FABRIKITO_TEAM", "FABRIKITO"):
        os.environ.pop(name, None)


def run(directory: Path, *, out: Callable[[str], None], socket: str = SOCKET, helpers: Sequence[Helper] = ()) -> int:
    from fabrikito.base.tmux import Server
    from fabrikito.launch import lifecycle, seatfiles
    from fabrikito.offline import claude_setup
    from fabrikito.team import init, teamfile

    if running_standin(directory) is not None or Server(socket_name=socket).alive():
        raise DemoError(
            f"a demo is already running (tmux server {socket}, {directory}): stop it first with "
            f"`fabrikito demo --stop{_dir_flag(directory)}`"
        )
    try:
        example = init.example_team()
        common = init.shared_prompt_text()
    except (OSError, ValueError) as exc:
        raise DemoError(
            f"the example team in {init.example_dir()} cannot be read ({exc}): reinstall fabrikito"
        ) from None
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise DemoError(
            f"cannot make the demo's directory {directory} ({exc.strerror or exc}): pass --dir with a directory "
            "you can write"
        ) from None
    tools = claude_setup.demo_tools_dir()
    out(f"Claude Code {claude_setup.CLAUDE_VERSION} for the demo: {tools} (offline once installed)")
    binary = claude_setup.ensure_claude(tools_dir=tools, progress=out)
    clean_environment()
    roles = [str(s["role"]) for s in example.get("seat", [])]
    work = [directory / "work" / role for role in roles]
    for path in work:
        path.mkdir(parents=True, exist_ok=True)
    (directory / "roles").mkdir(exist_ok=True)
    (directory / "roles" / "common.md").write_text(common, encoding="utf-8")
    home = claude_setup.make_home(directory / "home", trusted_dirs=work)
    pid, url = start_standin(directory)
    out(f"stand-in model listening on {url} (pid {pid})")
    team_path = directory / "team.toml"
    team_path.write_text(
        demo_team_text(example, binary=binary, home=home, base_url=url, socket=socket), encoding="utf-8"
    )
    team = teamfile.load(team_path)
    out(f"team file: {team_path}")
    out("")
    out("== up: starting the example team ==")
    try:
        result = lifecycle.up(team, out=out, helpers=helpers)
    except BaseException:
        out("up failed: stopping the stand-in")
        stop_pid(pid)
        raise
    server = team.server()
    out("")
    out("== the kickoffs, as each seat shows them ==")
    for seat in team.seats:
        out(f"  {seat.role}: {screen_line(server, seat.session, '[from launcher]')}")
    out("")
    out("== api tells the EM what it will take first, with SendMessage ==")
    line = _wait_log(team.log_path, "api", "em")
    out(f"  logged by api's hook: {line}" if line else "  (api's SendMessage was not logged within a minute)")
    out("")
    out("== the owner says something to web ==")
    out(f"  {_owner_say(team, 'web', OWNER_MESSAGE)}")
    out(f"  web's screen: {screen_line(server, team_seat_session(team, 'web'), WEB_ANSWER)}")
    out("")
    print_status_and_log(team, out)
    out("")
    cli = seatfiles.say_command()
    out("The team is still running.")
    out(f"  attach to a seat:  tmux -L {socket} attach -t {team_seat_session(team, 'em')}   (detach: Ctrl-b d)")
    out(f"  watch it:          {cli} status --team {team_path}")
    out(f"  talk to a seat:    {cli} say --team {team_path} web 'hello'")
    out(f"  stop it all:       {cli} demo --stop{_dir_flag(directory)}")
    out(f"                     (or {cli} down --team {team_path}, then kill {pid}, the stand-in)")
    return result.exit_code


def _dir_flag(directory: Path) -> str:
    return "" if directory == demo_dir(None) else f" --dir {directory}"


def team_seat_session(team: Team, role: str) -> str:
    seat = team.seat(role)
    return str(seat.session) if seat is not None else role


def screen_line(server: Server, session: str, needle: str) -> str:
    """The first line of the seat's screen holding ``needle`` (read-only), waiting for it to show."""
    from fabrikito.base.errors import TmuxError

    deadline = time.monotonic() + SCREEN_TIMEOUT
    while True:
        try:
            screen = server.capture(f"={session}:")
        except TmuxError:
            screen = ""
        for row in screen.split("\n"):
            if needle in row:
                return row.strip()
        if time.monotonic() >= deadline:
            return f"(not on its screen within {SCREEN_TIMEOUT:g}s)"
        time.sleep(0.2)


def _wait_log(path: Path, sender: str, recipient: str) -> str | None:
    from fabrikito.base import rotate
    from fabrikito.log import msglog

    deadline = time.monotonic() + MESSAGE_TIMEOUT
    while time.monotonic() < deadline:
        try:
            data = rotate.read_all(path)  # messages.log and its rotated generations
        except OSError:
            data = b""
        for raw in data.splitlines(keepends=True):
            record = msglog.parse_line(raw)
            if isinstance(record, msglog.Record) and (record.sender, record.recipient) == (
                sender.encode(),
                recipient.encode(),
            ):
                text = record.message.decode("utf-8", "replace")
                return f"{record.time} {sender} → {recipient} {record.outcome}: {text}"
        time.sleep(0.2)
    return None


def _owner_say(team: Team, role: str, text: str) -> str:
    """Deliver ``text`` as the owner, as ``say`` does, and log its line."""
    from fabrikito.delivery import engine, seatpane
    from fabrikito.log import msglog

    seat = team.seat(role)
    if seat is None:
        return f"no seat {role} in the demo team"
    server = team.server()
    ctx = engine.Context(team=team, server=server, panes=seatpane.list_panes(server))
    delivery = engine.deliver(ctx, seat, "owner", text)
    ok = delivery.result is engine.Result.DELIVERED
    outcome = msglog.Outcome.DELIVERED if ok else msglog.Outcome.NOT_DELIVERED
    msglog.append_checked(team.log_path, msglog.format_line(time.time(), "owner", role, outcome, text))
    return f"say {role} {text!r}: " + ("delivered" if ok else f"not delivered ({delivery.reason})")


def print_status_and_log(team: Team, out: Callable[[str], None]) -> None:
    from fabrikito.launch import status
    from fabrikito.log import logview

    out("== status ==")
    for line in status.render(status.collect(team)).split("\n"):
        out(line)
    out("")
    out(f"== the message log ({team.log_path}), decoded ==")
    items = list(logview.read_log(team.log_path))
    for line in logview.render(items, logview.Filters()).rstrip("\n").split("\n"):
        out(line)


def stop(
    directory: Path, *, out: Callable[[str], None], stop_helpers: Sequence[Callable[[Team], str | None]] = ()
) -> int:
    """Stop the demo's seats and its stand-in; leave its directory (team file, state, log)."""
    from fabrikito.launch import teardown
    from fabrikito.team import teamfile

    code = 0
    team_path = directory / "team.toml"
    if team_path.exists():
        team = teamfile.load(team_path)
        code = teardown.down(team, out=out, stop_helpers=stop_helpers)
    else:
        out(f"no demo team file in {directory}")
    pid = running_standin(directory)
    if pid is not None:
        stop_pid(pid)
        out(f"stand-in model stopped (pid {pid})")
    try:
        (directory / "standin.pid").unlink()
    except FileNotFoundError:
        pass
    out(f"the demo's files are kept in {directory} (remove it when done: rm -rf {directory})")
    return code


def remove(directory: Path) -> None:
    """Remove a stopped demo's directory (used by tests)."""
    shutil.rmtree(directory, ignore_errors=True)
