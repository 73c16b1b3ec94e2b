"""tmux releases other than the machine's, for the live tier: 3.5a (Debian 13) and 3.8 (rolling).

Debian's archive has them as binary packages built against a newer C library
than this machine's; they run here unchanged through that library's own
loader.  :func:`ensure` downloads tmux and the few libraries it needs with
``apt-get download`` (a private sources list, lists and cache directory:
nothing is installed system-wide), unpacks each package with ``dpkg -x`` into
``.tools/tmux-<release>/`` and writes a ``tmux`` wrapper there that starts
tmux through the unpacked loader.  Once: afterwards it is offline (the
wrapper is checked with ``tmux -V``).  When it cannot, it says what to do.

``python -m fabrikito.offline.tmux_releases install`` is what ``scripts/setup`` runs.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from fabrikito.offline.claude_setup import BenchError, repo_root

#: release -> the Debian suite whose tmux package is that release.
RELEASES: Mapping[str, str] = {"3.5a": "trixie", "3.8": "sid"}
#: The libraries tmux needs, and theirs, all from sid (newer than either tmux needs).
LIBRARIES = (
    "libc6",
    "libgcc-s1",
    "libstdc++6",
    "libtinfo6",
    "libevent-core-2.1-7t64",
    "libjemalloc2",
    "libsystemd0",
)
MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
LIBDIR = "usr/lib/x86_64-linux-gnu"
LOADER = f"{LIBDIR}/ld-linux-x86-64.so.2"
LOADER_LINK = "libexec/tmux"  # the loader, by the name tmux
TIMEOUT = 300.0


def release_dir(release: str, repo: Path | None = None) -> Path:
    return (repo or repo_root()) / ".tools" / f"tmux-{release}"


def wrapper(release: str, repo: Path | None = None) -> Path:
    """The ``tmux`` wrapper of ``release`` (a directory to put first on ``PATH`` is its parent)."""
    return release_dir(release, repo) / "bin" / "tmux"


def wrapper_text() -> str:
    """The wrapper: finds the unpacked tree from its own place (``<root>/bin/tmux``), so it can move.

    It starts the loader through a link named ``tmux`` (``<root>/libexec/tmux``): a process's name is
    the name it was started by, and fabrikito knows a tmux server's processes by the name ``tmux``, as
    it would on a machine where this release is the system's own.
    """
    return (
        "#!/bin/sh\n"
        "# tmux from Debian's archive, through its own C library (fabrikito.offline.tmux_releases)\n"
        'root=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)\n'
        f'exec "$root/{LOADER_LINK}" --library-path "$root/{LIBDIR}" "$root/usr/bin/tmux" "$@"\n'
    )


def version_of(binary: Path | str, env: Mapping[str, str] | None = None) -> str | None:
    """What ``binary -V`` says after ``tmux `` (``3.5a``), or ``None`` when it does not run."""
    try:
        done = subprocess.run(
            [str(binary), "-V"], capture_output=True, text=True, timeout=10, env=dict(env or os.environ), check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = done.stdout.strip()
    if done.returncode != 0 or not out.startswith("tmux "):
        return None
    return out.removeprefix("tmux ")


def ensure(
    release: str,
    repo: Path | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """The wrapper of ``release``, downloaded and unpacked first if it is not there yet (under a file lock,
    so parallel test workers install it once)."""
    if release not in RELEASES:
        raise BenchError(f"tmux {release} is not one fabrikito's tests obtain (known: {', '.join(RELEASES)})")
    target = release_dir(release, repo)
    binary = wrapper(release, repo)
    if binary.is_file() and binary.read_text() != wrapper_text():
        _write_wrapper(binary)  # one an older fabrikito wrote
    if version_of(binary) == release:
        return binary
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".tmux-releases.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if version_of(binary) == release:
            return binary
        if progress is not None:
            progress(f"installing tmux {release} (Debian {RELEASES[release]}) into {target}")
        _install(release, target, env=env)
    if version_of(binary) != release:
        raise BenchError(f"tmux {release} was unpacked into {target} but its wrapper does not run; remove it and retry")
    return binary


def _install(release: str, target: Path, *, env: Mapping[str, str] | None) -> None:
    for tool in ("apt-get", "dpkg"):
        if shutil.which(tool) is None:
            raise BenchError(
                f"{tool} is missing: tmux {release} is obtained from Debian's archive with apt-get and dpkg"
            )
    staging = Path(tempfile.mkdtemp(prefix=f".tmux-{release}-", dir=target.parent))
    try:
        apt = _private_apt(staging / "apt")
        run_env = dict(env or os.environ)
        _run([*apt, "update"], "download Debian's package lists", run_env)
        debs = staging / "debs"
        debs.mkdir()
        names = [f"tmux/{RELEASES[release]}", *LIBRARIES]
        _run([*apt, "download", *names], f"download {' '.join(names)}", run_env, cwd=debs)
        root = staging / "root"
        for deb in sorted(debs.glob("*.deb")):
            _run(["dpkg", "-x", str(deb), str(root)], f"unpack {deb.name}", run_env)
        if target.exists():
            shutil.rmtree(target)
        os.replace(root, target)
        binary = target / "bin" / "tmux"
        _write_wrapper(binary)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _write_wrapper(binary: Path) -> None:
    root = binary.parent.parent
    link = root / LOADER_LINK
    if not link.is_symlink():
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(os.path.relpath(root / LOADER, link.parent))
    binary.parent.mkdir(exist_ok=True)
    partial = binary.with_name(".tmux.partial")
    partial.write_text(wrapper_text())
    partial.chmod(0o755)
    os.replace(partial, binary)


def _private_apt(where: Path) -> list[str]:
    """``apt-get`` with its own sources list, lists and cache under ``where`` (the system's untouched)."""
    for sub in ("lists/partial", "cache/archives/partial", "parts"):
        (where / sub).mkdir(parents=True, exist_ok=True)
    sources = where / "sources.list"
    sources.write_text(
        "".join(f"deb [signed-by={KEYRING}] {MIRROR} {suite} main\n" for suite in sorted(set(RELEASES.values())))
    )
    options = {
        "Dir::Etc::SourceList": str(sources),
        "Dir::Etc::SourceParts": str(where / "parts"),
        "Dir::State::Lists": str(where / "lists"),
        "Dir::Cache": str(where / "cache"),
        "Dir::State::status": "/dev/null",
        "APT::Architecture": "amd64",
        "Acquire::Languages": "none",
        "APT::Sandbox::User": "root" if os.getuid() == 0 else "",
    }
    argv = ["apt-get", "-q"]
    for key, value in options.items():
        if value:
            argv += ["-o", f"{key}={value}"]
    return argv


def _run(argv: Sequence[str], what: str, env: Mapping[str, str], cwd: Path | None = None) -> None:
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=TIMEOUT, env=dict(env), cwd=cwd, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BenchError(f"could not {what}: {exc}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise BenchError(
            f"could not {what} (exit {done.returncode}): {' / '.join(tail)}\n"
            f"the live tier needs Debian's archive ({MIRROR}) once to obtain its tmux releases; "
            "run ./scripts/setup where it is reachable (afterwards it works offline)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] != ["install"]:
        print("usage: python -m fabrikito.offline.tmux_releases install [RELEASE...]", file=sys.stderr)
        return 2
    try:
        for release in args[1:] or list(RELEASES):
            path = ensure(release, progress=print)
            print(f"tmux {release}: {path}")
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
