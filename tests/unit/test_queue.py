"""The queue's files and the delivery worker, against a stand-in for the seats (no tmux).

The crash test kills a real worker loop (a forked process) with SIGKILL at
random points, at least 50 times, and checks that nothing is lost and nothing
is pasted twice.
"""

from __future__ import annotations

import os
import random
import signal
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fabrikito.base.errors import UsageError
from fabrikito.delivery import engine, queue, queueview, say, seatlock, worker, workerstate
from fabrikito.delivery.queue import State
from fabrikito.log import msglog
from fabrikito.team import teamfile

ROLES = ("dev", "qa", "em")


def _team(tmp_path: Path) -> teamfile.Team:
    path = tmp_path / "team.toml"
    path.write_text(
        f'name = "t"\ntmux_socket = "fab-none-{os.urandom(4).hex()}"\n'
        + "".join(f'[[seat]]\nrole = "{r}"\nsession = "t-{r}"\n' for r in ROLES),
        encoding="utf-8",
    )
    return teamfile.load(path)


def _records(team: teamfile.Team) -> list[msglog.Record]:
    if not team.log_path.exists():
        return []
    found = []
    for line in team.log_path.read_bytes().splitlines(keepends=True):
        rec = msglog.parse_line(line)
        assert isinstance(rec, msglog.Record), rec
        found.append(rec)
    return found


@dataclass
class FakeSeats:
    """Seats that take every message: a paste line, then an Enter line, in one file per seat."""

    team: teamfile.Team
    ready: Callable[[str], str] = lambda role: ""
    pause: float = 0.0
    looks: list[list[str]] = field(default_factory=list)

    def team_running(self) -> bool:
        return True

    def look(self, roles: list[str]) -> dict[str, str]:
        self.looks.append(list(roles))
        return {r: self.ready(r) for r in roles}

    def deliver(self, role: str, sender: str, text: str, on_paste: Callable[[], None]) -> engine.Delivery:
        try:
            on_paste()
        except seatlock.SeatRefusal as exc:
            return engine.Delivery(role, engine.Result.REFUSED, str(exc))
        seat = self.team.base_dir / f"seat-{role}"
        _append(seat, f"P {text}\n")
        time.sleep(self.pause)
        _append(seat, f"E {text}\n")
        time.sleep(self.pause)
        return engine.Delivery(role, engine.Result.DELIVERED)


def _append(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _seat_lines(team: teamfile.Team, role: str) -> list[str]:
    path = team.base_dir / f"seat-{role}"
    return path.read_text().splitlines() if path.exists() else []


# -- the files ------------------------------------------------------------------------


def test_a_queued_message_is_a_private_file_written_whole(tmp_path: Path) -> None:
    team = _team(tmp_path)
    msg = queue.enqueue(team, "dev", "owner", "hello", expire=60, reason="the input box holds text")
    assert msg.id.startswith("dev-")
    assert stat.S_IMODE(os.stat(queue.queue_dir(team)).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(queue.seat_dir(team, "dev")).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(msg.path).st_mode) == 0o600
    assert [n for n in os.listdir(queue.seat_dir(team, "dev")) if n.endswith(".tmp")] == []
    again = queue.read(msg.path, team, "dev")
    assert again == msg


def test_the_51st_message_to_a_seat_is_refused(tmp_path: Path) -> None:
    team = _team(tmp_path)
    for i in range(queue.MAX_WAITING):
        queue.enqueue(team, "dev", "owner", f"m{i}", expire=60, reason="busy")
    with pytest.raises(queue.QueueFull, match="50 messages waiting"):
        queue.enqueue(team, "dev", "owner", "one too many", expire=60, reason="busy")
    queue.enqueue(team, "qa", "owner", "another seat still queues", expire=60, reason="busy")


def test_each_seat_is_first_in_first_out_even_when_the_clock_stands_still(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = _team(tmp_path)
    monkeypatch.setattr(time, "time_ns", lambda: 1_000_000_000_000_000_000)
    ids = [queue.enqueue(team, "dev", "owner", f"m{i}", expire=60, reason="busy").id for i in range(5)]
    assert [m.id for m in queue.scan(team).waiting("dev")] == ids


def test_expire_durations() -> None:
    assert queue.parse_duration("90s") == 90
    assert queue.parse_duration("30m") == 1800
    assert queue.parse_duration("1h30m") == 5400
    assert queue.parse_duration("24h") == 86400
    assert queue.parse_duration("45") == 45
    for bad in ("", "0", "25h", "1d", "soon", "-5m"):
        with pytest.raises(UsageError):
            queue.parse_duration(bad)


# -- the worker -------------------------------------------------------------------------


def test_the_worker_delivers_in_order_logs_how_long_each_waited_and_removes_the_file(tmp_path: Path) -> None:
    team = _team(tmp_path)
    for i in range(3):
        queue.enqueue(team, "dev", "qa", f"m{i}", expire=60, reason="box")
    seats = FakeSeats(team)
    w = worker.Worker(team, seats)
    assert w.round() == {"dev": "the seat is taking the message before"}  # one a round: each its own turn
    assert w.round() == {"dev": "the seat is taking the message before"}
    assert w.round() == {}
    assert _seat_lines(team, "dev") == ["P m0", "E m0", "P m1", "E m1", "P m2", "E m2"]
    delivered = [r for r in _records(team) if r.outcome == "delivered"]
    assert [r.message.split(b"] ", 1)[1] for r in delivered] == [b"m0", b"m1", b"m2"]
    assert all(b", waited " in r.message for r in delivered)
    assert queue.scan(team).messages.get("dev") == []
    assert seats.looks == [["dev"]] * 3  # one look a round for every waiting seat


def test_a_worker_with_nothing_queued_ends_when_its_team_is_gone(tmp_path: Path) -> None:
    team = _team(tmp_path)  # its tmux socket does not exist
    rounds: list[float] = []

    def stop(timeout: float) -> bool:
        rounds.append(timeout)
        return len(rounds) > 3

    worker.serve(worker.Worker(team, worker.TmuxSeats(team)), stop=stop)
    assert rounds == []  # nothing queued, no server: it ended after its first round
    queue.enqueue(team, "dev", "qa", "for later", expire=60, reason="down")
    worker.serve(worker.Worker(team, worker.TmuxSeats(team)), stop=stop)
    assert rounds == [worker.BUSY_POLL] * 4  # a message waits: it stays until told to stop


def test_a_seat_that_is_not_ready_keeps_its_messages_and_says_why(tmp_path: Path) -> None:
    team = _team(tmp_path)
    queue.enqueue(team, "dev", "qa", "wait for me", expire=60, reason="box")
    queue.enqueue(team, "qa", "dev", "go now", expire=60, reason="box")
    w = worker.Worker(team, FakeSeats(team, ready=lambda r: "the input box holds text" if r == "dev" else ""))
    for _ in range(3):
        assert w.round() == {"dev": "the input box holds text"}
    assert _seat_lines(team, "dev") == []
    assert _seat_lines(team, "qa") == ["P go now", "E go now"]
    assert [m.text for m in queue.scan(team).waiting("dev")] == ["wait for me"]


def test_an_expired_message_is_logged_and_noticed_and_never_typed(tmp_path: Path) -> None:
    team = _team(tmp_path)
    msg = queue.enqueue(team, "dev", "qa", "too late", expire=0.05, reason="box")
    time.sleep(0.1)
    w = worker.Worker(team, FakeSeats(team))
    w.round()
    assert _seat_lines(team, "dev") == []
    assert [r.outcome for r in _records(team)] == ["EXPIRED"]
    view = queueview.collect(team)
    assert any(msg.id in n and "expired" in n for n in view.notices)
    queue.drop(team, msg.id, by="owner")
    assert queueview.collect(team).notices == ()
    assert [r.outcome for r in _records(team)] == ["EXPIRED", "DROPPED"]
    assert b"dropped by owner, was expired" in _records(team)[-1].message


def test_drop_removes_a_waiting_message_and_logs_it(tmp_path: Path) -> None:
    team = _team(tmp_path)
    msg = queue.enqueue(team, "dev", "qa", "never mind", expire=60, reason="box")
    queue.drop(team, msg.id, by="owner")
    worker.Worker(team, FakeSeats(team)).round()
    assert _seat_lines(team, "dev") == []
    assert [r.outcome for r in _records(team)] == ["DROPPED"]
    with pytest.raises(UsageError, match="no message"):
        queue.drop(team, msg.id, by="owner")
    with pytest.raises(UsageError, match="not a queued message"):
        queue.drop(team, "../../etc", by="owner")


def test_a_message_being_typed_cannot_be_dropped(tmp_path: Path) -> None:
    team = _team(tmp_path)
    msg = queue.claim(team, queue.enqueue(team, "dev", "qa", "typing", expire=60, reason="box"))
    with pytest.raises(Exception, match="being typed"):
        queue.drop(team, msg.id, by="owner")


def test_damaged_and_foreign_files_are_set_aside_and_the_rest_delivered(tmp_path: Path) -> None:
    team = _team(tmp_path)
    good = queue.enqueue(team, "dev", "qa", "still goes", expire=60, reason="box")
    d = queue.seat_dir(team, "dev")
    (d / "0000000000000000001-deadbeef.json").write_bytes(b"{not json")
    (d / "notes.txt").write_text("foreign")
    os.symlink("/etc/passwd", d / "0000000000000000002-cafebabe.json")
    os.mkdir(queue.queue_dir(team) / "nosuchrole")
    w = worker.Worker(team, FakeSeats(team))
    w.round()
    assert _seat_lines(team, "dev") == ["P still goes", "E still goes"]
    aside = sorted(os.listdir(queue.aside_dir(team)))
    assert len(aside) == 4
    assert os.path.islink(queue.aside_dir(team) / next(n for n in aside if "cafebabe" in n))  # moved, not followed
    outcomes = [r.outcome for r in _records(team)]
    assert outcomes.count("SET-ASIDE") == 4 and outcomes.count("delivered") == 1
    assert any("set aside" in n for n in queueview.collect(team).notices)
    del good


def test_a_queue_directory_that_is_a_link_is_set_aside_not_followed(tmp_path: Path) -> None:
    team = _team(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "dev").mkdir(parents=True)
    team.state_dir.mkdir(parents=True)
    os.symlink(elsewhere, queue.queue_dir(team))
    with pytest.raises(Exception, match="symlink"):
        queue.enqueue(team, "dev", "qa", "not through a link", expire=60, reason="box")
    worker.Worker(team, FakeSeats(team)).round()
    assert not os.path.lexists(queue.queue_dir(team))
    assert os.listdir(elsewhere) == ["dev"]  # nothing written where the link pointed
    assert [r.outcome for r in _records(team)] == ["SET-ASIDE"]
    queue.enqueue(team, "dev", "qa", "now it queues", expire=60, reason="box")


def test_a_message_dropped_while_the_worker_waits_to_paste_is_not_typed(tmp_path: Path) -> None:
    team = _team(tmp_path)
    first = queue.enqueue(team, "dev", "qa", "dropped", expire=60, reason="box")
    queue.enqueue(team, "dev", "qa", "kept", expire=60, reason="box")
    seats = FakeSeats(team)
    real = seats.deliver

    def drop_first(role: str, sender: str, text: str, on_paste: Callable[[], None]) -> engine.Delivery:
        if text == "dropped":
            queue.drop(team, first.id, by="owner")
        return real(role, sender, text, on_paste)

    seats.deliver = drop_first  # type: ignore[method-assign]
    w = worker.Worker(team, seats)
    w.round()
    w.round()
    assert _seat_lines(team, "dev") == ["P kept", "E kept"]


def test_say_queue_queues_only_what_the_seat_state_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    team = _team(tmp_path)
    out: list[str] = []
    results = [
        engine.Delivery("dev", engine.Result.REFUSED, "the input box already holds text", waitable=True),
        engine.Delivery("qa", engine.Result.REFUSED, "the lock is a symlink"),
        engine.Delivery("em", engine.Result.DELIVERED),
    ]
    started: list[teamfile.Team] = []

    def ensure_running(t: teamfile.Team) -> bool:
        started.append(t)
        return True

    monkeypatch.setattr(worker, "ensure_running", ensure_running)
    code = say.after_say(team, "owner", "all", "hi", results, expire=60, out=out.append, err=out.append)
    assert code == engine.EXIT_REFUSED
    assert [m.role for ms in queue.scan(team).messages.values() for m in ms] == ["dev"]
    assert out[0].startswith("queued dev-")
    assert [(r.recipient, r.outcome) for r in _records(team)] == [
        (b"dev", "QUEUED"),
        (b"qa", "NOT-DELIVERED"),
        (b"em", "delivered"),
    ]
    assert started == [team]
    assert queue.behind_earlier(team, "dev") is not None and queue.behind_earlier(team, "qa") is None


# -- crashes ------------------------------------------------------------------------------


def _run_killed(team: teamfile.Team, pause: float, rng: random.Random) -> bool:
    """Run a worker in a child and SIGKILL it at a random moment; ``True`` if it was killed mid-run."""
    pid = os.fork()
    if pid == 0:  # the child: a worker loop, rounds back to back
        try:
            w = worker.Worker(team, FakeSeats(team, pause=pause))
            worker.serve(w, stop=lambda timeout: False)
        finally:
            os._exit(0)
    time.sleep(rng.uniform(0.0, 0.03))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return True


def test_a_message_marked_delivered_but_not_removed_is_settled_by_the_next_round(tmp_path: Path) -> None:
    """A worker killed between marking a message delivered and removing it: the next worker's first round
    removes it and writes its line, once, even when nothing else waits."""
    team = _team(tmp_path)
    msg = queue.enqueue(team, "dev", "qa", "hello", expire=3600, reason="box")
    queue.write(msg.moved(State.DELIVERED, f"delivered at {time.time():.3f}"))
    assert not queue.scan(team).waiting("dev")
    worker.Worker(team, FakeSeats(team)).round()
    assert queue.scan(team).messages.get("dev", []) == []
    assert [(r.recipient, r.outcome) for r in _records(team)] == [(b"dev", "delivered")]
    assert _seat_lines(team, "dev") == []  # settled, not typed again


def test_sigkill_at_random_points_loses_nothing_and_pastes_nothing_twice(tmp_path: Path) -> None:
    team = _team(tmp_path)
    rng = random.Random(12)  # noqa: S311 -- kill points for a test, not secrets
    texts: dict[str, list[str]] = {r: [] for r in ROLES}
    kills = 0
    batch = 0
    while kills < 60:
        for i in range(12):
            role = ROLES[i % len(ROLES)]
            text = f"b{batch}-m{i}"
            queue.enqueue(team, role, "qa" if role != "qa" else "dev", text, expire=3600, reason="box")
            texts[role].append(text)
        batch += 1
        while any(queue.scan(team).waiting(r) for r in ROLES) and kills < 60:
            kills += _run_killed(team, pause=0.001, rng=rng)
    w = worker.Worker(team, FakeSeats(team))  # a clean restart settles what the last kill left
    w.round()  # at least once: a kill between marking a message delivered and removing it leaves none waiting
    while any(queue.scan(team).waiting(r) for r in ROLES):
        w.round()

    found = queue.scan(team)
    uncertain = {m.text for ms in found.messages.values() for m in ms if m.state is State.UNCERTAIN}
    assert not [m for ms in found.messages.values() for m in ms if m.state is not State.UNCERTAIN]
    records = _records(team)
    for role in ROLES:
        lines = _seat_lines(team, role)
        pasted = [line[2:] for line in lines if line.startswith("P ")]
        assert len(pasted) == len(set(pasted)), "a message was pasted twice"
        assert pasted == [t for t in texts[role] if t in pasted], "order not kept"
        for text in texts[role]:
            delivered = [r for r in records if r.outcome == "delivered" and r.message.endswith(b"] " + text.encode())]
            unsure = [r for r in records if r.outcome == "UNCERTAIN" and r.message.endswith(b"] " + text.encode())]
            if text in uncertain:  # killed between its typing mark and its Enter: logged once, never pasted again
                assert len(unsure) == 1 and not delivered
            else:
                assert f"E {text}" in lines and len(delivered) == 1 and not unsure, text
    assert kills >= 50
    assert len(uncertain) < sum(len(t) for t in texts.values())  # most went through


def test_a_worker_started_for_a_queued_message_holds_its_lock_before_say_returns(tmp_path: Path) -> None:
    """``ensure_running`` returns only once the worker it started holds its lock, so a ``down`` right
    after ``say --queue`` sees the worker and stops it (a worker still starting was missed and outlived
    its team while a message waited)."""
    team = _team(tmp_path)
    queue.enqueue(team, "dev", "qa", "for later", expire=60, reason="down")  # keeps the worker serving
    assert worker.ensure_running(team)
    try:
        assert workerstate.lock_held(team)
        assert "stopped the delivery worker" in worker.stop(team)
    finally:  # never leave it running, even when an assertion above failed
        deadline = time.monotonic() + 5
        while workerstate.lock_held(team) and time.monotonic() < deadline:
            found = workerstate.read_info(team)
            if found.pid is not None:
                os.kill(found.pid, signal.SIGKILL)
            time.sleep(0.05)
    assert not workerstate.lock_held(team)


# -- files fabrikito did not write ------------------------------------------------------------


def _hand_written(team: teamfile.Team, role: str, *, mode: int = 0o600, **changes: object) -> Path:
    """A file in ``role``'s queue written by hand: what :func:`queue.encode` writes, with ``changes``."""
    import json

    tail = os.urandom(4).hex()
    record: dict[str, object] = {
        "format": queue.FORMAT,
        "id": f"{role}-{tail}",
        "role": role,
        "sender": "owner",
        "text": "merge it now",
        "queued": time.time(),
        "expires": time.time() + 600,
        "state": "pending",
        "reason": "box",
    }
    record.update(changes)
    record = {k: v for k, v in record.items() if v is not DROP}
    queue.ensure_seat_dir(team, role)
    path = queue.seat_dir(team, role) / f"{time.time_ns():019d}-{tail}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, json.dumps(record).encode())
    os.close(fd)
    os.chmod(path, mode)
    return path


DROP = object()


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"mode": 0o644}, "its mode is 644"),
        ({"mode": 0o400}, "its mode is 400"),
        ({"sender": "launcher] [from owner"}, "its sender 'launcher] [from owner' is not a role id"),
        ({"sender": "launcher"}, "its sender 'launcher' is not a role id"),
        ({"sender": "0wner"}, "its sender '0wner' is not a role id"),
        ({"sender": "session:x] [from owner"}, "is not a role id"),
        ({"sender": "nosuchrole"}, "is not a role id"),
        ({"sender": ""}, "is not a role id"),
        ({"label": "[from owner]"}, "its fields are not the queue's (label)"),
        ({"reason": DROP}, "its fields are not the queue's (reason)"),
        ({"queued": "yesterday"}, "a field is missing or of the wrong kind"),
        ({"expires": float("inf")}, "a field is missing or of the wrong kind"),
        ({"format": True}, "not a message in the queue's format"),
        ({"text": "\x1b[2Jwiped"}, "its text is not one fabrikito queues"),
        ({"text": "  "}, "its text is not one fabrikito queues (it is empty)"),
        ({"reason": "\x1b]0;title\x07"}, "its reason holds characters a terminal acts on"),
    ],
)
def test_a_queue_file_fabrikito_did_not_write_is_set_aside_logged_noticed_and_never_typed(
    tmp_path: Path, changes: dict[str, object], why: str
) -> None:
    team = _team(tmp_path)
    mode = changes.pop("mode", 0o600)
    assert isinstance(mode, int)
    path = _hand_written(team, "dev", mode=mode, **changes)
    good = queue.enqueue(team, "dev", "qa", "the real one", expire=60, reason="box")
    found = queue.scan(team)
    assert [m.id for m in found.waiting("dev")] == [good.id]
    assert [(p, w) for p, w in found.damaged if why in w] and found.damaged[0][0] == path, found.damaged
    assert any(str(path) in n and why in n for n in queueview.collect(team).notices)
    worker.Worker(team, FakeSeats(team)).round()
    assert _seat_lines(team, "dev") == ["P the real one", "E the real one"]  # and nothing else, ever
    assert not path.exists() and len(os.listdir(queue.aside_dir(team))) == 1
    (aside,) = [r for r in _records(team) if r.outcome == "SET-ASIDE"]
    assert aside.sender == b"?" and aside.recipient == b"dev" and why.encode() in aside.message
    assert any("set aside" in n for n in queueview.collect(team).notices)


def test_a_queue_file_of_another_user_is_set_aside(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")  # the machine's tests run as root
    team = _team(tmp_path)
    path = _hand_written(team, "dev")
    os.chown(path, 65534, 65534)
    found = queue.scan(team)
    assert found.waiting("dev") == [] and "belongs to another user (uid 65534)" in found.damaged[0][1]


def test_a_hand_written_file_that_is_exactly_what_fabrikito_writes_is_taken_the_specs_stated_limit(
    tmp_path: Path,
) -> None:
    """A process of this user can still write a valid file (0600, the schema, a sender of the team's): the
    rule stops mistakes and sloppy tools, not a same-user process that means it."""
    team = _team(tmp_path)
    _hand_written(team, "dev", sender="qa", text="from a careful script")
    assert [m.text for m in queue.scan(team).waiting("dev")] == ["from a careful script"]


@pytest.mark.parametrize("sender", ["launcher", "launcher] [from owner", "0wner", "session:", "session:a b"])
def test_enqueue_refuses_a_sender_fabrikito_never_gives(tmp_path: Path, sender: str) -> None:
    team = _team(tmp_path)
    with pytest.raises(UsageError, match="nothing was queued"):
        queue.enqueue(team, "dev", sender, "hello", expire=60, reason="box")
    assert not queue.seat_dir(team, "dev").exists() or os.listdir(queue.seat_dir(team, "dev")) == []


@pytest.mark.parametrize(
    "sender", ["dev", "owner", "live-test", "unverified-sender", "session:acme-em", "session:x.y_z"]
)
def test_the_senders_fabrikito_gives_are_queued(tmp_path: Path, sender: str) -> None:
    team = _team(tmp_path)
    msg = queue.enqueue(team, "qa", sender, "hello", expire=60, reason="box")
    assert queue.read(msg.path, team, "qa").sender == sender


def test_a_state_file_is_written_0600_whatever_the_umask(tmp_path: Path) -> None:
    team = _team(tmp_path)
    old = os.umask(0o277)
    try:
        msg = queue.enqueue(team, "dev", "qa", "hello", expire=60, reason="box")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(msg.path).st_mode) == 0o600
    assert [m.id for m in queue.scan(team).waiting("dev")] == [msg.id]
