"""A stand-in for an unknown Claude Code release that draws its input box differently.

It answers ``--version`` with ``2.1.999 (Claude Code)``, registers like Claude
Code (``$CLAUDE_CONFIG_DIR`` or ``$HOME/.claude`` ``/sessions/<pid>.json``
with a messaging socket), and draws a box that looks like Claude Code's to a
person — a top rule with the session name, ``❯`` + NO-BREAK SPACE, a bottom
rule, a footer — but with its rules in the terminal's default colour instead
of Claude Code's grey.  Every byte it reads from its terminal is appended to
``$FAKE_AGENT_KEYS`` (when set), so a test can tell whether anything was typed.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import sys
import termios
import time
import tty

RELEASE = "2.1.999"


def session_name(argv: list[str]) -> str:
    for flag in ("-n", "--name"):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            return argv[argv.index(flag) + 1]
    return "fake"


def register(name: str) -> socket.socket:
    config = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.environ["HOME"], ".claude")
    sessions = os.path.join(config, "sessions")
    os.makedirs(sessions, exist_ok=True)
    path = f"/tmp/fake-agent-{os.getpid()}.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)
    entry = {
        "pid": os.getpid(),
        "version": RELEASE,
        "name": name,
        "nameSource": "user",
        "status": "idle",
        "cwd": os.getcwd(),
        "messagingSocketPath": path,
        "kind": "interactive",
    }
    with open(os.path.join(sessions, f"{os.getpid()}.json"), "w", encoding="utf-8") as f:
        json.dump(entry, f)
    return server


def draw(name: str, text: str) -> None:
    width, height = shutil.get_terminal_size((80, 24))
    top = "─" * (width - len(name) - 3) + " " + name + " ─"
    rows = [top, "❯\u00a0" + text, "─" * width, "  ? for shortcuts"]
    out = "\x1b[2J\x1b[H" + "\n" * max(0, height - len(rows) - 1) + "\r\n".join(rows)
    sys.stdout.write(out)
    sys.stdout.flush()


def main() -> int:
    if "--version" in sys.argv:
        print(f"{RELEASE} (Claude Code)")
        return 0
    name = session_name(sys.argv)
    server = register(name)
    keys = os.environ.get("FAKE_AGENT_KEYS")
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    text = ""
    try:
        draw(name, text)
        while True:
            ready, _, _ = select.select([fd, server], [], [], 1.0)
            if server in ready:
                server.accept()[0].close()
            if fd not in ready:
                continue
            data = os.read(fd, 4096)
            if not data:
                return 0
            if keys:
                with open(keys, "ab") as f:
                    f.write(data)
            for ch in data.decode("utf-8", "replace").replace("\x1b[200~", "").replace("\x1b[201~", ""):
                if ch == "\x03":
                    return 0
                if ch in "\r\n":
                    text = ""
                elif ch.isprintable():
                    text += ch
            draw(name, text)
            time.sleep(0.01)
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


if __name__ == "__main__":
    sys.exit(main())
