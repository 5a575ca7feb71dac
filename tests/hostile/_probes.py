"""Probe extractors for isolation properties `MisbehavingExtractor` does not cover.

They run inside the worker, so this module must be importable there: the
probe is pickled by reference to ``hostile._probes``, and the pool hands the
worker the test process's `sys.path`, to which `conftest.probes_importable`
adds the ``tests`` directory while a probe pool starts.

The payload picks the probe: ``b"probe:fresh_state"`` runs `_fresh_state`,
so one pool serves every probe; any other payload is echoed as text, so the
same pool also serves the good files around them.

Each file's child runs with ``TMPDIR`` set to its own directory under the
pool's scratch directory (which is also ``HOME``); the scratch probes look at
both.
"""

from __future__ import annotations

import _socket
import errno
import os
import signal
import socket
import time
from collections.abc import Callable
from typing import Any, Literal

Probe = Literal["raw_connect", "fresh_state", "write_scratch", "list_scratch", "list_home",
                "write_then_kill_worker", "write_until_refused", "raise_surrogate",
                "raise_escape", "broken_str", "setsid_daemon", "setsid_daemon_chain",
                "raise_huge", "raise_scratch_path", "gc_frozen", "open_fds"]

LEFT_BEHIND = "capsa-probe-left-behind.txt"
"""The file the writing probes leave in their scratch directory."""

_CALLS = [0]
"""Module state a reused process would carry from one file to the next."""


def probe_payload(probe: Probe) -> bytes:
    """The payload that makes `ProbeExtractor` run `probe`."""
    return f"probe:{probe}".encode()


class ProbeExtractor:
    """Does one observable thing in the parse child and reports it as text."""

    kinds = frozenset({"text", "markdown", "csv", "json"})

    def extract(self, kind: str, media_type: str | None, payload: bytes, *, max_pages: int) -> str:
        """Run the probe the payload names, or echo the payload."""
        if payload.startswith(b"probe:"):
            return _PROBES[payload[len(b"probe:"):].decode()](payload)
        return payload.decode("utf-8", "replace")


def _raw_connect(payload: bytes) -> str:
    # `_socket.socket` is the C type under `socket.socket`: it bypasses any
    # Python-level refusal, so only the kernel (a network namespace) can stop it.
    try:
        raw = _socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    except OSError as exc:  # seccomp refuses the socket itself
        return f"errno={errno.errorcode.get(exc.errno or 0, exc.errno)}"
    try:
        raw.settimeout(1.0)
        raw.connect(("127.0.0.1", 9))
        return "connected"
    except OSError as exc:
        return f"errno={errno.errorcode.get(exc.errno or 0, exc.errno)}"
    finally:
        raw.close()


def _fresh_state(payload: bytes) -> str:
    _CALLS[0] += 1
    return f"pid={os.getpid()} calls={_CALLS[0]}"


def _scratch() -> str:
    return os.environ.get("TMPDIR", "/tmp")


def _write_scratch(payload: bytes) -> str:
    with open(os.path.join(_scratch(), LEFT_BEHIND), "wb") as handle:
        handle.write(payload)
    return f"wrote a file into {_scratch()}"


def _open_fds(payload: bytes) -> str:
    # One line per descriptor: its number and what it points at, from the
    # kernel's own table, so nothing Python-level can hide one.
    lines = []
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            lines.append(f"{name} {os.readlink(f'/proc/self/fd/{name}')}")
        except OSError:  # the descriptor listdir itself used, closed since
            continue
    return "\n".join(lines)


def _gc_frozen(payload: bytes) -> str:
    import gc

    return f"{gc.get_freeze_count()} objects frozen"


def _list_scratch(payload: bytes) -> str:
    return f"scratch {_scratch()} holds: " + " ".join(sorted(os.listdir(_scratch())))


def _list_home(payload: bytes) -> str:
    # The worker's scratch directory, the parent of every file's own one (a
    # sandboxed child may not even list it; the tests that use this probe
    # run without the sandbox, to see what the clean-up alone achieves).
    home = os.path.dirname(os.environ["TMPDIR"])
    found = sorted(os.path.relpath(os.path.join(root, name), home)
                   for root, _, names in os.walk(home) for name in names)
    return "home holds: " + " ".join(found)


def _write_then_kill_worker(payload: bytes) -> str:
    _write_scratch(payload)
    os.kill(os.getppid(), signal.SIGKILL)  # the zygote dies before it can clean up
    time.sleep(60)  # PR_SET_PDEATHSIG ends this child with its zygote
    return "the worker survived"


def _write_until_refused(payload: bytes) -> str:
    path = os.path.join(_scratch(), "capsa-probe-big-write")
    try:
        with open(path, "wb") as handle:
            for _ in range(256):
                handle.write(bytes(1 << 20))
                handle.flush()
    except OSError as exc:
        refusal = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    else:
        refusal = "none"
    return f"wrote {os.path.getsize(path)} bytes into {_scratch()}, then {refusal}"


def _raise_surrogate(payload: bytes) -> str:
    raise ValueError("header byte \udcff could not be decoded")


def _raise_escape(payload: bytes) -> str:
    raise ValueError("\x1b[2J\x1b]8;;https://evil.example\x07click here\x1b]8;;\x07")


def _raise_huge(payload: bytes) -> str:
    # An error quoting eight megabytes of its input: bigger than any reply frame.
    raise ValueError("cannot parse " + "\ufdfa" * (8 << 20))


def _raise_scratch_path(payload: bytes) -> str:
    path = os.path.join(_scratch(), "missing", "part.xml")
    with open(path, "rb") as handle:  # FileNotFoundError, quoting the scratch path
        return handle.read().decode()


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this exception cannot describe itself")


def _broken_str(payload: bytes) -> str:
    raise _Unprintable()


def _setsid_daemon(payload: bytes) -> str:
    return _daemons(chained=False)


def _setsid_daemon_chain(payload: bytes) -> str:
    return _daemons(chained=True)


def _daemons(*, chained: bool) -> str:
    """Fork a grandchild that leaves the process group (and, if `chained`, forks a child of
    its own); return once every one of them is in place, so they are there to be killed."""
    ready, signal_ready = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready)
            os.setsid()
            if chained:
                os.fork()  # from here on, the grandchild and its own child both run this
            os.write(signal_ready, b"+")
            os.close(signal_ready)
            time.sleep(60)
        finally:
            os._exit(0)
    os.close(signal_ready)
    expected = 2 if chained else 1
    seen = b""
    while len(seen) < expected:
        chunk = os.read(ready, expected)
        if not chunk:
            break
        seen += chunk
    os.close(ready)
    return f"{len(seen)} of {expected} daemons from pid={pid} in place"


_PROBES: dict[str, Callable[[bytes], str]] = {
    "raw_connect": _raw_connect, "fresh_state": _fresh_state, "open_fds": _open_fds,
    "write_scratch": _write_scratch, "list_scratch": _list_scratch, "list_home": _list_home,
    "write_then_kill_worker": _write_then_kill_worker,
    "write_until_refused": _write_until_refused,
    "raise_surrogate": _raise_surrogate, "raise_escape": _raise_escape,
    "gc_frozen": _gc_frozen, "broken_str": _broken_str, "setsid_daemon": _setsid_daemon,
    "setsid_daemon_chain": _setsid_daemon_chain, "raise_huge": _raise_huge,
    "raise_scratch_path": _raise_scratch_path,
}


class OrphanedAtForkExtractor:
    """Its zygote dies the instant it forks a file's child, before the child runs any capsa code.

    Unpickled in the zygote, it registers an `os.register_at_fork` hook there.
    The hook runs first thing in every forked child: it leaves the zygote's
    process group (so killing that group cannot reach it), kills the zygote,
    and waits until it is orphaned. The child then carries on with its own
    start-up, arming `PR_SET_PDEATHSIG` after its parent is already gone, and
    `extract` sleeps. A child that does not notice it was orphaned outlives
    its file. Only one pool may use it: the hook stays for the zygote's life.
    """

    kinds = frozenset({"text"})

    def __getstate__(self) -> dict[str, Any]:
        return {"armed": True}

    def __setstate__(self, state: dict[str, Any]) -> None:
        if state.get("armed"):  # only in the zygote, which is the one that unpickles it
            os.register_at_fork(after_in_child=_orphan_self)

    def extract(self, kind: str, media_type: str | None, payload: bytes, *, max_pages: int) -> str:
        """Outlive the file if nothing stops this child."""
        time.sleep(60)
        return "the orphan ran to the end"


def _orphan_self() -> None:
    zygote = os.getppid()
    os.setpgid(0, 0)
    os.kill(zygote, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while os.getppid() == zygote and time.monotonic() < deadline:
        time.sleep(0.001)
