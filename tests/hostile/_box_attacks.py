"""Attacks on the sealed box: what a taken-over parser tries so that something outlives its file.

`BoxAttackExtractor` plays a parser that a crafted file has taken over, like
`hostile._attacks.AttackExtractor`, but each payload names one attack:
``{"attack": NAME, ...arguments}``. The attack runs inside the parse child with
raw syscalls through `ctypes` (numbers per `platform.machine()`, x86_64 and
aarch64), and the extracted text is a JSON report of what the kernel let it do.
Success strings start with ``"ok"``; a refusal is ``"errno=NAME"``; an attempt
whose process the kernel killed (a seccomp ``KILL`` action) is
``"killed:SIGNAME"``; ``"absent: ..."`` means there was nothing to aim at.

Attempts that a seccomp filter may answer by killing the process run in a
forked helper (`_contained`), so one refusal does not lose the whole report.

The module also holds `memory_matches`, the scanner the tests use from the
host to look for tenant markers in the zygote's and the spare's memory, the
same way the ``scan_self`` attack looks in the child's own memory.

Like `hostile._probes`, this module is imported by the worker when it starts,
so the test puts ``tests`` on the path while the pool runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import platform
import re
import signal
import stat
import struct
import time
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["BoxAttackExtractor", "marker_patterns", "memory_matches", "text_marker"]

_SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "shmget": 29, "shmat": 30, "shmctl": 31, "socket": 41, "sendto": 44, "sendmsg": 46,
        "socketpair": 53, "kill": 62, "shmdt": 67, "msgget": 68, "msgsnd": 69, "msgrcv": 70,
        "msgctl": 71, "fcntl": 72, "flock": 73, "ptrace": 101, "setpgid": 109, "setsid": 112,
        "getpgid": 121, "personality": 135, "setpriority": 141, "mount": 165, "umount2": 166,
        "setxattr": 188, "sched_setaffinity": 203, "fadvise64": 221, "mq_open": 240,
        "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243, "add_key": 248,
        "keyctl": 250, "ioprio_set": 251, "inotify_add_watch": 254, "mknodat": 259,
        "fchmodat": 268, "unshare": 272, "utimensat": 280, "inotify_init1": 294,
        "perf_event_open": 298, "fanotify_init": 300, "prlimit64": 302, "setns": 308,
        "memfd_create": 319, "userfaultfd": 323, "preadv2": 327, "pwritev2": 328,
        "io_uring_setup": 425, "pidfd_open": 434, "pidfd_getfd": 438,
    },
    "aarch64": {  # the generic table (include/uapi/asm-generic/unistd.h)
        "setxattr": 5, "fcntl": 25, "inotify_init1": 26, "inotify_add_watch": 27,
        "ioprio_set": 30, "flock": 32, "mknodat": 33, "umount2": 39, "mount": 40,
        "fchmodat": 53, "utimensat": 88, "personality": 92, "unshare": 97, "ptrace": 117,
        "sched_setaffinity": 122, "kill": 129, "setpriority": 140, "setpgid": 154,
        "getpgid": 155, "setsid": 157, "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182,
        "mq_timedreceive": 183, "msgget": 186, "msgctl": 187, "msgrcv": 188, "msgsnd": 189,
        "shmget": 194, "shmctl": 195, "shmat": 196, "shmdt": 197, "socket": 198,
        "socketpair": 199, "sendto": 206, "sendmsg": 211, "add_key": 217, "keyctl": 219,
        "fadvise64": 223, "perf_event_open": 241, "prlimit64": 261, "fanotify_init": 262,
        "setns": 268, "memfd_create": 279, "userfaultfd": 282, "preadv2": 286,
        "pwritev2": 287, "io_uring_setup": 425, "pidfd_open": 434, "pidfd_getfd": 438,
    },
}
_NR = _SYSCALLS.get(platform.machine(), {})

MiB = 1024 * 1024
_AT_FDCWD = -100
_O_RDONLY, _O_WRONLY, _O_RDWR = 0, 1, 2
_O_CREAT, _O_EXCL, _O_TRUNC, _O_NONBLOCK = 0o100, 0o200, 0o1000, 0o4000
_O_DIRECTORY, _O_CLOEXEC, _O_NOCTTY = 0o200000, 0o2000000, 0o400
_IPC_CREAT, _IPC_NOWAIT = 0o1000, 0o4000
_RLIMIT_CPU, _RLIMIT_FSIZE, _RLIMIT_NPROC, _RLIMIT_NOFILE, _RLIMIT_AS = 0, 1, 6, 7, 9
_RLIM_INFINITY = (1 << 64) - 1
_PR_SET_NAME = 15
_FAMILIES = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10, "AF_NETLINK": 16, "AF_PACKET": 17,
             "AF_BLUETOOTH": 31, "AF_ALG": 38, "AF_VSOCK": 40, "AF_XDP": 44}
_SOCK_STREAM, _SOCK_DGRAM, _SOCK_RAW = 1, 2, 3
_MSG_DONTWAIT = 0x40
_SURVIVOR_NAME = b"box-survivor"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


# --------------------------------------------------------------------------- raw calls


def _arg(value: Any) -> Any:
    if value is None:
        return ctypes.c_void_p(None)
    if isinstance(value, bytes):
        return ctypes.c_char_p(value)
    if isinstance(value, int):
        return ctypes.c_long(value)
    return value


def _sys(name: str, *args: Any) -> int:
    """The raw syscall `name`; -1 with errno set on failure (ENOSYS if this arch lacks it)."""
    number = _NR.get(name)
    if number is None:
        ctypes.set_errno(errno.ENOSYS)
        return -1
    ctypes.set_errno(0)
    return int(_libc.syscall(ctypes.c_long(number), *(_arg(a) for a in args)))


def _err() -> str:
    code = ctypes.get_errno()
    return f"errno={errno.errorcode.get(code, code)}"


def _ok(result: int) -> str:
    return "ok" if result >= 0 else _err()


def _open(path: str, flags: int, mode: int = 0o600) -> int:
    ctypes.set_errno(0)
    return int(_libc.open(path.encode(), flags, mode))


def _close(fd: int) -> None:
    if fd >= 0:
        _libc.close(fd)


def _write(fd: int, data: bytes) -> int:
    ctypes.set_errno(0)
    return int(_libc.write(fd, data, len(data)))


def _read(fd: int, size: int) -> bytes | None:
    buffer = ctypes.create_string_buffer(size)
    ctypes.set_errno(0)
    count = int(_libc.read(fd, buffer, size))
    return None if count < 0 else buffer.raw[:count]


def _read_file(path: str, size: int = 1 << 16, flags: int = _O_RDONLY) -> bytes | None:
    fd = _open(path, flags)
    if fd < 0:
        return None
    try:
        return _read(fd, size)
    finally:
        _close(fd)


def _name(name: bytes) -> None:
    _libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)


def _contained(attempt: Callable[[], str]) -> str:
    """Run one attempt in a forked helper; a helper the kernel kills reports its signal."""
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return attempt()
    if pid == 0:
        try:
            os.close(read_fd)
            try:
                result = attempt()
            except BaseException as exc:
                result = f"raised {type(exc).__name__}: {exc}"
            os.write(write_fd, result.encode("utf-8", "replace")[:8000])
        finally:
            os._exit(0)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 65536):
        chunks.append(chunk)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and not chunks:
        return f"killed:{signal.Signals(os.WTERMSIG(status)).name}"
    return b"".join(chunks).decode("utf-8", "replace")


def _capsa_pids() -> list[int]:
    """Pids this process can see whose name says they are capsa's (a spare, a parse child)."""
    found = []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                comm = _read_file(f"/proc/{entry}/comm") or b""
                if comm.startswith(b"capsa-"):
                    found.append(int(entry))
    return found


# ---------------------------------------------------------------------- tenant markers


def text_marker(payload_marker: str, prefix: str) -> str:
    """The marker a file's extracted text carries: derived in the child, never in its payload."""
    return prefix + hashlib.sha256(payload_marker.encode()).hexdigest()[:32]


def marker_patterns(prefix: str) -> list[tuple[str, re.Pattern[bytes]]]:
    """Markers (`prefix` + 32 hex digits) as Python may hold them: 1, 2 or 4 bytes a char."""
    patterns = []
    for codec, width in (("ascii", 1), ("utf-16-le", 2), ("utf-32-le", 4)):
        pad = re.escape(b"\0" * (width - 1))
        patterns.append((codec, re.compile(re.escape(prefix.encode(codec))
                                           + b"(?:[0-9a-f]" + pad + b"){32}")))
    return patterns


def _regions(pid: int | str) -> list[tuple[int, int, str, str]]:
    with open(f"/proc/{pid}/maps") as maps:
        lines = maps.read().splitlines()
    regions = []
    for line in lines:
        fields = line.split(maxsplit=5)
        start, end = (int(part, 16) for part in fields[0].split("-"))
        path = fields[5].strip() if len(fields) > 5 else ""
        if fields[1].startswith("r") and path not in ("[vvar]", "[vsyscall]", "[vvar_vclock]"):
            regions.append((start, end, fields[1], path))
    return regions


def _scan(chunks: Iterable[bytes], patterns: list[tuple[str, re.Pattern[bytes]]],
          found: set[str]) -> int:
    scanned = 0
    for chunk in chunks:
        scanned += len(chunk)
        for codec, pattern in patterns:
            found.update(match.decode(codec) for match in pattern.findall(chunk))
    return scanned


def memory_matches(pid: int | str, prefix: str) -> tuple[set[str], int, int]:
    """Markers found in the readable memory of `pid`, bytes scanned, regions unreadable.

    Reads ``/proc/PID/maps`` and ``/proc/PID/mem`` region by region, in
    overlapping chunks so no marker is missed at a chunk's edge.
    """
    patterns = marker_patterns(prefix)
    overlap = 4 * (len(prefix) + 32)
    found: set[str] = set()
    scanned = unreadable = 0
    fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    try:
        for start, end, _, _ in _regions(pid):
            def chunks(start: int = start, end: int = end) -> Iterable[bytes]:
                at = start
                while at < end:
                    size = min(end - at, 8 * MiB)
                    yield os.pread(fd, size + min(overlap, end - at - size), at)
                    at += size
            try:
                scanned += _scan(chunks(), patterns, found)
            except OSError:
                unreadable += 1
    finally:
        os.close(fd)
    return found, scanned, unreadable


def _scan_self(args: dict[str, Any]) -> dict[str, Any]:
    """Look through this child's own (inherited) memory for earlier tenants' markers."""
    prefix = "".join(args["prefix_parts"])
    try:
        found, scanned, unreadable = memory_matches("self", prefix)
        how = "/proc/self/mem"
    except OSError as exc:  # no /proc/self/mem: read anonymous memory by address instead
        how = f"by address ({type(exc).__name__})"
        found, scanned, unreadable = set(), 0, 0
        patterns = marker_patterns(prefix)
        for start, end, perms, path in _regions("self"):
            if "w" in perms and (path in ("", "[heap]", "[stack]") or path.startswith("[anon")):
                scanned += _scan([ctypes.string_at(start, end - start)], patterns, found)
    return {"how": how, "found": sorted(found)[:200], "scanned": scanned,
            "unreadable": unreadable}


def _echo_marker(args: dict[str, Any]) -> dict[str, Any]:
    return {"text_marker": text_marker(args["marker"], args["prefix"])}


# ------------------------------------------------------------------------------ IPC


class _MsgBuf(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 256)]


def _ipc_plant(args: dict[str, Any]) -> dict[str, Any]:
    """Leave a marker in SysV shm, a SysV queue, a POSIX queue and POSIX shm."""
    key, name, marker = int(args["key"]), str(args["name"]), str(args["marker"]).encode()
    report: dict[str, Any] = {}
    shmid = _sys("shmget", key, int(args["shm_size"]), _IPC_CREAT | 0o666)
    report["sysv_shm"] = _ok(shmid)
    if shmid >= 0:
        address = _sys("shmat", shmid, None, 0)
        if address == -1:
            report["sysv_shm"] = "shmat " + _err()
        else:
            ctypes.memmove(address, marker, len(marker))
            _sys("shmdt", address)
    qid = _sys("msgget", key, _IPC_CREAT | 0o666)
    report["sysv_msg"] = _ok(qid)
    if qid >= 0:
        message = _MsgBuf(1, marker)
        report["sysv_msg"] = _ok(_sys("msgsnd", qid, ctypes.byref(message), len(marker),
                                      _IPC_NOWAIT))
    mqd = _sys("mq_open", name.encode(), _O_CREAT | _O_RDWR, 0o666, None)
    report["posix_mqueue"] = _ok(mqd)
    if mqd >= 0:
        report["posix_mqueue"] = _ok(_sys("mq_timedsend", mqd, marker, len(marker), 0, None))
    fd = _open(f"/dev/shm/{name}", _O_CREAT | _O_RDWR, 0o666)
    report["posix_shm"] = _ok(fd)
    if fd >= 0:
        report["posix_shm"] = _ok(_write(fd, marker))
        _close(fd)
    return report


def _ipc_find(args: dict[str, Any]) -> dict[str, Any]:
    """Look for what `_ipc_plant` left: ``"ok:<data>"`` when something was there."""
    key, name = int(args["key"]), str(args["name"])
    report: dict[str, Any] = {}
    shmid = _sys("shmget", key, 0, 0)
    report["sysv_shm"] = _err() if shmid < 0 else "ok:found"
    if shmid >= 0:
        address = _sys("shmat", shmid, None, 0o10000)  # SHM_RDONLY
        if address != -1:
            report["sysv_shm"] = "ok:" + ctypes.string_at(address, 64).split(b"\0")[0].decode(
                "ascii", "replace")
            _sys("shmdt", address)
    qid = _sys("msgget", key, 0)
    report["sysv_msg"] = _err() if qid < 0 else "ok:found"
    if qid >= 0:
        message = _MsgBuf()
        count = _sys("msgrcv", qid, ctypes.byref(message), 256, 0, _IPC_NOWAIT)
        if count >= 0:
            report["sysv_msg"] = "ok:" + message.mtext[:count].decode("ascii", "replace")
    mqd = _sys("mq_open", name.encode(), _O_RDONLY | _O_NONBLOCK, 0, None)
    report["posix_mqueue"] = _err() if mqd < 0 else "ok:found"
    if mqd >= 0:
        buffer = ctypes.create_string_buffer(1 << 16)
        count = _sys("mq_timedreceive", mqd, buffer, 1 << 16, None, None)
        if count >= 0:
            report["posix_mqueue"] = "ok:" + buffer.raw[:count].decode("ascii", "replace")
    data = _read_file(f"/dev/shm/{name}")
    report["posix_shm"] = _err() if data is None else "ok:" + data.decode("ascii", "replace")
    report["sysvipc_shm_keys"] = _sysvipc_keys("shm", args.get("keys", [key]))
    report["sysvipc_msg_keys"] = _sysvipc_keys("msg", [key])
    return report


def _sysvipc_keys(kind: str, keys: list[int]) -> str | list[list[int]]:
    """This namespace's view of `/proc/sysvipc/<kind>`: [key, size or bytes] of `keys`."""
    data = _read_file(f"/proc/sysvipc/{kind}", 1 << 20)
    if data is None:
        return _err()
    wanted = {int(k) for k in keys}
    rows = []
    for line in data.decode().splitlines()[1:]:
        fields = line.split()
        if fields and int(fields[0]) in wanted:
            rows.append([int(fields[0]), int(fields[3])])
    return rows


def _shm_hog(args: dict[str, Any]) -> dict[str, Any]:
    """Create SysV segments, touch each while attached, detach and leave them allocated."""
    touched, outcomes = 0, []
    size = int(args["segment_bytes"])
    for index in range(int(args["segments"])):
        shmid = _sys("shmget", int(args["key_base"]) + index, size, _IPC_CREAT | 0o666)
        if shmid < 0:
            outcomes.append("shmget " + _err())
            break
        address = _sys("shmat", shmid, None, 0)
        if address == -1:
            outcomes.append("shmat " + _err())
            break
        ctypes.memset(address, 0x5A, size)
        touched += size
        _sys("shmdt", address)
    return {"touched": touched, "outcomes": outcomes}


def _memfd_hog(args: dict[str, Any]) -> dict[str, Any]:
    """Fill anonymous memory files: pages no process maps, counted in no RSS.

    A file-size limit stops one memory file, so a new one is opened whenever
    a write is refused with EFBIG, as an attacker would.
    """
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    chunk = b"\x5a" * MiB
    written, stops, files = 0, [], 0
    fd = -1
    while written < int(args["bytes"]) and files <= 64:
        if fd < 0:
            fd = _sys("memfd_create", b"box-hog", 1)  # MFD_CLOEXEC, kept open until exit
            if fd < 0:
                stops.append("memfd_create " + _err())
                break
            files += 1
        count = _write(fd, chunk)
        if count <= 0:
            stops.append(_err())
            if not stops[-1].endswith("EFBIG"):
                break
            fd = -1
            continue
        written += count
    return {"memfds": files, "written": written, "stops": sorted(set(stops))}


# ------------------------------------------------------------------------ processes


def _sleep_as_survivor(seconds: float) -> None:
    _name(_SURVIVOR_NAME)
    time.sleep(seconds)


def _hunt(spared: set[int]) -> None:
    """Lower the address-space limit of the next tenant's process, found by guessing pids.

    A pid answers `getpgid`; it is hit when its name is capsa's or cannot be read
    (a ``/proc`` that hides it), never when the name says it is something else,
    so on a machine without PID namespaces the test runner itself is left alone.
    """
    limit = (ctypes.c_uint64 * 2)(16 * MiB, 16 * MiB)
    for pid in range(2, 400):
        if pid in spared or _sys("getpgid", pid) < 0:
            continue
        comm = _read_file(f"/proc/{pid}/comm")
        if comm is None or comm.startswith(b"capsa-"):
            _sys("prlimit64", pid, _RLIMIT_AS, ctypes.byref(limit), None)


def _reforker(seconds: float, hunt: bool, spared: set[int]) -> None:
    """Re-fork forever (the parent exits each time), each generation in a session of its
    own, so neither a process-group kill nor a sweep of one pid list catches it."""
    end = time.monotonic() + seconds
    _name(_SURVIVOR_NAME)
    while time.monotonic() < end:
        try:
            if os.fork() > 0:
                os._exit(0)
        except OSError:  # out of processes (the exited generations wait to be reaped)
            time.sleep(0.01)
        _sys("setsid")
        if hunt:
            _hunt(spared | {os.getpid()})
        time.sleep(0.002)  # paced, so it is still re-forking when the file's sweep comes
    os._exit(0)


def _fork_into(body: Callable[[], None]) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            body()
        finally:
            os._exit(0)
    return pid


def _survivors(args: dict[str, Any]) -> dict[str, Any]:
    """Start processes meant to outlive the file, then answer at once."""
    seconds = float(args.get("seconds", 30))
    me = os.getpid()
    report: dict[str, Any] = {"child": me}

    def new_session() -> None:
        _sys("setsid")
        _sleep_as_survivor(seconds)

    def new_group() -> None:
        _sys("setpgid", 0, 0)
        _sleep_as_survivor(seconds)

    report["reforkers"] = [_fork_into(lambda: _reforker(seconds, bool(args.get("hunt")), {me}))
                           for _ in range(3)]
    report["setsid_sleeper"] = _fork_into(new_session)
    report["setpgid_sleeper"] = _fork_into(new_group)
    return report


def _probe_pids(args: dict[str, Any]) -> dict[str, Any]:
    """Which pids can this child name (getpgid) and read the limits of (prlimit64)?"""
    me = os.getpid()
    spares = _capsa_pids()
    candidates = sorted(set(range(1, int(args.get("upto", 400)) + 1)) | set(spares))
    visible, limits_readable = [], []
    old = (ctypes.c_uint64 * 2)()
    for pid in candidates:
        if pid == me:
            continue
        if _sys("getpgid", pid) >= 0:
            visible.append(pid)
        if _sys("prlimit64", pid, _RLIMIT_AS, None, ctypes.byref(old)) >= 0:
            limits_readable.append(pid)
    return {"self": me, "capsa_pids": spares, "visible": visible, "prlimit": limits_readable}


def _allocate(args: dict[str, Any]) -> dict[str, Any]:
    """A good file that needs memory inside its limit: proves no one lowered it."""
    block = bytearray(int(args["mib"]) * MiB)
    block[::4096] = b"\x01" * len(block[::4096])
    return {"allocated_mib": int(args["mib"])}


def _cpu_burn(args: dict[str, Any]) -> dict[str, Any]:
    """Busy processes, each under the per-process CPU limit, the parent idle."""
    per_process = float(args["per_process_cpu_s"])
    deadline = time.monotonic() + float(args.get("deadline_s", 25))

    def burn() -> None:
        while time.process_time() < per_process and time.monotonic() < deadline:
            pass

    pids = [_fork_into(burn) for _ in range(int(args["processes"]))]
    signals = []
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            signals.append(signal.Signals(os.WTERMSIG(status)).name)
    usage = os.times()
    return {"processes": len(pids), "signals": signals,
            "children_cpu_s": round(usage.children_user + usage.children_system, 2)}


def _fork_bomb(args: dict[str, Any]) -> dict[str, Any]:
    made = 0
    for _ in range(int(args.get("attempts", 5000))):
        ctypes.set_errno(0)
        pid = _libc.fork()
        if pid == 0:
            while True:
                _libc.pause()
        if pid < 0:
            return {"made": made, "stopped": _err()}
        made += 1
    return {"made": made, "stopped": ""}


def _kill_all(args: dict[str, Any]) -> dict[str, Any]:
    return {"kill_all": _ok(_sys("kill", -1, signal.SIGKILL))}


# --------------------------------------------------------------------------- scratch


def _scratch() -> str:
    return os.environ.get("TMPDIR") or "/tmp"


def _scratch_fill(args: dict[str, Any]) -> dict[str, Any]:
    """Many files, each within the per-file size limit, together far over it."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death
    size, chunk = int(args["size"]), b"\x5a" * 65536
    written, stops = 0, []
    for index in range(int(args["files"])):
        fd = _open(os.path.join(_scratch(), f"{args['prefix']}{index}"),
                   _O_WRONLY | _O_CREAT | _O_TRUNC)
        if fd < 0:
            stops.append("open " + _err())
            continue
        here = 0
        while here < size:
            count = _write(fd, chunk[:size - here])
            if count <= 0:
                stops.append("write " + _err())
                break
            here += count
        _close(fd)
        written += here
    return {"tmpdir": _scratch(), "written": written, "stops": sorted(set(stops))}


def _inode_fill(args: dict[str, Any]) -> dict[str, Any]:
    made, stopped = 0, ""
    base = os.path.join(_scratch(), str(args["prefix"]))
    deadline = time.monotonic() + float(args.get("seconds", 4))
    for index in range(int(args["count"])):
        if time.monotonic() > deadline:
            stopped = "its own deadline, never refused"
            break
        fd = _open(f"{base}{index}", _O_WRONLY | _O_CREAT | _O_EXCL)
        if fd < 0:
            stopped = _err()
            break
        _close(fd)
        made += 1
    return {"tmpdir": _scratch(), "made": made, "stopped": stopped}


def _deep_tree(args: dict[str, Any]) -> dict[str, Any]:
    """Nest directories by descriptor, so no path ever grows past PATH_MAX."""
    fd = _open(_scratch(), _O_RDONLY | _O_DIRECTORY)
    if fd < 0:
        return {"tmpdir": _scratch(), "made": 0, "stopped": "open " + _err()}
    made, stopped, name = 0, "", str(args["name"]).encode()
    for _ in range(int(args["depth"])):
        if _libc.mkdirat(fd, name, 0o700) != 0:
            stopped = _err()
            break
        inner = int(_libc.openat(fd, name, _O_RDONLY | _O_DIRECTORY))
        _close(fd)
        if inner < 0:
            stopped = "openat " + _err()
            fd = -1
            break
        fd = inner
        made += 1
    _close(fd)
    return {"tmpdir": _scratch(), "made": made, "stopped": stopped}


# ------------------------------------------------------------------- reaching outside


class _SockaddrUn(ctypes.Structure):
    _fields_ = [("sun_family", ctypes.c_ushort), ("sun_path", ctypes.c_char * 108)]


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32),
                ("iov", ctypes.POINTER(_Iovec)), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


def _socket_fds() -> dict[str, int]:
    """Every socket this child can get: new ones, a pair, and any it inherited."""
    fds: dict[str, int] = {}
    fd = _sys("socket", _FAMILIES["AF_UNIX"], _SOCK_DGRAM, 0)
    if fd >= 0:
        fds["socket"] = fd
    pair = (ctypes.c_int * 2)()
    if _sys("socketpair", _FAMILIES["AF_UNIX"], _SOCK_DGRAM, 0, pair) >= 0:
        fds["socketpair"] = pair[0]
    for inherited in range(256):
        with contextlib.suppress(OSError):
            if inherited not in fds.values() and stat.S_ISSOCK(os.fstat(inherited).st_mode):
                fds[f"inherited_{inherited}"] = inherited
    return fds


def _unix_send(args: dict[str, Any]) -> dict[str, Any]:
    """Datagrams to a socket on disk, without connect(): plain, and carrying a descriptor."""
    path, tag = str(args["path"]).encode(), str(args["tag"])
    address = _SockaddrUn(_FAMILIES["AF_UNIX"], path)
    size = 2 + len(path) + 1
    report: dict[str, Any] = {"new_socket": _ok(_sys("socket", 1, _SOCK_DGRAM, 0))}
    passed = _open("/dev/null", _O_RDONLY)
    for how, fd in _socket_fds().items():
        data = f"{tag}:sendto:{how}".encode()
        report[f"sendto_{how}"] = _ok(_sys("sendto", fd, data, len(data), _MSG_DONTWAIT,
                                           ctypes.byref(address), size))
        data = f"{tag}:sendmsg:{how}".encode()
        payload = ctypes.create_string_buffer(data, len(data))
        iov = _Iovec(ctypes.cast(payload, ctypes.c_void_p), len(data))
        control = ctypes.create_string_buffer(24)
        struct.pack_into("=Qiii", control, 0, 20, 1, 1, passed)  # SOL_SOCKET, SCM_RIGHTS
        header = _Msghdr(ctypes.cast(ctypes.pointer(address), ctypes.c_void_p), size,
                         ctypes.pointer(iov), 1, ctypes.cast(control, ctypes.c_void_p), 24, 0)
        report[f"sendmsg_{how}"] = _ok(_sys("sendmsg", fd, ctypes.byref(header), _MSG_DONTWAIT))
    return report


def _sockets(args: dict[str, Any]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for family, number in _FAMILIES.items():
        for kind_name, kind in (("stream", _SOCK_STREAM), ("dgram", _SOCK_DGRAM),
                                ("raw", _SOCK_RAW)):
            fd = _sys("socket", number, kind, 0)
            report[f"{family}_{kind_name}"] = _ok(fd)
            _close(fd)
    pair = (ctypes.c_int * 2)()
    report["socketpair"] = _ok(_sys("socketpair", 1, _SOCK_STREAM, 0, pair))
    return report


def _inotify(args: dict[str, Any]) -> dict[str, Any]:
    """Watch the application's directory; names seen there would be other tenants' files."""
    report: dict[str, Any] = {"names": []}
    fd = _sys("inotify_init1", _O_NONBLOCK)
    report["inotify_init"] = _ok(fd)
    if fd >= 0:
        watch = _sys("inotify_add_watch", fd, str(args["directory"]).encode(), 0xFFF)
        report["inotify_add_watch"] = _ok(watch)
        end = time.monotonic() + float(args.get("seconds", 1.5))
        names: set[str] = set()
        while watch >= 0 and time.monotonic() < end:
            data = _read(fd, 65536)
            while data:
                _, _, _, length = struct.unpack_from("=iIII", data)
                names.add(data[16:16 + length].split(b"\0")[0].decode("utf-8", "replace"))
                data = data[16 + length:]
            time.sleep(0.05)
        report["names"] = sorted(names)[:100]
    else:
        report["inotify_add_watch"] = "absent: no inotify instance"
    report["fanotify_init"] = _ok(_sys("fanotify_init", 0x200, _O_RDONLY))  # FAN_REPORT_FID
    return report


def _prlimit_others(args: dict[str, Any]) -> dict[str, Any]:
    """Read, then rewrite unchanged, the descriptor limit of the zygote and of pid 1."""
    me = os.getpid()
    report: dict[str, Any] = {"self": me}
    targets = {"parent": os.getppid(), "pid1": 1, "zygote_host_pid": int(args["zygote_pid"])}
    for who, pid in targets.items():
        if pid == 0:
            report[who] = "absent: no such process in sight"
            continue
        if pid == me:
            report[who] = "absent: that pid is this child itself"
            continue
        old = (ctypes.c_uint64 * 2)()
        if _sys("prlimit64", pid, _RLIMIT_NOFILE, None, ctypes.byref(old)) < 0:
            report[who] = "get " + _err()
            continue
        result = _sys("prlimit64", pid, _RLIMIT_NOFILE, ctypes.byref(old), None)
        report[who] = "ok:get and set" if result >= 0 else "ok:get only; set " + _err()
    return report


def _metadata(args: dict[str, Any]) -> dict[str, Any]:
    path = str(args["path"]).encode()
    return {
        "chmod": _ok(_sys("fchmodat", _AT_FDCWD, path, 0o777, 0)),
        "utimensat": _ok(_sys("utimensat", _AT_FDCWD, path, None, 0)),
        "setxattr": _ok(_sys("setxattr", path, b"user.capsa", b"pwned", 5, 0)),
    }


# ----------------------------------------------------------------- invented attacks


def _write_new(path: str) -> str:
    fd = _open(path, _O_WRONLY | _O_CREAT | _O_EXCL, 0o666)
    if fd < 0:
        return _err()
    result = _write(fd, b"box")
    _close(fd)
    return _ok(result)


def _write_existing(path: str, data: bytes) -> str:
    fd = _open(path, _O_WRONLY)
    if fd < 0:
        return _err()
    result = _write(fd, data)
    _close(fd)
    return _ok(result)


def _open_for_writing(path: str) -> str:
    """Open only (never write): enough to show the kernel would let it through."""
    fd = _open(path, _O_WRONLY)
    _close(fd)
    return _ok(fd)


_OTHERS: dict[str, int] = {}
"""The processes a child might aim at: its parent (the zygote today) and pid 1, with the
parse child's own pid as ``self``; filled by `_misc` before any helper forks."""


def _on_others(call: Callable[[int], int]) -> str:
    results = []
    for who, pid in _OTHERS.items():
        if who == "self" or pid in (0, _OTHERS["self"]):
            continue
        result = call(pid)
        results.append(f"ok:{who}" if result >= 0 else f"{_err()}:{who}")
    ok = [r for r in results if r.startswith("ok")]
    return ";".join(ok) if ok else (";".join(results) or "absent: no other process in sight")


def _ptrace_own_child() -> str:
    pid = _fork_into(lambda: time.sleep(5))
    result = _ok(_sys("ptrace", 16, pid, None, None))  # PTRACE_ATTACH
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return result


def _ptrace_capsa() -> str:
    pids = _capsa_pids()
    if not pids:
        return "absent: no capsa process in sight"
    results = [_ok(_sys("ptrace", 0x4206, pid, None, None)) for pid in pids]  # PTRACE_SEIZE
    ok = [r for r in results if r == "ok"]
    return "ok" if ok else ";".join(sorted(set(results)))


def _pidfd_getfd() -> str:
    results = []
    for pid in [_OTHERS["parent"], _OTHERS["pid1"], *_capsa_pids()]:
        if pid in (0, _OTHERS["self"]):
            continue
        pidfd = _sys("pidfd_open", pid, 0)
        if pidfd < 0:
            results.append("pidfd_open " + _err())
            continue
        for target in range(3):
            if _sys("pidfd_getfd", pidfd, target, 0) >= 0:
                return f"ok:stole fd {target} of {pid}"
        results.append(_err())
    return ";".join(sorted(set(results))) or "absent: no other process in sight"


def _cgroup_escape() -> str:
    """Try to move into an ancestor cgroup (any ``cgroup.procs`` above this one)."""
    mine, candidates = set(), {"/sys/fs/cgroup/cgroup.procs"}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/sys/fs/cgroup"):
            candidates.add(f"/sys/fs/cgroup/{entry}/cgroup.procs")
    for line in (_read_file("/proc/self/cgroup") or b"").decode().splitlines():
        _, controllers, path = line.split(":", 2)
        mine.add(path)
        mounts = [f"/sys/fs/cgroup/{c.removeprefix('name=')}" for c in controllers.split(",")
                  if c] or ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        parts = [part for part in path.split("/") if part]
        for depth in range(len(parts)):  # every ancestor, never the cgroup itself
            for mount in mounts:
                candidates.add("/".join([mount, *parts[:depth], "cgroup.procs"]))
    results = []
    for path in sorted(candidates):
        fd = _open(path, _O_WRONLY)
        if fd < 0:
            results.append(_err())
            continue
        written = _write(fd, str(os.getpid()).encode())
        _close(fd)
        if written > 0:
            return f"ok:moved into {path} (own cgroups {sorted(mine)})"
        results.append("open ok, write " + _err())
    return ";".join(sorted(set(results)))


def _personality() -> str:
    wanted = 0x0400000 | 0x0040000  # READ_IMPLIES_EXEC | ADDR_NO_RANDOMIZE
    if _sys("personality", wanted) < 0:
        return _err()
    now = _sys("personality", 0xFFFFFFFF)
    return "ok" if now >= 0 and now & wanted == wanted else "errno=ignored"


def _raise_hard_limits() -> str:
    raised, results = [], []
    for name, resource_id in (("RLIMIT_AS", _RLIMIT_AS), ("RLIMIT_CPU", _RLIMIT_CPU),
                              ("RLIMIT_NPROC", _RLIMIT_NPROC), ("RLIMIT_FSIZE", _RLIMIT_FSIZE),
                              ("RLIMIT_NOFILE", _RLIMIT_NOFILE)):
        old = (ctypes.c_uint64 * 2)()
        _sys("prlimit64", 0, resource_id, None, ctypes.byref(old))
        if old[1] == _RLIM_INFINITY:
            results.append(f"unlimited:{name}")
            continue
        new = (ctypes.c_uint64 * 2)(old[0], old[1] * 2 + MiB)
        if _sys("prlimit64", 0, resource_id, ctypes.byref(new), None) >= 0:
            raised.append(name)
        else:
            results.append(f"{_err()}:{name}")
    return f"ok:raised {','.join(raised)}" if raised else ";".join(results)


def _raise_oom_score(pid: int) -> int:
    """Make another process the out-of-memory killer's first choice."""
    fd = _open(f"/proc/{pid}/oom_score_adj", _O_WRONLY)
    return -1 if fd < 0 else _write(fd, b"1000")


def _join_ipc_namespace(pid: int) -> int:
    fd = _open(f"/proc/{pid}/ns/ipc", _O_RDONLY)
    return -1 if fd < 0 else _sys("setns", fd, 0x08000000)  # CLONE_NEWIPC


def _misc(args: dict[str, Any]) -> dict[str, Any]:
    """Many small attempts, each in its own helper process."""
    name, scratch = str(args["name"]), _scratch()
    _OTHERS.update(parent=os.getppid(), pid1=1, self=os.getpid())
    affinity = ctypes.c_ulong(1)
    perf_attr = ctypes.create_string_buffer(128)
    struct.pack_into("=II", perf_attr, 0, 1, 128)  # PERF_TYPE_SOFTWARE, size
    ring_params = ctypes.create_string_buffer(120)
    attempts: dict[str, Callable[[], str]] = {
        "write_dev_shm": lambda: _write_new(f"/dev/shm/{name}"),
        "write_dev_mqueue": lambda: _write_new(f"/dev/mqueue/{name}"),
        "oom_score_adj_self_lowered": lambda: _write_existing("/proc/self/oom_score_adj",
                                                              b"-1000"),
        "oom_score_adj_of_others": lambda: _on_others(_raise_oom_score),
        "setpriority_of_others": lambda: _on_others(
            lambda pid: _sys("setpriority", 0, pid, 19)),
        "setpriority_of_the_users_processes": lambda: _ok(_sys("setpriority", 2, 0, 1)),
        "sched_setaffinity_of_others": lambda: _on_others(
            lambda pid: _sys("sched_setaffinity", pid, ctypes.sizeof(affinity),
                             ctypes.byref(affinity))),
        "ioprio_set_of_others": lambda: _on_others(
            lambda pid: _sys("ioprio_set", 1, pid, 3 << 13)),
        "ioprio_set_of_the_users_processes": lambda: _ok(_sys("ioprio_set", 3, 0, 3 << 13)),
        "keyctl_add_key": lambda: _ok(_sys("add_key", b"user", b"capsa-box", b"secret", 6,
                                           -4)),  # KEY_SPEC_USER_KEYRING
        "keyctl_join_session_keyring": lambda: _ok(_sys("keyctl", 1, None)),
        "userfaultfd": lambda: _ok(_sys("userfaultfd", _O_CLOEXEC | _O_NONBLOCK)),
        "userfaultfd_user_mode_only": lambda: _ok(_sys("userfaultfd",
                                                       _O_CLOEXEC | _O_NONBLOCK | 1)),
        "io_uring_setup": lambda: _ok(_sys("io_uring_setup", 4, ring_params)),
        "perf_event_open": lambda: _ok(_sys("perf_event_open", perf_attr, 0, -1, -1, 0)),
        "ptrace_own_child": _ptrace_own_child,
        "ptrace_capsa_processes": _ptrace_capsa,
        "pidfd_getfd_of_others": _pidfd_getfd,
        "mount_tmpfs": lambda: _ok(_sys("mount", b"tmpfs", scratch.encode(), b"tmpfs", 0,
                                        None)),
        "umount_scratch": lambda: _ok(_sys("umount2", scratch.encode(), 2)),  # MNT_DETACH
        "mknod_char_device": lambda: _ok(_sys("mknodat", _AT_FDCWD,
                                              f"{scratch}/{name}-null".encode(),
                                              stat.S_IFCHR | 0o666, 0x103)),
        "mknod_block_device": lambda: _ok(_sys("mknodat", _AT_FDCWD,
                                               f"{scratch}/{name}-sda".encode(),
                                               stat.S_IFBLK | 0o666, 0x800)),
        "open_proc_sys_core_pattern": lambda: _open_for_writing("/proc/sys/kernel/core_pattern"),
        "open_proc_sys_drop_caches": lambda: _open_for_writing("/proc/sys/vm/drop_caches"),
        "open_proc_sysrq_trigger": lambda: _open_for_writing("/proc/sysrq-trigger"),
        "cgroup_escape": _cgroup_escape,
        "personality": _personality,
        "raise_own_hard_limits": _raise_hard_limits,
        "setns_into_others_ipc": lambda: _on_others(_join_ipc_namespace),
        "unshare_ipc": lambda: _ok(_sys("unshare", 0x08000000)),
        "unshare_pid": lambda: _ok(_sys("unshare", 0x20000000)),
    }
    return {key: _contained(attempt) for key, attempt in attempts.items()}


def _writable_channels() -> list[int]:
    """Descriptors this child could answer on: pipes and sockets open for writing."""
    found = []
    for fd in range(3, 256):
        with contextlib.suppress(OSError):
            mode = os.fstat(fd).st_mode
            if (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)) and \
                    _libc.fcntl(fd, 3) & 3 in (_O_WRONLY, _O_RDWR):  # F_GETFL
                found.append(fd)
    return found


def _reply_fill(args: dict[str, Any]) -> dict[str, Any]:
    """Fill every channel back to the application with garbage, then never exit."""
    for fd in _writable_channels():
        _libc.fcntl(fd, 4, _libc.fcntl(fd, 3) | _O_NONBLOCK)  # F_SETFL
        while _write(fd, b"\xff" * 65536) > 0:
            pass
    while True:
        _libc.pause()


def _reply_hold(args: dict[str, Any]) -> dict[str, Any]:
    """Leave half an answer, hand the channel to a process in its own session, and die."""
    channels = _writable_channels()
    if args.get("partial"):
        for fd in channels:
            _write(fd, b"\x00\x00\x00\x00\x00\x00\x00\x64{\"ok\": \"")

    def hold() -> None:
        _sys("setsid")
        _sleep_as_survivor(float(args.get("seconds", 30)))

    _fork_into(hold)
    os._exit(0)


def _flock_hold(args: dict[str, Any]) -> dict[str, Any]:
    """Lock a shared file and hand the lock to processes meant to outlive the file."""
    fd = _open(str(args["path"]), _O_RDONLY)
    if fd < 0:
        return {"open": _err(), "flock": "absent: not opened"}
    result = _ok(_sys("flock", fd, 2 | 4))  # LOCK_EX | LOCK_NB
    if result == "ok":
        seconds = float(args.get("seconds", 30))
        for _ in range(3):
            _fork_into(lambda: _reforker(seconds, False, set()))

        def hold() -> None:
            _sys("setsid")
            _sleep_as_survivor(seconds)

        _fork_into(hold)
    return {"open": "ok", "flock": result}


# ------------------------------------------------------------ red team (test_redteam.py)


_CLONE3_NR = {"x86_64": 435, "aarch64": 435}.get(platform.machine())
_CAPGET_NR = {"x86_64": 125, "aarch64": 90}.get(platform.machine())
_CLONE_NR = {"x86_64": 56, "aarch64": 220}.get(platform.machine())
_NAMESPACE_FLAGS = {"user": 0x10000000, "mount": 0x00020000, "net": 0x40000000,
                    "pid": 0x20000000, "ipc": 0x08000000, "uts": 0x04000000,
                    "cgroup": 0x02000000}


class _CloneArgs(ctypes.Structure):
    """``struct clone_args`` (version 2, 88 bytes): clone3 reads its flags from memory."""

    _fields_ = [(name, ctypes.c_uint64) for name in (
        "flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack", "stack_size",
        "tls", "set_tid", "set_tid_size", "cgroup")]


_REPORT_FD = [-1]
"""Where `_new_process_reports` writes (set just before each clone call)."""


def _new_process_reports() -> None:
    """In a process a clone call just made: its uid and effective capabilities, then exit."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, itself
    data = (ctypes.c_uint32 * 6)()
    if _CAPGET_NR is not None:
        _libc.syscall(ctypes.c_long(_CAPGET_NR), ctypes.byref(header), ctypes.byref(data))
    os.write(_REPORT_FD[0], f"ok:uid={os.getuid()} caps={data[3]:x}{data[0]:08x}".encode())
    os._exit(0)


def _made_by(call: Callable[[], int]) -> str:
    """Run a raw clone call; what the process it made reported, or the errno."""
    read_fd, write_fd = os.pipe()
    _REPORT_FD[0] = write_fd
    ctypes.set_errno(0)
    pid = call()
    if pid == 0:
        _new_process_reports()
    result = _err() if pid < 0 else ""
    os.close(write_fd)
    if pid > 0:
        result = os.read(read_fd, 200).decode("ascii", "replace") or "ok:made, said nothing"
        os.waitpid(pid, 0)
    os.close(read_fd)
    return result


def _clone3(flags: int) -> str:
    if _CLONE3_NR is None:
        return "absent: no clone3 number for this architecture"
    args = _CloneArgs(flags=flags, exit_signal=signal.SIGCHLD)
    return _made_by(lambda: int(_libc.syscall(ctypes.c_long(_CLONE3_NR), ctypes.byref(args),
                                              ctypes.c_size_t(ctypes.sizeof(args)))))


def _clone3_of(flags: int) -> Callable[[], str]:
    return lambda: _clone3(flags)


def _clone(flags: int) -> str:
    if _CLONE_NR is None:
        return "absent: no clone number for this architecture"
    return _made_by(lambda: int(_libc.syscall(ctypes.c_long(_CLONE_NR),
                                              ctypes.c_ulong(flags | signal.SIGCHLD),
                                              None, None, None, None)))


def _thread_starts() -> str:
    import threading

    ran: list[str] = []
    thread = threading.Thread(target=lambda: ran.append("ok"))
    thread.start()
    thread.join(5)
    return ran[0] if ran else "the thread never ran"


def _subprocess_runs() -> str:
    import subprocess

    return f"exit {subprocess.run(['/bin/true'], check=False, timeout=10).returncode}"


def _clone3_namespaces(args: dict[str, Any]) -> dict[str, Any]:
    """Make namespaces through ``clone3``, whose flags a seccomp filter cannot read.

    The legacy ``clone`` with the same flags is the control: its flags are an
    argument the filter checks. A process made in a new user namespace holds
    every capability there. Last, a thread and a subprocess, which glibc starts
    with ``clone3`` first and ``clone`` when ``clone3`` is not there.
    """
    every = 0
    for flag in _NAMESPACE_FLAGS.values():
        every |= flag
    attempts: dict[str, Callable[[], str]] = {
        "clone_user": lambda: _clone(_NAMESPACE_FLAGS["user"]),
        "clone3_plain": lambda: _clone3(0),
        "clone3_user_and_every_namespace": lambda: _clone3(every),
        "thread": _thread_starts,
        "subprocess": _subprocess_runs,
    }
    attempts.update({f"clone3_{name}": _clone3_of(flag)
                     for name, flag in _NAMESPACE_FLAGS.items()})
    return {key: _contained(attempt) for key, attempt in attempts.items()}


def _read_paths(args: dict[str, Any]) -> dict[str, Any]:
    """Read each of `paths`: ``"ok:<first bytes>"``, ``"ok:opened; read errno=..."`` (a
    directory, a device with nothing to say), or the errno of the open.

    With `nonblocking`, each is opened ``O_NONBLOCK | O_NOCTTY``, so a terminal or a
    device that waits for data cannot hold the child.
    """
    flags = _O_RDONLY | (_O_NONBLOCK | _O_NOCTTY if args.get("nonblocking") else 0)
    report: dict[str, Any] = {}
    for path in args["paths"]:
        fd = _open(str(path), flags)
        if fd < 0:
            report[path] = _err()
            continue
        data = _read(fd, 200)
        report[path] = f"ok:opened; read {_err()}" if data is None else \
            "ok:" + data.decode("utf-8", "replace")
        _close(fd)
    return report


def _stat_paths(args: dict[str, Any]) -> dict[str, Any]:
    """What the child learns of paths it may not read: ``stat``, ``access`` and ``readlink``
    (none of them a Landlock right), and the mount points ``/proc/self/mountinfo`` lists.

    Each of `paths` maps to ``{"stat": ..., "access": ..., "readlink": ...}``: ``"ok:..."``
    with what the call told, or the errno. ``root_dev`` is the device of ``/``, so a
    directory the minimal root holds only on the way to a read root can be told apart.
    """
    report: dict[str, Any] = {}
    for path in args["paths"]:
        entry: dict[str, str] = {}
        try:
            info = os.lstat(path)
        except OSError as exc:
            entry["stat"] = f"errno={errno.errorcode.get(exc.errno or 0, exc.errno)}"
        else:
            entry["stat"] = (f"ok:size={info.st_size} uid={info.st_uid} dev={info.st_dev} "
                             f"mtime={int(info.st_mtime)}")
        entry["access"] = _ok(_libc.access(str(path).encode(), 0))
        try:
            entry["readlink"] = "ok:" + os.readlink(path)
        except OSError as exc:
            entry["readlink"] = f"errno={errno.errorcode.get(exc.errno or 0, exc.errno)}"
        report[path] = entry
    try:
        with open("/proc/self/mountinfo") as mounts:
            report["mountinfo"] = [line.split()[4] for line in mounts]
    except OSError as exc:
        report["mountinfo"] = f"errno={errno.errorcode.get(exc.errno or 0, exc.errno)}"
    report["root_dev"] = os.stat("/").st_dev
    return report


def _identity(args: dict[str, Any]) -> dict[str, Any]:
    """What the child learns of the machine's name, and whether it can change it."""
    name = os.uname()
    proc = _read_file("/proc/sys/kernel/hostname", 200)
    etc = _read_file("/etc/hostname", 200)
    wanted = b"renamed-by-a-parser"
    return {
        "nodename": name.nodename,
        "proc_hostname": _err() if proc is None else "ok:" + proc.decode("utf-8", "replace"),
        "etc_hostname": _err() if etc is None else "ok:" + etc.decode("utf-8", "replace"),
        "sethostname": _contained(lambda: _ok(_libc.sethostname(wanted, len(wanted)))),
    }


# ----------------------------------------------------- red team, round 2 (test_redteam.py)


def _descriptors() -> list[list[str | int]]:
    """Every descriptor this child holds: [fd, what it is, how it is open]."""
    found: list[list[str | int]] = []
    for fd in range(1024):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        access = {_O_RDONLY: "r", _O_WRONLY: "w", _O_RDWR: "rw"}.get(_libc.fcntl(fd, 3) & 3, "?")
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = "?"
        kind = "fifo" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else \
            "device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else \
            "directory" if stat.S_ISDIR(mode) else "file"
        found.append([fd, f"{kind}:{target}", access])
    return found


def _status_lines(path: str, keys: tuple[str, ...]) -> dict[str, str]:
    lines = (_read_file(path, 1 << 16) or b"").decode("utf-8", "replace").splitlines()
    return {key: line.split(":", 1)[1].strip() for line in lines
            for key in keys if line.startswith(key + ":")}


def _threads() -> dict[str, dict[str, str]]:
    """Each thread's seccomp mode and no_new_privs, from its own status file."""
    report: dict[str, dict[str, str]] = {}
    with contextlib.suppress(OSError):
        for tid in os.listdir("/proc/self/task"):
            report[tid] = _status_lines(f"/proc/self/task/{tid}/status",
                                        ("Seccomp", "NoNewPrivs"))
    return report


_RLIMITS = {"RLIMIT_RTPRIO": 14, "RLIMIT_NICE": 13, "RLIMIT_SIGPENDING": 11,
            "RLIMIT_MSGQUEUE": 12, "RLIMIT_MEMLOCK": 8, "RLIMIT_NPROC": _RLIMIT_NPROC,
            "RLIMIT_NOFILE": _RLIMIT_NOFILE, "RLIMIT_CORE": 4}


def _rlimits() -> dict[str, list[int]]:
    """Soft and hard limit of each of `_RLIMITS` (-1: unlimited)."""
    found: dict[str, list[int]] = {}
    for name, number in _RLIMITS.items():
        old = (ctypes.c_uint64 * 2)()
        if _sys("prlimit64", 0, number, None, ctypes.byref(old)) < 0:
            found[name] = [-2, -2]
            continue
        found[name] = [-1 if value == _RLIM_INFINITY else int(value) for value in old]
    return found


def _realtime_priority() -> str:
    param = ctypes.c_int(1)
    ctypes.set_errno(0)
    return _ok(int(_libc.sched_setscheduler(0, 1, ctypes.byref(param))))  # SCHED_FIFO


def _raised_priority() -> str:
    ctypes.set_errno(0)
    return _ok(int(_libc.setpriority(0, 0, -1)))  # PRIO_PROCESS, itself, nice -1


def _inheritance(args: dict[str, Any]) -> dict[str, Any]:
    """What the child holds from the zygote and the application when its parse begins.

    Its descriptors, its shared writable mappings (a page the zygote and every
    later child would see too), each thread's seccomp state, the limits an
    application may have raised, its own environment as the kernel keeps it, and
    whether those limits let it raise its priority or its privileges.
    """
    shared = []
    with contextlib.suppress(OSError):
        for start, end, perms, path in _regions("self"):
            if perms[1] == "w" and perms[3] == "s":
                shared.append(f"{start:x}-{end:x} {perms} {path}")
    environ = _read_file("/proc/self/environ", 1 << 16)
    return {
        "descriptors": _descriptors(),
        "shared_writable": shared,
        "threads": _threads(),
        "rlimits": _rlimits(),
        "environ": _err() if environ is None else
        "ok:" + environ.replace(b"\0", b"\n").decode("utf-8", "replace"),
        "realtime_priority": _contained(_realtime_priority),
        "raised_priority": _contained(_raised_priority),
        "prctl_set_mm": _contained(lambda: _ok(int(_libc.prctl(35, 1, 0x400000, 0, 0)))),
        "prctl_cap_ambient_raise": _contained(
            lambda: _ok(int(_libc.prctl(47, 2, 21, 0, 0)))),  # CAP_SYS_ADMIN
    }


def _pending_signals(args: dict[str, Any]) -> dict[str, Any]:
    """Queue real-time signals to itself, blocked, as many as the kernel takes.

    ``kill`` succeeds even once nothing more is queued, so the count comes from the
    kernel's own ``SigQ`` line: queued / the limit. The count is kept per user,
    and a pool that is not root runs the child as the application's uid.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
    refused = ""
    for _ in range(int(args["attempts"])):
        if _sys("kill", os.getpid(), int(signal.SIGRTMIN)) < 0:
            refused = _err()
            break
    queued, _, limit = _status_lines("/proc/self/status", ("SigQ",)).get("SigQ", "-1/-1") \
        .partition("/")
    return {"queued": int(queued), "limit": int(limit), "refused": refused}


class _Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


def _hold_objects(fill: int) -> dict[str, int]:
    """Fill this process's descriptors with kernel objects: pipes (each given `fill`
    bytes, or as many as it takes), eventfds, armed timerfds and epoll instances
    watching the rest; counts of each."""
    import select

    counts = {"pipes": 0, "pipe_bytes": 0, "eventfds": 0, "timerfds": 0, "epolls": 0}
    held: list[int] = []
    pollers: list[Any] = []  # kept: an epoll object closes its descriptor when collected
    tick = (_Timespec * 2)(_Timespec(0, 1_000_000), _Timespec(0, 1_000_000))
    chunk = b"\x5a" * 65536
    with contextlib.suppress(OSError):
        while True:
            read_fd, write_fd = os.pipe2(os.O_NONBLOCK)
            held += [read_fd, write_fd]
            counts["pipes"] += 1
            put = 0
            with contextlib.suppress(OSError):  # full: EAGAIN
                while put < fill:
                    put += os.write(write_fd, chunk[:fill - put])
            counts["pipe_bytes"] += put
            held.append(os.eventfd(0))
            counts["eventfds"] += 1
            timer = int(_libc.timerfd_create(1, _O_NONBLOCK))  # CLOCK_MONOTONIC
            if timer < 0:
                break
            _libc.timerfd_settime(timer, 0, ctypes.byref(tick), None)
            held.append(timer)
            counts["timerfds"] += 1
            poller = select.epoll()
            counts["epolls"] += 1
            for fd in held:
                with contextlib.suppress(OSError):
                    poller.register(fd, select.EPOLLIN)
            pollers.append(poller)
            held.append(poller.fileno())
    return counts


def _hoard(args: dict[str, Any]) -> dict[str, Any]:
    """Kernel objects no mapping holds, in as many processes as the limits allow, each
    holding them until the file ends; then threads, until refused. Each pipe gets
    `fill` bytes."""
    import threading

    fill = int(args.get("fill", 4096))

    report_r, report_w = os.pipe()
    made, stopped = 0, ""
    for _ in range(int(args["processes"])):
        try:
            pid = os.fork()
        except OSError as exc:
            stopped = f"fork errno={errno.errorcode.get(exc.errno or 0, exc.errno)}"
            break
        if pid == 0:
            try:
                os.close(report_r)
                os.write(report_w, json.dumps(_hold_objects(fill)).encode() + b"\n")
                while True:
                    _libc.pause()
            finally:
                os._exit(0)
        made += 1
    os.close(report_w)
    lines: list[bytes] = []
    buffer = b""
    while len(lines) < made and (chunk := os.read(report_r, 65536)):
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        lines += complete
    os.close(report_r)
    totals: dict[str, int] = {}
    for line in lines:
        for key, value in json.loads(line).items():
            totals[key] = totals.get(key, 0) + int(value)
    gate = threading.Event()
    threads = 0
    with contextlib.suppress(RuntimeError):
        for _ in range(int(args.get("threads", 256))):
            threading.Thread(target=gate.wait, daemon=True).start()
            threads += 1
    gate.set()
    return {"processes": made, "stopped": stopped, "threads": threads, **totals}


def _reply_twice(args: dict[str, Any]) -> dict[str, Any]:
    """Answer on every channel back to the application once per text in `texts`: the
    first for this file, the rest meant for whatever file the application reads next.
    The child's own reply follows them."""
    from capsa.guard.sandbox import protocol

    channels = _writable_channels()
    for fd in channels:
        for text in args["texts"]:
            _write(fd, protocol.encode_reply({"ok": True}, str(text), []))
    return {"channels": len(channels)}


def _layout(args: dict[str, Any]) -> dict[str, Any]:
    """Where libc's code and the heap are in this child: what an exploit needs to know."""
    heap = [f"{start:x}" for start, _, _, path in _regions("self") if path == "[heap]"]
    return {"libc": f"{ctypes.cast(_libc.printf, ctypes.c_void_p).value:x}", "heap": heap}


# ------------------------------------------- red team, round 16 (test_shared_state.py)


_F_GETFL, _F_SETFL, _F_SETSIG, _F_GETSIG = 3, 4, 10, 11
_F_OFD_GETLK, _F_OFD_SETLK = 36, 37
_F_SETLEASE, _F_NOTIFY = 1024, 1026
_F_RDLCK, _F_WRLCK, _F_UNLCK = 0, 1, 2
_O_APPEND = 0o2000
_LOCK_EX, _LOCK_NB = 2, 4
_DN_CREATE, _DN_DELETE, _DN_MULTISHOT = 0x4, 0x8, 0x80000000
_POSIX_FADV_SEQUENTIAL, _POSIX_FADV_DONTNEED = 2, 4
_RWF_NOWAIT = 0x8
_FIONREAD = 0x541B


class _Flock(ctypes.Structure):
    """``struct flock`` of a 64-bit kernel: a byte range, and who holds it (``F_OFD_GETLK``)."""

    _fields_ = [("type", ctypes.c_short), ("whence", ctypes.c_short),
                ("start", ctypes.c_int64), ("len", ctypes.c_int64), ("pid", ctypes.c_int)]


def _plant_on_standard_fds(args: dict[str, Any]) -> dict[str, Any]:
    """Leave state on the open file descriptions behind fds 1 and 2.

    An exclusive ``flock`` and an OFD write lock on byte `value` of fd 1, the owner
    signal `sig` and ``O_APPEND | O_NONBLOCK`` on fd 2. All four belong to the
    description, not the process: on a description the zygote also holds they outlive
    the file, for the host to trip over and the next file to read.
    """
    lock = _Flock(_F_WRLCK, 0, int(args["value"]), 1, 0)
    report = {"flock": _ok(_sys("flock", 1, _LOCK_EX | _LOCK_NB)),
              "ofd_lock": _ok(_sys("fcntl", 1, _F_OFD_SETLK, ctypes.byref(lock))),
              "owner_signal": _ok(_sys("fcntl", 2, _F_SETSIG, int(args["sig"])))}
    flags = _sys("fcntl", 2, _F_GETFL)
    report["status_flags"] = _err() if flags < 0 else \
        _ok(_sys("fcntl", 2, _F_SETFL, flags | _O_APPEND | _O_NONBLOCK))
    return report


def _read_standard_fds(args: dict[str, Any]) -> dict[str, Any]:
    """What a file finds, as it starts, of what `_plant_on_standard_fds` leaves.

    ``flock`` is ``"ok"`` when this child could lock /dev/null itself (from a
    description of its own), ``ofd_lock`` is ``"free"`` when no one holds byte
    `value`; the owner signals and the ``O_APPEND | O_NONBLOCK`` bits of fds 1 and 2
    are 0 on a description no earlier file touched.
    """
    report: dict[str, Any] = {}
    fd = _open("/dev/null", _O_WRONLY)
    if fd < 0:
        report["flock"] = report["ofd_lock"] = "open " + _err()
    else:
        report["flock"] = _ok(_sys("flock", fd, _LOCK_EX | _LOCK_NB))
        probe = _Flock(_F_WRLCK, 0, int(args["value"]), 1, 0)
        if _sys("fcntl", fd, _F_OFD_GETLK, ctypes.byref(probe)) < 0:
            report["ofd_lock"] = _err()
        else:
            report["ofd_lock"] = "free" if probe.type == _F_UNLCK else \
                f"held: {probe.len} byte(s) at {probe.start}"
        _close(fd)
    report["owner_signal"] = [_sys("fcntl", n, _F_GETSIG) for n in (1, 2)]
    report["status_flags"] = [_sys("fcntl", n, _F_GETFL) & (_O_APPEND | _O_NONBLOCK)
                              for n in (1, 2)]
    return report


def _lease(args: dict[str, Any]) -> dict[str, Any]:
    """Take a read lease on `path`, then a write lease, held for `seconds`; watch
    `directory` with dnotify (``F_NOTIFY``).

    While a write lease is held, every other process's ``open`` of the file waits
    for the holder to let go, up to the kernel's ``lease-break-time`` (45 s). The
    kernel grants one to the file's owner: a pool that is not root runs its children
    as the application's uid, which owns the application's own read roots.
    ``uid`` is who this child is.
    """
    signal.signal(signal.SIGIO, signal.SIG_IGN)  # what a lease break sends the holder
    report: dict[str, Any] = {"uid": os.getuid()}
    if args.get("directory"):
        fd = _open(str(args["directory"]), _O_RDONLY | _O_DIRECTORY)
        report["dnotify"] = "open " + _err() if fd < 0 else \
            _ok(_sys("fcntl", fd, _F_NOTIFY, _DN_CREATE | _DN_DELETE | _DN_MULTISHOT))
        _close(fd)
    if not args.get("path"):
        return report
    fd = _open(str(args["path"]), _O_RDONLY)
    if fd < 0:
        report["write_lease"] = report["read_lease"] = "open " + _err()
        return report
    report["read_lease"] = _ok(_sys("fcntl", fd, _F_SETLEASE, _F_RDLCK))
    _sys("fcntl", fd, _F_SETLEASE, _F_UNLCK)
    report["write_lease"] = _ok(_sys("fcntl", fd, _F_SETLEASE, _F_WRLCK))
    time.sleep(float(args.get("seconds", 0)))
    _sys("fcntl", fd, _F_SETLEASE, _F_UNLCK)
    _close(fd)
    return report


def _page_cache(args: dict[str, Any]) -> dict[str, Any]:
    """Ask the page cache about `path`, then try to evict the file from it.

    ``preadv2`` with ``RWF_NOWAIT`` fails rather than wait for the disk, so it tells
    whether someone read those pages lately; ``posix_fadvise(DONTNEED)`` evicts them,
    so that a later look tells whether another tenant read them meanwhile (which of
    LibreOffice's libraries another pool's file loaded, say). ``pwritev2``, the other
    half of the pair, is tried on a scratch file; ``POSIX_FADV_SEQUENTIAL`` is the
    control, a hint parsers do give.
    """
    page = ctypes.create_string_buffer(4096)
    iov = _Iovec(ctypes.cast(page, ctypes.c_void_p), 4096)
    fd = _open(str(args["path"]), _O_RDONLY)
    if fd < 0:
        return {"open": _err()}
    report = {
        "preadv2": _ok(_sys("preadv2", fd, ctypes.byref(iov), 1, 0, 0, _RWF_NOWAIT)),
        "fadvise_sequential": _ok(_sys("fadvise64", fd, 0, 0, _POSIX_FADV_SEQUENTIAL)),
        "fadvise_dontneed": _ok(_sys("fadvise64", fd, 0, 0, _POSIX_FADV_DONTNEED)),
    }
    _close(fd)
    out = _open(os.path.join(_scratch(), "box-pwritev2"), _O_WRONLY | _O_CREAT | _O_TRUNC)
    report["pwritev2"] = "open " + _err() if out < 0 else \
        _ok(_sys("pwritev2", out, ctypes.byref(iov), 1, 0, 0, 0))
    _close(out)
    return report


def _reply_trickle(args: dict[str, Any]) -> dict[str, Any]:
    """Declare a reply of `text_bytes` and `blob_bytes`, then send it one byte at a time,
    each as soon as the application has taken the last: every byte costs the application
    a wake-up, a ``select`` and a ``read`` in Python, until the wall clock ends the file."""
    from capsa.guard.sandbox import protocol

    meta = b'{"ok": true}'  # the header alone: `encode_reply` would build the whole body
    head = protocol._HEADER.pack(protocol._MAGIC, len(meta), int(args["text_bytes"]),
                                 int(args["blob_bytes"]))
    channels = _writable_channels()
    if not channels:
        return {"sent": 0}
    fd = channels[0]
    _write(fd, head + meta)
    pending, sent = ctypes.c_int(0), 0
    total = int(args["text_bytes"]) + int(args["blob_bytes"])
    end = time.monotonic() + float(args.get("seconds", 60))
    while sent < total and time.monotonic() < end:
        while _libc.ioctl(fd, _FIONREAD, ctypes.byref(pending)) == 0 and pending.value > 0:
            os.sched_yield()  # on a busy machine, leave the application its core to wake on
        if _write(fd, b"a") != 1:
            break
        sent += 1
    return {"sent": sent}


_ATTACKS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "echo_marker": _echo_marker,
    "scan_self": _scan_self,
    "ipc_plant": _ipc_plant,
    "ipc_find": _ipc_find,
    "shm_hog": _shm_hog,
    "memfd_hog": _memfd_hog,
    "survivors": _survivors,
    "probe_pids": _probe_pids,
    "allocate": _allocate,
    "cpu_burn": _cpu_burn,
    "fork_bomb": _fork_bomb,
    "kill_all": _kill_all,
    "scratch_fill": _scratch_fill,
    "inode_fill": _inode_fill,
    "deep_tree": _deep_tree,
    "unix_send": _unix_send,
    "sockets": _sockets,
    "inotify": _inotify,
    "prlimit_others": _prlimit_others,
    "metadata": _metadata,
    "misc": _misc,
    "reply_fill": _reply_fill,
    "reply_hold": _reply_hold,
    "flock_hold": _flock_hold,
    "clone3_namespaces": _clone3_namespaces,
    "read_paths": _read_paths,
    "stat_paths": _stat_paths,
    "identity": _identity,
    "inheritance": _inheritance,
    "pending_signals": _pending_signals,
    "hoard": _hoard,
    "layout": _layout,
    "reply_twice": _reply_twice,
    "plant_on_standard_fds": _plant_on_standard_fds,
    "read_standard_fds": _read_standard_fds,
    "lease": _lease,
    "page_cache": _page_cache,
    "reply_trickle": _reply_trickle,
}
"""Every attack `BoxAttackExtractor` runs, by the name a payload gives."""


class BoxAttackExtractor:
    """Runs the attack a JSON payload names; any other payload is echoed as text."""

    kinds = frozenset({"text", "markdown", "csv", "json"})

    def extract(self, kind: str, media_type: str | None, payload: bytes, *, max_pages: int) -> str:
        """Attack, or echo."""
        if payload.startswith(b"{"):
            args = json.loads(payload)
            return json.dumps(_ATTACKS[args["attack"]](args))
        return payload.decode("utf-8", "replace")
