"""argparse as fabrikito lays it out: help, usage errors and every unusual command line.

:mod:`fabrikito.cli` builds its parser from these only when
:mod:`fabrikito.cli.fastargs` leaves a command line to argparse (``--help``, an
error, an option it does not read itself), so the commands run on every
message do not import argparse.  Start-up is kept small here too: help is laid
out without ``shutil``, and argparse's gettext lookups are skipped when the
interpreter has no translations to find (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import sys

from fabrikito import TYPE_CHECKING
from fabrikito.base.errors import print_error

if TYPE_CHECKING:
    from typing import NoReturn


class HelpFormatter(argparse.HelpFormatter):
    """argparse's layout, with two changes: the width is found without importing
    ``shutil`` (as ``shutil.get_terminal_size`` finds it), and a description or
    epilog of several lines (a table of exit codes) is printed as written; one of
    a single line is wrapped as usual."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, width or columns() - 2)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text.strip("\n"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def columns() -> int:
    try:
        found = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        found = 0
    if found <= 0:
        try:
            found = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else 0
        except (AttributeError, ValueError, OSError):
            found = 0
    return found or 80


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line that says where the help is (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        print_error(f"{self.prog}: {message} (see {self.prog} --help)")
        raise SystemExit(2)


def untranslated() -> None:
    """Spare argparse's gettext lookups when this Python has no translations.

    argparse passes each of its own words through ``gettext``, which imports
    ``locale`` and looks for a catalogue on disk every time (about 2 ms for one
    parser).  With no ``share/locale`` under the interpreter's prefix there is
    none to find and every word comes back as it went in; so then it is skipped.
    """
    if getattr(argparse, "_", None) is not _same and not os.path.isdir(
        os.path.join(sys.base_prefix, "share", "locale")
    ):
        argparse._ = _same  # type: ignore[attr-defined]


def _same(text: str) -> str:
    return text
