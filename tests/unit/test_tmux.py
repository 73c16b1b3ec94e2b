from __future__ import annotations

import socket
from pathlib import Path

import pytest

from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server


def test_every_command_names_the_server() -> None:
    assert Server(socket_name="x").server_flags == ["-L", "x"]
    assert Server(socket_path="/tmp/s").server_flags == ["-S", "/tmp/s"]
    assert Server().server_flags == ["-L", "default"]
    assert Server().is_default
    assert not Server(socket_name="x").is_default


def test_failure_names_the_command_and_what_tmux_said(server: Server) -> None:
    with pytest.raises(TmuxError) as info:
        server.run("display-message", "-p", "-t", "%9999", "x")
    text = str(info.value)
    assert "display-message" in text
    assert server.server_flags[1] in text
    assert "exited with status 1" in text


def test_timeout_is_an_error_not_a_hang(server: Server) -> None:
    server.new_session("s", ["sleep", "30"], cwd="/")
    with pytest.raises(TmuxError, match="timed out"):
        server.run("run-shell", "sleep 3", timeout=0.3)


def test_paste_uses_a_buffer_and_leaves_none(server: Server) -> None:
    pane = server.new_session("s", ["cat"], cwd="/", width=80, height=10)
    server.paste(pane, "hello 'quoted' $HOME ✓", bracketed=False)
    out = ""
    import time

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        out = server.capture(pane)
        if "✓" in out:
            break
        time.sleep(0.05)
    assert "hello 'quoted' $HOME ✓" in out
    assert server.run("list-buffers", "-F", "#{buffer_name}").strip() == ""


def test_list_panes_and_window_options(server: Server) -> None:
    pane = server.new_session("s", ["sleep", "30"], cwd="/", width=100, height=20)
    rows = server.list_panes(["pane_id", "session_name", "pane_width", "pane_height"])
    assert rows == [{"pane_id": pane, "session_name": "s", "pane_width": "100", "pane_height": "20"}]
    assert server.window_option("=s:", "window-size") is None
    server.set_window_option("=s:", "window-size", "manual")
    assert server.window_option("=s:", "window-size") == "manual"
    server.set_window_option("=s:", "window-size", None)
    assert server.window_option("=s:", "window-size") is None


# -- the runner under Server.run (posix_spawn, pipes, a deadline) ---------------------------------


def test_runner_passes_stdin_and_reads_both_outputs_past_a_pipe_buffer() -> None:
    import os

    from fabrikito.base import spawn

    data = os.urandom(300_000)  # more than a pipe holds: writing and reading must interleave
    code, out, err = spawn.run(["sh", "-c", "cat; echo oops >&2; exit 3"], data, 10, os.environ)
    assert (code, out, err) == (3, data, b"oops\n")
    assert spawn.run(["sh", "-c", "read x || echo empty"], b"", 10, {"PATH": os.environ["PATH"]})[1] == b"empty\n"


def test_runner_kills_and_reaps_at_the_deadline_and_keeps_stderr(tmp_path: Path) -> None:
    import os
    import time

    from fabrikito.base import spawn

    pid_file = tmp_path / "pid"
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="partial"):
        spawn.run(["sh", "-c", f"echo $$ > {pid_file}; echo partial >&2; exec sleep 30"], b"", 0.5, os.environ)
    assert time.monotonic() - started < 5
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped: no process, not even a zombie
        os.kill(pid, 0)


def test_runner_missing_binary_is_oserror_and_server_says_could_not_be_started() -> None:
    import os

    from fabrikito.base import spawn

    with pytest.raises(FileNotFoundError):
        spawn.run(["no-such-binary-for-fabrikito"], b"", 5, os.environ)
    with pytest.raises(TmuxError, match="could not be started"):
        Server(socket_name="x", binary="no-such-binary-for-fabrikito").run("list-sessions")


def test_runner_works_with_stdin_stdout_and_stderr_closed() -> None:
    import os

    code = (
        "import os, sys\n"
        "from fabrikito.base import spawn\n"
        "for fd in (0, 1, 2): os.close(fd)\n"
        "code, out, err = spawn.run(['sh', '-c', 'cat; echo e >&2'], b'in', 10, os.environ)\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY)\n"
        "os.write(fd, repr((code, out, err)).encode())\n"
    )
    import subprocess
    import sys
    import tempfile

    with tempfile.NamedTemporaryFile() as result:
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
        subprocess.run([sys.executable, "-c", code, result.name], env=env, check=True, timeout=30)
        assert Path(result.name).read_text() == repr((0, b"in", b"e\n"))


def test_listening_tells_a_running_server_from_a_socket_file_left_behind(server: Server, tmp_path: Path) -> None:
    assert not server.listening()
    server.run("new-session", "-d", "-s", "x", "sleep", "60")
    assert server.listening()
    stale = tmp_path / "stale.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(stale))
    sock.close()  # the file stays, nobody listens: as a killed server leaves it
    assert stale.exists()
    assert not Server(socket_path=str(stale)).listening()


def test_a_signal_just_after_the_child_was_reaped_keeps_its_own_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    """A handler that raises (say's SIGTERM) right after ``waitpid`` reaped the child: that exception goes
    on, not an ECHILD from the clean-up, and the reaped pid is never signalled."""
    import os

    from fabrikito.base import spawn

    class Stopped(Exception):
        pass

    real_waitpid = os.waitpid
    killed: list[int] = []

    def waitpid(pid: int, options: int) -> tuple[int, int]:
        found = real_waitpid(pid, options)
        if options == 0:
            raise Stopped  # as a signal handler raising between the reap and the assignment
        return found

    monkeypatch.setattr(os, "waitpid", waitpid)
    monkeypatch.setattr(os, "kill", lambda pid, sig: killed.append(pid))
    with pytest.raises(Stopped):
        spawn.run(["true"], b"", 5, os.environ)
    assert killed == []
