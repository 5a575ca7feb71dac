"""The parse child's layers: assume the parser is hostile code, and fence it in.

A crafted file that corrupts memory in libxml2, Pillow, leptonica or any
other C extension runs the attacker's code inside the parse child. Every
layer here is one the kernel enforces, so it holds against raw syscalls,
not only against Python; each is optional where the OS lacks it, and
`SandboxReport` says which ones a worker got (``capsa doctor`` prints it).

The worker prepares once (`prepare`): its own namespaces
(`capsa.guard.sandbox.namespaces`), the directories parsers may read, its
cgroup (`capsa.guard.sandbox.cgroups`) and the compiled seccomp allow-list.
Each file's child then enters namespaces of its own, mounts its scratch, and
confines itself (`confine`) before it reads a byte of the file:

- **unprivileged uid**: under a root pool the child takes a uid of its
  worker's own (`worker_uid`: a high number no account uses, so the child
  owns nothing on the host and shares its process count with no one) with no
  supplementary groups; otherwise it keeps the user's uid and drops every
  capability the user namespace gave it;
- **no_new_privs**: no set-uid binary can give privileges back;
- **process limit**: ``RLIMIT_NPROC`` where it counts only the sandbox's own
  processes (a dedicated uid or a private user namespace), so a fork bomb stops;
- **Landlock**: read and execute only the interpreter, its packages and the
  system libraries and data parsers use; write only the file's scratch; no
  TCP; signals and abstract sockets only inside the child's own domain; no
  ptrace of, or ``/proc`` reads into, any process outside it;
- **seccomp**: an allow-list of the calls real parsers make
  (`capsa.guard.sandbox.seccomp`); everything else fails.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.machinery
import os
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

from capsa.guard.sandbox import landlock as _landlock
from capsa.guard.sandbox import namespaces
from capsa.guard.sandbox import seccomp as _seccomp
from capsa.guard.sandbox.cgroups import WorkerCgroups
from capsa.guard.sandbox.namespaces import _beneath, _outermost

__all__ = ["LAYERS", "LayerStatus", "SandboxMode", "SandboxPolicy", "SandboxReport",
           "confine", "prepare", "summarise"]

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
    "pid_namespace": (
        "each file's child is the init of its own PID namespace: everything the file "
        "starts dies with it, whatever its process group or session, and it can name "
        "no process outside it",
        "processes a file starts can outlive it and see other processes by pid"),
    "ipc_namespace": (
        "each file has its own System V and POSIX IPC: segments and queues die with it "
        "and no other file can reach them",
        "System V objects a file creates outlive it and reach the next file"),
    "mount_namespace": (
        "each file has its own mounts and a /proc that lists only its own processes; "
        "directories the child needs are bound, the rest of an unreadable parent "
        "(such as /root) is hidden",
        "the child sees the host's /proc and mount table"),
    "scratch_tmpfs": (
        "the file's scratch is a tmpfs bounded in bytes (max_file_write_bytes) and "
        "entries (max_scratch_files), freed by the kernel when the file ends",
        "scratch is a host directory: only RLIMIT_FSIZE bounds one file's size, and "
        "a crafted tree must be deleted afterwards"),
    "read_only_root": (
        "every mount but scratch is read-only: no write, chmod, chown, utimes or "
        "setxattr outside it, whatever file permissions say",
        "file permissions (and Landlock, which does not cover metadata) decide"),
    "minimal_root": (
        "the child's root holds only what parsers read (bound read-only), /proc, the "
        "file's scratch and the worker's cgroup: every other path of the host does not "
        "exist for it, so stat, access and readlink (which Landlock does not cover) tell "
        "it nothing of the host's files, and /proc/self/mountinfo lists only those mounts",
        "the child sees the host's whole tree: it cannot open what Landlock refuses, but "
        "learns whether any path its uid can traverse exists, with its size, times and "
        "owner, and reads the host's mount points in /proc/self/mountinfo"),
    "network_namespace": (
        "no network interface but a down loopback, and a host name of its own "
        "('capsa', in a UTS namespace): the machine's name, often a tenant's or a "
        "pod's, is not shown",
        "network reachable if a socket is ever allowed (seccomp still refuses them), "
        "and uname shows the host's name"),
    "cgroup": (
        "CPU time, memory (memfd, shared memory and tmpfs included) and processes "
        "are counted for the whole file, not per process",
        "limits hold per process: several processes, memfd and shared memory can "
        "together exceed a file's allowance"),
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
        "a fork bomb runs until the wall clock ends the file"),
    "landlock": (
        "reads limited to the interpreter, packages and system data; writes to the "
        "file's scratch; no TCP; signals, ptrace and /proc only inside the child",
        "file permissions alone decide what the child reads and writes"),
    "seccomp": (
        "only the system calls real parsers make are allowed: no sockets (a LibreOffice "
        "child may listen on a Unix socket of its own, never connect), no "
        "sendto/sendmsg, no inotify, no prlimit or setpriority on another process, no "
        "namespaces, mounts, ptrace, keyrings, bpf or io_uring",
        "every system call is available to the parser"),
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
        (['seccomp'], 14)
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
    seccomp_listen_program: bytes | None = None
    """The filter of a child that converts with LibreOffice (`seccomp.UNIX_LISTEN_KINDS`)."""
    seccomp_state: str = "unavailable: not built"
    child_uid: int = NOBODY
    mode: SandboxMode = "best-effort"
    own_pid_namespace: int = -1
    """A descriptor of the zygote's PID namespace, to start each file's from (-1: none)."""
    cgroups: WorkerCgroups | None = None
    cgroup_state: str = "unavailable: not attempted"

    @property
    def per_file_namespaces(self) -> bool:
        """Whether each file's child can be given PID, IPC and mount namespaces of its own."""
        return self.own_pid_namespace >= 0


_CAP_HEADER_V3 = 0x20080522
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_SYSTEM_READ = (
    "/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache",
    "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/fonts",
    "/etc/mime.types", "/etc/magic", "/etc/ImageMagick-6", "/etc/libreoffice",
    "/var/lib/libreoffice", "/var/spool/libreoffice", "/var/cache/fontconfig",
    "/dev/null", "/dev/zero",
    "/dev/urandom", "/dev/random", "/sys/devices/system/cpu",
)


def interpreter_roots() -> list[str]:
    """Directories the interpreter and its installed packages live in, and what else imports.

    Taken from the worker's own `sys.path` (``python -I``: no current
    directory, no ``PYTHONPATH``), so the application's working directory is
    never among them. An entry inside the interpreter's own directories is
    read whole. An entry outside them is an editable install's source
    directory, which a ``.pth`` file put there: of it only what imports is
    read (`_importable`), because for a flat layout (hatchling, Poetry, PDM,
    ``setup.py develop``) it is the project's root, with its ``.env``, its
    ``.git`` and its configuration beside the package.
    """
    installed = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
                 os.path.dirname(os.path.realpath(sys.executable))}
    installed.update(p for p in sysconfig.get_paths().values() if p)
    inside = {os.path.realpath(p) for p in installed if os.path.exists(p)}
    roots = set(installed)
    for entry in filter(None, sys.path):
        real = os.path.realpath(entry)
        if os.path.isdir(real) and not _beneath(real, inside):
            roots.update(_importable(real))
        else:
            roots.add(entry)
    resolved = {os.path.realpath(p) for p in roots if os.path.exists(p)}
    resolved |= {p for p in roots if os.path.exists(p)}
    return _outermost(resolved)


def _importable(directory: str) -> list[str]:
    """What `import` can load from `directory`: its packages and its top-level modules.

    A package is a directory named as a module that holds Python files (with
    or without ``__init__.py``); a module is a file with an import suffix. Hidden
    entries, data directories and every other file (``.env``, ``config/``,
    ``secrets.toml``) are left out.
    """
    suffixes = tuple(importlib.machinery.all_suffixes())
    found: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return found
    for entry in entries:
        name = entry.name
        if name.startswith("."):
            continue
        if entry.is_dir():
            if name.isidentifier() and _holds_python(entry.path, suffixes):
                found.append(entry.path)
        elif name.endswith(suffixes) and name.split(".", 1)[0].isidentifier():
            found.append(entry.path)
    return found


def _holds_python(directory: str, suffixes: tuple[str, ...]) -> bool:
    try:
        return any(name.endswith(suffixes) for name in os.listdir(directory))
    except OSError:
        return False


def installation_prefixes() -> list[str]:
    """The interpreter's installation prefixes: its own (a virtual environment's) and its base."""
    prefixes = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    return sorted({os.path.realpath(p) for p in prefixes if p and os.path.isdir(p)})


def read_roots(prefixes: Iterable[str] | None = None) -> list[str]:
    """Every path a parse child may read: `interpreter_roots` and `data_roots`, with each
    installation prefix (`installation_prefixes`, or `prefixes`) opened to its directories.

    A prefix's own top-level files are configuration, never code: pip reads its
    site-wide ``pip.conf`` there (an index URL with a token, often), conda its
    ``.condarc``, and a virtual environment keeps ``pyvenv.cfg`` beside them. So a
    root that is, or holds, a prefix is replaced by its directories (`_opened`),
    down to the prefix, and everything that imports and links stays readable.
    """
    found = interpreter_roots() + data_roots()
    wanted = installation_prefixes() if prefixes is None else list(prefixes)
    return _outermost(_opened(found, [os.path.realpath(p) for p in wanted]))


def _opened(roots: Iterable[str], prefixes: list[str]) -> list[str]:
    """`roots`, each one that is or holds a prefix replaced by its directories, down to it.

    Hidden entries and the files at each level opened are left out: those of
    ``/usr`` above a ``/usr/local`` prefix (none, normally) and the prefix's own.
    """
    kept: list[str] = []
    pending = list(roots)
    while pending:
        root = pending.pop()
        real = os.path.realpath(root)
        if not any(_beneath(prefix, [real]) for prefix in prefixes):
            kept.append(root)
            continue
        with contextlib.suppress(OSError), os.scandir(real) as entries:
            pending.extend(entry.path for entry in entries
                           if not entry.name.startswith(".") and entry.is_dir())
    return kept


def data_roots() -> list[str]:
    """System libraries and data parsers read (tessdata included)."""
    roots = list(_SYSTEM_READ)
    tessdata = _tessdata(os.environ.get("TESSDATA_PREFIX", ""))
    if tessdata:
        roots.append(tessdata)
    return _outermost(p for p in roots if os.path.exists(p))


def _tessdata(prefix: str) -> str | None:
    """The directory of Tesseract's models that ``TESSDATA_PREFIX`` names, or None.

    Only a directory holding ``.traineddata`` files (the prefix or its
    ``tessdata``) is read: the variable comes from the host's environment, and
    ``TESSDATA_PREFIX=/`` must not open the whole disk to a parser.
    """
    if not prefix:
        return None
    for candidate in (prefix, os.path.join(prefix, "tessdata")):
        try:
            names = os.listdir(candidate)
        except OSError:
            continue
        if any(name.endswith(".traineddata") for name in names):
            return candidate
    return None


def prepare(mode: SandboxMode, lib: ctypes.CDLL | None) -> SandboxPolicy:
    """Set up the zygote's side of the sandbox and compile the child's."""
    policy = SandboxPolicy(mode=mode, as_root=os.geteuid() == 0)
    if mode == "off" or lib is None:
        return policy
    policy.read_roots = read_roots()
    policy.namespaces = namespaces.enter_worker_namespaces(lib, policy.read_roots)
    host = int(policy.namespaces.get("host_pid", os.getpid()))
    policy.child_uid = worker_uid(host)
    if policy.namespaces.get("pid_namespace") == "worker":
        with contextlib.suppress(OSError):
            policy.own_pid_namespace = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    policy.cgroups, policy.cgroup_state = WorkerCgroups.create(WorkerCgroups.name_for(host))
    policy.landlock_abi = _landlock.abi_version(lib)
    try:
        policy.seccomp_program = _seccomp.build_filter()
        policy.seccomp_listen_program = _seccomp.build_filter(unix_listen=True)
    except OSError as exc:
        policy.seccomp_state = f"unavailable: {exc}"
    else:
        policy.seccomp_state = (f"active: an allow-list of {len(_seccomp.allowed())} "
                                "system calls")
    return policy


def confine(policy: SandboxPolicy, lib: ctypes.CDLL | None, scratch: str, *,
            unix_listen: bool = False) -> dict[str, str]:
    """Apply the child's own layers to the calling (freshly forked) process, last of all.

    `unix_listen` installs the seccomp filter of a LibreOffice child (see
    `capsa.guard.sandbox.seccomp.UNIX_LISTEN_KINDS`) instead of the usual one.

    Runs after the child has entered its namespaces and mounted its scratch,
    and before it reads the file. Returns each layer's state. An error is
    raised only for a layer that was available and failed to apply; the
    caller then refuses to parse.
    """
    state: dict[str, str] = {}
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
        parts = _landlock.restrict(lib, read=[*policy.read_roots, "/proc/self", scratch],
                                   write=[scratch, "/dev/null"], abi=policy.landlock_abi)
        extras = [name for name, on in parts.items() if on]
        state["landlock"] = f"active: ABI {policy.landlock_abi}" + (
            f" (+{', '.join(extras)})" if extras else "")
    else:
        state["landlock"] = "unavailable: the kernel has no Landlock"
    program = policy.seccomp_listen_program if unix_listen else policy.seccomp_program
    if program is not None:
        _seccomp.install(program, lib)
    state["seccomp"] = policy.seccomp_state
    return state


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
