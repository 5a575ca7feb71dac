"""Namespaces: the worker's once, and each file's own.

The **worker** (the zygote) enters, once, a user namespace (when not root),
a mount namespace, a network namespace with only a down loopback, a UTS
namespace named `HOST_NAME` (so ``uname`` and ``/proc/sys/kernel/hostname``
do not tell a parser which machine, pod or tenant it runs on), and a PID
namespace of which it is the init. When it runs as root it also covers
directories an unprivileged uid cannot traverse (``/root`` holding a pyenv
Python, say) with a tmpfs into which just the paths the parsers need are
bound back. Last, once its parsers are imported, it pivots into a **minimal
root** (`enter_minimal_root`): a tmpfs holding only the paths parsers read,
bound read-only, a ``/proc``, its scratch directory and its cgroup, so that
nothing else of the host exists from a child's view, not even for ``stat``.

Each **file** then gets namespaces of its own, so nothing it does outlives
it or reaches the next file:

- a PID namespace whose init is the file's child (`new_pid_namespace` in the
  zygote before each fork): when the child ends the kernel kills every
  process the file started, whatever its process group or session;
- an IPC namespace: System V segments and queues, and POSIX message queues,
  die with the file;
- a mount namespace with a fresh ``/proc`` (only the file's own processes),
  every inherited mount made read-only (`read_only_root`: no write, ``chmod``,
  ``chown``, ``utimes`` or ``setxattr`` outside scratch, whatever file
  permissions say), and a tmpfs scratch bounded in bytes and inodes
  (`mount_scratch`) that disappears with the namespace: teardown is the
  kernel freeing a mount, never a recursive delete that one crafted tree
  could break;
- a cgroup namespace, so the file sees its own cgroup as the root.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
from collections.abc import Iterable, Mapping

__all__ = ["HOST_NAME", "enter_file_namespaces", "enter_minimal_root", "enter_worker_namespaces",
           "host_pid", "libc", "limit_ipc", "make_reachable", "mount_scratch",
           "new_pid_namespace", "read_only_root"]

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_MNT_DETACH = 2
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine, -1)
_AT_FDCWD = -100
_AT_RECURSIVE = 0x8000
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID = 0x1, 0x2
_SYS_MOUNT_SETATTR = 442  # the same number on x86-64 and AArch64
HOST_NAME = b"capsa"
"""The host name (and, as ``(none)``, the NIS domain) a worker's parsers see."""


def libc() -> ctypes.CDLL | None:
    """The C library, with errno, or None where it cannot be loaded."""
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _error() -> str:
    return os.strerror(ctypes.get_errno())


# ---------------------------------------------------------------------- the worker


def enter_worker_namespaces(lib: ctypes.CDLL, keep_reachable: Iterable[str]) -> dict[str, str]:
    """Move the zygote into its namespaces; return each one's state.

    Called once, before the extractor is loaded. With a new PID namespace the
    calling process forks: the parent waits and exits with the child's
    status, and the child (the namespace's init) returns and goes on serving.
    """
    state: dict[str, str] = {}
    as_root = os.geteuid() == 0
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS
    uid, gid = os.geteuid(), os.getegid()
    if not as_root:
        if lib.unshare(CLONE_NEWUSER | flags) != 0:
            error = _error()
            return {name: f"unavailable: {error}" for name in
                    ("user_namespace", "mount_namespace", "pid_namespace", "ipc_namespace")}
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        state["user_namespace"] = "active"
    elif lib.unshare(flags) != 0:
        error = _error()
        return {name: f"unavailable: {error}" for name in
                ("mount_namespace", "pid_namespace", "ipc_namespace")}
    else:
        state["user_namespace"] = "not needed: the pool runs as root"
    state["network_namespace"] = _rename_host(lib)
    _become_pid_init(lib)
    state["host_pid"] = str(host_pid())
    if lib.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        state["mount_namespace"] = f"unavailable: {_error()}"
        return state
    state["mount_namespace"] = "worker"
    if lib.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) != 0:
        state["pid_namespace"] = f"unavailable: /proc not remounted ({_error()})"
        return state
    state["pid_namespace"] = "worker"
    state["ipc_namespace"] = "worker"
    if as_root:
        hidden = make_reachable(lib, keep_reachable)
        if hidden:
            state["hidden"] = ", ".join(hidden)
    return state


def _rename_host(lib: ctypes.CDLL) -> str:
    """Give the new UTS namespace `HOST_NAME`; the network layer's state.

    The host's name is often the tenant's or the pod's; a parser has no use
    for it, and a crafted file should not learn it.
    """
    domain = b"(none)"
    if lib.sethostname(HOST_NAME, len(HOST_NAME)) != 0 or \
            lib.setdomainname(domain, len(domain)) != 0:
        return f"active, but the host's name still shows ({_error()})"
    return "active"


def host_pid() -> int:
    """This process's pid as the application sees it (read before ``/proc`` is remounted)."""
    with contextlib.suppress(OSError, ValueError, IndexError), \
            open("/proc/self/status") as status:
        for line in status:
            if line.startswith("NSpid:"):
                return int(line.split()[1])
    return os.getpid()


def _become_pid_init(lib: ctypes.CDLL) -> None:
    """Fork into the new PID namespace; the parent only waits and relays the exit.

    The child dies with its parent (``PR_SET_PDEATHSIG``), so the pair acts
    as one worker: killing either ends both.
    """
    pid = os.fork()
    if pid == 0:
        lib.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
        return
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except InterruptedError:
            continue
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def make_reachable(lib: ctypes.CDLL, paths: Iterable[str]) -> list[str]:
    """Let an unprivileged uid reach `paths` by covering untraversable parents with a tmpfs.

    Only in the calling process's private mount namespace: a directory such
    as ``/root`` (mode 0700) becomes an empty tmpfs into which exactly the
    entries on the way to `paths` are bind-mounted back; everything else in
    it disappears from the sandbox's view.
    """
    blocked: dict[str, set[str]] = {}
    for path in paths:
        parts = os.path.realpath(path).strip("/").split("/")
        current = "/"
        for depth, name in enumerate(parts[:-1]):
            current = os.path.join(current, name)
            try:
                traversable = bool(os.stat(current).st_mode & stat.S_IXOTH)
            except OSError:
                break
            if not traversable:
                blocked.setdefault(current, set()).add(parts[depth + 1])
                break
    hidden: list[str] = []
    for directory, entries in sorted(blocked.items()):
        fds = {e: os.open(os.path.join(directory, e), os.O_PATH) for e in entries}
        try:
            if lib.mount(b"tmpfs", directory.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                         b"mode=0755,size=64k") != 0:
                continue
            hidden.append(directory)
            for entry, fd in fds.items():
                target = os.path.join(directory, entry)
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    os.mkdir(target)
                else:
                    open(target, "w").close()
                lib.mount(f"/proc/self/fd/{fd}".encode(), target.encode(), None,
                          _MS_BIND | _MS_REC, None)
        finally:
            for fd in fds.values():
                os.close(fd)
    return hidden


# ---------------------------------------------------------------- the minimal root


def enter_minimal_root(lib: ctypes.CDLL, *, read: Iterable[str], writable: Iterable[str],
                       places: Mapping[str, str] | None = None) -> str:
    """Replace the zygote's root with one that holds only `read` (read-only) and `writable`.

    Landlock decides what a child may open, but not what it may ``stat``,
    ``access`` or ``readlink``: on the host's root a parser still learns
    whether any path its uid can traverse exists, with its size, times and
    owner, and ``/proc/self/mountinfo`` lists the host's mounts. So the
    zygote, once, in its own mount namespace, builds a small tmpfs holding
    the paths parsers read (bound read-only, recursively; a symbolic link on
    the way, such as ``/lib`` to ``usr/lib``, recreated as one), the paths
    the zygote itself writes (its scratch directory, which each file's tmpfs
    covers, and its cgroup directories), a ``/proc``, and the directories on
    the way to them; then ``pivot_root`` and detach the old root. Each file's
    mount namespace is a copy of this one, so a file pays nothing for it, and
    nothing else of the host exists from a child's view.

    The first `writable` path holds the tmpfs while it is built (it is
    covered only until the pivot). A writable path found in `places` is bound
    at the path it names there instead of its own: the worker's cgroup
    directories, whose host paths name the application's own cgroup (a
    service or a pod) and would show in every child's ``mountinfo``.

    Returns the layer's state; on a failure before the pivot everything is
    undone and the old root stays.
    """
    read, writable = list(read), list(writable)
    if _SYS_PIVOT_ROOT < 0:
        return f"unavailable: no pivot_root number for {os.uname().machine}"
    if not writable:
        return "unavailable: no directory to build the root in"
    base = writable[0]
    sources: dict[str, int] = {}
    try:
        for path in writable:
            sources[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        for fd in sources.values():
            os.close(fd)
        return f"unavailable: {exc.strerror}: {exc.filename}"
    try:
        if lib.mount(b"tmpfs", base.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                     b"mode=0755,size=1m,nr_inodes=4096") != 0:
            return f"unavailable: tmpfs: {_error()}"
        try:
            count = _furnish(lib, base, read, sources, places or {})
        except OSError as exc:
            lib.umount2(base.encode(), _MNT_DETACH)
            return f"unavailable: {exc.strerror or exc}"
        os.chdir(base)
        if lib.syscall(_SYS_PIVOT_ROOT, b".", b".") != 0:
            error = _error()
            os.chdir("/")
            lib.umount2(base.encode(), _MNT_DETACH)
            return f"unavailable: pivot_root: {error}"
    finally:
        for fd in sources.values():
            os.close(fd)
    # The old root is stacked on the new one at "/": detach it, and nothing of it is left.
    if lib.umount2(b".", _MNT_DETACH) != 0:
        raise OSError(ctypes.get_errno(), f"the old root could not be detached: {_error()}")
    os.chdir("/")
    attr = _MountAttr(_MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID, 0, 0, 0)
    lib.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, b"/", 0, ctypes.byref(attr), ctypes.sizeof(attr))
    return f"active: pivot_root into {count} read-only binds, /proc and scratch"


def _furnish(lib: ctypes.CDLL, new: str, read: list[str], writable: dict[str, int],
             places: Mapping[str, str]) -> int:
    """Bind `read` (read-only) and `writable` (at its `places`) into the tmpfs at `new`.

    Returns how many read binds were made.

    Raises OSError when a bind the sandbox needs cannot be made.
    """
    binds = _outermost(os.path.realpath(p) for p in read if os.path.lexists(p))
    binds = [p for p in binds if os.path.exists(p) and p != "/"]
    for path in read:
        _links(new, path, binds)
    for path in binds:
        target = _point(new, path, os.path.isdir(path), binds)
        if lib.mount(path.encode(), target.encode(), None, _MS_BIND | _MS_REC, None) != 0:
            raise OSError(ctypes.get_errno(), f"bind {path}: {_error()}")
        attr = _MountAttr(_MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID, 0, 0, 0)
        if lib.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, target.encode(), _AT_RECURSIVE,
                       ctypes.byref(attr), ctypes.sizeof(attr)) != 0:
            raise OSError(ctypes.get_errno(), f"read-only {path}: {_error()}")
    for path, fd in writable.items():
        # not recursive: the first one is covered by the tmpfs being built, which a
        # recursive bind would copy into itself
        target = _point(new, places.get(path, path), True, binds)
        if lib.mount(f"/proc/self/fd/{fd}".encode(), target.encode(), None, _MS_BIND,
                     None) != 0:
            raise OSError(ctypes.get_errno(), f"bind {path}: {_error()}")
    target = _point(new, "/proc", True, binds)
    if lib.mount(b"proc", target.encode(), b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                 None) != 0:
        raise OSError(ctypes.get_errno(), f"proc: {_error()}")
    return len(binds)


def _outermost(paths: Iterable[str]) -> list[str]:
    """`paths` without those beneath another one (a bind or a Landlock rule covers its subtree)."""
    kept: list[str] = []
    for path in sorted(paths):
        if not _beneath(path, kept):
            kept.append(path)
    return kept


def _beneath(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _point(new: str, path: str, directory: bool, binds: list[str]) -> str:
    """Make (in the new root) the mount point for `path` and the directories on its way.

    Nothing is created beneath a bind already made (that would write to the
    host): there the path exists already, as the host's.
    """
    current = new
    parts = path.strip("/").split("/")
    for depth, name in enumerate(parts):
        current = os.path.join(current, name)
        inside = "/" + "/".join(parts[:depth + 1])
        if _beneath(inside, [b for b in binds if b != path]) or os.path.lexists(current):
            continue
        if depth < len(parts) - 1 or directory:
            os.mkdir(current, 0o755)
            os.chmod(current, 0o755)
        else:
            os.close(os.open(current, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    return current


def _links(new: str, path: str, binds: list[str], depth: int = 0) -> None:
    """Recreate in the new root the symbolic links on the way to `path` (``/lib``)."""
    if depth > 40:
        return
    parts = path.strip("/").split("/")
    for index in range(len(parts)):
        prefix = "/" + "/".join(parts[:index + 1])
        if _beneath(prefix, binds):
            return
        if not os.path.islink(prefix):
            continue
        target = os.readlink(prefix)
        _point(new, os.path.dirname(prefix), True, binds)
        link = os.path.join(new, prefix.lstrip("/"))
        if not os.path.lexists(link):
            os.symlink(target, link)
        rest = "/".join(parts[index + 1:])
        onward = os.path.normpath(os.path.join(os.path.dirname(prefix), target, rest))
        _links(new, onward, binds, depth + 1)
        return


# ------------------------------------------------------------------------ each file


def new_pid_namespace(lib: ctypes.CDLL, own: int) -> str | None:
    """Make the zygote's next `fork` the init of a fresh PID namespace.

    `own` is a descriptor of the zygote's own PID namespace: ``setns`` back
    to it first, because the kernel lets a process ``unshare`` a PID
    namespace only while its children would still be born into its own.
    Returns None on success, else the kernel's reason.
    """
    if lib.setns(own, CLONE_NEWPID) != 0:
        return f"setns: {_error()}"
    if lib.unshare(CLONE_NEWPID) != 0:
        return f"unshare: {_error()}"
    return None


def enter_file_namespaces(lib: ctypes.CDLL) -> dict[str, str]:
    """In the file's child (its PID namespace's init): own mount, IPC and cgroup namespaces.

    Mounts a ``/proc`` that lists only the file's own processes. Returns
    each layer's state; a layer the kernel refuses is ``unavailable: why``.
    """
    state: dict[str, str] = {}
    if lib.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWCGROUP) != 0 and \
            lib.unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0:
        error = f"unavailable: {_error()}"
        return {"mount_namespace": error, "ipc_namespace": error}
    state["ipc_namespace"] = "active: one per file"
    if lib.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        state["mount_namespace"] = f"unavailable: {_error()}"
        return state
    state["mount_namespace"] = "active: one per file"
    if os.getpid() != 1:
        state["pid_namespace"] = "unavailable: the child is not its namespace's init"
    elif lib.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) != 0:
        state["pid_namespace"] = f"partial: /proc not remounted ({_error()})"
    else:
        state["pid_namespace"] = "active: one per file, the child its init"
    return state


def limit_ipc(*, memory_bytes: int) -> None:
    """Cap System V IPC in the file's own IPC namespace (best effort, before `read_only_root`).

    A segment created but never touched holds no memory, so these caps matter
    only where no cgroup counts the pages; where one does, they are a second bound.
    """
    page = os.sysconf("SC_PAGE_SIZE")
    for name, value in (("shmmax", memory_bytes), ("shmall", max(memory_bytes // page, 1)),
                        ("shmmni", 16), ("msgmni", 16), ("msgmnb", 65536)):
        with contextlib.suppress(OSError):
            _write(f"/proc/sys/kernel/{name}", str(value))


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def read_only_root(lib: ctypes.CDLL, *, keep_writable: str) -> str:
    """Make every mount in the file's namespace read-only and set-uid-free, but scratch.

    One ``mount_setattr`` over the whole tree (Linux 5.12+), then the
    scratch mount (`keep_writable`) is made writable again.
    """
    attr = _MountAttr(_MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID, 0, 0, 0)
    if lib.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, b"/", _AT_RECURSIVE, ctypes.byref(attr),
                   ctypes.sizeof(attr)) != 0:
        return f"unavailable: mount_setattr: {_error()}"
    writable = _MountAttr(0, _MOUNT_ATTR_RDONLY, 0, 0)
    if lib.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, keep_writable.encode(), 0,
                   ctypes.byref(writable), ctypes.sizeof(writable)) != 0:
        raise OSError(ctypes.get_errno(), f"scratch could not be made writable: {_error()}")
    return "active: every mount but scratch read-only"


def mount_scratch(lib: ctypes.CDLL, path: str, *, size: int, inodes: int, uid: int) -> str:
    """Mount the file's scratch: a tmpfs of `size` bytes and `inodes` entries, owned by `uid`."""
    options = f"size={size},nr_inodes={inodes},mode=0700,uid={uid},gid={uid}"
    if lib.mount(b"tmpfs", path.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                 options.encode()) != 0:
        return f"unavailable: {_error()}"
    return "active: a tmpfs per file, of its max_file_write_bytes and max_scratch_files"
