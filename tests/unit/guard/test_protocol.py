"""`capsa.guard._worker`: the length-prefixed framing both ends of the pipe rely on.

The worker's behaviour under hostile parsers is exercised through the pool in
`test_isolation.py`; this file pins the frame format, how a dead child is named,
and how a child applies the call's limits and reports an error, in process.
"""

from __future__ import annotations

import io
import json
import os
import signal
import struct
import subprocess
import sys
import time
from typing import Any

import pytest
from capsa.guard._worker import (
    _collect,
    _describe,
    _run,
    _signal_outcome,
    read_frame,
    write_frame,
)

from capsa.guard import ExtractionLimits


def test_write_frame_prefixes_the_body_with_its_big_endian_length() -> None:
    stream = io.BytesIO()

    write_frame(stream, b"hello")

    assert stream.getvalue() == b"\x00\x00\x00\x05hello"


def test_read_frame_returns_frames_in_the_order_written() -> None:
    stream = io.BytesIO()
    for body in (b"one", b"", b"three" * 1000):
        write_frame(stream, body)
    stream.seek(0)

    assert [read_frame(stream) for _ in range(4)] == [b"one", b"", b"three" * 1000, None]


@pytest.mark.parametrize("wire", [b"", b"\x00\x00", b"\x00\x00\x00\x09short"])
def test_read_frame_returns_none_for_a_truncated_stream(wire: bytes) -> None:
    assert read_frame(io.BytesIO(wire)) is None


@pytest.mark.parametrize(
    ("signum", "cause", "words"),
    [
        (signal.SIGSEGV, "crashed", "signal SIGSEGV"),
        (signal.SIGKILL, "crashed", "signal SIGKILL"),
        (signal.SIGXCPU, "timeout", "CPU time limit"),
        (signal.SIGXFSZ, "crashed", "file-size limit"),
    ],
)
def test_signal_outcome_names_how_the_child_died(signum: int, cause: str, words: str) -> None:
    failed = _signal_outcome(signum)["failed"]

    assert failed["cause"] == cause
    assert words in failed["detail"]


def test_signal_outcome_reports_an_unknown_signal_by_number() -> None:
    assert "signal 200" in _signal_outcome(200)["failed"]["detail"]


class Configurable:
    """A trusted extractor that reports the limits it was configured with and the pages asked."""

    kinds = frozenset({"text"})

    def __init__(self, limits: ExtractionLimits | None = None) -> None:
        self.limits = limits

    def with_limits(self, limits: ExtractionLimits) -> Configurable:
        return Configurable(limits)

    def extract(self, kind: str, media_type: str | None, payload: bytes, *, max_pages: int) -> str:
        pixels = self.limits.max_pixels if self.limits is not None else None
        return f"max_pixels={pixels} max_pages={max_pages}"


def request(limits: ExtractionLimits) -> dict[str, Any]:
    return {"kind": "text", "media_type": None, "payload": b"x",
            "limits": limits.model_dump_json()}


def test_run_configures_the_extractor_with_the_limits_of_the_call() -> None:
    answer = _run(Configurable(), request(ExtractionLimits(max_pixels=123, max_pages=4)))

    assert answer == {"ok": "max_pixels=123 max_pages=4"}


def test_run_applies_the_text_ceiling_of_the_call() -> None:
    answer = _run(Configurable(), request(ExtractionLimits(max_text_chars=5)))

    assert answer["rejected"]["reason"] == "text_too_long"
    assert "over the limit of 5" in answer["rejected"]["detail"]


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this exception cannot describe itself")


def test_describe_names_an_exception_whose_str_raises_by_its_type() -> None:
    assert _describe(_Unprintable()) == "_Unprintable"


def test_describe_gives_type_and_message() -> None:
    assert _describe(KeyError("part")) == "KeyError: 'part'"


def _collected(*pieces: bytes, then_sleep: float = 0.0) -> dict[str, Any]:
    """`_collect` where the zygote runs it: in a process whose only child is the parse child.

    `_collect` kills and reaps every child of the process it runs in (the
    zygote is their subreaper), so run in the test process it would kill the
    runner's own children too: multiprocessing's resource tracker, a shared
    pool's workers. A forked stand-in zygote forks the writing child, collects
    it, and reports the result, whether it came before its deadline, and
    whether the child is gone.
    """
    report_r, report_w = os.pipe()
    zygote = os.fork()
    if zygote == 0:  # pragma: no cover - the stand-in zygote
        try:
            os.close(report_r)
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # the parse child: writes, lingers, exits
                os.close(read_fd)
                os.setpgid(0, 0)
                for piece in pieces:
                    os.write(write_fd, piece)
                time.sleep(then_sleep)
                os._exit(0)
            os.close(write_fd)
            deadline = time.monotonic() + 30
            result = _collect(pid, read_fd, deadline, max_bytes=1000)
            try:
                os.waitpid(pid, os.WNOHANG)
                reaped = False
            except ChildProcessError:
                reaped = True
            os.write(report_w, json.dumps({"result": result, "reaped": reaped,
                                           "in_time": time.monotonic() < deadline}).encode())
        finally:
            os._exit(0)
    os.close(report_w)
    with os.fdopen(report_r, "rb") as handle:
        report: dict[str, Any] = json.loads(handle.read())
    os.waitpid(zygote, 0)
    return report


def _result(body: bytes) -> bytes:
    return struct.pack(">Q", len(body)) + body


def test_collect_takes_a_complete_result_without_waiting_for_the_child_to_exit() -> None:
    report = _collected(_result(b'{"ok": "text"}'), then_sleep=60)

    assert report["result"] == {"ok": "text"}
    assert report["in_time"]  # it did not sit out the child's sleep
    assert report["reaped"]  # and the lingering child was killed and reaped


def test_collect_refuses_a_declared_length_over_the_limit_before_reading_it() -> None:
    report = _collected(struct.pack(">Q", 10**12))

    assert report["result"] == {"failed": {"cause": "protocol",
                                           "detail": "result exceeded 1000 bytes"}}


def test_collect_names_a_result_cut_short_by_the_childs_exit() -> None:
    report = _collected(_result(b'{"ok": "a long text"}')[:12])

    assert report["result"]["failed"]["cause"] == "protocol"
    assert "before its declared length" in report["result"]["failed"]["detail"]


def test_collect_reports_a_child_that_exits_without_a_word_as_crashed() -> None:
    report = _collected()

    assert report["result"]["failed"]["cause"] == "crashed"
    assert "no result" in report["result"]["failed"]["detail"]


def test_the_stand_in_zygote_leaves_the_test_processs_own_children_alone() -> None:
    # Run in the test process, `_collect` killed multiprocessing's resource
    # tracker, and a later test that started a pool failed on its warning.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _collected(_result(b'{"ok": "text"}'))
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()
