"""One file's child: forked ahead as a spare, sealed, given one file, then gone.

The zygote forks each child as the init of a fresh PID namespace, in a
cgroup of its own. Before any file exists the spare joins that cgroup,
enters its own mount, IPC and cgroup namespaces and mounts a ``/proc`` of its
own, then waits on its private socket. What arrives there is the file's
limits (numbers) and two pipe descriptors the *application* made: the spare
never learns anything else from the zygote, and the zygote never sees the
file. With the limits known, the child mounts its scratch tmpfs, makes every
other mount read-only, sets its rlimits, and confines itself
(`capsa.guard.sandbox.layers.confine`: uid, Landlock, seccomp last). Only
then does it read the request from the application's pipe, parse, write one
reply frame (`capsa.guard.sandbox.protocol.encode_reply`) and exit. Its exit
ends its PID namespace, so everything the file started dies with it, and its
mount and IPC namespaces, so its scratch and its IPC objects go too.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import resource
import signal
import socket
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from capsa.guard.sandbox import layers, namespaces, protocol
from capsa.guard.sandbox.cgroups import FileCgroup
from capsa.guard.sandbox.layers import LAYERS, SandboxPolicy

if TYPE_CHECKING:
    from capsa.guard.elements import Element

__all__ = ["PARSE_NAME", "SPARE_NAME", "run"]

SPARE_NAME = b"capsa-spare"
"""What a spare waiting for its file is called in ``/proc/<pid>/comm``."""
PARSE_NAME = b"capsa-parse"
_PR_SET_NAME = 15
_PR_SET_PDEATHSIG = 1
_DETAIL_CHARS = 2000
"""The longest detail a child sends back."""
_DETAIL_SCAN = 4 * _DETAIL_CHARS
_NOFILE = 64
_SIGNALS_QUEUED = 64
"""``RLIMIT_SIGPENDING``: the signals a child may queue (a parser queues none)."""


def run(extractor: Any, control: socket.socket, scratch: str, zygote: int,
        policy: SandboxPolicy, cgroup: FileCgroup | None) -> NoReturn:
    """The spare's whole life; runs in the forked process and never returns."""
    status = 70
    try:
        status = _serve(extractor, control, scratch, zygote, policy, cgroup)
    except BaseException:  # noqa: BLE001 - nothing may unwind into the zygote's code
        status = 70
    finally:
        os._exit(status)


def _serve(extractor: Any, control: socket.socket, scratch: str, zygote: int,
           policy: SandboxPolicy, cgroup: FileCgroup | None) -> int:
    lib = namespaces.libc()
    if lib is not None:
        lib.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != zygote and os.getpid() != 1:  # the zygote died before the signal was armed
        return 70
    # Descriptions of its own: fds 1 and 2 were the zygote's, and a lock or owner
    # signal set on a shared description would outlive the file, for the next to read.
    devnull = os.open(os.devnull, os.O_RDWR)
    for standard in (0, 1, 2):
        os.dup2(devnull, standard)
    os.close(devnull)
    os.environ["TMPDIR"] = os.environ["HOME"] = scratch
    tempfile.tempdir = scratch
    states: dict[str, str] = {}
    if cgroup is not None:
        try:
            cgroup.join()
        except OSError as exc:
            states["cgroup"] = f"unavailable: could not join the file's cgroup ({exc.strerror})"
        else:
            states["cgroup"] = policy.cgroup_state
    else:
        states["cgroup"] = policy.cgroup_state
    if policy.per_file_namespaces and lib is not None:
        states.update(namespaces.enter_file_namespaces(lib))
    message, fds = protocol.receive_control(control)
    control.close()
    if message is None or len(fds) != 2 or not isinstance(message.get("file"), dict):
        return 0  # the zygote is closing or replacing its spare
    request_fd, reply_fd = fds
    _name_process(PARSE_NAME)
    limits: dict[str, Any] = message["file"]
    try:
        states.update(_seal(policy, lib, scratch, limits))
        unsealed = _unsealed(policy, states)
    except OSError as exc:
        unsealed = f"the sandbox could not be applied: {exc}"
    if message.get("probe"):
        _write_all(reply_fd, protocol.encode_reply({"states": states}, "", []))
        return 0
    if unsealed is not None:
        reply = _failed("raised", unsealed)
    else:
        try:
            request = protocol.read_request(request_fd)
            os.close(request_fd)  # the parser holds nothing but its reply pipe
            reply = _parse(extractor, request) if request is not None else \
                _failed("protocol", "the request ended early")
        except BaseException as exc:  # noqa: BLE001 - the child reports every way it can lose
            reply = _failed("raised", _describe(exc))
    with contextlib.suppress(OSError):
        os.close(request_fd)  # not read (strict refusal, or the request broke off)
    _write_all(reply_fd, reply)
    return 0


def _seal(policy: SandboxPolicy, lib: ctypes.CDLL | None, scratch: str,
          limits: dict[str, Any]) -> dict[str, str]:
    """Everything that depends on the file's limits, then the confinement itself."""
    states: dict[str, str] = {}
    memory_bytes = int(limits["memory_bytes"])
    if policy.per_file_namespaces and lib is not None:
        namespaces.limit_ipc(memory_bytes=memory_bytes)
        uid = policy.child_uid if policy.as_root else os.geteuid()
        states["scratch_tmpfs"] = namespaces.mount_scratch(
            lib, scratch, size=int(limits["max_file_write_bytes"]),
            inodes=int(limits["max_scratch_files"]), uid=uid)
        if states["scratch_tmpfs"].startswith("active"):
            states["read_only_root"] = namespaces.read_only_root(lib, keep_writable=scratch)
        else:
            states["read_only_root"] = "unavailable: no scratch tmpfs to keep writable"
    elif policy.mode != "off":
        reason = "unavailable: the child has no mount namespace of its own"
        states["scratch_tmpfs"] = states["read_only_root"] = reason
    # 1, not 0: a core_pattern that pipes to a collector (systemd-coredump, apport)
    # ignores the limit, except that 1 makes the kernel abort the dump; a core file
    # needs at least a page. Either would keep the document's bytes on the host.
    _limit(resource.RLIMIT_CORE, 1)
    _limit(resource.RLIMIT_NOFILE, _NOFILE)
    # What the application's own limits may allow and no parser needs: real-time or
    # raised priority (a desktop user's audio group often has both), and room in two
    # counts the kernel keeps per user, which a pool that is not root shares with the
    # application's uid: queued signals (a child that fills them leaves the application's
    # sigqueue and timer_create failing with EAGAIN while it lives) and POSIX queue bytes.
    _limit(resource.RLIMIT_RTPRIO, 0)
    _limit(resource.RLIMIT_NICE, 0)
    _limit(resource.RLIMIT_SIGPENDING, _SIGNALS_QUEUED)
    _limit(resource.RLIMIT_MSGQUEUE, 0)
    used = resource.getrusage(resource.RUSAGE_SELF)
    # RLIMIT_CPU counts from the fork, in whole seconds; the spare's set-up is
    # rounded up and added, so the file itself gets at least cpu_s. soft < hard,
    # so the kernel sends SIGXCPU (a timeout) before the SIGKILL at the hard limit.
    cpu_s = int(limits["cpu_s"]) + math.ceil(used.ru_utime + used.ru_stime)
    _limit(resource.RLIMIT_CPU, cpu_s, cpu_s + 1)
    _limit(resource.RLIMIT_FSIZE, int(limits["max_file_write_bytes"]))
    _limit(resource.RLIMIT_AS, _address_space() + memory_bytes)
    states.update(layers.confine(policy, lib, scratch,
                                 unix_listen=limits.get("unix_listen") is True))
    return states


def _unsealed(policy: SandboxPolicy, states: dict[str, str]) -> str | None:
    """Why a ``strict`` child must not parse (a layer it was promised is missing), or None."""
    if policy.mode != "strict":
        return None
    missing = [name for name in LAYERS if name in states and not _active(states[name])]
    missing += [name for name, detail in policy.namespaces.items()
                if name in LAYERS and name not in states and not _active(detail)]
    if missing:
        return "sandbox='strict' and this child lacks: " + ", ".join(sorted(set(missing)))
    return None


def _active(detail: str) -> bool:
    return detail.startswith(("active", "not needed", "worker"))


def _limit(kind: int, value: int, hard: int | None = None) -> None:
    try:
        resource.setrlimit(kind, (value, value if hard is None else hard))
    except (ValueError, OSError):
        _, current = resource.getrlimit(kind)
        if current != resource.RLIM_INFINITY and value > current:
            resource.setrlimit(kind, (current, current))


def _address_space() -> int:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    with contextlib.suppress(OSError):
        while view:
            written = os.write(fd, view)
            view = view[written:]


def _name_process(name: bytes) -> None:
    """Set the name ``ps`` and ``/proc/<pid>/comm`` show (at most 15 bytes)."""
    lib = namespaces.libc()
    if lib is not None:
        lib.prctl(_PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)


# ----------------------------------------------------------------------- the parse


def _parse(extractor: Any, request: dict[str, Any]) -> bytes:
    """Run the extractor on the request; the reply frame for whatever happened."""
    from dataclasses import replace

    from capsa.errors import ExtractionFailed, IngestionRejected
    from capsa.guard.elements import settle
    from capsa.guard.limits import ExtractionLimits
    from capsa.guard.normalize import normalize
    from capsa.guard.port import Parsed

    limits = ExtractionLimits.model_validate_json(request["limits"])
    try:
        configure = getattr(extractor, "with_limits", None)
        if configure is not None:
            extractor = configure(limits)
        raw = extractor.extract(request["kind"], request["media_type"], request["payload"],
                                max_pages=limits.max_pages)
        parsed = Parsed(raw) if isinstance(raw, str) else raw
        if not isinstance(parsed, Parsed) or not isinstance(parsed.text, str):
            return _failed("protocol", f"extractor returned {type(raw).__name__}, not str")
        text = normalize(parsed.text)
        if len(text) > limits.max_text_chars:
            return _rejected("text_too_long", "text",
                             f"extracted {len(text)} characters, over the limit of "
                             f"{limits.max_text_chars}; dropped whole, never truncated")
        elements, note = settle(parsed.elements, parsed.text, text, limits.max_elements)
        if note is not None:
            parsed = replace(parsed, notes=(*parsed.notes, note))
        return _answer(text, parsed, elements)
    except MemoryError:
        return _failed("memory_limit", f"ran out of its {limits.memory_bytes}-byte allowance "
                                       "(memory_bytes)")
    except RecursionError as exc:
        return _rejected("nested_too_deep", "parser",
                         f"the parser's recursion limit was reached: {exc}")
    except IngestionRejected as exc:
        return _rejected(exc.reason, exc.stage, exc.detail)
    except ExtractionFailed as exc:
        return _failed(exc.cause, exc.detail)


def _answer(text: str, parsed: Any, elements: Sequence[Element] = ()) -> bytes:
    """The reply for a parse that succeeded; embedded files travel as raw bytes."""
    from capsa.guard.elements import mail_to_wire, to_wire

    meta: dict[str, Any] = {"ok": True}
    if elements:
        meta["elements"] = to_wire(elements)
    if parsed.mail is not None:
        meta["mail"] = mail_to_wire(parsed.mail)
    if parsed.encoding is not None:
        meta["encoding"] = parsed.encoding
        meta["confidence"] = parsed.encoding_confidence
    if parsed.notes:
        meta["notes"] = [str(note)[:_DETAIL_CHARS] for note in parsed.notes]
    if parsed.embedded:
        meta["embedded"] = [{"name": item.name, "media_type": item.media_type,
                             "size": len(item.payload)} for item in parsed.embedded]
    return protocol.encode_reply(meta, text, [item.payload for item in parsed.embedded])


def _failed(cause: str, detail: str) -> bytes:
    return protocol.encode_reply({"failed": {"cause": cause, "detail": _bounded(detail)}}, "", [])


def _rejected(reason: str, stage: str, detail: str) -> bytes:
    return protocol.encode_reply(
        {"rejected": {"reason": reason, "stage": stage, "detail": _bounded(detail)}}, "", [])


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"
    except BaseException:  # noqa: BLE001 - an exception whose str() raises
        return type(exc).__name__


def _bounded(detail: object) -> str:
    """A detail that always fits the reply and names no scratch path.

    An error may quote megabytes of its input; capped here, in the child, it
    can never push the reply past its bounds and turn a refusal into a
    ``protocol`` failure.
    """
    from capsa.guard.normalize import clean_detail

    text = str(detail)[:_DETAIL_SCAN]
    scratch = tempfile.gettempdir()
    if scratch.count("/") > 1:  # this file's own directory, wherever the pool put it
        text = text.replace(scratch, "<scratch>").replace(os.path.dirname(scratch), "<scratch>")
    return clean_detail(text, limit=_DETAIL_CHARS)
