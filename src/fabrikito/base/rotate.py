"""Rotating an append-only state file (the message log, the refusals log) without losing a line.

A file ``NAME`` past its size limit is renamed ``NAME.1``; ``NAME.1`` becomes
``NAME.2`` and so on, and the generation past ``keep`` is removed.  Nothing
creates a new ``NAME``: the next writer does, as it always has (``O_CREAT``).

Writers never take the lock: each appends a line with one ``write()`` on an
``O_APPEND`` descriptor to whatever ``NAME`` is when it opens it.  A writer
that opened ``NAME`` just before the rename writes into what is now
``NAME.1``: the line lands whole in one file, and readers read every
generation.  Renames keep a file's single name, so a rotated file still
passes the "one name, regular file" check a writer makes on its descriptor.

Rotations take an exclusive ``flock`` on ``NAME.lock``, so two helpers never
shift the generations at once.  A reader takes the same lock shared while it
opens every generation (:func:`open_generations`), so it never sees a file
twice or misses one; what it then reads through its descriptors does not
change when a rotation follows.

Generic: any ``O_APPEND`` line file of a state directory can use it.  This
module imports only ``os`` and ``fcntl`` (and :mod:`fabrikito.base.statedir` to read).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator

#: Defaults for a team file that sets no ``log_max_size`` / ``log_keep``.
DEFAULT_MAX_SIZE = 16 * 1024 * 1024
DEFAULT_KEEP = 5
_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def generation_path(path: str, number: int) -> str:
    """``NAME`` for 0, ``NAME.N`` for the N-th older generation."""
    return path if number == 0 else f"{path}.{number}"


def lock_path(path: str) -> str:
    return f"{path}.lock"


def _lock(path: str, kind: int) -> int | None:
    """The lock file's descriptor, locked; ``None`` when the directory does not allow it (a reader goes on)."""
    try:
        fd = os.open(lock_path(path), _LOCK_FLAGS, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, kind)
    except OSError:
        os.close(fd)
        return None
    return fd


def _unlock(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)  # closing the descriptor releases the flock


def _generations_present(path: str) -> list[int]:
    """The generation numbers on disk (0 for ``NAME`` itself), ascending; stops at the first gap past 1."""
    found = []
    number = 0
    while True:
        if os.path.lexists(generation_path(path, number)):
            found.append(number)
        elif number > 0:
            return found
        number += 1


def rotate(path: str | os.PathLike[str], *, max_size: int, keep: int) -> bool:
    """Rotate ``path`` when it has reached ``max_size`` bytes; ``True`` when it was rotated.

    ``keep`` older generations are kept (``keep`` of 0 keeps none: the file
    is emptied by removing it, so its lines are gone; the team file refuses
    that value).  A rename moves a name and never follows a link, so a link
    put in place of a generation is shifted or removed like a file, and
    nothing is written through it.  Generations are counted up to the first
    missing number.  Raises ``OSError`` when the directory cannot be changed.
    """
    name = os.fspath(path)
    try:
        st = os.lstat(name)
    except FileNotFoundError:
        return False
    if st.st_size < max_size:
        return False
    held = _lock(name, fcntl.LOCK_EX)
    if held is None:
        raise OSError(f"could not lock {lock_path(name)} to rotate {name}")
    try:
        try:  # another helper may have rotated it while this one waited for the lock
            if os.lstat(name).st_size < max_size:
                return False
        except FileNotFoundError:
            return False
        present = _generations_present(name)
        for number in sorted((n for n in present if n >= keep), reverse=True):
            if number > 0:
                os.unlink(generation_path(name, number))
        for number in sorted((n for n in present if 0 < n < keep), reverse=True):
            os.rename(generation_path(name, number), generation_path(name, number + 1))
        if keep > 0:
            os.rename(name, generation_path(name, 1))
        else:
            os.unlink(name)
        return True
    finally:
        _unlock(held)


def open_generations(path: str | os.PathLike[str]) -> list[int]:
    """A read descriptor for every generation, the oldest first, ``NAME`` last (when it is there).

    Opened under the shared lock, so a rotation cannot shift the files
    between two opens.  A generation that is a link, not a regular file or
    has a second name raises :class:`fabrikito.base.errors.StateFileError`
    saying what to remove (never followed).  The caller closes the descriptors.
    """
    from fabrikito.base import statedir

    name = os.fspath(path)
    held = _lock(name, fcntl.LOCK_SH)
    fds: list[int] = []
    try:
        for number in sorted(_generations_present(name), reverse=True):
            try:
                fds.append(statedir.open_plain(generation_path(name, number), os.O_RDONLY))
            except FileNotFoundError:
                continue
    except BaseException:
        close_all(fds)
        raise
    finally:
        _unlock(held)
    return fds


def close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def read_fd(fd: int, *, start: int = 0, chunk: int = 1 << 20) -> Iterator[bytes]:
    """The bytes of ``fd`` from ``start`` to its end as it is while reading, in chunks."""
    offset = start
    while True:
        data = os.pread(fd, chunk, offset)
        if not data:
            return
        offset += len(data)
        yield data


def read_all(path: str | os.PathLike[str]) -> bytes:
    """Every generation's bytes, oldest first, as one text (small files: the refusals log, tests)."""
    fds = open_generations(path)
    try:
        return b"".join(b"".join(read_fd(fd)) for fd in fds)
    finally:
        close_all(fds)


def tail(path: str | os.PathLike[str], size: int) -> bytes:
    """The last ``size`` bytes across the generations (fewer when they hold fewer)."""
    fds = open_generations(path)
    try:
        parts: list[bytes] = []
        wanted = size
        for fd in reversed(fds):
            end = os.fstat(fd).st_size
            start = max(0, end - wanted)
            data = os.pread(fd, end - start, start)
            parts.append(data)
            wanted -= len(data)
            if wanted <= 0:
                break
        return b"".join(reversed(parts))
    finally:
        close_all(fds)
