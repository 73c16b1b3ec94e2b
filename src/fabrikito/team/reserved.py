"""What a team file may not take for its own: fabrikito's labels as roles, the options fabrikito sets as
a seat's arguments."""

from __future__ import annotations

#: The senders fabrikito labels itself: never a seat's role, in any look-alike spelling.
RESERVED_ROLES = frozenset({"owner", "launcher"})


def reserved_role(role: str) -> str | None:
    """The label of fabrikito's own (``owner``, ``launcher``) that ``role`` reads as (``0wner``: ``owner``), or None."""
    from fabrikito.base.lookalike import same

    return next((r for r in sorted(RESERVED_ROLES) if same(role, r)), None)


def reserved_arg(arg: str) -> str | None:
    """The option fabrikito sets itself that ``arg`` gives (``-n``, ``--name``, ``--settings``), in any
    spelling the command line accepts: ``--name=x``, ``-nx``, ``-n`` among other short flags."""
    for option in ("--name", "--settings", *CONVERSATION_OPTIONS):
        if arg == option or arg.startswith(option + "="):
            return option
    if arg.startswith("-") and not arg.startswith("--"):
        return next((f"-{c}" for c in "nrc" if c in arg[1:]), None)
    return None


#: Options that choose the conversation a Claude Code seat runs: fabrikito fixes its id and resumes it.
CONVERSATION_OPTIONS = ("--session-id", "--resume", "--continue", "--fork-session", "--from-pr", "--teleport")
