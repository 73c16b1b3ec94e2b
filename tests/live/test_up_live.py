"""``up``, ``status`` and ``down`` against real Claude Code 2.1.316 seats, offline.

Lean on purpose: one 5-seat test walks the whole life of a team (settings,
kickoffs, the hook, the Read deny, ``up`` again, every state ``status``
shows, ``down``), and one 2-seat test covers seats that cannot come up on
their own (a startup dialog, the bypass-as-root exit).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from fabrikito.base import procs, tmuxcontrol
from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.cli import serverctl
from fabrikito.launch import seatfiles, status
from fabrikito.offline import claude_setup
from fabrikito.offline.replies import Reply
from fabrikito.offline.standin import StandIn
from fabrikito.team import teamfile

from .teamkit import clean_env, fabrikito, log_lines, wait_for

pytestmark = [pytest.mark.live, pytest.mark.tmux_releases]

KICKOFF = "Read your notes and tell the EM what you take first."
EM_KICKOFF = "You are the EM: check who is up."


def write_up_team(
    path: Path,
    server: Server,
    binary: Path,
    standin: StandIn,
    seats: Sequence[tuple[str, str, Mapping[str, str]]],
    *,
    home: Path,
    kickoffs: Mapping[str, str] | None = None,
    untrusted: frozenset[str] = frozenset(),
    agent: Sequence[str] | None = None,
) -> Path:
    """A team file whose seats run the bench binary (or ``agent``) against the stand-in, in ``home``."""
    base = path.parent
    base.mkdir(parents=True, exist_ok=True)
    (base / "roles").mkdir(exist_ok=True)
    (base / "roles" / "common.md").write_text(
        (Path(__file__).resolve().parents[2] / "examples" / "roles" / "common.md").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    lines = [
        'name = "live"',
        f'tmux_socket = "{server.socket_name}"',
        f"agent = {json.dumps(list(agent) if agent is not None else [str(binary)])}",
        f"kickoff = {json.dumps(KICKOFF)}",
    ]
    for role, mode, extra in seats:
        cwd = base / "work" / role
        cwd.mkdir(parents=True, exist_ok=True)
        if role not in untrusted:
            claude_setup.trust_dir(Path(extra.get("HOME", str(home))), cwd)
        env = {
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": standin.base_url(role),
            "ANTHROPIC_API_KEY": claude_setup.API_KEY,
            "DISABLE_AUTOUPDATER": "1",
            **extra,
        }
        lines += ["", "[[seat]]", f'role = "{role}"', f'session = "live-{role}"', f'cwd = "work/{role}"']
        lines.append(f'permission_mode = "{mode}"')
        if kickoffs and role in kickoffs:
            lines.append(f"kickoff = {json.dumps(kickoffs[role])}")
        lines.append("env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def status_json(team: Path) -> dict[str, Any]:
    done = fabrikito("status", "--json", team=team, role=None)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def states(team: Path) -> dict[str, tuple[str, str]]:
    return {s["role"]: (s["state"], s["detail"]) for s in status_json(team)["seats"]}


def test_up_five_seats_then_status_then_down(
    tmux_server: Server, claude_binary: Path, claude_home: Path, standin: StandIn, tmp_path: Path
) -> None:
    team_path = tmp_path / "team" / "team.toml"
    log_path = team_path.parent / ".state" / "live" / "messages.log"
    roles = ["em", "sec", "api", "web", "qa"]
    modes = {"qa": "default"}  # manual mode: its Bash call stops at a permission prompt
    write_up_team(
        team_path,
        tmux_server,
        claude_binary,
        standin,
        [(r, modes.get(r, "acceptEdits"), {}) for r in roles],
        home=claude_home,
        kickoffs={"em": EM_KICKOFF},
    )
    standin.on(
        "[from launcher]",
        Reply(tool="SendMessage", input={"to": "live-em", "message": "api reporting for duty"}, then=Reply("sent")),
        seat="api",
    )
    standin.on("[from launcher]", Reply(tool="Read", input={"file_path": str(log_path)}), seat="sec")
    marker = tmp_path / "qa-ran"
    standin.on(
        "[from launcher]",
        Reply(tool="Bash", input={"command": f"touch {marker}", "description": "touch a file"}),
        seat="qa",
    )

    # -- up starts five seats and gives each its kickoff ---------------------------------
    done = fabrikito("up", team=team_path, role=None, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for role in roles:
        assert f"{role}: started (session live-{role}" in done.stdout
        assert f"{role}: kickoff delivered" in done.stdout
        kickoff = EM_KICKOFF if role == "em" else KICKOFF
        request = standin.wait_for_request(role, f"[from launcher] {kickoff}", 30)
        system = json.dumps(request.body.get("system") if isinstance(request.body, dict) else None)
        assert f"You are `{role}`; your session name is `live-{role}`." in system  # the roster was appended
        assert "Messages from the launcher" in system  # and the shared prompt
    assert "ROLE" in done.stdout.split("\n\n")[-1]  # ends with the status table
    assert "command server: started" in done.stdout
    command_server = serverctl.running_pid(team_path)
    assert command_server is not None
    # it holds the one tmux control-mode client its commands share, on a session of its own
    wait_for(lambda: tmux_server.run("list-clients").strip() != "", 10, "the command server's tmux client")
    (client,) = tmux_server.run("list-clients", "-F", "#{client_pid} #{client_control_mode} #{session_name}").split(
        "\n"
    )[:-1]
    client_pid, control_mode, session = client.split()
    assert (control_mode, session) == ("1", tmuxcontrol.CONTROL_SESSION)
    assert procs.info(int(client_pid)).ppid == command_server
    logged = [line[1:] for line in log_lines(team_path)]
    for role in roles:
        kickoff = EM_KICKOFF if role == "em" else KICKOFF
        body = "[body not logged: sec]" if role == "sec" else kickoff
        assert ["launcher", role, "delivered", body] in logged

    # -- the generated settings: hooks, Read deny, bypass off, never the user's files -----
    seats_dir = team_path.parent / ".state" / "live" / "seats"
    for role in roles:
        settings = json.loads((seats_dir / f"{role}.settings.json").read_text(encoding="utf-8"))
        for event in ("PostToolUse", "PostToolUseFailure"):
            (entry,) = settings["hooks"][event]
            assert entry["matcher"] == "SendMessage"
            assert "from fabrikito.log.hook import main" in entry["hooks"][0]["command"]
            assert entry["hooks"][0]["command"].endswith(f"--team {team_path} --role {role}")
        assert settings["permissions"]["disableBypassPermissionsMode"] == "disable"
        deny = settings["permissions"].get("deny", [])
        assert (f"Read(/{log_path})" in deny) == (role != "em")
        assert settings["env"]["TEAM_ROLE"] == role
    assert json.loads((claude_home / ".claude" / "settings.json").read_text()) == {
        "skipDangerousModePermissionPrompt": True
    }

    # -- the hook logs api's SendMessage; sec's Read of the log is denied -------------------
    wait_for(
        lambda: ["api", "em", "sent", "api reporting for duty"] in [line[1:] for line in log_lines(team_path)],
        60,
        "api's SendMessage in the log",
        log_path.read_text,
    )
    read = standin.wait_for_tool_result("sec", "Read", 60)
    assert "denied" in read.content.lower() and "api reporting" not in read.content, read

    # -- up again starts nothing ---------------------------------------------------------------
    panes_before = {r.session: r.pane_id for r in bench_panes(tmux_server)}
    again = fabrikito("up", team=team_path, role=None, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("already up") == 5
    assert "started (" not in again.stdout
    assert {r.session: r.pane_id for r in bench_panes(tmux_server)} == panes_before

    # -- status: idle, a dialog, text in a box ---------------------------------------------------
    web_pane = panes_before["live-web"]
    wait_for(lambda: states(team_path)["web"][0] == "idle", 60, "web idle", lambda: str(states(team_path)))
    tmux_server.send_keys(web_pane, "a draft in the box", literal=True)
    expected = {
        "em": ("idle", ""),
        "sec": ("idle", ""),
        "api": ("idle", ""),
        "web": ("box holds text", ""),
        "qa": ("waiting at a dialog", "permission prompt"),
    }
    wait_for(lambda: states(team_path) == expected, 90, "every state", lambda: str(states(team_path)))
    assert not marker.exists()
    team = teamfile.load(team_path)
    collected = status.collect(team)
    assert collected.tmux_calls == 2
    table = status.render(collected)
    assert "box holds text" in table and "waiting at a dialog (permission prompt)" in table
    data = status_json(team_path)
    api = next(s for s in data["seats"] if s["role"] == "api")
    assert api["last_from"] is not None and api["last_to"] is not None
    # the command server ran those, as status run here runs: the real seats, read now
    for argv in (["--json"], []):
        served = fabrikito("status", *argv, team=team_path, role=None)
        here = fabrikito("status", *argv, team=team_path, role=None, env={"FABRIKITO_SERVER": "0"})
        assert (served.returncode, served.stdout, served.stderr) == (here.returncode, here.stdout, here.stderr)
    said = fabrikito("say", "api", "typed by the command server", team=team_path, role=None)
    assert said.returncode == 0, said.stdout + said.stderr
    standin.wait_for_request("api", "[from owner] typed by the command server", 30)
    refused = fabrikito("say", "web", "not into a draft", team=team_path, role=None)
    assert refused.returncode == 3 and "holds text" in refused.stderr + refused.stdout, refused

    # -- down stops the seats, keeps the state and the log ---------------------------------------
    lines_before = log_lines(team_path)
    down = fabrikito("down", team=team_path, role=None, timeout=60)
    assert down.returncode == 0, down.stdout + down.stderr
    assert down.stdout.count(": stopped (session live-") == 5
    assert f"stopped the command server (pid {command_server})" in down.stdout
    assert serverctl.running_pid(team_path) is None and not serverctl.socket_path(team_path).exists()
    assert not bench_panes(tmux_server)  # its client's session went with it (and tmux, with no session left)
    assert log_lines(team_path) == lines_before and lines_before
    assert (seats_dir / "api.settings.json").exists()
    assert {s: st for s, (st, _) in states(team_path).items()} == dict.fromkeys(roles, "down")


def bench_panes(server: Server) -> list[Any]:
    from fabrikito.delivery import seatpane

    try:
        return seatpane.list_panes(server)
    except TmuxError:
        return []


def test_up_reports_seats_that_cannot_start_and_finishes_a_kickoff_later(
    tmux_server: Server, claude_binary: Path, claude_home: Path, standin: StandIn, tmp_path: Path
) -> None:
    fresh_home = claude_setup.make_home(tmp_path / "fresh-home", skip_bypass_prompt=False)
    seats: list[tuple[str, str, Mapping[str, str]]] = [
        ("fresh", "bypassPermissions", {"HOME": str(fresh_home), "IS_SANDBOX": "1"})
    ]
    root = os.geteuid() == 0
    if root:
        seats.append(("rooted", "bypassPermissions", {}))
    seats.append(("untrusted", "acceptEdits", {}))
    team_path = write_up_team(
        tmp_path / "team" / "team.toml",
        tmux_server,
        claude_binary,
        standin,
        seats,
        home=claude_home,
        untrusted=frozenset({"untrusted"}),
    )

    done = fabrikito("up", "--timeout", "12", team=team_path, role=None, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "fresh: stopped at the bypass permissions acceptance dialog: attach with `tmux -L" in out
    assert "fresh: FAILED: still at the bypass permissions acceptance dialog after 12s" in out
    assert "untrusted: stopped at the trust prompt for its working directory: attach with `tmux -L" in out
    assert states(team_path)["untrusted"] == ("waiting at a dialog", "the trust prompt for its working directory")
    if root:
        assert "WARNING: running as root, Claude Code refuses to start in bypassPermissions: rooted" in out
        assert "rooted: FAILED: Claude Code refuses bypassPermissions as root" in out
        assert 'IS_SANDBOX = "1"' in out
        assert states(team_path)["rooted"][0] == "exited"
    assert states(team_path)["fresh"] == ("waiting at a dialog", "the bypass permissions acceptance dialog")

    # The owner accepts the dialog; `up` again gives the kickoff the first one could not.
    team = teamfile.load(team_path)
    fresh = team.seat("fresh")
    assert fresh is not None
    pane = next(r.pane_id for r in bench_panes(tmux_server) if r.session == fresh.session)
    tmux_server.send_keys(pane, "Down")
    tmux_server.send_keys(pane, "Enter")
    record = seatfiles.read_launch(team, "fresh")
    assert record is not None and record.kickoff == "pending"
    again = fabrikito("up", "fresh", team=team_path, role=None, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "fresh: running without its kickoff yet" in again.stdout
    assert "fresh: kickoff delivered" in again.stdout
    standin.wait_for_request("fresh", f"[from launcher] {KICKOFF}", 30)
    record = seatfiles.read_launch(team, "fresh")
    assert record is not None and record.kickoff == "delivered"


def test_demo_runs_end_to_end_and_stops(tmp_path: Path, tmux_release: str) -> None:
    import secrets

    from fabrikito.offline import demo

    socket = f"fab-demo-{secrets.token_hex(4)}"
    directory = tmp_path / "demo"
    try:
        done = run_demo("--dir", str(directory), "--tmux-socket", socket, timeout=240)
        out = done.stdout
        assert done.returncode == 0, out + done.stderr
        for role in ("em", "sec", "api", "web", "qa"):
            assert f"{role}: kickoff delivered" in out
            assert f"  {role}: ❯ [from launcher] " in out  # the kickoff, as the seat's screen shows it
        assert "logged by api's hook: " in out and "api → em sent: api here:" in out
        assert "say web 'Owner here: please look at the login page first.': delivered" in out
        assert "web's screen: ● On it: looking at the login page first." in out
        assert "owner → web" in out and "launcher → sec" in out and "[body not logged: sec]" in out
        assert f"tmux -L {socket} attach -t acme-em" in out
        assert demo.running_standin(directory) is not None
        assert Server(socket_name=socket).alive()  # the team is left running
        assert Server(socket_name=socket).run("display-message", "-p", "#{version}").strip() == tmux_release
    finally:
        stopped = run_demo("--stop", "--dir", str(directory), timeout=60)
        try:
            Server(socket_name=socket).kill_server()
        except TmuxError:
            pass  # already gone: demo --stop closed every pane
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "stand-in model stopped" in stopped.stdout
    assert demo.running_standin(directory) is None
    assert (directory / ".state" / "acme" / "messages.log").exists()


def run_demo(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabrikito", "demo", *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=timeout,
        check=False,
    )
