"""`capsa.guard._worker`: the length-prefixed framing both ends of the pipe rely on.

The worker's behaviour under hostile parsers is exercised through the pool in
`test_isolation.py`; this file pins the frame format and how a dead child is named.
"""

from __future__ import annotations

import io
import signal

import pytest

from capsa.guard._worker import _signal_outcome, read_frame, write_frame


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
