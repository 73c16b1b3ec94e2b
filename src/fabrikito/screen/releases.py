"""Which agent releases are recognised, and by which dialect: only by evidence.

A *dialect* is how a run of releases draws its screens (and what else
fabrikito reads of them).  A release is recognised when

* the package's table (:mod:`fabrikito.screen.qualified`, written by the
  project's qualifying script from captures of that release's real binary)
  names its dialect, or
* the user qualified it here with ``fabrikito qualify``: a record in
  ``$XDG_CONFIG_HOME/fabrikito/qualified.json`` names the release, its
  dialect and the sha256 of the binary that passed.  Such a record counts
  only for that binary: a process whose program is another file (another
  build under the same version) is not recognised by it.

Anything else fails closed (:func:`fabrikito.screen.recogniser_for`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from fabrikito import TYPE_CHECKING
from fabrikito.base.values import frozen
from fabrikito.screen.qualified import CLAUDE, CODEX, GEMINI

if TYPE_CHECKING:
    from fabrikito.screen import Recogniser

LOCAL_FILE = "qualified.json"
RECORD_FORMAT = 1


def _claude_2_1_316(version: str) -> Recogniser:
    from fabrikito.screen.claude_2_1_316 import Claude21316

    return Claude21316(version)


def _claude_2_1_326(version: str) -> Recogniser:
    from fabrikito.screen.claude_2_1_326 import Claude21326

    return Claude21326(version)


def _claude_2_1_331(version: str) -> Recogniser:
    from fabrikito.screen.claude_2_1_331 import Claude21331

    return Claude21331(version)


def _codex_0_171(version: str) -> Recogniser:
    from fabrikito.screen.codex_0_171 import Codex0171

    return Codex0171(version)


def _gemini_0_61(version: str) -> Recogniser:
    from fabrikito.screen.gemini_0_61 import Gemini061

    return Gemini061(version)


#: dialect name -> factory(release), oldest first per agent.  A new dialect is a module and a line here.
DIALECTS: dict[str, Callable[[str], Recogniser]] = {
    "claude-2.1.316": _claude_2_1_316,
    "claude-2.1.326": _claude_2_1_326,
    "claude-2.1.331": _claude_2_1_331,
    "codex-0.171": _codex_0_171,
    "gemini-0.61": _gemini_0_61,
}
_AGENT_OF_DIALECT = {name: name.split("-", 1)[0] for name in DIALECTS}
_TABLES: dict[str, Mapping[str, str]] = {"claude": CLAUDE, "codex": CODEX, "gemini": GEMINI}
#: The agents fabrikito recognises, and what each is called.
AGENT_NAMES = {"claude": "Claude Code", "codex": "Codex CLI", "gemini": "Gemini CLI"}


def agent_of(dialect: str) -> str:
    """The agent a dialect belongs to (``claude-2.1.316`` -> ``claude``)."""
    return _AGENT_OF_DIALECT.get(dialect, dialect.split("-", 1)[0])


def dialects(agent: str = "claude") -> list[str]:
    """The dialects of ``agent``, oldest first."""
    return [name for name in DIALECTS if _AGENT_OF_DIALECT.get(name) == agent]


def make(dialect: str, release: str) -> Recogniser:
    """The recogniser of ``dialect`` for ``release`` (``KeyError`` for an unknown dialect)."""
    return DIALECTS[dialect](release)


def packaged(agent: str = "claude") -> Mapping[str, str]:
    """The package's table: release -> dialect."""
    return _TABLES.get(agent, {})


@frozen
class LocalQualification:
    """One release qualified on this machine by ``fabrikito qualify``."""

    agent: str
    release: str
    dialect: str
    sha256: str  # of the binary that passed
    binary: str  # its path then
    size: int
    mtime_ns: int
    date: str  # when, local time (2026-12-01T10:05:09)


_LOCAL_FIELDS = ("agent", "release", "dialect", "sha256", "binary", "size", "mtime_ns", "date")


@frozen
class Found:
    """A recognised release: its dialect and where that came from."""

    dialect: str
    source: str  # "fabrikito" (the package's table) or "qualified here on <date>"


def local_file(env: Mapping[str, str] | None = None) -> Path:
    from fabrikito.base import xdg

    return xdg.config_home(env) / LOCAL_FILE


def read_local(env: Mapping[str, str] | None = None) -> list[LocalQualification]:
    """The user's qualifications (none when the file is missing or damaged)."""
    try:
        with open(local_file(env), "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):
        return []
    found = []
    for item in data.get("qualified", []) if isinstance(data, dict) else []:
        try:
            found.append(LocalQualification(**{k: item[k] for k in _LOCAL_FIELDS}))
        except (KeyError, TypeError):
            continue
    return found


def record_local(entry: LocalQualification, env: Mapping[str, str] | None = None) -> Path:
    """Add ``entry`` (replacing one for the same binary), written atomically, 0600 in a 0700 folder."""
    from fabrikito.base import statedir

    path = local_file(env)
    path.parent.parent.mkdir(parents=True, exist_ok=True)
    statedir.ensure_dir(path.parent)
    kept = [q for q in read_local(env) if (q.agent, q.sha256) != (entry.agent, entry.sha256)]
    data = {
        "format": RECORD_FORMAT,
        "qualified": [{k: getattr(q, k) for k in _LOCAL_FIELDS} for q in [*kept, entry]],
    }
    statedir.write_atomic(path, (json.dumps(data, indent=1) + "\n").encode("utf-8"))
    return path


def file_sha256(path: str) -> str:
    import hashlib  # only when a binary's size matches a local record: hashlib costs ~4 ms to import

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _same_binary(entry: LocalQualification, exe: str) -> bool:
    """Whether ``exe`` is the binary ``entry`` qualified: by size and mtime first, else by sha256."""
    try:
        st = os.stat(exe)
    except OSError:
        return False
    if exe == entry.binary and st.st_size == entry.size and st.st_mtime_ns == entry.mtime_ns:
        return True
    if st.st_size != entry.size:
        return False
    try:
        return file_sha256(exe) == entry.sha256
    except OSError:
        return False


def lookup(agent: str, release: str, exe: str | None = None, env: Mapping[str, str] | None = None) -> Found | None:
    """The dialect ``release`` of ``agent`` speaks, by the package's table or a local qualification."""
    dialect = packaged(agent).get(release)
    if dialect is not None and dialect in DIALECTS:
        return Found(dialect, "fabrikito")
    if exe is None:
        return None
    for entry in read_local(env):
        mine = entry.agent == agent and entry.release == release and entry.dialect in DIALECTS
        if mine and _same_binary(entry, exe):
            return Found(entry.dialect, f"qualified here on {entry.date[:10]}")
    return None
