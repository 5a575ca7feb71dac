"""Landlock for the parse child: a filesystem allow-list and scoped signals.

Landlock (Linux 5.13+) lets an unprivileged process give up access it has:
after `restrict`, the child can read and execute only beneath the
directories it listed, write only beneath its scratch directory, connect or
bind no TCP port (ABI 4+), and signal or reach abstract Unix sockets only
inside its own domain (ABI 6+). The kernel also stops a Landlocked process
from ptracing, or reading ``/proc/<pid>/environ``, ``maps``, ``fd`` or
``cwd`` of, any process outside its domain, whatever the file permissions say.

Three syscalls make the whole interface, so they are called directly through
`ctypes` rather than through a binding: the PyPI `landlock` package is a
pre-release, and the rights below follow the kernel's ABI versions exactly
(each right is asked for only where the running kernel knows it).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from collections.abc import Iterable

__all__ = ["abi_version", "restrict"]

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_EXECUTE = 1 << 0
_WRITE_FILE = 1 << 1
_READ_FILE = 1 << 2
_READ_DIR = 1 << 3
_REMOVE_DIR = 1 << 4
_REMOVE_FILE = 1 << 5
_MAKE_CHAR = 1 << 6
_MAKE_DIR = 1 << 7
_MAKE_REG = 1 << 8
_MAKE_SOCK = 1 << 9
_MAKE_FIFO = 1 << 10
_MAKE_BLOCK = 1 << 11
_MAKE_SYM = 1 << 12
_REFER = 1 << 13
_TRUNCATE = 1 << 14
_IOCTL_DEV = 1 << 15
_NET_BIND_TCP = 1 << 0
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX = 1 << 0
_SCOPE_SIGNAL = 1 << 1

_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # EXECUTE .. MAKE_SYM: ABI 1
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


def abi_version(libc: ctypes.CDLL) -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is absent or disabled."""
    version = int(libc.syscall(_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION))
    return max(version, 0)


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"landlock {what}: {errno.errorcode.get(code, code)}")
    return result


def restrict(libc: ctypes.CDLL, *, read: Iterable[str], write: Iterable[str],
             abi: int) -> dict[str, bool]:
    """Confine the calling process: read/execute beneath `read`, everything beneath `write`.

    Paths that do not exist are skipped. The caller must have set
    ``no_new_privs`` (or hold ``CAP_SYS_ADMIN``). Returns which optional
    parts the kernel enforced (``tcp`` from ABI 4, ``scopes`` from ABI 6).

    Raises:
        OSError: Landlock is unavailable or refused the ruleset.
    """
    if abi < 1:
        raise OSError(errno.EOPNOTSUPP, "landlock is not available on this kernel")
    fs = _fs_rights(abi)
    net = _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0
    scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL if abi >= 6 else 0
    if abi >= 6:
        attr = struct.pack("=QQQ", fs, net, scoped)
    elif abi >= 4:
        attr = struct.pack("=QQ", fs, net)
    else:
        attr = struct.pack("=Q", fs)
    ruleset = _check(libc.syscall(_CREATE_RULESET, attr, len(attr), 0), "create_ruleset")
    try:
        read_rights = _EXECUTE | _READ_FILE | _READ_DIR
        for path in read:
            _allow(libc, ruleset, path, read_rights)
        for path in write:
            _allow(libc, ruleset, path, fs)
        _check(libc.syscall(_RESTRICT_SELF, ruleset, 0), "restrict_self")
    finally:
        os.close(ruleset)
    return {"tcp": bool(net), "scopes": bool(scoped)}


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        rule = struct.pack("=Qi", rights, fd)
        _check(libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0), f"rule {path}")
    finally:
        os.close(fd)
