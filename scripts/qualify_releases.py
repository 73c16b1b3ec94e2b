"""Qualify Claude Code releases by evidence, and write what they showed.

For each release (default: every one on npm from 2.1.316 to the newest), it
installs the real binary into ``.tools/claude-code-<release>/`` (cached;
``--tools-root DIR`` reuses installs laid out as ``DIR/<release>/``), runs it
through the catalogue (``fabrikito.qualify``), and stores the captures and
the outcome in ``tests/fixtures/releases/``.  Then it rewrites the package's
table of qualified releases (``src/fabrikito/screen/qualified.py``) and
``docs/compatibility.md`` from every manifest there.

Not part of CI (it takes about a minute a release); CI's unit tier reads the
stored captures again, and its live tier runs on 2.1.316 and the newest
qualified release.

With ``--agent codex`` or ``--agent gemini`` it qualifies Codex CLI or
Gemini CLI releases instead (default: the pinned one; installed into
``.tools/<agent>-<release>/``), storing their evidence in
``tests/fixtures/releases/<agent>/``; the table and the doc are rewritten
from every agent's manifests either way.

Usage::

    .venv/bin/python scripts/qualify_releases.py [--releases 2.1.331,2.1.332] [--since 2.1.316]
        [--tools-root /path/to/installs]
    .venv/bin/python scripts/qualify_releases.py --agent codex [--releases 0.171.0]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fabrikito.offline import claude_setup, other_setup
from fabrikito.qualify import corpus, others
from fabrikito.qualify.catalogue import CASES
from fabrikito.qualify.run import qualify

ROOT = claude_setup.repo_root()
FIXTURES = ROOT / "tests" / "fixtures" / "releases"
TABLE = ROOT / "src" / "fabrikito" / "screen" / "qualified.py"
DOC = ROOT / "docs" / "compatibility.md"
TMUX_SECTION = "## tmux releases"  # written by scripts/tmux_table.py
FIRST = "2.1.316"


def npm_releases() -> list[str]:
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is not on PATH")
    done = subprocess.run(
        [npm, "view", claude_setup.PACKAGE, "versions", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [
        v for v in json.loads(done.stdout) if isinstance(v, str) and v.count(".") == 2 and v.split(".")[2].isdigit()
    ]


def checked_text() -> str:
    states = sum(len(c.expects) for c in CASES if c.quick)
    screens = sum(len(c.expects) * len(c.renderers) for c in CASES if c.quick)
    return (
        f"{screens} screens ({states} states, both renderers, 120x40; the diff notice at 89x13); "
        "registry, hook, inbox, labelled message"
    )


def checked_other(agent: str) -> str:
    cases = others.cases_for(agent)
    screens = sum(len(c.expects) for c in cases)
    return f"{screens} screens ({len(cases)} states, 120x40); no messaging checks (none apply)"


def qualify_other(agent: str, releases: list[str]) -> int:
    """Qualify ``releases`` of ``agent``; store the evidence; the number that did not qualify."""
    failed = 0
    for release in releases:
        binary = other_setup.ensure_agent(agent, version=release)
        out = Path(tempfile.mkdtemp(prefix=f"fabrikito-qualify-{agent}-{release}-"))
        print(f"== {agent} {release}: {binary}", flush=True)
        outcome = qualify(str(binary), agent=agent, out=out, log=lambda line: print(f"   {line}", flush=True))
        folder = FIXTURES / agent
        manifest = corpus.store(folder, outcome, date=time.strftime("%Y-%m-%d"), checked=checked_other(agent))
        verdict = f"qualified as {manifest.dialect}" if manifest.qualified else "NOT qualified"
        print(f"== {agent} {release}: {verdict} in {outcome.seconds:.0f}s", flush=True)
        for problem in outcome.problems:
            print(f"   - {problem}", flush=True)
        failed += 0 if manifest.qualified else 1
        shutil.rmtree(out, ignore_errors=True)
    return failed


def write_table_and_doc() -> None:
    found = corpus.manifests(FIXTURES)
    found_others = {agent: corpus.manifests(FIXTURES / agent) for agent in corpus.OTHER_AGENTS}
    TABLE.write_text(corpus.table_source(found, found_others), encoding="utf-8")
    kept = DOC.read_text(encoding="utf-8").partition(TMUX_SECTION) if DOC.exists() else ("", "", "")
    tmux = kept[1] + kept[2] if kept[1] else ""  # scripts/tmux_table.py's section, kept as it is
    DOC.write_text(corpus.compatibility_doc(found, found_others) + ("\n" + tmux if tmux else ""), encoding="utf-8")
    print(f"wrote {TABLE.relative_to(ROOT)} and {DOC.relative_to(ROOT)} ({len(found)} Claude Code releases)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--releases", help="comma-separated releases (default: every one since --since)")
    parser.add_argument("--since", default=FIRST, help=f"the oldest release to qualify (default {FIRST})")
    parser.add_argument("--tools-root", type=Path, help="reuse installs at DIR/<release>/ instead of .tools/")
    parser.add_argument("--rewrite-only", action="store_true", help="only rewrite the table and the doc")
    parser.add_argument("--agent", default="claude", choices=["claude", *other_setup.AGENTS])
    args = parser.parse_args(argv)
    if args.agent != "claude":
        wanted = [r for r in (args.releases or other_setup.PINNED[args.agent]).split(",") if r]
        failed = 0 if args.rewrite_only else qualify_other(args.agent, wanted)
        write_table_and_doc()
        return 1 if failed else 0
    if args.releases:
        wanted = [r for r in args.releases.split(",") if r]
    else:
        floor = corpus.release_key(args.since)
        wanted = [r for r in npm_releases() if corpus.release_key(r) >= floor]
    failed = 0
    if not args.rewrite_only:
        for release in sorted(wanted, key=corpus.release_key):
            tools = args.tools_root / release if args.tools_root else None
            binary = claude_setup.ensure_claude(version=release, tools_dir=tools)
            out = Path(tempfile.mkdtemp(prefix=f"fabrikito-qualify-{release}-"))
            print(f"== {release}: {binary}", flush=True)
            outcome = qualify(str(binary), out=out, log=lambda line: print(f"   {line}", flush=True))
            manifest = corpus.store(FIXTURES, outcome, date=time.strftime("%Y-%m-%d"), checked=checked_text())
            verdict = f"qualified as {manifest.dialect}" if manifest.qualified else "NOT qualified"
            print(f"== {release}: {verdict} in {outcome.seconds:.0f}s", flush=True)
            for problem in outcome.problems:
                print(f"   - {problem}", flush=True)
            failed += 0 if manifest.qualified else 1
            shutil.rmtree(out, ignore_errors=True)
    write_table_and_doc()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
