"""The parse child's sandbox: assume the parser is hostile code, and fence it in layers.

A crafted file that corrupts memory in libxml2, Pillow, leptonica or any
other C extension runs the attacker's code inside the parse child. Every
layer below is one the kernel enforces, so it holds against raw syscalls,
not only against Python; each is optional where the OS lacks it, and
`SandboxReport` says which ones a worker got.

Zygote (once per worker, before any file):

- **namespaces**: user (when not root), mount, PID, IPC and network. The
  zygote re-forks into the new PID namespace as its init, so a parse child
  can name no process outside it, and mounts a fresh ``/proc`` that lists
  only the namespace's own processes. When the pool runs as root, directories
  an unprivileged user cannot traverse (``/root`` holding a pyenv Python, say)
  are covered, in the private mount namespace only, by an empty tmpfs into
  which just the needed paths are bind-mounted back.

Parse child (once per file, after `fork`, before it reads a byte):

- **unprivileged uid**: under a root pool the child takes a uid of its
  worker's own (`worker_uid`: a high number no account uses, so the child
  owns nothing on the host and shares its process count with no one) with no
  supplementary groups; otherwise it keeps the user's uid and drops every
  capability the user namespace gave it;
- **no_new_privs**: no set-uid binary can give privileges back;
- **process limit**: ``RLIMIT_NPROC`` where it counts only the sandbox's own
  processes (a dedicated uid or a private user namespace), so a fork bomb stops;
- **Landlock**: read and execute only the interpreter, its packages and the
  system libraries and data parsers use; write only the file's scratch
  directory; no TCP; signals and abstract sockets only inside the child's own
  domain; no ptrace of, or ``/proc`` reads into, any process outside it;
- **seccomp**: the syscalls in `capsa.guard._seccomp.DENIED`, sockets other
  than Unix socketpairs, and namespace flags on ``clone``.

``capsa doctor`` prints this report for the machine it runs on.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

from capsa.guard import _landlock, _seccomp

__all__ = ["LAYERS", "LayerStatus", "SandboxMode", "SandboxPolicy", "SandboxReport"]

SandboxMode = Literal["best-effort", "strict", "off"]

NOBODY = 65534
WORKER_UID_BASE = 0x70000000
"""Root pools run each worker's children as ``WORKER_UID_BASE + the worker's pid``:
far above any account, subordinate-uid range or systemd dynamic user, and
unique to the worker, so ``RLIMIT_NPROC`` counts that worker's processes only."""
CHILD_PROCESSES = 128
"""``RLIMIT_NPROC`` for a parse child: room for Tesseract's and pandoc's threads."""


def worker_uid(host_pid: int) -> int:
    """The uid (and gid) a root pool's worker runs its parse children as.

    Examples:
        >>> worker_uid(1234) - WORKER_UID_BASE
        1234
    """
    return WORKER_UID_BASE + host_pid % (1 << 22)

LAYERS: dict[str, tuple[str, str]] = {
    "user_namespace": (
        "lets an unprivileged pool build the other namespaces",
        "a pool that is not root gets no mount, PID or IPC namespace"),
    "mount_namespace": (
        "a private /proc and private mounts; directories the child needs are bound, "
        "the rest of an unreadable parent (such as /root) is hidden",
        "the child sees the host's /proc and mount table"),
    "pid_namespace": (
        "the child can name no process outside the worker: not the application, "
        "not other workers",
        "other processes are visible by pid (Landlock and seccomp still stop "
        "signals, ptrace and /proc reads)"),
    "ipc_namespace": (
        "no System V shared memory or message queues of other processes",
        "System V IPC objects of the same user are reachable"),
    "network_namespace": (
        "no network interface but a down loopback",
        "network reachable if a socket is ever allowed (seccomp still refuses them)"),
    "unprivileged_uid": (
        "root pools run parsers under a uid of their own that owns nothing; file "
        "permissions protect the host's secrets",
        "a parser running as root is bounded only by the other layers"),
    "capabilities_dropped": (
        "the child holds no capability in any namespace",
        "capabilities in the user namespace remain"),
    "no_new_privs": (
        "no set-uid or file-capability binary gives privileges back",
        "a set-uid binary the child can execute could raise privileges"),
    "process_limit": (
        "RLIMIT_NPROC stops a fork bomb",
        "a fork bomb runs until the wall clock kills its process group"),
    "landlock": (
        "reads limited to the interpreter, packages and system data; writes to the "
        "file's scratch directory; no TCP; signals, ptrace and /proc only inside the child",
        "file permissions alone decide what the child reads and writes"),
    "seccomp": (
        "ptrace, process_vm_*, mount, namespaces, keyrings, bpf, perf, sockets and "
        "connect/bind/listen are refused by the kernel",
        "those syscalls are available to the parser"),
}
"""Every layer: what it stops, and what its absence leaves open."""


class LayerStatus(BaseModel):
    """One layer's state in a worker."""

    model_config = ConfigDict(frozen=True)

    active: bool
    detail: str = ""


class SandboxReport(BaseModel):
    """Which isolation layers a worker's parse children run under.

    Examples:
        >>> report = SandboxReport(layers={"seccomp": LayerStatus(active=True)})
        >>> report.active(), len(report.missing())
        (['seccomp'], 10)
    """

    model_config = ConfigDict(frozen=True)

    layers: dict[str, LayerStatus]

    def active(self) -> list[str]:
        """Names of the layers in force, in `LAYERS` order."""
        return [name for name in LAYERS if self.is_active(name)]

    def missing(self) -> list[str]:
        """Names of the layers not in force, in `LAYERS` order."""
        return [name for name in LAYERS if not self.is_active(name)]

    def is_active(self, name: str) -> bool:
        """Whether layer `name` is in force."""
        status = self.layers.get(name)
        return status is not None and status.active


@dataclass
class SandboxPolicy:
    """What the zygote set up, and what each child applies to itself."""

    read_roots: list[str] = field(default_factory=list)
    namespaces: dict[str, str] = field(default_factory=dict)
    as_root: bool = False
    landlock_abi: int = 0
    seccomp_program: bytes | None = None
    seccomp_error: str = ""
    seccomp_installed: bool = False
    child_uid: int = NOBODY
    mode: SandboxMode = "best-effort"


_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_CAP_HEADER_V3 = 0x20080522
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_SYSTEM_READ = (
    "/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache",
    "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/fonts",
    "/etc/mime.types", "/etc/magic", "/etc/ImageMagick-6", "/dev/null", "/dev/zero",
    "/dev/urandom", "/dev/random", "/sys/devices/system/cpu",
)


def libc() -> ctypes.CDLL | None:
    """The C library, with errno, or None where it cannot be loaded."""
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def interpreter_roots() -> list[str]:
    """Directories the interpreter and its installed packages live in.

    Taken from the worker's own `sys.path` (``python -I``: no current
    directory, no ``PYTHONPATH``), so the application's working directory is
    never among them; an editable install's source directory is, because a
    ``.pth`` file put it there.
    """
    roots = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))}
    roots.update(p for p in sysconfig.get_paths().values() if p)
    roots.update(p for p in sys.path if p)
    resolved = {os.path.realpath(p) for p in roots if os.path.exists(p)}
    resolved |= {p for p in roots if os.path.exists(p)}
    return _outermost(resolved)


def _outermost(paths: Iterable[str]) -> list[str]:
    """`paths` without those beneath another one (a Landlock rule covers its subtree)."""
    kept: list[str] = []
    for path in sorted(paths):
        if not any(path == root or path.startswith(root.rstrip("/") + "/") for root in kept):
            kept.append(path)
    return kept


def data_roots() -> list[str]:
    """System libraries and data parsers read (tessdata included)."""
    roots = list(_SYSTEM_READ)
    tessdata = os.environ.get("TESSDATA_PREFIX")
    if tessdata:
        roots.append(tessdata)
    return _outermost(p for p in roots if os.path.exists(p))


def enter_namespaces(lib: ctypes.CDLL, keep_reachable: Iterable[str]) -> dict[str, str]:
    """Move the zygote into new namespaces; return each one's state.

    Called once, before the extractor is loaded. With a new PID namespace the
    calling process forks: the parent waits and exits with the child's
    status, and the child (the namespace's init) returns and goes on serving.
    """
    state: dict[str, str] = {}
    as_root = os.geteuid() == 0
    flags = _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC | _CLONE_NEWNET
    uid, gid = os.geteuid(), os.getegid()
    if not as_root:
        if lib.unshare(_CLONE_NEWUSER | flags) != 0:
            error = os.strerror(ctypes.get_errno())
            return {name: f"unavailable: {error}" for name in
                    ("user_namespace", "mount_namespace", "pid_namespace", "ipc_namespace")}
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        state["user_namespace"] = "active"
    elif lib.unshare(flags) != 0:
        error = os.strerror(ctypes.get_errno())
        return {name: f"unavailable: {error}" for name in
                ("mount_namespace", "pid_namespace", "ipc_namespace")}
    else:
        state["user_namespace"] = "not needed: the pool runs as root"
    state["ipc_namespace"] = "active"
    state["network_namespace"] = "active"
    _become_pid_init(lib)
    state["host_pid"] = str(host_pid())
    if lib.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        state["mount_namespace"] = f"unavailable: {os.strerror(ctypes.get_errno())}"
        state["pid_namespace"] = "partial: /proc still shows the host's processes"
        return state
    state["mount_namespace"] = "active"
    if lib.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) == 0:
        state["pid_namespace"] = "active"
    else:
        state["pid_namespace"] = f"partial: /proc not remounted ({os.strerror(ctypes.get_errno())})"
    if as_root:
        hidden = make_reachable(lib, keep_reachable)
        if hidden:
            state["mount_namespace"] += "; hidden: " + ", ".join(hidden)
    return state


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

    Only in the zygote's private mount namespace: a directory such as
    ``/root`` (mode 0700) becomes an empty tmpfs into which exactly the
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


def prepare(mode: SandboxMode, lib: ctypes.CDLL | None) -> SandboxPolicy:
    """Set up the zygote's side of the sandbox and compile the child's."""
    policy = SandboxPolicy(mode=mode, as_root=os.geteuid() == 0)
    if mode == "off" or lib is None:
        return policy
    policy.read_roots = _outermost(interpreter_roots() + data_roots())
    policy.namespaces = enter_namespaces(lib, policy.read_roots)
    policy.child_uid = worker_uid(int(policy.namespaces.get("host_pid", os.getpid())))
    policy.landlock_abi = _landlock.abi_version(lib)
    try:
        policy.seccomp_program = _seccomp.build_filter()
    except OSError as exc:
        policy.seccomp_error = str(exc)
    return policy


def confine(policy: SandboxPolicy, lib: ctypes.CDLL | None, scratch: str) -> dict[str, str]:
    """Apply the child's layers to the calling (freshly forked) process.

    Returns each layer's state. In ``strict`` mode a layer that fails
    raises, so the file is never parsed under less than was promised.
    """
    state = {name: detail for name, detail in policy.namespaces.items()}
    if policy.mode == "off" or lib is None:
        return state
    if policy.as_root:
        os.setgroups([])
        os.setresgid(policy.child_uid, policy.child_uid, policy.child_uid)
        os.setresuid(policy.child_uid, policy.child_uid, policy.child_uid)
        state["unprivileged_uid"] = f"active: uid {policy.child_uid}, the worker's own"
        state["capabilities_dropped"] = "active: a non-root uid holds none"
        _set_nproc(CHILD_PROCESSES)
        state["process_limit"] = f"active: {CHILD_PROCESSES} processes for the worker's uid"
    else:
        state["unprivileged_uid"] = f"active: uid {os.geteuid()} (not root)"
        state["capabilities_dropped"] = _drop_capabilities(lib)
        if policy.namespaces.get("user_namespace") == "active":
            _set_nproc(CHILD_PROCESSES)
            state["process_limit"] = (f"active: {CHILD_PROCESSES} processes in the user "
                                      "namespace")
        else:
            state["process_limit"] = ("unavailable: RLIMIT_NPROC would count every process "
                                      "of this user, not only the sandbox's")
    _no_new_privs(lib)
    state["no_new_privs"] = "active"
    if policy.landlock_abi >= 1:
        parts = _landlock.restrict(lib, read=[*policy.read_roots, "/proc/self"],
                                   write=[scratch, "/dev/null"], abi=policy.landlock_abi)
        extras = [name for name, on in parts.items() if on]
        state["landlock"] = f"active: ABI {policy.landlock_abi}" + (
            f" (+{', '.join(extras)})" if extras else "")
    else:
        state["landlock"] = "unavailable: the kernel has no Landlock"
    if policy.seccomp_installed:
        state["seccomp"] = (f"active: {len(_seccomp.DENIED)} syscalls refused "
                            "(installed in the worker, inherited by every child)")
    else:
        state["seccomp"] = f"unavailable: {policy.seccomp_error}"
    return state


def lock_zygote(policy: SandboxPolicy, lib: ctypes.CDLL | None) -> None:
    """Install the seccomp filter on the zygote itself, once, after it is set up.

    Every parse child inherits it through `fork` at no cost per file, and the
    zygote, which reads what children send back, runs under it too. The
    zygote needs none of the denied calls once its namespaces exist: it
    forks, changes a child's uid, and waits.
    """
    if policy.mode == "off" or lib is None or policy.seccomp_program is None:
        return
    try:
        _seccomp.install(policy.seccomp_program, lib)
    except OSError as exc:
        policy.seccomp_error = str(exc)
    else:
        policy.seccomp_installed = True


def _set_nproc(count: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NPROC, (count, count))


def _no_new_privs(lib: ctypes.CDLL) -> None:
    if lib.prctl(38, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _drop_capabilities(lib: ctypes.CDLL) -> str:
    """Empty the bounding, ambient, effective, permitted and inheritable sets."""
    lib.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(64):
        if lib.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    header = _CapHeader(_CAP_HEADER_V3, 0)
    data = (_CapData * 2)()
    if lib.capset(ctypes.byref(header), data) != 0:
        return f"unavailable: capset failed ({os.strerror(ctypes.get_errno())})"
    return "active"


def summarise(states: dict[str, str]) -> SandboxReport:
    """Turn the per-layer strings a child reported into a `SandboxReport`."""
    layers = {}
    for name in LAYERS:
        detail = str(states.get(name, "unavailable: not attempted"))[:300]
        active = detail.startswith("active") or detail.startswith("not needed")
        layers[name] = LayerStatus(active=active, detail=detail)
    return SandboxReport(layers=layers)
