"""The team's tmux control-mode client (``base.tmuxcontrol``): the same answers as a tmux process per
command, never a command on another session, shared safely by forked commands, connected only when that
cannot crash tmux, nothing left behind, and a client that goes away costs no message."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabrikito.base import tmuxcontrol, tmuxwire
from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.base.tmuxcontrol import CONTROL_SESSION, Control, Controlled, NotSent, Unanswered
from fabrikito.base.tmuxwire import quote
from fabrikito.cli.invocation import Invocation
from fabrikito.delivery import seatpane

pytestmark = pytest.mark.tmux_releases

HOSTILE = (
    r"printf '%%begin 1 2 1\n%%end 1 2 1\n%%error 1 2 1\n%%exit\n%%session-changed $9 x\n"
    r"fabrikito-0123456789abcdef-1a\n\033[1;31mred\033[0m back\\slash \044HOME é 漢字 \"q\" #{pane_id} ;\n"
    r"%%end 1 2 1'; sleep 300"
)


def sessions(server: Server) -> list[str]:
    return server.run("list-sessions", "-F", "#{session_name}").split()


def wait_for(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def shared(server: Server) -> Iterator[Controlled]:
    """A seat-like session, the control client connected and shared, as the command server does."""
    server.new_session("acme-em", ["sleep", "300"], cwd="/")
    control = tmuxcontrol.connect(server)
    assert control is not None
    try:
        ctl = served(control).tmux(server)
        assert isinstance(ctl, Controlled)
        yield ctl
    finally:
        control.close()


def served(control: tmuxcontrol.Control | None) -> Invocation:
    """A command's invocation as the command server makes it: the server's client handed to it."""
    return Invocation(pid=os.getpid(), stdin=None, stdout=None, stderr=None, served=True, control=control)


def test_connecting_never_touches_another_session_and_its_session_goes_with_it(server: Server) -> None:
    """tmux runs a control client's input even before the command that attaches it: nothing is written
    before the client is attached, so nothing lands on a seat's session; its owner ending kills its own."""
    server.new_session("acme-em", ["sleep", "300"], cwd="/")  # unattached, the most recent session
    for _ in range(5):
        control = tmuxcontrol.connect(server)
        assert control is not None
        ctl = Controlled.over(server, control)
        assert ctl.run("display-message", "-p", "#{session_name}").strip() == CONTROL_SESSION
        assert sorted(sessions(server)) == sorted([CONTROL_SESSION, "acme-em"])
        assert server.run("show-options", "-t", "acme-em", "-v", "destroy-unattached").strip() == ""  # not set
        assert ctl.run("show-options", "-v", "destroy-unattached").strip() == ""  # its owner kills it instead
        control.close()
        assert wait_for(lambda: sessions(server) == ["acme-em"])
    assert server.run("display-message", "-p", "-t", "acme-em", "#{pane_current_command}").strip() == "sleep"


def test_a_command_goes_through_a_client_only_when_its_invocation_has_one_on_that_server(
    shared: Controlled,
) -> None:
    other = Server(socket_name="another")
    assert served(shared.control).tmux(other) is other
    plain = Server(socket_name=shared.socket_name)
    assert served(None).tmux(plain) is plain
    assert Invocation.here().tmux(plain) is plain  # a command run by itself has none
    assert isinstance(served(shared.control).tmux(plain), Controlled)


def test_a_look_answers_as_a_tmux_process_does_on_a_hostile_screen(shared: Controlled, server: Server) -> None:
    """A screen showing tmux's protocol lines, a marker-like line, escapes and wide characters."""
    pane = server.new_session("s", ["sh", "-c", HOSTILE], cwd="/", width=90, height=12)
    assert wait_for(lambda: "漢字" in server.capture(pane))
    for _ in range(3):
        assert seatpane.look(shared, pane) == seatpane.look(server, pane)
        assert shared.capture(pane, escapes=True) == server.capture(pane, escapes=True)
        assert shared.list_panes() == server.list_panes()


def test_tmux_errors_are_its_own_and_leave_the_client_usable(shared: Controlled) -> None:
    with pytest.raises(TmuxError, match="can't find pane") as info:
        shared.run("capture-pane", "-p", "-t", "%9999")
    assert info.value.returncode == 1 and not isinstance(info.value, (NotSent, Unanswered))
    assert shared.run("display-message", "-p", "after") == "after\n"
    assert shared.control.broken is None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1, max_size=2500))
def test_any_text_reaches_a_buffer_exactly(shared: Controlled, server: Server, text: str) -> None:
    """Every byte survives the quoting for tmux's language ($, quotes, #{}, ;, newlines...), in pieces that
    each fit one write when it is long."""
    shared.load_buffer("probe", text)
    assert server.run("save-buffer", "-b", "probe", "-").encode("utf-8", "surrogateescape") == text.encode()


@pytest.mark.parametrize("text", [";", ";;", "a;", "; ", "\\;"])
def test_a_text_that_is_a_semicolon_reaches_a_buffer_exactly(shared: Controlled, server: Server, text: str) -> None:
    """tmux's parser ends a command at a word that is ";" even quoted (the property test found it)."""
    shared.load_buffer("probe", text)
    assert server.run("save-buffer", "-b", "probe", "-") == text


def test_a_long_message_is_loaded_in_pieces_each_one_write(shared: Controlled, server: Server) -> None:
    text = ('long é 漢 $HOME "q" \\ ;\n' * 4000)[:60000]
    assert len(tmuxwire.pieces(text)) > 10
    assert all(len(quote(piece)) < tmuxwire.WRITE_MAX - 300 for piece in tmuxwire.pieces(text))
    shared.load_buffer("long", text)
    assert server.run("save-buffer", "-b", "long", "-") == text


def test_quote_leaves_plain_words_and_escapes_the_rest() -> None:
    assert quote("-t") == "-t" and quote("%5") == '"\\0455"' and quote("=acme:") == "=acme:"
    assert quote("~") == '"\\176"' and quote("a b") == '"a b"'
    assert quote('a"$\\b\n') == '"a\\042\\044\\134b\\012"'
    assert quote("é") == '"\\303\\251"'


def test_a_paste_goes_through_the_client_and_leaves_no_buffer(shared: Controlled, server: Server) -> None:
    pane = server.new_session("s", ["cat"], cwd="/", width=80, height=10)
    shared.paste(pane, "hello 'quoted' $HOME ✓ ; #{x}", bracketed=False)
    assert wait_for(lambda: "✓ ; #{x}" in server.capture(pane))
    assert server.run("list-buffers", "-F", "#{buffer_name}").strip() == ""


def test_a_failed_paste_names_no_text_and_leaves_no_buffer(shared: Controlled, server: Server) -> None:
    with pytest.raises(TmuxError) as info:
        shared.paste("%9999", "the secret body")
    assert "secret" not in str(info.value)
    assert server.run("list-buffers", "-F", "#{buffer_name}").strip() == ""


def test_a_chain_reading_several_screens_goes_screen_by_screen_and_one_with_input_runs_as_a_process(
    shared: Controlled, server: Server
) -> None:
    pane = server.new_session("s", ["sleep", "300"], cwd="/", width=40, height=5)
    before = shared.control.seq
    assert seatpane.look_panes(shared, [pane, pane]) == seatpane.look_panes(server, [pane, pane])
    assert shared.control.seq == before + 2  # one exchange per screen
    assert shared.run("load-buffer", "-b", "in", "-", input=b"from stdin") == ""
    assert shared.control.seq == before + 2  # not through the client
    assert server.run("show-buffer", "-b", "in") == "from stdin"


CHILD_LOOKS = 40


def _child(shared: Controlled, pane: str, expected: seatpane.Look, slow: bool) -> int:
    """In a forked command: looks through the shared client; 0 when every answer was right."""
    try:
        for _ in range(CHILD_LOOKS):
            if seatpane.look(shared, pane) != expected:
                return 3
            if slow:
                time.sleep(0.002)
        return 0 if shared.control.broken is None else 4
    except BaseException:
        return 5


def test_forked_commands_share_the_client_and_one_killed_mid_way_costs_the_others_nothing(
    shared: Controlled, server: Server
) -> None:
    pane = server.new_session("s", ["sh", "-c", HOSTILE], cwd="/", width=90, height=12)
    assert wait_for(lambda: "漢字" in server.capture(pane))
    expected = seatpane.look(server, pane)
    pids = []
    for index in range(7):
        pid = os.fork()
        if pid == 0:
            os._exit(_child(shared, pane, expected, slow=index == 0))
        pids.append(pid)
    time.sleep(0.03)
    os.kill(pids[0], signal.SIGKILL)  # maybe holding the client, an answer half read
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    assert codes[0] in (0, -signal.SIGKILL) and codes[1:] == [0] * 6
    assert seatpane.look(shared, pane) == expected  # and the owner's own use after them
    assert server.alive()


def test_a_command_killed_before_reading_its_answer_never_hands_it_to_the_next(shared: Controlled) -> None:
    """Forked commands start from the same state: the answer a killed one left is skipped by the next,
    whose markers are its own."""
    assert shared.run("display-message", "-p", "warm") == "warm\n"
    pid = os.fork()
    if pid == 0:
        Control._block_of = lambda self, marker, deadline: os._exit(0)  # type: ignore[method-assign]  # in the child
        shared.control.exchange(["display-message", "-p", "the child's answer"])
        os._exit(1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert shared.run("display-message", "-p", "mine") == "mine\n"
    assert shared.run("display-message", "-p", "and mine") == "and mine\n"


def test_a_client_held_by_a_stopped_command_is_passed_by(shared: Controlled, server: Server) -> None:
    """A command stopped while it holds the client: the others run tmux themselves after LOCK_WAIT."""
    pane = server.new_session("s", ["sleep", "300"], cwd="/", width=40, height=5)
    ready = os.pipe()
    pid = os.fork()
    if pid == 0:
        shared.control._lock(1.0)
        os.write(ready[1], b"x")
        time.sleep(30)
        os._exit(0)
    try:
        os.read(ready[0], 1)
        with pytest.raises(NotSent):
            shared.control.exchange(["display-message", "-p", "x"])
        started = time.monotonic()
        assert seatpane.look(shared, pane) == seatpane.look(server, pane)  # by a tmux process
        assert tmuxcontrol.LOCK_WAIT <= time.monotonic() - started < tmuxcontrol.LOCK_WAIT + 2
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert shared.run("display-message", "-p", "free") == "free\n"  # its lock died with it


def test_a_typing_command_left_unanswered_is_an_error_and_never_sent_again(shared: Controlled, server: Server) -> None:
    """No answer in time: an error, and the client is not used again by that command; tmux may still run
    it, once; a read runs as a tmux process instead."""
    pane = server.new_session("s", ["cat"], cwd="/", width=60, height=6)
    tmux_pid = int(server.run("display-message", "-p", "#{pid}"))
    quick = Controlled.over(Server(socket_name=server.socket_name, timeout=0.5), shared.control)
    os.kill(tmux_pid, signal.SIGSTOP)
    try:
        with pytest.raises(TmuxError, match="not answered"):
            quick.run("send-keys", "-t", pane, "-l", "typed")
        assert shared.control.broken
    finally:
        os.kill(tmux_pid, signal.SIGCONT)
    quick.run("send-keys", "-t", pane, "-l", "again")  # now by a tmux process of its own
    assert wait_for(lambda: "again" in server.capture(pane))
    assert server.capture(pane).count("typed") <= 1
    assert not isinstance(served(shared.control).tmux(server), Controlled)  # a broken client is used no more


def test_every_seats_screen_in_one_chain_is_read_through_the_client_as_a_tmux_process_reads_it(
    shared: Controlled, server: Server
) -> None:
    """status's look at every seat (display-message and capture-pane per pane, chained): one exchange per
    screen, the same looks as one tmux process gives; a chain that writes is not cut."""
    panes = [
        server.new_session(f"s{i}", ["sh", "-c", f"printf 'pane {i}\\n%%end 1 2 3\\n'; exec cat"], cwd="/")
        for i in range(3)
    ]
    assert wait_for(lambda: all(f"pane {i}" in server.capture(p) for i, p in enumerate(panes)))
    seq = shared.control.seq
    through = seatpane.start_looks(shared, panes).looks()
    assert shared.control.seq == seq + len(panes)  # one exchange per screen, no tmux process
    by_process = seatpane.start_looks(server, panes).looks()
    assert through.keys() == by_process.keys() == set(panes)
    assert {p: look.snapshot for p, look in through.items()} == {p: look.snapshot for p, look in by_process.items()}
    assert tmuxwire.screen_parts(["capture-pane", "-p", ";", "send-keys", "x", ";", "capture-pane", "-p"]) is None


def test_many_seats_screens_are_written_to_the_client_at_once_and_read_as_a_tmux_process_reads_them(
    shared: Controlled, server: Server
) -> None:
    """status of more seats than one tmux command line holds (two chains): every part written before any
    answer is read, one exchange per screen, no tmux process, the same looks; a tmux process of the
    client's own comes after and gets its own answer."""
    panes = [
        server.new_session(f"m{i}", ["sh", "-c", f"printf 'pane {i}\\n%%end 1 2 3\\n'; exec cat"], cwd="/")
        for i in range(60)
    ]
    assert wait_for(lambda: all(f"pane {i}" in server.capture(p) for i, p in enumerate(panes)), 10)
    seq = shared.control.seq
    looking = seatpane.start_looks(shared, panes)
    assert len(looking.chains) == 2
    assert all(isinstance(pending, tmuxcontrol.Batched) for _, _, pending in looking.chains)
    through = looking.looks()
    assert shared.control.seq == seq + len(panes) and shared.control.sent is None
    by_process = seatpane.start_looks(server, panes).looks()
    assert through.keys() == by_process.keys() == set(panes)
    assert {p: look.snapshot for p, look in through.items()} == {p: look.snapshot for p, look in by_process.items()}
    assert shared.run("display-message", "-p", "after") == "after\n"


def test_a_command_killed_before_reading_what_it_sent_at_once_never_hands_it_to_the_next(
    shared: Controlled, server: Server
) -> None:
    panes = [server.new_session(f"k{i}", ["sh", "-c", HOSTILE], cwd="/", width=90, height=12) for i in range(20)]
    assert wait_for(lambda: all("漢字" in server.capture(p) for p in panes))
    expected = seatpane.look(server, panes[0])
    pid = os.fork()
    if pid == 0:
        seatpane.start_looks(shared, panes)  # written, never read
        os._exit(0)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert seatpane.look(shared, panes[0]) == expected
    assert shared.run("display-message", "-p", "mine") == "mine\n"
    sent = seatpane.start_looks(shared, panes)  # sent, then another exchange first: it reads them first
    assert shared.run("display-message", "-p", "then") == "then\n"
    assert sent.looks()[panes[0]] == expected


def test_a_client_gone_makes_reads_run_as_processes(shared: Controlled, server: Server) -> None:
    pane = server.new_session("s", ["cat"], cwd="/", width=60, height=6)
    os.kill(shared.control.proc.pid, signal.SIGKILL)
    assert wait_for(lambda: server.run("list-clients").strip() == "")  # tmux saw it go (and closed its pipes)
    assert seatpane.look(shared, pane) == seatpane.look(server, pane)
    assert shared.control.broken
    shared.paste(pane, "once", bracketed=False)  # known gone before it: by a tmux process
    assert wait_for(lambda: "once" in server.capture(pane))
    assert server.capture(pane).count("once") == 1


def test_a_client_connects_while_a_person_is_attached_only_from_tmux_3_7(
    server: Server, tmp_path: Path, tmux_release: str
) -> None:
    """Before 3.7 a person attached could crash tmux by detaching while the client connects: none is
    connected then.  From 3.7 it is, and the person coming and going crashes nothing."""
    assert tmuxcontrol.connect(server) is None
    assert not server.alive() and not server.listening()  # -N: none was started
    server.new_session("acme-em", ["sleep", "300"], cwd="/")
    person = subprocess.Popen(
        ["tmux", *server.server_flags, "-C", "attach", "-t", "acme-em"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    safe = tmux_release not in ("3.3a", "3.5a")
    assert tmuxcontrol.may_connect(server) or not safe
    try:
        assert wait_for(lambda: server.run("list-clients", "-F", "#{client_pid}").strip() != "")
        assert tmuxcontrol.may_connect(server) is safe
        control = tmuxcontrol.connect(server)
        assert (control is not None) is safe
        if control is not None:
            person.kill()  # the person leaves while the client is there
            person.wait()
            assert control.exchange(["display-message", "-p", "#{session_name}"]).strip() == CONTROL_SESSION
            control.close()
            assert wait_for(lambda: sessions(server) == ["acme-em"])
        assert sessions(server) == ["acme-em"] and server.alive()
    finally:
        person.kill()
        person.wait()
    fake = tmp_path / "tmux"
    fake.write_text('#!/bin/sh\ncase "$*" in *-C*) exec sleep 30;; esac\nexec tmux "$@"\n', encoding="utf-8")
    fake.chmod(0o755)
    started = time.monotonic()
    assert tmuxcontrol.connect(Server(socket_name=server.socket_name, binary=str(fake))) is None  # never attaches
    assert time.monotonic() - started < tmuxcontrol.ATTACH_WAIT + 2


OWNER = """
import sys, time
from fabrikito.base import tmuxcontrol
from fabrikito.base.tmux import Server
control = tmuxcontrol.connect(Server(socket_name=sys.argv[1]))
print(control.proc.pid, flush=True)
time.sleep(60)
"""


def test_an_owner_killed_leaves_no_client_and_down_removes_its_session(server: Server) -> None:
    server.new_session("acme-em", ["sleep", "300"], cwd="/")
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(server.socket_name)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        client = int(owner.stdout.readline())
        assert CONTROL_SESSION in sessions(server)
        owner.kill()
        owner.wait()
        assert wait_for(lambda: not Path(f"/proc/{client}").exists() or _zombie(client))  # its input ended
        assert wait_for(lambda: server.run("list-clients").strip() == "")
        assert sorted(sessions(server)) == sorted([CONTROL_SESSION, "acme-em"])  # left: nobody killed it
        attached = tmuxcontrol.connect(server)  # another owner reuses it; while attached it is not removed
        assert attached is not None and tmuxcontrol.remove_leftover(server) == []
        os.kill(attached.proc.pid, signal.SIGKILL)
        assert wait_for(lambda: server.run("list-clients").strip() == "")
        (removed,) = tmuxcontrol.remove_leftover(server)
        assert removed.startswith("$") and sessions(server) == ["acme-em"]
        attached.close()
    finally:
        owner.kill()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def test_tmux_survives_sessions_coming_and_going_while_commands_share_the_client(
    shared: Controlled, server: Server
) -> None:
    """What crashed tmux 3.3a with a client per command: notifications (sessions created and closed,
    clients detached) while clients connect.  Here one client connects once; the churn goes on around
    commands sharing it."""
    pane = server.new_session("s", ["sleep", "300"], cwd="/", width=40, height=5)
    expected = seatpane.look(server, pane)
    stop = threading.Event()

    def churn() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            try:
                server.new_session(f"churn-{n}", ["sleep", "30"], cwd="/")
                server.kill_session(f"churn-{n}")
            except TmuxError:
                pass

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        pids = []
        for _ in range(4):
            pid = os.fork()
            if pid == 0:
                os._exit(_child(shared, pane, expected, slow=True))
            pids.append(pid)
        codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    finally:
        stop.set()
        thread.join()
    assert codes == [0, 0, 0, 0] and server.alive()
