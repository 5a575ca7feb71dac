"""An extractor that attacks from inside the parse child, as code a crafted file took over would.

Every attack goes through raw libc calls via `ctypes` (``open``, ``read``,
``socket``, ``ptrace``, ``kill``, ``fork``...), never through Python's own
wrappers, so a Python-level guard (a patched `socket.socket`, an audit hook)
proves nothing here: only what the kernel refuses counts.

The payload is a JSON object naming the targets (the application's pid, a
secret file, directories to write into, a Unix socket to reach); the text the
extractor returns is a JSON report, one entry per attack: ``"ok"`` (or data)
when the attack worked, ``"errno=NAME"`` when the kernel refused it. Like
`hostile._probes`, this module is imported by the worker at start-up, so
the test puts ``tests`` on the path while the pool starts.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
from typing import Any

_O_RDONLY, _O_WRONLY, _O_CREAT, _O_DIRECTORY = 0, 1, 0o100, 0o200000
_PTRACE_ATTACH = 16
_AF = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10, "AF_NETLINK": 16, "AF_PACKET": 17,
       "AF_VSOCK": 40, "AF_ALG": 38, "AF_BLUETOOTH": 31, "AF_XDP": 44}
_SOCK_STREAM, _SOCK_DGRAM, _SOCK_RAW = 1, 2, 3
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNS = 0x00020000

_libc = ctypes.CDLL(None, use_errno=True)


def _err() -> str:
    code = ctypes.get_errno()
    return f"errno={errno.errorcode.get(code, code)}"


def _read(path: str, limit: int = 4096) -> str:
    fd = _libc.open(path.encode(), _O_RDONLY)
    if fd < 0:
        return _err()
    buffer = ctypes.create_string_buffer(limit)
    count = _libc.read(fd, buffer, limit)
    _libc.close(fd)
    if count < 0:
        return _err()
    return "read:" + buffer.raw[:count].decode("utf-8", "replace")


def _list(path: str) -> str:
    fd = _libc.open(path.encode(), _O_RDONLY | _O_DIRECTORY)
    if fd < 0:
        return _err()
    _libc.close(fd)
    return "ok"


def _readlink(path: str) -> str:
    buffer = ctypes.create_string_buffer(4096)
    count = _libc.readlink(path.encode(), buffer, 4096)
    return _err() if count < 0 else "read:" + buffer.raw[:count].decode("utf-8", "replace")


def _write(path: str) -> str:
    fd = _libc.open(path.encode(), _O_WRONLY | _O_CREAT, 0o644)
    if fd < 0:
        return _err()
    _libc.write(fd, b"pwned", 5)
    _libc.close(fd)
    return "ok"


def _socket(family: int, kind: int) -> tuple[str, int]:
    fd = _libc.socket(family, kind, 0)
    return (_err(), -1) if fd < 0 else ("ok", fd)


class _SockaddrUn(ctypes.Structure):
    _fields_ = [("sun_family", ctypes.c_ushort), ("sun_path", ctypes.c_char * 108)]


def _connect_unix(path: bytes) -> str:
    outcome, fd = _socket(_AF["AF_UNIX"], _SOCK_STREAM)
    if fd < 0:
        return "socket " + outcome
    address = _SockaddrUn(_AF["AF_UNIX"], path)
    size = 2 + len(path) + (0 if path.startswith(b"\0") else 1)
    result = _libc.connect(fd, ctypes.byref(address), size)
    outcome = _err() if result != 0 else "ok"
    _libc.close(fd)
    return outcome


def _syscall_result(result: int) -> str:
    return _err() if result != 0 else "ok"


def _fork_bomb(limit: int) -> str:
    """Fork children that wait forever until the kernel says no; report how many it allowed."""
    made = 0
    for _ in range(limit):
        pid = _libc.fork()
        if pid == 0:
            while True:
                _libc.pause()
        if pid < 0:
            return f"stopped after {made}: {_err()}"
        made += 1
    return f"made {made}"


def _exhaust_fds(limit: int) -> str:
    opened = 0
    for _ in range(limit):
        if _libc.open(b"/dev/null", _O_RDONLY) < 0:
            return f"stopped after {opened}: {_err()}"
        opened += 1
    return f"opened {opened}"


def attack(targets: dict[str, Any]) -> dict[str, str]:
    """Run every attack against `targets`; the report says what the kernel allowed."""
    app = int(targets["app_pid"])
    # Inside its own PID namespace the child is pid 1 and its parent is pid 0 (outside):
    # the zygote is aimed at by the pid the application knows it by.
    zygote = int(targets.get("zygote_pid") or os.getppid())
    report: dict[str, str] = {"uid": str(os.getuid()), "pid": str(os.getpid())}
    for who, pid in (("app", app), ("zygote", zygote), ("init", 1)):
        if pid == os.getpid():
            continue  # itself: the init of its own namespace
        report[f"{who}_environ"] = _read(f"/proc/{pid}/environ")
        report[f"{who}_cmdline"] = _read(f"/proc/{pid}/cmdline")
        report[f"{who}_maps"] = _read(f"/proc/{pid}/maps")
        report[f"{who}_cwd"] = _readlink(f"/proc/{pid}/cwd")
        report[f"{who}_fds"] = _list(f"/proc/{pid}/fd")
        report[f"{who}_mem"] = _read(f"/proc/{pid}/mem", 16)
        report[f"{who}_ptrace"] = _syscall_result(_libc.ptrace(_PTRACE_ATTACH, pid, None, None))
        report[f"{who}_signal0"] = _syscall_result(_libc.kill(pid, 0))
    report["proc_listing"] = ",".join(sorted(
        name for name in os.listdir("/proc") if name.isdigit())) if _list("/proc") == "ok" \
        else _list("/proc")
    report["shadow"] = _read("/etc/shadow")
    report["secret"] = _read(targets["secret"])
    report["app_cwd_listing"] = _list(targets["app_cwd"])
    report["ssh_dir"] = _list(targets["ssh_dir"])
    for name, directory in targets["write_into"].items():
        report[f"write_{name}"] = _write(os.path.join(directory, targets["write_name"]))
    report["write_scratch"] = _write(os.path.join(os.environ["TMPDIR"], "mine.txt"))
    for family in _AF:
        for kind_name, kind in (("stream", _SOCK_STREAM), ("dgram", _SOCK_DGRAM),
                                ("raw", _SOCK_RAW)):
            outcome, fd = _socket(_AF[family], kind)
            if fd >= 0:
                _libc.close(fd)
            report[f"socket_{family}_{kind_name}"] = outcome
    report["unix_path_connect"] = _connect_unix(targets["unix_socket"].encode())
    report["unix_abstract_connect"] = _connect_unix(b"\0" + targets["abstract_socket"].encode())
    report["unshare_user"] = _syscall_result(_libc.unshare(_CLONE_NEWUSER))
    report["unshare_mount"] = _syscall_result(_libc.unshare(_CLONE_NEWNS))
    report["setuid_root"] = _syscall_result(_libc.setuid(0))
    report["mount_tmpfs"] = _syscall_result(
        _libc.mount(b"tmpfs", os.environ["TMPDIR"].encode(), b"tmpfs", 0, None))
    report["fds"] = _exhaust_fds(int(targets.get("fd_attempts", 4096)))
    report["fork_bomb"] = _fork_bomb(int(targets.get("fork_attempts", 2000)))
    # Last, the loud ones: if these worked, the pool would lose its worker.
    report["kill_zygote"] = _syscall_result(_libc.kill(zygote, signal.SIGKILL))
    report["kill_init"] = "self" if os.getpid() == 1 else \
        _syscall_result(_libc.kill(1, signal.SIGKILL))
    report["kill_app"] = _syscall_result(_libc.kill(app, signal.SIGCONT))
    return report


class AttackExtractor:
    """Runs `attack` on a JSON payload; any other payload is echoed as text."""

    kinds = frozenset({"text", "markdown", "csv", "json"})

    def extract(self, kind: str, media_type: str | None, payload: bytes, *, max_pages: int) -> str:
        """Attack, or echo."""
        if payload.startswith(b"{"):
            return json.dumps(attack(json.loads(payload)))
        return payload.decode("utf-8", "replace")
