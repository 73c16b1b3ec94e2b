"""A Codex CLI or Gemini CLI seat that comes back with its own conversation, offline, with the real binaries.

A seat of the mixed team (em: Claude Code, cx: Codex CLI, gm: Gemini CLI) has two turns (its kickoff and a
message from the owner); its agent is SIGKILLed; ``up --resume`` starts it again on its own conversation
(Codex CLI: ``codex … resume <id>``, the id read from its session files; Gemini CLI: ``--resume <id>``, the
id fixed with ``--session-id`` at start), and the stand-in's next request for it carries both earlier turns.
The other seats are not touched.  What was measured: docs/decisions/0035-resume-codex-gemini.md.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from fabrikito.launch import resume, seatevents
from fabrikito.offline import demo_mixed, other_setup
from fabrikito.offline.seatkit import wait_until

from .teamkit import fabrikito
from .test_mixed_live import Mixed
from .test_mixed_live import mixed as mixed  # noqa: PLC0414 the fixture, used by name
from .test_resume_live import seat_json

pytestmark = pytest.mark.live

SECOND = "second turn: remember the word pelican"
NOTICE = "[from launcher] You were restarted at"


def two_turns(mixed: Mixed, role: str) -> None:
    mixed.standin.wait_for_request(role, f"[from launcher] {demo_mixed.KICKOFF}", 60)
    wait_until(lambda: seat_json(mixed.team.path, role)["state"] == "idle", 60, what=f"{role} idle")
    done = fabrikito("say", role, SECOND, team=mixed.team.path, role=None, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    mixed.standin.wait_for_request(role, SECOND, 60)
    wait_until(lambda: seat_json(mixed.team.path, role)["state"] == "idle", 60, what=f"{role} idle again")


@pytest.mark.parametrize("role", ["cx", "gm"])
def test_a_killed_seat_comes_back_on_its_own_conversation_and_the_others_are_untouched(mixed: Mixed, role: str) -> None:
    result = mixed.up()
    assert not result.failed, "\n".join(mixed.lines)
    two_turns(mixed, role)
    conversation = seat_json(mixed.team.path, role)["conversation"]
    assert isinstance(conversation, str) and resume.UUID_RE.match(conversation), conversation
    if role == "cx":  # read from Codex's own session files after its first turn
        assert f"{role}: its conversation is {conversation}" in "\n".join(mixed.lines), mixed.lines
    others = {r: seat_json(mixed.team.path, r) for r in ("em", "cx", "gm") if r != role}

    home = Path(mixed.setups[role][1]["HOME"])
    for pid in other_setup.pids_with_home(home):
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: seat_json(mixed.team.path, role)["state"] in ("exited", "down"), 30, what=f"{role} seen exited")
    mark = mixed.standin.mark()
    done = fabrikito("up", "--resume", team=mixed.team.path, role=None, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{role}: resuming its conversation {conversation} (restart 1)" in done.stdout, done.stdout
    assert "restart notice delivered" in done.stdout, done.stdout
    for other in others:
        assert f"{other}: already up" in done.stdout, done.stdout

    request = mixed.standin.wait_for_request(role, NOTICE, 90, since=mark)
    said = json.dumps(request.body)
    assert demo_mixed.KICKOFF in said and SECOND in said, said[:3000]  # the conversation resumed, not begun again
    assert demo_mixed.KICKOFF not in request.last_user_text  # no kickoff again
    after = seat_json(mixed.team.path, role)
    assert (after["conversation"], after["restarts"]) == (conversation, 1)
    for other, before in others.items():
        now = seat_json(mixed.team.path, other)
        assert (now["pane"], now["pid"]) == (before["pane"], before["pid"])
        assert not [r for r in mixed.standin.main_requests(other) if r.index >= mark]
    events = [e["kind"] for e in seatevents.read(mixed.team) if e["seat"] == role]
    assert events == ["resumed"], events


def test_a_codex_seat_killed_before_its_first_turn_starts_fresh_and_says_so(mixed: Mixed) -> None:
    """No kickoff: Codex writes no session file before a turn, so there is nothing to resume."""
    text = mixed.team.path.read_text(encoding="utf-8").replace(f"kickoff = {json.dumps(demo_mixed.KICKOFF)}\n", "")
    mixed.team.path.write_text(text, encoding="utf-8")
    from fabrikito.team import teamfile

    mixed.team = teamfile.load(mixed.team.path)
    assert mixed.team.kickoff_for(mixed.team.seat("cx")) is None  # type: ignore[arg-type]
    assert not mixed.up().failed, "\n".join(mixed.lines)
    assert seat_json(mixed.team.path, "cx")["conversation"] in (None, "", "-")
    for pid in other_setup.pids_with_home(Path(mixed.setups["cx"][1]["HOME"])):
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: seat_json(mixed.team.path, "cx")["state"] in ("exited", "down"), 30, what="cx seen exited")
    done = fabrikito("up", "--resume", "cx", team=mixed.team.path, role=None, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cx: Codex CLI holds no conversation begun in" in done.stdout and "started fresh" in done.stdout
    events = [e for e in seatevents.read(mixed.team) if e["seat"] == "cx"]
    assert [e["kind"] for e in events] == ["fresh-start"], events
