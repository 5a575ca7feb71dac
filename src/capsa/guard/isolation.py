"""Running a parser where it cannot hurt the application: `IsolatedExtractor`.

Parsers are C underneath (lxml, zlib, Pillow's codecs, Tesseract) and read
hostile bytes, so they never run in the application process, and the
application process never `fork`s one (a forked child would inherit its API
keys, in the environment and on the heap). Instead a small pool of warm
"zygote" workers is started with `subprocess` and a scrubbed environment;
each forks a fresh, rlimited child per file (see `capsa.guard._worker`). A
fresh address space per file costs a few milliseconds and means one file's
parser state can never leak into the next.
"""

from __future__ import annotations

import binascii
import contextlib
import json
import os
import pickle
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from types import TracebackType
from typing import IO, Any, Self

from capsa.errors import ExtractionFailed, FailureCause, IngestionRejected, SandboxUnavailable
from capsa.guard._worker import write_frame
from capsa.guard.limits import DEFAULT_LIMITS, ExtractionLimits
from capsa.guard.port import EmbeddedFile, Parsed, TextExtractor
from capsa.guard.sandbox import SandboxMode, SandboxReport, summarise

__all__ = ["IsolatedExtractor", "WorkerHealth"]

_GRACE_S = 5.0
_START_TIMEOUT_S = 180.0
_PASSED_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "TESSDATA_PREFIX")
_CAUSES: tuple[FailureCause, ...] = (
    "raised", "timeout", "memory_limit", "crashed", "incomplete", "protocol")


class WorkerHealth(dict[str, Any]):
    """What a worker reported when it started: network mode, self-test per kind, sandbox layers."""

    @property
    def sandbox(self) -> SandboxReport:
        """The isolation layers a probe child of this worker actually got."""
        layers = self.get("sandbox")
        return summarise(layers if isinstance(layers, dict) else {})


class _Zygote:
    """One warm worker process and its protocol pipes."""

    def __init__(self, extractor: TextExtractor, pool_scratch: str, sandbox: SandboxMode) -> None:
        # Each worker has its own directory, removed when it dies, so files a
        # killed worker's parser left behind are never seen by the next one.
        scratch = tempfile.mkdtemp(prefix="worker-", dir=pool_scratch)
        os.chmod(scratch, 0o711)  # a parser running as nobody reaches its own file's directory
        self.scratch = scratch
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
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-m", "capsa.guard._worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, cwd="/", start_new_session=True, close_fds=True,
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.closed = False
        self.stdin: IO[bytes] = self.process.stdin
        self.stdout: IO[bytes] = self.process.stdout
        extras = [p for p in sys.path if p and os.path.isdir(p)]
        write_frame(self.stdin, pickle.dumps({"extractor": pickle.dumps(extractor),
                                              "sys_path": extras, "sandbox": sandbox}))
        hello = self._read(_START_TIMEOUT_S)
        if hello is None or not hello.get("ready"):
            self.kill()
            raise RuntimeError("the extraction worker did not start; is capsa installed "
                               "in this interpreter's environment?")
        self.health = WorkerHealth(hello)

    def alive(self) -> bool:
        """Whether the worker can serve: the started process and, where it re-forked
        into its own PID namespace, that namespace's init, which does the work."""
        if self.process.poll() is not None:
            return False
        inner = getattr(self, "health", {}).get("pid", self.process.pid)
        if inner == self.process.pid:
            return True
        try:
            with open(f"/proc/{inner}/stat") as stat:
                return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except (OSError, IndexError):
            return False

    def _read(self, timeout_s: float) -> dict[str, Any] | None:
        self.closed = False
        fd = self.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        buffer = b""
        need = 4
        header_done = False
        while len(buffer) < need:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, max(need - len(buffer), 1))
            if not chunk:
                self.closed = True  # end of file: the worker died, it did not stall
                return None
            buffer += chunk
            if not header_done and len(buffer) >= 4:
                need = 4 + int.from_bytes(buffer[:4], "big")
                header_done = True
        try:
            parsed = json.loads(buffer[4:need])
        except (ValueError, RecursionError):
            return None
        return parsed if isinstance(parsed, dict) else None

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        try:
            write_frame(self.stdin, pickle.dumps(message))
        except (BrokenPipeError, OSError):
            self.closed = True
            return None
        return self._read(timeout_s)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.process.kill()
        self.process.wait()
        for pipe in (self.stdin, self.stdout):
            with contextlib.suppress(Exception):
                pipe.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


class IsolatedExtractor:
    """A pool of isolated workers that run `inner` on one file at a time each.

    Every file gets a fresh child process with ``RLIMIT_AS``, ``RLIMIT_CPU``,
    ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE`` and no core dumps, fed bytes over a
    pipe, with stdout kept away from the protocol, no network (a network
    namespace where the OS allows it; Python-level sockets refused in any
    case), and a wall-clock deadline enforced by killing its process group. A
    child that hangs, crashes, segfaults or runs out of memory fails that call
    as `ExtractionFailed`; the pool carries on, and a worker that stops
    answering is killed and replaced.

    The child is also sandboxed on the assumption that a crafted file may
    take over the parser (see `capsa.guard.sandbox`): namespaces, an
    unprivileged uid, Landlock and seccomp, each where the OS offers it.
    `health.sandbox` says which layers a worker got; ``capsa doctor`` prints
    the same for this machine.

    Workers start on first use (or on ``with``); `inner` must be picklable
    and importable by the worker's interpreter. Safe to share across threads.
    Modules `inner` needs are imported when the worker starts: the parse child
    can read only the interpreter's own directories, its installed packages
    and system data, never the application's working directory.

    Args:
        inner: the extractor to isolate (a `Router` by default in `default_extractor`).
        workers: number of warm workers, each serving one file at a time.
        limits: default limits for `extract`; `run` takes per-call limits.
        light_path: run the routes of a `Router` that declare ``in_process = True`` (plain
            text, Markdown, CSV and JSON: standard-library decoding, no native
            parser) in this process, under the same limits and checks, so
            those files never wait for a worker to start or fork.
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
        self._idle: queue.LifoQueue[_Zygote] = queue.LifoQueue()
        self._all: list[_Zygote] = []
        self._lock = threading.Lock()
        self._scratch: str | None = None
        self._closed = False
        self._starting = 0
        self.restarts = 0
        """How many workers were killed and replaced (hung or broken workers)."""

    @property
    def kinds(self) -> frozenset[str]:
        """The kinds the inner extractor handles."""
        return frozenset(getattr(self.inner, "kinds", ()))

    @property
    def health(self) -> WorkerHealth:
        """The first worker's start-up report (starting it if needed)."""
        worker = self._acquire()
        try:
            return worker.health
        finally:
            self._idle.put(worker)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        """Start every worker now instead of on first use."""
        started = [self._acquire() for _ in range(self.workers)]
        for worker in started:
            self._idle.put(worker)

    def close(self) -> None:
        """Stop every worker and remove the scratch directory."""
        with self._lock:
            self._closed = True
            workers, self._all = self._all, []
        for worker in workers:
            worker.kill()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
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
                   limits: ExtractionLimits, *, label: str) -> Parsed:
        """Like `run`, with everything the parser reported, re-validated.

        Raises:
            IngestionRejected: the extractor refused the file (stage ``preflight``
                or ``text``), with `label` filled in.
            ExtractionFailed: the parser lost; `cause` says how.
        """
        message = {
            "kind": kind, "media_type": media_type, "payload": payload,
            "limits": limits.model_dump_json(),
            "timeout_s": limits.timeout_s, "cpu_s": limits.cpu_s,
            "memory_bytes": limits.memory_bytes,
            "max_file_write_bytes": limits.max_file_write_bytes,
            # text as UTF-8, plus embedded files as base64 (never more than the
            # payload they were decoded from, with room for re-encoding)
            "max_result_bytes": 4 * limits.max_text_chars + 3 * len(payload) + 65536,
        }
        if self._closed:  # the light path needs no worker, but a closed pool takes no work
            raise RuntimeError("this IsolatedExtractor is closed")
        light = self._in_process_route(kind)
        if light is not None:
            if self._closed:
                raise RuntimeError("this IsolatedExtractor is closed")
            from capsa.guard.extract import run_in_process

            return run_in_process(light, kind, media_type, payload, limits, label)
        self._check_self_test(kind, label)
        worker = self._acquire()
        answer = worker.request(message, limits.timeout_s + _GRACE_S)
        if answer is None:
            died = worker.closed or not worker.alive()
            self._replace(worker)
            if died:
                raise ExtractionFailed("the worker process died during this file and was "
                                       "replaced", label=label, cause="crashed")
            raise ExtractionFailed(
                f"the worker stopped answering within the wall-clock limit of "
                f"{limits.timeout_s:g} s (timeout_s) and was replaced", label=label,
                cause="timeout")
        self._idle.put(worker)
        return _interpret(answer, label, limits)

    def warm_up(self) -> WorkerHealth:
        """Start every worker now and return the first one's health.

        A worker imports every parser and runs its self-tests on trusted
        samples before it serves (a few seconds, once). Call this at
        application start-up so the first user's file does not pay for it;
        plain text, Markdown, CSV and JSON never wait for a worker at all.
        """
        self.start()
        return self.health

    def _in_process_route(self, kind: str) -> TextExtractor | None:
        if not self.light_path:
            return None
        # Only a router's light routes: a pool built around one extractor was
        # asked for isolation by name, and gets it.
        route = getattr(self.inner, "in_process_route", None)
        found: TextExtractor | None = route(kind) if route is not None else None
        return found

    def _check_self_test(self, kind: str, label: str) -> None:
        report = self.health.get("self_test", {})
        status = report.get(kind, report.get("*"))
        if status is not None and status != "ok":
            raise ExtractionFailed(f"the {kind} parser failed its start-up self-test: {status}",
                                   label=label, cause="raised")

    def _acquire(self) -> _Zygote:
        """An idle live worker, a newly started one if the pool is short, or wait for one.

        Waiting polls, so a thread that waits while another worker dies and
        is removed goes on to start its replacement instead of waiting forever.
        Workers start outside the lock, so two can start at the same time.
        """
        while True:
            with contextlib.suppress(queue.Empty):
                while True:
                    worker = self._idle.get_nowait()
                    if worker.alive():
                        return worker
                    self._replace(worker)  # died while idle: not this file's fault
            with self._lock:
                if self._closed:
                    raise RuntimeError("this IsolatedExtractor is closed")
                start = len(self._all) + self._starting < self.workers
                if start:
                    self._starting += 1
                    if self._scratch is None:
                        self._scratch = tempfile.mkdtemp(prefix="capsa-worker-")
                        os.chmod(self._scratch, 0o711)
                    scratch = self._scratch
            if start:
                return self._start(scratch)
            with contextlib.suppress(queue.Empty):
                worker = self._idle.get(timeout=0.2)
                if worker.alive():
                    return worker
                self._replace(worker)

    def _start(self, scratch: str) -> _Zygote:
        try:
            worker = _Zygote(self.inner, scratch, self.sandbox)
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

    def _replace(self, worker: _Zygote) -> None:
        worker.kill()
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)
            self.restarts += 1


_MAX_NOTES = 16
_MAX_NAME_CHARS = 1024


def _interpret(answer: dict[str, Any], label: str, limits: ExtractionLimits) -> Parsed:
    """Re-validate what a (possibly compromised) child sent back."""
    from capsa.guard.normalize import clean_detail, normalize

    if isinstance(answer.get("ok"), str):
        text = normalize(answer["ok"])
        if len(text) > limits.max_text_chars:
            raise IngestionRejected(
                f"extracted {len(text)} characters, over the limit of {limits.max_text_chars}; "
                "dropped whole, never truncated", label=label, stage="text", reason="text_too_long")
        return _parsed_extras(text, answer, label, limits)
    rejected = answer.get("rejected")
    if isinstance(rejected, dict):
        from capsa.guard.extract import rejection_from_worker

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


def _parsed_extras(text: str, answer: dict[str, Any], label: str,
                   limits: ExtractionLimits) -> Parsed:
    """The optional fields of a successful answer, each type-checked and bounded."""
    from capsa.guard.normalize import clean_detail

    encoding = answer.get("encoding")
    confidence = answer.get("confidence")
    if not isinstance(encoding, str) or not encoding.isascii() or not 0 < len(encoding) <= 40:
        encoding = None
    if encoding is None or not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
        confidence = None
    notes = answer.get("notes")
    clean_notes = tuple(clean_detail(note, limit=300) for note in notes[:_MAX_NOTES]
                        if isinstance(note, str)) if isinstance(notes, list) else ()
    embedded = answer.get("embedded")
    files: list[EmbeddedFile] = []
    if isinstance(embedded, list):
        if len(embedded) > limits.max_members:
            raise IngestionRejected(
                f"{len(embedded)} embedded files, over the limit of {limits.max_members} "
                "(max_members)", label=label, stage="preflight", reason="too_many_members")
        for item in embedded:
            files.append(_embedded_file(item, label))
    return Parsed(text, encoding=encoding,
                  encoding_confidence=float(confidence) if confidence is not None else None,
                  embedded=tuple(files), notes=clean_notes)


def _embedded_file(item: object, label: str) -> EmbeddedFile:
    if not isinstance(item, dict) or not isinstance(item.get("payload"), str):
        raise ExtractionFailed("the worker sent a malformed embedded file", label=label,
                               cause="protocol")
    try:
        payload = binascii.a2b_base64(item["payload"], strict_mode=True)
    except (binascii.Error, ValueError):
        raise ExtractionFailed("the worker sent an embedded file that is not base64",
                               label=label, cause="protocol") from None
    name = item.get("name")
    media_type = item.get("media_type")
    return EmbeddedFile(name=name[:_MAX_NAME_CHARS] if isinstance(name, str) else "",
                        media_type=media_type[:255] if isinstance(media_type, str) else None,
                        payload=payload)
