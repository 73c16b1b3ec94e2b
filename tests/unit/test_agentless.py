"""A seat's pane alive while its agent is not (decision 0039): an idle shell is replaced, anything else is not."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from fabrikito.base import procs
from fabrikito.launch import agentless
from fabrikito.launch.agentless import Proc, judge

SLEEP = ("sleep", "1000")


def shell(pid: int, children: tuple[int, ...] = (), *, name: str = "sh", pgrp: int | None = None) -> Proc:
    return Proc(pid, name, (name,), pid if pgrp is None else pgrp, children)


def test_an_idle_shell_alone_in_the_pane_or_at_the_end_of_a_chain_of_shells_is_replaceable() -> None:
    assert judge([shell(10)], 10) == agentless.Left(True, 10, "sh")
    # a wrapper `bash -c 'claude …; bash'`: the outer shell waits for the inner one, at its prompt
    chain = [shell(10, (11,), name="bash"), shell(11, name="bash")]
    assert judge(chain, 11) == agentless.Left(True, 11, "bash")
    assert judge([shell(10, name="-bash")], 10).idle  # a login shell
    assert judge([Proc(10, "zsh", ("-zsh",), 10, ())], 10).idle


def test_a_program_in_the_foreground_or_as_a_job_or_a_shell_not_at_its_prompt_is_left_alone() -> None:
    running = [shell(10, (11,)), Proc(11, "sleep", SLEEP, 11, ())]
    assert judge(running, 11) == agentless.Left(False, 11, "sleep 1000")
    background = [shell(10, (11,)), Proc(11, "sleep", SLEEP, 11, ())]  # `sleep 1000 &`: the shell has the terminal
    assert judge(background, 10) == agentless.Left(False, 11, "sleep 1000")
    nested = [shell(10, (11,)), Proc(11, "vim", ("vim", "notes.md"), 11, (12,)), shell(12, pgrp=11)]
    assert judge(nested, 11).what == "vim notes.md"  # the program nearest the pane, not the shell it started
    assert not judge([shell(10)], 99).idle  # the foreground is another group: something else has the terminal
    two = [shell(10, (11, 12)), shell(11, pgrp=10), shell(12, pgrp=10)]
    assert not judge(two, 10).idle
    assert judge([], 10) == agentless.Left(False, 0, "its pane's process is gone")


def test_the_messages_say_what_runs_and_what_to_do() -> None:
    refused = judge([shell(10, (11,)), Proc(11, "sleep", SLEEP, 11, ())], 11).refusal("api")
    assert "`sleep 1000` (pid 11) runs in its pane: left alone" in refused
    assert "`fabrikito up --resume api`" in refused and "`fabrikito down api`" in refused
    unread = agentless.Left(False, 0, "process 12: Permission denied").refusal("api")
    assert "could not be read (process 12: Permission denied): left alone" in unread
    assert "a shell is left in its pane (sh, pid 10): starting it again" in judge([shell(10)], 10).note()
    long = judge([Proc(10, "python3", ("python3", "-c", "x" * 200), 10, ())], 10).what
    assert len(long) == agentless.MAX_SHOWN and long.endswith("\u2026")


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    running: list[subprocess.Popen[bytes]] = []
    yield running
    for proc in running:
        proc.kill()
        proc.wait(timeout=10)


def spawn(running: list[subprocess.Popen[bytes]], *argv: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, start_new_session=True)
    running.append(proc)
    return proc


def children_settled(pid: int, count: int, program: str | None = None) -> None:
    """Until ``pid`` has ``count`` children, each running ``program`` when given (its exec done, not the
    shell's copy between fork and exec)."""
    deadline = time.monotonic() + 10
    while len(kids := procs.children_of(pid)) != count or (program and not all(runs(k, program) for k in kids)):
        assert time.monotonic() < deadline, f"process {pid} never had {count} children"
        time.sleep(0.05)


def runs(pid: int, program: str) -> bool:
    try:
        return procs.cmdline(pid)[:1] == [program]
    except (procs.ProcessGone, procs.ProcessUnreadable):
        return False


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_child_the_tree_missed_is_found_by_its_parent_and_the_shell_is_not_taken_for_idle(
    started: list[subprocess.Popen[bytes]],
) -> None:
    busy = spawn(started, "/bin/sh", "-c", "sleep 1000; true")
    children_settled(busy.pid, 1, program="sleep")
    (child,) = procs.children_of(busy.pid)
    whole = [shell(busy.pid, (child,)), Proc(child, "sleep", SLEEP, child, ())]
    assert agentless.unlisted_child(whole) is None
    missed = [shell(busy.pid)]  # as a children file that missed the child reads: an idle shell, by itself
    assert judge(missed, busy.pid).idle
    assert agentless.unlisted_child(missed) == child


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_real_processes_a_waiting_shell_is_idle_and_one_running_a_command_is_not(
    started: list[subprocess.Popen[bytes]],
) -> None:
    idle = spawn(started, "/bin/sh")  # reads its commands from a pipe: waits with no child
    children_settled(idle.pid, 0)
    found = agentless.left_in(idle.pid)
    assert found is not None and found.idle and found.pid == idle.pid
    busy = spawn(started, "/bin/sh", "-c", "sleep 1000; true")
    children_settled(busy.pid, 1, program="sleep")
    found = agentless.left_in(busy.pid)
    assert found is not None and not found.idle and found.what == "sleep 1000"
    gone = spawn(started, "/bin/true")
    gone.wait(timeout=10)
    assert agentless.left_in(gone.pid) == agentless.Left(False, 0, f"process {gone.pid} ended while it was read")
