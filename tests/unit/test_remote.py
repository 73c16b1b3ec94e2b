"""Seats on other hosts, without a second host: the team file, ssh's failures read, the route's answers,
what a host trusts, the roster, and say/status/log through a stand-in ``ssh`` on PATH.

The real thing (a private sshd, a second user, real Claude Code seats) is tests/live/test_remote_live.py.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from fabrikito.base import ssh
from fabrikito.base.errors import TeamFileError
from fabrikito.base.ssh import HostError, Problem
from fabrikito.delivery import engine, route, say
from fabrikito.delivery.engine import Result
from fabrikito.launch import seatfiles, status
from fabrikito.log import hostlogs, msglog
from fabrikito.team import hosts, teamfile

TEAM = (
    'name = "t"\ntmux_socket = "fab-unit-remote-unused"\norigin = "laptop"\n\n'
    '[[seat]]\nrole = "em"\nsession = "t-em"\n\n'
    '[[seat]]\nrole = "api"\nsession = "t-api"\nhost = "build-2"\ncwd = "/srv/api"\n'
)

#: A stand-in for ssh: ``-f -N`` (a master) succeeds; a command answers as FAKE_SSH says.
FAKE_SSH = """#!{python}
import os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_SSH_CALLS"], "a") as calls:
    calls.write(" ".join(args) + "\\n")
mode = os.environ["FAKE_SSH"]
if "-N" in args:
    if mode == "unknown-key":
        sys.stderr.write("No ED25519 host key is known for build-2 and you have requested strict checking.\\r\\n"
                         "Host key verification failed.\\r\\n")
        sys.exit(255)
    sys.exit(0)
sys.stdin.read()
if mode == "dropped":
    sys.stdout.write("accepted\\n"); sys.stdout.flush()
    sys.stderr.write("Connection to build-2 closed by remote host.\\r\\n")
    sys.exit(255)
if mode == "delivered":
    sys.stdout.write("accepted\\n" + '{{"result": "delivered", "reason": ""}}' + "\\n")
    sys.exit(0)
if mode.startswith("version:"):
    sys.stdout.write(mode.partition(":")[2] + "\\n")
    sys.exit(0)
if mode == "missing":
    sys.stderr.write("sh: 1: fabrikito: not found\\n")
    sys.exit(127)
if mode in ("slow", "silent"):
    if mode == "slow":
        sys.stdout.write("accepted\\n"); sys.stdout.flush()
    import time; time.sleep(10)
if mode == "log":
    sys.stdout.write(os.environ["FAKE_SSH_LOG"])
    sys.exit(0)
sys.exit(3)
"""


def _team(tmp_path: Path, text: str = TEAM) -> teamfile.Team:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "team.toml"
    path.write_text(text, encoding="utf-8")
    return teamfile.load(path)


@pytest.fixture
def fake_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "ssh"
    script.write_text(FAKE_SSH.format(python=sys.executable), encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    calls = tmp_path / "calls"
    calls.write_text("")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SSH_CALLS", str(calls))
    monkeypatch.delenv(ssh.CONFIG_VARIABLE, raising=False)
    # a deep tmp_path's control socket (and its lock) in the test's own folder, not the machine's short one
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    return calls


# -- the team file ----------------------------------------------------------------------------------------


def test_a_seat_names_its_host_and_the_team_its_origin(tmp_path: Path) -> None:
    team = _team(tmp_path)
    assert team.origin == "laptop"
    assert [s.host for s in team.seats] == [None, "build-2"]
    assert team.seat("api") is not None and str(team.seat("api").cwd) == "/srv/api"  # type: ignore[union-attr]


@pytest.mark.parametrize("value", ["-oProxyCommand=x", "two words", "a\nb", ""])
def test_a_host_that_is_not_an_ssh_destination_is_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(TeamFileError, match=r"'host'|non-empty"):
        _team(tmp_path, f'name = "t"\n[[seat]]\nrole = "api"\nsession = "t-api"\nhost = {json.dumps(value)}\n')


def test_where_each_seat_runs_seen_from_the_origin_and_from_its_host(tmp_path: Path) -> None:
    team = _team(tmp_path)
    assert hosts.here_of(team) is None
    assert [s.role for s in hosts.local_team(team, None).seats] == ["em"]
    assert {d: [s.role for s in seats] for d, seats in hosts.elsewhere(team, None).items()} == {"build-2": ["api"]}
    hosts.mark_here(team, "build-2", origin_team="/home/me/team.toml", origin_command="/usr/bin/fabrikito")
    assert hosts.here_of(team) == "build-2"
    assert {d: [s.role for s in seats] for d, seats in hosts.elsewhere(team, "build-2").items()} == {"laptop": ["em"]}
    em = team.seat("em")
    assert em is not None
    assert hosts.command_for(team, em) == ("/home/me/team.toml", "/usr/bin/fabrikito")
    assert stat.S_IMODE(os.stat(hosts.here_path(team)).st_mode) == 0o600


def test_from_a_host_the_origin_needs_its_name(tmp_path: Path) -> None:
    team = _team(tmp_path, TEAM.replace('origin = "laptop"\n', ""))
    em = team.seat("em")
    assert em is not None
    with pytest.raises(Exception, match="set origin in the team file"):
        hosts.dest_of(team, em, "build-2")


def test_the_roster_marks_seats_on_another_host(tmp_path: Path) -> None:
    team = _team(tmp_path)
    em, api = team.seats
    mine = seatfiles.roster_section(team, em)
    assert "| api | t-api | claude | another host (build-2): use say |" in mine
    assert "| em | t-em | claude | this machine |" in mine
    assert "SendMessage cannot reach them" in mine
    theirs = seatfiles.roster_section(team, api)
    assert "| em | t-em | claude | another host (the team machine): use say |" in theirs
    plain = _team(tmp_path, TEAM.replace('host = "build-2"\n', ""))
    assert "another host" not in seatfiles.roster_section(plain, plain.seats[0])


# -- ssh's failures ------------------------------------------------------------------------------------------


CHANGED = (
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n"
    "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\n"
    "Host key for [127.0.0.1]:33595 has changed and you have requested strict checking.\r\n"
    "Host key verification failed.\r\n"
)


@pytest.mark.parametrize(
    ("stderr", "problem", "advice"),
    [
        (CHANGED, Problem.HOST_KEY_CHANGED, "ssh-keygen -R 'build-2'"),
        (
            "No ED25519 host key is known for [127.0.0.1]:1 and you have requested strict checking.\r\n"
            "Host key verification failed.\r\n",
            Problem.HOST_KEY_UNKNOWN,
            "Connect once by hand (`ssh build-2`)",
        ),
        ("fkremote@127.0.0.1: Permission denied (publickey).\r\n", Problem.LOGIN_REFUSED, "set up key login"),
        ("ssh: connect to host 127.0.0.1 port 1: Connection refused\r\n", Problem.UNREACHABLE, "cannot be reached"),
        ("ssh: Could not resolve hostname build-2: Name or service not known\r\n", Problem.UNREACHABLE, "reached"),
    ],
)
def test_ssh_failures_name_the_host_the_problem_and_what_to_do(stderr: str, problem: Problem, advice: str) -> None:
    error = ssh.classify("build-2", stderr, 255)
    assert error.problem is problem
    assert error.message.startswith("host build-2: ") and advice in error.message
    assert "@@@" not in error.message and "\r" not in error.message
    assert error.exit_code == 1


def test_the_control_socket_is_under_the_team_state_or_short_enough(tmp_path: Path) -> None:
    near = ssh.Host("build-2", Path("/srv/team/.state/t/ssh"))
    assert os.path.dirname(near.control_path) == "/srv/team/.state/t/ssh"
    deep = ssh.Host("build-2", tmp_path / ("d" * 120) / ".state" / "t" / "ssh")
    assert len(deep.control_path.encode()) <= ssh.SOCKET_ROOM
    options = near.options()
    for option in ("BatchMode=yes", "StrictHostKeyChecking=yes", f"ConnectTimeout={ssh.CONNECT_TIMEOUT}"):
        assert option in options


def test_a_connection_whose_lock_is_a_link_is_refused_and_nothing_is_written_through_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))  # where a deep tmp_path's socket goes instead
    control = tmp_path / ".state" / "t" / "ssh"
    control.mkdir(parents=True, mode=0o700)
    for folder in (tmp_path / ".state", tmp_path / ".state" / "t"):
        folder.chmod(0o700)
    host = ssh.Host("build-2", control)
    socket_folder = os.path.dirname(host.control_path)  # the team's ssh folder, or the short one when deep
    os.makedirs(socket_folder, mode=0o700, exist_ok=True)
    target = tmp_path / "elsewhere"
    os.symlink(target, host.control_path + ".lock")
    with pytest.raises(HostError) as found:
        host.connect(timeout=2.0)
    assert found.value.problem is Problem.UNREACHABLE
    assert f"host build-2: its lock in {socket_folder} cannot be opened" in str(found.value)
    assert not target.exists()  # no file made at the link's end


# -- the route's answers, and what a host trusts ------------------------------------------------------------


def test_the_answer_of_the_hosts_engine_becomes_a_delivery() -> None:
    ok = route._read_answer("api", "b", 0, b'accepted\n{"result": "delivered", "reason": ""}\n', "")
    assert ok.result is Result.DELIVERED
    box = route._read_answer("api", "b", 3, b'accepted\n{"result": "refused", "reason": "box", "waitable": 1}\n', "")
    assert (box.result, box.reason, box.waitable) == (Result.REFUSED, "on b: box", True)
    missing = route._read_answer("api", "b", 127, b"", "sh: 1: fabrikito: not found")
    assert missing.result is Result.REFUSED and "fabrikito is not installed there" in missing.reason
    assert "uv tool install fabrikito==" in missing.reason
    cut = route._read_answer("api", "b", 1, b"accepted\n", "")
    assert cut.result is Result.UNKNOWN and "Do not send it again" in cut.reason


def test_a_host_takes_a_routed_sender_only_vouched_for_by_its_machine_over_ssh_and_not_from_a_seat(
    tmp_path: Path,
) -> None:
    from fabrikito.team import routekeys

    origin = _team(tmp_path / "origin")
    host = _team(tmp_path / "host")  # the host's copy
    hosts.mark_here(host, "build-2", origin_team=str(origin.path), origin_command="fabrikito")
    routekeys.add_peers(host, {"origin": routekeys.digest(routekeys.secret(origin))})
    over_ssh = {"SSH_CONNECTION": "127.0.0.1 5 127.0.0.1 22"}
    vouched = ("origin", routekeys.secret(origin))
    route.check_routed(host, "em", "build-2", vouched, over_ssh)  # a seat of the team's machine
    route.check_routed(host, "owner", "build-2", vouched, over_ssh)
    with pytest.raises(route.NotTrusted, match="never from a seat"):
        route.check_routed(host, "em", "build-2", vouched, {**over_ssh, "TEAM_ROLE": "api"})
    with pytest.raises(route.NotTrusted, match="over ssh"):
        route.check_routed(host, "em", "build-2", vouched, {})
    with pytest.raises(route.NotTrusted, match="not a seat of origin"):
        route.check_routed(host, "api", "build-2", vouched, over_ssh)  # api runs here: it would be a forgery
    with pytest.raises(route.NotTrusted, match="not a seat of origin"):
        route.check_routed(host, "launcher", "build-2", vouched, over_ssh)
    # A seat on the host knows only its own machine's secret: it cannot pass for the team's machine.
    for forged in [("origin", routekeys.secret(host)), ("build-2", routekeys.secret(host)), None]:
        with pytest.raises(route.NotTrusted, match="not vouched for"):
            route.check_routed(host, "em", "build-2", forged, over_ssh)
    assert stat.S_IMODE(os.stat(host.state_dir / routekeys.SECRET_FILE).st_mode) == 0o600
    assert route.read_voucher(route.voucher(origin, None) + b"the message\nline two") == (
        vouched,
        b"the message\nline two",
    )
    assert route.read_voucher(b"no voucher")[0] is None


# -- say, status and log through a stand-in ssh --------------------------------------------------------------


def _say(team: teamfile.Team, target: str, text: str) -> tuple[int, list[str], list[str]]:
    out: list[str] = []
    err: list[str] = []
    code = say.run_say(
        team, team.server(), target, text, env_role="em", caller_pid=os.getpid(), out=out.append, err=err.append
    )
    return code, out, err


def _lines(team: teamfile.Team) -> list[list[str]]:
    return [line.split("\t")[1:] for line in team.log_path.read_text(encoding="utf-8").splitlines()]


def test_a_connection_dropped_after_the_host_accepted_is_not_known_never_resent(
    tmp_path: Path, fake_ssh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = _team(tmp_path)
    monkeypatch.setenv("FAKE_SSH", "dropped")
    code, out, err = _say(team, "api", "ship it")
    assert code == engine.EXIT_TYPED
    assert out == [] and len(err) == 1
    assert err[0].startswith("not known whether api got it: host build-2: the connection dropped")
    assert "finishes on its own" in err[0] and "Do not send it again" in err[0]
    assert _lines(team) == [["em", "api", "NOT-DELIVERED", "ship it"]]
    commands = [c for c in fake_ssh.read_text().splitlines() if "-N" not in c.split()]
    assert len(commands) == 1  # one attempt: never typed twice
    assert "_host say t --sender em api" in commands[0]


def test_an_unknown_host_key_refuses_at_once_with_nothing_typed(
    tmp_path: Path, fake_ssh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = _team(tmp_path)
    monkeypatch.setenv("FAKE_SSH", "unknown-key")
    code, _, err = _say(team, "api", "ship it")
    assert code == engine.EXIT_REFUSED
    assert err == [
        "not sent to api: host build-2: its host key is not in known_hosts. Connect once by hand (`ssh build-2`), "
        "check the key's fingerprint and accept it, then try again; fabrikito never accepts a host key itself "
        "(ssh: No ED25519 host key is known for build-2 and you have requested strict checking.; Host key "
        "verification failed.). Nothing was typed; deal with the seat and send again."
    ]
    assert _lines(team) == [["em", "api", "NOT-DELIVERED", "ship it"]]
    assert [c for c in fake_ssh.read_text().splitlines() if "-N" not in c.split()] == []  # no command ran


def test_say_to_a_seat_on_another_host_needs_no_tmux_server_here(
    tmp_path: Path, fake_ssh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = _team(tmp_path)
    monkeypatch.setenv("FAKE_SSH", "delivered")
    assert _say(team, "api", "ship it") == (0, ["delivered to api"], [])
    assert _lines(team) == [["em", "api", "delivered", "ship it"]]
    code = say.run_say(
        team,
        team.server(),
        "api",
        "x",
        env_role="em",
        caller_pid=os.getpid(),
        out=lambda _: None,
        err=lambda _: None,
        expire=60.0,
    )
    assert code == engine.EXIT_REFUSED  # --queue does not reach another host yet, and says so


def test_status_shows_an_unreachable_host_with_sshs_reason(
    tmp_path: Path, fake_ssh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fabrikito.launch import multihost

    team = _team(tmp_path)
    monkeypatch.setenv("FAKE_SSH", "unknown-key")
    found = multihost.collect(team)
    api = next(s for s in found.seats if s.role == "api")
    assert (api.state, api.host) == (status.SeatState.UNREACHABLE, "build-2")
    assert api.detail.startswith("unknown host key: No ED25519 host key is known for build-2")
    table = status.render(found)
    assert table.split("\n")[1].split()[:3] == ["ROLE", "HOST", "SESSION"]
    assert "unreachable (unknown host key" in table
    assert status.to_json(found)["seats"][0]["host"] is None


def test_log_merges_every_hosts_lines_by_time(tmp_path: Path, fake_ssh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    team = _team(tmp_path)
    line = msglog.format_line
    mine = [line(100.0, "launcher", "em", msglog.Outcome.DELIVERED, "a"), line(300.0, "em", "api", "delivered", "c")]
    theirs = line(200.0, "launcher", "api", msglog.Outcome.DELIVERED, "b") + line(400.0, "api", "em", "sent", "d")
    monkeypatch.setenv("FAKE_SSH", "log")
    monkeypatch.setenv("FAKE_SSH_LOG", theirs.decode())
    local = [(n, msglog.parse_line(raw)) for n, raw in enumerate(mine, start=1)]
    merged, problems = hostlogs.merged(team, local)
    assert problems == []
    assert [(w, it.message) for _, it, w in merged if isinstance(it, msglog.Record)] == [
        (None, b"a"),
        ("build-2", b"b"),
        (None, b"c"),
        ("build-2", b"d"),
    ]
    monkeypatch.setenv("FAKE_SSH", "unknown-key")
    merged, problems = hostlogs.merged(team, local)
    assert len(merged) == 2 and problems[0].startswith("host build-2: its log could not be read: host build-2: its")


def test_host_error_reason_is_one_line_for_a_status_row() -> None:
    error = HostError("b", Problem.UNREACHABLE, "it cannot be reached", detail="Connection refused")
    assert error.reason == "unreachable: Connection refused"


def test_up_wants_the_same_release_on_every_host_and_says_how_to_install_it(
    tmp_path: Path, fake_ssh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fabrikito import __version__
    from fabrikito.launch import multihost

    team = _team(tmp_path)
    monkeypatch.setenv("FAKE_SSH", f"version:fabrikito {__version__}")
    multihost.check_version(team, "build-2")
    monkeypatch.setenv("FAKE_SSH", "version:fabrikito 0.0.1")
    with pytest.raises(HostError, match=r"it runs 'fabrikito 0.0.1', and this machine fabrikito") as other:
        multihost.check_version(team, "build-2")
    assert f"uv tool install fabrikito=={__version__}" in other.value.message
    monkeypatch.setenv("FAKE_SSH", "missing")
    with pytest.raises(HostError, match="fabrikito is not installed there") as missing:
        multihost.check_version(team, "build-2")
    assert missing.value.problem is Problem.NOT_INSTALLED and "fabrikito: not found" in missing.value.message


def test_a_host_refuses_a_team_name_that_is_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fabrikito.base.errors import UsageError
    from fabrikito.launch import hostside

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with pytest.raises(UsageError, match="not a team name"):
        hostside.put("../../escape", "build-2", b'{"team_toml": "", "origin_team": "/t", "origin_command": "f"}')
    with pytest.raises(UsageError, match="never brought up on this host"):
        hostside.load_here("t")


@pytest.mark.parametrize(("mode", "result"), [("slow", Result.UNKNOWN), ("silent", Result.REFUSED)])
def test_a_host_past_the_deadline_is_not_known_once_it_accepted_else_refused(
    tmp_path: Path, fake_ssh: Path, monkeypatch: pytest.MonkeyPatch, mode: str, result: Result
) -> None:
    team = _team(tmp_path)
    monkeypatch.setenv("FAKE_SSH", mode)
    monkeypatch.setattr(route, "SAY_TIMEOUT", 1.0)
    api = team.seat("api")
    assert api is not None
    delivery = route.deliver_remote(team, api, "em", "ship it", None)
    assert delivery.result is result
    assert "did not answer within 1 s" in delivery.reason


def test_check_warns_when_the_hosts_cannot_reach_this_machine_and_not_of_root_on_a_host(tmp_path: Path) -> None:
    from fabrikito.team import check

    bypass = TEAM.replace('cwd = "/srv/api"\n', 'cwd = "/srv/api"\npermission_mode = "bypassPermissions"\n')
    with_origin = check.run(_team(tmp_path, bypass), env={}, is_root=True)
    assert [w.kind for w in with_origin.warnings if w.kind in ("no-origin", "bypass-as-root", "missing-cwd")] == []
    without = check.run(_team(tmp_path, bypass.replace('origin = "laptop"\n', "")), env={}, is_root=True)
    (warning,) = [w for w in without.warnings if w.kind == "no-origin"]
    assert warning.roles == ("api",) and "set origin in the team file" in warning.message


# -- nothing on its word between machines ----------------------------------------------------------------


def test_the_owner_is_taken_only_from_the_machine_the_owner_runs_on(tmp_path: Path) -> None:
    from fabrikito.team import routekeys

    origin = _team(tmp_path / "origin")
    host = _team(tmp_path / "host")
    hosts.mark_here(host, "build-2", origin_team=str(origin.path), origin_command="fabrikito")
    routekeys.add_peers(origin, {"build-2": routekeys.digest(routekeys.secret(host))})
    over_ssh = {"SSH_CONNECTION": "127.0.0.1 5 127.0.0.1 22"}
    from_host = ("build-2", routekeys.secret(host))  # the host's own secret: a seat there can read it
    route.check_routed(origin, "api", None, from_host, over_ssh)  # api runs on build-2: taken
    with pytest.raises(route.NotTrusted, match="'owner' speaks only from the team's own machine"):
        route.check_routed(origin, "owner", None, from_host, over_ssh)
    with pytest.raises(route.NotTrusted, match="'em' is not a seat of build-2"):
        route.check_routed(origin, "em", None, from_host, over_ssh)


@pytest.mark.parametrize(
    ("here", "sender", "refused"),
    [
        (None, "em", None),
        (None, "owner", None),
        (None, "api", "api is a seat of host build-2, and this is the team's own machine"),
        ("build-2", "api", None),
        ("build-2", "em", "em is a seat of the team's own machine, and this is host build-2"),
        ("build-2", "owner", "the owner speaks from the team's own machine"),
        ("build-2", "live-test", None),
    ],
)
def test_a_sender_speaks_only_from_the_machine_it_runs_on(
    tmp_path: Path, here: str | None, sender: str, refused: str | None
) -> None:
    from fabrikito.delivery import identity

    team = _team(tmp_path)
    if refused is None:
        assert identity.check_machine(team, sender, here) == sender
    else:
        with pytest.raises(identity.IdentityRefused, match=refused):
            identity.check_machine(team, sender, here)


def test_say_on_a_host_with_another_machines_team_role_is_refused_and_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = _team(tmp_path)
    hosts.mark_here(team, "build-2", origin_team="/origin/team.toml", origin_command="fabrikito")
    out: list[str] = []
    err: list[str] = []
    code = say.run_say(
        team, team.server(), "api", "as em", env_role="em", caller_pid=os.getpid(), out=out.append, err=err.append
    )
    assert code == engine.EXIT_REFUSED, err
    assert "em is a seat of the team's own machine, and this is host build-2" in err[0]
    assert _lines(team) == [["em", "api", "NOT-DELIVERED", "as em"]]


def test_every_seat_of_a_team_across_machines_is_told_not_to_read_its_routing_secret(tmp_path: Path) -> None:
    from fabrikito.team import routekeys

    team = _team(tmp_path)
    secret = str(team.state_dir / routekeys.SECRET_FILE)
    for role in ("em", "api"):
        seat = team.seat(role)
        assert seat is not None
        assert f"Read(/{secret})" in seatfiles.seat_settings(team, seat)["permissions"]["deny"]
    plain = _team(tmp_path / "plain", 'name = "p"\n[[seat]]\nrole = "em"\nsession = "p-em"\n')
    assert "deny" not in seatfiles.seat_settings(plain, plain.seats[0])["permissions"]  # no secret on one machine


ROUTED = (
    'PATH="$HOME/.local/bin:$PATH" LANG="${LANG:-C.UTF-8}" /opt/fabrikito/bin/fabrikito '
    "_host say /home/o/acme/team.toml --sender api em"
)


@pytest.mark.parametrize(
    "asked",
    [
        "tmux -L acme send-keys -t acme-em hello Enter",
        "id",
        'PATH="$HOME/.local/bin:$PATH" LANG="${LANG:-C.UTF-8}" fabrikito _host up acme',
        'PATH="$HOME/.local/bin:$PATH" LANG="${LANG:-C.UTF-8}" fabrikito _host log acme',
        ROUTED + "; rm -rf ~",
        ROUTED + " extra",
        ROUTED.replace("--sender api", "--sender=api"),
        ROUTED.replace("PATH=", "XPATH="),
        "fabrikito _host say /home/o/acme/team.toml --sender api em",  # not as fabrikito sends it
        'PATH="$HOME/.local/bin:$PATH" LANG="${LANG:-C.UTF-8}" _host say t --sender api em',  # no program
        "",
    ],
)
def test_the_gate_runs_only_a_routed_say_or_flush_as_fabrikito_sends_it(asked: str) -> None:
    from fabrikito.launch import routelogin

    assert routelogin.routed_args(asked) is None
    assert routelogin.routed_args(ROUTED) == ["say", "/home/o/acme/team.toml", "--sender", "api", "em"]
    assert routelogin.routed_args(ROUTED.replace("_host say", "_host flush"))[0] == "flush"  # type: ignore[index]


def test_the_gate_refuses_and_notes_a_shell_a_command_and_a_login(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fabrikito.launch import routelogin

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    peer = {"SSH_CONNECTION": "10.0.0.9 5 10.0.0.1 22"}
    assert routelogin.gate({**peer, "SSH_ORIGINAL_COMMAND": "tmux -L acme send-keys x Enter"}) == 3
    assert routelogin.gate(peer) == 3  # a login shell: no command at all
    err = capsys.readouterr().err
    assert err.count("this login runs only fabrikito's routed say and flush") == 2
    log = (tmp_path / "state" / "fabrikito" / routelogin.GATE_LOG).read_text(encoding="utf-8").splitlines()
    assert [line.split("\t")[1:] for line in log] == [
        ["10.0.0.9", "refused 'tmux -L acme send-keys x Enter'"],
        ["10.0.0.9", "refused a login shell"],
    ]
    assert stat.S_IMODE(os.stat(tmp_path / "state" / "fabrikito" / routelogin.GATE_LOG).st_mode) == 0o600


def test_the_gate_hands_a_routed_say_to_the_host_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run as sshd runs it: ``fabrikito _host gate`` with the route's command in SSH_ORIGINAL_COMMAND; the host's
    side then refuses the unvouched sender, as it would without the gate, and logs it."""
    import subprocess

    team = _team(tmp_path)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"),
        "SSH_CONNECTION": "10.0.0.9 5 10.0.0.1 22",
        "SSH_ORIGINAL_COMMAND": ROUTED.replace("/home/o/acme/team.toml", str(team.path)),
    }
    done = subprocess.run(
        [sys.executable, "-m", "fabrikito", "_host", "gate"],
        input=b'{"machine": "build-2", "secret": "0"}\nhello',
        capture_output=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith(b"accepted\n") and b"not vouched for" in done.stdout
    assert _lines(team) == [["api", "em", "NOT-DELIVERED", "hello"]]
    log = (tmp_path / "state" / "fabrikito" / "gate.log").read_text(encoding="utf-8")
    assert f"ran _host say {team.path} --sender api em" in log


KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAhsUqtu30UotgOgzJGxo6S0lV8Sz2+LdQ32Ej8Q/acy api@build-2"


def test_authorize_host_prints_and_installs_the_restricted_line_once(tmp_path: Path) -> None:
    from fabrikito.base.errors import UsageError
    from fabrikito.launch import routelogin

    line = routelogin.authorized_line(KEY + "\n")
    assert line.startswith('command="') and line.endswith(f'",restrict {KEY}')
    assert line.split('"')[1].endswith(" _host gate") and seatfiles.say_command() in line
    keys = tmp_path / ".ssh" / "authorized_keys"
    keys.parent.mkdir(mode=0o700)
    keys.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherKeyOtherKeyOtherKeyOtherKeyOtherKey1 laptop\n")
    assert "added to" in (routelogin.install(keys, line) or "")
    assert "has this key already" in (routelogin.install(keys, line) or "")
    assert keys.read_text().splitlines()[1] == line and len(keys.read_text().splitlines()) == 2
    assert stat.S_IMODE(os.stat(keys).st_mode) == 0o600
    plain = tmp_path / "plain_keys"
    plain.write_text(KEY + "\n")  # the key is there already, unrestricted: a shell; left to the owner to remove
    assert routelogin.install(plain, line) is None
    for bad in ["", "not a key", "ssh-ed25519 !!!", f"{KEY}\n{KEY}", f'command="x" {KEY}']:
        with pytest.raises(UsageError, match="not one OpenSSH public key"):
            routelogin.authorized_line(bad)


def test_authorize_host_on_the_command_line(tmp_path: Path) -> None:
    import subprocess

    pub = tmp_path / "build2.pub"
    pub.write_text(KEY + "\n")
    keys = tmp_path / "authorized_keys"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    cmd = [sys.executable, "-m", "fabrikito", "authorize-host"]
    printed = subprocess.run([*cmd, str(pub)], capture_output=True, text=True, env=env, check=False)
    assert printed.returncode == 0 and printed.stdout.strip().endswith(f",restrict {KEY}"), printed.stderr
    assert not keys.exists()
    installed = subprocess.run(
        [*cmd, "--install", "--file", str(keys), "-"], input=KEY, capture_output=True, text=True, env=env, check=False
    )
    assert installed.returncode == 0 and keys.read_text().strip() == printed.stdout.strip(), installed.stderr
    keys.write_text(KEY + "\n")
    refused = subprocess.run(
        [*cmd, "--install", "--file", str(keys), str(pub)], capture_output=True, text=True, env=env, check=False
    )
    assert refused.returncode == 2 and "without the restriction: remove that line first" in refused.stderr


def test_down_ends_the_connections_of_this_machine_and_asks_each_host_to_end_its_own(
    tmp_path: Path, fake_ssh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = _team(tmp_path)
    assert hosts.destinations(team, None) == ["build-2"]
    assert hosts.destinations(team, "build-2") == ["laptop"]
    from fabrikito.launch import multihost

    monkeypatch.setenv("FAKE_SSH", "delivered")
    lines: list[str] = []
    multihost.run_down(team, None, out=lines.append)
    calls = fake_ssh.read_text()
    assert "_host down t --close api" in calls, calls
    multihost.run_down(team, ["api"], out=lines.append)
    assert fake_ssh.read_text().count("--close") == 1  # one seat down: the connections stay
