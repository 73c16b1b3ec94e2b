"""The state directory ``.state/<team>/`` and the file primitives on it.

Directories are 0700 and files 0600.  Nothing here writes through a link:
files are opened with ``O_NOFOLLOW`` and must be regular files with a single
name (a FIFO, a symlink or a second hard link is refused).  A log line is one
``write()`` on an ``O_APPEND`` descriptor, so concurrent writers never
interleave.  A file that is rewritten goes to a temporary file first and is
renamed into place.

This module imports only the standard library's small modules: the hook and
``say`` use it on every message.
"""

from __future__ import annotations

import errno
import os
import stat

from fabrikito import TYPE_CHECKING
from fabrikito.base.errors import StateFileError

if TYPE_CHECKING:
    from pathlib import Path
    from typing import TypeVar

    StrPath = str | os.PathLike[str]  # a path as a string or a Path: send's path does not import pathlib
    AnyPath = TypeVar("AnyPath", str, Path)

DIR_MODE = 0o700
FILE_MODE = 0o600
STATE_ROOT = ".state"


def team_state_dir(base: Path, team: str) -> Path:
    """``<base>/.state/<team>`` (not created)."""
    return base / STATE_ROOT / team


def ensure_dir(path: AnyPath) -> AnyPath:
    """Create the directory ``path`` (its parent must exist) 0700; refuse a link or a file."""
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        pass
    _require_real_dir(path, os.lstat(path))
    if stat.S_IMODE(os.lstat(path).st_mode) != DIR_MODE:
        os.chmod(path, DIR_MODE)
    return path


def ensure_state_dir(base: Path, team: str) -> Path:
    """Create ``.state/`` and ``.state/<team>/`` (0700) under ``base``."""
    ensure_dir(base / STATE_ROOT)
    return ensure_dir(base / STATE_ROOT / team)


def _require_real_dir(path: StrPath, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise StateFileError(
            f"{path} is a symlink, and fabrikito keeps its state only in a real directory: "
            "remove the link (the directory is created again)."
        )
    if not stat.S_ISDIR(st.st_mode):
        raise StateFileError(f"{path} is not a directory: move it aside.")


def describe_unsafe(path: StrPath) -> str | None:
    """Why ``path`` may not be written through, or ``None`` when it is fine.

    A missing file is fine (it is created).  A symlink, a FIFO, any other
    non-regular file, or a regular file with more than one name is not.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return _unsafe_reason(path, st)


def _unsafe_reason(path: StrPath, st: os.stat_result) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        return (
            f"{path} is a symlink: remove the link (do not delete what it points to), "
            "and fabrikito creates the file again"
        )
    if stat.S_ISFIFO(st.st_mode):
        return f"{path} is a FIFO: remove it, and fabrikito creates the file again"
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file: move it aside"
    if st.st_nlink != 1:
        return (
            f"{path} has {st.st_nlink} names (a hard link): do not delete it, it may be the real "
            "file; remove the other name, or move this file aside"
        )
    return None


def check_plain(path: StrPath) -> None:
    """Raise :class:`StateFileError` unless ``path`` is missing or a plain file."""
    reason = describe_unsafe(path)
    if reason is not None:
        raise StateFileError(reason)


def open_plain(path: StrPath, flags: int, *, mode: int = FILE_MODE) -> int:
    """Open ``path`` without following a symlink; only a regular file with one name.

    ``O_NONBLOCK`` keeps a FIFO from blocking the open; the descriptor is
    checked with ``fstat`` so what was opened is what is written.
    """
    fd = _open_nofollow(path, flags, mode)
    try:
        reason = _unsafe_reason(path, os.fstat(fd))
        if reason is not None:
            raise StateFileError(reason)
        if flags & os.O_NONBLOCK == 0:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_nofollow(path: StrPath, flags: int, mode: int) -> int:
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateFileError(
                f"{path} is a symlink: remove the link, and fabrikito creates the file again"
            ) from None
        if exc.errno == errno.ENXIO:
            raise StateFileError(f"{path} is a FIFO: remove it, and fabrikito creates the file again") from None
        raise


def append_line(path: StrPath, line: bytes) -> None:
    """Append ``line`` (which must end in a newline) with one ``write()``.

    Opens with ``O_APPEND | O_CREAT`` without following a link, refuses
    anything but a regular file with one name, and raises ``OSError`` when the
    line could not be written whole.
    """
    if not line.endswith(b"\n"):
        raise ValueError("a log line ends with a newline")
    fd = open_plain(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        written = os.write(fd, line)
        if written != len(line):
            raise OSError(errno.EIO, f"short write to {path}: {written} of {len(line)} bytes")
    finally:
        os.close(fd)


def read_plain(path: StrPath) -> bytes | None:
    """The bytes of a plain state file, or ``None`` when it does not exist."""
    try:
        fd = open_plain(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_atomic(path: StrPath, data: bytes, *, sync: bool = True) -> None:
    """Write ``data`` to a temporary file beside ``path`` (0600), then rename it.

    ``sync=False`` leaves out the ``fsync`` (about 1 ms) for a file whose loss in a
    crash loses nothing that matters (a note kept for a warning): the rename is
    still atomic, so a reader sees the old file or the new one, never a mix."""
    check_plain(path)
    head, name = os.path.split(os.fspath(path))
    tmp = os.path.join(head, f".{name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # exactly 0600 whatever the umask took away: the queue reads it so
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)


def remove_quietly(path: StrPath) -> None:
    """Remove ``path`` when it is there; a missing file is not an error."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
