"""Growing a small window once, for ``say``'s checks, and putting it back exactly."""

from __future__ import annotations

from collections.abc import Callable

from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.delivery import seatpane

GROW_COLS, GROW_ROWS = 220, 50
SMALL_COLS, SMALL_ROWS = 110, 12


def no_trace(line: str) -> None:
    pass


class Grower:
    """Grows a small window once to 220x50 and puts it back exactly."""

    def __init__(self, server: Server, window_id: str, trace: Callable[[str], None] = no_trace) -> None:
        self.server = server
        self.window_id = window_id
        self.trace = trace
        self.saved: tuple[int, int, str | None] | None = None
        self.used = False

    def can_grow(self, look: seatpane.Look) -> bool:
        small = look.window_width < SMALL_COLS or look.window_height < SMALL_ROWS
        return small and not self.used

    def grow(self, look: seatpane.Look) -> None:
        self.used = True
        option = self.server.window_option(self.window_id, "window-size")
        self.saved = (look.window_width, look.window_height, option)
        self.trace(f"growing window {self.window_id} from {look.window_width}x{look.window_height} to 220x50")
        self.server.resize_window(self.window_id, GROW_COLS, GROW_ROWS)

    def restore(self) -> None:
        if self.saved is None:
            return
        width, height, option = self.saved
        self.saved = None
        try:
            self.server.resize_window(self.window_id, width, height)
        finally:
            self.server.set_window_option(self.window_id, "window-size", option)
            self.trace(f"put window {self.window_id} back to {width}x{height}, window-size {option or '(unset)'}")

    def restore_quietly(self) -> None:
        """:meth:`restore` at the end of a check, where a tmux error must not hide the outcome."""
        try:
            self.restore()
        except TmuxError:
            pass
