"""A mixed team with the real binaries, offline: Claude Code, Codex CLI and Gemini CLI seats started by
``up``, reached by ``say``, and ended by ``down`` with no process left behind.

Codex CLI and Gemini CLI are installed into ``.tools/`` by the tests themselves (the pinned releases of
:mod:`fabrikito.offline.other_setup`); Claude Code is the live tier's pinned release.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests import userenv

from fabrikito.base import procs
from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.base.tmuxcontrol import CONTROL_SESSION
from fabrikito.cli import serverctl
from fabrikito.delivery import seatpane
from fabrikito.launch import lifecycle, seatfiles, teardown
from fabrikito.offline import api_gemini, api_openai, claude_setup, demo_mixed, other_setup, seatkit
from fabrikito.offline.replies import Reply
from fabrikito.offline.seatkit import wait_until
from fabrikito.offline.standin import StandIn
from fabrikito.team import teamfile
from fabrikito.team.teamfile import Team

from .teamkit import fabrikito

pytestmark = pytest.mark.live

MESSAGE = 'line one, "quoted" ~!@#$%^&*()\n\n    indented line three\nlast line'
#: Long enough for each agent to show its paste as a placeholder ([Pasted Content N chars], [Pasted Text: N lines]).
LONG = "\n".join(f"line {i:02d} of a long report: " + "x" * 60 for i in range(40)) + "\nlast line"


class Mixed:
    """A mixed team (em, cx, gm) on a private tmux server against one stand-in, brought up by ``up``."""

    def __init__(self, root: Path, *, unattended: bool) -> None:
        self.root = root
        self.standin = StandIn().start()
        self.server = Server(socket_name=f"fab-mix-{secrets.token_hex(4)}", timeout=10.0)
        subprocess.run(["git", "init", "-q", str(root)], check=True)  # a repository: Codex asks for trust there
        for role in ("em", "cx", "gm"):
            (root / "work" / role).mkdir(parents=True, exist_ok=True)
        (root / "roles").mkdir(exist_ok=True)
        (root / "roles" / "common.md").write_text("# The team's rules (shared prompt)\n", encoding="utf-8")
        claude = claude_setup.ensure_claude(env=userenv.tooling_env())
        self.setups = demo_mixed.seat_setups(
            root, self.standin.url, seatfiles.say_command(), lambda line: None, unattended=unattended
        )
        path = root / "team.toml"
        path.write_text(
            demo_mixed.team_text(claude=claude, seats=self.setups, socket=str(self.server.socket_name)),
            encoding="utf-8",
        )
        self.team: Team = teamfile.load(path)
        self.lines: list[str] = []
        self.pane_pids: dict[str, int] = {}

    def up(self) -> lifecycle.UpResult:
        result = lifecycle.up(self.team, out=self.lines.append, server=self.server)
        for row in seatpane.list_panes(self.server):
            seat = self.team.seat_by_session(row.session)
            if seat is not None:
                self.pane_pids[seat.role] = row.pane_pid
        return result

    def pane(self, role: str) -> str:
        seat = self.team.seat(role)
        assert seat is not None
        return f"={seat.session}:"

    def screen(self, role: str) -> str:
        return self.server.capture(self.pane(role))

    def left_behind(self) -> list[int]:
        """Every process any seat started that still runs (by session, and by the seats' HOMEs)."""
        found = {p.pid for pid in self.pane_pids.values() for p in procs.session_members(pid)}
        for role in ("cx", "gm"):
            found |= set(other_setup.pids_with_home(Path(self.setups[role][1]["HOME"])))
        return sorted(found)

    def close(self) -> None:
        try:
            teardown.down(self.team, out=self.lines.append, server=self.server, grace=3.0)
        finally:
            try:
                self.server.kill_server()
            except TmuxError:
                pass
            self.standin.stop()


@pytest.fixture
def mixed(tmp_path: Path) -> Iterator[Mixed]:
    team = Mixed(tmp_path, unattended=False)
    yield team
    team.close()
    left = team.left_behind()
    seatkit.stop_pids(left)  # never leave them running, even when the assertion below fails
    assert not left, f"processes left behind by the seats: {left}"


def test_up_starts_codex_and_gemini_unattended_and_down_leaves_no_process(mixed: Mixed) -> None:
    result = mixed.up()
    assert not result.failed, "\n".join(mixed.lines)
    # Each kickoff arrived, labelled, as a turn; each prompt reached its agent the way it reads it.
    cx = mixed.standin.wait_for_request("cx", "[from launcher] " + demo_mixed.KICKOFF)
    assert "You are not Claude Code: you have no SendMessage tool" in json.dumps(cx.body)
    gm = mixed.standin.wait_for_request("gm", "[from launcher] " + demo_mixed.KICKOFF)
    assert "You are not Claude Code: you have no SendMessage tool" in json.dumps(gm.body)
    assert "Trust this folder" not in mixed.screen("cx")
    before = mixed.left_behind()
    assert len(before) >= 3
    lines: list[str] = []
    assert teardown.down(mixed.team, out=lines.append, server=mixed.server) == 0, lines
    assert mixed.left_behind() == []


@pytest.mark.parametrize("text", [MESSAGE, LONG], ids=["short", "placeholder"])
@pytest.mark.parametrize("role", ["cx", "gm"])
def test_say_delivers_labelled_intact_as_one_turn(mixed: Mixed, role: str, text: str) -> None:
    assert not mixed.up().failed, "\n".join(mixed.lines)
    mixed.standin.wait_for_request(role, "[from launcher]")
    wait_until(lambda: _idle(mixed, role), 30, describe=lambda: mixed.screen(role), what="the seat idle")
    mark = mixed.standin.mark()
    done = fabrikito("say", role, team=mixed.team.path, stdin=text)
    assert done.returncode == 0, done.stderr
    request = mixed.standin.wait_for_request(role, "last line", since=mark)
    assert request.last_user_text.endswith("[from live-test] " + text), request.last_user_text
    turns = [r for r in mixed.standin.main_requests(role) if r.index >= mark]
    assert len(turns) == 1, [r.last_user_text for r in turns]


def test_a_claude_seats_sendmessage_reaches_a_codex_seat_through_its_inbox(mixed: Mixed) -> None:
    """``up`` gives cx an inbox registered where em looks: em's SendMessage to cx's session name is queued,
    typed into cx labelled ``[from em]`` as one turn, and logged delivered; ``down`` takes the inbox's
    registry away.  (cx answering with ``say`` from its shell: the demo's test.)"""
    result = mixed.up()
    assert not result.failed, "\n".join(mixed.lines)
    assert any(line.startswith("cx: inbox listening as mixed-cx") for line in mixed.lines), mixed.lines
    mixed.standin.wait_for_request("cx", "[from launcher]")
    mixed.standin.wait_for_request("em", "[from launcher]")
    wait_until(lambda: _idle(mixed, "cx"), 30, describe=lambda: mixed.screen("cx"), what="cx idle")
    text = "the schema is ready for review"
    send = Reply(tool="SendMessage", input={"to": "mixed-cx", "message": text}, then=Reply(text="sent"))
    mixed.standin.on("tell cx", send, seat="em")
    mark = mixed.standin.mark()
    assert fabrikito("say", "em", team=mixed.team.path, stdin="please tell cx").returncode == 0
    outcome = mixed.standin.wait_for_tool_result("em", "SendMessage", 60)
    assert "error" not in json.dumps(outcome.json()).lower()[:200], outcome.json()
    request = mixed.standin.wait_for_request("cx", text, since=mark, timeout=60)
    assert request.last_user_text.endswith("[from em] " + text), request.last_user_text
    turns = [r for r in mixed.standin.main_requests("cx") if r.index >= mark and text in r.last_user_text]
    assert len(turns) == 1
    assert demo_mixed.wait_delivered(mixed.team, "em", "cx", text, timeout=10)
    registry = [p for p in Path(mixed.setups["em"][1]["HOME"], ".claude", "sessions").glob("*.json")]
    inbox_entries = [p for p in registry if "fabrikitoInbox" in p.read_text(encoding="utf-8")]
    assert sorted(json.loads(p.read_text(encoding="utf-8"))["name"] for p in inbox_entries) == ["mixed-cx", "mixed-gm"]
    lines: list[str] = []
    assert teardown.down(mixed.team, out=lines.append, server=mixed.server) == 0, lines
    assert not [p for p in inbox_entries if p.exists()]


@pytest.mark.parametrize("role", ["cx", "gm"])
def test_a_busy_seat_gets_no_key_and_a_queued_message_arrives_as_its_own_turn(mixed: Mixed, role: str) -> None:
    assert not mixed.up().failed, "\n".join(mixed.lines)
    mixed.standin.wait_for_request(role, "[from launcher]")
    wait_until(lambda: _idle(mixed, role), 30, describe=lambda: mixed.screen(role), what="the seat idle")
    mixed.standin.on("take your time", Reply(text="done taking my time", delay=8.0), seat=role)
    assert fabrikito("say", role, team=mixed.team.path, stdin="please take your time").returncode == 0
    wait_until(lambda: _busy(mixed, role), 10, describe=lambda: mixed.screen(role), what="the seat busy")
    mark = mixed.standin.mark()
    refused = fabrikito("say", role, team=mixed.team.path, stdin="are you there?")
    assert refused.returncode == 3, refused.stderr
    assert "busy with a turn" in refused.stderr
    assert "are you there?" not in mixed.screen(role)  # nothing typed into the busy seat
    queued = fabrikito("say", "--queue", role, team=mixed.team.path, stdin="a queued question")
    assert queued.returncode == 0 and "queued" in queued.stdout, queued.stderr
    # No request went out during the slow turn (an Enter would have been a mid-turn correction).
    assert not [r for r in mixed.standin.main_requests(role) if r.index >= mark and "are you" in r.last_user_text]
    wait_until(lambda: "done taking my time" in mixed.screen(role), 30, what="the slow reply")
    request = mixed.standin.wait_for_request(role, "a queued question", since=mark, timeout=60)
    assert request.last_user_text.endswith("[from live-test] a queued question")
    assert "take your time" not in request.last_user_text.rpartition("a queued question")[0][-200:]


@pytest.mark.parametrize("role", ["cx", "gm"])
def test_a_dialog_gets_no_key(mixed: Mixed, role: str) -> None:
    assert not mixed.up().failed, "\n".join(mixed.lines)
    mixed.standin.wait_for_request(role, "[from launcher]")
    wait_until(lambda: _idle(mixed, role), 30, describe=lambda: mixed.screen(role), what="the seat idle")
    made = Path(mixed.team.seat(role).cwd) / "made.txt"  # type: ignore[union-attr]
    call = (
        api_openai.shell_reply("touch made.txt", then=Reply(text="made"))
        if role == "cx"
        else api_gemini.shell_reply("touch made.txt", then=Reply(text="made"))
    )
    question = "Would you like to run" if role == "cx" else "Allow execution of"
    mixed.standin.on("make the file", call, seat=role)
    assert fabrikito("say", role, team=mixed.team.path, stdin="please make the file").returncode == 0
    wait_until(lambda: question in mixed.screen(role), 30, describe=lambda: mixed.screen(role), what="the dialog")
    before = mixed.screen(role)
    refused = fabrikito("say", role, team=mixed.team.path, stdin="y")
    assert refused.returncode == 3, refused.stderr
    queued = fabrikito("say", "--queue", role, team=mixed.team.path, stdin="yes, go on")
    assert queued.returncode == 0 and "queued" in queued.stdout
    wait_until(lambda: question in mixed.screen(role), 3, what="the dialog still open")
    assert not made.exists() and mixed.screen(role).count(question) == before.count(question)
    assert not mixed.standin.tool_results(role)  # nothing answered it


def test_demo_mixed_messages_go_round_all_three_and_stop_leaves_nothing(tmp_path: Path) -> None:
    """``fabrikito demo --mixed``: em's Bash tool says to cx, cx's shell tool answers em and says to gm, gm's
    shell tool says to em; each delivered, labelled, on the receiver's screen."""
    socket = f"fab-demo-mix-{secrets.token_hex(3)}"
    lines: list[str] = []
    directory = tmp_path / "demo"
    from fabrikito.offline import demo

    try:
        # As `fabrikito demo --mixed` runs it: with the command server, whose control session is among the rows.
        demo_mixed.run(directory, out=lines.append, socket=socket, helpers=[serverctl.UP_HELPER])
        team = teamfile.load(directory / "team.toml")
        for sender, recipient, text in demo_mixed.FLOW:
            assert demo_mixed.wait_delivered(team, sender, recipient, text, timeout=5), "\n".join(lines)
        rows = seatpane.list_panes(team.server())
        pane_pids = [r.pane_pid for r in rows]  # the command server's control session's too: it must end
        assert sorted(r.session for r in rows) == sorted([*(s.session for s in team.seats), CONTROL_SESSION])
    finally:
        demo.stop(directory, out=lines.append, stop_helpers=[serverctl.stop])
    assert not [p for pid in pane_pids for p in procs.session_members(pid)], "\n".join(lines)
    for role in ("cx", "gm"):  # Gemini's relaunching parent outlives its pane unless down ends it
        assert not other_setup.pids_with_home(directory / f"home-{role}"), "\n".join(lines)


def _idle(mixed: Mixed, role: str) -> bool:
    return _reading(mixed, role) == "idle"


def _busy(mixed: Mixed, role: str) -> bool:
    return _reading(mixed, role) == "busy"


def _reading(mixed: Mixed, role: str) -> str:
    from fabrikito.launch import status

    for seat in status.collect(mixed.team, server=mixed.server).seats:
        if seat.role == role:
            return str(seat.state.value)
    return ""
