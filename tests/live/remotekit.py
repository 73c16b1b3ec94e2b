"""A second host on this machine for the live tier: a private sshd and a second local user.

What :class:`OtherHost` sets up (as root; Debian's ``openssh-server``, which
``./scripts/setup`` installs when it is missing):

* a local user :data:`USER` (created when missing, its password field ``*`` so
  a key login works with ``UsePAM no``) whose home is a fresh directory: its
  HOME, its tmux server and its ``~/.local/state/fabrikito`` are "the other host";
* fabrikito installed for that user the way a user would: the wheel built
  from this checkout, ``pip install``-ed into a venv of its own, the
  ``fabrikito`` command linked into ``~/.local/bin``;
* ``sshd -D`` on 127.0.0.1 and a free port, with a generated host key, key
  logins only (root's key and the user's), its own log;
* an ssh config for this side (``$FABRIKITO_SSH_CONFIG``): ``fk-remote`` is
  the user at that sshd, plus ``fk-unknown`` (a known_hosts without the
  key), ``fk-changed`` (a known_hosts with another key for it) and
  ``fk-refused`` (a key sshd does not take); and the user's own
  ``~/.ssh/config``, where ``fk-origin`` is root at the same sshd (for
  seats on the host that say to seats here), the user's key authorized there
  the way the README says, by ``fabrikito authorize-host --install``: it runs
  only fabrikito's gate (``command=…,restrict``), whose log root's sessions
  keep in :attr:`OtherHost.origin_state` (``XDG_STATE_HOME``, set by sshd).

The user, its home and its keys are the machine's: one :class:`OtherHost` is up at a time on a
machine (:data:`LOCK`, held until :meth:`OtherHost.close`), whichever process or checkout asks.

:meth:`OtherHost.stop_sshd` stops the sshd and every connection it serves
(the host is gone: the user's tmux server and seats, started over ssh, live
on, as they would on a host whose network dropped); :meth:`start_sshd`
brings it back on the same port with the same key.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

USER = "fkremote"
HOME = Path("/tmp/fab-host-fkremote")
KEYS = Path("/tmp/fab-host-fkremote.ssh")
#: Held while an :class:`OtherHost` is up: the user, its home and its keys are the machine's, one set for
#: every test process (two pytest workers, or two checkouts' runs), so a second waits for the first's end.
LOCK = Path("/tmp/fab-host-fkremote.lock")
SSHD = "/usr/sbin/sshd"
REPO = Path(__file__).resolve().parents[2]
#: What fabrikito needs on a Linux host (psutil is for platforms without /proc).
DEPENDENCIES = ("confusable-homoglyphs>=3.3",)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(argv: Sequence[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=300, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stdout}{done.stderr}"
    return done  # type: ignore[no-any-return]


def _end_user_processes() -> None:
    """What an earlier run left running as the test's own user (a tmux server, a seat), ended by pid."""
    try:
        uid = pwd.getpwnam(USER).pw_uid
    except KeyError:
        return
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    os.kill(int(entry), signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError):
                pass


def _keygen(path: Path) -> str:
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)])
    return path.with_suffix(".pub").read_text().strip()


class OtherHost:
    def __init__(self) -> None:
        assert os.geteuid() == 0, "the second host's live tests run as root (they add a user and start sshd)"
        assert os.path.exists(SSHD), "no sshd: ./scripts/setup installs openssh-server (apt-get install openssh-server)"
        self.lock = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        fcntl.flock(self.lock, fcntl.LOCK_EX)  # another run's second host ends first (its close, or its death)
        try:
            self.keys = KEYS  # outside pytest's own 0700 tree: sshd reads the user's authorized keys as the user
            shutil.rmtree(self.keys, ignore_errors=True)
            self.keys.mkdir(mode=0o700)
            self.port = _free_port()
            self.home = HOME
            _end_user_processes()
            shutil.rmtree(self.home, ignore_errors=True)
            self.home.mkdir(mode=0o700)
            self.sshd: subprocess.Popen[bytes] | None = None
            self.tmux_sockets: list[str] = []  # the teams' tmux servers the user runs, killed at the end
            self._user()
            self.uid = pwd.getpwnam(USER).pw_uid
            self._keys()
            self._user_files()
            self.config = self._origin_config()
        except BaseException:
            os.close(self.lock)  # a host that did not come up holds nothing: the next may try
            raise

    # -- setting up -------------------------------------------------------------------

    def _user(self) -> None:
        try:
            entry = pwd.getpwnam(USER)
        except KeyError:
            _run(["useradd", "--no-create-home", "--shell", "/bin/sh", "--home-dir", str(self.home), USER])
            entry = pwd.getpwnam(USER)
        if entry.pw_dir != str(self.home):
            _run(["usermod", "--home", str(self.home), USER])
        _run(["usermod", "--password", "*", USER])  # not the locked "!": sshd (UsePAM no) would refuse even a key

    def _keys(self) -> None:
        self.host_pub = _keygen(self.keys / "host_key")
        other_pub = _keygen(self.keys / "other_host_key")
        root_pub = _keygen(self.keys / "root_key")
        _keygen(self.keys / "stranger_key")
        ssh = self.home / ".ssh"
        ssh.mkdir(mode=0o700)
        _keygen(ssh / "id_ed25519")  # the host user's key: fk-origin authorizes it for the gate only (below)
        (self.keys / f"authorized_keys.{USER}").write_text(root_pub + "\n")
        os.chmod(self.keys / f"authorized_keys.{USER}", 0o644)  # sshd reads it as the user
        os.chmod(self.keys, 0o711)  # noqa: S103 -- the user may pass through, not list (the private keys are 0600)
        authorized = self.keys / "authorized_keys.root"
        done = subprocess.run(
            [
                str(REPO / "fabrikito"),
                "authorize-host",
                "--install",
                "--file",
                str(authorized),
                str(ssh / "id_ed25519.pub"),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.keys), "LANG": "C.UTF-8"},
        )
        assert done.returncode == 0 and "runs only fabrikito's routed say and flush" in done.stdout, done.stderr
        self.origin_state = self.keys / "origin-state"  # root's XDG_STATE_HOME in its sshd sessions: the gate's log
        entry = f"[127.0.0.1]:{self.port}"
        key = " ".join(self.host_pub.split()[:2])
        (self.keys / "known_hosts").write_text(f"{entry} {key}\n")
        (self.keys / "known_hosts.empty").write_text("")
        (self.keys / "known_hosts.changed").write_text(f"{entry} {' '.join(other_pub.split()[:2])}\n")
        (ssh / "known_hosts").write_text(f"{entry} {key}\n")
        (ssh / "config").write_text(
            f"Host fk-origin\n  HostName 127.0.0.1\n  Port {self.port}\n  User root\n"
            "  IdentityFile ~/.ssh/id_ed25519\n  IdentitiesOnly yes\n  UserKnownHostsFile ~/.ssh/known_hosts\n"
        )
        self.sshd_config = self.keys / "sshd_config"
        self.sshd_config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.keys / 'host_key'}\n"
            f"PidFile {self.keys / 'sshd.pid'}\nUsePAM no\nStrictModes no\n"
            f"AuthorizedKeysFile {self.keys}/authorized_keys.%u\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
            f"AllowUsers root {USER}\nMaxStartups 50\nMaxSessions 50\n"
            f"Match User root\n  SetEnv XDG_STATE_HOME={self.keys / 'origin-state'}\n"
        )
        self.start_sshd()

    def _origin_config(self) -> Path:
        def entry(name: str, known: str, key: str = "root_key") -> str:
            return (
                f"Host {name}\n  HostName 127.0.0.1\n  Port {self.port}\n  User {USER}\n"
                f"  IdentityFile {self.keys / key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {self.keys / known}\n"
            )

        path = self.keys / "ssh_config"
        path.write_text(
            entry("fk-remote", "known_hosts")
            + entry("fk-unknown", "known_hosts.empty")
            + entry("fk-changed", "known_hosts.changed")
            + entry("fk-refused", "known_hosts", "stranger_key")
        )
        return path

    def _user_files(self) -> None:
        """fabrikito for the user, from this checkout's wheel, and a HOME Claude Code can start in."""
        from fabrikito.offline import claude_setup

        dist = self.keys / "dist"
        _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(REPO)])
        _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(dist), *DEPENDENCIES])
        (wheel,) = dist.glob("fabrikito-*.whl")
        wheels = [wheel, *(w for w in dist.glob("*.whl") if w != wheel)]
        for each in wheels:
            shutil.copy(each, self.home / each.name)
        claude_setup.make_home(self.home)
        (self.home / "tmp").mkdir(mode=0o700)  # the seats' TMPDIR: their inbox sockets (/tmp/cc-socks is root's here)
        _run(["chown", "-R", f"{USER}:{USER}", str(self.home)])
        os.chmod(self.home, 0o700)
        venv = self.home / ".local" / "share" / "fabrikito-venv"
        self.as_user(["python3", "-m", "venv", str(venv)])
        self.as_user(
            [str(venv / "bin" / "pip"), "install", "--quiet", "--no-deps", "--no-index", *(w.name for w in wheels)]
        )
        self.as_user(["mkdir", "-p", str(self.home / ".local" / "bin")])
        self.as_user(["ln", "-s", str(venv / "bin" / "fabrikito"), str(self.home / ".local" / "bin" / "fabrikito")])

    def trust(self, directory: Path) -> None:
        """A working directory the user's Claude Code trusts (made, and the user's own)."""
        from fabrikito.offline import claude_setup

        directory.mkdir(parents=True, exist_ok=True)
        claude_setup.trust_dir(self.home, directory)
        _run(["chown", "-R", f"{USER}:{USER}", str(self.home / ".claude.json"), str(self.home / "work")])

    def runnable(self, program: Path) -> Path:
        """``program`` (Claude Code from this checkout's .tools/) as the second host's user can run it: itself
        when the user can, else a copy of its npm package (package.json beside it, so its release is read as
        for any install) in the user's home.  A clean clone under a private folder (/root) or a private
        install folder is not the user's to read, and a real second host has its own install anyway."""
        if self.as_user(["test", "-x", str(program)], check=False).returncode == 0:
            return program
        package = next((p for p in program.parents if (p / "package.json").is_file()), None)
        assert package is not None, f"{program} is not inside an npm package"
        copy = self.home / "tools" / package.name
        if not (copy / program.relative_to(package)).exists():
            copy.parent.mkdir(parents=True, exist_ok=True)
            _run(["cp", "-a", "--reflink=auto", str(package), str(copy)])
            _run(["chown", "-R", f"{USER}:{USER}", str(self.home / "tools")])
            _run(["chmod", "-R", "u+rwX,go+rX", str(self.home / "tools")])
        found = copy / program.relative_to(package)
        done = self.as_user(["test", "-x", str(found)], check=False)
        assert done.returncode == 0, f"the second host's user {USER} cannot run {found}"
        return found

    def as_user(self, argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {"HOME": str(self.home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "USER": USER}
        done = subprocess.run(
            ["/usr/sbin/runuser", "-u", USER, "--", *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=self.home,
            check=False,
            timeout=300,
        )
        if check:
            assert done.returncode == 0, f"{' '.join(argv)}: {done.stdout}{done.stderr}"
        return done

    # -- the sshd -------------------------------------------------------------------------

    def start_sshd(self) -> None:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        log = self.keys / "sshd.log"
        self.sshd = subprocess.Popen(
            [SSHD, "-D", "-f", str(self.sshd_config), "-E", str(log)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            assert self.sshd.poll() is None, f"sshd exited: {log.read_text() if log.exists() else ''}"
            time.sleep(0.05)
        raise AssertionError(f"sshd did not listen on port {self.port}")

    def stop_sshd(self) -> None:
        """Stop the sshd and every connection it serves (its per-connection sshd processes)."""
        import psutil

        if self.sshd is None:
            return
        try:
            listener = psutil.Process(self.sshd.pid)
            ours = [p for p in listener.children(recursive=True) if p.name().startswith("sshd")]
        except psutil.NoSuchProcess:
            ours = []
        self.sshd.send_signal(signal.SIGTERM)
        self.sshd.wait(10)
        self.sshd = None
        for proc in ours:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass

    def freeze_sshd(self, frozen: bool) -> None:
        """Stop (or continue) the sshd listener: connections are accepted by the kernel, never answered."""
        assert self.sshd is not None
        self.sshd.send_signal(signal.SIGSTOP if frozen else signal.SIGCONT)

    # -- the end ---------------------------------------------------------------------------

    def close(self, tmux_sockets: Sequence[str] = ()) -> None:
        from fabrikito.offline import seatkit

        for name in tmux_sockets:
            self.as_user(["tmux", "-L", name, "kill-server"], check=False)
        seatkit.stop_pids(seatkit.home_pids(self.home))
        self.stop_sshd()
        _end_user_processes()
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.keys, ignore_errors=True)
        os.close(self.lock)  # the next run's second host may start
