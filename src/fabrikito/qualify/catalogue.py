"""The catalogue of states a seat's screen is driven through, and what each must be read as.

Each :class:`Case` drives fresh seats of a :class:`~fabrikito.qualify.capture.Job`
into a state and saves one or more captures; each capture it saves has an
:class:`Expect`: what a recogniser must read there (the screen state, the
box's text, busy or not, a dim line) and which of the checks ``say`` and
``flush`` apply must pass on it.  :func:`judge` compares a reading with its
expectation and names every difference.

The same catalogue feeds the fixture corpus (``scripts/capture_screens.py``),
the qualification of every release (``scripts/qualify_releases.py``) and a
user's ``fabrikito qualify``: a release is qualified only when every capture
is read as expected.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from fabrikito.offline import claude_setup, seatkit
from fabrikito.offline.replies import Reply
from fabrikito.qualify.capture import LABEL, Job, text_of
from fabrikito.screen import BoxReading, Recogniser, ScreenState, normalise

READY = ScreenState.READY
BOX_TEXT = ScreenState.BOX_TEXT
DIALOG = ScreenState.DIALOG
NOT_TYPABLE = (ScreenState.DIALOG, ScreenState.NOT_RECOGNISED)

QUEUED_HINT = "Press up to edit queued messages"
SHORT = "please review the patch"
THREE_LINES = "line one\nline two\nline three"


@dataclass(frozen=True, slots=True)
class Expect:
    """What a recogniser must make of one capture."""

    states: tuple[ScreenState, ...]
    box: str | None = None  # the box's text, white space aside
    busy: bool | None = None
    dim: str | None = None  # a dim line must be read in the box, containing this ("" for any)
    enter: tuple[str, str] | None = None  # (label, message): the Enter rule must pass
    label: str | None = None  # the label check must pass


def expect(*states: ScreenState, **kw: object) -> Expect:
    return Expect(states=states, **kw)  # type: ignore[arg-type]


def judge(exp: Expect, reading: BoxReading, recogniser: Recogniser) -> list[str]:
    """Every way ``reading`` differs from ``exp`` (empty when it is read as expected)."""
    problems: list[str] = []
    if reading.state not in exp.states:
        wanted = " or ".join(s.value for s in exp.states)
        problems.append(f"read as {reading.state.value} ({reading.detail or reading.reason}), expected {wanted}")
        return problems
    if exp.box is not None and normalise(reading.box_text) != normalise(exp.box):
        problems.append(f"box read as {reading.box_text!r}, expected {exp.box!r}")
    if exp.busy is not None and reading.busy != exp.busy:
        problems.append(f"busy read as {reading.busy}, expected {exp.busy}")
    if exp.dim is not None and (not reading.dim_text or exp.dim not in reading.dim_text):
        problems.append(f"dim line read as {reading.dim_text!r}, expected one holding {exp.dim!r}")
    if exp.enter is not None:
        verdict = recogniser.check_after_paste(reading, *exp.enter)
        if not verdict.ok:
            problems.append(f"the Enter rule refused the message: {verdict.reason}")
    if exp.label is not None:
        verdict = recogniser.check_label(reading, exp.label)
        if not verdict.ok:
            problems.append(f"the label check refused the label: {verdict.reason}")
    return problems


Drive = Callable[[Job], None]


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    drive: Drive
    expects: dict[str, Expect]  # capture case name -> expectation
    renderers: tuple[str, ...] = ("inline", "fullscreen")
    quick: bool = True  # part of `fabrikito qualify` (the rest only in the full capture)


# -- drivers ---------------------------------------------------------------------------


def _empty_box(job: Job) -> None:
    seat = job.seat()
    job.settle(seat.pane)
    job.save(seat.pane, "empty-box-fresh-start")


def _type(job: Job, seat: seatkit.LiveSeat, text: str, quiet: float = 0.6) -> None:
    """Type ``text`` into the box (send-keys -l) and wait until it shows and the screen settles."""
    job.server.send_keys(seat.pane, text, literal=True)
    job.wait_screen(seat.pane, lambda s: text in s, "typed text in the box")
    job.settle(seat.pane, quiet=quiet)


def _typed(job: Job) -> None:
    seat = job.seat()
    _type(job, seat, "hello from em")
    job.save(seat.pane, "typed-short-unsubmitted", note="send-keys -l 'hello from em'")


def _cleared_draft(job: Job) -> None:
    """A draft cleared with Ctrl-U (the footer offers to paste it back), then one Esc on typed text."""
    seat = job.seat()
    job.server.send_keys(seat.pane, "a draft", literal=True)
    job.wait_screen(seat.pane, lambda s: "a draft" in s, "the draft in the box")
    job.server.send_keys(seat.pane, "C-u")
    job.wait_screen(seat.pane, lambda s: "a draft" not in s, "the draft to be cleared")
    job.settle(seat.pane, quiet=0.3)
    job.save(seat.pane, "cleared-draft", note="typed 'a draft', then Ctrl-U")
    _type(job, seat, "hello from em", quiet=0.3)
    job.server.send_keys(seat.pane, "Escape")
    job.wait_screen(seat.pane, lambda s: "again to clear" in s.lower(), "the clear notice")
    job.save(seat.pane, "esc-once", note="typed 'hello from em', then one Esc")


def _paste(job: Job, case: str, text: str, note: str) -> None:
    job.paste_and_save(job.seat().pane, text, case, note=note, what=f"the paste for {case}")


def _pastes(job: Job) -> None:
    for n in (799, 800, 801):
        _paste(job, f"paste-len{n}", text_of(n), f"bracketed paste of one {n}-character line")
        job.end()
    _paste(job, "paste-2lines", "line one\nline two", "bracketed paste of 2 lines, no trailing newline")
    job.end()
    _paste(job, "paste-3lines", THREE_LINES, "bracketed paste of 3 lines, no trailing newline")


def _label_then(job: Job, case: str, message: str, note: str) -> None:
    job.label_then(job.seat().pane, case, message, note, save_label=True)


def _labels(job: Job) -> None:
    _label_then(job, "label-then-short", SHORT, "paste '[from em] ', then paste a short line")
    job.end()
    _label_then(job, "label-then-3lines", THREE_LINES, "paste the label, then 3 lines")
    job.end()
    _label_then(job, "label-then-len1000", text_of(1000), "paste the label, then 1000 characters (a placeholder)")


def tall_text(job: Job) -> str:
    return text_of(max(2400, job.height * (job.width - 2)))  # more rows of text than the pane has (see expectation)


def _tall_box(job: Job) -> None:
    seat = job.seat()
    text = tall_text(job)
    for start in range(0, len(text), 700):  # under 800 characters each, so no placeholder
        before = job.server.capture(seat.pane)
        job.server.send_keys(seat.pane, text[start : start + 700], literal=True)
        job.changed(seat.pane, before, "the box to grow")
        job.settle(seat.pane, quiet=0.3)
    job.settle(seat.pane)
    job.save(seat.pane, "tall-box", note=f"{len(text)} characters typed with send-keys -l in 700-character chunks")


def _turn(job: Job, seat: seatkit.LiveSeat, prompt: str) -> None:
    since = job.standin.mark()
    seatkit.submit(job.server, seat, prompt)
    job.standin.wait_for_request(seat.role, prompt, 20, since=since)
    job.wait_screen(seat.pane, lambda s: seatkit.box_row(s, seat.session) is not None, "the box after the turn")
    job.settle(seat.pane, quiet=0.5)


def _dim_hint(job: Job) -> None:
    seat = job.seat(env={"CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION": "1"})
    job.settle(seat.pane)
    for n in (1, 2):
        _turn(job, seat, f"turn number {n}")
    job.wait_screen(
        seat.pane,
        lambda s: any(line.startswith(seatkit.PROMPT + "run the test suite") for line in s.split("\n")),
        "the prompt suggestion in the box",
    )
    job.settle(seat.pane)
    job.save(seat.pane, "dim-hint-suggestion", note="prompt suggestion 'run the test suite' after two turns")


def _after_turn(job: Job) -> None:
    seat = job.seat()
    job.standin.on("say hello", "hello, I am the stand-in", seat=seat.role)
    seatkit.submit(job.server, seat, "say hello")
    job.wait_screen(seat.pane, lambda s: "hello, I am the stand-in" in s, "the reply")
    job.wait_screen(seat.pane, lambda s: seatkit.box_row(s, seat.session) is not None, "the box after the turn")
    job.settle(seat.pane)
    job.save(seat.pane, "after-turn", note="one turn done: echoed prompt, reply, empty box")


def _busy(job: Job) -> None:
    seat = job.seat()
    job.standin.on("take your time", Reply(text="finally done", delay=120), seat=seat.role)
    seatkit.submit(job.server, seat, "take your time")
    job.standin.wait_for_request(seat.role, "take your time", 20)
    job.wait_screen(seat.pane, lambda s: "esc to interr" in s or "…" in s, "the spinner")
    time.sleep(2.5)  # let the spinner show its first glyphs and the footer settle; nothing to wait for
    job.save(seat.pane, "busy", note="a slow reply (pings for 120 s) holds the turn")
    seatkit.submit(job.server, seat, "queued while busy")
    job.wait_screen(seat.pane, lambda s: "queued while busy" in s and QUEUED_HINT in s, "the queued message")
    job.settle(seat.pane)
    job.save(seat.pane, "busy-queued", note="Enter during the slow turn: the message waits, the box shows a hint")


def _permission(job: Job) -> None:
    seat = job.seat(mode="default")
    command = {"command": f"date > /tmp/fabrikito-qualify-{secrets.token_hex(4)}.txt", "description": "Write the date"}
    job.standin.on("run the command", Reply(tool="Bash", input=command), seat=seat.role)
    seatkit.submit(job.server, seat, "run the command")
    job.wait_screen(seat.pane, lambda s: "Do you want to proceed?" in s or "❯ 1. Yes" in s, "the permission prompt")
    job.settle(seat.pane)
    job.save(seat.pane, "permission-prompt-bash", note="default mode; the stand-in calls Bash")


def _held(job: Job) -> None:
    seat = job.seat("b", mode="bypassPermissions")
    seatkit.post_inbox(seat, "hello from outside, please look at the build")
    job.wait_screen(seat.pane, lambda s: "Held message" in s or "Deliver" in s, "the held-message dialog")
    job.settle(seat.pane)
    job.save(seat.pane, "held-dialog", note="bypassPermissions receiver; raw external inbox post")


def _bypass_dialog(job: Job) -> None:
    home = claude_setup.make_home(job.root / f"home-nobypass-{secrets.token_hex(3)}", skip_bypass_prompt=False)
    seat = job.seat(mode="bypassPermissions", home=home, wait=False)
    job.wait_screen(seat.pane, lambda s: "Bypass Permissions mode" in s, "the bypass acceptance dialog", 30)
    job.settle(seat.pane)
    job.save(seat.pane, "bypass-dialog", note="HOME without skipDangerousModePermissionPrompt")
    seatkit.stop_pids(seatkit.home_pids(home))


def _rewind(job: Job) -> None:
    """Esc twice on an empty box after a turn: the rewind dialog."""
    seat = job.seat()
    _turn(job, seat, "a first turn to rewind to")
    job.server.send_keys(seat.pane, "Escape")
    job.server.send_keys(seat.pane, "Escape")
    job.wait_screen(seat.pane, lambda s: "Rewind" in s, "the rewind dialog")
    job.settle(seat.pane)
    job.save(seat.pane, "rewind-dialog", note="one turn, then Esc Esc on the empty box")


def _copy_mode(job: Job) -> None:
    seat = job.seat()
    _type(job, seat, "hello from em")
    job.server.run("copy-mode", "-t", seat.pane)
    seatkit.wait_until(lambda: job.server.display(seat.pane, "#{pane_in_mode}") == "1", 5, what="copy mode")
    job.save(seat.pane, "copy-mode", note="typed 'hello from em', then tmux copy-mode")


def _diff_notice(job: Job) -> None:
    """The diff panel opened at 120 columns, then the window narrowed to 89x13 (fullscreen only)."""
    cwd = job.root / "w" / "seat-d"
    cwd.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(cwd)], check=True, capture_output=True, timeout=20)
    (cwd / "hello.py").write_text("print('hello')\n", encoding="utf-8")
    seat = job.seat("d", width=120, height=40)
    job.server.send_keys(seat.pane, "/diff", literal=True)
    job.wait_screen(seat.pane, lambda s: "/diff" in s, "the /diff command in the box")
    job.settle(seat.pane, quiet=0.3)
    job.server.send_keys(seat.pane, "Enter")
    job.wait_screen(seat.pane, lambda s: "Diff panel shown" in s, "the diff panel", 15)
    job.server.run("resize-window", "-t", seat.pane, "-x", "89", "-y", "13")
    job.wait_screen(seat.pane, lambda s: "Resize your terminal" in s, "the diff panel notice", 15)
    job.settle(seat.pane)
    job.save(seat.pane, "diff-notice", note="/diff at 120x40, then the window resized to 89x13")


def _shell(job: Job) -> None:
    if job.renderer != "inline":
        return
    cwd = job.root / "w" / "shell"
    cwd.mkdir(parents=True, exist_ok=True)
    argv = [
        "env",
        "-i",
        "HOME=/root",
        "TERM=tmux-256color",
        "PS1=user@host:\\w$ ",
        "bash",
        "--noprofile",
        "--norc",
        "-i",
    ]
    pane = job.server.new_session("shell", argv, cwd=str(cwd), width=job.width, height=job.height)
    job.wait_screen(pane, lambda s: "$" in s, "the shell prompt")
    job.server.send_keys(pane, "ls -la", "Enter")
    job.wait_screen(pane, lambda s: s.count("$") >= 2, "the second shell prompt")
    job.settle(pane)
    job.save(pane, "shell", note="plain bash pane (renderer does not apply), after 'ls -la'")


def _pastes_expect() -> dict[str, Expect]:
    found = {f"paste-len{n}": expect(BOX_TEXT, enter=("", text_of(n))) for n in (799, 800, 801)}
    found["paste-2lines"] = expect(BOX_TEXT, enter=("", "line one\nline two"))
    found["paste-3lines"] = expect(BOX_TEXT, enter=("", THREE_LINES))
    return found


#: What every agent's label case reads: the label alone, then a short line and three lines after it.
LABEL_CASES = {
    "label-alone": expect(BOX_TEXT, box=LABEL, label=LABEL),
    "label-then-short": expect(BOX_TEXT, box=LABEL + SHORT, enter=(LABEL, SHORT)),
    "label-then-3lines": expect(BOX_TEXT, enter=(LABEL, THREE_LINES)),
}

CASES: tuple[Case, ...] = (
    Case("empty-box", _empty_box, {"empty-box-fresh-start": expect(READY, box="", busy=False)}),
    Case("typed", _typed, {"typed-short-unsubmitted": expect(BOX_TEXT, box="hello from em")}),
    Case(
        "cleared-draft",
        _cleared_draft,
        {"cleared-draft": expect(READY, box=""), "esc-once": expect(BOX_TEXT, box="hello from em")},
    ),
    Case("dim-hint", _dim_hint, {"dim-hint-suggestion": expect(READY, dim="run the test suite", busy=False)}),
    Case("pastes", _pastes, _pastes_expect(), quick=False),
    Case(
        "label",
        _labels,
        {**LABEL_CASES, "label-then-len1000": expect(BOX_TEXT, enter=(LABEL, text_of(1000)))},
    ),
    Case("tall-box", _tall_box, {"tall-box": expect(BOX_TEXT)}),
    Case("after-turn", _after_turn, {"after-turn": expect(READY, box="", busy=False)}),
    Case(
        "busy",
        _busy,
        {"busy": expect(READY, box="", busy=True), "busy-queued": expect(READY, box="", busy=True, dim=QUEUED_HINT)},
    ),
    Case("permission", _permission, {"permission-prompt-bash": expect(DIALOG)}),
    Case("held", _held, {"held-dialog": expect(DIALOG)}),
    Case("bypass-dialog", _bypass_dialog, {"bypass-dialog": expect(DIALOG)}),
    # 2.1.316's fullscreen renderer draws the rewind dialog in a form the base rules do not name: it is
    # read as not recognised, which say refuses exactly as a known dialog.  Typable it must never be.
    Case("rewind", _rewind, {"rewind-dialog": expect(*NOT_TYPABLE)}),
    Case("copy-mode", _copy_mode, {"copy-mode": expect(ScreenState.COPY_MODE, box="hello from em")}),
    # 2.1.316 pushes the box's end off a 13-row screen under the notice (refused as the diff notice);
    # 2.1.332 scrolls the transcript instead and the whole box stays on the screen (ready).
    Case(
        "diff-notice",
        _diff_notice,
        {"diff-notice": expect(ScreenState.DIFF_NOTICE, READY)},
        renderers=("fullscreen",),
    ),
    Case("shell", _shell, {"shell": expect(ScreenState.NOT_RECOGNISED)}, renderers=("inline",), quick=False),
)

BY_NAME = {case.name: case for case in CASES}


def expectation(capture_case: str, width: int, height: int) -> Expect | None:
    """The expectation of a capture saved under ``capture_case`` in a ``width`` x ``height`` pane.

    A tall box's text depends on the pane it was typed into, and the Enter rule
    must pass on its visible end.
    """
    if capture_case == "tall-box":
        return expect(BOX_TEXT, enter=("", text_of(max(2400, height * (width - 2)))))
    for case in CASES:
        if capture_case in case.expects:
            return case.expects[capture_case]
    return None
