from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server(socket_name=f"fab-unit-{secrets.token_hex(4)}")
    yield srv
    try:
        srv.kill_server()
    except TmuxError:
        pass


def test_every_command_names_the_server() -> None:
    assert Server(socket_name="x").server_flags == ["-L", "x"]
    assert Server(socket_path="/tmp/s").server_flags == ["-S", "/tmp/s"]
    assert Server().server_flags == ["-L", "default"]
    assert Server().is_default
    assert not Server(socket_name="x").is_default


def test_failure_names_the_command_and_what_tmux_said(server: Server) -> None:
    with pytest.raises(TmuxError) as info:
        server.run("display-message", "-p", "-t", "%9999", "x")
    text = str(info.value)
    assert "display-message" in text
    assert server.server_flags[1] in text
    assert "exited with status 1" in text


def test_timeout_is_an_error_not_a_hang(server: Server) -> None:
    server.new_session("s", ["sleep", "30"], cwd="/")
    with pytest.raises(TmuxError, match="timed out"):
        server.run("run-shell", "sleep 3", timeout=0.3)


def test_paste_uses_a_buffer_and_leaves_none(server: Server) -> None:
    pane = server.new_session("s", ["cat"], cwd="/", width=80, height=10)
    server.paste(pane, "hello 'quoted' $HOME ✓", bracketed=False)
    out = ""
    import time

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        out = server.capture(pane)
        if "✓" in out:
            break
        time.sleep(0.05)
    assert "hello 'quoted' $HOME ✓" in out
    assert server.run("list-buffers", "-F", "#{buffer_name}").strip() == ""


def test_list_panes_and_window_options(server: Server) -> None:
    pane = server.new_session("s", ["sleep", "30"], cwd="/", width=100, height=20)
    rows = server.list_panes(["pane_id", "session_name", "pane_width", "pane_height"])
    assert rows == [{"pane_id": pane, "session_name": "s", "pane_width": "100", "pane_height": "20"}]
    assert server.window_option("=s:", "window-size") is None
    server.set_window_option("=s:", "window-size", "manual")
    assert server.window_option("=s:", "window-size") == "manual"
    server.set_window_option("=s:", "window-size", None)
    assert server.window_option("=s:", "window-size") is None
