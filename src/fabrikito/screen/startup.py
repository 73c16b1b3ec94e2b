"""What Claude Code shows before its box: the startup dialogs that come before it writes its registry entry,
and its refusal to run as root (read by ``up``, which waits for the box, and ``status``)."""

from __future__ import annotations

#: Startup screens that come before Claude Code writes its registry entry:
#: (text on the screen, what it is, what to do).
STARTUP_DIALOGS: tuple[tuple[str, str, str], ...] = (
    (
        "WARNING: Claude Code running in Bypass Permissions mode",
        "the bypass permissions acceptance dialog",
        "choose 'Yes, I accept' (Down, Enter); Claude Code remembers it in the user's settings, "
        "so later bypass seats skip it",
    ),
    (
        "Yes, I trust this folder",
        "the trust prompt for its working directory",
        "choose 'Yes, I trust this folder' if you do (it is remembered for that directory)",
    ),
    (
        "Detected a custom API key in your environment",
        "the custom API key question",
        "answer it (it is remembered)",
    ),
)
ROOT_REFUSAL = "cannot be used with root/sudo privileges"


def startup_dialog(text: str) -> tuple[str, str] | None:
    """(what, what to do) when ``text`` shows one of the startup dialogs, else ``None``."""
    for marker, what, todo in STARTUP_DIALOGS:
        if marker in text:
            return what, todo
    return None
