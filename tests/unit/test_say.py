from __future__ import annotations

from fabrikito import say


def test_crlf_becomes_lf_and_one_trailing_newline_from_stdin_is_dropped() -> None:
    assert say.prepare_text("a\r\nb\r\n", from_stdin=True) == "a\nb"
    assert say.prepare_text("a\n\n", from_stdin=True) == "a\n"
    assert say.prepare_text("a\n", from_stdin=False) == "a\n"


def test_the_label_is_its_own_paste_with_a_space() -> None:
    assert say.label_for("em") == "[from em] "
    assert say.label_for("live-test") == "[from live-test] "


def test_say_imports_no_heavy_modules() -> None:
    import subprocess
    import sys

    code = (
        "import sys; import fabrikito.cli, fabrikito.commands, fabrikito.say, fabrikito.teamfile;"
        "heavy = {'psutil', 'asyncio', 'fabrikito.inbox', 'fabrikito.launcher', 'fabrikito.standin', 'tomllib'};"
        "print(sorted(heavy & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
