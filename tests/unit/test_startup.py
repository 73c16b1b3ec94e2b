"""Start-up stays small: each command, in a fresh interpreter, imports only what it needs.

The timings are in docs/benchmarks.md (bench/); here only what is imported is
checked, so start-up cannot grow back silently.  Each case builds the parser
the way ``fabrikito <command>`` does and imports what its handler imports,
including what it imports lazily on its way (the team file's TOML reader,
the screen recogniser, the inbox client...).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fabrikito import cli
from fabrikito.cli import argparsing

# Never on the way of a command that runs on every message (say, send, status, flush).
HEAVY = {
    "dataclasses",  # imports inspect, ast, dis, tokenize: about 10 ms (base.values.frozen instead)
    "inspect",
    "typing",  # imported for mypy only (fabrikito.TYPE_CHECKING is False)
    "subprocess",  # base.tmux runs tmux through posix_spawnp
    "shutil",  # argparse imports it for the terminal width; cli.argparsing.HelpFormatter reads it itself
    "locale",  # argparse's gettext lookups, skipped when there are no translations
    "asyncio",
    "psutil",
    "threading",
    "email",
    "http",
    "tomllib",  # imports typing; the team file's parse is read back from .state (test_teamfile)
    "fabrikito.launch.lifecycle",
    "fabrikito.offline",
}

# Never on the way of a message command: its plain command line is read by fabrikito.cli.fastargs.
ARGPARSE = {"argparse", "gettext", "fabrikito.cli.argparsing", "importlib"}

# A plain command line of each, and what its handler imports, lazily included (its module chain).
LINES: dict[str, list[str]] = {
    "say": ["say", "api", "hello"],
    "flush": ["flush", "api"],
    "status": ["status", "--json"],
    "send": ["send", "--to", "api", "hello"],
}
CHAINS: dict[str, list[str]] = {
    "say": [
        "fabrikito.cli.commands",
        "fabrikito.delivery.say",
        "fabrikito.delivery.identity",
        "fabrikito.team.teamfile",
        "fabrikito.screen.releases",
        "fabrikito.screen.claude_2_1_316",
        "fabrikito.screen.ansi",
    ],
    "flush": ["fabrikito.cli.commands", "fabrikito.delivery.flush", "fabrikito.team.teamfile"],
    "status": [
        "fabrikito.cli.commands",
        "fabrikito.launch.status",
        "fabrikito.team.teamfile",
        "fabrikito.screen.releases",
        "fabrikito.screen.claude_2_1_316",
        "fabrikito.screen.ansi",
        "fabrikito.delivery.refusals",
    ],
    "send": [
        "fabrikito.inbox.send",
        "fabrikito.inbox.client",
        "fabrikito.inbox.sessions",
        "fabrikito.inbox.protocol",
        "fabrikito.inbox.recent",
        "fabrikito.delivery.identity",
        "fabrikito.log.msglog",
        "fabrikito.team.teamfile",
    ],
}

# More that each of them does not need (say and status never open a socket...).
NOT_FOR: dict[str, set[str]] = {
    "say": {"socket", "hashlib", "fabrikito.inbox.client", "fabrikito.inbox.sessions", "fabrikito.launch"},
    "flush": {"socket", "hashlib", "fabrikito.inbox.client", "fabrikito.launch"},
    # the queue itself only when the team has a queue folder (test_status_without_a_queue_...)
    "status": {"socket", "hashlib", "fabrikito.inbox.client", "signal", "fabrikito.delivery.queue"},
    # who is speaking needs no screen, pane or tmux unless the team's server runs (identity.sender_for)
    "send": {"fabrikito.screen", "fabrikito.delivery.seatpane", "fabrikito.base.tmux", "fabrikito.launch", "signal"},
}

PROBE = """
import sys
from fabrikito import cli
command, chain = sys.argv[1], sys.argv[2:]
if command:
    args, parser = cli.parse(command.split("\x1f"))
    assert parser is None, "argparse read a plain command line"
    cli._resolve(args._handler)
else:
    cli.build_parser(["--help"])
for name in chain:
    __import__(name)
print(" ".join(sorted(sys.modules)))
"""


def loaded(command: list[str], chain: list[str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "\x1f".join(command), *chain],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(done.stdout.split())


@pytest.mark.parametrize("command", sorted(CHAINS))
def test_a_message_command_imports_nothing_heavy(command: str) -> None:
    modules = loaded(LINES[command], CHAINS[command])
    assert set(CHAINS[command]) <= modules  # the probe really loaded the chain
    assert sorted((HEAVY | ARGPARSE | NOT_FOR[command]) & modules) == []
    assert not any(m.startswith(("fabrikito.launch.", "fabrikito.offline.")) for m in modules - set(CHAINS[command]))


RUN = """
import sys
from fabrikito import cli
code = cli.main(sys.argv[1:])
print(" ".join(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


def run_for_modules(argv: list[str], **env: str) -> tuple[int, str, set[str]]:
    """Run ``fabrikito ARGV`` for real in a fresh interpreter: its output and every module it imported."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "TEAM_ROLE", "FABRIKITO"))}
    done = subprocess.run(
        [sys.executable, "-c", RUN, *argv],
        capture_output=True,
        text=True,
        env={**environ, **env},
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    *_, modules = done.stderr.strip().split("\n")
    return done.returncode, done.stdout, set(modules.split())


def test_status_without_a_queue_folder_does_not_import_the_queue(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    team.write_text(
        f'name = "t"\ntmux_socket_path = "{tmp_path / "none"}"\n[[seat]]\nrole = "dev"\nsession = "t-dev"\n'
    )
    (tmp_path / ".state").mkdir(mode=0o700)
    run_for_modules(["status", "--team", str(team)])  # the first run keeps the team file's parse in .state
    code, out, modules = run_for_modules(["status", "--team", str(team)])
    assert code == 0 and "dev" in out and "delivery worker: not running" in out, out
    assert sorted((HEAVY | ARGPARSE | {"fabrikito.delivery.queue", "hashlib"}) & modules) == []
    (tmp_path / ".state" / "t" / "queue").mkdir(parents=True)  # once the team has one, it is read
    code, out, modules = run_for_modules(["status", "--team", str(team)])
    assert code == 0 and "fabrikito.delivery.queue" in modules, out


def test_send_outside_a_team_asks_no_one_who_is_speaking(tmp_path: Path) -> None:
    """Without a team file and TEAM_ROLE the sender is the owner: nothing of say's identity walk is imported."""
    code, _out, modules = run_for_modules(
        ["send", "--to", "nobody", "hi"], CLAUDE_CONFIG_DIR=str(tmp_path / "claude"), HOME=str(tmp_path)
    )
    assert code == 3  # no such session: it went as far as the registry
    assert sorted((HEAVY | ARGPARSE | NOT_FOR["send"] | {"fabrikito.team.teamfile"}) & modules) == []


def test_help_builds_no_command_and_imports_no_handler() -> None:
    modules = loaded([], [])
    assert sorted((HEAVY | {"json", "tomllib", "pathlib", "socket", "hashlib"}) & modules) == []
    assert sorted(m for m in modules if m.startswith("fabrikito.")) == [
        "fabrikito.base",
        "fabrikito.base.errors",
        "fabrikito.cli",
        "fabrikito.cli.argparsing",
        "fabrikito.cli.invocation",  # os and sys only: every command makes one
    ]


def test_the_parser_builds_only_the_command_it_runs() -> None:
    sub = next(a for a in cli.build_parser(["status"])._actions if a.dest == "command")
    assert list(sub.choices) == ["status"]  # type: ignore[arg-type]
    listing = next(a for a in cli.build_parser(["--help"])._actions if a.dest == "command")
    assert list(listing.choices) == [c.name for c in cli.COMMANDS]  # type: ignore[arg-type]
    # an unknown command is refused with the whole list, as argparse does
    unknown = subprocess.run(
        [sys.executable, "-m", "fabrikito", "nope"], capture_output=True, text=True, check=False, timeout=60
    )
    assert unknown.returncode == 2 and "invalid choice: 'nope'" in unknown.stderr and "'status'" in unknown.stderr


def test_every_command_and_its_help_still_build(capsys: pytest.CaptureFixture[str]) -> None:
    for command in cli.COMMANDS:
        with pytest.raises(SystemExit) as done:
            cli.main([command.name, "--help"])
        assert done.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: fabrikito {command.name} ") and command.help[:40] in out.replace("\n", " ")


def test_help_layout_without_shutil_follows_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    text = cli.build_parser(["say"]).format_help()  # the top level; the say parser is a choice of it
    assert max(len(line) for line in text.splitlines()) <= 58
    monkeypatch.setenv("COLUMNS", "not-a-number")
    assert argparsing.columns() >= 1
    epilog = "exit status:\n  0   a row of a table that is kept exactly as it is written, however long it is"
    formatter = argparsing.HelpFormatter("x", width=40)
    assert formatter._fill_text(epilog, 40, "") == epilog  # several lines: printed as written
    assert "\n" in formatter._fill_text("one line " * 10, 40, "")  # one line: wrapped


def test_a_new_command_is_one_table_entry(tmp_path: Path) -> None:
    calls: list[str] = []

    def build(p: object) -> None:
        calls.append("built")

    extra = (*cli.COMMANDS, cli.Command("extra", "an extra command", "json:dumps", build))
    assert calls == [] and "extra" in cli.build_parser(["--help"], extra).format_help()
    assert calls == []  # listed, not built
    args = cli.build_parser(["extra"], extra).parse_args(["extra"])
    assert calls == ["built"] and args._handler == "json:dumps"


def test_send_tells_a_team_file_is_here_as_the_team_file_module_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fabrikito.inbox import send
    from fabrikito.team import teamfile

    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere.toml").write_text("")
    for here, env in ((False, ""), (False, "absent.toml"), (True, "elsewhere.toml"), (True, "")):
        if here and not env:
            (tmp_path / "team.toml").write_text("")
        monkeypatch.setenv("FABRIKITO_TEAM", env)
        assert send.team_file_here() is here is teamfile.resolve_team_path(None).exists()


STARTED_FIRST = """
import sys
from fabrikito import cli
from fabrikito.base import spawn
started = spawn.start
def start(argv, env, data=b""):
    if "list-panes" in argv:
        print("imported:", "fabrikito.launch.status" in sys.modules, "fabrikito.delivery.say" in sys.modules,
              file=sys.stderr)
    return started(argv, env, data)
spawn.start = start
sys.exit(cli.main(sys.argv[1:]))
"""


def started_first(argv: list[str]) -> tuple[int, str, str]:
    """Run ``fabrikito ARGV``; its exit status, stdout, and what was imported when the pane list started."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "TEAM_ROLE", "FABRIKITO"))}
    done = subprocess.run(
        [sys.executable, "-c", STARTED_FIRST, *argv],
        capture_output=True,
        text=True,
        env=environ,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr.splitlines()[0] if done.stderr else ""


def test_status_and_say_start_their_pane_list_before_importing_the_rest(tmp_path: Path) -> None:
    """tmux makes the pane list (its format is fixed) while status or say imports the modules that read it."""
    from fabrikito.base.tmux import Server

    server = Server(socket_name=f"fab-unit-{os.urandom(4).hex()}")
    team = tmp_path / "team.toml"
    team.write_text(f'name = "t"\ntmux_socket = "{server.socket_name}"\n[[seat]]\nrole = "dev"\nsession = "t-dev"\n')
    code, out, imported = started_first(["status", "--team", str(team)])  # no server: status still lists first
    assert code == 0 and "dev" in out and imported == "imported: False False", (out, imported)
    try:
        server.new_session("t-dev", ["sleep", "30"], cwd="/")
        code, out, imported = started_first(["status", "--team", str(team)])
        assert code == 0 and "not running claude" in out and imported == "imported: False False", (out, imported)
        code, out, imported = started_first(["say", "--team", str(team), "dev", "hi"])
        assert code == 3 and imported == "imported: False False", (out, imported)  # refused: not Claude Code
    finally:
        server.kill_server()


def test_send_to_a_session_does_not_import_pathlib(tmp_path: Path) -> None:
    """send's whole way (the registry, the key file, the post, the record of the last send) uses string
    paths: pathlib (with urllib.parse and ipaddress, 3.5 ms) is what the skill's recipe does not pay."""
    from tests.unit.test_inbox import Listener, Registry

    registry = Registry(tmp_path / "claude")
    listener = Listener(tmp_path / "s.sock")
    try:
        registry.add("seat-a", socket_path=str(listener.path))
        env = {**registry.env, "XDG_STATE_HOME": str(tmp_path / "state")}
        code, out, modules = run_for_modules(["send", "--to", "seat-a", "hi"], **env)
    finally:
        listener.close()
    assert code == 0 and "written:" in out, out
    assert sorted((HEAVY | ARGPARSE | NOT_FOR["send"] | {"pathlib"}) & modules) == []
    (record,) = (tmp_path / "state" / "fabrikito" / "sent").iterdir()  # the record of the last send was kept
    assert record.stat().st_mode & 0o777 == 0o600
