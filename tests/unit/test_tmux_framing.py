"""How fabrikito frames tmux's ``-F`` output, proven on every tmux release (3.3a, 3.5a, 3.8).

tmux 3.5a writes U+001F, which fabrikito once put between fields, as the four characters ``\\037``;
a tab passes through every release.  Values that may hold a tab (names, titles, paths) go last and
stay whole; lines are cut at ``\\n`` only; ``-u`` keeps non-ASCII names whatever the locale.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from fabrikito.base.tmux import (
    FIELD_SEP,
    PANE_FIELDS,
    Server,
    format_of,
    parse_version,
    records,
    split_fields,
    unescape,
)
from fabrikito.delivery import seatpane

pytestmark = pytest.mark.tmux_releases


def test_the_release_on_path_is_the_one_the_test_runs_on(tmux_release: str, server: Server) -> None:
    major, minor, letter = server.version()
    assert f"{major}.{minor}{letter}" == tmux_release
    assert server.version() is server.version()  # read once


def test_a_tab_passes_through_and_u001f_is_what_3_5a_escapes(tmux_release: str, server: Server) -> None:
    server.new_session("s", ["sleep", "30"], cwd="/")
    out = server.run("list-panes", "-a", "-F", "a\tb\x1fc")
    assert out == ("a\tb\\037c\n" if tmux_release == "3.5a" else "a\tb\x1fc\n")


def test_the_last_field_keeps_its_tabs_and_the_others_are_cut_at_each() -> None:
    assert split_fields("%1\t42\tdir\twith\ttabs", 3) == ["%1", "42", "dir\twith\ttabs"]
    assert split_fields("%1\t42", 3) is None
    assert format_of(["pane_id", "pane_pid"]) == f"#{{pane_id}}{FIELD_SEP}#{{pane_pid}}"
    assert PANE_FIELDS[-1] == "session_name"  # the one text value, last


def test_what_tmux_3_5a_escaped_is_decoded_and_nothing_else_is() -> None:
    assert unescape("a\\034b\\001\\177") == "a\x1cb\x01\x7f"
    assert unescape("a\\040 \\x \\9999 end\\") == "a\\040 \\x \\9999 end\\"  # not a control: left as it is
    assert split_fields("%1\tdir\\011x", 2) == ["%1", "dir\tx"]


def test_lines_are_cut_at_newlines_only() -> None:
    assert records("a\x1cb\u2028c\x85d\nsecond\n") == ["a\x1cb\u2028c\x85d", "second"]
    assert records("") == []
    assert records("one") == ["one"]


def test_a_path_with_tabs_controls_and_non_ascii_and_a_non_ascii_name_round_trip(
    server: Server, tmp_path: Path, tmux_release: str
) -> None:
    folder = tmp_path / "a\tb é\x1cc\x7f"
    folder.mkdir()
    pane = server.new_session("sé", ["sleep", "30"], cwd=str(folder))
    said = server.run("display-message", "-p", "-t", pane, "#{pane_current_path}").rstrip("\n")
    assert said == (str(folder)[:-3] + "\\034c\\177" if tmux_release == "3.5a" else str(folder))  # 3.5a escapes
    rows = server.list_panes(["pane_id", "pane_current_path"])
    assert rows == [{"pane_id": pane, "pane_current_path": str(folder)}]
    [row] = seatpane.list_panes(server)
    assert (row.pane_id, row.session, row.dead) == (pane, "sé", False)
    assert server.pane_fields(pane, ["pane_id", "session_name"]) == {"pane_id": pane, "session_name": "sé"}


def test_utf_8_whatever_the_locale(server: Server) -> None:
    """Under ``LANG=C`` tmux without ``-u`` prints ``é`` as ``_``: fabrikito passes ``-u`` on every call."""
    server.new_session("é", ["sleep", "30"], cwd="/")
    env = {"PATH": os.environ["PATH"], "LANG": "C"}
    bare = subprocess.run(
        ["tmux", *server.server_flags, "list-sessions", "-F", "#{session_name}"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert bare.stdout == "_\n"  # what -u is for
    os.environ["LANG"], before = "C", os.environ.get("LANG")
    try:
        assert records(Server(socket_name=server.socket_name).run("list-sessions", "-F", "#{session_name}")) == ["é"]
    finally:
        os.environ.pop("LANG") if before is None else os.environ.update(LANG=before)


def test_a_title_is_read_whole_and_never_holds_a_tab(server: Server) -> None:
    pane = server.new_session("s", ["sleep", "30"], cwd="/")
    server.run("select-pane", "-t", pane, "-T", "one two é")
    assert server.pane_fields(pane, ["pane_id", "pane_title"]) == {"pane_id": pane, "pane_title": "one two é"}
    server.run("select-pane", "-t", pane, "-T", "three\tfour")  # every release keeps the title it had
    assert server.pane_fields(pane, ["pane_id", "pane_title"]) == {"pane_id": pane, "pane_title": "one two é"}


def test_versions_are_read_from_what_tmux_says() -> None:
    assert parse_version("tmux 3.5a\n") == (3, 5, "a")
    assert parse_version("tmux 3.8") == (3, 8, "")
    assert parse_version("tmux next-3.9") == (3, 9, "")
    assert parse_version("") == (0, 0, "")


def test_a_dead_pane_is_listed_and_looked_at_on_every_release(server: Server, tmux_release: str) -> None:
    """tmux 3.8 prints no ``#{pane_pid}`` for a dead pane (3.3a and 3.5a the pid that exited): the pane
    is still listed, dead, its pid :data:`~fabrikito.delivery.seatpane.NO_PID`."""
    pane = server.new_session("s", ["sleep", "0.5"], cwd="/")
    server.set_window_option(pane, "remain-on-exit", "on")
    deadline = time.monotonic() + 5
    while server.display(pane, "#{pane_dead}") != "1" and time.monotonic() < deadline:
        time.sleep(0.05)
    said = server.display(pane, "#{pane_pid}")
    assert (said == "") is (tmux_release == "3.8")
    [row] = seatpane.list_panes(server)
    assert (row.pane_id, row.dead) == (pane, True)
    assert (row.pane_pid == seatpane.NO_PID) is (tmux_release == "3.8")
    look = seatpane.look(server, pane)
    assert look.dead and look.pane_pid == row.pane_pid
