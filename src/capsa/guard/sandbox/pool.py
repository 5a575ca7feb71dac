"""The application's side of the boundary: `IsolatedExtractor`, a pool of warm workers.

Parsers are C underneath (lxml, zlib, Pillow's codecs, Tesseract) and read
hostile bytes, so they never run in the application process, and the
application process never `fork`s one (a forked child would inherit its API
keys, in the environment and on the heap). Instead a small pool of warm
zygotes (`capsa.guard.sandbox.zygote`) is started with `subprocess` and a
scrubbed environment; each forks one sealed child per file
(`capsa.guard.sandbox.child`).

For each file this side makes two pipes, hands the child's ends to the
zygote (which passes them on unread), writes the request straight to the
child and reads the reply straight from it, with `ReplyReader`'s bounds.
Reading, writing and waiting happen in one ``select`` loop, so a child that
never reads its request or never stops writing cannot wedge the
application, and every way a file can end is a typed error. A worker that
stops answering is killed, leaves the pool, and is replaced.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from types import TracebackType
from typing import Any, Self

from capsa.errors import ExtractionFailed, FailureCause, IngestionRejected, SandboxUnavailable
from capsa.guard.limits import DEFAULT_LIMITS, ExtractionLimits
from capsa.guard.port import EmbeddedFile, Parsed, TextExtractor
from capsa.guard.sandbox import protocol
from capsa.guard.sandbox.cgroups import WorkerCgroups, remove_empty, sweep_stale
from capsa.guard.sandbox.layers import SandboxMode, SandboxReport, summarise
from capsa.guard.sandbox.protocol import ProtocolError, ReplyReader
from capsa.guard.sandbox.scratch import claim_scratch, release_scratch, sweep_stale_scratch
from capsa.guard.sandbox.seccomp import UNIX_LISTEN_KINDS
from capsa.guard.sandbox.zygote import remove_tree, write_frame

__all__ = ["IsolatedExtractor", "WorkerHealth"]

_GRACE_S = 5.0
_START_TIMEOUT_S = 180.0
MISSING_EXTRA = "missing_extra: "
"""How a self-test says its parser is not installed (``"missing_extra: pip install
'capsa[ocr]'"``): the pool then refuses that kind as ``missing_extra``, not as a crash."""
_PASSED_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "TESSDATA_PREFIX")
_CAUSES: tuple[FailureCause, ...] = (
    "raised", "timeout", "memory_limit", "crashed", "incomplete", "protocol")
_WRITE_CHUNK = 1 << 16
_SMALL_READ = 1 << 12
_GATHER_S = 0.002
"""After a read of less than `_SMALL_READ` bytes, short of what the reply still needs,
the reply is left to gather this long. A child that sends its reply a byte at a time
would otherwise wake this thread once per byte and hold an application core for the
file's whole wall clock; now it wakes it at most 500 times a second. An honest child
writes its reply in one go, so reads are whole or pipe-sized and seldom wait."""
_SIGNALS = {int(s): s.name for s in signal.Signals}


class WorkerHealth(dict[str, Any]):
    """What a worker reported when it started: network mode, self-test per kind, sandbox layers."""

    @property
    def sandbox(self) -> SandboxReport:
        """The isolation layers a probe child of this worker actually got."""
        layers = self.get("sandbox")
        return summarise(layers if isinstance(layers, dict) else {})


class _Worker:
    """One warm zygote process, seen from the application: its control socket."""

    def __init__(self, extractor: TextExtractor, pool_scratch: str, sandbox: SandboxMode,
                 *, lazy: bool = False) -> None:
        # Each worker has its own directory, removed when it dies. Its children
        # mount their own tmpfs over it, so nothing a parser writes lands here.
        scratch = tempfile.mkdtemp(prefix="worker-", dir=pool_scratch)
        os.chmod(scratch, 0o711)  # a parser running as its own uid reaches its mount point
        self.scratch = scratch
        self.cgroups: list[str] = []
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "HOME": scratch,
            "TMPDIR": scratch,
            "OMP_NUM_THREADS": "1",
            "OMP_THREAD_LIMIT": "1",  # Tesseract: 3-5 s an image without it, under 1.5 s with
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "UNSTRUCTURED_DISABLE_NOTICE": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        env.update({k: os.environ[k] for k in _PASSED_ENV if k in os.environ})
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-m", "capsa.guard.sandbox.zygote", str(theirs.fileno())],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=env, cwd="/", start_new_session=True, close_fds=True,
                pass_fds=(theirs.fileno(),))
        finally:
            theirs.close()
        self.control = ours
        self.closed = False
        self.settle_by: float | None = None
        """While the last file's end is still to be reported: when it must be, at the latest."""
        assert self.process.stdin is not None
        extras = [p for p in sys.path if p and os.path.isdir(p)]
        try:
            write_frame(self.process.stdin, pickle.dumps({
                "extractor": pickle.dumps(extractor), "sys_path": extras, "sandbox": sandbox,
                "warm": "lazy" if lazy else "eager"}))
            self.process.stdin.close()
        except OSError:
            pass
        hello = self._receive(_START_TIMEOUT_S)
        if hello is None or not hello.get("ready"):
            self.kill()
            raise RuntimeError("the extraction worker did not start; is capsa installed "
                               "in this interpreter's environment?")
        self.health = WorkerHealth(hello)
        self.lazy = hello.get("lazy") is True
        """The zygote answered before self-testing its parsers: it tests each kind on
        its first file and the rest while idle, reporting as it goes (`note`)."""
        if not isinstance(self.health.get("self_test"), dict):
            self.health["self_test"] = {}
        roots, pid = hello.get("cgroups"), hello.get("pid")
        if isinstance(roots, list) and isinstance(pid, int):
            # Only the worker's own directories: these are removed, with every empty
            # cgroup beneath them, when it ends.
            own = WorkerCgroups.name_for(pid)
            self.cgroups = [r for r in roots if isinstance(r, str) and
                            r.startswith("/sys/fs/cgroup/") and os.path.basename(r) == own]
            # workers killed with their application could not remove their own
            sweep_stale({os.path.dirname(root) for root in self.cgroups})

    def alive(self) -> bool:
        """Whether the worker can serve: the started process and, where it re-forked
        into its own PID namespace, that namespace's init, which does the work."""
        if self.closed or self.process.poll() is not None:
            return False
        inner = getattr(self, "health", {}).get("pid", self.process.pid)
        if inner == self.process.pid:
            return True
        try:
            with open(f"/proc/{inner}/stat") as stat:
                return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except (OSError, IndexError):
            return False

    def _receive(self, timeout_s: float) -> dict[str, Any] | None:
        ready, _, _ = select.select([self.control], [], [], timeout_s)
        if not ready:
            return None
        try:
            message, fds = protocol.receive_control(self.control)
        except (OSError, ProtocolError):
            self.closed = True
            return None
        for fd in fds:
            os.close(fd)
        if message is None:
            self.closed = True
        else:
            self.note(message)
        return message

    def note(self, message: dict[str, Any]) -> None:
        """Keep the self-test results a lazy zygote reports, whatever message carries them."""
        found = message.get("tested", message.get("warmed"))
        done = message.get("done")
        if found is None and isinstance(done, dict):
            found = done.get("self_test")
        if isinstance(found, dict) and hasattr(self, "health"):
            report = self.health["self_test"]
            report.update({str(k)[:64]: str(v)[:1000] for k, v in list(found.items())[:256]})

    def warming(self) -> bool:
        """Whether a lazy zygote may still be self-testing a kind before it serves a file."""
        kinds = self.health.get("kinds")
        return self.lazy and not (isinstance(kinds, list)
                                  and set(kinds) <= set(self.health["self_test"]))

    def warm(self) -> bool:
        """Have a lazy zygote self-test every kind not yet tested; False if it died."""
        return self.ask_warm() and self.await_warm()

    def ask_warm(self) -> bool:
        """Ask a lazy zygote to self-test every kind not yet tested (see `await_warm`)."""
        if not self.lazy:
            return True
        if not self.settle():
            return False
        try:
            protocol.send_control(self.control, {"warm": "*"})
        except (OSError, ProtocolError):
            self.closed = True
            return False
        return True

    def await_warm(self) -> bool:
        """Wait for the answer to `ask_warm`; False if the worker died or never answered."""
        if not self.lazy:
            return True
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            message = self._receive(max(deadline - time.monotonic(), 0.0))
            if message is None:
                return False
            if "warmed" in message:
                return True

    def settle(self) -> bool:
        """Take the report of the last file's end, if it is still due; False if it never came.

        A file's result is returned as soon as its reply is whole: the child's
        exit (freeing a copy of a large worker takes milliseconds) and the
        zygote's report of it are waited for here, before the worker's next
        file, where they cost no caller anything if they are done already.
        """
        if self.settle_by is None:
            return True
        while True:
            message = self._receive(max(self.settle_by - time.monotonic(), 0.0))
            if message is None:
                return False
            if "done" in message:
                self.settle_by = None
                return True

    def parse(self, frame: bytes, limits: ExtractionLimits, reader: ReplyReader,
              kind: str | None = None, *, unix_listen: bool = False
              ) -> tuple[dict[str, Any] | None, ProtocolError | None]:
        """Run one file: returns how its child ended (None if the worker failed, and an
        empty report while the end is still to be settled) and any protocol problem
        with its reply. The reply itself is left in `reader`. `unix_listen` gives the
        child the seccomp filter of a LibreOffice conversion."""
        request_read, request_write = os.pipe2(os.O_CLOEXEC)
        reply_read, reply_write = os.pipe2(os.O_CLOEXEC)
        try:
            protocol.send_control(self.control, {"file": {
                "timeout_s": limits.timeout_s, "cpu_s": limits.cpu_s,
                "memory_bytes": limits.memory_bytes,
                "max_file_write_bytes": limits.max_file_write_bytes,
                "max_scratch_files": limits.max_scratch_files,
                "unix_listen": unix_listen}, "kind": kind}, [request_read, reply_write])
        except OSError:
            self.closed = True
            for fd in (request_write, reply_read):
                os.close(fd)
            return None, None
        finally:
            os.close(request_read)
            os.close(reply_write)
        try:
            # a lazy zygote may first import and self-test this kind's parser
            warming = _START_TIMEOUT_S if self.warming() else 0.0
            deadline = time.monotonic() + limits.timeout_s + _GRACE_S + warming
            ended, problem = self._exchange(frame, request_write, reply_read, reader, deadline)
            if ended == {}:  # a whole reply: the child's end is settled before the next file
                self.settle_by = deadline
            return ended, problem
        finally:
            for fd in (request_write, reply_read):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _exchange(self, frame: bytes, request_fd: int, reply_fd: int, reader: ReplyReader,
                  deadline: float) -> tuple[dict[str, Any] | None, ProtocolError | None]:
        os.set_blocking(request_fd, False)
        pending = memoryview(frame)
        ended: dict[str, Any] | None = None
        problem: ProtocolError | None = None
        reply_open = True
        gather = False
        while ended is None or reply_open:
            if ended is None and reader.complete and problem is None:
                # The answer is whole: the child has nothing more to say. Tell the
                # zygote to end it now (an honest one is exiting anyway, a lingering
                # one must not delay the next file) and let `settle` take the report.
                with contextlib.suppress(OSError, ProtocolError):
                    protocol.send_control(self.control, {"abandon": True})
                return {}, None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None, problem
            if gather:
                time.sleep(min(_GATHER_S, remaining))
                gather = False
            readable: list[Any] = [reply_fd] if reply_open else []
            if ended is None:
                readable.append(self.control)
            writable = [request_fd] if pending else []
            ready_r, ready_w, _ = select.select(readable, writable, [], remaining)
            if ready_w:
                try:
                    pending = pending[os.write(request_fd, pending[:_WRITE_CHUNK]):]
                except BlockingIOError:
                    pass
                except OSError:  # the child closed its end: it will answer or end
                    pending = pending[len(pending):]
            if reply_fd in ready_r:
                try:
                    wanted = reader.wanted
                    count = reader.read_from(reply_fd)
                    if count == 0 or reader.complete:
                        reply_open = False
                    gather = count < min(wanted, _SMALL_READ)
                except ProtocolError as exc:
                    problem, reply_open = exc, False
                except OSError as exc:
                    problem, reply_open = ProtocolError(f"reading the reply: {exc}"), False
                if problem is not None:
                    with contextlib.suppress(OSError, ProtocolError):
                        protocol.send_control(self.control, {"abandon": True})
            if self.control in ready_r:
                try:
                    message, fds = protocol.receive_control(self.control)
                except (OSError, ProtocolError):
                    message, fds = None, []
                for fd in fds:
                    os.close(fd)
                if message is None:
                    self.closed = True
                    return None, problem
                self.note(message)
                if "tested" in message:  # a lazy zygote's report between files
                    continue
                done = message.get("done")
                ended = done if isinstance(done, dict) else {"cause": "malformed"}
        return ended, problem

    def kill(self) -> None:
        """Stop the worker and everything under it; never raises."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.process.kill()
        with contextlib.suppress(Exception):
            self.process.wait(timeout=30)
        with contextlib.suppress(Exception):
            self.control.close()
        remove_tree(self.scratch)
        _remove_cgroups(self.cgroups)


def _check_self_test(health: WorkerHealth, kind: str, label: str) -> None:
    """Refuse `kind` at once when this worker's self-test of its parser failed.

    A lazy worker that has not tested `kind` yet passes here; its zygote
    tests the kind before it serves the file, and refuses it the same way.
    """
    report = health.get("self_test", {})
    problem = _self_test_refusal(kind, report.get(kind, report.get("*")), label)
    if problem is not None:
        raise problem


def _self_test_refusal(kind: str, status: object, label: str
                       ) -> IngestionRejected | ExtractionFailed | None:
    """The refusal a failed self-test of `kind` means: a missing extra, or a parser that raised."""
    if status is None or status == "ok":
        return None
    status = str(status)[:1000]
    if status.startswith(MISSING_EXTRA):
        return IngestionRejected(
            f"the {kind} parser is not installed here: {status[len(MISSING_EXTRA):]}",
            label=label, stage="parser", reason="missing_extra")
    return ExtractionFailed(f"the {kind} parser failed its start-up self-test: {status}",
                            label=label, cause="raised")


def _warms_lazily(inner: TextExtractor) -> bool:
    """Whether workers over `inner` may answer before self-testing every kind.

    Only capsa's own parsers behind a `Router`: a lazy zygote tests a kind by
    parsing its trusted sample (`capsa.guard.samples`) with `inner`, which is
    known to be safe only for those; any other extractor is self-tested
    whole, before its worker serves, as it always was.
    """
    from capsa.guard.extractors import Router

    return type(inner) is Router and all(
        type(extractor).__module__.startswith("capsa.guard.extractors.")
        for extractor in inner.extractors)


def _remove_cgroups(roots: list[str], wait_s: float = 2.0) -> None:
    """Remove a killed zygote's cgroups, once the kernel has reaped what was in them.

    Its children die of their death signal a moment after it does, and a
    cgroup cannot be removed while a process is in it, so this retries
    briefly; what is still busy then is left for `sweep_stale`, which the
    next worker to start beside it runs.
    """
    deadline = time.monotonic() + wait_s
    pending = list(roots)
    while pending:
        pending = [root for root in pending if not remove_empty(root)]
        if not pending or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def _release(workers: list[_Worker], directory: str, lock: int | None, owner: int) -> None:
    """Stop a pool's workers and remove its scratch directory, in the process that made them.

    A process forked from the application (a server's workers) inherits the
    pool's finalizer; ending, it must not stop the workers or remove the
    directory its parent still uses (its copy of the lock keeps the
    directory from other pools' sweeps until it ends too).
    """
    if os.getpid() != owner:
        return
    for worker in list(workers):
        worker.kill()
    workers.clear()
    release_scratch(directory, lock)


class IsolatedExtractor:
    """A pool of isolated workers that run `inner` on one file at a time each.

    Every file gets a fresh child process, sealed on the assumption that a
    crafted file may take over the parser (see `capsa.guard.sandbox`): the init
    of its own PID namespace, with its own IPC and mount namespaces, a tmpfs
    scratch, a read-only view of everything else, a cgroup that counts its
    CPU, memory and processes as a whole, an unprivileged uid, Landlock and a
    seccomp allow-list, each where the OS offers it, and rlimits besides. A
    child that hangs, crashes, segfaults or runs out of memory fails that call
    as `ExtractionFailed`; everything it started dies with it, the pool
    carries on, and a worker that stops answering is killed and replaced.
    `health.sandbox` says which layers a worker got; ``capsa doctor`` prints
    the same for this machine.

    Workers start on first use (or on ``with``, `start`, `warm_up`); `inner`
    must be picklable and importable by the worker's interpreter. A worker
    started on first use over capsa's own parsers (`default_router`) self-tests
    each kind on its first file and the rest while idle, so that file waits
    for its own kind's parser only; `start` and `warm_up` return with every
    kind tested. Safe to share across threads.
    Modules `inner` needs are imported when the worker starts: the parse child
    can read only the interpreter's own directories, its installed packages
    and system data, never the application's working directory.

    Args:
        inner: the extractor to isolate (a `Router` by default in `default_extractor`).
        workers: number of warm workers, each serving one file at a time.
        limits: default limits for `extract`; `run` takes per-call limits.
        light_path: run the routes of a `Router` that declare ``in_process = True`` (plain
            text, Markdown, CSV and JSON: decoding, no native parser) in this
            process, under the same limits and checks, so those files never
            wait for a worker to start or fork; Markdown that may hold raw
            HTML still goes to a worker (`PlainTextExtractor.fits_in_process`).
        sandbox: ``"best-effort"`` applies every layer the OS offers;
            ``"strict"`` refuses to start (`SandboxUnavailable`) unless every
            layer is active; ``"off"`` keeps only the rlimits and the network
            namespace (for debugging a parser, never for untrusted files).

    Examples:
        >>> from capsa.guard.extractors import PlainTextExtractor
        >>> with IsolatedExtractor(PlainTextExtractor()) as pool:
        ...     pool.extract("text", "text/plain", b"hello", max_pages=1)
        'hello'
    """

    def __init__(self, inner: TextExtractor, *, workers: int = 1,
                 limits: ExtractionLimits = DEFAULT_LIMITS,
                 sandbox: SandboxMode = "best-effort", light_path: bool = True) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        if sandbox not in ("best-effort", "strict", "off"):
            raise ValueError(f"sandbox must be 'best-effort', 'strict' or 'off', not {sandbox!r}")
        self.sandbox: SandboxMode = sandbox
        self.light_path = light_path
        self.inner = inner
        self.workers = workers
        self.limits = limits
        self._idle: queue.LifoQueue[_Worker] = queue.LifoQueue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._scratch: str | None = None
        self._forget: weakref.finalize[[list[_Worker], str, int | None, int],
                                       IsolatedExtractor] | None = None
        """Stops the workers and removes `_scratch` when the pool is closed, collected, or
        still open when the program ends."""
        self._closed = False
        self._starting = 0
        self._lazy = _warms_lazily(inner)
        self.restarts = 0
        """How many workers were killed and replaced (hung or broken workers)."""

    @property
    def kinds(self) -> frozenset[str]:
        """The kinds the inner extractor handles."""
        return frozenset(getattr(self.inner, "kinds", ()))

    @property
    def health(self) -> WorkerHealth:
        """The first worker's start-up report (starting it if needed), every kind self-tested."""
        worker = self._acquire()
        if not worker.warm():
            self._replace(worker)
            return worker.health
        self._idle.put(worker)
        return worker.health

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self, *, wait: bool = True) -> None:
        """Start every worker now instead of on first use, each with every parser self-tested.

        With ``wait=False`` the workers start in a background thread and this
        returns at once: a file that arrives meanwhile waits for the first
        worker to answer, not for all of them. Workers over capsa's own
        parsers (`default_router`) answer before their self-tests and test
        each kind on its first file, warming the rest while idle, so that
        file waits for its own kind's parser only. A worker that fails to
        start in the background is started again by the next file, which
        then sees the error.
        """
        if not wait:
            threading.Thread(target=self._start_in_background, daemon=True,
                             name="capsa-pool-start").start()
            return
        started = [self._acquire() for _ in range(self.workers)]
        asked = [worker.ask_warm() for worker in started]  # the workers warm in parallel
        for worker, ok in zip(started, asked, strict=True):
            if ok and worker.await_warm():
                self._idle.put(worker)
            else:
                self._replace(worker)

    def _start_in_background(self) -> None:
        try:
            started = [self._acquire() for _ in range(self.workers)]
        except Exception:  # noqa: BLE001 - the next file starts a worker and sees why
            return
        for worker in started:
            self._idle.put(worker)

    def close(self) -> None:
        """Stop every worker and remove the scratch directory; never raises."""
        with self._lock:
            self._closed = True
            workers = list(self._all)
            self._all.clear()  # the same list `_forget` holds
        for worker in workers:
            worker.kill()
        if self._forget is not None:
            self._forget()
        self._scratch = None

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str | Parsed:
        """The `TextExtractor` port, under this pool's default limits."""
        limits = self.limits.model_copy(update={"max_pages": max_pages})
        parsed = self.run_parsed(kind, media_type, payload, limits, label="<payload>")
        return parsed.text if parsed == Parsed(parsed.text) else parsed

    def run(self, kind: str, media_type: str | None, payload: bytes,
            limits: ExtractionLimits, *, label: str) -> str:
        """Extract `payload` in a fresh child under `limits`; return normalised text.

        Only the file's own text: files embedded in it (an e-mail's
        attachments) are not returned; `run_parsed` returns them.

        Raises:
            IngestionRejected: the extractor refused the file (stage ``preflight``
                or ``text``), with `label` filled in.
            ExtractionFailed: the parser lost; `cause` says how.
        """
        return self.run_parsed(kind, media_type, payload, limits, label=label).text

    def run_parsed(self, kind: str, media_type: str | None, payload: bytes,
                   limits: ExtractionLimits, *, label: str,
                   max_embedded_bytes: int | None = None) -> Parsed:
        """Like `run`, with everything the parser reported, re-validated.

        Args:
            max_embedded_bytes: the most bytes the files found inside this one
                may take together (`max_uncompressed_bytes` when None).

        Raises:
            IngestionRejected: the extractor refused the file (stage ``preflight``
                or ``text``), with `label` filled in.
            ExtractionFailed: the parser lost; `cause` says how.
        """
        if self._closed:  # the light path needs no worker, but a closed pool takes no work
            raise RuntimeError("this IsolatedExtractor is closed")
        light = self._in_process_route(kind, payload)
        if light is not None:
            from capsa.guard.extract import run_in_process

            return run_in_process(light, kind, media_type, payload, limits, label)
        frame = protocol.encode_request({"kind": kind, "media_type": media_type,
                                         "payload": payload,
                                         "limits": limits.model_dump_json()})
        embedded = limits.max_uncompressed_bytes if max_embedded_bytes is None \
            else max_embedded_bytes
        reader = ReplyReader(max_text_bytes=4 * limits.max_text_chars,
                             max_blob_bytes=max(embedded, 0),
                             max_meta_bytes=protocol.meta_limit(limits.max_elements))
        worker = self._acquire()
        try:
            _check_self_test(worker.health, kind, label)
        except (ExtractionFailed, IngestionRejected):
            self._idle.put(worker)
            raise
        try:
            ended, problem = worker.parse(frame, limits, reader, kind,
                                          unix_listen=kind in UNIX_LISTEN_KINDS)
        except BaseException:
            self._replace(worker)
            raise
        if ended is None:
            died = worker.closed or not worker.alive()
            self._replace(worker)
            if reader.complete and problem is None:
                return _interpret(reader, label, limits)
            if died:
                raise ExtractionFailed("the worker process died during this file and was "
                                       "replaced", label=label, cause="crashed")
            raise ExtractionFailed(
                f"the worker stopped answering within the wall-clock limit of "
                f"{limits.timeout_s:g} s (timeout_s) and was replaced", label=label,
                cause="timeout")
        self._idle.put(worker)
        if isinstance(problem, protocol.EmbeddedTooLarge):
            raise IngestionRejected(f"{problem} (max_uncompressed_bytes, shared by every file "
                                    "inside)", label=label, stage="archive",
                                    reason="archive_too_large")
        if problem is not None:
            raise ExtractionFailed(f"the parser's reply broke the protocol: {problem}",
                                   label=label, cause="protocol")
        if reader.complete:
            return _interpret(reader, label, limits)
        raise _ended(ended, reader, label, limits)

    def warm_up(self) -> WorkerHealth:
        """Start every worker now and return the first one's health.

        A worker imports every parser and runs its self-tests on trusted
        samples before this returns (a few seconds, once). Call this at
        application start-up so the first user's file does not pay for it;
        plain text, CSV, JSON and Markdown without raw HTML never wait for a
        worker at all.
        ``start(wait=False)`` does the same in the background.
        """
        self.start()
        return self.health

    def _in_process_route(self, kind: str, payload: bytes | None = None) -> TextExtractor | None:
        if not self.light_path:
            return None
        # Only a router's light routes: a pool built around one extractor was
        # asked for isolation by name, and gets it. The route may refuse this payload
        # (Markdown that may hold raw HTML needs a parser, so a worker).
        route = getattr(self.inner, "in_process_route", None)
        found: TextExtractor | None = route(kind, payload) if route is not None else None
        return found

    def _acquire(self) -> _Worker:
        """An idle live worker, a newly started one if the pool is short, or wait for one.

        Waiting polls, so a thread that waits while another worker dies and
        is removed goes on to start its replacement instead of waiting forever.
        Workers start outside the lock, so two can start at the same time.
        """
        while True:
            with contextlib.suppress(queue.Empty):
                while True:
                    worker = self._idle.get_nowait()
                    if worker.alive() and worker.settle():
                        return worker
                    self._replace(worker)  # died, or never reported its last file's end
            with self._lock:
                if self._closed:
                    raise RuntimeError("this IsolatedExtractor is closed")
                start = len(self._all) + self._starting < self.workers
                if start:
                    self._starting += 1
                    sweep = self._scratch is None
                    if self._scratch is None:
                        directory, lock = claim_scratch()
                        self._scratch = directory
                        # a pool never closed (dropped, or open when the program
                        # ends) must leave no worker, cgroup or directory behind
                        self._forget = weakref.finalize(self, _release, self._all,
                                                        directory, lock, os.getpid())
                    else:
                        directory = self._scratch
            if start:
                if sweep:  # what pools in processes that ended by os._exit left
                    sweep_stale_scratch()
                return self._start(directory)
            with contextlib.suppress(queue.Empty):
                worker = self._idle.get(timeout=0.2)
                if worker.alive() and worker.settle():
                    return worker
                self._replace(worker)

    def _start(self, scratch: str) -> _Worker:
        try:
            worker = _Worker(self.inner, scratch, self.sandbox, lazy=self._lazy)
        finally:
            with self._lock:
                self._starting -= 1
        if self.sandbox == "strict":
            missing = worker.health.sandbox.missing()
            if missing:
                worker.kill()
                raise SandboxUnavailable(
                    "sandbox='strict' needs every isolation layer; this machine lacks: "
                    + ", ".join(missing) + " (run `capsa doctor` for what each one stops)",
                    missing=missing)
        with self._lock:
            if not self._closed:
                self._all.append(worker)
                return worker
        worker.kill()
        raise RuntimeError("this IsolatedExtractor is closed")

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)
            self.restarts += 1


_MAX_NOTES = 16
_MAX_NAME_CHARS = 1024
_TOKEN = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_MEDIA_TYPE = re.compile(f"{_TOKEN}/{_TOKEN}")


def _ended(ended: dict[str, Any], reader: ReplyReader, label: str,
           limits: ExtractionLimits) -> ExtractionFailed | IngestionRejected:
    """The typed failure for a child that ended without a whole reply."""
    cause, signum = ended.get("cause"), ended.get("signal")
    if cause == "self_test":  # a lazy zygote tested this kind's parser on its first file
        report = ended.get("self_test")
        status = next(iter(report.values()), "") if isinstance(report, dict) else ""
        kind = next(iter(report), "") if isinstance(report, dict) else ""
        return _self_test_refusal(str(kind)[:64], status or "unknown", label) \
            or ExtractionFailed("the parser failed its start-up self-test", label=label,
                                cause="raised")
    if cause == "timeout":
        return ExtractionFailed(f"ran past the wall-clock limit of {limits.timeout_s:g} s "
                                "(timeout_s)", label=label, cause="timeout")
    if cause == "cpu" or signum == signal.SIGXCPU:
        return ExtractionFailed(f"ran past the CPU-time limit of {limits.cpu_s} s (cpu_s), "
                                "counted over every process the file started",
                                label=label, cause="timeout")
    if ended.get("out_of_memory") is True:
        return ExtractionFailed(f"ran out of its memory allowance of {limits.memory_bytes} "
                                "bytes (memory_bytes), counted over every process the file "
                                "started", label=label, cause="memory_limit")
    if signum == signal.SIGXFSZ:
        return ExtractionFailed("file-size limit reached (SIGXFSZ)", label=label,
                                cause="crashed")
    if isinstance(signum, int):
        name = _SIGNALS.get(signum, str(signum))
        return ExtractionFailed(f"parser process died (signal {name})", label=label,
                                cause="crashed")
    if reader.received:
        return ExtractionFailed(f"result ended after {reader.received} bytes, before its "
                                "declared length", label=label, cause="protocol")
    if cause == "malformed":
        return ExtractionFailed("the worker refused the request as malformed", label=label,
                                cause="protocol")
    code = ended.get("exit")
    return ExtractionFailed(f"parser process exited with status {code} and no result",
                            label=label, cause="crashed")


def _interpret(reader: ReplyReader, label: str, limits: ExtractionLimits) -> Parsed:
    """Re-validate what a (possibly compromised) child sent back."""
    from capsa.guard.normalize import clean_detail, normalize

    try:
        answer = protocol.decode_meta(reader.meta())
    except ProtocolError as exc:
        raise ExtractionFailed(f"the parser's reply broke the protocol: {exc}", label=label,
                               cause="protocol") from None
    if answer.get("ok") is True:
        text = normalize(reader.text())
        if len(text) > limits.max_text_chars:
            raise IngestionRejected(
                f"extracted {len(text)} characters, over the limit of {limits.max_text_chars}; "
                "dropped whole, never truncated", label=label, stage="text", reason="text_too_long")
        return _parsed_extras(text, answer, reader, label, limits)
    rejected = answer.get("rejected")
    if isinstance(rejected, dict):
        from capsa.guard.extract import rejection_from_worker

        # A child controls every byte of this: a reason or stage that is a list or an
        # object would make the closed-set check raise TypeError (unhashable), untyped,
        # out of `extract_all`, ending the whole set.
        if not all(isinstance(rejected.get(key), str) for key in ("reason", "stage")):
            raise ExtractionFailed("the worker sent a refusal whose reason or stage is not "
                                   "a string", label=label, cause="protocol")
        raise rejection_from_worker(rejected, label)
    failed = answer.get("failed")
    if isinstance(failed, dict):
        cause = str(failed.get("cause"))
        detail = clean_detail(failed.get("detail", ""))
        typed: FailureCause = "protocol"
        for known in _CAUSES:
            if cause == known:
                typed = known
        if typed == "protocol" and cause != "protocol":
            detail = f"unknown failure cause {cause[:100]!r}"
        raise ExtractionFailed(detail, label=label, cause=typed)
    raise ExtractionFailed("the worker answered with an unrecognised message", label=label,
                           cause="protocol")


def _parsed_extras(text: str, answer: dict[str, Any], reader: ReplyReader, label: str,
                   limits: ExtractionLimits) -> Parsed:
    """The optional fields of a successful answer, each type-checked and bounded."""
    from capsa.guard.elements import from_wire, mail_from_wire
    from capsa.guard.normalize import clean_detail

    encoding = answer.get("encoding")
    confidence = answer.get("confidence")
    if not isinstance(encoding, str) or not encoding.isascii() or not 0 < len(encoding) <= 40 \
            or not encoding.replace("-", "").replace("_", "").isalnum():
        encoding = None
    if encoding is None or not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
        confidence = None
    notes = answer.get("notes")
    clean_notes = tuple(clean_detail(note, limit=300) for note in notes[:_MAX_NOTES]
                        if isinstance(note, str)) if isinstance(notes, list) else ()
    elements, refused = from_wire(answer.get("elements"), text, max_elements=limits.max_elements)
    return Parsed(text, encoding=encoding,
                  encoding_confidence=float(confidence) if confidence is not None else None,
                  embedded=_embedded_files(answer.get("embedded"), reader, label, limits),
                  notes=clean_notes if refused is None else (*clean_notes, refused),
                  elements=elements, mail=mail_from_wire(answer.get("mail")))


def _embedded_files(listing: object, reader: ReplyReader, label: str,
                    limits: ExtractionLimits) -> tuple[EmbeddedFile, ...]:
    """The files found inside this one: sizes must account for every byte sent."""
    blobs = reader.blobs()
    if listing is None:
        if len(blobs):
            raise ExtractionFailed("the worker sent embedded bytes with no listing",
                                   label=label, cause="protocol")
        return ()
    if not isinstance(listing, list):
        raise ExtractionFailed("the worker sent a malformed embedded listing", label=label,
                               cause="protocol")
    if len(listing) > limits.max_members:
        raise IngestionRejected(
            f"{len(listing)} embedded files, over the limit of {limits.max_members} "
            "(max_members)", label=label, stage="preflight", reason="too_many_members")
    files: list[EmbeddedFile] = []
    offset = 0
    for item in listing:
        size = item.get("size") if isinstance(item, dict) else None
        if not isinstance(size, int) or isinstance(size, bool) or size < 0 \
                or offset + size > len(blobs):
            raise ExtractionFailed("the worker sent an embedded file whose size does not add "
                                   "up", label=label, cause="protocol")
        assert isinstance(item, dict)
        files.append(EmbeddedFile(name=_clean_name(item.get("name")),
                                  media_type=_clean_media_type(item.get("media_type")),
                                  payload=bytes(blobs[offset:offset + size])))
        offset += size
    if offset != len(blobs):
        raise ExtractionFailed("the worker sent embedded bytes its listing does not account "
                               "for", label=label, cause="protocol")
    return tuple(files)


def _clean_name(name: object) -> str:
    """An embedded file's name as a child sent it: a string, capped (the guard then
    runs it through `safe_label` like any file's label)."""
    return name[:_MAX_NAME_CHARS] if isinstance(name, str) else ""


def _clean_media_type(media_type: object) -> str | None:
    """A ``type/subtype`` token pair, lower-cased, or None for anything else.

    Examples:
        >>> _clean_media_type("Application/PDF"), _clean_media_type("text/plain; x=<b>")
        ('application/pdf', None)
    """
    if isinstance(media_type, str) and _MEDIA_TYPE.fullmatch(media_type):
        return media_type.lower()
    return None
