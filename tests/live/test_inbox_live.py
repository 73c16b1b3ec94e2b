"""The inbox of a seat that is not Claude Code, against real Claude Code seats (2.1.316 and the newest qualified).

The seat behind the inbox is a Claude Code pane here (the delivery engine is the
same for every agent): its tmux session is the team's ``fab-cx``, and the
Claude Code in it runs under another name (``claude-cx``) so that only the
inbox answers to ``fab-cx`` in the registry.  What is shown:

* a Claude seat's ListAgents lists the inbox and its SendMessage reaches it by
  name; the message is queued, typed once into the seat by the delivery worker,
  labelled with the sender's role, and logged; ``fabrikito send`` reaches it too;
* a message from another permission class is held, and ``queue release`` lets it go;
* hostile clients: a line held open 15 s is closed, more than 1,000,000
  characters refused, a flood throttled, a wrong token refused, a repeat
  dropped — and every accepted message typed exactly once; the 51st waiting
  message refused; an inbox started with ``--inbound refuse`` refuses;
* the inbox stopped leaves no socket and no registry file.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabrikito.base.tmux import Server
from fabrikito.delivery import queue, worker
from fabrikito.delivery.queue import State
from fabrikito.inbox import gate, inboxfiles, protocol, server
from fabrikito.offline import claude_setup, seatkit
from fabrikito.offline.replies import Reply
from fabrikito.offline.seatkit import Seat, SeatFactory
from fabrikito.offline.standin import StandIn
from fabrikito.team import teamfile

from .teamkit import clean_env, fabrikito, log_lines, wait_for

pytestmark = pytest.mark.live


@pytest.fixture
def team_file(tmux_server: Server, tmp_path: Path) -> Iterator[Path]:
    """A team: ``a`` (a Claude seat), ``cx`` (behind an inbox, prompting), ``cy`` (an inbox only, bypass)."""
    path = tmp_path / "team" / "team.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        f'name = "live"\ntmux_socket = "{tmux_server.socket_name}"\n\n'
        '[[seat]]\nrole = "a"\nsession = "fab-a"\npermission_mode = "acceptEdits"\n\n'
        '[[seat]]\nrole = "cx"\nsession = "fab-cx"\npermission_mode = "acceptEdits"\n\n'
        '[[seat]]\nrole = "cy"\nsession = "fab-cy"\npermission_mode = "bypassPermissions"\n',
        encoding="utf-8",
    )
    yield path
    team = teamfile.load(path)
    for seat in team.seats:
        server.stop_inbox(team, seat)
    worker.stop(team, timeout=10)


def _env(home: Path) -> dict[str, str]:
    return clean_env({"HOME": str(home)})


def _target(seat_factory: SeatFactory, claude_binary: Path) -> Seat:
    """The Claude Code pane behind the ``cx`` inbox: tmux session fab-cx, Claude Code named claude-cx."""
    f = seat_factory
    seat = seatkit.start_seat(
        f.server,
        binary=claude_binary,
        role="cx",
        session="claude-cx",
        tmux_session="fab-cx",
        home=f.home,
        cwd=f.root / "work" / "cx",
        base_url=f.standin.base_url("cx"),
        width=120,
        height=40,
    )
    f.seats.append(seat)
    return seat


def _start(team: teamfile.Team, role: str, home: Path) -> inboxfiles.Info:
    seat = team.seat(role)
    assert seat is not None
    assert server.start_inbox(team, seat, env=_env(home))
    return inboxfiles.read_info(inboxfiles.places(team, role))


def _typed(standin: StandIn, needle: str) -> list[str]:
    """The turns of the seat behind cx whose prompt holds ``needle``."""
    return [r.last_user_text for r in standin.main_requests("cx") if r.is_messages and needle in r.last_user_text]


def test_a_claude_seats_sendmessage_reaches_the_inbox_by_name_and_is_typed_once(
    seat_factory: SeatFactory,
    claude_binary: Path,
    standin: StandIn,
    tmux_server: Server,
    claude_home: Path,
    team_file: Path,
) -> None:
    for role in ("a", "cx"):  # both trusted before either starts: a starting seat rewrites .claude.json
        claude_setup.trust_dir(claude_home, seat_factory.root / "work" / role)
    sender = seat_factory.start("a", session="fab-a")
    _target(seat_factory, claude_binary)
    team = teamfile.load(team_file)
    info = _start(team, "cx", claude_home)
    _start(team, "cy", claude_home)
    # ListAgents lists the inbox like a session.
    standin.on("list them", Reply(tool="ListAgents", input={}, then=Reply("listed")), seat="a")
    seatkit.submit(tmux_server, sender, "list them")
    listing = standin.wait_for_tool_result("a", "ListAgents", 30).content
    assert "fab-cx" in listing and "fab-cy" in listing, listing
    # SendMessage by name: queued, typed into the seat behind the inbox with a's label, logged.
    text = f"hello cx, from a ({time.monotonic_ns()})"
    standin.on(
        "send it", Reply(tool="SendMessage", input={"to": "fab-cx", "message": text}, then=Reply("sent")), seat="a"
    )
    seatkit.submit(tmux_server, sender, "send it")
    result = standin.wait_for_tool_result("a", "SendMessage", 30).json()
    assert result.get("success") is True, result
    got = standin.wait_for_request("cx", text, 60)
    assert f"[from a] {text}" in got.last_user_text, got.last_user_text
    wait_for(
        lambda: (
            [line[1:4] for line in log_lines(team_file) if text in line[4]]
            == [["a", "cx", "QUEUED"], ["a", "cx", "delivered"]]
        ),
        30,
        "the QUEUED and delivered lines",
        lambda: "\n".join("\t".join(line) for line in log_lines(team_file)),
    )
    # fabrikito send reaches it like any session (the peer token from its key file).
    said = f"and one by send ({time.monotonic_ns()})"
    done = fabrikito("send", "--to", "cx", said, team=team_file, env={"HOME": str(claude_home)})
    assert done.returncode == 0, done.stderr
    assert "auth: peer token" in done.stdout, done.stdout
    got = standin.wait_for_request("cx", said, 60)
    assert f"[from live-test] {said}" in got.last_user_text, got.last_user_text
    # A message from another permission class is held (cy is bypass, a is prompting), then released.
    held_text = f"for the bypass seat ({time.monotonic_ns()})"
    standin.on(
        "to cy", Reply(tool="SendMessage", input={"to": "fab-cy", "message": held_text}, then=Reply("sent")), seat="a"
    )
    seatkit.submit(tmux_server, sender, "to cy")
    wait_for(lambda: any(m.state is State.HELD for m in _messages(team, "cy")), 30, "the held message")
    (held,) = _messages(team, "cy")
    assert held.text == held_text and held.sender == "a"
    listing_done = fabrikito("queue", "cy", team=team_file)
    assert "held: from the inbox" in listing_done.stdout and f"queue release {held.id}" in listing_done.stdout
    released = fabrikito("queue", "release", held.id, team=team_file)
    assert released.returncode == 0, released.stderr
    assert _messages(team, "cy")[0].state is State.PENDING  # cy has no pane: it waits for the seat
    assert fabrikito("queue", "drop", held.id, team=team_file).returncode == 0
    # Each message was typed exactly once.
    time.sleep(2)
    assert len(_typed(standin, text)) == 1 and len(_typed(standin, said)) == 1
    # Stopped: no socket, no registry file, no key file.
    seat = team.seat("cx")
    assert seat is not None
    assert "stopped the inbox" in server.stop_inbox(team, seat)
    assert not os.path.exists(info.socket or "") and not os.path.exists(info.registry or "")
    assert not os.path.exists(info.key or "")
    done = fabrikito("send", "--to", "cx", "anyone?", team=team_file, env={"HOME": str(claude_home)})
    assert done.returncode == 3, done.stdout + done.stderr  # no session of that name any more


def _messages(team: teamfile.Team, role: str) -> list[queue.Message]:
    return queue.scan(team, [role]).messages.get(role, [])


def _connect(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(path)
    return s


def _post(path: str, token: str, *lines: bytes) -> None:
    s = _connect(path)
    try:
        s.sendall(protocol.auth_line(token) + b"".join(lines))
        s.shutdown(socket.SHUT_WR)
        s.recv(10)
    finally:
        s.close()


def test_hostile_clients_are_closed_refused_or_throttled_and_nothing_is_typed_twice(
    seat_factory: SeatFactory, claude_binary: Path, standin: StandIn, claude_home: Path, team_file: Path
) -> None:
    _target(seat_factory, claude_binary)
    team = teamfile.load(team_file)
    info = _start(team, "cx", claude_home)
    path = info.socket or ""
    key = json.loads(Path(info.key or "").read_text(encoding="utf-8"))
    token = key["peerToken"]
    run = time.monotonic_ns()
    # A line held open: the inbox closes it after 15 s, with nothing taken.
    slow = _connect(path)
    slow.sendall(protocol.auth_line(token) + protocol.user_line(f"[from slow] never finished {run}")[:-1])
    t0 = time.monotonic()
    # Meanwhile: a wrong token, more than a million characters, a flood, and a repeat.
    _post(path, "0" * 32, protocol.user_line(f"[from liar] wrong token {run}"))
    big = f"[from big] too big {run} "
    _post(path, token, protocol.user_line(big + "x" * (protocol.MAX_SERIALIZED_CHARS + 1)))
    flood = [protocol.user_line(f"[from flood] report {i} of {run}") for i in range(gate.BURST + 3)]
    _post(path, token, *flood)
    _post(path, token, protocol.user_line(f"[from flood] report 0 of {run}"))
    assert slow.recv(10) == b""
    held_for = time.monotonic() - t0
    slow.close()
    assert 14.0 <= held_for <= 20.0, held_for
    # Every accepted report is typed, once; nothing else reaches the seat.
    wait_for(
        lambda: sum(1 for line in log_lines(team_file) if line[3] == "delivered") == gate.BURST,
        240,
        f"{gate.BURST} reports delivered",
        lambda: "\n".join("\t".join(line) for line in log_lines(team_file)),
    )
    time.sleep(2)
    for i in range(gate.BURST):
        assert len(_typed(standin, f"[from flood] report {i} of {run}")) == 1, i
    for i in range(gate.BURST, gate.BURST + 3):
        assert _typed(standin, f"report {i} of {run}") == []
    assert _typed(standin, f"wrong token {run}") == [] and _typed(standin, f"too big {run}") == []
    assert _typed(standin, f"never finished {run}") == []
    outcomes = [(line[1], line[3]) for line in log_lines(team_file)]
    assert outcomes.count(("flood", "NOT-DELIVERED")) == 3 and outcomes.count(("flood", "DROPPED")) == 1
    assert ("big", "NOT-DELIVERED") in outcomes
    assert not any(sender == "liar" for sender, _ in outcomes)
    notes = inboxfiles.places(team, "cx").notes.read_text(encoding="utf-8")
    assert "refused: wrong token" in notes and "no complete line within 15 s" in notes
    assert _messages(team, "cx") == []

    # The 51st waiting message is refused (cy has no pane: what it accepts waits), and an inbox started
    # with --inbound refuse refuses everything.
    cy = team.seat("cy")
    assert cy is not None
    cy_info = _start(team, "cy", claude_home)
    cy_token = json.loads(Path(cy_info.key or "").read_text(encoding="utf-8"))["peerToken"]
    for sender in range(5):
        wrapped = [_peer_line(f"s{sender}", f"waiting {sender}.{i} of {run}", "bypass") for i in range(gate.BURST)]
        _post(cy_info.socket or "", cy_token, *wrapped)
    wait_for(lambda: len(_messages(team, "cy")) == queue.MAX_WAITING, 10, "50 waiting for cy")
    _post(cy_info.socket or "", cy_token, _peer_line("late", f"the 51st of {run}", "bypass"))
    wait_for(lambda: any("the 51st" in line[4] for line in log_lines(team_file)), 10, "the 51st's line")
    (last,) = [line for line in log_lines(team_file) if "the 51st" in line[4]]
    assert last[3] == "NOT-DELIVERED" and "already has 50 messages waiting" in last[4], last
    assert len(_messages(team, "cy")) == queue.MAX_WAITING
    server.stop_inbox(team, cy)
    assert server.start_inbox(team, cy, inbound=gate.Inbound.REFUSE, env=_env(claude_home))
    refusing = inboxfiles.read_info(inboxfiles.places(team, "cy"))
    token = json.loads(Path(refusing.key or "").read_text(encoding="utf-8"))["peerToken"]
    _post(refusing.socket or "", token, protocol.user_line(f"[from em] refuse me {run}"))
    wait_for(lambda: any(f"refuse me {run}" in line[4] for line in log_lines(team_file)), 10, "the refusal's line")
    (refused,) = [line for line in log_lines(team_file) if f"refuse me {run}" in line[4]]
    assert refused[3] == "NOT-DELIVERED" and 'inbound "refuse"' in refused[4], refused


def _peer_line(name: str, text: str, mode: str) -> bytes:
    """A user line as a Claude Code peer sends it (the envelope, msgV, msg_id, from)."""
    content = (
        f'<cross-session-message from="uds:/tmp/cc-socks/{name}.sock" from-name="{name}" from-mode="{mode}">\n'
        f"{text}\n</cross-session-message>"
    )
    line = {
        "msgV": 1,
        "msg_id": os.urandom(16).hex(),
        "type": "user",
        "message": {"role": "user", "content": content},
        "priority": "next",
        "from": f"uds:/tmp/cc-socks/{name}.sock",
    }
    return (json.dumps(line) + "\n").encode()
