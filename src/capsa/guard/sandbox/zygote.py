"""The zygote: a warm broker that forks one sealed child per file and never holds a file.

Started by `IsolatedExtractor` as ``python -I -m capsa.guard.sandbox.zygote FD``
with a minimal environment (no API keys, no proxies, no cloud credentials)
and one end of a ``SOCK_SEQPACKET`` control socket at ``FD``. It reads its
start frame (the extractor, pickled by the trusted application) on stdin,
enters the worker's namespaces, imports and self-tests its extractor, and
reports ``ready``. It then keeps one *spare* forked ahead of time (see
`capsa.guard.sandbox.child`): the init of a fresh PID namespace, in a fresh
cgroup, already in mount, IPC and cgroup namespaces of its own.

Per file the application sends the file's limits with two descriptors of
pipes it made; the zygote passes both to the spare **unread**, closes its
copies, and watches: the wall clock, the file's CPU total in its cgroup, and
the child's exit. When the child ends (or is killed, which ends its PID
namespace and everything in it) the zygote reports how, on the control socket,
and forks the next spare. The payload goes from the application to the
child, and the reply from the child to the application: nothing of any
file is ever in the zygote's memory, so nothing of it is in the next
child's either. The zygote stays single-threaded, so ``fork`` is safe.

The only files the zygote parses itself are the trusted self-test samples it
is started with.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gc
import os
import pickle
import select
import signal
import socket
import stat
import struct
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from capsa.guard.sandbox import child, layers, namespaces, protocol
from capsa.guard.sandbox.cgroups import FileCgroup
from capsa.guard.sandbox.layers import CHILD_PROCESSES, SandboxPolicy

__all__ = ["main", "read_frame", "remove_tree", "serve", "write_frame"]

_LENGTH = struct.Struct(">I")
_PR_SET_NAME = 15
_PR_SET_CHILD_SUBREAPER = 36
_CPU_POLL_S = 0.05
_PROBE_LIMITS = {"timeout_s": 60.0, "cpu_s": 60, "memory_bytes": 1 << 30,
                 "max_file_write_bytes": 1 << 20, "max_scratch_files": 64}


def read_frame(stream: IO[bytes]) -> bytes | None:
    """One length-prefixed frame, or None at end of stream."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    body = stream.read(size)
    return body if len(body) == size else None


def write_frame(stream: IO[bytes], body: bytes) -> None:
    """Write one length-prefixed frame and flush."""
    stream.write(_LENGTH.pack(len(body)) + body)
    stream.flush()


class _RefusingSocket(socket.socket):
    def __init__(self, family: int = -1, *args: Any, **kwargs: Any) -> None:
        if family in (-1, socket.AF_INET, socket.AF_INET6):
            raise PermissionError(errno.EACCES, "network access is disabled in capsa's parser")
        super().__init__(family, *args, **kwargs)


def _refuse_sockets() -> None:
    """Python-level refusal too, so a parser that tries the network fails with a clear error."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(errno.EACCES, "network access is disabled in capsa's parser")

    socket.socket = _RefusingSocket  # type: ignore[misc]
    socket.create_connection = refuse
    socket.getaddrinfo = refuse


def _name_process(name: bytes) -> None:
    lib = namespaces.libc()
    if lib is not None:
        lib.prctl(_PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)


def _own_name() -> bytes:
    try:
        with open("/proc/thread-self/comm", "rb") as comm:
            return comm.read().strip()
    except OSError:
        return b"python"


class _Spare:
    """A child forked and sealed ahead of its file, waiting on its private socket."""

    def __init__(self, pid: int, sock: socket.socket, cgroup: FileCgroup | None,
                 scratch: str) -> None:
        self.pid = pid
        self.sock = sock
        self.cgroup = cgroup
        self.scratch = scratch
        self.status: int | None = None
        """The wait status, once the child has been reaped."""

    def alive(self) -> bool:
        """Whether the child still runs (reaping it, and keeping its status, if not)."""
        if self.status is not None:
            return False
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # already reaped as an orphan: gone, its status unknown
            self.status = 0
            return False
        if pid:
            self.status = status
            return False
        return True

    def run(self, limits: dict[str, Any], fds: list[int], control: socket.socket | None,
            *, probe: bool = False, meanwhile: Callable[[], None] | None = None
            ) -> dict[str, Any]:
        """Hand the file's descriptors over, watch the child, and say how it ended.

        `meanwhile` runs right after the hand-over, while the child seals
        itself and parses: the zygote forks the next spare there, so the fork
        overlaps this file instead of following it. The application reads the
        reply from the child directly, so the fork never delays an answer.
        """
        timeout_s = float(limits["timeout_s"])
        cpu_ns = int(limits["cpu_s"]) * 1_000_000_000
        cpu_start = 0
        if self.cgroup is not None:
            with contextlib.suppress(OSError, ValueError):
                self.cgroup.limit(memory_bytes=int(limits["memory_bytes"]),
                                  processes=CHILD_PROCESSES)
            with contextlib.suppress(OSError, ValueError):
                cpu_start = self.cgroup.cpu_ns()
        try:
            message = {"file": limits, "probe": probe}
            protocol.send_control(self.sock, message, fds)
        except OSError:
            pass  # the spare died while idle; its exit status says so below
        finally:
            for fd in fds:
                os.close(fd)
            self.sock.close()
        deadline = time.monotonic() + timeout_s
        if meanwhile is not None:
            meanwhile()
        cause = self._watch(deadline, cpu_start, cpu_ns, control)
        return self._end(cause, cpu_start)

    def _watch(self, deadline: float, cpu_start: int, cpu_ns: int,
               control: socket.socket | None) -> str | None:
        try:
            pidfd = os.pidfd_open(self.pid)
        except OSError:
            pidfd = -1
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return "timeout"
                watched = [fd for fd in (pidfd, control.fileno() if control else -1) if fd >= 0]
                wait = min(remaining, _CPU_POLL_S) if self.cgroup or pidfd < 0 else remaining
                ready, _, _ = select.select(watched, [], [], wait)
                if pidfd in ready or (pidfd < 0 and not self.alive()):
                    return None
                if control is not None and control.fileno() in ready:
                    message, stray = protocol.receive_control(control)
                    for fd in stray:
                        os.close(fd)
                    if message is None:
                        return "application_gone"
                    if message.get("abandon"):
                        return "abandoned"
                if self.cgroup is not None:
                    with contextlib.suppress(OSError, ValueError):
                        if self.cgroup.cpu_ns() - cpu_start > cpu_ns:
                            return "cpu"
        finally:
            if pidfd >= 0:
                os.close(pidfd)

    def _end(self, cause: str | None, cpu_start: int) -> dict[str, Any]:
        """Kill the child (its PID namespace goes with it), reap it, report, clean up."""
        if self.status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)  # without a PID namespace, its group
        if self.status is None:
            try:
                _, self.status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                self.status = 0
        status = self.status
        _reap_orphans()
        ended: dict[str, Any] = {"cause": cause}
        if os.WIFSIGNALED(status):
            ended["signal"] = os.WTERMSIG(status)
        else:
            ended["exit"] = os.WEXITSTATUS(status)
        if self.cgroup is not None:
            with contextlib.suppress(OSError, ValueError):
                ended["cpu_ms"] = (self.cgroup.cpu_ns() - cpu_start) // 1_000_000
            ended["out_of_memory"] = self.cgroup.out_of_memory()
            for _ in range(50):
                if self.cgroup.remove():
                    break
                time.sleep(0.002)
        if self.scratch != _shared_scratch():  # a host directory of its own: no tmpfs
            remove_tree(self.scratch)
        return ended

    def retire(self) -> None:
        """End an unused spare: close its socket, kill it, reap it, remove its cgroup."""
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.pid:
            self._end(None, 0)
            self.pid = 0


def _shared_scratch() -> str:
    return os.environ.get("TMPDIR", "/tmp")


def _reap_orphans() -> None:
    """Reap whatever was reparented to this zygote (it is a subreaper) and has exited."""
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return


class _Zygote:
    """The broker's state: its policy, its extractor, and how many files it has served."""

    def __init__(self, extractor: Any, policy: SandboxPolicy) -> None:
        self.extractor = extractor
        self.policy = policy
        self.files = 0
        self.ahead: _Spare | None = None
        self.pid = os.getpid()
        self.name = _own_name()

    def fork_ahead(self) -> None:
        """Fork the next file's spare now, while the current file's child works."""
        self.ahead = self.fork_spare()

    def take_ahead(self) -> _Spare:
        """The spare forked ahead (or a new one, if none was)."""
        spare, self.ahead = self.ahead, None
        return spare if spare is not None else self.fork_spare()

    def fork_spare(self) -> _Spare:
        """A new spare: its cgroup, its PID namespace, its socket, then the fork."""
        self.files += 1
        cgroup: FileCgroup | None = None
        if self.policy.cgroups is not None:
            with contextlib.suppress(OSError):
                cgroup = self.policy.cgroups.file(self.files)
        lib = namespaces.libc()
        per_file = self.policy.per_file_namespaces and lib is not None
        if per_file and lib is not None and \
                namespaces.new_pid_namespace(lib, self.policy.own_pid_namespace) is not None:
            per_file = False
        scratch = _shared_scratch() if per_file else _private_scratch(self.policy)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        _name_process(child.SPARE_NAME)  # so the spare is born with its name
        try:
            pid = os.fork()
            if pid == 0:
                _close_all_but(theirs.fileno())
                if not per_file:
                    os.setpgid(0, 0)
                child.run(self.extractor, theirs, scratch, self.pid, self.policy, cgroup)
        finally:
            if os.getpid() == self.pid:
                _name_process(self.name)
        theirs.close()
        return _Spare(pid, ours, cgroup, scratch)

    def probe(self) -> dict[str, str]:
        """Seal one child exactly as a file's, and report the layers the kernel granted.

        The report comes from the kernel's answers in a real child, not from
        what the zygote intended, so ``capsa doctor`` and
        `IsolatedExtractor.health` show what a parser actually runs under.
        """
        if self.policy.mode == "off":
            return {"network_namespace": "off: sandbox='off'"}
        spare = self.fork_spare()
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        os.close(request_write)
        spare.run(dict(_PROBE_LIMITS), [request_read, reply_write], None, probe=True)
        reader = protocol.ReplyReader(max_text_bytes=0, max_blob_bytes=0)
        states: dict[str, Any] = {}
        try:
            while reader.read_from(reply_read):
                pass
            if reader.complete:
                states = protocol.decode_meta(reader.meta()).get("states", {})
        except protocol.ProtocolError as exc:
            states = {"error": f"the sandbox probe sent a broken report: {exc}"}
        finally:
            os.close(reply_read)
        if not states:
            states = {"error": "the sandbox probe died before it reported"}
        for name, detail in self.policy.namespaces.items():
            states.setdefault(name, detail)
        return {str(k): str(v) for k, v in states.items()}


def _minimal_root(policy: SandboxPolicy, lib: ctypes.CDLL | None) -> str | None:
    """Pivot the zygote into a root of only what parsers read (`namespaces.enter_minimal_root`).

    Every file's mount namespace is then a copy of it. None where the sandbox is off.
    The worker's cgroup directories are bound in as mount points (at
    `WorkerCgroups.places`, so no child reads the application's cgroup path in its
    ``mountinfo``), so the worker cannot remove them itself when it ends; the
    application does (`pool._remove_cgroups`).
    """
    if policy.mode == "off" or lib is None:
        return None
    if policy.namespaces.get("mount_namespace") != "worker":
        return "unavailable: the worker has no mount namespace of its own"
    writable = [_shared_scratch()]
    places: dict[str, str] = {}
    if policy.cgroups is not None:
        writable += list(policy.cgroups.roots)
        places = dict(zip(policy.cgroups.roots, policy.cgroups.places(), strict=True))
    try:
        state = namespaces.enter_minimal_root(lib, read=policy.read_roots, writable=writable,
                                              places=places)
    except OSError as exc:  # after the pivot: the old root still shows
        return f"unavailable: {exc}"
    if policy.cgroups is not None and state.startswith("active"):
        policy.cgroups = policy.cgroups.relocated()
    return state


def _private_scratch(policy: SandboxPolicy) -> str:
    """A host directory for one file, where the child cannot have a tmpfs of its own."""
    import tempfile

    scratch = tempfile.mkdtemp(prefix="file-")
    if policy.as_root and policy.mode != "off":
        os.chown(scratch, policy.child_uid, policy.child_uid)
    return scratch


def _close_all_but(keep: int) -> None:
    """In a new spare: close every descriptor the zygote holds except 0-2 and `keep`."""
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)


def remove_tree(path: str) -> None:
    """Delete `path` and everything under it without recursion; never raises.

    A crafted tree thousands of directories deep breaks `shutil.rmtree`
    (Python's recursion limit), and a walk that keeps a descriptor per level
    runs out of descriptors. This one holds two at most: it descends by
    name, climbs back through ``..``, and remembers the directories it could
    not empty, so it never enters one twice. Depth costs a list of names.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        current = os.open(path, flags)
    except OSError:
        return
    names: list[str] = []
    stuck: set[tuple[int, int]] = set()
    try:
        while True:
            child = _next_directory(current, stuck)
            if child is not None:
                try:
                    below = os.open(child, flags, dir_fd=current)
                except OSError:
                    with contextlib.suppress(OSError):
                        info = os.lstat(child, dir_fd=current)
                        stuck.add((info.st_dev, info.st_ino))
                    continue
                os.close(current)
                current = below
                names.append(child)
                continue
            if not names:
                break
            here = os.fstat(current)
            parent = os.open("..", flags, dir_fd=current)
            os.close(current)
            current = parent
            name = names.pop()
            try:
                os.rmdir(name, dir_fd=current)
            except OSError:
                stuck.add((here.st_dev, here.st_ino))
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            os.close(current)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _next_directory(directory: int, stuck: set[tuple[int, int]]) -> str | None:
    """Unlink every non-directory in `directory`; the name of a subdirectory left to empty."""
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    if (info.st_dev, info.st_ino) not in stuck:
                        return entry.name
                    continue
                os.unlink(entry.name, dir_fd=directory)
            except OSError:
                continue
    return None


_WARM_ORDER = ("pdf", "png", "html", "rtf", "pptx", "epub", "eml", "docx", "xlsx")
"""The order a lazy zygote warms kinds in while idle: quickest to import first."""


def _kinds(extractor: Any) -> frozenset[str]:
    return frozenset(str(kind) for kind in getattr(extractor, "kinds", ()))


def _refork(zygote: _Zygote, spare: _Spare) -> _Spare:
    """A spare forked after the zygote warmed another parser (the old one lacks it)."""
    # what the test imported is shared copy-on-write from now on; frozen, as at start
    gc.collect()
    gc.freeze()
    spare.retire()
    return zygote.fork_spare()


def _self_test(extractor: Any, kind: str | None) -> dict[str, str]:
    """Import and self-test `extractor` (every kind, or only `kind`); never raises.

    One kind is tested on its trusted sample, as the extractors' own
    self-tests do; a kind without a sample runs the self-test of the
    extractor its router sends it to (or of `extractor` itself).
    """
    try:
        if kind is not None:
            from capsa.guard.samples import SAMPLES

            sample = SAMPLES.get(kind)
            if sample is not None:
                parsed = extractor.extract(kind, None, sample(), max_pages=5)
                text = parsed if isinstance(parsed, str) else parsed.text
                return {kind: "ok" if "capsa" in text.lower()
                        else f"sample text missing: {text[:200]!r}"}
            extractor = getattr(extractor, "routes", {}).get(kind, extractor)
        test = getattr(extractor, "self_test", None)
        if test is None:
            return {} if kind is None else {kind: "ok"}
        report = {str(k): str(v) for k, v in test().items()}
        return report if kind is None or kind in report else {**report, kind: "ok"}
    except ImportError as exc:  # an extra not installed, not a parser that lost
        return {kind or "*": f"missing_extra: {exc}"}
    except BaseException as exc:  # noqa: BLE001 - a self-test reports, never raises
        if getattr(exc, "reason", None) == "missing_extra":  # IngestionRejected, by duck type
            return {kind or "*": f"missing_extra: {getattr(exc, 'detail', exc)}"}
        return {kind or "*": f"{type(exc).__name__}: {exc}"}


def serve(start: IO[bytes], control: socket.socket) -> None:
    """Read the start frame, warm up, then broker one file per control message until EOF."""
    frame = read_frame(start)
    if frame is None:
        return
    config = pickle.loads(frame)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the start pipe is done with; EOF on `control` means the app is gone
    os.close(devnull)
    lib = namespaces.libc()
    policy = layers.prepare(config.get("sandbox", "best-effort"), lib)  # may fork into a PID ns
    _refuse_sockets()
    network = "namespace+sockets-refused"
    if not policy.namespaces.get("network_namespace", "").startswith("active"):
        network = "sockets-refused"
        if lib is not None and lib.unshare(namespaces.CLONE_NEWNET) == 0:
            network = "namespace+sockets-refused"
    if lib is not None:  # orphans of a parser without a PID namespace become ours to reap
        lib.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    sys.path.extend(p for p in config["sys_path"] if p not in sys.path)
    extractor = pickle.loads(config["extractor"])
    lazy = config.get("warm") == "lazy"
    self_test: dict[str, str] = {} if lazy else _self_test(extractor, None)
    del config, frame
    # Last of the worker's set-up, once the extractor's modules are imported (some
    # come from the application's own paths, which the new root no longer holds).
    # The application removes these cgroups when the worker ends: it is told their
    # host paths, not where the minimal root shows them.
    roots = list(policy.cgroups.roots) if policy.cgroups is not None else []
    state = _minimal_root(policy, lib)
    if state is not None:
        policy.namespaces["minimal_root"] = state
    # Everything imported and warmed so far is shared copy-on-write with every
    # child. Frozen, it is never walked by a child's garbage collector: a full
    # collection in a fresh child would otherwise touch (and copy) every page
    # holding a tracked object, hundreds of milliseconds and tens of MB.
    gc.collect()
    gc.freeze()
    zygote = _Zygote(extractor, policy)
    layers_state = zygote.probe()
    protocol.send_control(control, {
        "ready": True, "pid": int(policy.namespaces.get("host_pid", os.getpid())),
        "network": network, "self_test": self_test, "sandbox": layers_state,
        "cgroups": roots, "lazy": lazy, "kinds": sorted(_kinds(extractor))})
    spare = zygote.fork_spare()
    # lazy: the kinds not yet tested, cheapest first, warmed whenever no file is waiting
    kinds = _kinds(extractor)
    idle = [k for k in _WARM_ORDER if k in kinds] + sorted(kinds - set(_WARM_ORDER)) \
        if lazy else []
    try:
        while True:
            while idle and not select.select([control], [], [], 0)[0]:
                kind = idle.pop(0)
                if kind in self_test:
                    continue
                tested = _self_test(extractor, kind)
                self_test.update(tested)
                spare = _refork(zygote, spare)
                protocol.send_control(control, {"tested": tested})
            message, fds = protocol.receive_control(control)
            if message is None:
                return
            limits = message.get("file")
            if message.get("abandon"):  # late: that file's child has already ended
                for fd in fds:
                    os.close(fd)
                continue
            asked = message.get("kind") if lazy else None
            if lazy and message.get("warm") is not None:  # warm every kind not yet tested
                for fd in fds:
                    os.close(fd)
                while idle:
                    kind = idle.pop(0)
                    if kind not in self_test:
                        self_test.update(_self_test(extractor, kind))
                spare = _refork(zygote, spare)
                protocol.send_control(control, {"warmed": self_test})
                continue
            if isinstance(asked, str) and asked in kinds and asked not in self_test:
                # Lazy start: this kind's parser is imported and self-tested now, in the
                # zygote, so its children inherit it warm; the spare forked before is stale.
                self_test.update(_self_test(extractor, asked))
                spare = _refork(zygote, spare)
                protocol.send_control(control, {"tested": {asked: self_test.get(asked, "ok")}})
            failed = self_test.get(asked, self_test.get("*", "ok")) \
                if isinstance(asked, str) else "ok"
            if failed != "ok":
                for fd in fds:
                    os.close(fd)
                protocol.send_control(control, {"done": {
                    "cause": "self_test", "self_test": {asked: failed}}})
                continue
            if not isinstance(limits, dict) or len(fds) != 2:
                for fd in fds:
                    os.close(fd)
                protocol.send_control(control, {"done": {"cause": "malformed"}})
                continue
            if not spare.alive():  # died while idle: not this file's fault
                spare.retire()
                spare = zygote.fork_spare()
            ended = spare.run(limits, fds, control, meanwhile=zygote.fork_ahead)
            spare = zygote.take_ahead()
            if ended.get("cause") == "application_gone":
                return
            protocol.send_control(control, {"done": ended})
    finally:
        spare.retire()
        if zygote.ahead is not None:
            zygote.ahead.retire()
        if policy.cgroups is not None:
            policy.cgroups.remove()


def main() -> None:
    """Entry point: take the control socket, silence stdout, serve."""
    control = socket.socket(fileno=int(sys.argv[1]))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - fd 1 is /dev/null now
    serve(sys.stdin.buffer, control)


if __name__ == "__main__":
    main()
