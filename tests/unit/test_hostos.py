"""The host system's two implementations: nothing outside base/hostos reads ``/proc`` or calls what only
Linux has, and on this machine the portable one (what a Mac runs) answers as the Linux one does."""

from __future__ import annotations

import ast
import fcntl
import os
import pty
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests import userenv

from fabrikito.base import hostos
from fabrikito.base.hostos import linux, portable
from fabrikito.base.values import replace

SRC = Path(__file__).resolve().parents[2] / "src"
HOSTOS = SRC / "fabrikito" / "base" / "hostos"

#: Names only Linux has (in ``os``, ``socket``, ``fcntl``, ``select``, ``time``): what macOS's Python lacks.
LINUX_ONLY = frozenset(
    {
        "SO_PEERCRED",
        "SO_PASSCRED",
        "SO_PEERSEC",
        "SCM_CREDENTIALS",
        "AF_NETLINK",
        "AF_PACKET",
        "memfd_create",
        "MFD_CLOEXEC",
        "F_ADD_SEALS",
        "eventfd",
        "pidfd_open",
        "splice",
        "copy_file_range",
        "posix_fadvise",
        "getresuid",
        "getresgid",
        "setresuid",
        "setresgid",
        "getxattr",
        "setxattr",
        "listxattr",
        "removexattr",
        "unshare",
        "setns",
        "O_PATH",
        "O_TMPFILE",
        "epoll",
        "CLOCK_BOOTTIME",
        "sched_getaffinity",
        "sched_setaffinity",
        "sched_getscheduler",
        "sched_setscheduler",
        "sched_param",
        "sched_rr_get_interval",
    }
)
LINUX_PATHS = ("/proc", "/sys/")


def linux_only_uses(source: str, name: str = "<source>") -> list[str]:
    """Where ``source`` reads a Linux-only path or names a Linux-only call (docstrings and comments aside)."""
    tree = ast.parse(source, name)
    prose = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }
    found = []
    for node in ast.walk(tree):
        where = f"{name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            if any(node.value.startswith(p) or f" {p}" in node.value for p in LINUX_PATHS):
                found.append(f"{where}: reads {node.value!r}")
            elif node.value in LINUX_ONLY:
                found.append(f"{where}: names {node.value}")
        elif isinstance(node, ast.Attribute) and node.attr in LINUX_ONLY:
            found.append(f"{where}: uses .{node.attr}")
        elif isinstance(node, ast.ImportFrom):
            found += [f"{where}: imports {a.name}" for a in node.names if a.name in LINUX_ONLY]
        elif isinstance(node, ast.Name) and node.id in LINUX_ONLY:
            found.append(f"{where}: uses {node.id}")
    return found


def test_nothing_outside_hostos_reads_proc_or_calls_what_only_linux_has() -> None:
    scanned = [p for p in sorted((SRC / "fabrikito").rglob("*.py")) if HOSTOS not in p.parents]
    assert len(scanned) > 100  # the whole package was read
    found = [hit for path in scanned for hit in linux_only_uses(path.read_text(), str(path.relative_to(SRC)))]
    assert found == [], "put these behind fabrikito.base.hostos (linux.py and portable.py):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        'open(f"/proc/{pid}/stat")',
        "os.readlink('/proc/self/ns/pid')",
        "sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)",
        "fd = os.memfd_create('x')",
        "from os import sched_getaffinity",
        "getattr(socket, 'SO_PEERCRED')",
        "os.listdir('/sys/class/net')",
        "select.epoll()",
    ],
)
def test_the_scan_finds_each_kind_of_linux_only_use(line: str) -> None:
    assert linux_only_uses(f'"""A docstring may say /proc."""\n# so may a comment: /proc\n{line}\n') != []


def test_the_scan_leaves_prose_and_portable_calls_alone() -> None:
    source = '"""Reads /proc on Linux."""\nx = 1\n"""And /proc again."""\nselectors.DefaultSelector()\nos.getpgid(1)\n'
    assert linux_only_uses(source) == []


def test_linux_only_modules_are_imported_by_hostos_alone() -> None:
    for path in sorted((SRC / "fabrikito").rglob("*.py")):
        if HOSTOS in path.parents:
            continue
        text = path.read_text()
        assert "hostos.linux" not in text and "hostos import linux" not in text, path
        assert "hostos.portable" not in text and "hostos import portable" not in text, path


# -- which one runs -------------------------------------------------------------------


def _chosen(value: str | None) -> subprocess.CompletedProcess[str]:
    env = userenv.user_env({"PYTHONPATH": str(SRC)})
    env.pop(hostos.PORTABLE_ENV, None)
    if value is not None:
        env[hostos.PORTABLE_ENV] = value
    code = "from fabrikito.base import hostos; print(hostos.NAME, hostos.PORTABLE, hostos.MAX_SOCKET_PATH)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)


def test_the_environment_variable_forces_the_portable_implementation() -> None:
    assert _chosen("1").stdout.split() == ["portable", "True", "103"]
    assert _chosen("0").stdout.split() == ["linux", "False", "107"]
    assert _chosen(None).stdout.split() == ["linux", "False", "107"]


def test_a_value_other_than_0_or_1_is_named_and_the_system_decides() -> None:
    done = _chosen("yes")
    assert done.stdout.split() == ["linux", "False", "107"]
    assert "FABRIKITO_PORTABLE='yes' is not 0 or 1" in done.stderr


def test_off_linux_the_portable_one_runs_whatever_the_variable_says() -> None:
    assert hostos.portable_wanted({}, "darwin")
    assert hostos.portable_wanted({hostos.PORTABLE_ENV: "0"}, "darwin")
    assert not hostos.portable_wanted({}, "linux")
    assert hostos.portable_wanted({hostos.PORTABLE_ENV: "1"}, "linux")


def test_what_a_test_starts_runs_the_implementation_this_run_chose() -> None:
    """The forced-portable pass reaches the commands, servers and seats the tests start (tests/userenv.py)."""
    env = userenv.user_env({"PYTHONPATH": str(SRC)})
    code = "from fabrikito.base import hostos; print(hostos.NAME)"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == hostos.NAME
    assert (userenv.MACHINE.get(hostos.PORTABLE_ENV) == "1") == hostos.PORTABLE


# -- the same answers --------------------------------------------------------------------


@pytest.fixture
def on_a_terminal() -> Iterator[int]:
    """A process leading a session of its own on a terminal (as a tmux pane's shell does)."""
    pid, master = pty.fork()
    if pid == 0:
        try:
            os.execvp("sleep", ["sleep", "60"])  # noqa: S606 (a program, no shell)
        finally:
            os._exit(127)
    time.sleep(0.05)
    for _ in range(200):
        if _execed(pid, ["sleep", "60"]):
            break
        time.sleep(0.01)
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(master)


def _execed(pid: int, argv: list[str]) -> bool:
    """Whether ``pid`` runs ``argv`` with its new environment in place: its program link changes early in
    ``execve``, its arguments and environment a moment later (read between, the environment is empty)."""
    try:
        return linux.exe_name(pid) == argv[0] and linux.cmdline(pid) == argv and bool(linux.environ(pid))
    except hostos.ProcessGone:
        return False


def test_both_read_a_process_alike(on_a_terminal: int) -> None:
    for pid in (os.getpid(), on_a_terminal):
        assert replace(portable.info(pid), tty_pgrp=0) == replace(linux.info(pid), tty_pgrp=0)
        assert portable.stat(pid) == linux.stat(pid)
        assert portable.parent(pid) == linux.parent(pid)
        assert portable.exe_path(pid) == linux.exe_path(pid)
        assert portable.exe_name(pid) == linux.exe_name(pid)
        assert portable.cmdline(pid) == linux.cmdline(pid)
        assert portable.environ(pid) == linux.environ(pid)
        assert portable.cwd(pid) == linux.cwd(pid)
        assert portable.alive(pid) and linux.alive(pid)
    shown = linux.info(on_a_terminal)
    assert shown.sid == shown.pgrp == on_a_terminal
    assert portable.foreground_group(portable.info(on_a_terminal)) == linux.foreground_group(shown) == on_a_terminal
    assert portable.foreground_group(portable.info(os.getpid())) == linux.foreground_group(linux.info(os.getpid()))
    # This process's children are this test's and any an earlier test left ending (read twice, they may
    # differ): the children compared are those of a parent of the test's own.
    assert on_a_terminal in set(linux.children_of(os.getpid())) & set(portable.children_of(os.getpid()))
    parent = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"], start_new_session=True)
    try:
        for _ in range(500):
            if len(kids := linux.children_of(parent.pid)) == 2 and all(_execed(k, ["sleep", "60"]) for k in kids):
                break
            time.sleep(0.01)
        assert sorted(linux.children_of(parent.pid)) == sorted(portable.children_of(parent.pid)) == sorted(kids)
        assert len(kids) == 2
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
    assert on_a_terminal in set(portable.pids()) & set(linux.pids())


def test_environ_values_reads_names_as_environ_has_them() -> None:
    # A name given twice (the last counts, as in environ), a value holding "NAME=" and "=", an empty value,
    # a name that is a prefix of another, bytes that are not UTF-8, and a name absent.
    block = [b"HOMEX=not-home", b"HOME=/first", b"X=HOME=/forged", b"HOME=/last=end", b"EMPTY=", b"BAD=\xff\xfe"]
    child = subprocess.Popen([b"env", b"-i", *block, b"sleep", b"30"])
    try:
        for _ in range(200):
            if _execed(child.pid, ["sleep", "30"]):
                break
            time.sleep(0.01)
        names = ("HOME", "EMPTY", "BAD", "MISSING", "HOMEX", "X")
        for impl in (linux, portable):
            whole = impl.environ(child.pid)
            assert impl.environ_values(child.pid, names) == {name: whole[name] for name in names if name in whole}
        assert linux.environ_values(child.pid, ("HOME", "MISSING")) == {"HOME": "/last=end"}
    finally:
        child.kill()
        child.wait()
    with pytest.raises(hostos.ProcessGone):
        linux.environ_values(child.pid, ("HOME",))


def test_both_tell_a_zombie_and_a_gone_process() -> None:
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while linux.alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not linux.alive(child.pid) and not portable.alive(child.pid)  # a zombie runs no more
    stat_l, stat_p = linux.stat(child.pid), portable.stat(child.pid)
    assert stat_l is not None and stat_p is not None and stat_l.state == stat_p.state == "Z"
    child.wait()
    for impl in (linux, portable):
        assert not impl.alive(child.pid)
        assert impl.stat(child.pid) is None and impl.parent(child.pid) is None and impl.cwd(child.pid) is None
        for call in (impl.info, impl.cmdline, impl.environ, impl.exe_path, impl.children_of):
            with pytest.raises(hostos.ProcessGone):
                call(child.pid)


def test_both_see_who_connected_to_a_unix_socket(tmp_path: Path) -> None:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        assert portable.peer_cred(left) == linux.peer_cred(left) == hostos.PeerCred(uid=os.getuid(), pid=os.getpid())
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(1)
        code = f"import socket, time; s = socket.socket(socket.AF_UNIX); s.connect({path!r}); time.sleep(30)"
        child = subprocess.Popen([sys.executable, "-c", code])
        try:
            conn, _ = listener.accept()
            with conn:
                assert portable.peer_cred(conn) == linux.peer_cred(conn) == hostos.PeerCred(os.getuid(), child.pid)
        finally:
            child.kill()
            child.wait()


def test_a_struct_xucred_as_macos_lays_it_out_gives_its_uid() -> None:
    """What LOCAL_PEERCRED returns on a Mac: cr_version 0, cr_uid, cr_ngroups, cr_groups[16] (76 bytes)."""
    raw = struct.pack("=IIh2x16I", 0, 501, 2, 20, 12, *([0] * 14))
    assert len(raw) == 76 and portable.decode_xucred(raw) == 501
    with pytest.raises(OSError, match="version 1"):
        portable.decode_xucred(struct.pack("=IIh2x16I", 1, 501, 1, *([0] * 16)))
    with pytest.raises(OSError, match="not a struct xucred"):
        portable.decode_xucred(raw[:8])


def test_both_lock_files_keep_a_forked_process_out() -> None:
    for impl in (linux, portable):
        fd = impl.lock_file("fabrikito-test")
        try:
            assert os.fstat(fd).st_nlink == 0  # no name anyone could open
            assert impl is linux or os.fstat(fd).st_mode & 0o777 == 0o600
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            child = os.fork()
            if child == 0:
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    os._exit(0)
                except OSError:
                    os._exit(7)
            assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 7, impl.NAME
            fcntl.lockf(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def test_both_find_the_process_listening_on_a_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "l.sock")
    code = f"import socket, time; s = socket.socket(socket.AF_UNIX); s.bind({path!r}); s.listen(1); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
        for impl in (linux, portable):
            assert impl.socket_owner(path, [], deadline=time.monotonic() + 10) == child.pid, impl.NAME
            assert impl.socket_owner(path, [os.getpid(), child.pid], deadline=time.monotonic() + 10) == child.pid
            assert impl.socket_owner(str(tmp_path / "none.sock"), [], deadline=time.monotonic() + 10) is None
    finally:
        child.kill()
        child.wait()


def test_the_pid_domain_is_the_system_s_and_the_portable_socket_room_is_macos_s() -> None:
    domain = linux.pid_domain()
    assert domain is not None and domain.startswith("linux:") and ":pid:[" in domain
    assert portable.pid_domain() == domain  # on Linux the system's own, as Claude Code here writes it
    assert (linux.MAX_SOCKET_PATH, portable.MAX_SOCKET_PATH) == (107, 103)
    assert os.path.realpath("/tmp") == portable.SHORT_ROOT  # /private/tmp on a Mac: no link in the path


def test_a_pid_domain_of_another_system_is_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    own = linux.pid_domain()
    assert own is not None
    assert linux.pid_domain_matches(own) is True
    assert linux.pid_domain_matches("linux:0000:pid:[1]") is False
    assert portable.pid_domain_matches(own) is True
    assert portable.pid_domain_matches("linux:0000:pid:[1]") is False
    monkeypatch.setattr(sys, "platform", "darwin")
    assert portable.pid_domain() is None
    assert portable.pid_domain_matches(own) is False  # a Linux entry in a folder a Mac shares
    assert portable.pid_domain_matches("darwin:whatever") is None
