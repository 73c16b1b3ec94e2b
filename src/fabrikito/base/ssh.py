"""The one module that runs ssh: a command on another host, over one multiplexed connection.

A :class:`Host` is an ssh destination as the team file names it (``build-2``,
``user@host``, ``ssh://user@host:port``), as ``~/.ssh/config`` knows it; when
``$FABRIKITO_SSH_CONFIG`` is set, ssh reads that file instead (``-F``).  Every
call:

* goes through one OpenSSH ControlMaster connection per host, its socket in
  the team's ``.state/<team>/ssh/`` (started by :meth:`Host.connect` with
  ``-f -N``, kept for :data:`PERSIST` after the last use); a call finds the
  master by its socket and falls back to a connection of its own when the
  master has gone;
* runs with ``BatchMode=yes`` (no password or passphrase prompt, ever) and
  ``StrictHostKeyChecking=yes`` (an unknown or changed host key is an error,
  never a question), ``ConnectTimeout`` :data:`CONNECT_TIMEOUT` and a deadline
  of its own;
* passes the remote command as one string of ``shlex``-quoted words (ssh
  hands it to the remote user's shell), with ``~/.local/bin`` put first on
  ``PATH`` (where ``uv tool`` and ``pipx`` install) and a UTF-8 ``LANG``;
* raises :class:`HostError` naming the host, what went
  wrong (:class:`Problem`) and what to do, for ssh's own failures (exit 255).

ssh is started with ``posix_spawnp`` and pipes (:mod:`fabrikito.base.spawn`),
as tmux is: ``say`` to a seat on another host runs it.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import socket
import time
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path

from fabrikito.base import hostos
from fabrikito.base.errors import FabrikitoError
from fabrikito.base.spawn import TimedOut
from fabrikito.base.spawn import run as spawn_run
from fabrikito.base.values import frozen

CONNECT_TIMEOUT = 5
COMMAND_TIMEOUT = 30.0
#: How long a master connection stays after its last use.
PERSIST = "10m"
CONFIG_VARIABLE = "FABRIKITO_SSH_CONFIG"
SSH_FAILED = 255
#: A unix socket path is at most 107 bytes (103 on macOS); ssh adds a temporary suffix of 17 while it makes one.
SOCKET_ROOM = hostos.MAX_SOCKET_PATH - 17
#: The exit status of a remote shell that did not find the command.
NOT_FOUND = 127

#: What every remote command starts with (the gate of a restricted login checks it: launch/routelogin.py).
PREAMBLE = 'PATH="$HOME/.local/bin:$PATH" LANG="${LANG:-C.UTF-8}" '
#: fabrikito on a host: on its PATH, ``~/.local/bin`` first.
FABRIKITO = "fabrikito"


class Problem(StrEnum):
    """What went wrong on the way to another host (:class:`HostError` names one)."""

    UNREACHABLE = "unreachable"
    TIMED_OUT = "did not answer"
    HOST_KEY_CHANGED = "host key changed"
    HOST_KEY_UNKNOWN = "unknown host key"
    LOGIN_REFUSED = "login refused"
    DROPPED = "connection dropped"
    NO_SSH = "no ssh"
    NOT_INSTALLED = "fabrikito missing"


class HostError(FabrikitoError):
    """ssh could not run a command on another host: which host, what went wrong, what to do."""

    def __init__(self, host: str, problem: Problem, advice: str, *, detail: str = "", out: bytes = b"") -> None:
        self.host = host
        self.out = out  # what the remote command wrote before it failed (a dropped or timed-out one)
        self.problem = problem
        self.detail = detail.strip()
        said = f" (ssh: {self.detail})" if self.detail else ""
        super().__init__(f"host {host}: {advice}{said}")
        self.advice = advice

    @property
    def reason(self) -> str:
        """One line for a status row: the problem and what ssh said."""
        return f"{self.problem.value}: {self.detail or self.advice}"


@frozen
class Answer:
    """What a remote command did: its exit status, stdout and stderr."""

    code: int
    out: bytes
    err: str


@frozen
class Host:
    """One ssh destination, reached through a master connection whose socket is in ``control_dir``."""

    dest: str
    control_dir: Path

    @property
    def control_path(self) -> str:
        name = hashlib.sha256(self.dest.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        path = os.path.join(self.control_dir, name)
        if len(path.encode()) <= SOCKET_ROOM:
            return path
        # A deep checkout: the socket goes where a short path is sure (still private to this user).
        base = os.environ.get("XDG_RUNTIME_DIR") or f"{hostos.SHORT_ROOT}/fabrikito-ssh-{os.getuid()}"
        where = hashlib.sha256(str(self.control_dir).encode("utf-8", "surrogateescape")).hexdigest()[:12]
        return os.path.join(base, f"{where}-{name}")

    def options(self) -> list[str]:
        """ssh's options for every call to this host."""
        argv = ["ssh"]
        config = os.environ.get(CONFIG_VARIABLE)
        if config:
            argv += ["-F", config]
        for option in (
            "BatchMode=yes",
            "StrictHostKeyChecking=yes",
            f"ConnectTimeout={CONNECT_TIMEOUT}",
            "ServerAliveInterval=5",
            "ServerAliveCountMax=2",
            "LogLevel=ERROR",
            f"ControlPath={self.control_path}",
        ):
            argv += ["-o", option]
        return argv

    # -- the master connection ---------------------------------------------------------

    def master_up(self) -> bool:
        """Whether a master answers on the control socket (found without running ssh)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(1.0)
            sock.connect(self.control_path)
        except OSError:
            return False
        finally:
            sock.close()
        return True

    def connect(self, *, timeout: float = CONNECT_TIMEOUT + 5.0) -> None:
        """Start the master connection unless one answers; raise :class:`HostError` when ssh cannot connect.

        Under an ``flock`` on ``<socket>.lock``: the team's helpers (``up``'s hosts, the watcher, a ``say``) may
        each find no master at once, and a second ssh started on a socket in use would remove the first's
        socket, or carry on as a connection of its own that nothing ends.  One starts it; the others wait for
        that one (at most ``timeout``) and use it."""
        if self.master_up():
            return
        from fabrikito.base import daemons, statedir
        from fabrikito.base.errors import StateFileError

        parent = self._private_folder()
        try:
            fd = statedir.open_plain(Path(self.control_path + ".lock"), os.O_RDWR | os.O_CREAT)
        except (OSError, StateFileError) as exc:
            raise HostError(self.dest, Problem.UNREACHABLE, f"its lock in {parent} cannot be opened ({exc})") from None
        try:
            began = time.monotonic()
            waited = not daemons.flock_within(fd, 0.0)  # another process is starting it: that one is waited for
            if waited:
                daemons.flock_within(fd, timeout, step=0.05)
            if self.master_up():
                return  # started by the one that held the lock, before or while this one asked for it
            if waited and time.monotonic() - began > timeout - 1.0:  # it tried all this time and did not get through
                raise HostError(self.dest, Problem.UNREACHABLE, f"it did not answer within {timeout:g} s")
            self._start_master(max(1.0, timeout - (time.monotonic() - began)))
        finally:
            os.close(fd)

    def _private_folder(self) -> str:
        """The control socket's folder, made private (0700, this user's, no link) if it is not yet."""
        from fabrikito.base import statedir

        parent = os.path.dirname(self.control_path)
        if Path(parent) == Path(self.control_dir):
            for level in (2, 1, 0):  # .state/, .state/<team>/, .state/<team>/ssh/ (0700 each)
                statedir.ensure_dir(Path(parent).parents[level - 1] if level else Path(parent))
        else:
            os.makedirs(parent, mode=0o700, exist_ok=True)
            st = os.lstat(parent)
            if not os.path.isdir(parent) or os.path.islink(parent) or st.st_uid != os.getuid() or st.st_mode & 0o077:
                raise HostError(
                    self.dest, Problem.UNREACHABLE, f"{parent} is not a private directory of this user: remove it"
                )
        return parent

    def _start_master(self, timeout: float) -> None:
        """``ssh -f -N`` as the master, in place of a socket a master that died left (the lock is held)."""
        try:
            os.unlink(self.control_path)  # a socket left by a master that died: ssh will not replace it
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise HostError(self.dest, Problem.UNREACHABLE, f"its control socket cannot be replaced ({exc})") from None
        argv = [*self.options(), "-o", "ControlMaster=yes", "-o", f"ControlPersist={PERSIST}", "-f", "-N", self.dest]
        try:
            answer = self._spawn(argv, b"", timeout)
        except HostError as exc:  # no command ran: a host that does not answer is unreachable
            if exc.problem is not Problem.TIMED_OUT:
                raise
            raise HostError(self.dest, Problem.UNREACHABLE, exc.advice, detail=exc.detail) from None
        if answer.code != 0:
            raise classify(self.dest, answer.err, answer.code)

    def disconnect(self) -> None:
        """End the master connection, if there is one."""
        if self.master_up():
            try:
                self._spawn([*self.options(), "-O", "exit", self.dest], b"", 5.0)
            except HostError:
                pass

    # -- commands -----------------------------------------------------------------------

    def run(
        self,
        args: Sequence[str],
        *,
        program: str = FABRIKITO,
        input: bytes = b"",
        timeout: float = COMMAND_TIMEOUT,
        on_out: Callable[[bytes], None] | None = None,
    ) -> Answer:
        """Run ``program args...`` on the host (connecting first when needed); its answer, whatever its exit status.

        ``program`` is a shell command (fabrikito as the host runs it); ``args`` are quoted word by word.

        Raises :class:`HostError` when ssh itself fails (exit 255) or the deadline passes.
        """
        deadline = time.monotonic() + timeout
        self.connect(timeout=min(timeout, CONNECT_TIMEOUT + 5.0))
        command = f"{PREAMBLE}{program} {shlex.join(args)}"
        left = max(0.5, deadline - time.monotonic())
        argv = [*self.options(), "-o", "ControlMaster=no", "-T", self.dest, command]
        answer = self._spawn(argv, input, left, shown=timeout, on_out=on_out)
        if answer.code == SSH_FAILED:
            raise classify(self.dest, answer.err, answer.code, started=bool(answer.out), out=answer.out)
        return answer

    def _spawn(
        self,
        argv: list[str],
        data: bytes,
        timeout: float,
        *,
        shown: float | None = None,
        on_out: Callable[[bytes], None] | None = None,
    ) -> Answer:
        try:
            code, out, err = spawn_run(argv, data, timeout, os.environ, on_out)
        except TimedOut as exc:
            raise HostError(
                self.dest,
                Problem.TIMED_OUT,
                f"it did not answer within {shown or timeout:g} s",
                detail=str(exc),
                out=exc.out,
            ) from None
        except OSError as exc:
            raise HostError(
                self.dest, Problem.NO_SSH, f"ssh could not be started ({exc.strerror}): install OpenSSH's client"
            ) from None
        return Answer(code, out, err.decode("utf-8", "replace"))


#: ssh's words for a failure, what it is, and what to do (``{dest}``, ``{quoted}``: the host).
_KNOWN_FAILURES: tuple[tuple[tuple[str, ...], Problem, str], ...] = (
    (
        ("REMOTE HOST IDENTIFICATION HAS CHANGED", "has changed and you have requested strict checking"),
        Problem.HOST_KEY_CHANGED,
        "its host key has CHANGED since it was recorded in known_hosts. That may be an attack; if you know the "
        "host was reinstalled, remove the old key (ssh-keygen -R {quoted}), check the new one with `ssh {dest}`, "
        "then try again",
    ),
    (
        ("host key is known", "Host key verification failed"),
        Problem.HOST_KEY_UNKNOWN,
        "its host key is not in known_hosts. Connect once by hand (`ssh {dest}`), check the key's fingerprint and "
        "accept it, then try again; fabrikito never accepts a host key itself",
    ),
    (
        ("Permission denied", "Too many authentication failures"),
        Problem.LOGIN_REFUSED,
        "it refused the login. fabrikito logs in without a prompt (BatchMode): set up key login for {dest} "
        "(ssh-copy-id, or an ssh-agent holding the key), check it with `ssh -o BatchMode=yes {dest} true`, then "
        "try again",
    ),
)


def classify(dest: str, stderr: str, code: int, *, started: bool = False, out: bytes = b"") -> HostError:
    """The :class:`HostError` for ssh's failure ``stderr``."""
    lines = [line.strip() for line in stderr.replace("\r", "").split("\n") if line.strip()]
    useful = [line for line in lines if not line.startswith(("@", "Control socket connect", "Please contact"))]
    said = "; ".join(useful[-3:]) or f"ssh exited with status {code}"
    for markers, problem, advice in _KNOWN_FAILURES:  # in this order: a changed key also fails verification
        if any(marker in stderr for marker in markers):
            return HostError(dest, problem, advice.format(dest=dest, quoted=repr(dest)), detail=said)
    if started:
        return HostError(dest, Problem.DROPPED, "the connection dropped while the command ran", detail=said, out=out)
    return HostError(dest, Problem.UNREACHABLE, "it cannot be reached", detail=said)
