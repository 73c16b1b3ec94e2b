"""A team on two hosts, over a real OpenSSH server: real Claude Code 2.1.316 seats on both, offline.

The other host is a second local user behind a private sshd on 127.0.0.1
(:mod:`tests.live.remotekit`): its own HOME, tmux server, fabrikito (installed
from this checkout's wheel) and Claude Code processes.  Seat ``em`` runs here;
``api`` and ``web`` run there.  One test walks the life of such a team (up,
kickoffs, say both ways, a SendMessage on the host, status and log merged, the
sshd stopped and started again, down); the others show the refusals that need
no seat (unknown host key, changed host key, refused login, fabrikito missing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests import userenv

from fabrikito.base import daemons
from fabrikito.base.ssh import Host
from fabrikito.base.tmux import Server
from fabrikito.delivery import route
from fabrikito.launch import watcherproc
from fabrikito.offline import claude_setup
from fabrikito.offline.replies import Reply
from fabrikito.offline.standin import StandIn
from fabrikito.team import hosts, teamfile

from . import remotekit
from .remotekit import OtherHost
from .teamkit import fabrikito, wait_for

pytestmark = pytest.mark.live

KICKOFF = "Read your notes and wait for work."
SSH = ("ssh", "-F")
HOST_SAY = 'PATH="$HOME/.local/bin:$PATH" fabrikito _host say live --sender em api'


@pytest.fixture(scope="module")
def other_host() -> Iterator[OtherHost]:
    host = OtherHost()
    yield host
    host.close(host.tmux_sockets)


def write_team(
    path: Path,
    server: Server,
    binary: Path,
    standin: StandIn,
    host: OtherHost,
    home: Path,
    *,
    remote: str,
    remote_binary: Path | None = None,
    roles: tuple[str, ...] = ("em", "api", "web"),
    more: str = "",
) -> Path:
    base = path.parent
    (base / "roles").mkdir(parents=True, exist_ok=True)
    (base / "roles" / "common.md").write_text("Messages from the launcher start your work.\n", encoding="utf-8")
    lines = [
        'name = "live"',
        f'tmux_socket = "{server.socket_name}"',
        f"agent = {json.dumps([str(binary)])}",
        f"kickoff = {json.dumps(KICKOFF)}",
        'origin = "fk-origin"',
    ]
    seats = [("em", None, "acceptEdits"), ("api", remote, "bypassPermissions"), ("web", remote, "bypassPermissions")]
    seats = [s for s in seats if s[0] in roles]
    lines.append(more)
    for role, where, mode in seats:
        if where is None:
            cwd = base / "work" / role
            cwd.mkdir(parents=True, exist_ok=True)
            claude_setup.trust_dir(home, cwd)
            env = {"HOME": str(home)}
        else:
            cwd = host.home / "work" / role
            host.trust(cwd)
            env = {"HOME": str(host.home), "TMPDIR": str(host.home / "tmp")}
        env.update(
            {
                "ANTHROPIC_BASE_URL": standin.base_url(role),
                "ANTHROPIC_API_KEY": claude_setup.API_KEY,
                "DISABLE_AUTOUPDATER": "1",
            }
        )
        lines += ["", "[[seat]]", f'role = "{role}"', f'session = "live-{role}"', f"cwd = {json.dumps(str(cwd))}"]
        lines.append(f'permission_mode = "{mode}"')
        if where is not None:
            lines.append(f'host = "{where}"')
            if remote_binary is not None and remote_binary != binary:
                lines.append(f"command = {json.dumps([str(remote_binary)])}")
        lines.append("env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def host_log(host: OtherHost) -> list[list[str]]:
    path = host.home / ".local" / "state" / "fabrikito" / "teams" / "live" / ".state" / "live" / "messages.log"
    if not path.exists():
        return []
    return [line.split("\t")[1:] for line in path.read_text(encoding="utf-8").splitlines()]


def here_log(team: Path) -> list[list[str]]:
    path = team.parent / ".state" / "live" / "messages.log"
    if not path.exists():
        return []
    return [line.split("\t")[1:] for line in path.read_text(encoding="utf-8").splitlines()]


def seats_of(team: Path, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    done = fabrikito("status", "--json", team=team, role=None, env=env, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return {s["role"]: s for s in json.loads(done.stdout)["seats"]}


def test_a_team_on_two_hosts(
    other_host: OtherHost, tmux_server: Server, claude_home: Path, standin: StandIn, tmp_path: Path
) -> None:
    binary = claude_setup.ensure_claude(env=userenv.tooling_env())
    remote_binary = other_host.runnable(binary)
    assert tmux_server.socket_name is not None
    other_host.tmux_sockets.append(tmux_server.socket_name)
    team = write_team(
        tmp_path / "team" / "team.toml",
        tmux_server,
        binary,
        standin,
        other_host,
        claude_home,
        remote="fk-remote",
        remote_binary=remote_binary,
    )
    env = {"FABRIKITO_SSH_CONFIG": str(other_host.config)}
    standin.on(
        "[from launcher]",
        Reply(tool="SendMessage", input={"to": "live-api", "message": "web reporting to api"}, then=Reply("sent")),
        seat="web",
    )
    standin.on(
        "[from em] tell me",
        Reply(
            tool="Bash",
            input={"command": '$FABRIKITO say em "api here, on the other host"', "description": "answer the EM"},
            then=Reply("told the EM"),
        ),
        seat="api",
    )

    # -- up: this machine's seat and the host's two, kickoffs on both --------------------------------
    up = fabrikito("up", team=team, role=None, env=env, timeout=400)
    assert up.returncode == 0, up.stdout + up.stderr
    assert "em: kickoff delivered" in up.stdout
    assert "[fk-remote] fabrikito 0.1.0 there; the team file and shared prompt copied" in up.stdout
    there = [line for line in up.stdout.splitlines() if line.startswith("[fk-remote] ")]
    for role in ("api", "web"):
        assert [line for line in there if f"{role}: kickoff delivered" in line], up.stdout
    for role in ("em", "api", "web"):
        request = standin.wait_for_request(role, f"[from launcher] {KICKOFF}", 30)
        system = json.dumps(request.body.get("system") if isinstance(request.body, dict) else None)
        assert f"You are `{role}`" in system
        assert "another host" in system and "Use `say` for them" in system  # the roster marks the other host's seats
    assert ["launcher", "em", "delivered", KICKOFF] in here_log(team)
    assert ["launcher", "api", "delivered", KICKOFF] in host_log(other_host)

    # -- a SendMessage between two seats of the host is logged by the host's hook ----------------------
    wait_for(
        lambda: ["web", "api", "sent", "web reporting to api"] in host_log(other_host),
        60,
        "web's SendMessage in the host's log",
        lambda: str(host_log(other_host)),
    )

    # -- say here -> there, and the seat there says back (its say routed to this machine) -------------
    said = fabrikito("say", "api", "tell me how it goes", team=team, role="em", env=env)
    assert said.returncode == 0, said.stdout + said.stderr
    assert said.stdout.strip() == "delivered to api"
    standin.wait_for_request("api", "[from em] tell me how it goes", 30)
    assert ["em", "api", "delivered", "tell me how it goes"] in here_log(team)  # the sender's host
    assert ["em", "api", "delivered", "tell me how it goes"] in host_log(other_host)  # the seat's host
    standin.wait_for_request("em", "[from api] api here, on the other host", 60)
    wait_for(
        lambda: ["api", "em", "delivered", "api here, on the other host"] in host_log(other_host),
        30,
        "api's say in the host's log",
        lambda: str(host_log(other_host)),
    )
    assert ["api", "em", "delivered", "api here, on the other host"] in here_log(team)

    # -- status and log, both hosts merged --------------------------------------------------------------
    wait_for(
        lambda: {r: s["state"] for r, s in seats_of(team, env).items()} == dict.fromkeys(("em", "api", "web"), "idle"),
        60,
        "every seat idle",
        lambda: str(seats_of(team, env)),
    )
    seats = seats_of(team, env)
    assert [seats[r]["host"] for r in ("em", "api", "web")] == [None, "fk-remote", "fk-remote"]
    table = fabrikito("status", team=team, role=None, env=env)
    assert "HOST" in table.stdout and "fk-remote" in table.stdout, table.stdout
    log = fabrikito("log", "--json", team=team, role=None, env=env)
    assert log.returncode == 0, log.stderr
    records = json.loads(log.stdout)["records"]
    routes = [(r["host"], r["sender"], r["recipient"], r["outcome"]) for r in records]
    assert (None, "launcher", "em", "delivered") in routes
    assert ("fk-remote", "launcher", "api", "delivered") in routes
    assert ("fk-remote", "web", "api", "sent") in routes
    assert [r["time"] for r in records] == sorted(r["time"] for r in records)  # merged by time

    # -- the host goes away: status says so within its 5 s, say refuses, nothing typed ------------------
    other_host.stop_sshd()
    started = time.monotonic()
    seats = seats_of(team, env)
    took = time.monotonic() - started
    assert took < 10, took  # 5 s per host at most, read in parallel, plus this machine's own reading
    for role in ("api", "web"):
        assert seats[role]["state"] == "unreachable", seats[role]
        assert "Connection refused" in seats[role]["detail"], seats[role]
    assert seats["em"]["state"] == "idle"
    requests_before = len(standin.requests("api"))
    refused = fabrikito("say", "api", "are you still there", team=team, role="em", env=env)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "host fk-remote" in refused.stderr and "Connection refused" in refused.stderr
    assert "Nothing was typed" in refused.stderr
    assert ["em", "api", "NOT-DELIVERED", "are you still there"] in here_log(team)

    # -- it comes back: everything works again ---------------------------------------------------------
    other_host.start_sshd()
    seats = seats_of(team, env)
    assert seats["api"]["state"] == "idle", seats["api"]  # not "box holds text": nothing was typed there
    assert len(standin.requests("api")) == requests_before
    again = fabrikito("say", "api", "welcome back", team=team, role="em", env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    standin.wait_for_request("api", "[from em] welcome back", 30)
    assert not [t for t in standin.last_user_texts("api") if "are you still there" in t]

    # -- flush of a seat there runs there too (nothing say left in its box), logged on both hosts ----------
    flushed = fabrikito("flush", "api", team=team, role="em", env=env)
    assert flushed.returncode == 0, flushed.stdout + flushed.stderr
    assert (
        flushed.stdout.startswith("nothing to flush in api: on fk-remote")
        or "nothing to flush in api" in flushed.stdout
    )
    assert ["em", "api", "FLUSH-NOTHING", "[flush]"] in here_log(team)
    assert ["em", "api", "FLUSH-NOTHING", "[flush]"] in host_log(other_host)

    # -- the host takes a sender only vouched for by its machine: a seat there cannot pass for em -------------
    forged = other_host.as_user(
        ["sh", "-c", "echo '{}' | SSH_CONNECTION=x $HOME/.local/bin/fabrikito _host say live --sender em web"],
        check=False,
    )
    assert forged.returncode == 3 and "not vouched for" in forged.stdout, forged.stdout + forged.stderr

    # -- the connection drops while the host's engine delivers: it finishes there on its own, once ---------
    client = subprocess.Popen(
        [*SSH, str(other_host.config), "-o", "BatchMode=yes", "-T", "fk-remote", HOST_SAY],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert client.stdin is not None and client.stdout is not None
    client.stdin.write(route.voucher(teamfile.load(team), None) + b"cut off mid-way")  # as say sends it
    client.stdin.close()
    assert client.stdout.readline() == b"accepted\n"  # the engine has started on the host
    client.kill()  # the connection goes with it
    client.wait()
    wait_for(
        lambda: ["em", "api", "delivered", "cut off mid-way"] in host_log(other_host),
        30,
        "the host's engine to finish on its own",
        lambda: str(host_log(other_host)),
    )
    standin.wait_for_request("api", "[from em] cut off mid-way", 30)
    typed = [t for t in standin.last_user_texts("api") if "cut off mid-way" in t]
    assert len(typed) == 1, typed  # one turn: typed once, labelled

    # -- from inside a remote seat, every route tried: none passes for the owner or for em -----------------------
    try_routes(other_host, standin, tmux_server, team)

    # -- down: both hosts, and every ssh connection the team opened on either side ----------------------------
    origin_master = hosts.host(teamfile.load(team), "fk-remote").control_path
    before = team_ssh(other_host, origin_master)
    assert [p for p in before if origin_master in p], f"this machine's master to the host is not up: {before}"
    # (the host's own master, started by api's say from its Bash tool, may be gone already: Claude Code ends
    # what a Bash command leaves running; down ends it, or finds it gone, and either way none may be left)
    down = fabrikito("down", team=team, role=None, env=env, timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "[fk-remote] api: stopped" in down.stdout and "[fk-remote] web: stopped" in down.stdout
    assert "em: stopped" in down.stdout
    assert "ended the ssh connection to fk-remote" in down.stdout, down.stdout
    wait_for(
        lambda: not team_ssh(other_host, origin_master),
        10,
        "no ssh process of the team",
        lambda: str(team_ssh(other_host, origin_master)),
    )
    assert {s["state"] for s in seats_of(team, env).values()} == {"down"}


TRY_ROUTES = r"""
import json, os, subprocess
state = os.path.expanduser("~/.local/state/fabrikito/teams/live/.state/live")
secret = open(os.path.join(state, "route-secret")).read().strip()  # a seat can read it, told not to or not
here = json.load(open(os.path.join(state, "here.json")))
voucher = json.dumps({"machine": "fk-remote", "secret": secret}) + "\n"
pre = 'PATH="$HOME/.local/bin:$PATH" LANG="${LANG:-C.UTF-8}" '

def run(argv, data=b"", shell=False):
    done = subprocess.run(argv, input=data, capture_output=True, timeout=60, shell=shell)
    shown = argv if isinstance(argv, str) else " ".join(argv)[:90]
    print(f"### {shown} -> {done.returncode}\n{done.stdout.decode()[-400:]}{done.stderr.decode()[-400:]}")

# 1. the secret piped by hand, through the origin login, as the owner and as the origin's seat em
for sender in ("owner", "em"):
    command = f"{pre}{here['origin_command']} _host say {here['origin_team']} --sender {sender} em"
    run(["ssh", "-o", "BatchMode=yes", "fk-origin", command], (voucher + f"by hand as {sender}").encode())
# 2. a shell through the origin login: tmux typed into em, a plain command, a login shell
run(["ssh", "-o", "BatchMode=yes", "fk-origin", "tmux -L SOCKET send-keys -t =live-em: typed-through-the-login Enter"])
run(["ssh", "-o", "BatchMode=yes", "fk-origin", "id > /tmp/fabrikito-routes-ran-a-shell"])
run(["ssh", "-T", "-o", "BatchMode=yes", "fk-origin"], b"id > /tmp/fabrikito-routes-ran-a-shell\n")
# 3. TEAM_ROLE of another machine's seat, here on the host
run(f'TEAM_ROLE=em {os.environ["FABRIKITO"]} say web "as em, on the host"', shell=True)
run(f'TEAM_ROLE=em {os.environ["FABRIKITO"]} say em "as em, to em"', shell=True)
print("### tried")
"""


def test_up_resume_brings_a_killed_seat_back_on_its_host_with_its_own_conversation(
    other_host: OtherHost, tmux_server: Server, claude_home: Path, standin: StandIn, tmp_path: Path
) -> None:
    """A seat on the other host is SIGKILLed; ``up --resume`` here resumes it there, from the conversation
    record its host keeps, and leaves the seats still running (here and there) alone."""
    binary = claude_setup.ensure_claude(env=userenv.tooling_env())
    assert tmux_server.socket_name is not None
    other_host.tmux_sockets.append(tmux_server.socket_name)
    team = write_team(
        tmp_path / "team" / "team.toml",
        tmux_server,
        binary,
        standin,
        other_host,
        claude_home,
        remote="fk-remote",
        remote_binary=other_host.runnable(binary),
    )
    env = {"FABRIKITO_SSH_CONFIG": str(other_host.config)}
    up = fabrikito("up", team=team, role=None, env=env, timeout=400)
    assert up.returncode == 0, up.stdout + up.stderr
    standin.wait_for_request("api", f"[from launcher] {KICKOFF}", 60)
    second = "second turn: remember the word pelican"
    assert fabrikito("say", "api", second, team=team, role=None, env=env, timeout=60).returncode == 0
    standin.wait_for_request("api", second, 60)
    wait_for(lambda: seats_of(team, env)["api"]["state"] == "idle", 60, "api idle", lambda: str(seats_of(team, env)))
    before = seats_of(team, env)
    conversation = before["api"]["conversation"]
    assert isinstance(conversation, str) and len(conversation) == 36, before["api"]
    record = other_host.home / ".local" / "state" / "fabrikito" / "teams" / "live" / ".state" / "live"
    assert conversation in (record / "conversations" / "api.json").read_text(encoding="utf-8")  # kept on its host
    assert not (team.parent / ".state" / "live" / "conversations" / "api.json").exists()

    os.kill(before["api"]["pid"], 9)
    wait_for(lambda: seats_of(team, env)["api"]["state"] in ("exited", "down"), 30, "api seen exited")
    mark = standin.mark()
    done = fabrikito("up", "--resume", team=team, role=None, env=env, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    there = [line for line in done.stdout.splitlines() if line.startswith("[fk-remote] ")]
    assert [line for line in there if f"api: resuming its conversation {conversation} (restart 1)" in line], there
    assert [line for line in there if "web: already up" in line], there
    assert "em: already up" in done.stdout, done.stdout
    request = standin.wait_for_request("api", "[from launcher] You were restarted at", 120, since=mark)
    said = json.dumps(request.body.get("messages") if isinstance(request.body, dict) else None)
    assert KICKOFF in said and second in said, said[:2000]  # the conversation resumed, on its host
    after = seats_of(team, env)
    assert (after["api"]["conversation"], after["api"]["restarts"]) == (conversation, 1)
    for role in ("em", "web"):
        assert after[role]["pid"] == before[role]["pid"]
        assert not [r for r in standin.main_requests(role) if r.index >= mark]
    # Stopped on purpose by down, the seat comes back resumed only when asked: --resume reaches its host.
    assert fabrikito("down", "api", team=team, role=None, env=env, timeout=120).returncode == 0
    again = fabrikito("up", "--resume", "api", team=team, role=None, env=env, timeout=400)
    assert f"api: resuming its conversation {conversation} (restart 2)" in again.stdout, again.stdout + again.stderr
    down = fabrikito("down", team=team, role=None, env=env, timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr


def try_routes(host: OtherHost, standin: StandIn, tmux: Server, team: Path) -> None:
    """From inside the remote seat api (its Bash tool, as the host's user), every way round the routing."""
    script = host.home / "work" / "api" / "try_routes.py"
    script.write_text(TRY_ROUTES.replace("SOCKET", str(tmux.socket_name)), encoding="utf-8")
    subprocess.run(["chown", f"{remotekit.USER}:{remotekit.USER}", str(script)], check=True)
    marker = Path("/tmp/fabrikito-routes-ran-a-shell")  # what a shell through the login would write
    marker.unlink(missing_ok=True)
    mark = standin.mark()
    standin.on(
        "try the routes",
        Reply(tool="Bash", input={"command": "python3 try_routes.py", "description": "try"}, then=Reply("tried")),
        seat="api",
    )
    said = fabrikito(
        "say", "api", "try the routes", team=team, role="em", env={"FABRIKITO_SSH_CONFIG": str(host.config)}
    )
    assert said.returncode == 0, said.stdout + said.stderr
    wait_for(
        lambda: any("### tried" in r.content for r in standin.tool_results("api", "Bash")),
        120,
        "api's Bash tool to try every route",
        lambda: str([r.content[-300:] for r in standin.tool_results("api", "Bash")]),
    )
    (result,) = [r.content for r in standin.tool_results("api", "Bash") if "### tried" in r.content]
    assert "speaks only from the team's own machine" in result, result  # the owner, routed from a host
    assert "is not a seat of fk-remote" in result, result  # em, routed from the host em does not run on
    assert result.count("runs only fabrikito's routed say and flush") == 3, result  # the login is no shell
    assert "em is a seat of the team's own machine, and this is host fk-remote" in result, result
    # none arrived: nothing typed into em, no shell ran, every refusal logged where it was refused
    time.sleep(2)
    arrived = [r.last_user_text for r in standin.main_requests("em") if r.index >= mark]
    assert [t for t in arrived if "by hand" in t or "as em" in t] == [], arrived
    assert "typed-through-the-login" not in tmux.capture("=live-em:")
    assert not marker.exists()
    for sender in ("owner", "em"):
        assert [sender, "em", "NOT-DELIVERED", f"by hand as {sender}"] in here_log(team)
    assert ["em", "web", "NOT-DELIVERED", "as em, on the host"] in host_log(host)
    assert ["em", "em", "NOT-DELIVERED", "as em, to em"] in host_log(host)
    gate = (host.origin_state / "fabrikito" / "gate.log").read_text(encoding="utf-8")
    assert "refused 'tmux -L" in gate and "refused 'id > /tmp" in gate and "refused a login shell" in gate, gate
    assert gate.count("ran _host say") == 2 + 1  # the two by hand, and api's own say to em earlier


def team_ssh(host: OtherHost, origin_master: str) -> list[str]:
    """The team's ssh processes on both sides: this machine's master to the host (by its control socket), and
    every ssh of the host's user, each as ``pid uid: command line`` (a master names itself ``ssh: <socket>
    [mux]``, so ssh is known by its program, not its first word)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            program = os.path.basename(os.readlink(f"/proc/{entry}/exe"))
            line = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            uid = os.stat(f"/proc/{entry}").st_uid
        except OSError:
            continue
        if program == "ssh" and (uid == host.uid or origin_master in line):
            found.append(f"{entry} {uid}: {line}")
    return found


@pytest.mark.parametrize(
    ("dest", "problem", "advice"),
    [
        ("fk-unknown", "its host key is not in known_hosts", "Connect once by hand (`ssh fk-unknown`)"),
        ("fk-changed", "its host key has CHANGED", "ssh-keygen -R 'fk-changed'"),
        ("fk-refused", "it refused the login", "set up key login for fk-refused"),
    ],
)
def test_a_host_that_cannot_be_trusted_or_entered_is_refused_at_once(
    other_host: OtherHost, tmp_path: Path, dest: str, problem: str, advice: str
) -> None:
    team = tmp_path / "team.toml"
    team.write_text(
        'name = "live"\ntmux_socket = "fab-unused"\n\n[[seat]]\nrole = "em"\nsession = "t-em"\n\n'
        f'[[seat]]\nrole = "api"\nsession = "t-api"\nhost = "{dest}"\n',
        encoding="utf-8",
    )
    env = {"FABRIKITO_SSH_CONFIG": str(other_host.config)}
    said = fabrikito("say", "api", "hello", team=team, role="em", env=env, timeout=30)
    assert said.returncode == 3, said.stdout + said.stderr
    assert f"host {dest}: {problem}" in said.stderr and advice in said.stderr
    assert said.stderr.count("not sent to api") == 1
    up = fabrikito("up", "api", team=team, role=None, env=env, timeout=60)
    assert up.returncode == 1, up.stdout + up.stderr
    assert f"[{dest}] FAILED: host {dest}: {problem}" in up.stdout
    seats = seats_of(team, env)
    assert seats["api"]["state"] == "unreachable" and seats["api"]["host"] == dest


def test_up_says_how_to_install_fabrikito_on_a_host_without_it(other_host: OtherHost, tmp_path: Path) -> None:
    other_host.as_user(["mv", ".local/bin/fabrikito", ".local/bin/fabrikito.away"])
    try:
        team = tmp_path / "team.toml"
        team.write_text(
            'name = "live"\ntmux_socket = "fab-unused"\n\n[[seat]]\nrole = "api"\nsession = "t-api"\n'
            'host = "fk-remote"\n',
            encoding="utf-8",
        )
        env = {"FABRIKITO_SSH_CONFIG": str(other_host.config)}
        up = fabrikito("up", team=team, role=None, env=env, timeout=60)
    finally:
        other_host.as_user(["mv", ".local/bin/fabrikito.away", ".local/bin/fabrikito"])
    # the watcher up starts to read the hosts (a team with no seat here) runs until down stops it
    watching = watcherproc.lock_path(teamfile.load(team))
    assert daemons.lock_held(watching)
    down = fabrikito("down", team=team, role=None, env=env, timeout=60)
    assert "stopped the watcher" in down.stdout, down.stdout  # (the host says it never had the team: exit 1)
    assert not daemons.lock_held(watching)
    assert up.returncode == 1, up.stdout + up.stderr
    assert "[fk-remote] FAILED: host fk-remote: fabrikito is not installed there" in up.stdout
    assert "uv tool install fabrikito==0.1.0" in up.stdout


def test_a_host_that_accepts_but_never_answers_is_unreachable_within_its_5_s(
    other_host: OtherHost, tmp_path: Path
) -> None:
    team = tmp_path / "team.toml"
    team.write_text(
        'name = "frozen"\ntmux_socket = "fab-unused"\n\n[[seat]]\nrole = "em"\nsession = "t-em"\n\n'
        '[[seat]]\nrole = "api"\nsession = "t-api"\nhost = "fk-remote"\n',
        encoding="utf-8",
    )
    env = {"FABRIKITO_SSH_CONFIG": str(other_host.config)}
    other_host.freeze_sshd(True)
    try:
        started = time.monotonic()
        seats = seats_of(team, env)
        took = time.monotonic() - started
        said = fabrikito("say", "api", "hello", team=team, role="em", env=env, timeout=60)
    finally:
        other_host.freeze_sshd(False)
    assert seats["api"]["state"] == "unreachable", seats["api"]
    assert "did not answer" in seats["api"]["detail"] or "timed out" in seats["api"]["detail"], seats["api"]
    # the host's 5 s, plus two interpreter starts and this machine's own reading, on a busy machine
    assert took < 12, took
    assert said.returncode == 3, said.stdout + said.stderr
    assert "host fk-remote" in said.stderr and "Nothing was typed" in said.stderr


def test_connections_started_at_once_make_one_master_and_leave_no_ssh_behind(
    other_host: OtherHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Helpers of one team (up's hosts, the watcher, a say) may each find no master and start one at the same
    moment: one master comes up, the others use it, and ending it leaves no ssh process (a second master's
    `ControlMaster=yes` on a socket in use carries on without one, and ends with nothing)."""
    control = tmp_path / ".state" / "live" / "ssh"
    connection = Host("fk-remote", control)
    env = userenv.user_env(FABRIKITO_SSH_CONFIG=str(other_host.config))
    monkeypatch.setenv("FABRIKITO_SSH_CONFIG", str(other_host.config))  # this process ends the master
    starter = (
        "import sys; from pathlib import Path; from fabrikito.base.ssh import Host; "
        "Host('fk-remote', Path(sys.argv[1])).connect()"
    )

    def mine() -> list[str]:
        return [line for line in team_ssh(other_host, connection.control_path) if connection.control_path in line]

    for _ in range(3):
        started = [
            subprocess.Popen([sys.executable, "-c", starter, str(control)], env=env, stderr=subprocess.PIPE)
            for _ in range(6)
        ]
        for process in started:
            _, err = process.communicate(timeout=60)
            assert process.returncode == 0, err
        assert connection.master_up()
        assert len(mine()) == 1, mine()  # the master alone
        connection.disconnect()
        wait_for(lambda: not mine(), 10, "no ssh process of the connection", lambda: str(mine()))
