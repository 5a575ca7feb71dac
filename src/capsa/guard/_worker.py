"""The zygote: a warm, scrubbed worker that forks one rlimited child per file.

Started by `IsolatedExtractor` as ``python -I -m capsa.guard._worker`` with a
minimal environment (no API keys, no proxies, no cloud credentials). It
imports and self-tests its extractor once, then keeps one *spare* child
forked ahead of time: the spare confines itself (uid, Landlock, rlimits that
do not depend on the file) while the worker is idle and waits for a file on
a pipe, so neither the fork nor the sandbox is on the request's path. Given
a file, it applies that file's CPU, memory and file-size limits before it
parses, and writes one length-prefixed JSON result to a pipe. Each spare
parses one file and is killed with everything it started before the reply
goes out; the next spare is forked right after. The zygote never parses
anything itself, stays single-threaded (so `fork` is safe), and enforces the
wall clock by killing the child's process group, which takes Tesseract and
any grandchild with it. The only files the zygote parses itself are the
trusted self-test samples it is started with.

Protocol (stdin / a private copy of stdout; fd 1 is pointed at /dev/null so a
parser's prints cannot corrupt it): length-prefixed frames. The parent sends
pickles (it is the trusted side); everything that travels back is JSON that
the parent re-validates, because a compromised child writes it.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import errno
import functools
import gc
import json
import math
import os
import pickle
import resource
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
from typing import IO, Any

from capsa.guard import sandbox
from capsa.guard.sandbox import SandboxPolicy

_LENGTH = struct.Struct(">I")
_RESULT_LENGTH = struct.Struct(">Q")
_PR_SET_NAME = 15
_SPARE_NAME = b"capsa-spare"
"""What a spare waiting for its file is called in ``/proc/<pid>/comm``."""
_PARSE_NAME = b"capsa-parse"
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_CPU_DETAIL = "CPU time limit reached (SIGXCPU)"
_DETAIL_CHARS = 2000
"""The longest detail a child sends back (at most 12 KB of JSON, inside any reply frame)."""
_DETAIL_SCAN = 4 * _DETAIL_CHARS


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


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _die_with_parent() -> None:
    libc = _libc()
    if libc is not None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _isolate_network() -> str:
    """Enter a fresh network namespace where the OS allows it; block Python sockets always."""
    mode = "sockets-refused"
    libc = _libc()
    if libc is not None and libc.unshare(_CLONE_NEWNET) == 0:
        mode = "namespace+sockets-refused"
    _refuse_sockets()
    return mode


class _RefusingSocket(socket.socket):
    def __init__(self, family: int = -1, *args: Any, **kwargs: Any) -> None:
        if family in (-1, socket.AF_INET, socket.AF_INET6):
            raise PermissionError(errno.EACCES, "network access is disabled in capsa's parser")
        super().__init__(family, *args, **kwargs)


def _refuse_sockets() -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(errno.EACCES, "network access is disabled in capsa's parser")

    socket.socket = _RefusingSocket  # type: ignore[misc]
    socket.create_connection = refuse
    socket.getaddrinfo = refuse


def _limit(kind: int, value: int, hard: int | None = None) -> None:
    try:
        resource.setrlimit(kind, (value, value if hard is None else hard))
    except (ValueError, OSError):
        _, hard = resource.getrlimit(kind)
        if hard != resource.RLIM_INFINITY and value > hard:
            resource.setrlimit(kind, (hard, hard))


def _address_space() -> int:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


def _spare(extractor: Any, request_fd: int, write_fd: int, close_fds: list[int],
           scratch: str, zygote: int, policy: SandboxPolicy) -> None:
    """Runs in the forked spare; never returns.

    Everything that does not depend on the file happens before the file
    arrives; the file's own limits are applied after it arrives and before
    any parser code sees it.
    """
    status = 70
    try:
        try:
            for fd in close_fds:
                os.close(fd)
            os.setpgid(0, 0)
            _die_with_parent()
            if os.getppid() != zygote:  # the zygote died before the death signal was armed
                os._exit(70)
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.environ["TMPDIR"] = os.environ["HOME"] = scratch
            tempfile.tempdir = scratch
            _limit(resource.RLIMIT_CORE, 0)
            _limit(resource.RLIMIT_NOFILE, 64)
            try:
                sandbox.confine(policy, _libc(), scratch)
            except OSError as exc:
                unconfined: str | None = f"the sandbox could not be applied: {exc}"
            else:
                unconfined = None
            frame = _read_request(request_fd)
            if frame is None:  # the zygote is closing or replacing its spare
                os._exit(0)
            _name_process(_PARSE_NAME)
            request = pickle.loads(frame)
            used = resource.getrusage(resource.RUSAGE_SELF)
            # RLIMIT_CPU counts from the fork, in whole seconds; the spare's set-up
            # is rounded up and added, so the file itself gets at least cpu_s.
            cpu_s = int(request["cpu_s"]) + math.ceil(used.ru_utime + used.ru_stime)
            # soft < hard, so the kernel sends SIGXCPU (reported as a timeout)
            # before the SIGKILL at the hard limit.
            _limit(resource.RLIMIT_CPU, cpu_s, cpu_s + 1)
            _limit(resource.RLIMIT_FSIZE, int(request["max_file_write_bytes"]))
            _limit(resource.RLIMIT_AS, _address_space() + int(request["memory_bytes"]))
            if unconfined is not None:
                result: dict[str, Any] = {"failed": {"cause": "raised", "detail": unconfined}}
            else:
                result = _run(extractor, request)
        except BaseException as exc:  # noqa: BLE001 - the child reports every way it can lose
            result = {"failed": {"cause": "raised", "detail": _describe(exc)}}
        data = json.dumps(result, ensure_ascii=False).encode("utf-8", "replace")
        _write_all(write_fd, _RESULT_LENGTH.pack(len(data)) + data)
        status = 0
    finally:
        os._exit(status)


def _read_request(fd: int) -> bytes | None:
    """One length-prefixed frame from the zygote, or None at end of file."""
    with os.fdopen(fd, "rb", buffering=0) as stream:
        head = _read_exactly(stream, _LENGTH.size)
        if head is None:
            return None
        (size,) = _LENGTH.unpack(head)
        return _read_exactly(stream, size)


def _read_exactly(stream: IO[bytes], size: int) -> bytes | None:
    chunks: list[bytes] = []
    while size:
        chunk = stream.read(min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


@functools.cache
def _process_name() -> bytes:
    """The zygote's own name, read once: it is put back after every spare's fork."""
    try:
        with open("/proc/thread-self/comm", "rb") as comm:
            return comm.read().strip()
    except OSError:
        return b"python"


def _name_process(name: bytes) -> None:
    """Set the thread name ``ps`` and ``/proc/<pid>/comm`` show (at most 15 bytes)."""
    libc = _libc()
    if libc is not None:
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)


def _describe(exc: BaseException) -> str:
    try:
        return _bounded(f"{type(exc).__name__}: {exc}")
    except BaseException:  # noqa: BLE001 - an exception whose str() raises
        return _bounded(type(exc).__name__)


def _bounded(detail: object) -> str:
    """A detail that always fits the reply frame and names no scratch path.

    An error may quote megabytes of its input; capped here, in the child, it
    can never push the result past ``max_result_bytes`` and turn a refusal
    into a ``protocol`` failure.
    """
    from capsa.guard.normalize import clean_detail

    text = str(detail)[:_DETAIL_SCAN]
    scratch = tempfile.gettempdir()
    if scratch.count("/") > 1:  # this file's own directory, wherever the pool put it
        text = text.replace(scratch, "<scratch>").replace(os.path.dirname(scratch), "<scratch>")
    return clean_detail(text, limit=_DETAIL_CHARS)


def _bounded_fields(result: dict[str, Any]) -> dict[str, Any]:
    for key in ("rejected", "failed"):
        fields = result.get(key)
        if isinstance(fields, dict) and "detail" in fields:
            fields["detail"] = _bounded(fields["detail"])
    return result


def _run(extractor: Any, request: dict[str, Any]) -> dict[str, Any]:
    return _bounded_fields(_outcome(extractor, request))


def _outcome(extractor: Any, request: dict[str, Any]) -> dict[str, Any]:
    from capsa.errors import ExtractionFailed, IngestionRejected
    from capsa.guard.limits import ExtractionLimits
    from capsa.guard.normalize import normalize
    from capsa.guard.port import Parsed

    try:
        limits = ExtractionLimits.model_validate_json(request["limits"])
        configure = getattr(extractor, "with_limits", None)
        if configure is not None:
            extractor = configure(limits)
        raw = extractor.extract(request["kind"], request["media_type"], request["payload"],
                                max_pages=limits.max_pages)
        parsed = Parsed(raw) if isinstance(raw, str) else raw
        if not isinstance(parsed, Parsed) or not isinstance(parsed.text, str):
            return {"failed": {"cause": "protocol", "detail": f"extractor returned "
                                                              f"{type(raw).__name__}, not str"}}
        text = normalize(parsed.text)
        if len(text) > limits.max_text_chars:
            return {"rejected": {"reason": "text_too_long", "stage": "text",
                                 "detail": f"extracted {len(text)} characters, over the "
                                           f"limit of {limits.max_text_chars}; dropped whole, "
                                           "never truncated"}}
        return _answer(text, parsed)
    except MemoryError:
        return {"failed": {"cause": "memory_limit",
                           "detail": f"ran out of its {request['memory_bytes']}-byte allowance"}}
    except RecursionError as exc:
        return {"rejected": {"reason": "nested_too_deep", "stage": "parser",
                             "detail": f"the parser's recursion limit was reached: {exc}"}}
    except IngestionRejected as exc:
        return {"rejected": {"reason": exc.reason, "stage": exc.stage, "detail": exc.detail}}
    except ExtractionFailed as exc:
        return {"failed": {"cause": exc.cause, "detail": exc.detail}}


def _answer(text: str, parsed: Any) -> dict[str, Any]:
    """The JSON reply for a parse that succeeded; embedded files travel as base64."""
    answer: dict[str, Any] = {"ok": text}
    if parsed.encoding is not None:
        answer["encoding"] = parsed.encoding
        answer["confidence"] = parsed.encoding_confidence
    if parsed.notes:
        answer["notes"] = list(parsed.notes)
    if parsed.embedded:
        answer["embedded"] = [
            {"name": item.name, "media_type": item.media_type,
             "payload": base64.b64encode(item.payload).decode("ascii")}
            for item in parsed.embedded]
    return answer


def _collect(pid: int, read_fd: int, deadline: float, max_bytes: int,
             timeout_s: float | None = None) -> dict[str, Any]:
    """Read the child's result until it is complete, the child exits, or the deadline passes.

    The result is length-prefixed, so a complete one is taken without
    waiting for the child to exit or for end-of-file (a grandchild that
    escaped into its own session may hold the pipe open). A child that sends
    more than `max_bytes`, or claims it will, is a protocol failure.
    """
    received = bytearray()
    expected: int | None = None
    outcome: dict[str, Any] | None = None
    status: int | None = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            limit = f" of {timeout_s:g} s" if timeout_s is not None else ""
            outcome = {"failed": {"cause": "timeout",
                                  "detail": f"ran past the wall-clock limit{limit} (timeout_s)"}}
            break
        ready, _, _ = select.select([read_fd], [], [], min(remaining, 0.05))
        if ready:
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            received += chunk
            if expected is None and len(received) >= _RESULT_LENGTH.size:
                (expected,) = _RESULT_LENGTH.unpack_from(received)
                if expected > max_bytes:
                    outcome = _too_much(max_bytes)
                    break
            if expected is not None and len(received) >= _RESULT_LENGTH.size + expected:
                break  # complete: whatever the child does next is not waited for
            if len(received) > _RESULT_LENGTH.size + max_bytes:
                outcome = _too_much(max_bytes)
                break
            continue
        if status is not None:
            break  # the child is gone and nothing more is pending
        done, waited = os.waitpid(pid, os.WNOHANG)
        if done:
            status = waited
    os.close(read_fd)
    _kill_group(pid)
    if status is None:
        _, status = os.waitpid(pid, 0)
    _reap_orphans()
    if outcome is not None:
        return outcome
    complete = expected is not None and len(received) >= _RESULT_LENGTH.size + expected
    if complete:
        body = bytes(received[_RESULT_LENGTH.size:_RESULT_LENGTH.size + (expected or 0)])
        try:
            parsed = json.loads(body.decode("utf-8", "replace"))
            return parsed if isinstance(parsed, dict) else _bad("result is not an object")
        except ValueError:
            return _bad("result is not valid JSON")
        except RecursionError:  # a taken-over child can nest its answer past the decoder
            return _bad("result is nested too deeply to decode")
    if os.WIFSIGNALED(status):
        return _signal_outcome(os.WTERMSIG(status))
    if received:
        return _bad(f"result ended after {len(received)} bytes, before its declared length")
    code = os.WEXITSTATUS(status)
    return {"failed": {"cause": "crashed", "detail": f"parser process exited with status {code} "
                                                     "and no result"}}


def _too_much(max_bytes: int) -> dict[str, Any]:
    return {"failed": {"cause": "protocol", "detail": f"result exceeded {max_bytes} bytes"}}


def _reap_orphans() -> None:
    """Kill and reap every process left under this zygote (it is their subreaper)."""
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(int(entry), 0)


def _bad(detail: str) -> dict[str, Any]:
    return {"failed": {"cause": "protocol", "detail": detail}}


def _signal_outcome(signum: int) -> dict[str, Any]:
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = str(signum)
    if signum == signal.SIGXCPU:
        return {"failed": {"cause": "timeout", "detail": _CPU_DETAIL}}
    if signum == signal.SIGXFSZ:
        return {"failed": {"cause": "crashed", "detail": "file-size limit reached (SIGXFSZ)"}}
    return {"failed": {"cause": "crashed", "detail": f"parser process died (signal {name})"}}


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def serve(inbound: IO[bytes], outbound: IO[bytes]) -> None:
    """Read the start frame, warm up, then answer one request per frame until EOF."""
    start = read_frame(inbound)
    if start is None:
        return
    config = pickle.loads(start)
    # No PR_SET_PDEATHSIG here: it fires when the *thread* that started the
    # zygote exits, and applications start pools from short-lived threads.
    # The zygote notices its parent's death as end-of-file on stdin instead.
    libc = _libc()
    mode = config.get("sandbox", "best-effort")
    policy = sandbox.prepare(mode, libc)  # may fork: from here on we are the PID namespace's init
    if policy.namespaces.get("network_namespace") == "active":
        _refuse_sockets()
        network = "namespace+sockets-refused"
    else:
        network = _isolate_network()
    if libc is not None:  # orphans of a parser (setsid grandchildren) become ours to kill
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    sys.path.extend(p for p in config["sys_path"] if p not in sys.path)
    extractor = pickle.loads(config["extractor"])
    self_test: dict[str, str] = {}
    test = getattr(extractor, "self_test", None)
    if test is not None:
        try:
            self_test = {str(k): str(v) for k, v in test().items()}
        except BaseException as exc:  # noqa: BLE001
            self_test = {"*": f"{type(exc).__name__}: {exc}"}
    sandbox.lock_zygote(policy, libc)
    # Everything imported and warmed so far is shared copy-on-write with every
    # child. Frozen, it is never walked by a child's garbage collector: a full
    # collection in a fresh child would otherwise touch (and copy) every page
    # holding a tracked object, hundreds of milliseconds and tens of MB.
    gc.collect()
    gc.freeze()
    layers = _probe_sandbox(policy)
    pid = int(policy.namespaces.get("host_pid", os.getpid()))
    write_frame(outbound, json.dumps({"ready": True, "pid": pid, "network": network,
                                      "self_test": self_test, "sandbox": layers}).encode())
    spare = _Spare.fork(extractor, policy, [inbound.fileno(), outbound.fileno()])
    try:
        while True:
            frame = read_frame(inbound)
            if frame is None:
                return
            request = pickle.loads(frame)
            if not spare.hand_over(frame):  # died while idle: not this file's fault
                spare.retire()
                spare = _Spare.fork(extractor, policy, [inbound.fileno(), outbound.fileno()])
                spare.hand_over(frame)
            result = spare.collect(request)
            failed = result.get("failed")
            if isinstance(failed, dict) and failed.get("detail") == _CPU_DETAIL:
                failed["detail"] = f"ran past the CPU-time limit of {request['cpu_s']} s (cpu_s)"
            shutil.rmtree(spare.scratch, ignore_errors=True)
            write_frame(outbound, json.dumps(result).encode())
            spare = _Spare.fork(extractor, policy, [inbound.fileno(), outbound.fileno()])
    finally:
        spare.retire()


class _Spare:
    """A child forked and confined ahead of its file, waiting on `request_fd`."""

    def __init__(self, pid: int, request_fd: int, result_fd: int, scratch: str) -> None:
        self.pid = pid
        self.request_fd = request_fd
        self.result_fd = result_fd
        self.scratch = scratch

    @classmethod
    def fork(cls, extractor: Any, policy: SandboxPolicy, close_fds: list[int]) -> _Spare:
        scratch = _file_scratch(policy)
        request_read, request_write = os.pipe()
        result_read, result_write = os.pipe()
        zygote = os.getpid()
        own_name = _process_name()
        _name_process(_SPARE_NAME)  # so the spare is born with its name, not given it later
        try:
            pid = os.fork()
            if pid == 0:
                _spare(extractor, request_read, result_write,
                       [request_write, result_read, *close_fds], scratch, zygote, policy)
        finally:
            if os.getpid() == zygote:
                _name_process(own_name)
        os.close(request_read)
        os.close(result_write)
        return cls(pid, request_write, result_read, scratch)

    def hand_over(self, frame: bytes) -> bool:
        """Send the file's request; False if the spare is already gone."""
        if os.waitpid(self.pid, os.WNOHANG)[0]:
            self.pid = 0
            return False
        try:
            _write_all(self.request_fd, _LENGTH.pack(len(frame)) + frame)
        except BrokenPipeError:
            return False
        finally:
            os.close(self.request_fd)
            self.request_fd = -1
        return True

    def collect(self, request: dict[str, Any]) -> dict[str, Any]:
        """The file's result; the spare and everything it started are dead on return."""
        deadline = time.monotonic() + float(request["timeout_s"])
        result = _collect(self.pid, self.result_fd, deadline, int(request["max_result_bytes"]),
                          float(request["timeout_s"]))
        self.pid = 0  # reaped by _collect, which also closed the pipe
        self.result_fd = -1
        return result

    def retire(self) -> None:
        """Close an unused spare's pipes, kill it and its group, reap, remove its scratch."""
        for fd in (self.request_fd, self.result_fd):
            with contextlib.suppress(OSError):
                if fd >= 0:
                    os.close(fd)
        self.request_fd = self.result_fd = -1
        if self.pid:
            _kill_group(self.pid)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = 0
        shutil.rmtree(self.scratch, ignore_errors=True)


def _file_scratch(policy: SandboxPolicy) -> str:
    """A private directory for one file, owned by the uid its parser will run as."""
    scratch = tempfile.mkdtemp(prefix="file-")
    if policy.as_root and policy.mode != "off":
        os.chown(scratch, policy.child_uid, policy.child_uid)
    return scratch


def _probe_sandbox(policy: SandboxPolicy) -> dict[str, str]:
    """Fork one child that confines itself exactly as a parse child does; report its layers.

    The report comes from the kernel's answers in a real child, not from what
    the zygote intended, so `capsa doctor` and `IsolatedExtractor.health` show
    what a parser actually runs under. With the sandbox off there is nothing
    to probe.
    """
    if policy.mode == "off":
        return {"network_namespace": "off: sandbox='off'"}
    scratch = _file_scratch(policy)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 70
        try:
            os.close(read_fd)
            try:
                states = sandbox.confine(policy, _libc(), scratch)
            except BaseException as exc:  # noqa: BLE001 - reported, not raised
                states = {name: detail for name, detail in policy.namespaces.items()}
                states["error"] = f"{type(exc).__name__}: {exc}"
            os.write(write_fd, json.dumps(states).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 65536):
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        states = json.loads(b"".join(chunks))
    except ValueError:
        states = {"error": "the sandbox probe died before it reported"}
    states.setdefault("network_namespace", policy.namespaces.get("network_namespace", ""))
    return {str(k): str(v) for k, v in states.items()}


def main() -> None:
    """Entry point: move the protocol off fd 1, silence stdout, serve."""
    protocol_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    serve(sys.stdin.buffer, protocol_out)


if __name__ == "__main__":
    main()
