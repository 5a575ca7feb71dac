"""A small seccomp-bpf filter for the parse child: syscalls a parser has no business with.

The filter is a deny-list, not an allow-list: parsers (lxml, Pillow, pypdf,
Tesseract through `subprocess`) use a wide and changing set of ordinary
syscalls, and an allow-list that misses one turns a good file into a crash.
What it denies are the calls that reach *outside* the child: other
processes' memory (`ptrace`, `process_vm_readv`), new namespaces and mounts
(a way to regain capabilities), the kernel's keyrings, eBPF and perf, every
socket except a Unix socketpair, and `connect`/`bind`/`listen`/`accept`
outright, so not even a Unix socket on the filesystem (an ssh agent, a Docker
daemon) can be reached.

Denied calls return ``EPERM`` (``ENOSYS`` for ``clone3``, so libc falls back
to ``clone``, whose flags the filter can read) instead of killing the
process: a parser that merely probes for a feature keeps working, and an
attack simply fails. A syscall from a foreign ABI (x32, or a 32-bit call on
a 64-bit kernel) kills the process, because the numbers below would not mean
what they say.

The program is built once in the zygote (`build_filter`) and installed by each
child with one `prctl` (`install`), so it costs microseconds per file. Why
hand-written rather than libseccomp: the program is about a hundred BPF
instructions of one shape (compare the syscall number, return), both tables
are checked against the kernel headers in the tests, and the worker then
needs no shared library that might be missing on the host.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

__all__ = ["DENIED", "available", "build_filter", "install"]

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_PR_GET_SECCOMP = 21
_SECCOMP_MODE_FILTER = 2

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000

_AF_UNIX = 1
_TIOCSTI = 0x5412
_TIOCLINUX = 0x541C
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 \
    | 0x20000000 | 0x40000000 | 0x00000080

DENIED: tuple[str, ...] = (
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "pidfd_send_signal", "process_madvise",
    # namespaces, mounts, privileges
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "mount_setattr",
    "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
    "open_by_handle_at", "name_to_handle_at", "personality",
    # the kernel's own surfaces
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "lookup_dcookie",
    "fanotify_init",
    # the machine
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "settimeofday", "clock_settime",
    "adjtimex", "clock_adjtime", "syslog", "vhangup", "sethostname", "setdomainname",
    # the network, Unix sockets on the filesystem included
    "connect", "bind", "listen", "accept", "accept4",
)
"""Syscalls that always fail with ``EPERM`` in the parse child."""

_X86_64 = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
    "pidfd_getfd": 438, "pidfd_send_signal": 424, "process_madvise": 440, "unshare": 272,
    "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "mount_setattr": 442, "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "open_by_handle_at": 304, "name_to_handle_at": 303,
    "capset": 126, "personality": 135, "keyctl": 250, "add_key": 248, "request_key": 249,
    "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "lookup_dcookie": 212,
    "fanotify_init": 300, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175,
    "finit_module": 313, "delete_module": 176, "reboot": 169, "swapon": 167, "swapoff": 168,
    "acct": 163, "quotactl": 179, "settimeofday": 164, "clock_settime": 227, "adjtimex": 159,
    "clock_adjtime": 305, "syslog": 103, "vhangup": 153, "sethostname": 170,
    "setdomainname": 171, "connect": 42, "bind": 49, "listen": 50, "accept": 43,
    "accept4": 288, "socket": 41, "clone": 56, "clone3": 435, "ioctl": 16,
    # x86-only ways to touch hardware or old binaries
    "iopl": 172, "ioperm": 173, "uselib": 134,
}
_AARCH64 = {
    "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272,
    "pidfd_getfd": 438, "pidfd_send_signal": 424, "process_madvise": 440, "unshare": 97,
    "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
    "mount_setattr": 442, "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "open_by_handle_at": 265, "name_to_handle_at": 264,
    "capset": 91, "personality": 92, "keyctl": 219, "add_key": 217, "request_key": 218,
    "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "lookup_dcookie": 18,
    "fanotify_init": 262, "kexec_load": 104, "kexec_file_load": 294, "init_module": 105,
    "finit_module": 273, "delete_module": 106, "reboot": 142, "swapon": 224, "swapoff": 225,
    "acct": 89, "quotactl": 60, "settimeofday": 170, "clock_settime": 112, "adjtimex": 171,
    "clock_adjtime": 266, "syslog": 116, "vhangup": 58, "sethostname": 161,
    "setdomainname": 162, "connect": 203, "bind": 200, "listen": 201, "accept": 202,
    "accept4": 242, "socket": 198, "clone": 220, "clone3": 435, "ioctl": 29,
}
_ARCHES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}
_X32_BIT = 0x40000000


def _table() -> tuple[int, dict[str, int]] | None:
    return _ARCHES.get(platform.machine())


def available() -> bool:
    """Whether this machine's architecture has a syscall table here."""
    return _table() is not None


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _errno(code: int) -> bytes:
    return _op(_RET_K, _RET_ERRNO | code)


def build_filter() -> bytes:
    """The BPF program for this architecture, as raw ``sock_filter`` records.

    Raises:
        OSError: the architecture has no table (only x86-64 and AArch64 do).
    """
    table = _table()
    if table is None:
        raise OSError(errno.ENOSYS, f"no seccomp syscall table for {platform.machine()}")
    arch, numbers = table
    nr_offset, arch_offset = 0, 4
    arg = [16 + 8 * i for i in range(6)]  # low 32 bits of each argument (little-endian)
    program = [
        _op(_LD_W_ABS, arch_offset),
        _op(_JEQ_K, arch, 1, 0),
        _op(_RET_K, _RET_KILL_PROCESS),
        _op(_LD_W_ABS, nr_offset),
    ]
    if numbers is _X86_64:
        program += [_op(_JGE_K, _X32_BIT, 0, 1), _op(_RET_K, _RET_KILL_PROCESS)]
    denied = list(DENIED) + [name for name in ("iopl", "ioperm", "uselib") if name in numbers]
    for name in denied:
        program += [_op(_JEQ_K, numbers[name], 0, 1), _errno(errno.EPERM)]
    program += [_op(_JEQ_K, numbers["clone3"], 0, 1), _errno(errno.ENOSYS)]
    # socket(family, ...): only AF_UNIX (socketpair for pipes between threads).
    program += [
        _op(_JEQ_K, numbers["socket"], 0, 4),
        _op(_LD_W_ABS, arg[0]),
        _op(_JEQ_K, _AF_UNIX, 0, 1),
        _op(_RET_K, _RET_ALLOW),
        _errno(errno.EAFNOSUPPORT),
    ]
    # clone(flags, ...): threads and processes, never a new namespace.
    program += [
        _op(_LD_W_ABS, nr_offset),
        _op(_JEQ_K, numbers["clone"], 0, 3),
        _op(_LD_W_ABS, arg[0]),
        _op(_JSET_K, _CLONE_NAMESPACES, 0, 1),
        _errno(errno.EPERM),
    ]
    # ioctl(fd, TIOCSTI | TIOCLINUX): typing into a terminal the child might hold.
    program += [
        _op(_LD_W_ABS, nr_offset),
        _op(_JEQ_K, numbers["ioctl"], 0, 4),
        _op(_LD_W_ABS, arg[1]),
        _op(_JEQ_K, _TIOCSTI, 1, 0),
        _op(_JEQ_K, _TIOCLINUX, 0, 1),
        _errno(errno.EPERM),
    ]
    program.append(_op(_RET_K, _RET_ALLOW))
    return b"".join(program)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(program: bytes, libc: ctypes.CDLL) -> None:
    """Install `program` on the calling thread (and everything it forks).

    Sets ``no_new_privs`` first, which installing a filter without
    ``CAP_SYS_ADMIN`` requires anyway.

    Raises:
        OSError: the kernel refused the filter.
    """
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_NO_NEW_PRIVS): {errno.errorcode.get(code, code)}")
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"seccomp filter refused: {errno.errorcode.get(code, code)}")
