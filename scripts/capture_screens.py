"""Capture real Claude Code screens as test fixtures.

Starts real seats (Claude Code 2.1.316, offline, against the stand-in) in
private tmux servers, drives each into a state and writes, per state::

    tests/fixtures/screens/2.1.316/<renderer>-<cols>x<rows>-<case>.txt   capture-pane -p
    tests/fixtures/screens/2.1.316/<renderer>-<cols>x<rows>-<case>.ansi  capture-pane -p -e
    tests/fixtures/screens/2.1.316/<renderer>-<cols>x<rows>-<case>.json  pane metadata

Every case starts fresh seats and ends them.  The ``shell`` case is a plain
bash pane and is captured under the ``inline`` renderer only.

Usage::

    PYTHONPATH=src python3 scripts/capture_screens.py [--sizes 80x24,60x10]
        [--renderers inline,fullscreen] [--cases empty-box,busy] [--jobs 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.offline import claude_setup, seatkit
from fabrikito.offline.claude_setup import Renderer
from fabrikito.offline.replies import Reply
from fabrikito.offline.seatkit import Seat
from fabrikito.offline.standin import StandIn

SCRATCH = Path(tempfile.gettempdir()) / "fabrikito-screens"
SIZES = ["220x50", "120x40", "89x13", "80x24", "60x10"]
RENDERERS: list[Renderer] = ["inline", "fullscreen"]
META_FIELDS = [
    "pane_in_mode",
    "pane_mode",
    "alternate_on",
    "cursor_x",
    "cursor_y",
    "cursor_flag",
    "pane_width",
    "pane_height",
    "pane_current_command",
    "history_size",
    "mouse_any_flag",
]
LABEL = "[from em] "
WORDS = "the quick brown fox jumps over the lazy dog while the build runs and the tests keep passing one after another "


def text_of(length: int) -> str:
    """A readable single-line text of exactly ``length`` characters, ending in a marker."""
    body = (WORDS * (length // len(WORDS) + 2))[: max(0, length - 4)]
    return (body + "#END")[:length]


class Job:
    """One renderer and size: its own tmux server, HOME and stand-in."""

    def __init__(self, renderer: Renderer, *, width: int, height: int, out: Path, root: Path, binary: Path) -> None:
        self.renderer: Renderer = renderer
        self.width = width
        self.height = height
        self.out = out
        self.root = root
        self.binary = binary
        shutil.rmtree(root, ignore_errors=True)
        self.server = Server(socket_name=f"fab-cap-{secrets.token_hex(4)}", timeout=10.0)
        self.standin = StandIn().start()
        self.home = claude_setup.make_home(root / "home")
        self.pids: list[int] = []

    @property
    def prefix(self) -> str:
        return f"{self.renderer}-{self.width}x{self.height}"

    # -- seats ---------------------------------------------------------------

    def seat(
        self,
        role: str = "a",
        *,
        mode: str = "acceptEdits",
        env: dict[str, str] | None = None,
        home: Path | None = None,
        wait: bool = True,
    ) -> Seat:
        seat = seatkit.start_seat(
            self.server,
            binary=self.binary,
            role=role,
            session=f"seat-{role}",
            home=home or self.home,
            cwd=self.root / "w" / f"seat-{role}",
            base_url=self.standin.base_url(role),
            permission_mode=mode,
            renderer=self.renderer,
            width=self.width,
            height=self.height,
            env=env,
            wait=wait,
        )
        self.pids.append(seat.pid)
        return seat

    def end(self) -> None:
        """Kill every session of this job's server (the seats exit on SIGHUP)."""
        try:
            self.server.kill_server()
        except TmuxError:
            pass
        seatkit.stop_pids(self.pids)
        self.pids.clear()

    def close(self) -> None:
        self.end()
        seatkit.stop_pids(seatkit.home_pids(self.home))
        self.standin.stop()

    # -- screens -------------------------------------------------------------

    def wait_screen(self, pane: str, check: Callable[[str], bool], what: str, timeout: float = 20.0) -> str:
        def screen() -> str | None:
            text = self.server.capture(pane)
            return text if check(text) else None

        return seatkit.wait_until(
            screen,
            timeout,
            describe=lambda: self.server.capture(pane),
            what=f"{what} ({self.prefix})",
        )

    def settle(self, pane: str, quiet: float = 0.6, timeout: float = 6.0) -> None:
        """Wait until the screen stops changing for ``quiet`` seconds (or ``timeout`` passes)."""
        deadline = time.monotonic() + timeout
        last = self.server.capture(pane, escapes=True)
        since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.1)
            now = self.server.capture(pane, escapes=True)
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return

    def changed(self, pane: str, before: str, what: str, timeout: float = 10.0) -> str:
        return self.wait_screen(pane, lambda s: s != before, what, timeout)

    def save(self, pane: str, case: str, note: str = "") -> None:
        name = f"{self.prefix}-{case}"
        text = self.server.capture(pane)
        ansi = self.server.capture(pane, escapes=True)
        meta: dict[str, object] = dict(self.server.pane_fields(pane, META_FIELDS))
        meta.update(renderer=self.renderer, case=case, claude_code=claude_setup.CLAUDE_VERSION)
        if note:
            meta["note"] = note
        (self.out / f"{name}.txt").write_text(text, encoding="utf-8")
        (self.out / f"{name}.ansi").write_text(ansi, encoding="utf-8")
        (self.out / f"{name}.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"  wrote {name}", flush=True)


# -- cases -----------------------------------------------------------------------


def case_empty_box(job: Job) -> None:
    seat = job.seat()
    job.settle(seat.pane)
    job.save(seat.pane, "empty-box-fresh-start")


def case_typed(job: Job) -> None:
    seat = job.seat()
    before = job.server.capture(seat.pane)
    job.server.send_keys(seat.pane, "hello from em", literal=True)
    job.wait_screen(seat.pane, lambda s: "hello from em" in s, "typed text in the box")
    job.settle(seat.pane)
    job.save(seat.pane, "typed-short-unsubmitted", note=f"send-keys -l 'hello from em' (before: {len(before)} chars)")


def _paste_case(job: Job, case: str, text: str, note: str) -> None:
    seat = job.seat()
    before = job.server.capture(seat.pane)
    job.server.paste(seat.pane, text)
    job.changed(seat.pane, before, f"the paste for {case}")
    job.settle(seat.pane)
    job.save(seat.pane, case, note=note)


def case_pastes(job: Job) -> None:
    for n in (799, 800, 801):
        _paste_case(job, f"paste-len{n}", text_of(n), f"bracketed paste of one {n}-character line")
        job.end()
    _paste_case(job, "paste-2lines", "line one\nline two", "bracketed paste of 2 lines, no trailing newline")
    job.end()
    _paste_case(
        job, "paste-3lines", "line one\nline two\nline three", "bracketed paste of 3 lines, no trailing newline"
    )


def _label_case(job: Job, case: str, message: str, note: str) -> None:
    seat = job.seat()
    job.server.paste(seat.pane, LABEL)
    job.wait_screen(seat.pane, lambda s: "[from em]" in s, "the label in the box")
    job.settle(seat.pane, quiet=0.3)
    before = job.server.capture(seat.pane)
    job.server.paste(seat.pane, message)
    job.changed(seat.pane, before, f"the message after the label for {case}")
    job.settle(seat.pane)
    job.save(seat.pane, case, note=note)


def case_label_alone(job: Job) -> None:
    seat = job.seat()
    job.server.paste(seat.pane, LABEL)
    job.wait_screen(seat.pane, lambda s: "[from em]" in s, "the label in the box")
    job.settle(seat.pane)
    job.save(seat.pane, "label-alone", note="paste '[from em] ' alone (what say checks before the message)")


def case_label(job: Job) -> None:
    _label_case(job, "label-then-short", "please review the patch", "paste '[from em] ', then paste a short line")
    job.end()
    _label_case(job, "label-then-3lines", "line one\nline two\nline three", "paste the label, then 3 lines")
    job.end()
    _label_case(job, "label-then-len1000", text_of(1000), "paste the label, then 1000 characters (a placeholder)")


def case_tall_box(job: Job) -> None:
    seat = job.seat()
    length = max(2400, job.height * (job.width - 2))  # more rows of text than the pane has
    text = text_of(length)
    for start in range(0, len(text), 700):  # under 800 characters each, so no placeholder
        before = job.server.capture(seat.pane)
        job.server.send_keys(seat.pane, text[start : start + 700], literal=True)
        job.changed(seat.pane, before, "the box to grow")
        job.settle(seat.pane, quiet=0.3)
    job.settle(seat.pane)
    job.save(seat.pane, "tall-box", note=f"{length} characters typed with send-keys -l in 700-character chunks")


def case_dim_hint(job: Job) -> None:
    env = {"CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION": "1"}
    seat = job.seat(env=env)
    job.settle(seat.pane)
    job.save(seat.pane, "dim-hint-fresh-start", note="CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION=1, no turn yet")
    for n in (1, 2):
        since = job.standin.mark()
        seatkit.submit(job.server, seat, f"turn number {n}")
        job.standin.wait_for_request(seat.role, f"turn number {n}", 20, since=since)
        job.wait_screen(
            seat.pane, lambda s: "✻" in s and seatkit.box_row(s, seat.session) is not None, "the turn's end"
        )
        job.settle(seat.pane, quiet=0.5)
    job.wait_screen(
        seat.pane,
        lambda s: any(line.startswith(seatkit.PROMPT + "run the test suite") for line in s.split("\n")),
        "the prompt suggestion in the box",
    )
    job.settle(seat.pane)
    job.save(seat.pane, "dim-hint-suggestion", note="prompt suggestion 'run the test suite' after two turns")


def case_after_turn(job: Job) -> None:
    seat = job.seat()
    job.standin.on("say hello", "hello, I am the stand-in", seat=seat.role)
    seatkit.submit(job.server, seat, "say hello")
    job.wait_screen(seat.pane, lambda s: "hello, I am the stand-in" in s, "the reply")
    job.wait_screen(seat.pane, lambda s: seatkit.box_row(s, seat.session) is not None, "the box after the turn")
    job.settle(seat.pane)
    job.save(seat.pane, "after-turn", note="one turn done: echoed prompt, reply, empty box")


def case_busy(job: Job) -> None:
    seat = job.seat()
    job.standin.on("take your time", Reply(text="finally done", delay=120), seat=seat.role)
    seatkit.submit(job.server, seat, "take your time")
    job.standin.wait_for_request(seat.role, "take your time", 20)
    job.wait_screen(seat.pane, lambda s: "esc to interr" in s or "…" in s, "the spinner")
    time.sleep(2.5)  # let the spinner show its first glyphs and the footer settle; nothing to wait for
    job.save(seat.pane, "busy", note="a slow reply (pings for 120 s) holds the turn")


def case_permission(job: Job) -> None:
    seat = job.seat(mode="default")
    job.standin.on(
        "run the command",
        Reply(tool="Bash", input={"command": "date > /tmp/fabrikito-bench-probe.txt", "description": "Write the date"}),
        seat=seat.role,
    )
    seatkit.submit(job.server, seat, "run the command")
    job.wait_screen(
        seat.pane, lambda s: "Do you want to proceed?" in s or "❯ 1. Yes" in s, "the Bash permission prompt"
    )
    job.settle(seat.pane)
    job.save(seat.pane, "permission-prompt-bash", note="default mode; the stand-in calls Bash")


def case_held(job: Job) -> None:
    seat = job.seat("b", mode="bypassPermissions")
    seatkit.post_inbox(seat, "hello from outside, please look at the build")
    job.wait_screen(seat.pane, lambda s: "Held message" in s or "Deliver" in s, "the held-message dialog")
    job.settle(seat.pane)
    job.save(seat.pane, "held-dialog", note="bypassPermissions receiver; raw external inbox post")


def case_bypass_dialog(job: Job) -> None:
    home = claude_setup.make_home(job.root / f"home-nobypass-{secrets.token_hex(3)}", skip_bypass_prompt=False)
    seat = job.seat(mode="bypassPermissions", home=home, wait=False)
    job.wait_screen(seat.pane, lambda s: "Bypass Permissions mode" in s, "the bypass acceptance dialog", 30)
    job.settle(seat.pane)
    job.save(seat.pane, "bypass-dialog", note="HOME without skipDangerousModePermissionPrompt")
    seatkit.stop_pids(seatkit.home_pids(home))


def case_copy_mode(job: Job) -> None:
    seat = job.seat()
    job.server.send_keys(seat.pane, "hello from em", literal=True)
    job.wait_screen(seat.pane, lambda s: "hello from em" in s, "typed text in the box")
    job.settle(seat.pane)
    job.server.run("copy-mode", "-t", seat.pane)
    seatkit.wait_until(lambda: job.server.display(seat.pane, "#{pane_in_mode}") == "1", 5, what="copy mode")
    job.save(seat.pane, "copy-mode", note="typed 'hello from em', then tmux copy-mode")


def case_shell(job: Job) -> None:
    if job.renderer != "inline":
        return
    cwd = job.root / "w" / "shell"
    cwd.mkdir(parents=True, exist_ok=True)
    pane = job.server.new_session(
        "shell",
        ["env", "-i", "HOME=/root", "TERM=tmux-256color", "PS1=user@host:\\w$ ", "bash", "--noprofile", "--norc", "-i"],
        cwd=str(cwd),
        width=job.width,
        height=job.height,
    )
    job.wait_screen(pane, lambda s: "$" in s, "the shell prompt")
    job.server.send_keys(pane, "ls -la", "Enter")
    job.wait_screen(pane, lambda s: s.count("$") >= 2, "the second shell prompt")
    job.settle(pane)
    job.save(pane, "shell", note="plain bash pane (renderer does not apply), after 'ls -la'")


CASES: dict[str, Callable[[Job], None]] = {
    "empty-box": case_empty_box,
    "typed": case_typed,
    "dim-hint": case_dim_hint,
    "pastes": case_pastes,
    "label": case_label,
    "label-alone": case_label_alone,
    "tall-box": case_tall_box,
    "after-turn": case_after_turn,
    "busy": case_busy,
    "permission": case_permission,
    "held": case_held,
    "bypass-dialog": case_bypass_dialog,
    "copy-mode": case_copy_mode,
    "shell": case_shell,
}


def run_job(job: Job, cases: list[str]) -> list[str]:
    failures = []
    try:
        for name in cases:
            t0 = time.monotonic()
            try:
                CASES[name](job)
            except Exception as exc:  # report and go on with the next case
                failures.append(f"{job.prefix} {name}: {exc}")
                traceback.print_exc()
            finally:
                job.end()
            print(f"{job.prefix} {name} took {time.monotonic() - t0:.1f}s", flush=True)
    finally:
        job.close()
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument("--renderers", default=",".join(RENDERERS))
    parser.add_argument("--cases", default=",".join(CASES), help="any of: " + ", ".join(CASES))
    parser.add_argument("--jobs", type=int, default=2, help="renderer/size combinations run at once")
    parser.add_argument(
        "--out",
        type=Path,
        default=claude_setup.repo_root() / "tests" / "fixtures" / "screens" / claude_setup.CLAUDE_VERSION,
    )
    args = parser.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown cases: {', '.join(unknown)}")
    renderers: list[Renderer] = []
    for r in args.renderers.split(","):
        if r not in ("inline", "fullscreen"):
            parser.error(f"unknown renderer: {r}")
        renderers.append("inline" if r == "inline" else "fullscreen")
    binary = claude_setup.ensure_claude()
    args.out.mkdir(parents=True, exist_ok=True)
    scratch = SCRATCH  # a fixed place, so the paths Claude Code shows stay the same between runs
    jobs = []
    for size in args.sizes.split(","):
        width, height = (int(x) for x in size.split("x"))
        for renderer in renderers:
            root = scratch / f"{renderer}-{size}"
            jobs.append(Job(renderer, width=width, height=height, out=args.out, root=root, binary=binary))
    failures: list[str] = []
    try:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for result in pool.map(lambda j: run_job(j, cases), jobs):
                failures += result
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for line in failures:
        print(f"FAILED {line}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
