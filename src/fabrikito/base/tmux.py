"""The one module that runs tmux.

Every call goes through a :class:`Server`, which always names the server
(``-L name`` or ``-S path``; the user's default server is ``-L default``),
passes an argument list (never a shell), has a timeout, checks the exit code
and raises :class:`~fabrikito.base.errors.TmuxError`, which says which command
failed and what tmux said.  Panes are addressed by their ``%id``.

Nothing else in fabrikito starts tmux.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from fabrikito.base import spawn
from fabrikito.base.errors import TmuxError
from fabrikito.base.values import frozen

DEFAULT_TIMEOUT = 5.0
DEFAULT_SOCKET_NAME = "default"
#: Between the values of a ``-F`` format.  Every supported release prints a tab as it is (tmux 3.5a
#: writes other control characters, U+001F among them, as ``\\037``); a value that may itself hold a
#: tab (a name, a title, a path) goes last in its format, and :func:`split_fields` leaves it whole.
FIELD_SEP = "\t"
#: Put before every command: tmux reads and writes UTF-8 whatever the locale says (without it, under
#: ``LANG=C``, it prints a session name's ``é`` as ``_``).
GLOBAL_FLAGS = ("-u",)
#: The fields of a pane fabrikito lists (seatpane.PaneRow); fixed, so the call can start before the rest
#: is imported.  The session's name last: the one value that is text.
PANE_FIELDS = ("pane_id", "pane_pid", "pane_dead", "pid", "window_id", "session_name")


@frozen
class Server:
    """A tmux server, named by socket name (``-L``) or socket path (``-S``)."""

    socket_name: str | None = None
    socket_path: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    binary: str = "tmux"

    def __post_init__(self) -> None:
        if self.socket_name is not None and self.socket_path is not None:
            raise ValueError("name a tmux server by socket_name or socket_path, not both")

    # -- identity -----------------------------------------------------------

    @property
    def server_flags(self) -> list[str]:
        if self.socket_path is not None:
            return ["-S", self.socket_path]
        return ["-L", self.socket_name or DEFAULT_SOCKET_NAME]

    @property
    def is_default(self) -> bool:
        """True for the user's default server (``-L default``)."""
        if self.socket_path is not None:
            return os.path.realpath(self.socket_path) == os.path.realpath(default_socket_path())
        return (self.socket_name or DEFAULT_SOCKET_NAME) == DEFAULT_SOCKET_NAME

    def resolved_socket_path(self) -> str:
        """The socket file this server listens on, computed without running tmux."""
        if self.socket_path is not None:
            return self.socket_path
        return socket_path_for_name(self.socket_name or DEFAULT_SOCKET_NAME)

    def describe(self) -> str:
        if self.socket_path is not None:
            return f"tmux server at {self.socket_path}"
        return f"tmux server '{self.socket_name or DEFAULT_SOCKET_NAME}'"

    # -- running ------------------------------------------------------------

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        """Run one tmux command; return its stdout (decoded, errors replaced)."""
        return self.start(*args, input=input, env=env).result(timeout)

    def start(self, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None) -> Pending:
        """Start one tmux command and return at once; :meth:`Pending.result` waits for its stdout.

        The caller works while tmux answers (``status`` imports its modules while
        the pane list is made, reads ``/proc`` while the screens are captured).
        """
        argv = [self.binary, *GLOBAL_FLAGS, *self.server_flags, *args]
        started: spawn.Started | TmuxError
        try:
            started = spawn.start(argv, os.environ if env is None else env, input or b"")
        except OSError as exc:
            started = TmuxError(argv, returncode=None, stderr=str(exc), reason="could not be started")
        return Pending(argv, started, self.timeout)

    def version(self) -> tuple[int, int, str]:
        """The release of this server's tmux program (``tmux -V``: 3.5a is ``(3, 5, "a")``), read once per
        program (the one ``PATH`` finds now); ``(0, 0, "")`` when it says nothing a release reads from."""
        import shutil

        program = shutil.which(self.binary) or self.binary
        known = _versions.get(program)
        if known is None:
            try:
                said = Server.start(self, "-V").result()  # a program of its own, even for a subclass
            except TmuxError:
                said = ""
            known = _versions[program] = parse_version(said)
        return known

    def listening(self) -> bool:
        """Whether a server accepts connections on this server's socket, found without running tmux.

        A socket file alone is not enough: a server that was killed can leave it behind.
        """
        import socket

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(1.0)
            sock.connect(self.resolved_socket_path())
        except OSError:
            return False
        finally:
            sock.close()
        return True

    def alive(self) -> bool:
        """Whether the server answers (a failing ``list-sessions`` means no)."""
        try:
            self.run("list-sessions", "-F", "#{session_id}")
        except TmuxError:
            return False
        return True

    # -- sessions and panes ---------------------------------------------------

    def new_session(
        self,
        name: str,
        command: Sequence[str],
        *,
        cwd: str,
        width: int = 220,
        height: int = 50,
        env: Mapping[str, str] | None = None,
    ) -> str:
        """Start a detached session running ``command``; return its pane id."""
        args = [
            "new-session",
            "-d",
            "-P",
            "-F",
            "#{pane_id}",
            "-s",
            name,
            "-c",
            cwd,
            "-x",
            str(width),
            "-y",
            str(height),
        ]
        for key, value in (env or {}).items():
            args += ["-e", f"{key}={value}"]
        args.append("--")
        args += list(command)
        return self.run(*args).strip()

    def has_session(self, name: str) -> bool:
        try:
            self.run("has-session", "-t", f"={name}")
        except TmuxError:
            return False
        return True

    def kill_session(self, name: str) -> None:
        self.run("kill-session", "-t", f"={name}")

    def kill_pane(self, pane: str) -> None:
        self.run("kill-pane", "-t", pane)

    def kill_server(self) -> None:
        self.run("kill-server")

    def list_panes(
        self, fields: Sequence[str] = PANE_FIELDS, *, started: Pending | None = None
    ) -> list[dict[str, str]]:
        """Every pane of the server (``-a``), one dict per pane with ``fields``.

        Fields are tmux format variable names (``pane_id``, ``session_name``...).
        Framed as :func:`format_of` and :func:`records` say.
        ``started`` is the same call begun earlier by :meth:`start_list_panes`.
        """
        out = self.run(*_list_panes_args(fields)) if started is None else started.result()
        rows = []
        for line in records(out):
            values = split_fields(line, len(fields))
            if values is not None:
                rows.append(dict(zip(fields, values, strict=True)))
        return rows

    def start_list_panes(self, fields: Sequence[str] = PANE_FIELDS) -> Pending:
        """:meth:`list_panes`'s tmux call, started now and read later."""
        return self.start(*_list_panes_args(fields))

    def display(self, target: str, fmt: str) -> str:
        """``display-message -p`` on one pane."""
        return self.run("display-message", "-p", "-t", target, fmt).rstrip("\n")

    def pane_fields(self, pane: str, fields: Sequence[str]) -> dict[str, str]:
        out = self.display(pane, format_of(fields))
        values = split_fields(out, len(fields))
        if values is None:
            raise TmuxError(
                ["display-message", "-t", pane], returncode=0, stderr=out, reason="answered in an unexpected shape"
            )
        return dict(zip(fields, values, strict=True))

    def capture(self, pane: str, *, escapes: bool = False, start: int | None = None) -> str:
        """The visible screen of ``pane`` (``-e`` keeps colours and attributes)."""
        args = ["capture-pane", "-p", "-t", pane]
        if escapes:
            args.append("-e")
        if start is not None:
            args += ["-S", str(start)]
        return self.run(*args)

    def send_keys(self, pane: str, *keys: str, literal: bool = False) -> None:
        args = ["send-keys", "-t", pane]
        if literal:
            args.append("-l")
        args.append("--")
        self.run(*args, *keys)

    def paste(self, pane: str, text: str, *, bracketed: bool = True) -> None:
        """Paste ``text`` into ``pane`` through a uniquely named buffer.

        One tmux invocation loads the buffer from stdin (no shell, no argument
        length limit) and pastes it with ``-d``, so tmux deletes it; when the
        paste fails the buffer is deleted here, so none is left behind.
        """
        name = buffer_name()
        self.paste_buffer(name, pane, bracketed=bracketed, first=["load-buffer", "-b", name, "-", ";"], input=text)

    def paste_buffer(
        self, name: str, pane: str, *, bracketed: bool, first: Sequence[str] = (), input: str | None = None
    ) -> None:
        """Paste buffer ``name`` into ``pane`` and delete it (``first``: commands run before, in the same call,
        ``input`` their stdin); on failure the buffer is deleted here, so none is left behind."""
        paste = ["paste-buffer", "-d", "-b", name, "-t", pane]
        if bracketed:
            paste.insert(1, "-p")
        try:
            self.run(*first, *paste, input=None if input is None else input.encode("utf-8"))
        except TmuxError:
            self.drop_buffer(name)
            raise

    def drop_buffer(self, name: str) -> None:
        """Delete buffer ``name`` if tmux has it (never loaded, or already gone: nothing to do)."""
        try:
            self.run("delete-buffer", "-b", name)
        except TmuxError:
            pass

    def start_control_client(self, session: str) -> spawn.Started:
        """A tmux control-mode client (``-C``) attached to ``session``, created if needed with ``sleep`` in it
        (``new-session -A``), its stdin kept open for commands: :mod:`fabrikito.base.tmuxcontrol` speaks to
        it.  ``-N``: it never starts a server; ``ignore-size,no-output``: it sizes no window and is sent no
        pane's output.  Raises ``OSError`` when it cannot be started."""
        argv = [
            self.binary,
            *GLOBAL_FLAGS,
            *self.server_flags,
            "-N",
            "-C",
            "new-session",
            "-A",
            "-s",
            session,
            "-x",
            "16",
            "-y",
            "4",
        ]
        argv += ["-f", "ignore-size,no-output", "--", "sleep", "2147483647"]
        return spawn.start(argv, os.environ, keep_stdin=True)

    def resize_window(self, target: str, width: int, height: int) -> None:
        self.run("resize-window", "-t", target, "-x", str(width), "-y", str(height))

    def window_option(self, target: str, option: str) -> str | None:
        """A window option set on the window itself, or ``None`` when it is not set there."""
        out = self.run("show-options", "-w", "-q", "-t", target, option).strip()
        if not out:
            return None
        _, _, value = out.partition(" ")
        return value.strip().strip('"')

    def set_window_option(self, target: str, option: str, value: str | None) -> None:
        if value is None:
            self.run("set-option", "-w", "-u", "-t", target, option)
        else:
            self.run("set-option", "-w", "-t", target, option, value)


_versions: dict[str, tuple[int, int, str]] = {}


def parse_version(said: str) -> tuple[int, int, str]:
    """``tmux 3.5a`` -> ``(3, 5, "a")``; ``tmux next-3.8`` -> ``(3, 8, "")``; ``(0, 0, "")`` for anything else."""
    import re

    found = re.search(r"(\d+)\.(\d+)([a-z]?)", said)
    if found is None:
        return (0, 0, "")
    return (int(found.group(1)), int(found.group(2)), found.group(3))


def _list_panes_args(fields: Sequence[str]) -> list[str]:
    return ["list-panes", "-a", "-F", format_of(fields)]


def format_of(fields: Sequence[str]) -> str:
    """The ``-F`` format printing ``fields`` (tmux format variables) on one line, :data:`FIELD_SEP` between."""
    return FIELD_SEP.join("#{" + f + "}" for f in fields)


def records(out: str) -> list[str]:
    """tmux's output cut into its lines: at ``\\n`` only (``str.splitlines`` would also cut at the
    separators U+001C-U+001E, U+0085 and U+2028, which a value may hold); no empty last line."""
    lines = out.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def split_fields(line: str, count: int) -> list[str] | None:
    """The ``count`` values of one line of :func:`format_of`'s format; the last keeps any tab it holds,
    and what tmux 3.5a escaped in it is decoded (:func:`unescape`).  ``None`` when the line has fewer."""
    values = line.split(FIELD_SEP, count - 1)
    if len(values) != count:
        return None
    if "\\" in values[-1]:
        values[-1] = unescape(values[-1])
    return values


def unescape(value: str) -> str:
    """``value`` with each control character tmux 3.5a wrote as ``\\ooo`` (octal, below 040, or 177) put
    back.  tmux writes a backslash itself as it is, so a value that holds a backslash, three such digits
    and nothing escaped reads as the control character: fabrikito's own names never hold a backslash."""
    out: list[str] = []
    at = 0
    while (slash := value.find("\\", at)) >= 0:
        code = value[slash + 1 : slash + 4]
        if len(code) == 3 and all(c in "01234567" for c in code) and (code < "040" or code == "177"):
            out += [value[at:slash], chr(int(code, 8))]
            at = slash + 4
        else:
            out.append(value[at : slash + 1])
            at = slash + 1
    out.append(value[at:])
    return "".join(out)


class Pending:
    """A tmux command :meth:`Server.start` started (or why it could not be); :meth:`result` waits for it, once."""

    __slots__ = ("argv", "started", "timeout")

    def __init__(self, argv: list[str], started: spawn.Started | TmuxError, timeout: float) -> None:
        self.argv = argv
        self.started = started
        self.timeout = timeout

    def result(self, timeout: float | None = None) -> str:
        """Its stdout (decoded, errors replaced); :class:`TmuxError` as :meth:`Server.run` raises it."""
        if isinstance(self.started, TmuxError):
            raise self.started
        argv, limit = self.argv, self.timeout if timeout is None else timeout
        try:
            code, out, err = spawn.finish(self.started, limit)
        except TimeoutError as exc:
            raise TmuxError(argv, returncode=None, stderr=str(exc), reason=f"timed out after {limit:g}s") from None
        except OSError as exc:
            raise TmuxError(argv, returncode=None, stderr=str(exc), reason="could not be read") from None
        if code != 0:
            raise TmuxError(argv, returncode=code, stderr=err.decode("utf-8", "replace"))
        return out.decode("utf-8", "replace")


def buffer_name() -> str:
    """A paste buffer's name no other paste uses."""
    return f"fabrikito-{os.getpid()}-{os.urandom(6).hex()}"


def socket_path_for_name(name: str) -> str:
    """Where tmux puts the socket of ``-L name``, as tmux computes it."""
    tmpdir = os.environ.get("TMUX_TMPDIR") or "/tmp"  # noqa: S108 -- where tmux itself looks
    return os.path.join(tmpdir, f"tmux-{os.getuid()}", name)


def default_socket_path() -> str:
    return socket_path_for_name(DEFAULT_SOCKET_NAME)


def server_of_current_pane() -> str | None:
    """The socket path of the tmux server this process runs in, from ``$TMUX``."""
    value = os.environ.get("TMUX", "")
    if not value:
        return None
    return value.split(",", 1)[0] or None
