"""The tmux control-mode protocol's text: how a command line is quoted and cut, and how an answer is read.

Pure functions over strings and bytes (no process, no tmux call), used by
:mod:`fabrikito.base.tmuxcontrol`, which holds the client: an argument is
quoted so tmux's parser takes it whole (:func:`quote`), a long message is cut
into pieces each within one atomic write (:func:`pieces`), ``;`` separates two
commands unless it is :class:`Data`, and each answer is found between its
``%begin``/``%end`` markers (:func:`marker_block`, :func:`parse_answer`).
"""

from __future__ import annotations

from collections.abc import Sequence

from fabrikito.base.errors import TmuxError

READ_ONLY = frozenset({"display-message", "list-panes", "capture-pane", "show-options", "list-sessions"})
WRITE_MAX = 4000  # one exchange is one write, within PIPE_BUF (4096): atomic
SAFE_BYTES = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,:/@=+"
SAFE = frozenset(SAFE_BYTES)
ESCAPES = {b: f"\\{b:03o}" for b in range(256) if b not in SAFE and b != 0x20}


class Data(str):
    """An argument that is data, never the ";" between two commands (a message can be ";")."""

    __slots__ = ()


def separates(arg: str) -> bool:
    return arg == ";" and not isinstance(arg, Data)


def pieces(text: str) -> list[str]:
    """``text`` cut so each piece, quoted, fits one exchange (and never inside a character)."""
    pieces: list[str] = []
    start, size = 0, 0
    for at, char in enumerate(text):
        cost = sum(1 if b in SAFE or b == 0x20 else 4 for b in char.encode("utf-8", "surrogateescape"))
        if size + cost > WRITE_MAX - 400 and at > start:
            pieces.append(text[start:at])
            start, size = at, 0
        size += cost
    pieces.append(text[start:])
    return pieces


def marker_block(lines: list[bytes], marker: bytes) -> int | None:
    """The index of ``marker``'s line once its whole block (``%begin``, the marker, ``%end``) has been read."""
    start = 0
    while True:
        try:
            at = lines.index(marker, start)
        except ValueError:
            return None
        if at + 1 >= len(lines):
            return None  # its end line is still to come
        if at > 0 and lines[at - 1].startswith(b"%begin ") and lines[at + 1] == b"%end " + lines[at - 1][7:]:
            return at
        start = at + 1


def parse_answer(window: list[bytes], count: int, argv: list[str]) -> str | TmuxError:
    """The output of ``count`` commands' blocks in ``window`` (notifications skipped), or tmux's error."""
    out: list[bytes] = []
    at = 0
    for index in range(count):
        begin = next((i for i in range(at, len(window)) if window[i].startswith(b"%begin ")), None)
        if begin is None:
            return TmuxError(argv, returncode=0, stderr="", reason="answered in an unexpected shape")
        tag = window[begin][7:]
        closers = (b"%end " + tag, b"%error " + tag)
        # The first end line of the block, but the last one of the last block (a screen can forge one).
        lines = range(len(window) - 1, begin, -1) if index == count - 1 else range(begin + 1, len(window))
        end = next((i for i in lines if window[i] in closers), None)
        if end is None:
            return TmuxError(argv, returncode=0, stderr="", reason="answered in an unexpected shape")
        if window[end].startswith(b"%error "):
            said = b"\n".join(window[begin + 1 : end]).decode("utf-8", "replace")
            return TmuxError(argv, returncode=1, stderr=said)
        out += window[begin + 1 : end]
        at = end + 1
    return b"".join(line + b"\n" for line in out).decode("utf-8", "replace")  # one decode: as line by line


def screen_parts(args: Sequence[str]) -> list[list[str]] | None:
    """A chain of commands that only read (``status``'s look at every seat: ``display-message`` and
    ``capture-pane`` per pane) cut after each ``capture-pane``, so each part shows one screen, last;
    ``None`` when it writes anything."""
    commands: list[list[str]] = [[]]
    for arg in args:
        if arg == ";":
            commands.append([])
        else:
            commands[-1].append(arg)
    if any(not command or command[0] not in READ_ONLY for command in commands):
        return None
    parts: list[list[str]] = [[]]
    for command in commands:
        if parts[-1]:
            parts[-1].append(";")
        parts[-1] += command
        if command[0] == "capture-pane":
            parts.append([])
    return [part for part in parts if part]


def one_screen_last(args: Sequence[str]) -> bool:
    """Whether at most one command of the chain prints what a pane shows (``capture-pane``), as its last."""
    captures = [i for i, arg in enumerate(args) if arg == "capture-pane" and (i == 0 or args[i - 1] == ";")]
    if not captures:
        return True
    return len(captures) == 1 and ";" not in args[captures[0] :]


def quote(arg: str) -> str:
    """``arg`` as one word of tmux's command language: double quotes, every byte but letters, digits, the
    space and ``_-.,:/@=+`` written as an octal escape (tmux expands ``$`` and a leading ``~`` even
    inside double quotes; a property test found the second)."""
    raw = arg.encode("utf-8", "surrogateescape")
    if raw and not raw.translate(None, SAFE_BYTES):
        return arg
    return '"' + raw.decode("latin-1").translate(ESCAPES) + '"'
