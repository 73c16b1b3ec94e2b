"""The login a host uses to reach another machine of the team: fabrikito's routed ``say`` and ``flush``, nothing else.

A seat on a host sends to a seat on another machine by ``ssh`` to that machine
(:mod:`fabrikito.delivery.route`), with the host user's key.  Left as it is,
that key is a shell on the other machine: anything run in a seat on the host
could type into every pane there, or read anything.  So the key is authorized
for one thing only, OpenSSH's forced command::

    command="<fabrikito> _host gate",restrict ssh-ed25519 AAAA… api@build-2

``restrict`` takes away every forwarding, the pty and ``~/.ssh/rc``; sshd runs
``fabrikito _host gate`` whatever the client asked, with what it asked in
``SSH_ORIGINAL_COMMAND``.  :func:`gate` runs it only when it is exactly what
fabrikito's own route sends (:func:`fabrikito.base.ssh.Host.run`: the PATH and
LANG words, a program, then ``_host say|flush TEAM --sender S ROLE``), as this
fabrikito, never through a shell; anything else (a shell, ``tmux …``, another
``_host`` operation) is refused, with a line in
``$XDG_STATE_HOME/fabrikito/gate.log``.

``fabrikito authorize-host KEY`` prints that line for a host's public key, and
with ``--install`` adds it to ``~/.ssh/authorized_keys`` (or ``--file``).  The
owner's own login to a host (``up``, ``down``, ``status``, ``log``) is the
owner's and stays as it is.
"""

from __future__ import annotations

import os
import sys
import time

from fabrikito import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

#: What a host may run on another machine of the team.
ALLOWED = ("say", "flush")
GATE_LOG = "gate.log"
KEY_TYPES = ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-", "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-")
EXIT_REFUSED = 3


# -- the forced command ------------------------------------------------------------------


def routed_args(original: str) -> list[str] | None:
    """The ``_host`` arguments in ``original`` (``SSH_ORIGINAL_COMMAND``) when it is a routed ``say`` or ``flush``
    exactly as fabrikito sends it; ``None`` for anything else."""
    import shlex

    from fabrikito.base.ssh import PREAMBLE

    try:
        words = shlex.split(original)
    except ValueError:
        return None
    head = shlex.split(PREAMBLE)
    if words[: len(head)] != head or "_host" not in words:
        return None
    rest = words[words.index("_host") + 1 :]
    if words.index("_host") == len(head):
        return None  # no program named: not what fabrikito sends
    if len(rest) != 5 or rest[0] not in ALLOWED or rest[2] != "--sender":
        return None
    op, team, _, sender, role = rest
    if not team or team.startswith("-") or sender.startswith("-") or role.startswith("-"):
        return None
    return [op, team, "--sender", sender, role]


def gate(environ: Mapping[str, str] | None = None) -> list[str] | int:
    """``fabrikito _host gate``: the ``_host`` arguments of the routed command sshd was asked for, which the host's
    side then runs (:func:`fabrikito.launch.hostside.main`), or :data:`EXIT_REFUSED` once it is refused and noted."""
    env = os.environ if environ is None else environ
    original = env.get("SSH_ORIGINAL_COMMAND")
    args = routed_args(original) if original is not None else None
    if args is None:
        asked = "a login shell" if original is None else repr(original[:300])
        _note(env, f"refused {asked}")
        print(
            "fabrikito: this login runs only fabrikito's routed say and flush (it is a host's key, authorized "
            f"with a forced command); refused {asked}",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    _note(env, f"ran _host {args[0]} {args[1]} --sender {args[3]} {args[4]}")
    return args


def _note(env: Mapping[str, str], what: str) -> None:
    """One line in ``$XDG_STATE_HOME/fabrikito/gate.log``: the time, who connected, what became of it."""
    import json

    from fabrikito.base import statedir, xdg
    from fabrikito.base.errors import StateFileError

    where = xdg.state_home()  # $XDG_STATE_HOME/fabrikito
    peer = (env.get("SSH_CONNECTION") or "?").split(" ")[0]
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')}\t{peer}\t{json.dumps(what)[1:-1]}\n"
    try:
        where.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        statedir.ensure_dir(where)
        statedir.append_line(where / GATE_LOG, line.encode("utf-8", "replace"))
    except (OSError, StateFileError):
        pass  # the refusal stands; only its note is lost


# -- authorize-host ------------------------------------------------------------------------


def build_authorize_host(p: argparse.ArgumentParser) -> None:
    p.epilog = (
        'The line is OpenSSH\'s command="<fabrikito> _host gate",restrict before the key: that key then runs only '
        "fabrikito's routed say and flush on this machine. Run it on each machine a host's seats say to (the team's "
        "own machine, and any host that other hosts' seats say to), for that host's key. "
        "exit status: 0 printed, added, or there already; 2 bad usage, not one public key, or the key is there "
        "already without the restriction (remove that line first)"
    )
    p.add_argument("key", metavar="KEY", help="the host's public key: a .pub file, or - to read it from stdin")
    p.add_argument("--install", action="store_true", help="add the line (once) instead of printing it")
    p.add_argument(
        "--file", metavar="FILE", help="the authorized_keys file to add it to (default: ~/.ssh/authorized_keys)"
    )


def cmd_authorize_host(args: argparse.Namespace) -> int:
    from pathlib import Path

    from fabrikito.base.errors import UsageError

    raw = sys.stdin.read() if args.key == "-" else _read_key(args.key)
    line = authorized_line(raw)
    if not args.install:
        print(line)
        return 0
    path = Path(args.file).expanduser() if args.file else Path.home() / ".ssh" / "authorized_keys"
    said = install(path, line)
    if said is None:
        raise UsageError(
            f"{path} already has this key without the restriction: remove that line first (then run this again), "
            "or the key stays a shell here"
        )
    print(said)
    return 0


def _read_key(name: str) -> str:
    from fabrikito.base.errors import UsageError

    try:
        with open(name, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise UsageError(f"cannot read the public key {name}: {exc.strerror}") from None


def authorized_line(public_key: str) -> str:
    """The authorized_keys line for ``public_key`` (its type, key and comment), restricted to the gate."""
    from fabrikito.base.errors import UsageError
    from fabrikito.launch.seatfiles import say_command

    lines = [line.strip() for line in public_key.splitlines() if line.strip() and not line.startswith("#")]
    words = lines[0].split() if len(lines) == 1 else []
    if len(words) < 2 or not words[0].startswith(KEY_TYPES) or not _base64(words[1]):
        raise UsageError(
            "that is not one OpenSSH public key (a line such as 'ssh-ed25519 AAAA… user@host', as in "
            "~/.ssh/id_ed25519.pub on the host): give the host's .pub file, without options"
        )
    command = f"{say_command()} _host gate".replace("\\", "\\\\").replace('"', '\\"')
    return f'command="{command}",restrict {" ".join(words)}'


def _base64(text: str) -> bool:
    import base64
    import binascii

    try:
        return len(base64.b64decode(text, validate=True)) > 16
    except (binascii.Error, ValueError):
        return False


def install(path: os.PathLike[str], line: str) -> str | None:
    """Add ``line`` to the authorized_keys file ``path`` unless it is there; ``None`` when the key is there
    already as something else (unrestricted, or restricted otherwise), which is left for the owner to remove."""
    from pathlib import Path

    from fabrikito.base import statedir

    file = Path(path)
    blob = line.split(",restrict ", 1)[1].split()[1]  # the key itself, whatever its comment
    try:
        existing = file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        existing = []
    for old in existing:
        if blob in old.split():
            return f"{file} has this key already, restricted to fabrikito's gate" if old == line else None
    file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = "".join(f"{old}\n" for old in existing) + line + "\n"
    statedir.write_atomic(file, text.encode("utf-8"))
    return f"added to {file}: this key now runs only fabrikito's routed say and flush here"
