"""``check``: what a team file means for messaging, before anything starts.

For each seat: role, session, permission mode and class, whether its hooks
are all off, and its kickoff as it will arrive (``[from launcher] ...``).
Warnings say what needs attention: seats in both permission classes (messages
between them are held, then dropped after ``dialogExpiry``), a seat whose mode
cannot be seen, a seat whose hooks are off, a bypass seat that cannot start as
root.  Exit status: 0 nothing needs attention, 1 warnings, 2 invalid file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from fabrikito import TYPE_CHECKING
from fabrikito.base import jsonfile
from fabrikito.base.procs import config_dir
from fabrikito.base.values import frozen
from fabrikito.team.teamfile import PermissionClass, Seat, Team

if TYPE_CHECKING:
    from typing import Any

LAUNCHER_LABEL = "[from launcher]"
JSON_VERSION = 1


@frozen
class CheckWarning:
    kind: str
    message: str
    roles: tuple[str, ...] = ()
    error: bool = False  # the team cannot work as its file says: check exits 2, as for a bad team file


@frozen
class SeatReport:
    role: str
    session: str
    permission_mode: str | None
    permission_class: PermissionClass
    hooks_disabled: bool
    kickoff: str | None
    agent: str = "claude"


@frozen
class Report:
    team: Team
    seats: tuple[SeatReport, ...]
    warnings: tuple[CheckWarning, ...]

    @property
    def exit_code(self) -> int:
        if any(w.error for w in self.warnings):
            return 2
        return 1 if self.warnings else 0


def labelled_kickoff(text: str) -> str:
    return f"{LAUNCHER_LABEL} {text}"


def seat_environ(seat: Seat, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment the seat's Claude Code reads its config directory from: what ``up`` passes
    down (this environment) with the seat's own ``env`` table over it."""
    return {**environ, **seat.env}


def _settings_files(seat: Seat, environ: Mapping[str, str]) -> list[Path]:
    return [
        Path("/etc/claude-code/managed-settings.json"),
        config_dir(seat_environ(seat, environ)) / "settings.json",
        seat.cwd / ".claude" / "settings.json",
        seat.cwd / ".claude" / "settings.local.json",
    ]


#: ``dialogExpiry``'s values (user or managed settings only), in seconds; ``None``: never.
DIALOG_EXPIRIES: dict[str, float | None] = {"60s": 60.0, "5m": 300.0, "10m": 600.0, "never": None}
DIALOG_EXPIRY_DEFAULT = 300.0


def dialog_expiry(seat: Seat, environ: Mapping[str, str] | None = None) -> float | None:
    """How long a held message waits at the seat's approval dialog before Claude Code drops it (``None``:
    never): managed settings first, then the user settings of the config directory the seat runs with, else
    five minutes.  A value that is not one of :data:`DIALOG_EXPIRIES` is passed over as Claude Code would
    not take it."""
    managed, user = _settings_files(seat, os.environ if environ is None else environ)[:2]
    for path in (managed, user):
        data = jsonfile.read_object(path)
        value = data.get("dialogExpiry") if data is not None else None
        if isinstance(value, str) and value in DIALOG_EXPIRIES:
            return DIALOG_EXPIRIES[value]
    return DIALOG_EXPIRY_DEFAULT


def hooks_disabled(seat: Seat, environ: Mapping[str, str] | None = None) -> bool:
    """Whether a settings file the seat reads sets ``disableAllHooks: true``."""
    for path in _settings_files(seat, os.environ if environ is None else environ):
        data = jsonfile.read_object(path)
        if data is not None and data.get("disableAllHooks") is True:
            return True
    return False


def settings_choose_bypass(seat: Seat, environ: Mapping[str, str]) -> bool:
    """Whether a settings file the seat reads makes bypassPermissions its default mode."""
    for path in _settings_files(seat, environ):
        data = jsonfile.read_object(path)
        permissions = data.get("permissions") if data is not None else None
        if isinstance(permissions, dict) and permissions.get("defaultMode") == "bypassPermissions":
            return True
    return False


def messaging_rules(agent: str) -> str:
    """What the messaging rules mean for a seat of kind ``agent``, in one sentence."""
    from fabrikito.team.agents import kind

    k = kind(agent)
    if k.sendmessage_hook:
        return (
            "SendMessage to the other Claude Code seats (logged by its hook, held between permission classes); "
            "fabrikito say to the others"
        )
    busy = "say waits for it to be idle (or queues with --queue)" if not k.deliver_while_busy else ""
    return (
        f'no SendMessage and no hook: it sends with `fabrikito say <role> "..."` (logged by say), and every '
        f"message reaches it typed into its box labelled [from <sender>], by say or by a Claude Code seat's "
        f"SendMessage to its session (fabrikito's inbox for it, started by up, queues it); an Enter while it works is "
        f"{k.busy_enter}, so {busy}; the team's prompt reaches it "
        + (f"in {k.prompt_file} in its folder" if k.prompt_file else "on its command line")
    )


def run(team: Team, *, is_root: bool | None = None, env: dict[str, str] | None = None) -> Report:
    environ = dict(os.environ) if env is None else env
    root = os.geteuid() == 0 if is_root is None else is_root
    seats = tuple(
        SeatReport(
            role=seat.role,
            session=seat.session,
            permission_mode=seat.effective_mode,
            permission_class=seat.permission_class,
            hooks_disabled=seat.agent == "claude" and hooks_disabled(seat, environ),
            kickoff=team.kickoff_for(seat),
            agent=seat.agent,
        )
        for seat in team.seats
    )
    warnings: list[CheckWarning] = []
    bypass = tuple(s.role for s in seats if s.permission_class is PermissionClass.BYPASS)
    prompting = tuple(s.role for s in seats if s.permission_class is PermissionClass.PROMPTING)
    unknown = tuple(s.role for s in seats if s.permission_class is PermissionClass.UNKNOWN)
    if bypass and prompting:
        warnings.append(
            CheckWarning(
                "mixed-classes",
                "the seats fall into both permission classes: bypass: "
                + ", ".join(bypass)
                + "; prompting: "
                + ", ".join(prompting)
                + ". A SendMessage between the two classes is held for approval in the receiver's pane, and "
                "dropped after dialogExpiry (5 minutes by default) if nobody answers: in an unattended team it "
                "is lost. Give every seat one permission_mode, or expect to approve those messages.",
                bypass + prompting,
            )
        )
    if unknown:
        warnings.append(
            CheckWarning(
                "cannot-see",
                "cannot see the permission mode of "
                + ", ".join(unknown)
                + ": they inherit it from their settings files, so check cannot tell whether messages to and "
                "from them are held. Set permission_mode for each.",
                unknown,
            )
        )
    lose_bypass = tuple(
        seat.role
        for seat in team.seats
        if seat.agent == "claude"
        and seat.effective_mode is None
        and not seat.bypass_available
        and settings_choose_bypass(seat, environ)
    )
    if lose_bypass:
        warnings.append(
            CheckWarning(
                "bypass-switched-off",
                "the settings of "
                + ", ".join(lose_bypass)
                + " choose bypassPermissions, but these seats have no permission_mode, and fabrikito's "
                "generated settings switch bypass off for every seat whose mode is not bypassPermissions: they "
                'will start in a prompting mode. Set permission_mode = "bypassPermissions" to keep bypass, or '
                "another mode to say so.",
                lose_bypass,
            )
        )
    no_hooks = tuple(s.role for s in seats if s.hooks_disabled)
    if no_hooks:
        warnings.append(
            CheckWarning(
                "hooks-off",
                "hooks are all off (disableAllHooks: true) for "
                + ", ".join(no_hooks)
                + ": their SendMessage calls will not be logged in messages.log. Remove disableAllHooks "
                "from the settings file that sets it.",
                no_hooks,
            )
        )
    if root:
        stuck = tuple(
            seat.role
            for seat in team.seats
            if seat.agent == "claude"
            and seat.effective_mode == "bypassPermissions"
            and seat.host is None  # root here; a host's seats run as the ssh user there
            and (seat.env.get("IS_SANDBOX") or environ.get("IS_SANDBOX")) != "1"
        )
        if stuck:
            warnings.append(
                CheckWarning(
                    "bypass-as-root",
                    "running as root, Claude Code refuses to start in bypassPermissions: "
                    + ", ".join(stuck)
                    + " would exit at once. Run the team as an ordinary user, or, inside a sandbox, set "
                    'IS_SANDBOX = "1" in the seat\'s env.',
                    stuck,
                )
            )
    warnings += _other_agent_warnings(team, environ)
    missing_cwd = tuple(s.role for s in team.seats if s.host is None and not s.cwd.is_dir())  # a host has its own
    if missing_cwd:
        warnings.append(
            CheckWarning(
                "missing-cwd",
                "the working directory of " + ", ".join(missing_cwd) + " does not exist: create it or fix cwd.",
                missing_cwd,
            )
        )
    far = tuple(s.role for s in team.seats if s.host is not None)
    if far and team.origin is None and len(far) < len(team.seats):
        warnings.append(
            CheckWarning(
                "no-origin",
                "the seats on other hosts (" + ", ".join(far) + ") cannot say to the seats on this machine: set "
                "origin in the team file to an ssh destination for this machine, as those hosts reach it.",
                far,
            )
        )
    if team.shared_prompt is not None and not team.shared_prompt.is_file():
        warnings.append(
            CheckWarning(
                "no-shared-prompt",
                f"the shared prompt {team.shared_prompt} does not exist: seats would start without the team's "
                "rules. Create it (`fabrikito init` writes one) or set shared_prompt.",
            )
        )
    missing = notify_missing(team, environ)
    if missing is not None:
        warnings.append(CheckWarning("notify-missing", missing, error=True))
    return Report(team=team, seats=seats, warnings=tuple(warnings))


def notify_missing(team: Team, environ: Mapping[str, str]) -> str | None:
    """Why the team file's ``notify`` program cannot be run (``None``: it can, or there is none)."""
    argv = team.watch.notify
    if argv is None:
        return None
    import shutil

    program = argv[0]
    where = str(team.base_dir / program) if "/" in program and not program.startswith("/") else program
    found = shutil.which(where, path=environ.get("PATH", os.defpath))
    if found is None:
        return (
            f"notify program {program!r} is not found or not executable (looked on PATH and beside the team "
            "file): the watcher could tell nobody. Install it or fix 'notify' in the team file."
        )
    return None


def gemini_updates_on(seat: Seat, environ: Mapping[str, str]) -> bool:
    """Whether the Gemini CLI user settings a seat reads leave its update check or update notice on."""
    env = seat_environ(seat, environ)
    home = env.get("GEMINI_CLI_HOME") or env.get("HOME") or os.path.expanduser("~")
    data = jsonfile.read_object(Path(home) / ".gemini" / "settings.json") or {}
    general = data.get("general")
    if not isinstance(general, dict):
        return True
    return general.get("enableAutoUpdate") is not False or general.get("enableAutoUpdateNotification") is not False


def _other_agent_warnings(team: Team, environ: Mapping[str, str]) -> list[CheckWarning]:
    gemini = [s for s in team.seats if s.agent == "gemini"]
    warnings = []
    readers = tuple(s.role for s in team.seats if s.agent != "claude" and s.role != "em")
    if readers:
        warnings.append(
            CheckWarning(
                "log-readable",
                "every seat but em must not read messages.log (it holds every native message in full, private "
                "reports to em among them), and Claude Code seats get a Read deny on it; Codex CLI and Gemini CLI "
                "have no such setting, so "
                + ", ".join(readers)
                + " can read it. Give these seats only work that may see the team's traffic, or run them on "
                "another host (each host keeps its own log).",
                readers,
            )
        )
    updating = tuple(s.role for s in gemini if gemini_updates_on(s, environ))
    if updating:
        warnings.append(
            CheckWarning(
                "gemini-updates",
                "Gemini CLI checks for updates (and may install one) at start for "
                + ", ".join(updating)
                + ": only its user settings can turn that off, and fabrikito leaves them to you. Set "
                '"general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false} in '
                "~/.gemini/settings.json (the HOME the seat runs with).",
                updating,
            )
        )
    from fabrikito.team.agents import gemini_prompt_path, is_ours

    owned = tuple(s.role for s in gemini if not is_ours(gemini_prompt_path(s)))
    if owned:
        warnings.append(
            CheckWarning(
                "own-gemini-md",
                "the folder of "
                + ", ".join(owned)
                + " holds a GEMINI.md of your own, where up writes the team's prompt for Gemini CLI: up will not "
                "start these seats. Move that file one folder up (Gemini reads it there too), or give each seat "
                "a folder of its own.",
                owned,
            )
        )
    return warnings


def to_json(report: Report) -> dict[str, Any]:
    team = report.team
    return {
        **team.json_header(JSON_VERSION),
        "seats": [
            {
                "role": s.role,
                "session": s.session,
                "agent": s.agent,
                "messaging": messaging_rules(s.agent),
                "permission_mode": s.permission_mode,
                "class": s.permission_class.value,
                "hooks_disabled": s.hooks_disabled,
                "kickoff": labelled_kickoff(s.kickoff) if s.kickoff is not None else None,
            }
            for s in report.seats
        ],
        "warnings": [
            {"kind": w.kind, "message": w.message, "roles": list(w.roles), "error": w.error} for w in report.warnings
        ],
        "exit_code": report.exit_code,
    }


def render(report: Report) -> str:
    team = report.team
    lines = [f"team {team.name} ({team.path})"]
    header = ("ROLE", "SESSION", "AGENT", "MODE", "CLASS", "HOOKS")
    rows = [
        (
            s.role,
            s.session,
            s.agent,
            s.permission_mode or ("(inherited)" if s.agent == "claude" else "-"),
            s.permission_class.value,
            ("off" if s.hooks_disabled else "on") if s.agent == "claude" else "none",
        )
        for s in report.seats
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    others = [s for s in report.seats if s.agent != "claude"]
    if others:
        lines.append("")
        lines.append("seats that are not Claude Code:")
        for s in others:
            lines.append(f"  {s.role} ({s.agent}): {messaging_rules(s.agent)}")
    lines.append("")
    lines.append("kickoffs (each seat's first message):")
    for s in report.seats:
        shown = labelled_kickoff(s.kickoff) if s.kickoff is not None else "(none)"
        lines.append(f"  {s.role}: {shown}")
    if report.warnings:
        lines.append("")
        for w in report.warnings:
            lines.append(f"{'ERROR' if w.error else 'WARNING'}: {w.message}")
    else:
        lines.append("")
        lines.append("nothing needs attention")
    return "\n".join(lines)
