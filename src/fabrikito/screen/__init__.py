"""Screen recognition: is the bottom of a seat's pane an agent's live input box, and what is in it?

This module is the agent- and version-neutral interface.  A :class:`Recogniser`
turns one :class:`PaneSnapshot` (a ``capture-pane -p -e`` screen plus the pane
state tmux reports with it) into a :class:`BoxReading`.  ``say``, ``flush`` and
``status`` only ever read :class:`BoxReading` values and call the pure checks
below, so a new Claude Code release, or another agent, plugs in as one more
recogniser module registered in :func:`recogniser_for`.

Everything fails closed: a screen that is not positively recognised is
:attr:`ScreenState.NOT_RECOGNISED`, and every check answers "no" for anything
but a recognised box.  See ``docs/screen-recognition.md``.
"""

from __future__ import annotations

import re
from enum import StrEnum

from fabrikito import TYPE_CHECKING
from fabrikito.base.values import frozen

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Literal, Protocol

    Renderer = Literal["inline", "fullscreen"]
else:  # what these names are at run time, where nothing checks them
    Renderer = str
    Protocol = object

NOT_READY = "screen not recognised as ready"


class ScreenState(StrEnum):
    """What the bottom of the screen is."""

    READY = "ready"  # the live input box, empty or showing one dim line only
    BOX_TEXT = "box-text"  # the live input box, holding text
    DIALOG = "dialog"  # a recognised dialog, prompt or menu; ``detail`` names it
    DIFF_NOTICE = "diff-notice"  # the diff-panel notice pushed the end of the box off the screen
    COPY_MODE = "copy-mode"  # the pane is in a tmux mode (copy mode...)
    NOT_RECOGNISED = "not-recognised"  # anything else


@frozen
class PaneSnapshot:
    """One look at a pane: its screen with escapes and the state tmux reported with it."""

    ansi: str  # capture-pane -p -e
    width: int  # pane_width
    height: int  # pane_height
    alternate_on: bool  # alternate_on: the fullscreen renderer draws on the alternate screen
    in_mode: bool  # pane_in_mode: copy mode and the like
    cursor_x: int  # cursor_x
    cursor_y: int  # cursor_y


@frozen
class BoxReading:
    """What a recogniser made of one snapshot.

    The box fields describe the live input box when one was found (in any
    state: a box in copy mode or behind the diff notice is still read), and
    are empty/zero/False when none was.
    """

    state: ScreenState
    renderer: Renderer
    reason: str = ""  # a sentence for people; empty only for READY
    detail: str = ""  # what exactly was seen (the dialog's name, what failed), for logs and status
    busy: bool = False  # a turn is running (informational; a busy box can still be READY)
    box_text: str = ""  # the box's visible input rows, non-dim text only, rows joined with "\n"
    dim_text: str = ""  # dim text inside the box rows (a prompt suggestion, the queued-message hint)
    box_rows: int = 0  # input rows visible
    top_visible: bool = False  # the ❯ row with the top rule above it is on screen
    max_rows: int = 0  # the most input rows this renderer shows in this pane (see the docs for inline)
    full: bool = False  # the box shows as many rows as it can, so a taller text scrolls or is cut
    ends_screen: bool = False  # the bottom rule is visible and only footer rows (or nothing) follow it

    @property
    def ready(self) -> bool:
        return self.state is ScreenState.READY


@frozen
class Verdict:
    """The answer of a check: ``ok``, or not and why."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


class Recogniser(Protocol):
    """Reads one agent version's screen."""

    @property
    def agent(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def key(self) -> tuple[str, ...]:
        """What tells this recogniser's readings from another's: its dialect, release and, failing closed,
        its reason (two recognisers of one key read every screen alike)."""
        ...

    def recognise(self, snapshot: PaneSnapshot) -> BoxReading: ...

    def check_label(self, reading: BoxReading, label: str) -> Verdict: ...

    def check_after_paste(self, reading: BoxReading, label: str, message: str) -> Verdict: ...

    def flush_matches(self, reading: BoxReading, record_label: str, record_body: str) -> bool: ...

    def conversation_shown(self, snapshot: PaneSnapshot) -> bool: ...


# -- the checks say and flush use (pure, version-neutral) ---------------------------

# How Claude Code shows a collapsed paste: ``[Pasted text #N]`` or ``[Pasted text #N +K lines]``.
PLACEHOLDER_RE = re.compile(r"\[Pasted text #(?P<n>[1-9][0-9]*)(?: \+(?P<k>[1-9][0-9]*) lines)?\]")
# The same with white space left out, as it is after :func:`normalise`.
_PLACEHOLDER_NORMALISED = r"\[Pastedtext#[1-9][0-9]*(?:\+[1-9][0-9]*lines)?\]"

# A paste longer than this (in UTF-16 code units) always shows as a placeholder.
COLLAPSE_LENGTH = 800

# The least of a message's end that must be visible to send a message taller than the box.
MIN_VISIBLE_END = 40

SCREEN_NOT_ENDING = "the screen no longer ends with the box"
DIM_NEXT_TO_MESSAGE = "dim text was drawn next to the message"
FEWER_ROWS = "the box shows fewer rows than it can and not just the message"
TOO_LITTLE_VISIBLE = "too little of the message's end is visible"
NOT_ENDING_WITH_MESSAGE = "the box does not end with the message"
DIM_NEXT_TO_LABEL = "dim text was drawn next to the label"
NOT_JUST_LABEL = "the box does not hold just the label"

_BOX_STATES = (ScreenState.READY, ScreenState.BOX_TEXT)


def normalise(text: str) -> str:
    """``text`` with all white space left out (the box wraps and indents text)."""
    return "".join(text.split())


def is_label_and_placeholder(box: str, label: str, pattern: str = _PLACEHOLDER_NORMALISED) -> bool:
    """Whether ``box`` is ``label`` and exactly one paste placeholder (``pattern``: Claude Code's by
    default, a regular expression on text with white space left out), white space aside."""
    return re.fullmatch(re.escape(normalise(label)) + pattern, normalise(box)) is not None


def may_collapse(message: str) -> bool:
    """Whether Claude Code may show a paste of ``message`` as a placeholder.

    It does so for more than :data:`COLLAPSE_LENGTH` UTF-16 code units or for
    newlines (how many depends on the pane's rows, down to any at all), and
    for nothing else (README §3).  A short one-line message never collapses, so
    a placeholder after its paste is someone else's.
    """
    return utf16_length(message) > COLLAPSE_LENGTH or "\n" in message or "\r" in message


def utf16_length(text: str) -> int:
    """UTF-16 code units in ``text`` (a character past U+FFFF is two; a lone surrogate one), counted
    without loading the UTF-16 codec (a quarter of a millisecond of every ``say``)."""
    if len(text) > COLLAPSE_LENGTH * 2:
        return len(text.encode("utf-16-le", "surrogatepass")) // 2
    return len(text) + sum(1 for char in text if char > "\uffff")


def claude_placeholder(message: str) -> str | None:
    """The placeholder Claude Code may show for a paste of ``message`` (a regular expression on text
    with white space left out), or ``None`` when it shows the text itself."""
    return _PLACEHOLDER_NORMALISED if may_collapse(message) else None


def _is_collapsed(box: str, label: str, message: str, placeholder: Callable[[str], str | None]) -> bool:
    pattern = placeholder(message)
    return pattern is not None and is_label_and_placeholder(box, label, pattern)


def _box_at_bottom(reading: BoxReading) -> bool:
    return reading.state in _BOX_STATES and reading.ends_screen


def check_label(reading: BoxReading, label: str) -> Verdict:
    """Whether the box holds just ``label`` (white space aside): the check before the message's paste."""
    if not _box_at_bottom(reading):
        return Verdict(False, SCREEN_NOT_ENDING)
    if reading.dim_text:
        return Verdict(False, DIM_NEXT_TO_LABEL)
    if not reading.top_visible or normalise(reading.box_text) != normalise(label):
        return Verdict(False, NOT_JUST_LABEL)
    return Verdict(True)


def check_after_paste(
    reading: BoxReading, label: str, message: str, placeholder: Callable[[str], str | None] = claude_placeholder
) -> Verdict:
    """The Enter rule: whether the box now holds the labelled message and nothing else.

    Enter only when the box holds exactly ``label + message`` (white space
    aside), or ``label`` and exactly the one placeholder the agent shows for
    a paste of ``message`` (``placeholder``; Claude Code's ``[Pasted text
    #N]`` for a message that can collapse to one, see :func:`may_collapse`), or
    the visible end of a message taller than the box: the box full, its text
    the last :data:`MIN_VISIBLE_END` or more characters of the message.
    Characters are counted with white space left out.
    """
    if not _box_at_bottom(reading):
        return Verdict(False, SCREEN_NOT_ENDING)
    if reading.dim_text:
        return Verdict(False, DIM_NEXT_TO_MESSAGE)
    box = normalise(reading.box_text)
    whole = normalise(label + message)
    if not reading.full:
        if reading.top_visible and (box == whole or _is_collapsed(box, label, message, placeholder)):
            return Verdict(True)
        return Verdict(False, FEWER_ROWS)
    # A full box: what shows may be only the end of the text.
    if not box or not whole.endswith(box):
        return Verdict(False, NOT_ENDING_WITH_MESSAGE)
    if box != whole and len(box) < MIN_VISIBLE_END:
        return Verdict(False, TOO_LITTLE_VISIBLE)
    return Verdict(True)


def flush_matches(
    reading: BoxReading,
    record_label: str,
    record_body: str,
    placeholder: Callable[[str], str | None] = claude_placeholder,
) -> bool:
    """Whether ``flush`` may submit the box: what it holds is a non-empty start of the record.

    The box, white space left out, must be a start of ``record_label +
    record_body``, or the label and one placeholder (when the body can
    collapse to one: a record that keeps only its label, as for ``sec``,
    matches only the label alone).  A box that is not full counts only with
    its top visible; a full box, which may have scrolled its start out of
    view, only when it shows the end of the whole record as ``say``'s Enter
    rule (:func:`check_after_paste`) requires.
    """
    if not _box_at_bottom(reading) or reading.dim_text:
        return False
    if reading.full:
        # Only the end of a taller text may show: flush it when say's own Enter rule would have
        # sent it, the end of the whole record (label and body) with enough of it visible.
        return bool(record_body) and check_after_paste(reading, record_label, record_body, placeholder).ok
    if not reading.top_visible:
        return False
    box = normalise(reading.box_text)
    if not box:
        return False
    if normalise(record_label + record_body).startswith(box):
        return True
    return _is_collapsed(box, record_label, record_body, placeholder)


# -- recognisers ------------------------------------------------------------------------


class StandardChecks:
    """The pure checks as methods, for recognisers that use them unchanged but for the placeholder a
    paste may show as (:meth:`placeholder`, Claude Code's by default); the agent and version it reads."""

    def __init__(self, agent: str, version: str) -> None:
        self._agent = agent
        self._version = version

    @property
    def agent(self) -> str:
        return self._agent

    @property
    def version(self) -> str:
        return self._version

    @property
    def key(self) -> tuple[str, ...]:
        kind = type(self)
        return (f"{kind.__module__}.{kind.__qualname__}", self._agent, self._version)

    def placeholder(self, message: str) -> str | None:
        return claude_placeholder(message)

    def check_label(self, reading: BoxReading, label: str) -> Verdict:
        return check_label(reading, label)

    def check_after_paste(self, reading: BoxReading, label: str, message: str) -> Verdict:
        return check_after_paste(reading, label, message, self.placeholder)

    def flush_matches(self, reading: BoxReading, record_label: str, record_body: str) -> bool:
        return flush_matches(reading, record_label, record_body, self.placeholder)

    def conversation_shown(self, snapshot: PaneSnapshot) -> bool:
        """Whether a seat started on a resumed conversation has drawn it, so its box takes what is typed.

        ``True`` for agents that load the conversation before they draw their box (Claude Code, Codex
        CLI); a dialect whose box shows first and is taken away while the conversation loads says
        otherwise."""
        return True


class FailClosedRecogniser(StandardChecks):
    """A recogniser for an agent or version fabrikito does not know: nothing is ever ready."""

    def __init__(self, agent: str, version: str, reason: str) -> None:
        super().__init__(agent, version)
        self.reason = reason

    @property
    def key(self) -> tuple[str, ...]:
        return (*super().key, self.reason)

    def recognise(self, snapshot: PaneSnapshot) -> BoxReading:
        renderer: Renderer = "fullscreen" if snapshot.alternate_on else "inline"
        return BoxReading(state=ScreenState.NOT_RECOGNISED, renderer=renderer, reason=self.reason, detail=self.reason)


QUALIFY_ADVICE = "run `fabrikito qualify` to check this release offline (about a minute) and accept it"


def known_versions(agent: str = "claude") -> list[str]:
    """The releases of ``agent`` the package's table recognises."""
    from fabrikito.screen.releases import packaged

    return sorted(packaged(agent))


def recogniser_for(agent: str, version: str | None, *, exe: str | None = None) -> Recogniser:
    """The recogniser for ``agent`` at release ``version``.

    A release is recognised by the package's table of qualified releases, or
    by the user's own qualification of the binary ``exe`` (see
    :mod:`fabrikito.screen.releases`).  An unknown agent, an unknown release,
    or a release that cannot be told (``version=None``) gets a recogniser
    that fails closed on every screen, whose reason says what to do.
    """
    from fabrikito.screen import releases

    name = releases.AGENT_NAMES.get(agent)
    if name is None:
        return FailClosedRecogniser(agent, version or "", f"{agent} is not an agent fabrikito recognises")
    if version is None:
        return FailClosedRecogniser(agent, "", f"fabrikito cannot tell which {name} release runs in the pane")
    found = releases.lookup(agent, version, exe)
    if found is None:
        return FailClosedRecogniser(
            agent, version, f"{name} {version} is not a release fabrikito has qualified: {QUALIFY_ADVICE}"
        )
    return releases.make(found.dialect, version)
