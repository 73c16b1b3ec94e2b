"""A command line read without argparse, when it is plain: the commands run on every message start faster.

Importing argparse (and gettext with it) and building a parser cost about 3 ms
of every ``say``, ``send`` and ``status`` (docs/benchmarks.md).  Most command
lines are plain: the command, then its options, then its positionals.  This
reads such a line from the command's own builder, run against a recorder
instead of a parser, and gives the values argparse would give.  Anything it
does not read exactly as argparse does is left to argparse, which then
reads the line, lays out the help or words the error as it always did:

* ``--help``, ``-h``, ``--``, an unknown or abbreviated option, ``--opt=value``,
  combined short flags, a value that starts with ``-``;
* an option after a positional (argparse reads those in its own order);
* too few or too many positionals;
* an option whose value argparse converts or checks (``type``, ``choices``)
  or any action but ``store`` and ``store_true``, when it is given;
* a builder that does more than ``add_argument``, ``set_defaults`` and
  setting attributes (an epilog), or positionals in another order than the
  required ones, then at most one ``?`` or ``*``.

tests/unit/test_fastargs.py compares the two over generated command lines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace

from fabrikito import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

_PLAIN_KEYS = frozenset({"help", "metavar", "dest", "default", "action", "nargs"})


class _Declined(Exception):
    """The builder does something this module does not read: argparse reads the line."""


class _Option:
    __slots__ = ("dest", "flag", "plain")

    def __init__(self, dest: str, *, flag: bool, plain: bool) -> None:
        self.dest = dest
        self.flag = flag  # store_true: takes no value
        self.plain = plain  # read here when given (else argparse reads the line)


class Spec:
    """What a builder declared: options by their strings, positionals in order, every default."""

    __slots__ = ("defaults", "epilog", "options", "positionals")

    def __init__(self) -> None:
        self.options: dict[str, _Option] = {}
        self.positionals: list[tuple[str, str | None]] = []  # (dest, nargs: None, "?" or "*")
        self.defaults: dict[str, Any] = {}
        self.epilog: object = None

    def add_argument(self, *names: str, **kw: Any) -> None:
        action = kw.get("action", "store")
        if not names:
            raise _Declined("no name")
        if names[0].startswith("-"):
            self._add_option(names, action, kw)
        else:
            self._add_positional(names, kw)

    def _add_option(self, names: Sequence[str], action: object, kw: dict[str, Any]) -> None:
        if not all(n.startswith("-") and n != "-" for n in names) or kw.get("required"):
            raise _Declined("an option this module does not read")
        long = [n for n in names if n.startswith("--")]
        dest = kw.get("dest") or (long[0] if long else names[0]).lstrip("-").replace("-", "_")
        flag = action == "store_true"
        plain = action in ("store", "store_true") and set(kw) <= _PLAIN_KEYS and "nargs" not in kw
        if action == "store_false":
            default = kw.get("default", True)
        elif flag:
            default = kw.get("default", False)
        else:
            default = kw.get("default")
        if isinstance(default, str) and "type" in kw:
            raise _Declined("argparse converts a default given as text")
        for name in names:
            self.options[name] = _Option(dest, flag=flag, plain=plain)
        self.defaults.setdefault(dest, default)

    def _add_positional(self, names: Sequence[str], kw: dict[str, Any]) -> None:
        nargs = kw.get("nargs")
        if len(names) != 1 or not set(kw) <= _PLAIN_KEYS - {"dest"} or kw.get("action", "store") != "store":
            raise _Declined("a positional this module does not read")
        if nargs not in (None, "?", "*") or any(n is not None for _, n in self.positionals):
            raise _Declined("positionals in an order this module does not read")
        dest = names[0]
        self.positionals.append((dest, nargs))
        self.defaults[dest] = kw.get("default", [] if nargs == "*" else None)

    def set_defaults(self, **kw: Any) -> None:
        self.defaults.update(kw)

    def __setattr__(self, name: str, value: object) -> None:
        if name not in Spec.__slots__:
            raise _Declined(f"sets {name}")
        object.__setattr__(self, name, value)


def spec_of(build: Callable[[Any], None]) -> Spec | None:
    """What ``build`` declares, or ``None`` when it does more than this module reads."""
    spec = Spec()
    try:
        build(spec)
    except (_Declined, AttributeError, TypeError):
        return None
    return spec


def parse(argv: Sequence[str], build: Callable[[Any], None], *, handler: str) -> SimpleNamespace | None:
    """``argv`` (the command's name first) as argparse would read it, or ``None`` to leave it to argparse."""
    spec = spec_of(build)
    if spec is None or not argv:
        return None
    values = dict(spec.defaults)
    given: list[str] = []
    i = 1
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg.startswith("-") and arg != "-":
            option = spec.options.get(arg)
            if given or option is None or not option.plain:
                return None  # an option after a positional, an unknown one, or one argparse must check
            if option.flag:
                values[option.dest] = True
                continue
            if i >= len(argv) or argv[i].startswith("-"):
                return None
            values[option.dest] = argv[i]
            i += 1
        else:
            given.append(arg)
    required = sum(1 for _, nargs in spec.positionals if nargs is None)
    rest = spec.positionals[-1][1] if spec.positionals else None
    if len(given) < required or (rest is None and len(given) > required) or (rest == "?" and len(given) > required + 1):
        return None
    for (dest, nargs), value in zip(spec.positionals, given, strict=False):
        values[dest] = value if nargs != "*" else given[required:]
    return SimpleNamespace(**{"version": False, "command": argv[0], **values, "_handler": handler})
