"""What ``fabrikito status`` and the team's status server say to each other, and the asking side.

A team that ``up`` brought up has a status server (:mod:`fabrikito.launch.statusserver`):
a process that has already imported what ``status`` needs and, asked, makes the same
two tmux calls and reads the same files a ``status`` would, then hands back its
output.  ``status`` asks it first and does the work itself whenever it cannot be
asked or does not answer in full; the answer is the same either way (the
server runs the command's own code on the asker's team file path, time zone and
options).  This module is on the asking side's way, so it imports ``os`` and the C
socket module only: ``re``, ``enum``, ``pathlib`` and ``json`` are most of a
cold ``status`` (docs/benchmarks.md).

The server's socket is ``<team dir>/.state/.status.<team file name>.sock``:
found from the team file's path without reading the file.

A request, in bytes: ``PROTOCOL NUL package-dir NUL team-path NUL flags``, then
``NUL NAME=value`` (or ``NUL NAME`` when unset) for each variable of
:data:`ENV_READ`, ended by the asker closing its side; flags are ``j``
(``--json``) and ``n`` (``--no-screens``).  The server answers with those
variables set as the asker has them (tests/unit/test_status_server.py checks
that ``status`` reads no other).  A reply: ``PROTOCOL code out-length err-length LF`` then the
output and the error text, or ``PROTOCOL - LF`` for "not served here, do it
yourself" (another install of fabrikito, another team file, a changed package).
"""

from __future__ import annotations

import _socket
import os
import sys

PROTOCOL = b"fabrikito-status/1"
DECLINED = PROTOCOL + b" -\n"
STATE_ROOT = ".state"  # as fabrikito.base.statedir.STATE_ROOT
MAX_REPLY = 64 << 20
MAX_REQUEST = 1 << 16
ASK_TIMEOUT = 30.0  # a server that takes longer is given up on, and status runs here
MAX_SUN_PATH = 107  # sockaddr_un's sun_path, less its NUL
# The environment ``status`` reads: the time zone of its times, where tmux and its socket are,
# where the user's qualifications are, the say-notice settings.
ENV_READ = (
    "TZ",
    "PATH",
    "HOME",
    "TMUX_TMPDIR",
    "XDG_CONFIG_HOME",
    "FABRIKITO_SAY_RESEND_WINDOW",
    "FACTORY_SAY_RESEND_WINDOW",
    "FABRIKITO_SAY_NOTICE_COUNT",
    "FACTORY_SAY_NOTICE_COUNT",
)


def socket_name(team_path: str) -> str:
    """The socket's file name in the team file's ``.state/``."""
    return f".status.{os.path.basename(team_path)}.sock"


def socket_dir(team_path: str) -> str:
    return os.path.join(os.path.dirname(team_path), STATE_ROOT)


def absolute(path: str) -> str:
    """``path`` made absolute as ``pathlib.Path.absolute`` does (no ``..`` resolved, ``.`` parts dropped)."""
    joined = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    lead = "//" if joined.startswith("//") and not joined.startswith("///") else "/"
    return lead + "/".join(part for part in joined.split("/") if part not in ("", "."))


def encode_request(package: str, team_path: str, flags: str, env: dict[str, str | None]) -> bytes:
    fields = [package, team_path, flags]
    fields += [name if env.get(name) is None else f"{name}={env[name]}" for name in ENV_READ]
    return PROTOCOL + b"".join(b"\0" + field.encode("utf-8", "surrogateescape") for field in fields)


def decode_request(raw: bytes) -> tuple[str, str, str, dict[str, str | None]] | None:
    """``(package, team_path, flags, env)``; ``None`` for anything else."""
    parts = raw.split(b"\0")
    if len(parts) != 4 + len(ENV_READ) or parts[0] != PROTOCOL:
        return None
    package, team_path, flags, *entries = (part.decode("utf-8", "surrogateescape") for part in parts[1:])
    env: dict[str, str | None] = {}
    for name, entry in zip(ENV_READ, entries, strict=True):
        given, equals, value = entry.partition("=")
        if given != name:
            return None
        env[name] = value if equals else None
    if not os.path.isabs(team_path) or set(flags) - {"j", "n"}:
        return None
    return package, team_path, flags, env


def encode_reply(code: int, out: str, err: str) -> bytes:
    out_b, err_b = out.encode("utf-8", "surrogateescape"), err.encode("utf-8", "surrogateescape")
    return b"%s %d %d %d\n" % (PROTOCOL, code, len(out_b), len(err_b)) + out_b + err_b


def decode_reply(raw: bytes) -> tuple[int, bytes, bytes] | None:
    """``(code, out, err)`` from a whole reply; ``None`` when declined, cut short or not a reply."""
    head, newline, rest = raw.partition(b"\n")
    fields = head.split(b" ")
    if not newline or len(fields) != 4 or fields[0] != PROTOCOL:
        return None
    try:
        code, out_len, err_len = (int(field) for field in fields[1:])
    except ValueError:
        return None
    if min(code, out_len, err_len) < 0 or code > 255 or out_len + err_len != len(rest):
        return None
    return code, rest[:out_len], rest[out_len:]


def ask(team_path: str, flags: str, *, timeout: float = ASK_TIMEOUT) -> tuple[int, bytes, bytes] | None:
    """The server's answer for ``team_path`` (absolute), or ``None``: no server there, one that
    is not this user's, one that declines, fails or is cut off.  Nothing is printed here."""
    where = socket_dir(team_path)
    name = socket_name(team_path)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        if not _connect(sock, where, name) or _peer_uid(sock) != os.getuid():
            return None
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        sock.sendall(encode_request(package, team_path, flags, {name: os.environ.get(name) for name in ENV_READ}))
        sock.shutdown(_socket.SHUT_WR)
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_REPLY:
            chunk = sock.recv(1 << 16)
            if not chunk:
                return decode_reply(b"".join(chunks))
            chunks.append(chunk)
            size += len(chunk)
        return None
    except OSError:  # refused (a server gone), timed out, reset: status runs here
        return None
    finally:
        sock.close()


def _connect(sock: _socket.socket, where: str, name: str) -> bool:
    full = os.path.join(where, name)
    if len(os.fsencode(full)) <= MAX_SUN_PATH:
        sock.connect(full)
        return True
    try:  # a deep team folder: a path too long for a socket address is reached from inside it
        here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        os.chdir(where)
        try:
            sock.connect(name)
        finally:
            os.fchdir(here)
    finally:
        os.close(here)
    return True


def _peer_uid(sock: _socket.socket) -> int:
    """The uid of the process at the other end (``SO_PEERCRED``: pid, uid, gid as C ints)."""
    cred = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return int.from_bytes(cred[4:8], sys.byteorder)
