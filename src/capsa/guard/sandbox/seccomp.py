"""The parse child's seccomp filter: an allow-list of what real parsers call.

The list is evidence, not a guess: ``scripts/record_syscalls.py`` traced the
parse children of a real pool over the real-document set and every kind's
samples (unstructured on each format, pypdf, Pillow, Tesseract and pandoc
started through `subprocess`), and wrote `_recorded_syscalls`. `allowed` is
that recording, plus calls the interpreter makes on paths a recording can
miss (`_recorded_syscalls.ALWAYS_NEEDED`), minus `REFUSED`: calls no parser
needs that reach outside the file (sockets of any family, ``sendto`` and
``sendmsg``, ``inotify`` and ``fanotify``, ``setpgid`` and ``setsid``,
namespaces, mounts, ``ptrace``, keyrings, ``bpf``, ``io_uring``...). A few
are allowed only with safe arguments (`_ARGUMENT_RULES`): ``prlimit64``,
``setpriority`` and the ``sched_set*`` calls on the caller itself (pid 0),
``clone`` without namespace flags, ``ioctl`` without the terminal-injecting
requests. Four allowed calls are refused options that reach past the child
(`_REFUSED_OPTIONS`): the opt-in to kernel same-page merging (``madvise``,
``prctl``), evicting a shared file from the page cache (``fadvise64``), and
leases and directory watches (``fcntl``).

A refused call fails with ``EPERM``; a call on no list fails with
``ENOSYS``, which libc and Python treat as "not supported here" and route
around. ``clone3`` is answered so although parsers make it (`_FALL_BACK`): it
falls back to ``clone``, whose flags the filter can read.
A syscall from a foreign ABI (x32, or a 32-bit call on a 64-bit kernel)
kills the process, because the numbers below would not mean what they say.

The program is built once in the zygote (`build_filter`) and installed by
each file's child as its last step before reading the file (`install`): one
``prctl``, microseconds. The most frequent calls are tested first, so a
parser's ``read`` or ``mmap`` passes after a handful of comparisons.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

from capsa.guard.sandbox import _recorded_syscalls, _syscall_numbers

__all__ = ["REFUSED", "UNIX_LISTEN_KINDS", "allowed", "available", "build_filter", "install"]

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000

_TIOCSTI = 0x5412
_TIOCLINUX = 0x541C
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 \
    | 0x20000000 | 0x40000000 | 0x00000080

REFUSED: frozenset[str] = frozenset({
    # the network, Unix sockets on disk and datagram services (/dev/log) included
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendto",
    "sendmsg", "sendmmsg", "recvfrom", "recvmsg", "recvmmsg", "setsockopt", "getsockopt",
    "getsockname", "getpeername", "shutdown",
    # watching other tenants' files appear
    "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init", "fanotify_mark",
    # leaving the file's process group or session (nothing to gain inside its PID namespace)
    "setpgid", "setsid",
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_open", "pidfd_getfd",
    "pidfd_send_signal", "process_madvise", "process_mrelease",
    # namespaces, mounts, privileges
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "mount_setattr",
    "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
    "open_by_handle_at", "name_to_handle_at", "personality", "capset", "setuid", "setgid",
    "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid", "setgroups",
    "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "seccomp",
    # the kernel's own surfaces
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "lookup_dcookie",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "settimeofday",
    "clock_settime", "adjtimex", "clock_adjtime", "syslog", "vhangup", "sethostname",
    "setdomainname", "iopl", "ioperm", "uselib", "mknod", "mknodat",
})
"""Calls that always fail with ``EPERM``, recorded or not (but for `_LISTEN_ONLY` in the
filter of a LibreOffice child)."""

_HARMLESS: frozenset[str] = frozenset({
    # I/O on descriptors the child already holds, and waiting on them
    "readv", "writev", "preadv", "pwritev", "pwrite64", "dup", "dup3",
    "select", "pselect6", "ppoll", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
    "epoll_pwait2", "eventfd2", "fsync", "fdatasync", "ftruncate", "flock", "fchdir",
    "copy_file_range", "sendfile", "fadvise64", "getcwd",
    # its own identity and the clock, read only
    "getppid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
    "getgroups", "getpgrp", "getpgid", "getsid", "uname", "times", "getcpu", "getitimer",
    "setitimer", "alarm", "gettimeofday", "time", "clock_getres", "getpriority", "pause",
    "rt_sigsuspend", "rt_sigtimedwait", "rt_sigpending",
    "sched_getparam", "sched_getscheduler", "sched_get_priority_max",
    "sched_get_priority_min", "umask", "capget",
    # paths, answered by Landlock, the read-only root and the scratch tmpfs
    "statx", "statfs", "fstatfs", "lstat", "readlink", "readlinkat", "faccessat",
    "faccessat2", "mkdirat", "rename", "renameat", "renameat2", "truncate", "symlinkat",
    "linkat", "link", "symlink",
})
"""Calls a recording can miss that reach nothing beyond the child: allowed with the recording."""

_FALL_BACK: frozenset[str] = frozenset({"clone3"})
"""Calls parsers make that are answered ``ENOSYS`` all the same, recorded or not.

``clone3`` reads its flags from memory, where a filter cannot look, so allowing it
would allow every namespace ``clone`` is refused (a new user namespace holds every
capability). glibc 2.34+ tries ``clone3`` first and, on ``ENOSYS`` (never on
``EPERM``), makes the same thread or process with ``clone``, whose flags the filter
checks."""

_ARGUMENT_RULES: dict[str, tuple[int, ...]] = {
    # name: the arguments that must be 0, naming the caller itself
    "prlimit64": (0,),
    "setpriority": (0, 1),  # PRIO_PROCESS, and who = 0
    "sched_setaffinity": (0,),
    "sched_setscheduler": (0,),
    "sched_setparam": (0,),
    "sched_setattr": (0,),
}
_REFUSED_OPTIONS: dict[str, tuple[int, tuple[int, ...]]] = {
    "madvise": (2, (12,)),           # MADV_MERGEABLE
    "prctl": (0, (67,)),             # PR_SET_MEMORY_MERGE
    "fadvise64": (3, (4,)),          # POSIX_FADV_DONTNEED
    "fcntl": (1, (1024, 1026, 1031)),  # F_SETLEASE, F_NOTIFY, F_SETPIPE_SZ
}
"""Options refused on calls that are otherwise allowed: name, then which argument and its
refused values. None is a thing a parser needs, and each reaches past the child:

- ``MADV_MERGEABLE`` and ``PR_SET_MEMORY_MERGE`` opt pages into kernel same-page merging
  (KSM), whose merged, copy-on-write pages answer a write more slowly: a process that
  marks a guessed page mergeable learns whether another process holds that page.
- ``POSIX_FADV_DONTNEED`` evicts a shared file's pages from the page cache, so a later
  read of them (timed) tells whether another tenant read them meanwhile: which of
  LibreOffice's libraries another pool's file loaded, say. ``preadv2``, whose
  ``RWF_NOWAIT`` asks the same question without timing, is not allowed at all (libc
  falls back to ``preadv`` on ``ENOSYS``).
- ``F_SETLEASE`` on a read-root file the child's uid owns (a pool that is not root:
  the application's own virtualenv, its Tesseract models) makes every other process's
  ``open`` of it wait until the file ends; ``F_NOTIFY`` watches a directory, as
  ``inotify`` would; ``F_SETPIPE_SZ`` grows a pipe (the reply pipe to a megabyte)
  out of the pipe pages the kernel counts per user, which a pool that is not root
  shares with the application."""
_AF_UNIX = 1
UNIX_LISTEN_KINDS: frozenset[str] = frozenset({"doc", "xls", "ppt", "ods", "odp"})
"""The kinds whose child gets the `_LISTEN_ONLY` filter: LibreOffice converts them. The
application names the kind from the bytes it sniffed; every other child's filter is
exactly the one without it."""
_LISTEN_ONLY: frozenset[str] = frozenset({"bind", "listen", "accept", "accept4", "shutdown"})
"""The listening half of a Unix socket, allowed because LibreOffice will not start without
its single-instance pipe: ``soffice.bin`` binds a socket in its own scratch
(``-env:OSL_SOCKET_PATH``), waits on it in ``accept``, and ends that wait with
``shutdown`` (its other way, connecting to itself, stays refused). With ``socket``
allowed for ``AF_UNIX`` alone and ``connect``, ``sendto`` and ``sendmsg`` refused, a
socket the child makes can be listened on but can never reach another process: nothing
outside the child's private mount namespace can name its scratch, and an abstract
address lives in the child's own network namespace."""
_HOT = ("read", "write", "mmap", "munmap", "brk", "futex", "lseek", "fstat", "newfstatat",
        "openat", "close", "mprotect", "madvise", "getdents64", "readv", "writev", "pread64",
        "fcntl", "rt_sigaction", "rt_sigprocmask", "getpid", "gettid", "mremap", "statx")
_ARCHES = {"x86_64": (0xC000003E, _syscall_numbers.X86_64),
           "aarch64": (0xC00000B7, _syscall_numbers.AARCH64)}
_X32_BIT = 0x40000000


def _table() -> tuple[int, dict[str, int]] | None:
    return _ARCHES.get(platform.machine())


def available() -> bool:
    """Whether this machine's architecture has a syscall table here."""
    return _table() is not None


def allowed(*, unix_listen: bool = False) -> frozenset[str]:
    """Every call the filter lets through, on its own or with safe arguments.

    With `unix_listen` (the filter of a child converting with LibreOffice, see
    `UNIX_LISTEN_KINDS`), ``socket`` for ``AF_UNIX`` and the calls that listen on it too.

    Examples:
        >>> {"read", "mmap", "execve"} <= allowed()
        True
        >>> sorted({"socket", "sendto", "inotify_init1", "setsid", "clone3"} & allowed())
        []
    """
    wanted = _recorded_syscalls.RECORDED | frozenset(_recorded_syscalls.ALWAYS_NEEDED) \
        | _HARMLESS
    base = frozenset(wanted - REFUSED - _FALL_BACK) | frozenset(_ARGUMENT_RULES) \
        | {"clone", "ioctl"}
    return base | _LISTEN_ONLY | {"socket"} if unix_listen else base


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _errno(code: int) -> bytes:
    return _op(_RET_K, _RET_ERRNO | code)


def build_filter(*, unix_listen: bool = False) -> bytes:
    """The BPF program for this architecture, as raw ``sock_filter`` records.

    With `unix_listen`, ``socket(AF_UNIX, ...)`` and `_LISTEN_ONLY` pass too (and
    ``socket`` for any other family, ``connect``, ``sendto`` and ``sendmsg`` stay refused).

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
    if arch == 0xC000003E:
        program += [_op(_JGE_K, _X32_BIT, 0, 1), _op(_RET_K, _RET_KILL_PROCESS)]
    for name, (index, values) in sorted(_REFUSED_OPTIONS.items()):
        if name not in numbers:
            continue
        last = len(values) - 1  # equal to a refused value: on to the refusal; else past it
        checks = [_op(_JEQ_K, value, last - k, 1 if k == last else 0)
                  for k, value in enumerate(values)]
        program += [  # then the number is loaded again for the checks below
            _op(_JEQ_K, numbers[name], 0, len(values) + 2),
            _op(_LD_W_ABS, arg[index]),
            *checks,
            _errno(errno.EPERM),
            _op(_LD_W_ABS, nr_offset),
        ]
    names = allowed(unix_listen=unix_listen)
    plain = [name for name in names if name not in _ARGUMENT_RULES
             and name not in ("clone", "ioctl", "socket") and name in numbers]
    hot = [name for name in _HOT if name in plain]
    for name in hot + sorted(set(plain) - set(hot)):
        program += [_op(_JEQ_K, numbers[name], 0, 1), _op(_RET_K, _RET_ALLOW)]
    for name, zero in sorted(_ARGUMENT_RULES.items()):
        if name not in numbers:
            continue
        block = []  # each pid-like argument is an int: its low 32 bits are all it says
        for k, index in enumerate(zero):
            block += [_op(_LD_W_ABS, arg[index]), _op(_JEQ_K, 0, 0, 2 * (len(zero) - k) - 1)]
        block += [_op(_RET_K, _RET_ALLOW), _errno(errno.EPERM)]
        program += [_op(_JEQ_K, numbers[name], 0, len(block)), *block]
    if unix_listen:  # socket(AF_UNIX, ...) only: LibreOffice's single-instance pipe
        program += [
            _op(_JEQ_K, numbers["socket"], 0, 4),
            _op(_LD_W_ABS, arg[0]),
            _op(_JEQ_K, _AF_UNIX, 0, 1),
            _op(_RET_K, _RET_ALLOW),
            _errno(errno.EPERM),
        ]
    # clone(flags, ...): threads and processes, never a new namespace.
    program += [
        _op(_JEQ_K, numbers["clone"], 0, 4),
        _op(_LD_W_ABS, arg[0]),
        _op(_JSET_K, _CLONE_NAMESPACES, 0, 1),
        _errno(errno.EPERM),
        _op(_RET_K, _RET_ALLOW),
    ]
    # ioctl(fd, TIOCSTI | TIOCLINUX): typing into a terminal the child might hold.
    program += [
        _op(_LD_W_ABS, nr_offset),
        _op(_JEQ_K, numbers["ioctl"], 0, 5),
        _op(_LD_W_ABS, arg[1]),
        _op(_JEQ_K, _TIOCSTI, 1, 0),
        _op(_JEQ_K, _TIOCLINUX, 0, 1),
        _errno(errno.EPERM),
        _op(_RET_K, _RET_ALLOW),
        _op(_LD_W_ABS, nr_offset),
    ]
    for name in sorted(REFUSED - names):
        if name in numbers:
            program += [_op(_JEQ_K, numbers[name], 0, 1), _errno(errno.EPERM)]
    program.append(_errno(errno.ENOSYS))
    if len(program) > 4096:
        raise OSError(errno.E2BIG, f"seccomp program of {len(program)} instructions")
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
