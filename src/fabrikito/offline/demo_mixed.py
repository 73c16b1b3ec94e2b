"""``fabrikito demo --mixed``: a team of one Claude Code, one Codex CLI and one Gemini CLI seat, offline.

Like ``fabrikito demo`` (:mod:`fabrikito.offline.demo`), in a directory of its
own, on a private tmux server, against the stand-in model, which speaks all
three APIs (Messages, OpenAI Responses, Gemini).  The three CLIs are installed
with npm into a checkout's ``.tools/`` or the user's cache on the first run.

The team: ``em`` (Claude Code), ``cx`` (Codex CLI), ``gm`` (Gemini CLI).  Only
Claude Code has SendMessage; every message to or from the other two is typed
by ``fabrikito say``, which a seat runs with its shell tool (scripted by the
stand-in), ``say --queue`` so that a seat busy with a turn gets the message
when it is idle:

1. ``up`` starts the three and gives each its kickoff;
2. ``em``, on its kickoff, runs ``fabrikito say --queue cx …`` with its Bash tool;
3. ``cx``, on ``[from em]``, answers ``em`` and passes work to ``gm``, both with
   ``say`` from its shell tool;
4. ``gm``, on ``[from cx]``, reports to ``em`` with ``say`` from its shell tool.

The demo prints each of those lines as the log records them, each seat's
screen line showing the labelled message, ``status`` and the log.  The demo is
its seats' user: its Codex seat runs commands without asking (``-a never -s
danger-full-access``), its Gemini seat may run ``fabrikito say`` without asking
(``--allowed-tools run_shell_command(<fabrikito> say)``: that command only,
rather than YOLO mode's every command), and so may its Claude Code seat (an
allow rule in its own HOME).  ``fabrikito demo --mixed --stop`` stops it all.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabrikito.offline.demo import DemoError, toml_value

if TYPE_CHECKING:
    from fabrikito.launch.lifecycle import Helper
    from fabrikito.team.teamfile import Team

SOCKET = "fabrikito-demo-mixed"
MESSAGE_TIMEOUT = 120.0
E2C = "em here: please check the /health handler, then tell gm to update its docs."
C2E = "cx here: the /health handler is fine; I asked gm to update its docs."
C2G = "cx here: /health is fine, please update its docs."
G2E = "gm here: the /health docs are updated."
FLOW = (("em", "cx", E2C), ("cx", "em", C2E), ("cx", "gm", C2G), ("gm", "em", G2E))
KICKOFF = "Read your prompt; your team is em (Claude Code), cx (Codex CLI) and gm (Gemini CLI)."


def default_dir() -> Path:
    import tempfile

    return Path(tempfile.gettempdir()) / f"fabrikito-demo-mixed-{os.getuid()}"


def _say(cli: str, to: str, text: str) -> str:
    return f"{cli} say --queue {to} {shlex.quote(text)}"


def standin_script(cli: str) -> dict[str, Any]:
    """What the stand-in answers: each seat's shell tool runs ``say`` (the tool's name is each API's own)."""
    from fabrikito.offline import api_gemini, api_openai

    codex = api_openai.shell_reply(f"{_say(cli, 'em', C2E)} && {_say(cli, 'gm', C2G)}", escalate=False)
    gemini = api_gemini.shell_reply(_say(cli, "em", G2E))
    return {
        "default_text": "Understood. (a reply from the stand-in model)",
        "rules": [
            {
                "seat": "em",
                "match": "[from launcher]",
                "reply": {
                    "text": "Asking cx to check /health.",
                    "tool": "Bash",
                    "input": {"command": _say(cli, "cx", E2C), "description": "Ask cx with fabrikito say"},
                    "then": {"text": "Asked cx."},
                },
            },
            {
                "seat": "cx",
                "match": "[from em]",
                "reply": {"tool": codex.tool, "input": dict(codex.input), "then": {"text": "Told em and gm."}},
            },
            {
                "seat": "gm",
                "match": "[from cx]",
                "reply": {"tool": gemini.tool, "input": dict(gemini.input), "then": {"text": "Told em."}},
            },
            {"seat": "em", "match": "[from cx]", "reply": {"text": "Thanks, cx."}},
            {"seat": "em", "match": "[from gm]", "reply": {"text": "Thanks, gm."}},
        ],
    }


def team_text(
    *, claude: Path, seats: Mapping[str, tuple[list[str], dict[str, str], list[str]]], socket: str = SOCKET
) -> str:
    """The demo's team file: ``seats`` maps cx and gm to (command, env, args); em's env is in ``seats`` too."""
    lines = [
        "# Written by `fabrikito demo --mixed`: one seat of each agent kind, offline, a stand-in model.",
        'name = "mixed"',
        f"tmux_socket = {toml_value(socket)}",
        f"agent = {toml_value([str(claude)])}",
        'shared_prompt = "roles/common.md"',
        f"kickoff = {toml_value(KICKOFF)}",
    ]
    for role, agent in (("em", "claude"), ("cx", "codex"), ("gm", "gemini")):
        command, env, args = seats[role]
        lines += ["", "[[seat]]", f"role = {toml_value(role)}", f"session = {toml_value('mixed-' + role)}"]
        lines += [f"agent = {toml_value(agent)}", f"cwd = {toml_value('work/' + role)}"]
        if agent == "claude":
            lines.append('permission_mode = "acceptEdits"')
        else:
            lines.append(f"command = {toml_value(command)}")
            lines.append(f"args = {toml_value(args)}")
        lines.append(f"env = {toml_value(env)}")
    return "\n".join(lines) + "\n"


def seat_setups(
    directory: Path, url: str, cli: str, out: Callable[[str], None], *, unattended: bool = True
) -> dict[str, Any]:
    """Each seat's (command, env, args) against the stand-in at ``url``, its HOME made in ``directory``;
    with ``unattended`` the Codex and Gemini seats run commands without asking (the demo's choice)."""
    from fabrikito.offline import claude_setup, other_setup

    em_home = directory / "home-em"
    claude_setup.make_home(
        em_home,
        trusted_dirs=[directory / "work" / "em"],
        settings={"permissions": {"allow": [f"Bash({cli} say:*)"]}},
    )
    em_env = claude_setup.seat_env(home=em_home, base_url=f"{url}/seat/em")
    codex = other_setup.ensure_agent(other_setup.CODEX, tools_dir=_tools("codex"), progress=out)
    gemini = other_setup.ensure_agent(other_setup.GEMINI, tools_dir=_tools("gemini"), progress=out)
    node = shutil.which("node")
    if node is None:
        raise DemoError("node is not on PATH: Gemini CLI runs on Node.js; install it and run the demo again")
    cx_home = directory / "home-cx"
    other_setup.make_codex_home(cx_home / ".codex", base_url=f"{url}/seat/cx")
    cx_env = {
        "HOME": str(cx_home),
        "CODEX_HOME": str(cx_home / ".codex"),
        other_setup.CODEX_KEY_VAR: other_setup.API_KEY,
        "CODEX_MANAGED_BY_NPM": "1",
        "CODEX_MANAGED_PACKAGE_ROOT": str(other_setup.package_root(codex)),
    }
    gm_home = other_setup.make_gemini_home(directory / "home-gm")
    gm_env = {"HOME": str(gm_home), "GOOGLE_GEMINI_BASE_URL": f"{url}/seat/gm", "GEMINI_API_KEY": other_setup.API_KEY}
    return {
        "em": ([], em_env, []),
        "cx": ([str(codex)], cx_env, ["-a", "never", "-s", "danger-full-access"] if unattended else []),
        "gm": ([node, str(gemini)], gm_env, ["--allowed-tools", f"run_shell_command({cli} say)"] if unattended else []),
    }


def _tools(agent: str) -> Path:
    from fabrikito.offline import other_setup

    return other_setup.demo_tools_dir(agent, other_setup.PINNED[agent])


def clean_environment() -> None:
    from fabrikito.offline import demo, other_setup

    demo.clean_environment()
    for name in other_setup.strip_names(os.environ):
        os.environ.pop(name, None)


def run(directory: Path, *, out: Callable[[str], None], socket: str = SOCKET, helpers: Sequence[Helper] = ()) -> int:
    from fabrikito.base.tmux import Server
    from fabrikito.launch import lifecycle, seatfiles
    from fabrikito.offline import claude_setup, demo
    from fabrikito.team import init, teamfile

    if demo.running_standin(directory) is not None or Server(socket_name=socket).alive():
        raise DemoError(
            f"a mixed demo is already running (tmux server {socket}, {directory}): stop it first with "
            f"`fabrikito demo --mixed --stop{_dir_flag(directory)}`"
        )
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise DemoError(f"cannot make the demo's directory {directory} ({exc.strerror or exc}): pass --dir") from None
    claude = claude_setup.ensure_claude(tools_dir=claude_setup.demo_tools_dir(), progress=out)
    clean_environment()
    for role in ("em", "cx", "gm"):
        (directory / "work" / role).mkdir(parents=True, exist_ok=True)
    (directory / "roles").mkdir(exist_ok=True)
    (directory / "roles" / "common.md").write_text(init.shared_prompt_text(), encoding="utf-8")
    cli = seatfiles.say_command()
    pid, url = demo.start_standin(directory, standin_script(cli))
    out(f"stand-in model listening on {url} (pid {pid}): Messages, Responses and Gemini APIs")
    try:
        seats = seat_setups(directory, url, cli, out)
        team_path = directory / "team.toml"
        team_path.write_text(team_text(claude=claude, seats=seats, socket=socket), encoding="utf-8")
        team = teamfile.load(team_path)
        out(f"team file: {team_path}")
        out("")
        out("== up: em (Claude Code), cx (Codex CLI), gm (Gemini CLI) ==")
        result = lifecycle.up(team, out=out, helpers=helpers)
    except BaseException:
        out("the demo could not start its team: stopping the stand-in")
        demo.stop_pid(pid)
        raise
    out("")
    out("== messages between the three, each typed by `fabrikito say` run from a seat's shell tool ==")
    for sender, recipient, text in FLOW:
        line = wait_delivered(team, sender, recipient, text)
        out(f"  {sender} → {recipient}: " + (line or f"(not delivered within {MESSAGE_TIMEOUT:g}s)"))
        shown = demo.screen_line(team.server(), f"mixed-{recipient}", f"[from {sender}]")
        out(f"    {recipient}'s screen: {shown}")
    out("")
    demo.print_status_and_log(team, out)
    out("")
    out("The team is still running.")
    out(f"  attach to a seat:  tmux -L {socket} attach -t mixed-cx   (detach: Ctrl-b d)")
    out(f"  talk to a seat:    {cli} say --team {team_path} gm 'hello'")
    out(f"  stop it all:       {cli} demo --mixed --stop{_dir_flag(directory)}")
    return result.exit_code


def wait_delivered(team: Team, sender: str, recipient: str, text: str, timeout: float = MESSAGE_TIMEOUT) -> str | None:
    """The log line of ``text`` delivered from ``sender`` to ``recipient`` (directly or from the queue)."""
    from fabrikito.base import rotate
    from fabrikito.log import msglog

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = rotate.read_all(team.log_path)  # messages.log and its rotated generations
        except OSError:
            data = b""
        for raw in data.splitlines(keepends=True):
            record = msglog.parse_line(raw)
            if (
                isinstance(record, msglog.Record)
                and (record.sender, record.recipient) == (sender.encode(), recipient.encode())
                and record.outcome == msglog.Outcome.DELIVERED.value
                and record.message.endswith(text.encode())
            ):
                return f"{record.time} {record.outcome}: {record.message.decode('utf-8', 'replace')}"
        time.sleep(0.2)
    return None


def _dir_flag(directory: Path) -> str:
    return "" if directory == default_dir() else f" --dir {directory}"
