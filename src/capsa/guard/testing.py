"""Misbehaving extractors, for proving that isolation holds (Tika's mock-parser idea).

Run one through `IsolatedExtractor` and assert the typed outcome, then that the
next file on the same pool succeeds. They live in the package, not in the
test tree, because the worker's interpreter must be able to import them, and
because your own chaos tests may want them too.

Example:
    >>> from capsa.guard import IsolatedExtractor
    >>> with IsolatedExtractor(MisbehavingExtractor("echo")) as pool:
    ...     pool.extract("text", None, b"fine", max_pages=1)
    'fine'
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Literal

__all__ = ["Behaviour", "MisbehavingExtractor"]

Behaviour = Literal[
    "echo", "hang", "sleep", "allocate", "exit", "segfault", "sys_exit", "stdout_flood",
    "grandchild", "socket", "big_write", "env", "huge_result", "surrogate", "raise",
    "garbage",
]


class MisbehavingExtractor:
    """An extractor that does one bad thing, or echoes its payload when ``behaviour="echo"``.

    A payload starting with ``b"echo:"`` is always echoed, whatever the
    behaviour, so one pool can serve a hostile file and then a good one.
    """

    kinds = frozenset({"text", "markdown", "csv", "json"})

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour

    def extract(self, kind: str, media_type: str | None, payload: bytes, *, max_pages: int) -> str:
        """Misbehave as configured."""
        if payload.startswith(b"echo:") or self.behaviour == "echo":
            return payload.decode("utf-8", "replace")
        return _BEHAVIOURS[self.behaviour](payload)


def _hang(payload: bytes) -> str:
    while True:
        pass


def _sleep(payload: bytes) -> str:
    time.sleep(3600)
    return ""


def _allocate(payload: bytes) -> str:
    hoard = []
    while True:
        hoard.append(bytearray(64 * 1024 * 1024))


def _exit(payload: bytes) -> str:
    os._exit(3)


def _segfault(payload: bytes) -> str:
    ctypes.string_at(0)
    os.kill(os.getpid(), signal.SIGSEGV)
    return ""


def _sys_exit(payload: bytes) -> str:
    sys.exit(0)


def _stdout_flood(payload: bytes) -> str:
    chunk = "x" * (1 << 20)
    for _ in range(10):
        sys.stdout.write(chunk)
        os.write(1, chunk.encode())
        os.write(2, chunk.encode())
    return "after the flood"


def _grandchild(payload: bytes) -> str:
    subprocess.Popen(["sleep", "3600"])
    time.sleep(3600)
    return ""


def _socket(payload: bytes) -> str:
    with socket.create_connection(("127.0.0.1", 9), timeout=1):
        return "connected"


def _big_write(payload: bytes) -> str:
    with open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "capsa-big-write"), "wb") as f:
        for _ in range(200):
            f.write(b"\0" * (1 << 20))
    return "wrote"


def _env(payload: bytes) -> str:
    return "\n".join(f"{key}={value}" for key, value in sorted(os.environ.items()))


def _huge_result(payload: bytes) -> str:
    return "y" * 2_000_000


def _surrogate(payload: bytes) -> str:
    return "before \ud800 after"


def _raise(payload: bytes) -> str:
    raise KeyError("the parser tripped over its own feet")


def _garbage(payload: bytes) -> str:
    return 42  # type: ignore[return-value]


_BEHAVIOURS = {
    "hang": _hang, "sleep": _sleep, "allocate": _allocate, "exit": _exit,
    "segfault": _segfault, "sys_exit": _sys_exit, "stdout_flood": _stdout_flood,
    "grandchild": _grandchild, "socket": _socket, "big_write": _big_write, "env": _env,
    "huge_result": _huge_result, "surrogate": _surrogate, "raise": _raise,
    "garbage": _garbage,
}
