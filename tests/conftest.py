"""Both tiers: the tests run where users run (tests/userenv.py), on every tmux release (tests/tmuxreleases.py).

Before any test module is imported, this process's environment is cut to
what a user's shell has, so nothing a test starts can inherit this machine's
``PYTHONUNBUFFERED``, ``PYTHONDONTWRITEBYTECODE`` or any other variable of its own.

A module marked ``tmux_releases`` runs once per tmux release, that release's ``tmux`` first on ``PATH``;
the end of the run says per release how its tests went, and keeps that for docs/compatibility.md.
The matrix is not a cross product: on a release other than the machine's own, a live test runs with the
pinned Claude Code only (the newest qualified release runs on the machine's tmux), and a test marked
``one_tmux_release`` (a test of fabrikito's own logic that uses tmux as every other test does) runs on
the machine's tmux only.  ``FABRIKITO_TEST_CLAUDE`` names the Claude Code releases to run (the portable
pass runs the pinned one).
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from tests import tmuxreleases, userenv

userenv.scrub()

_results: defaultdict[str, defaultdict[str, defaultdict[str, int]]] = defaultdict(
    lambda: defaultdict(lambda: defaultdict(int))
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "tmux_releases: runs once on each tmux release of tests/tmuxreleases.py (3.3a, 3.5a, 3.8)"
    )
    config.addinivalue_line(
        "markers", "one_tmux_release: in a tmux_releases module, runs on the machine's own tmux release only"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the matrix's cells that check nothing another cell does not (the module's docstring)."""
    from fabrikito.offline import claude_setup  # after the environment is cut (imported by the live tier)

    kept: list[pytest.Item] = []
    left: list[pytest.Item] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        release = params.get("tmux_release", tmuxreleases.SYSTEM_RELEASE)
        other_tmux = release != tmuxreleases.SYSTEM_RELEASE
        newer_claude = params.get("claude_binary", claude_setup.CLAUDE_VERSION) != claude_setup.CLAUDE_VERSION
        if other_tmux and (newer_claude or item.get_closest_marker("one_tmux_release") is not None):
            left.append(item)
        else:
            kept.append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("tmux_releases") is not None:
        if "tmux_release" not in metafunc.fixturenames:
            metafunc.fixturenames.append("tmux_release")
        releases = _releases()
        metafunc.parametrize("tmux_release", releases, ids=[f"tmux{r}" for r in releases])


def _releases() -> tuple[str, ...]:
    """Every release of tests/tmuxreleases.py, or those ``FABRIKITO_TEST_TMUX`` names (comma-separated: the
    test command's portable pass runs on the machine's own only)."""
    chosen = [r.strip() for r in userenv.setting("FABRIKITO_TEST_TMUX").split(",") if r.strip()]
    unknown = sorted(set(chosen) - set(tmuxreleases.RELEASES))
    if unknown:
        raise pytest.UsageError(f"FABRIKITO_TEST_TMUX names {unknown}: the releases are {tmuxreleases.RELEASES}")
    return tuple(chosen) or tmuxreleases.RELEASES


@pytest.fixture(autouse=True)
def _tmux_release_on_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """For a test of a ``tmux_releases`` module: its release's ``tmux`` first on this process's ``PATH``
    while it runs (autouse: before any other fixture starts a tmux)."""
    release = getattr(getattr(request.node, "callspec", None), "params", {}).get("tmux_release")
    if release is None:
        return
    tmuxreleases.ensure(release)
    monkeypatch.setenv("PATH", tmuxreleases.path_with(release, userenv.user_env()["PATH"]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    release = tmuxreleases.release_of(report.nodeid)
    if release is None:
        return
    outcome: str
    if report.when == "call":
        outcome = report.outcome
    elif report.failed:
        outcome = "error"  # its setup or teardown failed
    elif report.skipped:
        outcome = "skipped"
    else:
        return
    module = report.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    _results[release][module][outcome] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _results:
        return
    terminalreporter.section("tmux releases")
    for release in tmuxreleases.RELEASES:
        modules: dict[str, defaultdict[str, int]] = dict(_results.get(release, {}))
        totals: defaultdict[str, int] = defaultdict(int)
        for counts in modules.values():
            for outcome, n in counts.items():
                totals[outcome] += n
        shown = ", ".join(f"{n} {outcome}" for outcome, n in sorted(totals.items())) or "not run"
        terminalreporter.write_line(f"tmux {release}: {shown} ({len(modules)} modules)")
    if userenv.setting("FABRIKITO_TEST_TMUX"):
        return  # a run on some releases only does not replace the whole run's results
    tmuxreleases.write_results({r: {m: dict(c) for m, c in ms.items()} for r, ms in _results.items()})
