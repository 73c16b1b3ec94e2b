"""The catalogue of states for Codex CLI and Gemini CLI seats, and what each capture must be read as.

The same idea as :mod:`fabrikito.qualify.catalogue` (Claude Code's), for
agents that draw one screen (no renderer choice: Codex draws on the
alternate screen, Gemini inline) and that keep showing an *empty* input box
while they work.  Every case starts a fresh seat of the job's agent
(:meth:`~fabrikito.qualify.capture.Job.other`) against the stand-in and
saves one or more captures.  A busy screen must never be typable: it is read
as not recognised, with ``busy`` set.
"""

from __future__ import annotations

import subprocess
import time

from fabrikito.offline import api_gemini, api_openai, seatkit
from fabrikito.offline.other_setup import CODEX, GEMINI, OtherSeat
from fabrikito.offline.replies import Reply
from fabrikito.qualify.capture import LABEL, Job, text_of
from fabrikito.qualify.catalogue import BOX_TEXT, DIALOG, LABEL_CASES, READY, SHORT, THREE_LINES, Case, Expect, expect
from fabrikito.screen import ScreenState

NOT_RECOGNISED = ScreenState.NOT_RECOGNISED
#: What each agent shows while a turn runs and no text streams.
BUSY_MARKS = {CODEX: "esc to interrupt", GEMINI: "esc to cancel"}
#: How each agent is asked to approve a tool call, and the key that approves it.
APPROVAL = {CODEX: ("Would you like to run", "y"), GEMINI: ("Allow execution of", "Enter")}
#: A message that collapses to the agent's paste placeholder, and the longest one that does not.
COLLAPSES = {CODEX: text_of(1001), GEMINI: "\n".join(f"line {n} of six" for n in range(1, 7))}
LITERAL = {CODEX: text_of(1000), GEMINI: "\n".join(f"line {n} of five" for n in range(1, 6))}
ENTER_PAUSE = 0.5  # Gemini takes an Enter within ~40 ms of fast input for a newline in the text


def _wait_text(job: Job, seat: OtherSeat, text: str, what: str, timeout: float = 20.0) -> str:
    return job.wait_screen(seat.pane, lambda s: text in s, what, timeout)


def submit(job: Job, seat: OtherSeat, text: str) -> None:
    """Type ``text``, wait for it on the screen, then press Enter."""
    job.server.send_keys(seat.pane, text, literal=True)
    _wait_text(job, seat, text, "the typed prompt in the box")
    time.sleep(ENTER_PAUSE)
    job.server.send_keys(seat.pane, "Enter")


def _fresh(job: Job) -> OtherSeat:
    seat = job.other()
    job.settle(seat.pane)
    return seat


# -- drivers --------------------------------------------------------------------------------


def _empty_box(job: Job) -> None:
    seat = _fresh(job)
    job.save(seat.pane, "empty-box-fresh-start")


def _typed(job: Job) -> None:
    seat = _fresh(job)
    job.server.send_keys(seat.pane, "hello from em", literal=True)
    _wait_text(job, seat, "hello from em", "typed text in the box")
    job.settle(seat.pane)
    job.save(seat.pane, "typed-short-unsubmitted", note="send-keys -l 'hello from em'")
    job.server.run("copy-mode", "-t", seat.pane)
    seatkit.wait_until(lambda: job.server.display(seat.pane, "#{pane_in_mode}") == "1", 5, what="copy mode")
    job.save(seat.pane, "copy-mode", note="typed 'hello from em', then tmux copy-mode")


def _label_then(job: Job, case: str, message: str, note: str, *, label_case: bool = False) -> None:
    job.label_then(_fresh(job).pane, case, message, note, save_label=label_case)


def _labels(job: Job) -> None:
    _label_then(job, "label-then-short", SHORT, "paste the label, then a short line", label_case=True)
    job.end()
    _label_then(job, "label-then-3lines", THREE_LINES, "paste the label, then 3 lines")
    job.end()
    _label_then(job, "label-then-literal", LITERAL[job.agent], "the longest paste shown as it is")
    job.end()
    _label_then(job, "label-then-placeholder", COLLAPSES[job.agent], "the shortest paste shown as a placeholder")


TALL = "\n".join(f"row {n:03d} of a tall message" for n in range(36))  # 35 newlines, under Codex's 1000


def _tall(job: Job) -> None:
    """More lines than the composer has rows (Codex: it scrolls, marks ↑ and drops its footer)."""
    _label_then(job, "label-then-tall", TALL, "paste the label, then 36 short lines (under 1000 characters)")


def _after_turn(job: Job) -> None:
    seat = _fresh(job)
    job.standin.on("say hello", "hello, I am the stand-in", seat=seat.role)
    submit(job, seat, "please say hello")
    _wait_text(job, seat, "hello, I am the stand-in", "the reply")
    if job.agent == CODEX:
        _wait_text(job, seat, "Worked for", "the end of the turn")
    job.settle(seat.pane, quiet=1.0)
    job.save(seat.pane, "after-turn", note="one turn done: echoed prompt, reply, empty box")


def _busy(job: Job) -> None:
    """A held reply (nothing streams): the working line; then text typed while it works; then Esc."""
    seat = _fresh(job)
    job.standin.on("take your time", Reply(text="finally done", delay=120), seat=seat.role)
    submit(job, seat, "please take your time")
    job.standin.wait_for_request(seat.role, "take your time", 20)
    _wait_text(job, seat, BUSY_MARKS[job.agent], "the working line")
    time.sleep(1.5)  # let the spinner and the footer settle; nothing to wait for
    job.save(seat.pane, "busy", note="a held reply (120 s) keeps the turn running")
    job.server.send_keys(seat.pane, "typed while busy", literal=True)
    _wait_text(job, seat, "typed while busy", "the text typed while busy")
    job.settle(seat.pane, quiet=0.3)
    job.save(seat.pane, "busy-with-text", note="text typed (not submitted) while the turn runs")
    job.server.send_keys(seat.pane, "C-u")
    job.wait_screen(seat.pane, lambda s: "typed while busy" not in s, "the typed text cleared")
    job.server.send_keys(seat.pane, "Escape")
    job.wait_screen(seat.pane, lambda s: BUSY_MARKS[job.agent] not in s, "the turn interrupted")
    job.settle(seat.pane, quiet=1.0)
    job.save(seat.pane, "interrupted", note="Esc during the held turn")


def _enter_while_busy(job: Job) -> None:
    """A prompt submitted while a held turn runs: Codex sends it into the turn at once (a steer), Gemini
    queues it (``Queued (press ↑ to edit)``) until the turn ends.  Either way the seat stays busy."""
    seat = _fresh(job)
    job.standin.on("take your time", Reply(text="finally done", delay=120), seat=seat.role)
    job.standin.on("and meanwhile", Reply(text="still going", delay=120), seat=seat.role)
    submit(job, seat, "please take your time")
    job.standin.wait_for_request(seat.role, "take your time", 20)
    _wait_text(job, seat, BUSY_MARKS[job.agent], "the working line")
    submit(job, seat, "and meanwhile this")
    if job.agent == CODEX:
        job.standin.wait_for_request(seat.role, "and meanwhile this", 20)
    else:
        _wait_text(job, seat, "Queued", "the queued prompt")
    _wait_text(job, seat, BUSY_MARKS[job.agent], "the working line again")
    time.sleep(1.0)
    job.save(seat.pane, "busy-after-enter", note="Enter on a second prompt while the first turn runs")


def _streaming(job: Job) -> None:
    """A reply that streams a word every second: part of it shows while the turn still runs."""
    seat = _fresh(job)
    words = " ".join(f"word{n}" for n in range(60))
    job.standin.on("stream slowly", Reply(text=words, trickle=1.0), seat=seat.role)
    submit(job, seat, "please stream slowly")
    _wait_text(job, seat, "word3 ", "the reply streaming", 30)
    time.sleep(1.0)
    job.save(seat.pane, "busy-streaming", note="a reply streaming one word a second (60 words)")


def _approval(job: Job) -> None:
    seat = _fresh(job)
    command = f"touch approved-{int(time.time())}.txt"
    call = api_openai.shell_reply(command) if job.agent == CODEX else api_gemini.shell_reply(command)
    job.standin.on("run the command", call, seat=seat.role)
    submit(job, seat, "please run the command")
    question, _key = APPROVAL[job.agent]
    _wait_text(job, seat, question, "the approval dialog", 30)
    job.settle(seat.pane)
    job.save(seat.pane, "approval-dialog", note=f"the stand-in calls {call.tool}")


def _modes(job: Job) -> None:
    """Gemini's other input modes: YOLO (``--yolo``: prompt ``*``, typable) and shell mode (``!`` typed into
    the empty box: Enter would run the text as a shell command, never typable)."""
    seat = job.other(args=["--yolo"])
    job.settle(seat.pane)
    job.save(seat.pane, "empty-box-yolo", note="started with --yolo")
    job.end()
    seat = _fresh(job)
    job.server.send_keys(seat.pane, "!", literal=True)
    _wait_text(job, seat, "shell mode enabled", "shell mode")
    job.settle(seat.pane)
    job.save(seat.pane, "shell-mode", note="'!' typed into the empty box")


def _start_dialog(job: Job) -> None:
    """The dialog a seat starts in when its set-up leaves the question open: Codex's folder trust,
    Gemini's choice of authentication."""
    if job.agent == CODEX:  # Codex asks about a folder inside a git repository only
        workdir = job.other_root("a") / "work" / "a"
        workdir.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(workdir)], check=True, capture_output=True, timeout=20)
    seat = job.other(wait=False, answered=False)
    mark, case = ("Trust this folder?", "trust-dialog") if job.agent == CODEX else ("How would you", "auth-dialog")
    _wait_text(job, seat, mark, "the start-up dialog", 30)
    job.settle(seat.pane)
    job.save(seat.pane, case, note="a set-up that leaves the start-up question open")


def cases_for(agent: str) -> tuple[Case, ...]:
    """The catalogue for ``agent`` (``codex`` or ``gemini``), with its expectations."""
    dialog = "trust-dialog" if agent == CODEX else "auth-dialog"
    return (
        Case("empty-box", _empty_box, {"empty-box-fresh-start": expect(READY, box="", busy=False)}),
        Case(
            "typed",
            _typed,
            {
                "typed-short-unsubmitted": expect(BOX_TEXT, box="hello from em"),
                "copy-mode": expect(ScreenState.COPY_MODE, box="hello from em"),
            },
        ),
        Case(
            "label",
            _labels,
            {
                **LABEL_CASES,
                "label-then-literal": expect(BOX_TEXT, enter=(LABEL, LITERAL[agent])),
                "label-then-placeholder": expect(BOX_TEXT, enter=(LABEL, COLLAPSES[agent])),
            },
        ),
        *([Case("tall", _tall, {"label-then-tall": expect(BOX_TEXT, enter=(LABEL, TALL))})] if agent == CODEX else []),
        Case("after-turn", _after_turn, {"after-turn": expect(READY, box="", busy=False)}),
        Case(
            "busy",
            _busy,
            {
                "busy": expect(NOT_RECOGNISED, box="", busy=True),
                "busy-with-text": expect(NOT_RECOGNISED, box="typed while busy", busy=True),
                "interrupted": expect(READY, box="", busy=False),
            },
        ),
        Case("enter-while-busy", _enter_while_busy, {"busy-after-enter": expect(NOT_RECOGNISED, busy=True)}),
        Case("streaming", _streaming, {"busy-streaming": expect(NOT_RECOGNISED, busy=True)}),
        Case("approval", _approval, {"approval-dialog": expect(DIALOG)}),
        Case("start-dialog", _start_dialog, {dialog: expect(DIALOG)}),
        *(
            [
                Case(
                    "modes",
                    _modes,
                    {
                        "empty-box-yolo": expect(READY, box="", busy=False),
                        "shell-mode": expect(NOT_RECOGNISED, busy=False),
                    },
                )
            ]
            if agent == GEMINI
            else []
        ),
    )


def expectation(agent: str, capture_case: str) -> Expect | None:
    """What a capture of ``agent`` saved under ``capture_case`` must be read as."""
    for case in cases_for(agent):
        if capture_case in case.expects:
            return case.expects[capture_case]
    return None
