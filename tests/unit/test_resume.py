"""Conversation records, what ``up`` plans for each seat, the start lock, and the auto-restart policy."""

from __future__ import annotations

import json
import os
import stat
import time
import uuid
from pathlib import Path

import pytest

from fabrikito.base.errors import TeamFileError
from fabrikito.base.values import replace
from fabrikito.launch import autorestart, resume, seatevents, seatfiles, status
from fabrikito.launch.autorestart import AutoRestart, Seen
from fabrikito.log import events
from fabrikito.team import teamfile
from fabrikito.team.teamfile import Seat, Team


def make_team(tmp_path: Path, extra: str = "", seat_extra: str = "") -> Team:
    base = tmp_path / "proj"
    (base / "work" / "api").mkdir(parents=True, exist_ok=True)
    (base / "work" / "web").mkdir(parents=True, exist_ok=True)
    home = tmp_path / "home"
    text = (
        f'name = "acme"\ntmux_socket = "acme-resume-test"\nkickoff = "Start."\n{extra}\n'
        f'[[seat]]\nrole = "api"\nsession = "acme-api"\ncwd = "work/api"\nenv = {{ HOME = "{home}" }}\n{seat_extra}\n'
        f'[[seat]]\nrole = "web"\nsession = "acme-web"\ncwd = "work/web"\nenv = {{ HOME = "{home}" }}\n'
    )
    (base / "team.toml").write_text(text, encoding="utf-8")
    return teamfile.load(base / "team.toml")


def seat(team: Team, role: str) -> Seat:
    found = team.seat(role)
    assert found is not None
    return found


def transcript(team: Team, s: Seat, conversation: str, *, folder: Path | None = None, name: str | None = None) -> Path:
    """A Claude Code transcript as 2.1.316 writes its first lines (measured)."""
    where = folder or s.cwd
    project = Path(s.env["HOME"], ".claude", "projects", str(where).replace("/", "-"))
    project.mkdir(parents=True, exist_ok=True)
    path = project / f"{conversation}.jsonl"
    lines = [
        {"type": "custom-title", "customTitle": name or s.session, "sessionId": conversation},
        {"type": "agent-name", "agentName": name or s.session, "sessionId": conversation},
        {"type": "user", "message": {"role": "user", "content": "hi"}, "cwd": str(where), "sessionId": conversation},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def ran(team: Team, role: str) -> resume.Plan:
    """A seat up started fresh (its record written as up writes it), with a transcript of its conversation."""
    s = seat(team, role)
    plan = resume.plan(team, s, resume=None)
    resume.started(team, s, plan)
    transcript(team, s, plan.id)
    return plan


# -- plans ------------------------------------------------------------------------------------


def test_a_first_start_is_fresh_with_an_id_fixed_in_advance(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    plan = resume.plan(team, seat(team, "api"), resume=None)
    assert plan.mode == resume.FRESH and plan.note == ""
    assert resume.UUID_RE.match(plan.id)
    assert plan.agent_args("claude") == ["--session-id", plan.id]
    argv = seatfiles.seat_command(team, seat(team, "api"), plan.agent_args("claude"))
    assert argv[-2:] == ["--session-id", plan.id]


def test_the_record_is_0600_and_names_its_seat(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    plan = ran(team, "api")
    path = resume.record_path(team, "api")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    data = json.loads(path.read_text())
    assert (data["team"], data["role"], data["folder"], data["agent"]) == (
        "acme",
        "api",
        str(team.base_dir / "work" / "api"),
        "claude",
    )
    assert (data["id"], data["state"], data["restarts"]) == (plan.id, "running", 0)


def test_a_seat_gone_without_down_resumes_on_plain_up_and_counts_the_restart(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    first = ran(team, "api")
    again = resume.plan(team, seat(team, "api"), resume=None)
    assert (again.mode, again.id, again.restarts, again.note) == (resume.RESUME, first.id, 1, "")
    assert again.agent_args("claude") == ["--resume", first.id]
    resume.started(team, seat(team, "api"), again)
    record, _ = resume.read_record(team, "api")
    assert record is not None and record.restarts == 1 and record.restarted > 0 and record.id == first.id


def test_a_seat_stopped_by_down_starts_fresh_on_plain_up_and_resumes_on_up_resume(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    first = ran(team, "api")
    resume.mark(team, "api", resume.STOPPED)
    plain = resume.plan(team, seat(team, "api"), resume=None)
    assert plain.mode == resume.FRESH and plain.id != first.id and plain.note == ""
    asked = resume.plan(team, seat(team, "api"), resume=True)
    assert asked.mode == resume.RESUME and asked.id == first.id


@pytest.mark.parametrize("damage", ["", "{", '{"version": 1, "team": "acme"}', '{"version": 9}', "[]", "\x00\xff"])
def test_a_half_written_record_starts_fresh_and_says_so(tmp_path: Path, damage: str) -> None:
    team = make_team(tmp_path)
    ran(team, "api")
    resume.record_path(team, "api").write_bytes(damage.encode("latin-1"))
    plan = resume.plan(team, seat(team, "api"), resume=True)
    assert plan.mode == resume.FRESH
    assert "damaged or half-written" in plan.note and "started fresh" in plan.note


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [("role", "web", "role 'web'"), ("folder", "/elsewhere", "folder '/elsewhere'"), ("team", "other", "team 'other'")],
)
def test_a_record_edited_to_name_another_seat_is_refused(tmp_path: Path, field: str, value: str, said: str) -> None:
    team = make_team(tmp_path)
    ran(team, "api")
    path = resume.record_path(team, "api")
    data = json.loads(path.read_text())
    data[field] = value
    path.write_text(json.dumps(data))
    plan = resume.plan(team, seat(team, "api"), resume=True)
    assert plan.mode == resume.FRESH and "names another seat" in plan.note and said in plan.note


def test_a_record_of_a_seat_no_longer_in_the_team_file_is_named_and_left(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    ran(team, "api")
    gone = resume.record_path(team, "api").with_name("ops.json")
    gone.write_bytes(resume.record_path(team, "api").read_bytes())
    (said,) = resume.orphans(team)
    assert said.startswith("ops: no such seat in the team file any more") and str(gone) in said
    assert gone.exists()


def test_a_record_pointed_at_another_seats_conversation_is_refused(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    ran(team, "api")
    theirs = ran(team, "web")
    path = resume.record_path(team, "api")
    data = json.loads(path.read_text())
    data["id"] = theirs.id
    path.write_text(json.dumps(data))
    plan = resume.plan(team, seat(team, "api"), resume=True)
    assert plan.mode == resume.FRESH and plan.id != theirs.id
    assert "recorded for seat web too" in plan.note
    # Even with web's record gone, Claude Code's transcript says where that conversation was held.
    resume.record_path(team, "web").unlink()
    plan = resume.plan(team, seat(team, "api"), resume=True)
    assert plan.mode == resume.FRESH and "was held in" in plan.note and "refused" in plan.note


def test_a_transcript_under_another_session_name_is_refused(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    first = ran(team, "api")
    transcript(team, seat(team, "api"), first.id, name="acme-web")
    plan = resume.plan(team, seat(team, "api"), resume=True)
    assert plan.mode == resume.FRESH and "belongs to session 'acme-web'" in plan.note


def test_a_conversation_killed_before_its_first_turn_was_kept_starts_fresh(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    first = ran(team, "api")
    path = transcript(team, seat(team, "api"), first.id)
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:2]))  # the title lines only
    plan = resume.plan(team, seat(team, "api"), resume=True)
    assert plan.mode == resume.FRESH and "holds no turn yet" in plan.note


def test_a_conversation_claude_code_no_longer_holds_starts_fresh(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    first = ran(team, "api")
    for found in Path(seat(team, "api").env["HOME"]).rglob(f"{first.id}.jsonl"):
        found.unlink()
    plan = resume.plan(team, seat(team, "api"), resume=True)
    assert plan.mode == resume.FRESH and "holds no conversation" in plan.note and plan.id != first.id


def test_another_release_starts_fresh(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    s = seat(team, "api")
    record = resume.Conversation("acme", "api", str(s.cwd), "claude", "2.1.316", str(uuid.uuid4()), 1.0, 0, "running")
    resume.write_record(team, record)
    transcript(team, s, record.id)
    refused = resume.refusal(team, s, record, "2.1.332")
    assert refused == "its conversation was held by Claude Code 2.1.316, and the seat now runs 2.1.332"
    assert resume.refusal(team, s, record, "2.1.316") == ""
    assert resume.refusal(team, s, replace(record, id="not-an-id"), "2.1.316").startswith(
        "its conversation record holds"
    )


def codex_rollout(s: Seat, conversation: str, *, folder: Path | None = None, at: float | None = None) -> Path:
    """A Codex CLI 0.171.0 rollout's first line (measured): its session_meta."""
    import datetime

    when = datetime.datetime.fromtimestamp(time.time() if at is None else at, datetime.UTC)
    day = Path(s.env["HOME"], ".codex", "sessions", when.strftime("%Y/%m/%d"))
    day.mkdir(parents=True, exist_ok=True)
    path = day / f"rollout-{when.strftime('%Y-%m-%dT%H-%M-%S')}-{conversation}.jsonl"
    meta = {"id": conversation, "cwd": str(folder or s.cwd), "timestamp": when.isoformat().replace("+00:00", "Z")}
    path.write_text(json.dumps({"type": "session_meta", "payload": meta}) + "\n", encoding="utf-8")
    return path


def gemini_chat(s: Seat, conversation: str, *, folder: Path | None = None, turn: bool = True) -> Path:
    """A Gemini CLI 0.61.0 chat file (measured): a header with the session id, then the turns."""
    project = Path(s.env["HOME"], ".gemini", "tmp", s.cwd.name)
    (project / "chats").mkdir(parents=True, exist_ok=True)
    (project / ".project_root").write_text(str(folder or s.cwd), encoding="utf-8")
    path = project / "chats" / f"session-2026-12-03T06-17-{conversation[:8]}.jsonl"
    lines: list[dict[str, object]] = [{"sessionId": conversation, "kind": "main"}]
    if turn:
        lines.append({"id": "x", "type": "user", "content": [{"text": "hi"}]})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_codex_seat_has_its_id_read_from_its_session_files_and_resumes_with_the_subcommand(
    tmp_path: Path,
) -> None:
    team = make_team(tmp_path, seat_extra='agent = "codex"\n')
    s = seat(team, "api")
    plan = resume.plan(team, s, resume=None)
    assert plan.id == "" and plan.agent_args("codex") == []  # Codex picks its own id
    resume.started(team, s, plan)
    # Nothing written yet (killed before its first turn): fresh, and says why.
    again = resume.plan(team, s, resume=True)
    assert again.mode == resume.FRESH and "Codex CLI holds no conversation begun in" in again.note, again.note
    conversation = str(uuid.uuid4())
    codex_rollout(s, str(uuid.uuid4()), folder=tmp_path)  # another folder's: never taken
    codex_rollout(s, str(uuid.uuid4()), at=time.time() - 3600)  # older than the seat: never taken
    codex_rollout(s, conversation)
    assert resume.await_id(team, s, timeout=0) == (conversation, "")
    record, _ = resume.read_record(team, "api")
    assert record is not None and record.id == conversation
    back = resume.plan(team, s, resume=True)
    assert (back.mode, back.id, back.note) == (resume.RESUME, conversation, "")
    argv = seatfiles.seat_command(team, s, back.agent_args("codex"))
    assert argv[-2:] == ["resume", conversation]


def test_a_codex_conversation_held_in_another_folder_or_gone_is_refused(tmp_path: Path) -> None:
    team = make_team(tmp_path, seat_extra='agent = "codex"\n')
    s = seat(team, "api")
    conversation = str(uuid.uuid4())
    record = resume.Conversation("acme", "api", str(s.cwd), "codex", "", conversation, time.time(), 0, "running")
    resume.write_record(team, record)
    gone = resume.plan(team, s, resume=True)
    assert gone.mode == resume.FRESH and f"Codex CLI holds no conversation {conversation}" in gone.note
    codex_rollout(s, conversation, folder=tmp_path)
    moved = resume.plan(team, s, resume=True)
    assert moved.mode == resume.FRESH and f"was held in {tmp_path}, not {s.cwd}: refused" in moved.note


def test_a_gemini_seat_fixes_its_id_and_resumes_it_only_with_a_turn_kept_in_its_folder(tmp_path: Path) -> None:
    team = make_team(tmp_path, seat_extra='agent = "gemini"\n')
    s = seat(team, "api")
    plan = resume.plan(team, s, resume=None)
    assert resume.UUID_RE.match(plan.id) and plan.agent_args("gemini") == ["--session-id", plan.id]
    assert seatfiles.seat_command(team, s, plan.agent_args("gemini"))[-2:] == ["--session-id", plan.id]
    resume.started(team, s, plan)
    assert "Gemini CLI holds no conversation" in resume.plan(team, s, resume=True).note
    gemini_chat(s, plan.id, turn=False)  # written at start: no turn yet
    assert "with a turn" in resume.plan(team, s, resume=True).note
    gemini_chat(s, plan.id, folder=tmp_path)
    assert f"was held in {tmp_path}" in resume.plan(team, s, resume=True).note
    gemini_chat(s, plan.id)
    back = resume.plan(team, s, resume=True)
    assert (back.mode, back.note) == (resume.RESUME, "") and back.agent_args("gemini") == ["--resume", plan.id]


def test_the_registry_naming_another_id_is_recorded_and_said(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    first = ran(team, "api")
    assert resume.confirm_id(team, "api", first.id) == ""
    other = str(uuid.uuid4())
    assert other in resume.confirm_id(team, "api", other)
    record, _ = resume.read_record(team, "api")
    assert record is not None and record.id == other


def test_status_shows_the_conversation_and_its_restarts(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    first = ran(team, "api")
    resume.started(team, seat(team, "api"), resume.plan(team, seat(team, "api"), resume=True))
    assert status.conversation_records(team) == {"api": (first.id, 1)}
    assert status.conversation_cell(first.id, 1) == f"{first.id[:8]} (1 restart)"
    assert status.conversation_cell(None, 0) == "-"


def test_the_restart_notice_says_when() -> None:
    notice = resume.restart_notice(1796245200.0)
    assert "restarted at 2026-12-02 21:00:00 UTC" in notice and "re-read" in notice
    assert "[from" not in notice  # say labels it


# -- one up at a time ------------------------------------------------------------------------


def test_a_second_start_while_one_holds_the_team_says_it_is_starting(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    held = resume.starting(team)
    held.__enter__()
    with pytest.raises(resume.TeamStarting, match="team acme is starting"), resume.starting(team):
        pass
    held.__exit__(None, None, None)
    with resume.starting(team):  # released
        pass


# -- the team file ------------------------------------------------------------------------------


def test_restart_policy_per_team_and_seat(tmp_path: Path) -> None:
    team = make_team(tmp_path, extra='restart = "on-exit"', seat_extra='restart = "no"\n')
    assert team.restart_for(seat(team, "api")) == "no"
    assert team.restart_for(seat(team, "web")) == "on-exit"
    assert autorestart.wanted(team)
    with pytest.raises(TeamFileError, match="'restart' must be one of 'no', 'on-exit', not 'always'"):
        make_team(tmp_path, extra='restart = "always"')


@pytest.mark.parametrize("arg", ["--resume", "--session-id=x", "--continue", "-c", "-r", "--fork-session"])
def test_args_may_not_choose_the_conversation(tmp_path: Path, arg: str) -> None:
    with pytest.raises(TeamFileError, match="chooses the seat's conversation itself"):
        make_team(tmp_path, seat_extra=f'args = ["{arg}"]\n')


# -- events -----------------------------------------------------------------------------------------


def test_an_event_is_one_json_line_in_a_0600_file(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    assert seatevents.emit(team, "api", "exited", "its agent exited", since=5.0, now=7.0) == ""
    assert seatevents.emit(team, "web", "restarted", "restart 1") == ""
    path = seatevents.events_path(team)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first, second = path.read_text().splitlines()
    assert json.loads(first) == {  # the watcher's line (fabrikito.log.events): `events` shows it beside its own
        "time": events.local_time(7.0),
        "seat": "api",
        "kind": "exited",
        "event": "noted",
        "detail": "its agent exited",
        "since": events.local_time(5.0),
        "key": "api:exited:7.000",
        "at": 7.0,
        "since_at": 5.0,
    }
    assert events.open_items(events.read(path)) == {}  # nothing left open by a restart's events
    assert json.loads(second)["seat"] == "web"
    link = tmp_path / "elsewhere"
    path.unlink()
    os.symlink(link, path)
    assert "could not be written" in seatevents.emit(team, "api", "exited", "x")
    assert not link.exists()


# -- the auto-restart policy ------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, float]] = []
        self.starts: list[tuple[float, list[str]]] = []
        self.now = 0.0

    def emit(self, team: Team, seat: str, kind: str, detail: str, since: float) -> None:
        del team
        self.events.append((seat, kind, detail, since))

    def start(self, team: Team, roles: list[str]) -> dict[str, str]:
        del team
        self.starts.append((self.now, roles))
        return {r: "its agent exited at start" for r in roles}


def policy(tmp_path: Path) -> tuple[Team, AutoRestart, Recorder]:
    team = make_team(tmp_path, extra='restart = "on-exit"', seat_extra="")
    for role in ("api", "web"):
        s = seat(team, role)
        resume.started(team, s, resume.plan(team, s, resume=None))
    rec = Recorder()
    return team, AutoRestart(team, rec.start, rec.emit), rec


def run_rounds(auto: AutoRestart, rec: Recorder, seen: dict[str, Seen], until: float, step: float = 0.5) -> None:
    while rec.now < until:
        auto.round(seen, rec.now)
        rec.now += step


def test_a_seat_that_keeps_exiting_is_restarted_with_a_doubling_back_off_then_capped(tmp_path: Path) -> None:
    _, auto, rec = policy(tmp_path)
    run_rounds(auto, rec, {"api": Seen.EXITED, "web": Seen.ALIVE}, until=200.0)
    times = [t for t, roles in rec.starts]
    assert all(roles == ["api"] for _, roles in rec.starts)
    assert len(times) == autorestart.CAP
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    assert gaps == [1.0, 2.0, 4.0, 8.0, 16.0]
    kinds = [k for _, k, _, _ in rec.events]
    assert kinds.count("restarted") == autorestart.CAP and kinds[-1] == "restart-capped"
    starting = [since for _, k, _, since in rec.events if k == "restarting"]
    assert starting == times  # each restart's event at the moment it was decided: the back-off shows in them
    assert "restarted 5 times within 10 minutes: left down" in rec.events[-1][2]


def test_never_a_seat_stopped_on_purpose_nor_one_alive(tmp_path: Path) -> None:
    team, auto, rec = policy(tmp_path)
    resume.mark(team, "api", resume.STOPPED)
    run_rounds(auto, rec, {"api": Seen.GONE, "web": Seen.ALIVE}, until=30.0)
    assert rec.starts == [] and rec.events == []


def test_a_seat_without_the_policy_or_unseen_is_left_alone(tmp_path: Path) -> None:
    team = make_team(tmp_path, extra="")
    s = seat(team, "api")
    resume.started(team, s, resume.plan(team, s, resume=None))
    rec = Recorder()
    auto = AutoRestart(team, rec.start, rec.emit)
    run_rounds(auto, rec, {"api": Seen.EXITED}, until=10.0)
    assert rec.starts == []
    _, auto, rec = policy(tmp_path / "b")
    run_rounds(auto, rec, {"api": Seen.UNKNOWN, "web": Seen.UNKNOWN}, until=10.0)
    assert rec.starts == []


def test_a_start_held_by_another_up_is_tried_next_round(tmp_path: Path) -> None:
    _team, auto, rec = policy(tmp_path)
    calls: list[float] = []

    def busy(t: Team, roles: list[str]) -> dict[str, str]:
        calls.append(rec.now)
        if len(calls) == 1:
            raise resume.TeamStarting("team acme is starting")
        return {}

    auto.start = busy
    run_rounds(auto, rec, {"api": Seen.GONE, "web": Seen.ALIVE}, until=3.0)
    assert calls[:2] == [1.0, 1.5]
    assert [k for _, k, _, _ in rec.events][:4] == ["exited", "restarting", "restarting", "restarted"]


def test_a_pane_left_with_an_idle_shell_is_restarted_after_the_grace_rounds_with_the_same_back_off(
    tmp_path: Path,
) -> None:
    _, auto, rec = policy(tmp_path)
    flicker = [Seen.SHELL] * (autorestart.GRACE_ROUNDS - 1) + [Seen.ALIVE]  # a momentary reading: never a restart
    for look in flicker * 4:
        auto.round({"api": look, "web": Seen.ALIVE}, rec.now)
        rec.now += 0.5
    assert rec.starts == [] and rec.events == []
    start = rec.now
    run_rounds(auto, rec, {"api": Seen.SHELL, "web": Seen.ALIVE}, until=start + 200.0)
    times = [t for t, _ in rec.starts]
    assert len(times) == autorestart.CAP  # the same cap as an exited seat's
    seen_at = start + 0.5 * (autorestart.GRACE_ROUNDS - 1)  # the round that made it a shell for long enough
    gaps = [b - a for a, b in zip([seen_at, *times], times, strict=False)]
    assert gaps == [1.0, 2.0, 4.0, 8.0, 16.0]
    first = rec.events[0]
    assert first[1] == "exited" and first[2].startswith("its agent left a shell: restart in 1s")
    assert rec.events[-1][1] == "restart-capped"


def test_a_pane_where_another_program_runs_is_never_restarted_and_told_once(tmp_path: Path) -> None:
    team, auto, rec = policy(tmp_path)
    # A wrapper running its last commands (stty sane) before its shell's prompt: a moment, not told.
    for look in [Seen.OCCUPIED] * (autorestart.GRACE_ROUNDS - 1) + [Seen.ALIVE]:
        auto.round({"api": look, "web": Seen.ALIVE}, rec.now)
        rec.now += 0.5
    assert rec.events == []
    run_rounds(auto, rec, {"api": Seen.OCCUPIED, "web": Seen.ALIVE}, until=30.0)
    assert rec.starts == []
    assert [(s, k) for s, k, _, _ in rec.events] == [("api", "not-restarted")]
    assert "`fabrikito up --resume api`" in rec.events[0][2]
    run_rounds(auto, rec, {"api": Seen.ALIVE, "web": Seen.ALIVE}, until=31.0)
    run_rounds(auto, rec, {"api": Seen.OCCUPIED, "web": Seen.ALIVE}, until=33.0)
    assert [k for _, k, _, _ in rec.events] == ["not-restarted", "not-restarted"]  # once per time it happens
    resume.mark(team, "web", resume.STOPPED)
    run_rounds(auto, rec, {"api": Seen.ALIVE, "web": Seen.OCCUPIED}, until=40.0)
    assert len(rec.events) == 2  # a seat stopped on purpose is not ours to tell of
