"""What the recognisers of agents other than Claude Code share: the frame around reading one screen.

Codex CLI and Gemini CLI keep their input box on the screen, empty, while a
turn runs, so for them a busy screen is never typable: it is read as
:attr:`ScreenState.NOT_RECOGNISED` with ``busy`` set (and the box's text,
for ``status``), never as ready or as box text that ``say`` could submit.
Each dialect module reads the rows (:meth:`AgentScreen.read`); this base
parses the capture, checks its size, and turns a pane in a tmux mode into
:attr:`ScreenState.COPY_MODE`.
"""

from __future__ import annotations

from fabrikito.base.values import replace
from fabrikito.screen import NOT_READY, BoxReading, PaneSnapshot, Renderer, ScreenState, StandardChecks
from fabrikito.screen.ansi import Row, parse

BOX_TEXT_REASON = "the input box already holds text"
COPY_MODE_REASON = "the pane is in copy mode (someone is scrolling)"
BUSY_REASON = "the agent is working on a turn: a message typed now would change the running turn"


def text(row: Row) -> str:
    return row.text.rstrip(" ")


def blank(row: Row) -> bool:
    return text(row) == ""


def not_recognised(renderer: Renderer, detail: str) -> BoxReading:
    return BoxReading(state=ScreenState.NOT_RECOGNISED, renderer=renderer, reason=NOT_READY, detail=detail)


def busy_reading(reading: BoxReading, why: str) -> BoxReading:
    """``reading`` (a box that was read) turned into a busy screen: never ready, never box text."""
    return replace(reading, state=ScreenState.NOT_RECOGNISED, reason=BUSY_REASON, detail=why, busy=True)


def box_reading(
    renderer: Renderer, texts: list[str], *, top_visible: bool = True, full: bool = False, ends_screen: bool = True
) -> BoxReading:
    """A box read as holding text, one entry of ``texts`` per row of it; the dialect decides from there."""
    return BoxReading(
        state=ScreenState.BOX_TEXT,
        renderer=renderer,
        reason=BOX_TEXT_REASON,
        detail="the input box holds text",
        box_text="\n".join(texts),
        box_rows=len(texts),
        top_visible=top_visible,
        max_rows=len(texts),
        full=full,
        ends_screen=ends_screen,
    )


def empty_box(reading: BoxReading, snapshot: PaneSnapshot, at: tuple[int, int], detail: str) -> BoxReading:
    """An empty box: ready when the cursor is at ``at`` (column, row), where the agent keeps it in an empty box."""
    if (snapshot.cursor_x, snapshot.cursor_y) != at:
        return replace(
            reading,
            state=ScreenState.NOT_RECOGNISED,
            reason=NOT_READY,
            detail=f"the cursor ({snapshot.cursor_x},{snapshot.cursor_y}) is not in the empty box ({at[0]},{at[1]})",
        )
    return replace(reading, state=ScreenState.READY, reason="", detail=detail)


class AgentScreen(StandardChecks):
    """A recogniser of one agent's dialect; subclasses read the rows in :meth:`read`."""

    agent_name = ""
    dialect = ""
    release = ""  # the release the dialect was qualified on: the version when none is given

    def __init__(self, version: str | None = None) -> None:
        super().__init__(self.agent_name, version or self.release)

    @staticmethod
    def placeholder_of(message: str) -> str | None:
        """What the agent shows for ``message`` pasted, when it shows a placeholder (subclasses)."""
        raise NotImplementedError

    def placeholder(self, message: str) -> str | None:
        return self.placeholder_of(message)

    def read(self, rows: tuple[Row, ...], snapshot: PaneSnapshot, renderer: Renderer) -> BoxReading:
        raise NotImplementedError

    def recognise(self, snapshot: PaneSnapshot) -> BoxReading:
        renderer: Renderer = "fullscreen" if snapshot.alternate_on else "inline"
        rows = parse(snapshot.ansi)
        if snapshot.width <= 0 or snapshot.height <= 0:
            reading = not_recognised(renderer, "the pane has no size")
        elif len(rows) > snapshot.height:
            reading = not_recognised(renderer, f"the capture has {len(rows)} rows, more than the pane's height")
        else:
            rows = rows + (Row(),) * (snapshot.height - len(rows))
            if all(blank(r) for r in rows):
                reading = not_recognised(renderer, "the screen is empty")
            else:
                reading = self.read(rows, snapshot, renderer)
        if snapshot.in_mode:
            return replace(
                reading,
                state=ScreenState.COPY_MODE,
                reason=COPY_MODE_REASON,
                detail="tmux reports the pane in a mode (copy mode)",
            )
        return reading
