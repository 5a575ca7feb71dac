"""Per-file accounting: one cgroup per file, so limits hold for the file, not per process.

Rlimits count one process at a time: ten busy processes each stay under
``RLIMIT_CPU``, a ``memfd`` or a SysV segment is in no process's address
space, and a scratch file is not memory at all. A cgroup counts everything
the file's processes do, together: CPU time of all of them, memory including
shared, ``memfd``, tmpfs and page-cache pages they create, and how many
processes exist. So each file's child joins a cgroup of its own before it
reads a byte, the zygote sets the file's limits on it, watches its CPU total,
and removes it when the file is done.

Where it works: cgroup v1 with the ``memory``, ``pids`` and ``cpuacct``
controllers, or v2 with ``memory`` and ``pids`` enabled for the process's own
cgroup's children, and in either case a cgroup the pool may write to (root,
or one the host delegated to the pool's user, as systemd does with
``Delegate=yes``). Elsewhere `WorkerCgroups.create` says why not, the
``cgroup`` layer is reported missing, and the rlimits remain the only bound.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

__all__ = ["FileCgroup", "WorkerCgroups", "remove_empty", "sweep_stale"]

_V1 = ("memory", "pids", "cpuacct")
_WORKER_PREFIX = "capsa-worker-"


def _mounts() -> tuple[dict[str, str], str | None]:
    """Mount points of the v1 controllers named in `_V1`, and of the v2 hierarchy."""
    v1: dict[str, str] = {}
    v2: str | None = None
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            fields = line.split()
            dash = fields.index("-")
            fstype, options = fields[dash + 1], fields[dash + 3].split(",")
            point = fields[4]
            if fstype == "cgroup2" and v2 is None:
                v2 = point
            elif fstype == "cgroup":
                for controller in _V1:
                    if controller in options and controller not in v1:
                        v1[controller] = point
    return v1, v2


def _own_paths() -> dict[str, str]:
    """This process's cgroup per v1 controller, and under ``""`` its v2 cgroup."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as cgroups:
        for line in cgroups:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


def _write(path: str, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


@dataclass(frozen=True)
class FileCgroup:
    """One file's cgroup: a directory per controller (v1) or one directory (v2)."""

    dirs: tuple[str, ...]
    version: int

    def join(self) -> None:
        """Move the calling process into this cgroup (called by the file's child)."""
        for directory in self.dirs:
            _write(os.path.join(directory, "cgroup.procs"), "0")

    def limit(self, *, memory_bytes: int, processes: int) -> None:
        """Allow `memory_bytes` more than the child holds now, and `processes` at once."""
        memory = self._dir("memory")
        if self.version == 1:
            usage = int(_read(os.path.join(memory, "memory.usage_in_bytes")))
            _write(os.path.join(memory, "memory.limit_in_bytes"), str(usage + memory_bytes))
            swap = os.path.join(memory, "memory.memsw.limit_in_bytes")
            if os.path.exists(swap):
                _write(swap, str(usage + memory_bytes))
        else:
            usage = int(_read(os.path.join(memory, "memory.current")))
            _write(os.path.join(memory, "memory.max"), str(usage + memory_bytes))
            with contextlib.suppress(OSError):
                _write(os.path.join(memory, "memory.swap.max"), "0")
        _write(os.path.join(self._dir("pids"), "pids.max"), str(processes))

    def cpu_ns(self) -> int:
        """CPU time used by every process of the file so far, in nanoseconds."""
        if self.version == 1:
            return int(_read(os.path.join(self._dir("cpuacct"), "cpuacct.usage")))
        for line in _read(os.path.join(self.dirs[0], "cpu.stat")).splitlines():
            if line.startswith("usage_usec "):
                return int(line.split()[1]) * 1000
        return 0

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a process of the file for going past its memory."""
        memory = self._dir("memory")
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            for line in _read(os.path.join(memory, name)).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value) > 0:
                    return True
        except (OSError, ValueError):
            return False
        return False

    def remove(self) -> bool:
        """Remove the cgroup (once its processes are gone); False if one is still busy."""
        removed = True
        for directory in self.dirs:
            try:
                os.rmdir(directory)
            except FileNotFoundError:
                pass
            except OSError:
                removed = False
        return removed

    def _dir(self, controller: str) -> str:
        if self.version == 2:
            return self.dirs[0]
        return self.dirs[_V1.index(controller)]


@dataclass(frozen=True)
class WorkerCgroups:
    """A worker's own cgroup directories, under which each file gets one of its own."""

    roots: tuple[str, ...]
    version: int

    @classmethod
    def create(cls, name: str) -> tuple[WorkerCgroups | None, str]:
        """Make `name` under this process's cgroups; return it and the layer's state.

        Returns ``(None, "unavailable: why")`` when the host offers no
        writable cgroup with the controllers needed.
        """
        try:
            v1, v2 = _mounts()
            own = _own_paths()
        except (OSError, ValueError, IndexError) as exc:
            return None, f"unavailable: cgroups could not be read ({exc})"
        if all(controller in v1 for controller in _V1):
            roots = tuple(os.path.join(v1[c], own.get(c, "/").lstrip("/"), name) for c in _V1)
            version = 1
        elif v2 is not None:
            parent = os.path.join(v2, own.get("", "/").lstrip("/"))
            try:
                enabled = _read(os.path.join(parent, "cgroup.subtree_control")).split()
            except OSError as exc:
                return None, f"unavailable: {exc.strerror}"
            if not {"memory", "pids"} <= set(enabled):
                return None, ("unavailable: cgroup v2 without the memory and pids controllers "
                              "delegated to this process's children")
            roots = (os.path.join(parent, name),)
            version = 2
        else:
            return None, "unavailable: no cgroup v2 hierarchy and no v1 memory, pids and cpuacct"
        made: list[str] = []
        try:
            for root in roots:
                _make_own(root)
                made.append(root)
        except OSError as exc:
            for root in made:
                with contextlib.suppress(OSError):
                    os.rmdir(root)
            return None, (f"unavailable: cannot create a cgroup ({exc.strerror}); the host "
                          "delegates none to this user")
        controllers = "memory, pids, cpuacct" if version == 1 else "memory, pids, cpu"
        return cls(roots, version), f"active: cgroup v{version} per file ({controllers})"

    @classmethod
    def name_for(cls, host_pid: int) -> str:
        """The directory a worker whose pid (as its application sees it) is `host_pid` makes."""
        return f"{_WORKER_PREFIX}{host_pid}"

    def places(self) -> tuple[str, ...]:
        """Where a worker's minimal root shows these directories: each hierarchy's usual
        mount point, with neither the application's own cgroup path nor its pid."""
        if self.version == 1:
            return tuple(f"/sys/fs/cgroup/{controller}" for controller in _V1)
        return ("/sys/fs/cgroup",)

    def relocated(self) -> WorkerCgroups:
        """These cgroups as the worker finds them once inside its minimal root."""
        return WorkerCgroups(self.places(), self.version)

    def file(self, number: int) -> FileCgroup:
        """Make the cgroup for file `number` (before its child is forked)."""
        dirs = tuple(os.path.join(root, f"file-{number}") for root in self.roots)
        for directory in dirs:
            os.mkdir(directory, 0o755)
        return FileCgroup(dirs, self.version)

    def remove(self) -> None:
        """Remove every file's cgroup that is empty, then the worker's own."""
        for root in self.roots:
            remove_empty(root)


def _make_own(root: str) -> None:
    """Make a worker's cgroup directory, first removing a stale one of the same name.

    The name holds the worker's pid, and pids are reused (32,768 of them by
    default): a worker killed before it could remove its cgroup leaves one that
    a later process with the same pid finds in its way. No live worker can own
    it, since the pid is this process's, so it is removed if empty and busy
    ones (a process the dead worker left inside) keep the `mkdir` refused.
    """
    try:
        os.mkdir(root, 0o755)
    except FileExistsError:
        remove_empty(root)
        os.mkdir(root, 0o755)


def remove_empty(root: str) -> bool:
    """Remove `root` and every cgroup below it, deepest first; False if one is still busy.

    Only ``rmdir``: the kernel refuses to remove a cgroup that holds a process
    or a child cgroup, so this can never take a cgroup from under a live file.
    """
    try:
        entries = [e.path for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return True
    except OSError:
        return False
    removed = all([remove_empty(entry) for entry in entries])
    try:
        os.rmdir(root)
    except FileNotFoundError:
        return removed
    except OSError:
        return False
    return removed


def sweep_stale(parents: set[str]) -> int:
    """Remove the cgroups of workers that died without removing their own; how many went.

    A worker killed outright (its application killed first, say) cannot clean
    up after itself, and its process is gone when the next worker starts
    beside it. A worker's cgroup is named for its pid as the application sees
    it, so this, run in the application, removes those whose process no
    longer exists (or is no longer a capsa worker) and are empty.
    """
    swept = 0
    for parent in parents:
        try:
            names = [e.name for e in os.scandir(parent) if e.is_dir(follow_symlinks=False)
                     and e.name.startswith(_WORKER_PREFIX)]
        except OSError:
            continue
        for name in names:
            pid = name.removeprefix(_WORKER_PREFIX)
            if not pid.isdigit() or _is_worker(int(pid)):
                continue
            if remove_empty(os.path.join(parent, name)):
                swept += 1
    return swept


def _is_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return b"capsa.guard.sandbox.zygote" in cmdline.read()
    except OSError:
        return False
