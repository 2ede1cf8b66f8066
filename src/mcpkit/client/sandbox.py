"""An optional sandbox for a spawned MCP server: Linux namespaces and resource limits.

environment.py keeps our secrets out of a child's environment; it still runs as our user, with
our files and our network. A :class:`Sandbox` runs the command under bubblewrap (``bwrap``, the
namespace tool Flatpak uses) instead:

- no network (a network namespace of its own, with only its own loopback) unless ``network``;
- the whole filesystem read-only, but for the ``writable`` paths and a private, empty ``/tmp``;
- the ``hide`` paths (and :data:`HIDDEN`: ssh keys, cloud and registry credentials) replaced by
  an empty directory or file;
- its own PID, IPC and UTS namespaces, no capabilities, a new session (no terminal to inject
  keystrokes into), killed when this process dies;
- per-process limits, set inside the sandbox by util-linux's ``prlimit``: ``cpu_seconds``
  (RLIMIT_CPU: SIGXCPU, then SIGKILL a second later), ``memory_mb`` (RLIMIT_DATA, the heap and
  private mappings: an allocation beyond it fails; RLIMIT_AS would stop node, whose engine
  reserves gigabytes of address space it never uses), ``processes`` (RLIMIT_NPROC, counted in the
  sandbox's own user namespace).

The kernel does not apply RLIMIT_NPROC to root, so under root the ``processes`` limit is a pids
cgroup of its own (``pids.max``), which root can create; without one, start-up says so rather
than run with a limit that does not hold. Nothing here falls back to running unsandboxed: a
missing ``bwrap`` or namespaces the kernel refuses are reported by :meth:`Sandbox.problem`, and a
spawn that fails is an error.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["HIDDEN", "Sandbox", "SandboxError"]

#: hidden in every sandbox, as ``hide`` adds to it: where keys and tokens live in a home
HIDDEN = ("~/.ssh", "~/.gnupg", "~/.aws", "~/.azure", "~/.config/gcloud", "~/.kube", "~/.docker",
          "~/.config/gh", "~/.netrc", "~/.git-credentials", "~/.npmrc", "~/.pypirc")
_KEYS = {"network", "writable", "hide", "cpu_seconds", "memory_mb", "processes"}
#: where a pids cgroup may be made for root: cgroup v1's pids hierarchy, or v2's root
_CGROUP_BASES = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")
_FIX_USERNS = ("enable unprivileged user namespaces (sysctl -w kernel.unprivileged_userns_clone=1; "
               "user.max_user_namespaces above 0; on Ubuntu 24.04 and later "
               "kernel.apparmor_restrict_unprivileged_userns=0), or run the upstream without a sandbox")
_counter = itertools.count(1)
_PREFIX = "mcpkit-sandbox-"
#: this process's pids cgroups whose processes were still exiting when they were to be removed
_leftover: set[str] = set()


class SandboxError(ValueError):
    """An unusable sandbox setting; the message says what to fix."""


def _path(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise SandboxError(f"{where}: a path is a non-empty string, got {value!r}")
    return os.path.realpath(os.path.expanduser(value))


def _limit(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SandboxError(f"{where} must be a positive whole number, got {value!r}")
    return value


@dataclass(frozen=True)
class Sandbox:
    """How one command is confined; see the module docstring. Paths are absolute (``~`` and
    symbolic links resolved) once built with :meth:`of`."""

    network: bool = False
    writable: tuple[str, ...] = ()
    hide: tuple[str, ...] = ()
    cpu_seconds: int | None = None
    memory_mb: int | None = None
    processes: int | None = None

    @classmethod
    def of(cls, value: Any, where: str = "sandbox") -> Sandbox | None:
        """A Sandbox from configuration: ``true`` (the defaults), ``false``/None (none), or an
        object with the keys above. Raises SandboxError naming ``where``."""
        if value is None or value is False:
            return None
        if value is True:
            value = {}
        if not isinstance(value, dict):
            raise SandboxError(f"{where} must be true, false or an object such as "
                               '{"writable": ["/srv"], "memory_mb": 512}')
        unknown = sorted(set(value) - _KEYS)
        if unknown:
            raise SandboxError(f"{where}: unknown key(s) {', '.join(unknown)}; use {', '.join(sorted(_KEYS))}")
        network = value.get("network", False)
        if not isinstance(network, bool):
            raise SandboxError(f"{where}.network must be true or false, got {network!r}")
        lists = {}
        for key in ("writable", "hide"):
            items = value.get(key) or []
            if not isinstance(items, list):
                raise SandboxError(f"{where}.{key} must be a list of paths")
            lists[key] = tuple(dict.fromkeys(_path(v, f"{where}.{key}") for v in items))
        for path in lists["writable"]:
            if not os.path.exists(path):
                raise SandboxError(f"{where}.writable: {path} does not exist; create it, or remove it from the list")
        both = sorted(set(lists["writable"]) & set(lists["hide"]))
        if both:
            raise SandboxError(f"{where}: {both[0]} is both writable and hidden; keep it in one list")
        return cls(network, lists["writable"], lists["hide"], _limit(value.get("cpu_seconds"), f"{where}.cpu_seconds"),
                   _limit(value.get("memory_mb"), f"{where}.memory_mb"),
                   _limit(value.get("processes"), f"{where}.processes"))

    def hiding(self, paths: Iterable[str]) -> Sandbox:
        """This sandbox with more paths hidden (a proxy's own config file, say)."""
        extra = [os.path.realpath(p) for p in paths if os.path.realpath(p) not in self.writable]
        return Sandbox(self.network, self.writable, tuple(dict.fromkeys([*self.hide, *extra])),
                       self.cpu_seconds, self.memory_mb, self.processes)

    # ------------------------------------------------------------------ start-up

    def problem(self) -> str | None:
        """Why this sandbox cannot run on this machine, with the fix; None when it can. Runs
        ``true`` under the same bwrap options, so what the kernel refuses shows here, once,
        rather than as an upstream that never starts."""
        if not sys.platform.startswith("linux"):
            return (f"the sandbox needs Linux namespaces (bubblewrap), which {sys.platform} does not have; "
                    "remove the sandbox, or run the proxy on Linux")
        for tool, package in (("bwrap", "bubblewrap"), ("prlimit", "util-linux")):
            if shutil.which(tool) is None:
                return f"the sandbox needs {tool!r}, which is not on PATH; install {package} (apt-get install {package})"
        if self.processes is not None and os.geteuid() == 0 and _cgroup_base() is None:
            return ("the sandbox's processes limit cannot hold under root: the kernel does not apply RLIMIT_NPROC "
                    "to root and no pids cgroup is writable here; run the proxy as another user, or drop processes")
        try:
            argv, cleanup = self.wrap(["true"], "/")  # the proxy's own directory may be hidden
        except OSError as exc:
            return f"the sandbox's processes limit cannot be set up: {exc}"
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap did not run: {exc}"
        finally:
            cleanup()
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
            return f"bubblewrap cannot create the sandbox here ({said}); {_FIX_USERNS}"
        return None

    # ------------------------------------------------------------------ spawning

    def wrap(self, argv: list[str], cwd: str | None = None) -> tuple[list[str], Callable[[], None]]:
        """The command line that runs ``argv`` in this sandbox, and what to call once it has
        exited (it removes the pids cgroup made for it, if any)."""
        # found on this process's PATH, as problem() looked for them: the command's own env may
        # give it another PATH
        out = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        if self.network:
            out.append("--share-net")
        out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        # outer paths first: a hidden ~/.ssh inside a writable ~ is mounted over it, and a
        # writable directory under /tmp is bound after /tmp's tmpfs
        mounts = [(p, "writable") for p in self.writable] + [(p, "hide") for p in (*_expanded(HIDDEN), *self.hide)]
        sealed = []
        for path, kind in sorted(mounts, key=lambda m: m[0].rstrip(os.sep).count(os.sep)):
            if kind == "writable":
                out += ["--bind", path, path]
            elif os.path.isdir(path):
                out += ["--tmpfs", path]
                sealed += ["--remount-ro", path]  # once every path inside it is mounted
            elif os.path.lexists(path):
                out += ["--ro-bind", "/dev/null", path]
            # a path that does not exist has nothing to hide, and cannot be made on a read-only /
        out += [*sealed, "--chdir", os.path.realpath(cwd or os.getcwd()), "--"]
        limits = []
        if self.cpu_seconds is not None:
            # SIGXCPU at the limit, SIGKILL a second later for a process that catches it
            limits.append(f"--cpu={self.cpu_seconds}:{self.cpu_seconds + 1}")
        if self.memory_mb is not None:
            limits.append(f"--data={self.memory_mb * 1024 * 1024}")
        if self.processes is not None:
            limits.append(f"--nproc={self.processes}")
        if limits:
            out += [shutil.which("prlimit") or "prlimit", *limits, "--"]
        out += argv
        cleanup: Callable[[], None] = _nothing
        if self.processes is not None and os.geteuid() == 0:
            group = _new_pids_cgroup(self.processes)  # raises rather than run without the limit
            # the shell joins the cgroup, then becomes bwrap: everything it starts is counted
            out = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', os.path.join(group, "cgroup.procs"), *out]
            cleanup = functools.partial(_remove_cgroup, group)
        return out, cleanup

    def describe_exit(self, returncode: int | None) -> str | None:
        """What a sandboxed server's exit code says about a limit (bwrap exits 128 + the signal
        that ended the server), for the error its callers see; None when it says nothing."""
        if returncode is None or returncode <= 128:
            return None
        try:
            sig = signal.Signals(returncode - 128)
        except ValueError:
            return None
        if sig is signal.SIGXCPU:
            return f"killed by SIGXCPU: it used up the sandbox's cpu_seconds ({self.cpu_seconds})"
        if sig is signal.SIGKILL and self.cpu_seconds is not None:
            return f"killed by SIGKILL: the sandbox's cpu_seconds ({self.cpu_seconds}), or the system"
        return f"killed by {sig.name}"


def _nothing() -> None:
    return None


def _expanded(paths: Iterable[str]) -> list[str]:
    return [os.path.realpath(os.path.expanduser(p)) for p in paths]


def _cgroup_base() -> str | None:
    """A cgroup directory under which root can make a pids cgroup, or None."""
    for base in _CGROUP_BASES:
        if os.path.isfile(os.path.join(base, "cgroup.procs")) and os.access(base, os.W_OK):
            if base.endswith("/pids") or "pids" in _read(os.path.join(base, "cgroup.subtree_control")).split():
                return base
    return None


def _new_pids_cgroup(limit: int) -> str:
    """A new pids cgroup allowing ``limit`` processes; OSError when none can be made. The empty
    ones left behind (ours, or of a process that has ended) are removed first."""
    base = _cgroup_base()
    if base is None:
        raise OSError("no writable pids cgroup for the sandbox's processes limit under root")
    for name in os.listdir(base):
        owner = name[len(_PREFIX):].partition("-")[0]
        if name.startswith(_PREFIX) and owner.isdigit() and int(owner) != os.getpid() and not _alive(int(owner)):
            _leftover.add(os.path.join(base, name))
    for group in list(_leftover):
        _remove_cgroup(group)
    group = os.path.join(base, f"{_PREFIX}{os.getpid()}-{next(_counter)}")
    os.mkdir(group)
    with open(os.path.join(group, "pids.max"), "w") as fh:
        fh.write(str(limit))
    return group


def _remove_cgroup(group: str) -> None:
    """Remove a pids cgroup once its processes are gone. The last of them (bwrap's own init in
    the PID namespace) may still be exiting as the server's exit is seen: such a cgroup is kept
    in ``_leftover`` and removed when the next one is made."""
    try:
        os.rmdir(group)
        _leftover.discard(group)
    except FileNotFoundError:
        _leftover.discard(group)
    except OSError:
        _leftover.add(group)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""
