"""Misbehaving extractors, for proving that isolation holds (Tika's mock-parser idea).

Run one through `IsolatedExtractor` and assert the typed outcome, then that the
next file on the same pool succeeds. They live in the package, not in the
test tree, because the worker's interpreter must be able to import them, and
because your own chaos tests may want them too.

Examples:
    >>> from capsa.guard import IsolatedExtractor
    >>> with IsolatedExtractor(MisbehavingExtractor("echo")) as pool:
    ...     pool.extract("text", None, b"fine", max_pages=1)
    'fine'
"""

from __future__ import annotations

import contextlib
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
    "garbage", "nested_reply",
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


def _nested_reply(payload: bytes) -> str:
    # What a parser a crafted file has taken over can do: skip the protocol
    # writer and answer on the result pipe itself (the only pipe it holds),
    # with a well-formed frame whose JSON nests past any decoder's recursion.
    from capsa.guard.sandbox.protocol import reply_frame

    frame = reply_frame(b'{"ok": ' + b"[" * 20_000 + b"]" * 20_000 + b"}", b"", b"")
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{name}").startswith("pipe:"):
                os.write(int(name), frame)
    os._exit(0)


_BEHAVIOURS = {
    "hang": _hang, "sleep": _sleep, "allocate": _allocate, "exit": _exit,
    "segfault": _segfault, "sys_exit": _sys_exit, "stdout_flood": _stdout_flood,
    "grandchild": _grandchild, "socket": _socket, "big_write": _big_write, "env": _env,
    "huge_result": _huge_result, "surrogate": _surrogate, "raise": _raise,
    "garbage": _garbage, "nested_reply": _nested_reply,
}


# --- Seeded fault injection, for soak tests ------------------------------------------------
# Appended after the misbehaviours above, which it reuses; its imports sit here for that reason.

import hashlib  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:
    from capsa.guard.port import Parsed, TextExtractor

__all__ += ["FAULTS", "Fault", "FaultInjectingExtractor"]

Fault = Literal["hang", "crash", "segfault", "allocate", "raise", "garbage"]
"""What `FaultInjectingExtractor` can do instead of parsing."""

FAULTS: tuple[Fault, ...] = ("hang", "crash", "segfault", "allocate", "raise", "garbage")
"""Every fault, in the fixed order in which `FaultInjectingExtractor` draws them."""

_FAULT_BEHAVIOURS = {
    "hang": _hang, "crash": _exit, "segfault": _segfault, "allocate": _allocate,
    "raise": _raise, "garbage": _garbage,
}


class FaultInjectingExtractor:
    """Runs `inner`, except on a seeded share of payloads, where it misbehaves instead.

    Chaos for soak tests. Which fault a payload draws (or none) is a pure
    function of the payload's bytes and `seed`, never of time or order, so a
    run is reproducible, the parent can predict each file's fate with
    `fault_for` before the worker sees it, and a retry of the same bytes fails
    the same way. Faults: ``hang`` (a busy loop), ``crash`` (``os._exit``),
    ``segfault``, ``allocate`` (until the address-space limit), ``raise``
    (a `KeyError`) and ``garbage`` (returns an ``int``, not a ``str``).

    Args:
        inner: the extractor for payloads that draw no fault; None echoes them as UTF-8.
        seed: varies which payloads draw which fault.
        rates: probability of each fault per payload, e.g. ``{"crash": 0.01}``;
            at most 1 in total.

    Raises:
        ValueError: an unknown fault, a negative rate, or rates summing past 1.

    Examples:
        >>> FaultInjectingExtractor(seed=7, rates={"raise": 1.0}).fault_for(b"anything")
        'raise'
        >>> FaultInjectingExtractor(seed=7).extract("text", None, b"fine", max_pages=1)
        'fine'
    """

    def __init__(self, inner: TextExtractor | None = None, *, seed: int = 0,
                 rates: dict[str, float] | None = None) -> None:
        given = dict(rates or {})
        unknown = sorted(set(given) - set(FAULTS))
        if unknown:
            raise ValueError(f"unknown faults {unknown}; choose from {list(FAULTS)}")
        if any(rate < 0 for rate in given.values()) or sum(given.values()) > 1.0:
            raise ValueError("fault rates must be non-negative and sum to at most 1")
        self.inner = inner
        self.seed = seed
        self.rates: dict[str, float] = {fault: float(given.get(fault, 0.0)) for fault in FAULTS}
        self.kinds: frozenset[str] = frozenset(
            getattr(inner, "kinds", ()) if inner is not None else MisbehavingExtractor.kinds)

    def fault_for(self, payload: bytes) -> Fault | None:
        """The fault `extract` will inject for `payload`, or None when it will parse it."""
        digest = hashlib.sha256(self.seed.to_bytes(8, "big", signed=True) + payload).digest()
        draw = int.from_bytes(digest[:8], "big") / 2.0**64
        cumulative = 0.0
        for fault in FAULTS:
            cumulative += self.rates[fault]
            if draw < cumulative:
                return fault
        return None

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str | Parsed:
        """Misbehave if `payload` drew a fault; otherwise parse it with `inner`."""
        fault = self.fault_for(payload)
        if fault is not None:
            return _FAULT_BEHAVIOURS[fault](payload)
        if self.inner is None:
            return payload.decode("utf-8", "replace")
        return self.inner.extract(kind, media_type, payload, max_pages=max_pages)

    def with_limits(self, limits: object) -> FaultInjectingExtractor:
        """The same faults around ``inner.with_limits(limits)``, so per-call limits reach it."""
        configure = getattr(self.inner, "with_limits", None)
        inner = configure(limits) if configure is not None else self.inner
        return FaultInjectingExtractor(inner, seed=self.seed, rates=self.rates)

    def self_test(self) -> dict[str, str]:
        """The inner extractor's self-test; faults are never injected here."""
        test = getattr(self.inner, "self_test", None)
        return {str(k): str(v) for k, v in test().items()} if test is not None else {}
