"""The team's tmux control-mode client: a look at a seat without a tmux process of its own.

A look at a seat is otherwise a tmux process (2-3 ms of CPU, eight to twelve
of them a ``say``, on the cores where the agent is drawing the paste being
checked).  The team's command server (:mod:`fabrikito.cli.server`) holds one
tmux control-mode client (``tmux -C``, started by
:meth:`fabrikito.base.tmux.Server.start_control_client`), and the commands it
forks (``say``, ``flush``) send their tmux commands to it as lines of tmux's
command language (:class:`Controlled`): an answer comes back in about 0.1 ms.

Why one client, held by the server, and only when no client is attached:
tmux before 3.7 crashes (the whole server, every seat with it) when it sends a
notification (a session created or closed, a client detached, a pane entering
copy mode...) to a control client that is still connecting (tmux issue 4980,
fixed in 3.7).  A client per command would connect at any moment, next to
other commands' clients coming and going; measured here, two connecting at
once crashed tmux 3.3a in 8 runs of 15.  So the server connects one client,
and, before tmux 3.7, only when tmux lists no attached client (no person who
could detach or scroll meanwhile; it looks again every 10 s while it has none;
on 3.7 and later it connects whoever is attached: :func:`may_connect`, by the
release ``tmux -V`` names): :func:`connect`, called holding a lock of the tmux
server's that ``up`` and ``down`` also hold while they create or kill sessions
(:func:`tmux_events`; two teams may share a tmux server).

The client attaches to a session of its own (:data:`CONTROL_SESSION`, running
``sleep``; a seat's session name starts with a letter or a digit), never to a
seat's: an attached client sends the seat's pane focus events.  Nothing is
written to it before tmux says it is attached (``%session-changed``): tmux
runs what a control client writes as it arrives, even before the command that
attaches it.  Its owner kills that session (by id) when it ends; one left by
an owner killed outright is removed by ``down`` (:func:`remove_leftover`).
Not ``destroy-unattached``: tmux 3.3a then keeps clients pointing at the freed
session, and crashed (4 runs in 20) when a command connected as it went.

The commands share the client one at a time (a lock on a memory file the
forked commands inherit).  Each exchange is one write of at most ``PIPE_BUF``
bytes (all or nothing, even for a command killed mid-write): a random marker
printed first, the command, a second marker.  Whatever a command killed
mid-exchange left unread comes before the first marker and is skipped.  tmux
wraps each command's output in ``%begin T N F`` ... ``%end T N F`` (or
``%error``) and writes notifications between blocks; a captured screen can
show a line like ``%end ...`` but never the markers (printed to this client
only).  So the answer is what lies between the markers' blocks: every block
but the last ends at its first end line (tmux's own output), the last at its
last one (a capture's forged line comes before the real one); at most one
command of a chain may print a screen, as its last.

A command that cannot be sent (the client gone, or busy past
:data:`LOCK_WAIT`) runs as a tmux process of its own; so does one that only
reads whose answer did not come.  One that types and was sent is never sent
again: no answer is an error, as a tmux process that failed.
"""

from __future__ import annotations

import fcntl
import os
import select
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from fabrikito.base import hostos, spawn
from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Pending, Server, buffer_name, format_of, records, split_fields
from fabrikito.base.tmuxwire import (
    READ_ONLY,
    WRITE_MAX,
    Data,
    marker_block,
    one_screen_last,
    parse_answer,
    pieces,
    quote,
    screen_parts,
    separates,
)
from fabrikito.base.values import replace

CONTROL_SESSION = "_fabrikito-control"
#: Commands that only read: run by a tmux process of their own when the client did not answer.
LOCK_WAIT = 1.0
ATTACH_WAIT = 3.0
CONNECT_WAIT = 3.0
#: Each byte as :func:`quote` writes it inside double quotes (by ``str.translate``, over the bytes read as
#: Latin-1: one character a byte).


class NotSent(TmuxError):
    """Nothing was written to the client: the command may run as a tmux process of its own."""


class Unanswered(TmuxError):
    """The command was written and its answer did not come: it may have run."""


class Control:
    """One control-mode client, started by the process that creates this (its owner, the server)."""

    __slots__ = (
        "broken",
        "buffer",
        "flags",
        "lines",
        "lock_fd",
        "owner",
        "proc",
        "sent",
        "seq",
        "session_id",
        "timeout",
    )

    def __init__(self, server: Server) -> None:
        self.flags = server.server_flags
        self.timeout = server.timeout
        self.owner = os.getpid()
        self.seq = 0  # exchanges made (by this process)
        self.buffer = b""
        self.lines: list[bytes] = []
        self.broken: str | None = None  # why it cannot be used (in this process)
        self.session_id = ""  # its session's, once attached
        self.sent: Sent | None = None  # chains written by this process whose answers are still to be read
        self.lock_fd = hostos.lock_file("fabrikito-tmux-control")
        try:
            self.proc = server.start_control_client(CONTROL_SESSION)
        except OSError:
            os.close(self.lock_fd)
            raise

    # -- the owner -------------------------------------------------------------

    def attach(self) -> bool:
        """Wait until tmux reports the client attached to its session; ``False`` (and the client ended)
        when it did not attach."""
        deadline = time.monotonic() + ATTACH_WAIT
        head = b"%session-changed "
        try:
            while True:
                for line in self.lines:
                    if line.startswith(b"%error ") or line == b"%exit":
                        raise Unanswered([], returncode=None, stderr=b" ".join(self.lines).decode("utf-8", "replace"))
                    if line.startswith(head) and line.endswith(b" " + CONTROL_SESSION.encode()):
                        self.session_id = line[len(head) :].split(b" ", 1)[0].decode("ascii", "replace")
                        self.exchange(["display-message", "-p", "attached"])
                        return True
                self._read_more(deadline)
        except TmuxError as exc:
            self.broken = f"it did not attach: {exc}"
            self.close()
            return False

    def drain(self) -> None:
        """Read what tmux wrote meanwhile (notifications), unless a command holds the client."""
        if self.broken is not None or self.sent is not None or not self._lock(0.0):
            return
        try:
            while select.select([self.proc.out_r], [], [], 0)[0]:
                if not os.read(self.proc.out_r, 1 << 16):
                    self.broken = "it ended"
                    return
        finally:
            self._unlock()

    def close(self) -> None:
        """The owner only: kill its session (by id, once no command holds the client: the client is then
        detached and ends), close its stdin and reap it.  Not ``destroy-unattached``: tmux 3.3a then
        leaves clients pointing at the freed session (fixed after 3.7), and crashed when a command
        connected meanwhile."""
        if os.getpid() != self.owner or self.proc.in_w < 0:
            return
        proc = self.proc
        if self.session_id and self._lock(LOCK_WAIT):
            try:
                if select.select([], [proc.in_w], [], 1.0)[1]:
                    os.write(proc.in_w, f"kill-session -t {quote(self.session_id)}\n".encode())
            except OSError:
                pass  # it is gone already
        self.broken = self.broken or "closed"
        os.close(proc.in_w)
        self.proc = replace(proc, in_w=-1)
        try:
            ended = False
            while not ended and select.select([proc.out_r], [], [], 1.0)[0]:
                ended = not os.read(proc.out_r, 1 << 16)
            if ended:  # its output closed: it is ending
                os.waitpid(proc.pid, 0)
        except ChildProcessError:
            pass  # reaped already (by the server's loop)
        finally:
            spawn.end(proc.pid)  # one that did not end within a second is killed
            for fd in (proc.out_r, proc.err_r, self.lock_fd):
                os.close(fd)

    # -- every process ---------------------------------------------------------

    def exchange(self, args: list[str], *, shown: list[str] | None = None) -> str:
        """Send one command chain (``;`` between commands, as for :meth:`Server.run`) and read its answer.

        Raises :class:`NotSent` (nothing written), :class:`Unanswered` (written, no answer), or
        :class:`TmuxError` with tmux's own error."""
        shown = list(args) if shown is None else shown
        self.finish_sent()
        if self.broken is not None:
            raise NotSent(shown, returncode=None, stderr=self.broken, reason="the control client is not usable")
        self.seq += 1
        # New for every exchange: forked commands start with the same state, and one killed mid-exchange
        # leaves its markers' blocks for the next to skip, never to take for its own.
        first, last = (f"fabrikito-{os.urandom(8).hex()}" for _ in range(2))
        line = " ".join(";" if separates(arg) else quote(arg) for arg in args)
        data = f"display-message -p {first}\n{line}\ndisplay-message -p {last}\n".encode("utf-8", "surrogateescape")
        if len(data) > WRITE_MAX:
            raise NotSent(shown, returncode=None, stderr="", reason="too long for one write to the control client")
        if not self._lock(LOCK_WAIT):
            raise NotSent(shown, returncode=None, stderr="", reason="the control client stayed busy")
        try:
            self.buffer, self.lines = b"", []
            deadline = time.monotonic() + self.timeout
            try:  # room for PIPE_BUF bytes first (a write never blocks), then one write: all of it or nothing
                if not select.select([], [self.proc.in_w], [], self.timeout)[1]:
                    self.broken = "it did not read its commands in time"
                    raise NotSent(shown, returncode=None, stderr=self.broken, reason="the control client is stuck")
                os.write(self.proc.in_w, data)
            except OSError as exc:
                self.broken = f"it stopped reading ({exc})"
                raise NotSent(shown, returncode=None, stderr=self.broken, reason="the control client is gone") from None
            try:
                start = self._block_of(first.encode(), deadline)
                del self.lines[: start + 2]
                end = self._block_of(last.encode(), deadline)
            except Unanswered as exc:
                raise Unanswered(shown, returncode=None, stderr=exc.stderr, reason="not answered") from None
            answer = parse_answer(self.lines[: end - 1], 1 + sum(map(separates, args)), shown)
            if isinstance(answer, TmuxError):
                raise answer
            return answer
        finally:
            self._unlock()

    def send(self, parts: Sequence[Sequence[str]], *, shown: list[str]) -> Sent:
        """Write several command chains that only read, each followed by a marker of its own, at once,
        without waiting for an answer: :meth:`Sent.answers` reads them (``status`` reads ``/proc``
        meanwhile, as it does while a tmux process of its own answers).  The client stays this process's
        until then.  Each write is at most :data:`WRITE_MAX` bytes of whole lines (a command killed between
        two writes leaves whole commands, which only read, and their answers come before the next
        exchange's first marker).  One exchange per part, as :attr:`seq` counts them.

        Raises :class:`NotSent` (nothing written) or :class:`Unanswered` (written in part)."""
        self.finish_sent()
        if self.broken is not None:
            raise NotSent(shown, returncode=None, stderr=self.broken, reason="the control client is not usable")
        markers = [f"fabrikito-{os.urandom(8).hex()}" for _ in range(len(parts) + 1)]
        lines = [f"display-message -p {markers[0]}\n"]
        for part, marker in zip(parts, markers[1:], strict=True):
            lines.append(" ".join(";" if separates(arg) else quote(arg) for arg in part) + "\n")
            lines.append(f"display-message -p {marker}\n")
        writes: list[bytes] = []
        for line in lines:
            data = line.encode("utf-8", "surrogateescape")
            if len(data) > WRITE_MAX:
                raise NotSent(shown, returncode=None, stderr="", reason="too long for one write to the control client")
            if writes and len(writes[-1]) + len(data) <= WRITE_MAX:
                writes[-1] += data
            else:
                writes.append(data)
        if not self._lock(LOCK_WAIT):
            raise NotSent(shown, returncode=None, stderr="", reason="the control client stayed busy")
        self.seq += len(parts)
        self.buffer, self.lines = b"", []
        deadline = time.monotonic() + self.timeout
        for index, data in enumerate(writes):
            try:
                self._write_reading(data, deadline)
            except (OSError, TmuxError) as exc:
                self._unlock()
                self.broken = self.broken or f"it stopped reading ({exc})"
                error = NotSent if index == 0 else Unanswered
                raise error(shown, returncode=None, stderr=self.broken, reason="not sent whole") from None
        self.sent = Sent(self, [m.encode() for m in markers], [1 + sum(map(separates, p)) for p in parts], shown)
        self.sent.deadline = deadline
        return self.sent

    def finish_sent(self) -> None:
        """Read the answers of the chains this process sent and has not read yet (so the next exchange is
        its own)."""
        if self.sent is not None:
            try:
                self.sent.answers()
            except TmuxError:
                pass  # read by whoever asks the Sent, which keeps its error

    def _write_reading(self, data: bytes, deadline: float) -> None:
        """Write ``data`` (at most PIPE_BUF bytes: at once, whole) once the pipe has room for it, reading
        what tmux answers meanwhile (it never waits on a reader, but this one is read as it comes)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Unanswered([], returncode=None, stderr="it did not read its commands in time")
            readable, writable, _ = select.select([self.proc.out_r], [self.proc.in_w], [], left)
            if writable:
                os.write(self.proc.in_w, data)
                return
            if readable:
                self._read_more(deadline)

    def _block_of(self, marker: bytes, deadline: float) -> int:
        """The index of ``marker``'s line in :attr:`lines`, once its whole block has been read."""
        while True:
            found = marker_block(self.lines, marker)
            if found is not None:
                return found
            self._read_more(deadline)

    def _read_more(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.proc.out_r], [], [], left)[0]:
            self.broken = "it did not answer in time"
            raise Unanswered([], returncode=None, stderr=self.broken)
        block = os.read(self.proc.out_r, 1 << 16)
        if not block:
            self.broken = "it ended"
            raise Unanswered([], returncode=None, stderr=self.broken)
        parts = (self.buffer + block).split(b"\n")
        self.buffer = parts.pop()
        self.lines += parts

    def _lock(self, wait: float) -> bool:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.lockf(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except OSError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.001)

    def _unlock(self) -> None:
        fcntl.lockf(self.lock_fd, fcntl.LOCK_UN)


class Sent:
    """Chains :meth:`Control.send` wrote; :meth:`answers` reads each one's answer (or its tmux error),
    in order, once, and lets the client go."""

    __slots__ = ("control", "counts", "deadline", "found", "markers", "shown")

    def __init__(self, control: Control, markers: list[bytes], counts: list[int], shown: list[str]) -> None:
        self.control = control
        self.markers = markers  # the first's, then one after each chain
        self.counts = counts  # the commands of each chain
        self.shown = shown
        self.deadline = 0.0
        self.found: list[str | TmuxError] | Unanswered | None = None

    def answers(self) -> list[str | TmuxError]:
        """Each chain's answer, or its error; :class:`Unanswered` when they did not all come in time."""
        if self.found is None:
            control = self.control
            try:
                found: list[str | TmuxError] = []
                start = control._block_of(self.markers[0], self.deadline)
                del control.lines[: start + 2]
                for marker, count in zip(self.markers[1:], self.counts, strict=True):
                    end = control._block_of(marker, self.deadline)
                    found.append(parse_answer(control.lines[: end - 1], count, self.shown))
                    del control.lines[: end + 2]
                self.found = found
            except Unanswered as exc:
                self.found = Unanswered(self.shown, returncode=None, stderr=exc.stderr, reason="not answered")
            finally:
                if control.sent is self:
                    control.sent = None
                    control._unlock()
        if isinstance(self.found, Unanswered):
            raise self.found
        return self.found


class Done(Pending):
    """A command a :class:`Controlled` server already ran: its answer, or its error."""

    __slots__ = ("answer",)

    def __init__(self, argv: list[str], answer: str | TmuxError) -> None:
        super().__init__(argv, TmuxError(argv, returncode=None, stderr="", reason="answered"), 0.0)
        self.answer = answer

    def result(self, timeout: float | None = None) -> str:
        if isinstance(self.answer, TmuxError):
            raise self.answer
        return self.answer


class Batched(Pending):
    """A read-only chain sent through the client in parts (:meth:`Control.send`): its answer, read when
    asked for; by a tmux process of its own when the parts were not all answered."""

    __slots__ = ("by", "sent")

    def __init__(self, argv: list[str], sent: Sent, by: Controlled) -> None:
        super().__init__(argv, TmuxError(argv, returncode=None, stderr="", reason="sent"), 0.0)
        self.sent = sent
        self.by = by

    def result(self, timeout: float | None = None) -> str:
        try:
            answers = self.sent.answers()
        except Unanswered:
            return self.by.process(self.argv).result(timeout)
        for answer in answers:
            if isinstance(answer, TmuxError):
                raise answer
        return "".join(a for a in answers if isinstance(a, str))


class Controlled(Server):
    """A :class:`Server` whose commands go through the shared :class:`Control`: the same argument lists,
    the same answers; a command with ``input`` or ``env``, or a chain reading more than one screen, runs as a
    tmux process of its own."""

    __slots__ = ("control",)
    control: Control

    @classmethod
    def over(cls, server: Server, control: Control) -> Controlled:
        made = cls(
            socket_name=server.socket_name, socket_path=server.socket_path, timeout=server.timeout, binary=server.binary
        )
        object.__setattr__(made, "control", control)
        return made

    def start(self, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None) -> Pending:
        if input is None and env is None and not one_screen_last(args):
            parts = screen_parts(args)
            if parts is not None:  # a read-only chain of several screens: one exchange each, in order
                return self._each(list(args), parts)
        if input is not None or env is not None or not one_screen_last(args):
            return super().start(*args, input=input, env=env)
        try:
            return Done(list(args), self.control.exchange(list(args)))
        except NotSent:
            return super().start(*args)
        except Unanswered as exc:
            return super().start(*args) if args[0] in READ_ONLY else Done(list(args), exc)
        except TmuxError as exc:
            return Done(list(args), exc)

    def _each(self, args: list[str], parts: list[list[str]]) -> Pending:
        """The chain's answer from one exchange per part (each ends with its one screen), all written at
        once (:meth:`Control.send`) and read by :meth:`Pending.result`; when they cannot be sent or
        answered, from a tmux process running the whole chain (it only reads)."""
        try:
            sent = self.control.send(parts, shown=args)
        except (NotSent, Unanswered):
            return super().start(*args)
        return Batched(args, sent, self)

    def process(self, args: list[str]) -> Pending:
        """``args`` run by a tmux process of its own."""
        return super().start(*args)

    def paste(self, pane: str, text: str, *, bracketed: bool = True) -> None:
        name = buffer_name()
        try:
            self.load_buffer(name, text)
        except NotSent:  # the client went or stayed busy: by a tmux process, as without it
            self.drop_buffer(name)  # what pieces it took
            super().paste(pane, text, bracketed=bracketed)
            return
        self.paste_buffer(name, pane, bracketed=bracketed)

    def load_buffer(self, name: str, text: str) -> None:
        """Buffer ``name`` set to ``text``, in pieces that each fit one write (``set-buffer -a``); errors
        name the text ``<text>``, never its content."""
        for index, piece in enumerate(pieces(text)):
            args = ["set-buffer", *(["-a"] if index else []), "-b", name, "--", Data(piece)]
            self.control.exchange(args, shown=[*args[:-1], "<text>"])


def connect(server: Server) -> Control | None:
    """A control client on ``server``, attached to its session, or ``None`` when a client is
    attached to the server (see the module's docstring) or it did not attach.  The caller holds the
    lock that every connecting server takes."""
    try:
        if not may_connect(server):
            return None
        control = Control(server)
    except (TmuxError, OSError):
        return None
    try:
        return control if control.attach() else None
    except BaseException:
        control.close()  # never left half connected (tmux 3.3a may then never exit)
        raise


#: The first tmux release that never crashes notifying a control client still connecting (tmux issue 4980).
SAFE_CONNECT = (3, 7)


def may_connect(server: Server) -> bool:
    """Whether a control client may connect now: on tmux 3.7 and later always (a person attached
    meanwhile, detaching or scrolling, crashes nothing); before, only while tmux lists no attached
    client (see the module's docstring).  The release is ``tmux -V``'s, read once."""
    if server.version()[:2] >= SAFE_CONNECT:
        return True
    return not server.run("list-clients", "-F", "#{client_pid}").strip()


@contextmanager
def tmux_events(server: Server) -> Iterator[None]:
    """Hold this user's lock for ``server`` (a tmux server) while it connects a control-mode client, or
    while it creates or kills sessions: tmux before 3.7 crashes when it tells a client still connecting
    that a session came or went (see the module's docstring).  Two teams may share a tmux server,
    so the lock is the tmux server's (``$XDG_STATE_HOME/fabrikito/tmux-connect/``), not the team's.  Waits
    at most :data:`CONNECT_WAIT` seconds, then goes on without it (a connection stuck that long has failed)."""
    import hashlib

    from fabrikito.base import daemons, statedir, xdg
    from fabrikito.base.errors import StateFileError

    fd = -1
    try:
        folder = xdg.state_home() / "tmux-connect"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        statedir.ensure_dir(folder)
        key = hashlib.sha256(os.path.realpath(server.resolved_socket_path()).encode()).hexdigest()[:24]
        fd = statedir.open_plain(folder / f"{key}.lock", os.O_RDWR | os.O_CREAT)
        daemons.flock_within(fd, CONNECT_WAIT, step=0.005)  # not taken in time: goes on without it
    except (OSError, StateFileError):
        pass  # no lock to take: go on as tmux itself would
    try:
        yield
    finally:
        if fd >= 0:
            os.close(fd)


def remove_leftover(server: Server) -> list[str]:
    """Kill every :data:`CONTROL_SESSION` no client is attached to (its owner was killed outright); the
    session ids killed.  The caller holds the lock connecting servers take."""
    try:
        out = server.run("list-sessions", "-F", format_of(("session_id", "session_attached", "session_name")))
    except TmuxError:
        return []
    killed = []
    for row in records(out):
        session_id, attached, name = split_fields(row, 3) or ("", "", "")
        if name == CONTROL_SESSION and attached == "0":
            try:
                server.run("kill-session", "-t", session_id)
                killed.append(session_id)
            except TmuxError:
                pass  # gone meanwhile
    return killed
